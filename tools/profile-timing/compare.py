#!/usr/bin/env python3
"""Two runs of the same plan side by side: where each run's time went (per path, and the cases
that took longest), and each figure of run A against run B: the ratio of medians, and whether A's
median lies within B's own spread (min–max) and B's within A's.

usage: compare.py A_RAW.json B_RAW.json [LABEL_A LABEL_B]
(A and B are `hardware_raw_<date>.json` files; typically A adaptive, B `--fixed-reps`.)
"""
import collections
import json
import statistics
import sys


def load(path):
    d = json.load(open(path))
    return {r["measurement"]["key"]: r for r in d["results"]}, d["provenance"]


def seconds(prov):
    from datetime import datetime
    a = datetime.fromisoformat(prov["started_at"])
    b = datetime.fromisoformat(prov["finished_at"])
    return (b - a).total_seconds()


def main():
    a_path, b_path = sys.argv[1:3]
    la, lb = (sys.argv[3:5] + ["A", "B"])[:2] if len(sys.argv) >= 5 else ("A", "B")
    a, pa = load(a_path)
    b, pb = load(b_path)
    print(f"wall: {la} {seconds(pa):.1f} s, {lb} {seconds(pb):.1f} s (started_at to finished_at)")
    for label, runs in ((la, a), (lb, b)):
        by = collections.defaultdict(lambda: [0.0, 0, 0])
        for r in runs.values():
            m = r["measurement"]
            t = by[m["path"]]
            t[0] += r.get("case_seconds") or 0.0
            t[1] += 1
            t[2] += m["gbps"]["n"]
        total = sum(v[0] for v in by.values())
        print(f"{label}: case seconds {total:.1f}; " + ", ".join(
            f"{p} {v[0]:.1f} s / {v[1]} cases / N {v[2]}" for p, v in sorted(by.items())))
    for label, runs in ((la, a), (lb, b)):
        phases = collections.defaultdict(lambda: collections.Counter())
        for r in runs.values():
            for k, v in (r.get("phase_seconds") or {}).items():
                phases[r["measurement"]["path"]][k] += v
        print(f"{label}: phase seconds per path: " + "; ".join(
            f"{p} " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(c.items()))
            for p, c in sorted(phases.items())))
        slow = sorted(((r.get("phase_seconds") or {}).get("prepare", 0.0), k)
                      for k, r in runs.items())[-15:][::-1]
        print(f"{label}: longest preparations: " + ", ".join(f"{k} {s:.2f} s" for s, k in slow))
    ratios, outside, rows = [], [], []
    for key in sorted(set(a) & set(b)):
        ga, gb = a[key]["measurement"]["gbps"], b[key]["measurement"]["gbps"]
        ratio = ga["median"] / gb["median"]
        ratios.append(ratio)
        in_b = gb["min"] <= ga["median"] <= gb["max"]
        in_a = ga["min"] <= gb["median"] <= ga["max"]
        # Moved beyond the wider of the two spreads (as `compare` judges two profiles).
        moved_pct = abs(ratio - 1) * 100
        if moved_pct > max(ga["spread_pct"], gb["spread_pct"]):
            outside.append(f"{key} ({moved_pct:.2f} % > ±{max(ga['spread_pct'], gb['spread_pct']):.2f} %)")
        rows.append((key, ga, gb, ratio, in_b, in_a,
                     a[key].get("case_seconds") or 0, b[key].get("case_seconds") or 0))
    print(f"figures in both: {len(ratios)}; median ratio {la}/{lb} {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
    print(f"medians that moved more than the wider of their two spreads: {len(outside)}"
          + (": " + ", ".join(outside) if outside else ""))
    print("\n| case | " + la + " median (spread, N) | " + lb + " median (spread, N) | ratio | "
          "A in B's range | B in A's range | " + la + " s | " + lb + " s |")
    print("|---|---|---|---|---|---|---|---|")
    for key, ga, gb, ratio, in_b, in_a, sa, sb in rows:
        f = lambda g: f"{g['median']:.2f} (±{g['spread_pct']:.2f} %, {g['n']})"
        print(f"| {key} | {f(ga)} | {f(gb)} | {ratio:.4f} | {'yes' if in_b else 'no'} | "
              f"{'yes' if in_a else 'no'} | {sa:.2f} | {sb:.2f} |")
    def pinned_large(m):
        # Pinned H2D, D2H and duplex copies of 4 MiB or more, by the case's typed spec.
        s = m["spec"]
        return (m["path"] in ("h2d", "d2h", "duplex") and s.get("kind") == "gpu_copy"
                and s.get("host_memory") == "pinned" and s.get("size_bytes", 0) >= 4 << 20)
    large = [(k, ga) for k, ga, *_ in rows if pinned_large(a[k]["measurement"])]
    over = [(k, g["spread_pct"]) for k, g in large if g["spread_pct"] > 1.0]
    print(f"\n{la}: pinned H2D/D2H/duplex copies of >= 4 MiB: {len(large)}, spread over 1 %: "
          + (", ".join(f"{k} {s:.2f} %" for k, s in over) if over else "none"))


if __name__ == "__main__":
    main()
