#!/usr/bin/env bash
# hwceiling's O_DIRECT sequential read against fio's (`--ioengine=io_uring --direct=1
# --fixedbufs`), side by side on one target, interleaved round by round so both see the same
# machine state. Block sizes 128 KiB and 1 MiB, QD 16 and 32, the same bytes per pass.
#
# Usage:
#   tools/nvme-reference/compare.sh [--loop] [--fio-hugepages] [--rounds N] [--bytes SIZE]
#                                   [--bin HWCEILING] TARGET
# TARGET is a regular file (created with fio's layout pass when it does not exist, removed at the
# end) or a block device (read only). --loop puts a loop device (direct I/O) over the file and
# measures that. Needs fio (Debian: apt-get install -y fio) and python3 (to read JSON/YAML).
# --fio-hugepages also runs fio with its buffers in 2 MiB huge pages (`--mem=mmaphuge`; the
# script reserves 64 hugetlb pages for the run and restores the previous count), the closest
# match to hwceiling's transparent-huge-page buffers.
# Prints one row per (size, QD): medians over the rounds and hwceiling / fio.
set -euo pipefail
rounds=3
bytes=2G
bin=""
loop=0
huge=0
while [[ $# -gt 1 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --loop) loop=1; shift ;;
    --fio-hugepages) huge=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
target="$1"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
if [[ -z "$bin" ]]; then
  (cd "$repo" && cargo build --release -q -p hwceiling)
  bin="$repo/target/release/hwceiling"
fi
command -v fio >/dev/null || { echo "fio is not installed (apt-get install -y fio)" >&2; exit 1; }
work="$(mktemp -d)"
created=0
loopdev=""
hugepages_before="$(cat /proc/sys/vm/nr_hugepages)"
cleanup() {
  [[ $huge -eq 1 ]] && echo "$hugepages_before" >/proc/sys/vm/nr_hugepages
  [[ -n "$loopdev" ]] && losetup -d "$loopdev" 2>/dev/null || true
  [[ $created -eq 1 ]] && rm -f "$target"
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
if [[ ! -e "$target" ]]; then
  fio --name=layout --filename="$target" --size="$bytes" --rw=write --bs=1M --direct=1 \
    --ioengine=io_uring --output-format=terse >/dev/null
  created=1
fi
measured="$target"
kind="regular file"
if [[ -b "$target" ]]; then kind="block device"; fi
if [[ $loop -eq 1 ]]; then
  loopdev="$(losetup -f --show --direct-io=on --read-only "$target")"
  measured="$loopdev"
  kind="loop device (direct I/O, read-only) over a file"
fi
size_bytes() { python3 -c "import sys;u={'K':1<<10,'M':1<<20,'G':1<<30};s=sys.argv[1];print(int(s[:-1])*u[s[-1]] if s[-1] in u else int(s))" "$1"; }
nbytes="$(size_bytes "$bytes")"

if [[ $huge -eq 1 ]]; then
  echo $((hugepages_before + 64)) >/proc/sys/vm/nr_hugepages
fi
fio_gbps() { # bs qd [fio options]
  local bs="$1" qd="$2"
  shift 2
  fio --name=ref "$@" --filename="$measured" --readonly --rw=read --bs="$bs" --iodepth="$qd" \
    --ioengine=io_uring --direct=1 --fixedbufs --size="$nbytes" --loops=5 \
    --output-format=json 2>/dev/null |
    python3 -c "import json,sys;print(json.load(sys.stdin)['jobs'][0]['read']['bw_bytes']/1e9)"
}
hwc_gbps() { # bs qd
  local out="$work/hwc-$RANDOM"
  "$bin" profile --paths nvme_read --target "$measured" --nvme-sizes "$1" --queue-depths "$2" \
    --nvme-bytes "$nbytes" -o "$out" >/dev/null
  python3 - "$out" <<'PY'
import glob, re, sys
text = open(glob.glob(sys.argv[1] + "/hardware_profile_*.yaml")[0]).read()
m = re.search(r"key: nvme_read/target/.*?\n(?:.*\n)*?\s+median: ([0-9.e+-]+)", text)
print(m.group(1))
PY
}

echo "target: $measured ($kind), $nbytes bytes per pass, $rounds interleaved rounds"
echo "hwceiling: median of 5 timed passes after 1 warm-up (and 1 cold); fio: 5 loops, --fixedbufs"
declare -A H F FH
for r in $(seq 1 "$rounds"); do
  for bs in 128K 1M; do
    for qd in 16 32; do
      F[$bs,$qd]+="$(fio_gbps "$bs" "$qd") "
      H[$bs,$qd]+="$(hwc_gbps "${bs}iB" "$qd") "
      if [[ $huge -eq 1 ]]; then
        FH[$bs,$qd]+="$(fio_gbps "$bs" "$qd" --mem=mmaphuge --hugepage-size=2m) "
      fi
    done
  done
done
row() { # label bs qd hwceiling-samples fio-samples
  python3 - "$@" <<'PY'
import statistics, sys
label, bs, qd = sys.argv[1:4]
h, f = ([float(x) for x in a.split()] for a in sys.argv[4:6])
hm, fm = statistics.median(h), statistics.median(f)
print(f"{label:<16} {bs:<6} {qd:<4} {hm:14.3f} {fm:10.3f} {hm / fm * 100:7.1f}%   (hwceiling {h}, fio {f})")
PY
}
printf '%-16s %-6s %-4s %14s %10s %8s\n' fio size qd "hwceiling GB/s" "fio GB/s" ratio
for bs in 128K 1M; do
  for qd in 16 32; do
    row "malloc buffers" "$bs" "$qd" "${H[$bs,$qd]}" "${F[$bs,$qd]}"
    if [[ $huge -eq 1 ]]; then
      row "hugetlb buffers" "$bs" "$qd" "${H[$bs,$qd]}" "${FH[$bs,$qd]}"
    fi
  done
done
