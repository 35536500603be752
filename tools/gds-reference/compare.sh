#!/usr/bin/env bash
# Side by side on one file, in rounds: hwceiling's cufile engine (`profile --paths gds --target`,
# both routes), RAPIDS kvikio's cuFile reads (kvikio_read.py) and a plain pread + cudaMemcpy
# loop (posix_bounce.cu); who goes first rotates by round, and the page cache is dropped before
# each tool where the machine allows it (every tool reads with O_DIRECT regardless). Then
# ratio.py's table.
#
# usage: compare.sh HWCEILING FILE [ROUNDS] [OUT]
# env:   FILE_GIB (4: the file is written with this many GiB of a repeating random MiB when it
#        is missing or smaller), BYTES (2147483648 per repetition), REPS (5), SIZES (4,16 MiB),
#        DEPTHS (16,32), WHEELS (a folder of kvikio wheels to install under OUT first),
#        NVCC_ARCH (-arch=native)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hwc=$(realpath "${1:?usage: compare.sh HWCEILING FILE [ROUNDS] [OUT]}")
file=${2:?usage: compare.sh HWCEILING FILE [ROUNDS] [OUT]}
rounds=${3:-2}
out=${4:-$PWD/gds-compare}
bytes=${BYTES:-2147483648} reps=${REPS:-5} sizes=${SIZES:-4,16} depths=${DEPTHS:-16,32}
mkdir -p "$out"
want=$(( ${FILE_GIB:-4} << 30 ))
if [[ ! -f "$file" ]] || (( $(stat -c %s "$file") < want )); then
  python3 - "$file" "$want" <<'PY'
import os, sys
path, n = sys.argv[1], int(sys.argv[2])
mib = os.urandom(1 << 20)
with open(path, "wb") as f:
    for _ in range(n >> 20):
        f.write(mib)
    f.flush(); os.fsync(f.fileno())
PY
  sync
fi
# One untimed O_DIRECT pass, so that whichever tool goes first does not meet the disk still busy
# with the file's writes.
dd if="$file" of=/dev/null bs=16M iflag=direct status=none
# libcufile reads the filesystem's type from the udev database; a machine without udevd has
# none (error 5027). Write the entry only where it is missing and no udevd runs, and say so.
majmin=$(stat -c '%Hd:%Ld' "$file")
fstype=$(findmnt -no FSTYPE -T "$file")
udev=/run/udev/data/b$majmin
if [[ ! -e "$udev" ]] && ! pgrep -x systemd-udevd >/dev/null && ! pgrep -x udevd >/dev/null; then
  mkdir -p /run/udev/data
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$fstype" >"$udev"
  echo "no udevd: wrote $udev ($fstype)" | tee -a "$out/machine.txt"
fi
if [[ -n "${WHEELS:-}" ]]; then
  py=$(mktemp -d)
  python3 -m pip install -q --no-deps --target "$py" "$WHEELS"/*.whl
  export PYTHONPATH=$py${PYTHONPATH:+:$PYTHONPATH}
fi
ref=$out/posix_bounce
nvcc -O2 -std=c++17 ${NVCC_ARCH:--arch=native} -o "$ref" "$here/posix_bounce.cu"
{
  nvidia-smi --query-gpu=name,pci.bus_id,driver_version --format=csv,noheader
  echo "file $file: $(stat -c %s "$file") bytes on $fstype ($majmin)"
  python3 --version
  grep -h '"allow_compat_mode"' /etc/cufile.json 2>/dev/null || true
  ls /proc/driver/nvidia-fs 2>/dev/null || echo "no nvidia-fs"
} >>"$out/machine.txt" 2>&1
drop() { sync; if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then echo dropped; else echo "not dropped"; fi; }
run_hwc() {
  local s
  s=$(sed 's/\([0-9]\+\)/\1MiB/g' <<<"$sizes")
  "$hwc" profile --paths gds --target "$file" --nvme-bytes "$bytes" --nvme-sizes "$s" \
    --queue-depths "$depths" -o "$out/hwc-r$1" >"$out/hwc-r$1.log" 2>&1
}
run_kvikio() {
  python3 "$here/kvikio_read.py" "$file" "$bytes" "$reps" "$sizes" "$depths" \
    >>"$out/kvikio.csv" 2>>"$out/kvikio.log"
}
run_ref() {
  for s in ${sizes//,/ }; do
    for q in ${depths//,/ }; do
      "$ref" "$file" $((s << 20)) "$q" "$bytes" "$reps" >>"$out/ref.csv"
    done
  done
}
tools=(hwc kvikio ref)
for ((r = 1; r <= rounds; r++)); do
  for ((i = 0; i < 3; i++)); do
    t=${tools[$(((i + r - 1) % 3))]}
    echo "round $r: $t (page cache $(drop))" | tee -a "$out/order.txt"
    "run_$t" "$r"
  done
done
python3 "$here/ratio.py" "$out" | tee "$out/table.md"
