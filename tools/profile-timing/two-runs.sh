#!/usr/bin/env bash
# One device call: the full default profile twice, adaptive (the default) then with
# --fixed-reps, each timed by the wall clock, then compare.py's table. Also the independent MPS
# reading (tools/pcie-check/mps.py) beside `detect`, for the PCIe settings check.
#
# usage: two-runs.sh HWCEILING OUT
set -u
here=$(cd "$(dirname "$0")" && pwd)
hwc=$(realpath "${1:?usage: two-runs.sh HWCEILING OUT}")
out=${2:?usage: two-runs.sh HWCEILING OUT}
mkdir -p "$out"
{ date; nvidia-smi -L; uname -r; } >"$out/machine.txt" 2>&1
python3 "$here/../pcie-check/mps.py" >"$out/mps.txt" 2>&1
"$hwc" detect >"$out/detect.txt" 2>&1
for mode in adaptive fixed; do
  flag=()
  [[ $mode == fixed ]] && flag=(--fixed-reps)
  t0=$(date +%s.%N)
  "$hwc" profile "${flag[@]}" -o "$out/$mode" >"$out/$mode.log" 2>&1
  echo "$mode: rc=$? wall $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)") s" | tee -a "$out/machine.txt"
done
python3 "$here/compare.py" "$out"/adaptive/hardware_raw_*.json "$out"/fixed/hardware_raw_*.json \
  adaptive fixed >"$out/compare.md" 2>&1
for mode in adaptive fixed; do
  for f in "$out/$mode"/hardware-ceiling-*.md; do
    echo "$mode report: $(wc -c <"$f") bytes" | tee -a "$out/machine.txt"
  done
done
head -6 "$out/compare.md"
tail -2 "$out/compare.md"
# One file back: every run's report, profile and raw record.
tar czf "$out/runs.tgz" -C "$out" adaptive fixed && rm -rf "$out/adaptive" "$out/fixed"
