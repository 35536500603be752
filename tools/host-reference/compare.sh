#!/usr/bin/env bash
# Host RAM copies, hwceiling against the STREAM-style reference, in one run, interleaved:
# for each thread count, reference then hwceiling (memcpy and streaming kernels) then the
# reference again, same size; the ratio takes hwceiling's better kernel.
# Usage: tools/host-reference/compare.sh [HWCEILING_BINARY] [SIZE_BYTES] [THREADS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-target/release/hwceiling}
size=${2:-1073741824}
shift $(( $# > 2 ? 2 : $# )) || true
threads=("$@")
if [ ${#threads[@]} -eq 0 ]; then
  n=$(nproc); t=1; threads=()
  while [ "$t" -lt "$n" ]; do threads+=("$t"); t=$((t * 2)); done
  threads+=("$n")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O3 -march=native -fopenmp "$here/stream_copy.c" -o "$work/stream_copy"

ref() { OMP_NUM_THREADS=$1 OMP_PROC_BIND=spread OMP_PLACES=cores "$work/stream_copy" "$size" 20 |
        sed -E 's/.*median_gbps=([0-9.]+).*/\1/'; }
ours() {
  local out="$work/run-$1-$RANDOM"
  "$bin" profile -o "$out" --paths host_ram --host-sizes "${size}" --threads "$1" --allow-contended >/dev/null
  python3 - "$out" <<'PY'
import json, glob, sys
rec = json.load(open(glob.glob(sys.argv[1] + "/hardware_raw_*.json")[0]))
by = {}
for r in rec["results"]:
    m = r.get("measurement")
    if m:
        by[m["params"].get("copy_kernel") or "memcpy"] = m["gbps"]["median"]
print("%.3f %s" % (by.get("memcpy", float("nan")), "%.3f" % by["streaming"] if "streaming" in by else "-"))
PY
}

printf "%-8s %12s %12s %12s %12s %8s\n" threads ref_before_gbps memcpy_gbps streaming_gbps ref_after_gbps ratio
best_ref=0; best_ours=0
for t in "${threads[@]}"; do
  a=$(ref "$t"); read -r m n < <(ours "$t"); b=$(ref "$t")
  o=$(python3 -c "print(max(x for x in [$m, float('$n' if '$n' != '-' else 'nan')] if x == x))")
  r=$(python3 -c "print('%.3f' % ($o / max($a, $b)))")
  printf "%-8s %12s %12s %12s %12s %8s\n" "$t" "$a" "$m" "$n" "$b" "$r"
  best_ref=$(python3 -c "print(max($best_ref, $a, $b))")
  best_ours=$(python3 -c "print(max($best_ours, $o))")
done
python3 -c "print('best: reference %.2f GB/s, hwceiling %.2f GB/s, ratio %.3f' % ($best_ref, $best_ours, $best_ours / $best_ref))"
