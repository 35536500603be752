#!/usr/bin/env bash
# Side by side, in one run: hwceiling's CUDA backend (the `cuda_bw` example of
# crates/bench-cuda, which drives the backend through the runner) and ref_bw.cu, an independent
# plain-CUDA reference, interleaved round by round (the order alternates each round), then a
# ratio table (ratio_table.py).
#
# usage: compare.sh CUDA_BW_BINARY [ROUNDS] [OUT_DIR]
# env:   SIZES (default 128K,...,256M), REPS (15), NVCC_ARCH (-arch=native),
#        TESTS (h2d,d2h,duplex,d2d), EXTRA (1: also the 4-stream and pageable rows; 0: not),
#        STEADY (no: cuda_bw times each case once, as ref_bw does; yes: as `hwceiling profile`,
#        it times pinned H2D/D2H/duplex copies of 4 MiB or more again when they spread over 1 %),
#        REF_CONNECTIONS (CUDA_DEVICE_MAX_CONNECTIONS for ref_bw; default: as this shell has it,
#        normally unset, i.e. the driver's 8, as a plain CUDA program runs. cuda_bw, like
#        `hwceiling profile`, asks for 32 unless the variable is set: REF_CONNECTIONS=32
#        compares like for like)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hwc=${1:?usage: compare.sh path/to/cuda_bw [rounds] [out_dir]}
rounds=${2:-3}
out=${3:-$PWD/gpu-compare}
sizes=${SIZES:-128K,512K,1M,2M,4M,8M,16M,32M,64M,256M}
reps=${REPS:-15}
tests=${TESTS:-h2d,d2h,duplex,d2d}
extra=${EXTRA:-1}
mkdir -p "$out"

ref_bw=$(mktemp -d)/ref_bw
nvcc -O2 -std=c++17 ${NVCC_ARCH:--arch=native} -o "$ref_bw" "$here/ref_bw.cu"
nvidia-smi --query-gpu=name,pci.bus_id,driver_version,pstate,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,utilization.gpu \
  --format=csv > "$out/gpu_state.csv" 2>&1 || true

ref_env=()
[ -n "${REF_CONNECTIONS:-}" ] && ref_env=(env "CUDA_DEVICE_MAX_CONNECTIONS=$REF_CONNECTIONS")
echo "ref_bw CUDA_DEVICE_MAX_CONNECTIONS=${REF_CONNECTIONS:-${CUDA_DEVICE_MAX_CONNECTIONS:-unset}}" >>"$out/gpu_state.csv"
run_ref() {
  "${ref_env[@]}" "$ref_bw" --sizes "$sizes" --reps "$reps" --tests "$tests" \
    --methods latched/mallochost,latched/register,wall/mallochost || echo "ref_bw exited $?" >&2
  [ "$extra" = 1 ] || return 0
  "${ref_env[@]}" "$ref_bw" --sizes 4M,64M --reps "$reps" --tests h2d,d2h --streams 4 \
    --methods latched/mallochost,latched/register || echo "ref_bw exited $?" >&2
  "${ref_env[@]}" "$ref_bw" --sizes 4M,256M --reps "$reps" --tests h2d_pageable,d2h_pageable \
    --methods wall/pageable || echo "ref_bw exited $?" >&2
}
run_hwc() {
  echo "== round $1" >>"$out/hwc.log"
  "$hwc" --sizes "$sizes" --reps "$reps" --tests "$tests" --steady "${STEADY:-no}" 2>>"$out/hwc.log" || echo "cuda_bw exited $?" >&2
  [ "$extra" = 1 ] || return 0
  "$hwc" --sizes 4M,64M --reps "$reps" --tests h2d,d2h --streams 4 2>>"$out/hwc.log" || echo "cuda_bw exited $?" >&2
  "$hwc" --sizes 4M,256M --reps "$reps" --tests h2d_pageable,d2h_pageable 2>>"$out/hwc.log" || echo "cuda_bw exited $?" >&2
}

raw="$out/raw.csv"
echo "tool,test,size_bytes,streams,method,median_gbps,min_gbps,max_gbps,spread_pct,n,copies,flags,round" >"$raw"
for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then
    run_ref | sed "s/\$/,$r/" >>"$raw"
    run_hwc "$r" | sed "s/\$/,$r/" >>"$raw"
  else
    run_hwc "$r" | sed "s/\$/,$r/" >>"$raw"
    run_ref | sed "s/\$/,$r/" >>"$raw"
  fi
  echo "round $r done at $(date -u +%H:%M:%S)" >&2
done
python3 "$here/ratio_table.py" "$raw" | tee "$out/table.txt"
