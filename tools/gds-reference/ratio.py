"""The table of compare.sh's run: per block size and depth, hwceiling's cufile figure over
kvikio's and its POSIX bounce figure over the plain reference's, each the median of every timed
repetition of every round; and the mode hwceiling recorded.

    python3 ratio.py OUT
"""
import csv
import glob
import json
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
samples = defaultdict(list)  # (tool, block, qd) -> GB/s
modes = set()
for raw in sorted(glob.glob(f"{out}/hwc-r*/hardware_raw_*.json")):
    with open(raw) as f:
        rec = json.load(f)
    env = rec["provenance"].get("environment", {})
    if "gds.mode" in env:
        modes.add(f"{env['gds.mode']['value']} ({env['gds.mode'].get('about', '')})")
    for r in rec["results"]:
        s = r["measurement"]["spec"]
        if s.get("kind") != "gds":
            continue
        tool = "hwc-" + s["route"]
        samples[(tool, s["block_bytes"], s["queue_depth"])] += r["samples_gbps"]
    for f in rec.get("failures", []):
        print(f"hwceiling failure: {f}")
for name in ("kvikio", "ref"):
    try:
        with open(f"{out}/{name}.csv") as f:
            for row in csv.reader(f):
                if row and not row[0].startswith("#"):
                    samples[(row[0], int(row[1]), int(row[2]))].append(float(row[4]))
    except FileNotFoundError:
        pass


def cell(tool, block, qd):
    v = samples.get((tool, block, qd))
    if not v:
        return None, "—"
    m = statistics.median(v)
    return m, f"{m:.3f} ({min(v):.3f}–{max(v):.3f}, n={len(v)})"


print("hwceiling gds.mode:", "; ".join(sorted(modes)) or "not recorded")
print()
print("| block | QD | hwceiling cufile | kvikio | ratio | hwceiling posix-bounce | pread+cudaMemcpy | ratio |")
print("|---|---|---|---|---|---|---|---|")
keys = sorted({(b, q) for (_, b, q) in samples})
for b, q in keys:
    hc, hcs = cell("hwc-cufile", b, q)
    kv, kvs = cell("kvikio", b, q)
    hp, hps = cell("hwc-posix_bounce", b, q)
    rf, rfs = cell("posix-ref", b, q)
    r1 = f"{hc / kv * 100:.1f} %" if hc and kv else "—"
    r2 = f"{hp / rf * 100:.1f} %" if hp and rf else "—"
    print(f"| {b >> 20} MiB | {q} | {hcs} | {kvs} | {r1} | {hps} | {rfs} | {r2} |")
