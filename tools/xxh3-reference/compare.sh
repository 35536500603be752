#!/usr/bin/env bash
# hwceiling's XXH3 figures on xxhsum's 100 KB block (page-aligned, and at xxhsum's alignment)
# beside `xxhsum -b5` (XXH3-64) and `-b11` (XXH128), run in turn (interleaved) on the same
# machine, with their ratios.
#
#   compare.sh HWCEILING [XXHSUM] [OUT]
#
# HWCEILING: the hwceiling binary (a release build). XXHSUM: the xxhsum to compare with;
# default deps/dev/xxhsum/usr/bin/xxhsum where that was unpacked (its libxxhash.so.0 beside it
# is put on LD_LIBRARY_PATH), else `xxhsum` on PATH. OUT: where the runs and the table go
# (default: a new folder under /tmp). ROUNDS (environment, default 3): rounds of one xxhsum -b5,
# one xxhsum -b11 and one `hwceiling profile --paths xxh3 --threads 1`; each side's figure is
# the median of its rounds. CPU (environment, default 0): xxhsum and optlevel.c run pinned to
# it with taskset, where there is taskset: hwceiling's 1-thread cases run on the first CPU of
# their node's pinning order (CPU 0 on the machines here; the table prints where they ran),
# and CPUs of a shared host can differ by a third.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
hwc="${1:?usage: compare.sh HWCEILING [XXHSUM] [OUT]}"
xxhsum="${2:-}"
out="${3:-$(mktemp -d /tmp/xxh3-compare.XXXXXX)}"
rounds="${ROUNDS:-3}"
mkdir -p "$out"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "${CPU:-0}"); fi
echo "${CPU:-0}" >"$out/cpu.txt"
if [[ -z "$xxhsum" ]]; then
  if [[ -x "$repo/deps/dev/xxhsum/usr/bin/xxhsum" ]]; then
    xxhsum="$repo/deps/dev/xxhsum/usr/bin/xxhsum"
  else
    xxhsum="$(command -v xxhsum || true)"
  fi
fi
[[ -n "$xxhsum" && -x "$xxhsum" ]] || {
  echo "no xxhsum: install Debian's xxhash package, or unpack it under deps/dev/xxhsum (see README.md)" >&2
  exit 2
}
# An unpacked package's library lies in usr/lib/<triplet>/ beside usr/bin/.
xroot="$(cd "$(dirname "$xxhsum")/../.." && pwd)"
for lib in "$xroot"/usr/lib/*-linux-gnu "$xroot"/lib/*-linux-gnu; do
  if [[ -e "$lib/libxxhash.so.0" ]]; then
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
banner="$("$xxhsum" -V 2>&1 | tr -d '\r' | grep -v '^$' | tail -n 1)"
echo "xxhsum: $xxhsum"
echo "banner: $banner"
echo "$banner" >"$out/xxhsum-banner.txt"
grep -m1 -E '^(flags|Features)' /proc/cpuinfo >"$out/cpu-flags.txt" || true
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds: xxhsum -b5, xxhsum -b11, hwceiling" >&2
  "${pin[@]}" "$xxhsum" -b5 -i3 >"$out/xxhsum-b5-$r.txt" 2>&1
  "${pin[@]}" "$xxhsum" -b11 -i3 >"$out/xxhsum-b11-$r.txt" 2>&1
  "$hwc" profile --paths xxh3 --threads 1 -o "$out/hwc-$r" >"$out/hwc-$r.log" 2>&1
done
# Where a block starts moves XXH3's speed (AVX-512 loads off a 64-byte line straddle two lines):
# where gcc and xxhash.h are here, the path xxhsum runs is built from optlevel.c at -O2
# (Debian's flags) and run on a page-aligned block and one 16 bytes past it (as xxhsum's
# 16-byte-aligned buffer usually lies), beside xxhsum's "aligned" (-b5, -b11) and "unaligned"
# (+3 bytes: -b6, -b12) benchmarks, in turn, 3 times.
path="$(python3 "$here/table.py" --xxhsum-path "$banner" "$out/cpu-flags.txt")"
case "$path" in
  avx512) vec=3 flag=-mavx512f ;;
  avx2) vec=2 flag=-mavx2 ;;
  sse2) vec=1 flag= ;;
  neon) vec=4 flag= ;;
  *) vec=0 flag= ;;
esac
inc=
for d in /usr/include /usr/local/include "$repo/deps/dev/xxhsum/usr/include"; do
  if [[ -z "$inc" && -e "$d/xxhash.h" ]]; then inc="$d"; fi
done
if command -v gcc >/dev/null && [[ -n "$inc" ]]; then
  gcc -O2 -DXXH_VECTOR="$vec" $flag -I"$inc" "$here/optlevel.c" -o "$out/optlevel-O2"
  for r in 1 2 3; do
    for v in 64 128; do
      for off in 0 16; do "${pin[@]}" "$out/optlevel-O2" "$v" "$off" >"$out/align-$v-$off-$r.txt"; done
    done
    for b in 5 6 11 12; do "${pin[@]}" "$xxhsum" -b"$b" -i2 >"$out/align-xxhsum-b$b-$r.txt" 2>&1; done
  done
else
  echo "no gcc or xxhash.h here: the alignment check of xxhsum's path is left out" >&2
fi
python3 "$here/table.py" "$out" "$rounds" | tee "$out/compare.md"
