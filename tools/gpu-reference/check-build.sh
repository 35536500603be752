#!/usr/bin/env bash
# Compile ref_bw.cu, duplex_recipes.cu and spells.cu here, without a GPU or a CUDA install, so that CI
# catches a plain-CUDA tool that no longer builds before a session spends device time on it.
# nvcc and the CUDA headers come from NVIDIA's Python wheels (pinned below), unpacked with
# Python's zipfile into $HWC_NVCC_CACHE (default: target/nvcc); nothing is installed.
#
# Usage: tools/gpu-reference/check-build.sh
# Exit status: 0 all built; 1 the wheels could not be fetched (nothing was checked);
#              2 a tool did not compile.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${HWC_NVCC_CACHE:-$repo/target/nvcc}"
top="$cache/nvidia/cu13"
wheels=(nvidia-cuda-nvcc==13.5.37 nvidia-nvvm==13.5.37 nvidia-cuda-runtime==13.5.37
  nvidia-cuda-crt==13.5.37 nvidia-cuda-cccl==13.3.5.0.6)
if [[ ! -x "$top/bin/nvcc" || ! -f "$cache/ready" ]]; then
  mkdir -p "$cache/wheels"
  if ! python3 -m pip download --no-deps -q -d "$cache/wheels" "${wheels[@]}" >&2; then
    echo "check-build: could not fetch the nvcc wheels (${wheels[*]})" >&2
    exit 1
  fi
  for w in "$cache"/wheels/*.whl; do
    python3 -m zipfile -e "$w" "$cache"
  done
  chmod +x "$top"/bin/* "$top"/nvvm/bin/*
  touch "$cache/ready"
fi
out="$cache/build"
mkdir -p "$out"
status=0
for tool in ref_bw duplex_recipes spells; do
  if PATH="$top/bin:$PATH" nvcc -O2 -std=c++17 -arch=sm_90 -Xcompiler -Wall,-Wextra \
    -o "$out/$tool" "$here/$tool.cu" >&2; then
    echo "check-build: $tool.cu compiles (nvcc $(PATH="$top/bin:$PATH" nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_90)"
  else
    echo "check-build: $tool.cu does not compile" >&2
    status=2
  fi
done
exit "$status"
