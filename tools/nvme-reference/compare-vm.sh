#!/usr/bin/env bash
# hwceiling against fio on an emulated NVMe drive of the VM test bed (tools/vm/): inside the
# guest, on the blank drive HWCN0A, 5 interleaved rounds (alternating which goes first) of fio (`--ioengine=io_uring --direct=1
# --fixedbufs`, 5 loops over the 64 MiB drive: 320 MiB, on the CPUs of the drive's NUMA node
# where hwceiling pins its I/O thread: with one vCPU per node that matters under TCG) and hwceiling (median of 5 timed
# repetitions of 320 MiB after 1 warm-up) at 128 KiB and 1 MiB, QD 16 and 32. Under software
# emulation the numbers are QEMU's speed, not a drive's: only the ratio means something.
#
# Usage: tools/nvme-reference/compare-vm.sh [HWCEILING_BINARY]   (default: a release build)
# Needs fio on this machine (apt-get install -y fio): it is copied into the guest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${1:-}"
if [[ -z "$bin" ]]; then
  (cd "$repo" && cargo build --release -q -p hwceiling)
  bin="$repo/target/release/hwceiling"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
HWC_VM_MODE=compare "$repo/tools/vm/run.sh" "$bin" "$out" >/dev/null
python3 - "$out/results/compare.txt" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tool, _round, bs, qd, value = line.split()
    gbps = float(value) * 1024 / 1e9 if tool == "fio" else float(value)
    runs[(bs, int(qd), tool)].append(gbps)
print("target: emulated NVMe drive HWCN0A in the QEMU test bed (TCG), 64 MiB; 320 MiB per pass")
print(f"{'size':<6} {'qd':<4} {'hwceiling GB/s':>14} {'fio GB/s':>10} {'ratio':>8}")
for bs in ("128K", "1M"):
    for qd in (16, 32):
        h, f = runs[(bs, qd, "hwceiling")], runs[(bs, qd, "fio")]
        hm, fm = statistics.median(h), statistics.median(f)
        print(f"{bs:<6} {qd:<4} {hm:14.3f} {fm:10.3f} {hm / fm * 100:7.1f}%   (hwceiling {h}, fio {f})")
PY
