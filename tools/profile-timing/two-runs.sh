#!/usr/bin/env bash
# One device call: the full default profile three times, adaptive (the default), then twice with
# --fixed-reps, each timed by the wall clock, then compare.py's tables: adaptive against fixed,
# and the second fixed run against the first, the drift two runs of the same count show on this
# machine (a figure "moved beyond its spread" means something only beside that baseline). Also
# the independent MPS reading (tools/pcie-check/mps.py) beside `detect`, for the PCIe settings
# check.
#
# usage: [RUNS="adaptive fixed"] two-runs.sh HWCEILING OUT  (RUNS: which of the three to run)
set -u
here=$(cd "$(dirname "$0")" && pwd)
hwc=$(realpath "${1:?usage: two-runs.sh HWCEILING OUT}")
out=${2:?usage: two-runs.sh HWCEILING OUT}
mkdir -p "$out"
{ date; nvidia-smi -L; uname -r; } >"$out/machine.txt" 2>&1
python3 "$here/../pcie-check/mps.py" >"$out/mps.txt" 2>&1
"$hwc" detect >"$out/detect.txt" 2>&1
for mode in ${RUNS:-adaptive fixed fixed2}; do
  flag=()
  [[ $mode == fixed* ]] && flag=(--fixed-reps)
  t0=$(date +%s.%N)
  "$hwc" profile "${flag[@]}" -o "$out/$mode" >"$out/$mode.log" 2>&1
  echo "$mode: rc=$? wall $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)") s" | tee -a "$out/machine.txt"
done
[ -d "$out/adaptive" ] && [ -d "$out/fixed" ] && python3 "$here/compare.py" \
  "$out"/adaptive/hardware_raw_*.json "$out"/fixed/hardware_raw_*.json adaptive fixed >"$out/compare.md" 2>&1
[ -d "$out/fixed2" ] && python3 "$here/compare.py" "$out"/fixed2/hardware_raw_*.json \
  "$out"/fixed/hardware_raw_*.json fixed2 fixed >"$out/baseline.md" 2>&1
for mode in adaptive fixed; do
  [ -d "$out/$mode" ] || continue
  for f in "$out/$mode"/hardware-ceiling-*.md; do
    echo "$mode report: $(wc -c <"$f") bytes" | tee -a "$out/machine.txt"
  done
done
grep -E "^(wall|adaptive:|fixed:|figures in both|medians that moved)" "$out/compare.md" 2>/dev/null
echo "baseline (fixed2 against fixed):"
grep -E "^(figures in both|medians that moved)" "$out/baseline.md" 2>/dev/null
# One file back: every run's report, profile and raw record.
tar czf "$out/runs.tgz" -C "$out" ${RUNS:-adaptive fixed fixed2} && rm -rf "$out/adaptive" "$out/fixed" "$out/fixed2"
