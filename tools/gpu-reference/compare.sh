#!/usr/bin/env bash
# Side by side, in one run: hwceiling's CUDA backend (the `cuda_bw` example of
# crates/bench-cuda, which drives the backend through the runner) and ref_bw.cu, an independent
# plain-CUDA reference, interleaved test by test within each round (who goes first alternates),
# then a ratio table (ratio_table.py).
#
# usage: compare.sh CUDA_BW_BINARY [ROUNDS] [OUT_DIR]
# env:   SIZES (default 128K,...,256M), REPS (15), NVCC_ARCH (-arch=native),
#        TESTS (h2d,d2h,duplex,d2d), EXTRA (1: also the 4-stream and pageable rows; 0: not),
#        STEADY (no: cuda_bw times each case once, as ref_bw does; yes: as `hwceiling profile`,
#        it times pinned H2D/D2H/duplex copies of 4 MiB or more again when they spread over 1 %),
#        REF_CONNECTIONS (CUDA_DEVICE_MAX_CONNECTIONS for ref_bw; default: as this shell has it,
#        normally unset, i.e. the driver's 8, as a plain CUDA program runs. cuda_bw, like
#        `hwceiling profile`, asks for 32 unless the variable is set: REF_CONNECTIONS=32
#        compares like for like),
#        BLOCK (test: the tools take turns test by test; size: test by test and size by size,
#        each block a process of each tool: slower, but small host-memory copies on the H200 VM
#        run in slow spells of seconds, which a block of one size is less likely to straddle)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hwc=${1:?usage: compare.sh path/to/cuda_bw [rounds] [out_dir]}
rounds=${2:-3}
out=${3:-$PWD/gpu-compare}
sizes=${SIZES:-128K,512K,1M,2M,4M,8M,16M,32M,64M,256M}
reps=${REPS:-15}
tests=${TESTS:-h2d,d2h,duplex,d2d}
extra=${EXTRA:-1}
case "${BLOCK:=test}" in test | size) ;; *) echo "compare.sh: BLOCK is test or size, not $BLOCK" >&2; exit 2 ;; esac
mkdir -p "$out"

ref_bw=$(mktemp -d)/ref_bw
nvcc -O2 -std=c++17 ${NVCC_ARCH:--arch=native} -o "$ref_bw" "$here/ref_bw.cu"
nvidia-smi --query-gpu=name,pci.bus_id,driver_version,pstate,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,utilization.gpu \
  --format=csv > "$out/gpu_state.csv" 2>&1 || true

ref_env=()
[ -n "${REF_CONNECTIONS:-}" ] && ref_env=(env "CUDA_DEVICE_MAX_CONNECTIONS=$REF_CONNECTIONS")
echo "ref_bw CUDA_DEVICE_MAX_CONNECTIONS=${REF_CONNECTIONS:-${CUDA_DEVICE_MAX_CONNECTIONS:-unset}}" >>"$out/gpu_state.csv"
# A block is one test (or the 4-stream and pageable extras) of one tool. The two tools take
# turns block by block, and who goes first alternates by block and by round, so each pair of
# figures that the table divides ran seconds apart, not a whole tool's run apart: the machine's
# level drifts over minutes (the reference's own H2D medians moved 0.5 % between rounds).
# A block names a test, or a test and one size (test@size).
block_sizes() { if [[ $1 == *@* ]]; then echo "${1#*@}"; else echo "$sizes"; fi; }
ref_block() {
  case "$1" in
  extra4) "${ref_env[@]}" "$ref_bw" --sizes 4M,64M --reps "$reps" --tests h2d,d2h --streams 4 \
            --methods latched/mallochost,latched/register ;;
  pageable) "${ref_env[@]}" "$ref_bw" --sizes 4M,256M --reps "$reps" \
              --tests h2d_pageable,d2h_pageable --methods wall/pageable ;;
  *) "${ref_env[@]}" "$ref_bw" --sizes "$(block_sizes "$1")" --reps "$reps" --tests "${1%@*}" \
       --methods latched/mallochost,latched/register,wall/mallochost ;;
  esac || echo "ref_bw $1 exited $?" >&2
}
hwc_block() {
  echo "== round $2 $1" >>"$out/hwc.log"
  case "$1" in
  extra4) "$hwc" --sizes 4M,64M --reps "$reps" --tests h2d,d2h --streams 4 --steady "${STEADY:-no}" ;;
  pageable) "$hwc" --sizes 4M,256M --reps "$reps" --tests h2d_pageable,d2h_pageable ;;
  *) "$hwc" --sizes "$(block_sizes "$1")" --reps "$reps" --tests "${1%@*}" \
       --steady "${STEADY:-no}" ;;
  esac 2>>"$out/hwc.log" || echo "cuda_bw $1 exited $?" >&2
}

blocks=()
for t in ${tests//,/ }; do
  case "$BLOCK" in
  test) blocks+=("$t") ;;
  size) for z in ${sizes//,/ }; do blocks+=("$t@$z"); done ;;
  esac
done
[ "$extra" = 1 ] && blocks+=(extra4 pageable)
raw="$out/raw.csv"
echo "tool,test,size_bytes,streams,method,median_gbps,min_gbps,max_gbps,spread_pct,n,copies,flags,round" >"$raw"
for r in $(seq 1 "$rounds"); do
  for b in "${!blocks[@]}"; do
    t=${blocks[$b]}
    if (((r + b) % 2)); then
      ref_block "$t" | sed "s/\$/,$r/" >>"$raw"
      hwc_block "$t" "$r" | sed "s/\$/,$r/" >>"$raw"
    else
      hwc_block "$t" "$r" | sed "s/\$/,$r/" >>"$raw"
      ref_block "$t" | sed "s/\$/,$r/" >>"$raw"
    fi
  done
  echo "round $r done at $(date -u +%H:%M:%S)" >&2
done
python3 "$here/ratio_table.py" "$raw" | tee "$out/table.txt"
