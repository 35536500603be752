"""The ratio table of compare.sh: hwceiling's 1-thread 100 KB figures (from each round's raw
JSON record), page-aligned and at xxhsum's alignment (16 bytes past a page boundary), beside
xxhsum's -b5 and -b11 (from its output), medians of the rounds. The bounds are judged on the
figures at xxhsum's alignment: the same block, placed alike."""

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
hwc = {}  # (variant, path, offset) -> [median per round]
hwc_cpus = set()  # where hwceiling's 1-thread cases ran
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
        hwc_cpus.add((m.get("placement") or {}).get("cpus"))
        key = (spec["variant"], spec["simd"], spec.get("offset_bytes"))
        hwc.setdefault(key, []).append(m["gbps"]["median"])
xs = {v: [xxhsum_gbps(os.path.join(out, f"xxhsum-{b}-{r}.txt")) for r in range(1, rounds + 1)]
      for v, _, b in VARIANTS}
banner = open(os.path.join(out, "xxhsum-banner.txt")).read().strip()
flags = open(os.path.join(out, "cpu-flags.txt")).read() if os.path.exists(os.path.join(out, "cpu-flags.txt")) else ""
xpath = xxhsum_path(banner, flags)

print(f"xxhsum: `{banner}` — its path: {LABEL[xpath]}; {rounds} interleaved rounds; 1 thread, "
      f"{BLOCK}-byte blocks; GB/s = 10^9 B/s; each figure the median of the rounds' medians. "
      f"hwceiling's block page-aligned (its ceiling) and 16 bytes past a page boundary (as "
      f"xxhsum's 16-byte-aligned buffer usually lies); the ratio and the bounds are of the "
      f"latter. hwceiling's cases ran on CPU(s) {', '.join(sorted(str(c) for c in hwc_cpus))}; "
      f"xxhsum and optlevel.c pinned to CPU {open(os.path.join(out, 'cpu.txt')).read().strip() if os.path.exists(os.path.join(out, 'cpu.txt')) else '?'}\n")
print("| hash | hwceiling path | page-aligned GB/s | +16 B GB/s (rounds) | xxhsum GB/s (rounds) | ratio (+16 B) | |")
print("|---|---|---|---|---|---|---|")
ok = True
med = statistics.median
for v, label, b in VARIANTS:
    x = med(xs[v])
    paths = sorted({p for (vv, p, o) in hwc if vv == v and o == 16}, key=list(LABEL).index)
    best = max(paths, key=lambda p: med(hwc[(v, p, 16)])) if paths else None
    for p in paths:
        h = med(hwc[(v, p, 16)])
        aligned = hwc.get((v, p, 0))
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
        rs = ", ".join(f"{a:.1f}" for a in hwc[(v, p, 16)])
        xr = ", ".join(f"{a:.1f}" for a in xs[v])
        al = f"{med(aligned):.2f}" if aligned else "—"
        print(f"| {label} | {LABEL[p]} | {al} | {h:.2f} ({rs}) | {x:.2f} ({xr}) (`-{b}`) | {ratio:.3f} | {'; '.join(note)} |")
    if xpath not in paths:
        ok = False
        print(f"| {label} | {LABEL[xpath]} | — | not measured | {x:.2f} | — | xxhsum's path did not run |")


def best_of(path):
    figures = [float(x) for x in re.findall(r"([0-9.]+) GB/s", open(path).read())]
    return max(figures) if figures else None


align = {}
for r in (1, 2, 3):
    for v in ("64", "128"):
        for off in ("0", "16"):
            f = os.path.join(out, f"align-{v}-{off}-{r}.txt")
            if os.path.exists(f) and best_of(f) is not None:
                align.setdefault((v, off), []).append(best_of(f))
    for bench in ("b5", "b6", "b11", "b12"):
        f = os.path.join(out, f"align-xxhsum-{bench}-{r}.txt")
        if os.path.exists(f):
            align.setdefault(bench, []).append(xxhsum_gbps(f))
if align:
    print()
    print(f"Alignment, {LABEL[xpath]} path of xxhash.h at -O2 (optlevel.c, 100 KB, 1 thread, best of "
          f"3 × 1 s, 3 rounds) beside xxhsum's 16-byte-aligned (`-b5`, `-b11`) and +3-byte "
          f"(`-b6`, `-b12`) benchmarks, GB/s, median of the rounds:\n")
    print("| hash | page-aligned | +16 B | xxhsum aligned | xxhsum +3 B |")
    print("|---|---|---|---|---|")
    for v, label, a, u in (("64", "XXH3-64", "b5", "b6"), ("128", "XXH3-128", "b11", "b12")):
        cells = [align.get((v, "0")), align.get((v, "16")), align.get(a), align.get(u)]
        print(f"| {label} | " + " | ".join(f"{med(c):.2f}" if c else "—" for c in cells) + " |")
print()
print("RESULT: " + ("the path xxhsum runs is within 10 % of it, and the best path at least that"
                    if ok else "NOT within the issue's bounds (see the rows)"))
sys.exit(0 if ok else 1)
