"""The ratio table of compare.sh: hwceiling's 1-thread 100 KB figures (from each round's raw
JSON record) beside xxhsum's -b5 and -b11 (from its output), medians of the rounds."""

import glob
import json
import os
import re
import statistics
import sys

BLOCK = 100 * 1024
LABEL = {"scalar": "Scalar", "sse2": "SSE2", "avx2": "AVX2", "avx512": "AVX-512", "neon": "NEON"}
VARIANTS = [("xxh3_64", "XXH3-64", "b5"), ("xxh3_128", "XXH3-128", "b11")]


def xxhsum_gbps(path):
    """The last `N it/s` of an xxhsum -b output, in GB/s (10^9 B/s) of its block."""
    text = open(path, errors="replace").read().replace("\r", "\n")
    hits = re.findall(r":\s*(\d+)\s*->\s*(\d+)\s*it/s", text)
    if not hits:
        sys.exit(f"no benchmark figure in {path}")
    size, its = hits[-1]
    return int(size) * int(its) / 1e9


def xxhsum_path(banner, flags):
    """The code path xxhsum runs: its banner names it (`x86_64 + AVX2`), or `autoVec`, the
    run-time dispatcher, which picks the widest path the CPU has (AVX-512, AVX2, SSE2)."""
    m = re.search(r"\+\s*(AVX512|AVX2|SSE2|NEON)", banner)
    if m:
        return {"AVX512": "avx512", "AVX2": "avx2", "SSE2": "sse2", "NEON": "neon"}[m.group(1)]
    if "autoVec" in banner:
        if "avx512f" in flags:
            return "avx512"
        if "avx2" in flags:
            return "avx2"
        return "sse2"
    if "aarch64" in banner:
        return "neon"
    if "x86_64" in banner:
        return "sse2"  # x86-64 builds default to SSE2 without a dispatcher
    return "scalar"


if sys.argv[1] == "--xxhsum-path":
    flags_file = sys.argv[3]
    print(xxhsum_path(sys.argv[2], open(flags_file).read() if os.path.exists(flags_file) else ""))
    sys.exit(0)

out, rounds = sys.argv[1], int(sys.argv[2])
hwc = {}  # (variant, path) -> [median per round]
for r in range(1, rounds + 1):
    raws = glob.glob(os.path.join(out, f"hwc-{r}", "hardware_raw_*.json"))
    if not raws:
        sys.exit(f"round {r}: hwceiling wrote no raw record (see {out}/hwc-{r}.log)")
    record = json.load(open(sorted(raws)[-1]))
    for res in record.get("results", []):
        m = res.get("measurement", res)
        spec = m.get("spec", {})
        if spec.get("kind") != "hash" or spec.get("size_bytes") != BLOCK or spec.get("threads") != 1:
            continue
        hwc.setdefault((spec["variant"], spec["simd"]), []).append(m["gbps"]["median"])
xs = {v: [xxhsum_gbps(os.path.join(out, f"xxhsum-{b}-{r}.txt")) for r in range(1, rounds + 1)]
      for v, _, b in VARIANTS}
banner = open(os.path.join(out, "xxhsum-banner.txt")).read().strip()
flags = open(os.path.join(out, "cpu-flags.txt")).read() if os.path.exists(os.path.join(out, "cpu-flags.txt")) else ""
xpath = xxhsum_path(banner, flags)

print(f"xxhsum: `{banner}` — its path: {LABEL[xpath]}; {rounds} interleaved rounds; 1 thread, "
      f"{BLOCK}-byte blocks; GB/s = 10^9 B/s; each figure the median of the rounds' medians\n")
print("| hash | hwceiling path | hwceiling GB/s (rounds) | xxhsum GB/s (rounds) | ratio | |")
print("|---|---|---|---|---|---|")
ok = True
for v, label, b in VARIANTS:
    x = statistics.median(xs[v])
    paths = sorted((p for (vv, p) in hwc if vv == v), key=list(LABEL).index)
    best = max(paths, key=lambda p: statistics.median(hwc[(v, p)])) if paths else None
    for p in paths:
        h = statistics.median(hwc[(v, p)])
        ratio = h / x
        note = []
        if p == xpath:
            within = abs(ratio - 1) <= 0.10
            ok &= within
            note.append("xxhsum's path: " + ("within 10 %" if within else "NOT within 10 %"))
        if p == best:
            at_least = ratio >= 0.90
            ok &= at_least
            note.append("best path" + ("" if at_least else ": more than 10 % under xxhsum"))
        rs = ", ".join(f"{a:.1f}" for a in hwc[(v, p)])
        xr = ", ".join(f"{a:.1f}" for a in xs[v])
        print(f"| {label} | {LABEL[p]} | {h:.2f} ({rs}) | {x:.2f} ({xr}) (`-{b}`) | {ratio:.3f} | {'; '.join(note)} |")
    if xpath not in paths:
        ok = False
        print(f"| {label} | {LABEL[xpath]} | not measured | {x:.2f} | — | xxhsum's path did not run |")
opt = {o: [] for o in ("O2", "O3")}
xs_opt = []
for r in (1, 2, 3):
    for o in opt:
        f = os.path.join(out, f"optlevel-{o}-{r}.txt")
        if os.path.exists(f):
            figures = [float(x) for x in re.findall(r"([0-9.]+) GB/s", open(f).read())]
            if figures:
                opt[o].append(max(figures))
    f = os.path.join(out, f"optlevel-xxhsum-{r}.txt")
    if os.path.exists(f):
        xs_opt.append(xxhsum_gbps(f))
if all(opt.values()) and xs_opt:
    x = statistics.median(xs_opt)
    print()
    print(f"Compiler flags, {LABEL[xpath]} path of xxhash.h (optlevel.c, XXH3-64, 100 KB, 1 thread, "
          f"best of 3 × 1 s, 3 rounds) beside xxhsum -b5 ({x:.2f} GB/s):\n")
    print("| build | GB/s (rounds) | ratio to xxhsum |")
    print("|---|---|---|")
    for o, v in opt.items():
        print(f"| -{o} | {statistics.median(v):.2f} ({', '.join(f'{a:.1f}' for a in v)}) | "
              f"{statistics.median(v) / x:.3f} |")
print()
print("RESULT: " + ("the path xxhsum runs is within 10 % of it, and the best path at least that"
                    if ok else "NOT within the issue's bounds (see the rows)"))
sys.exit(0 if ok else 1)
