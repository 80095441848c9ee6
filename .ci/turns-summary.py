#!/usr/bin/env python3
"""Summarizes the fused hop's turns and the hand-off's rounds from GPU logs, so that no
figure of BENCHMARKS.md is counted by hand.

`python3 .ci/turns-summary.py LOG...` reads:
- fused turns (`.ci/h200-fused-ab.sh`): a `== fused turn N: LABEL` line, then the
  `fused hop` row (holo ns, raw ns, ratio = the median of the turn's pair ratios) and,
  with HOLO_BENCH_VERBOSE=1, the `  fused hop: holo [...], raw [...], ratios [...]` line;
- hand-off rounds (`handoff.log`): a `== handoff round N: LABEL` line, then the
  `hand-off, adopted once` row's ratio (the ratio of the medians).
Labels are the binaries' names with their hash cut (`device_hop-base`, `device_hop`), so
turns of one build from several logs pool. Per label it prints the turns at or under the
target, the median of the turns' ratios with a 95 % bootstrap interval (turns resampled,
fixed seed), the median gap holo − raw in ns a frame, and, where every pair was printed
(HOLO_BENCH_VERBOSE=1), each turn's order-balanced ratio (from the pairs' ns, as the bench
computes it since the twenty-eighth session), the median of all the pairs' ratios with its interval (pairs
resampled) and how the pairs' ratios spread within a turn against between turns. Give it
logs of one build per label only: it pools whatever it is given.
"""
import math
import random
import re
import statistics
import sys
from collections import defaultdict

FUSED_TARGET, HANDOFF_TARGET = 1.05, 1.10


def label(raw):
    return re.sub(r"-[0-9a-f]{16}$", "", raw.strip())


def floats(text):
    return [float(x) for x in re.findall(r"[-\d.]+", text)]


def bootstrap_median(xs, n=10000, seed=1):
    rng = random.Random(seed)
    ms = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n) - 1]


def balanced(ratios):
    """As `device_hop`'s `balanced`: a run right after one of the other side is slower, so
    each pair with holo first is taken with the next (raw first)."""
    couples = [math.sqrt(a * b) for a, b in zip(ratios[0::2], ratios[1::2])]
    return statistics.median(couples) if couples else statistics.median(ratios)


turns = defaultdict(list)  # label -> [(ratio, holo, raw, pair ratios or None)]
rounds = defaultdict(list)  # label -> [ratio]
for path in sys.argv[1:]:
    current, pending, row_seen, hand = None, None, False, "handoff"
    for line in open(path, encoding="utf-8"):
        m = re.match(r"== fused turn \d+: (\S+)", line)
        if m:
            current, pending, row_seen = label(m.group(1)), None, False
            continue
        # The bench prints a turn's pairs before its row (a log sorted by `sort -u`, after).
        m = re.match(r"\s+fused hop: holo \[(.*?)\], raw \[(.*?)\], ratios \[(.*?)\]", line)
        if m and current:
            pairs = [h / r for h, r in zip(floats(m.group(1)), floats(m.group(2)))]
            if turns[current] and turns[current][-1][3] is None and row_seen:
                turns[current][-1][3] = pairs
            else:
                pending = pairs
            continue
        m = re.match(r"fused hop\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m and current:
            h, r, ratio = map(float, m.groups())
            turns[current].append([ratio, h, r, pending])
            pending, row_seen = None, True
            continue
        m = re.match(r"== handoff round \d+: (\S+)", line)
        if m:
            hand = label(m.group(1))
            continue
        m = re.match(r"cuda\s+hand-off, adopted once\s+[\d.]+ ns.*?ratio ([\d.]+);", line)
        if m:
            rounds[hand].append(float(m.group(1)))

for name, ts in sorted(turns.items()):
    ratios = [t[0] for t in ts]
    lo, hi = bootstrap_median(ratios)
    gap = statistics.median(t[1] - t[2] for t in ts)
    met = sum(r <= FUSED_TARGET for r in ratios)
    print(f"fused hop, {name}: {met} of {len(ratios)} turns ≤ {FUSED_TARGET}; median of the "
          f"turns {statistics.median(ratios):.3f} [95 % {lo:.3f}–{hi:.3f}]; median gap {gap:.0f} ns a frame")
    pairs = [t[3] for t in ts if t[3]]
    if len(pairs) >= 2:
        within = statistics.median(statistics.stdev(p) for p in pairs)
        between = statistics.stdev(statistics.median(p) for p in pairs)
        pooled = [x for p in pairs for x in p]
        plo, phi = bootstrap_median(pooled)
        bal = [balanced(p) for p in pairs]
        print(f"  order-balanced (the median over consecutive pairs of pairs of their ratios' geometric mean): "
              f"{sum(b <= FUSED_TARGET for b in bal)} of {len(bal)} turns ≤ {FUSED_TARGET}, median "
              f"{statistics.median(bal):.3f}; " + ", ".join(f"{b:.3f}" for b in bal))
        print(f"  {len(pooled)} pairs in {len(pairs)} turns: median {statistics.median(pooled):.3f} "
              f"[95 % {plo:.3f}–{phi:.3f}], "
              f"{sum(x <= FUSED_TARGET for x in pooled)} ≤ {FUSED_TARGET}; spread of a turn's pairs "
              f"(median s.d.) {within:.3f}, of the turns' medians (s.d.) {between:.3f}")
for name, rs in sorted(rounds.items()):
    print(f"hand-off, adopted once, {name}: {sum(r <= HANDOFF_TARGET for r in rs)} of {len(rs)} "
          f"rounds ≤ {HANDOFF_TARGET}; median {statistics.median(rs):.3f}; "
          + ", ".join(f"{r:.2f}" for r in rs))
