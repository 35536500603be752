#!/usr/bin/env bash
# One device call for the evidence the profile-time, report and XXH3 checks ask for, in about seven
# minutes on a one-GPU machine: the XXH3 figures beside `xxhsum -b` (tools/xxh3-reference),
# three full profiles, adaptive and twice --fixed-reps, with their comparisons (the second
# fixed run against the first is the baseline drift) and report sizes, the
# independent MPS reading (two-runs.sh), and the pinned H2D/D2H copies beside plain CUDA
# (tools/gpu-reference, sizes taking turns, 2 rounds). Leaves two files in OUT: summary.txt
# (every table) and evidence.tgz (every run's files).
#
# usage: [XXH3=no] [GPU_SIZES=1M,4M,64M,256M] [RUNS=...] evidence.sh HWCEILING CUDA_BW XXHSUM OUT
# (XXH3=no leaves out the XXH3 compare; RUNS is two-runs.sh's)
set -u
here=$(cd "$(dirname "$0")" && pwd)
tools=$(cd "$here/.." && pwd)
hwc=$(realpath "${1:?usage: evidence.sh HWCEILING CUDA_BW XXHSUM OUT}")
cuda_bw=$(realpath "${2:?usage: evidence.sh HWCEILING CUDA_BW XXHSUM OUT}")
xxhsum=$(realpath "${3:?usage: evidence.sh HWCEILING CUDA_BW XXHSUM OUT}")
out=${4:?usage: evidence.sh HWCEILING CUDA_BW XXHSUM OUT}
# Each step's output is added to summary.txt as soon as it ends, and the steps work in OUT/work, so
# a call cut short still brings back what had finished.
work=$out/work
mkdir -p "$work"
summary=$out/summary.txt
: >"$summary"
add() {
  for f in "$@"; do
    echo "== $f"
    cat "$work/$f" 2>/dev/null
  done >>"$summary"
}
{ date; nvidia-smi -L; lscpu | grep -E "Model name|L3|NUMA node\(s\)|^CPU\(s\)"; uptime; } >"$work/machine.txt" 2>&1
add machine.txt
if [ "${XXH3:-yes}" != no ]; then
  ROUNDS=3 timeout 120 "$tools/xxh3-reference/compare.sh" "$hwc" "$xxhsum" "$work/xxh3" >"$work/xxh3.txt" 2>&1
  echo "xxh3 compare: rc=$?" >>"$work/xxh3.txt"
  add xxh3.txt
fi
timeout 300 bash "$here/two-runs.sh" "$hwc" "$work/two" >"$work/two.txt" 2>&1
add two/machine.txt two/mps.txt two/detect.txt two.txt
{
  echo "== two/compare.md (head)"
  head -10 "$work/two/compare.md" 2>/dev/null
  echo "== two/baseline.md (head)"
  head -8 "$work/two/baseline.md" 2>/dev/null
} >>"$summary"
BLOCK=size STEADY=yes TESTS=h2d,d2h SIZES=${GPU_SIZES:-1M,4M,64M,256M} REF_CONNECTIONS=32 EXTRA=0 timeout 150 \
  bash "$tools/gpu-reference/compare.sh" "$cuda_bw" 2 "$work/gpu" >"$work/gpu.txt" 2>&1
echo "gpu compare: rc=$?" >>"$work/gpu.txt"
add gpu.txt
tar czf "$out/evidence.tgz" -C "$work" . && rm -rf "$work"
cat "$summary"
