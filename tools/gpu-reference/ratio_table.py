#!/usr/bin/env python3
"""Ratio table of hwceiling's CUDA backend against ref_bw, from compare.sh's raw.csv.

Each (tool, method) row of a round holds the median of N repetitions. Per test, size and
stream count this prints the median over rounds of those medians, the ratio hwc / ref for the
reference's primary method (latched/mallochost, nvbandwidth's way; wall/pageable for pageable
tests) and for the best of the reference's methods, the lowest per-round ratio against the
primary (compare.sh interleaves the two tools test by test, so a round's pair of figures ran
tens of seconds apart, not minutes), the worst
spread (max - min) / median of any round, and the verdict against the targets:
pinned H2D/D2H >= 4 MiB: ratio to the best reference >= 0.995 and spread <= 1 %;
128 KiB H2D/D2H and duplex (each direction, and `duplex_sum`, the two directions' medians
added per round): ratio to the best reference >= 1.0. Both tools time the two directions of a
duplex size in the same repetitions, each by its own events; either sum adds the two
directions' medians, which need not come from the same repetition.
"""

import csv
import statistics
import sys
from collections import defaultdict

PRIMARY = {"pageable": "wall/pageable", "pinned": "latched/mallochost"}
MIB = 1 << 20


def label(size):
    if size % MIB == 0:
        return f"{size // MIB}MiB"
    return f"{size // 1024}KiB"


def main(path):
    rows = defaultdict(list)  # (test, size, streams, tool, method) -> [(round, median, spread, flags)]
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["test"], int(r["size_bytes"]), int(r["streams"]), r["tool"], r["method"])
            rows[key].append(
                (int(r["round"]), float(r["median_gbps"]), float(r["spread_pct"]), r["flags"])
            )
    # Duplex sum: per tool, method and round, the two directions' medians added (its spread
    # is not known from two medians: printed as -).
    for (test, size, streams, tool, method), h2d in list(rows.items()):
        d2h = rows.get(("duplex_d2h", size, streams, tool, method))
        if test != "duplex_h2d" or not d2h:
            continue
        by_round = {x[0]: x for x in d2h}
        summed = [
            (x[0], x[1] + by_round[x[0]][1], None,
             " ".join(sorted({f for f in (x[3], by_round[x[0]][3]) if f})))
            for x in h2d
            if x[0] in by_round
        ]
        if summed:
            rows[("duplex_sum", size, streams, tool, method)] = summed
    cases = sorted({k[:3] for k in rows}, key=lambda c: (c[0], c[2], c[1]))
    head = (
        f"{'test':<13} {'size':>7} {'st':>2} {'hwc GB/s':>9} {'ref lat':>9} {'ref reg':>9} "
        f"{'ref wall':>9} {'hwc/ref':>8} {'hwc/best':>8} {'min rnd':>8} {'hwc spr%':>8} "
        f"{'ref spr%':>8}  verdict"
    )
    print(head)
    print("-" * len(head))
    failures = 0
    for test, size, streams in cases:
        kind = "pageable" if "pageable" in test else "pinned"
        hwc = [v for (tt, s, st, t, m), v in rows.items()
               if (tt, s, st, t) == (test, size, streams, "hwc")]
        if not hwc:
            # The reference measured it and hwceiling gave nothing (a crashed block): a miss.
            print(f"{test:<13} {label(size):>7} {streams:>2} {'-':>9}  MISSING: no hwc row")
            failures += 1
            continue
        hwc = hwc[0]
        ref = {m: v for (tt, s, st, t, m), v in rows.items()
               if (tt, s, st, t) == (test, size, streams, "ref")}
        med = lambda v: statistics.median(x[1] for x in v)
        spr = lambda v: max((x[2] for x in v if x[2] is not None), default=None)
        hwc_med = med(hwc)
        primary = ref.get(PRIMARY[kind])
        ref_meds = {m: med(v) for m, v in ref.items()}
        best = max(ref_meds.values()) if ref_meds else None
        ratio = hwc_med / med(primary) if primary else None
        ratio_best = hwc_med / best if best else None
        per_round = []
        if primary:
            by_round = {x[0]: x[1] for x in primary}
            per_round = [x[1] / by_round[x[0]] for x in hwc if x[0] in by_round]
        verdict = ""
        pinned_pcie = test in ("h2d", "d2h")
        if ratio_best is not None:
            if pinned_pcie and size >= 4 * MIB:
                ok = ratio_best >= 0.995 and spr(hwc) is not None and spr(hwc) <= 1.0
                verdict = "PASS" if ok else "FAIL (>=99.5% of best, spread<=1%)"
            elif (pinned_pcie and size == 128 * 1024) or test.startswith("duplex"):
                ok = ratio_best >= 1.0
                verdict = "PASS" if ok else "FAIL (>= best ref)"
            else:
                ok = True
            failures += 0 if ok else 1
        flags = sorted({x[3] for x in hwc + sum(ref.values(), []) if x[3]})
        fmt = lambda v, w=9, p=3: f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"
        print(
            f"{test:<13} {label(size):>7} {streams:>2} {fmt(hwc_med)} "
            f"{fmt(ref_meds.get('latched/mallochost') or ref_meds.get('wall/pageable'))} "
            f"{fmt(ref_meds.get('latched/register'))} {fmt(ref_meds.get('wall/mallochost'))} "
            f"{fmt(ratio, 8, 4)} {fmt(ratio_best, 8, 4)} "
            f"{fmt(min(per_round) if per_round else None, 8, 4)} {fmt(spr(hwc), 8, 2)} "
            f"{fmt(max((x for x in map(spr, ref.values()) if x is not None), default=None), 8, 2)}"
            f"  {verdict}"
            + (f" [{' '.join(flags)}]" if flags else "")
        )
    rounds = sorted({x[0] for v in rows.values() for x in v})
    print(f"\nrounds: {len(rounds)}; targets missed: {failures}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
