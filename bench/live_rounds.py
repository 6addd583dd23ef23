#!/usr/bin/env python3
"""What spreads a live client's gaps: reads gf_ws_fanout's --dump (bench/live_clients.sh DUMP=1: NAME.arrivals,
"client ms" per update) and prints each fan-out round (arrivals with no pause over 250 ms between them): when it
began, the interval since the previous round, how long after its start half and 99 % of its clients had their
update, and which pairs of rounds hold the gaps over the goal.
  bench/live_rounds.py /tmp/gf-live/ws.arrivals [goal_ms, default 1050]"""
import bisect
import collections
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
goal = float(sys.argv[2]) if len(sys.argv) > 2 else 1050.0
by_client = collections.defaultdict(list)
for line in open(sys.argv[1], encoding="ascii"):
    c, t = line.split()
    by_client[int(c)].append(float(t))
every = sorted(t for ts in by_client.values() for t in ts)
if not every:
    sys.exit("no arrivals")
starts = [every[0]] + [b for a, b in zip(every, every[1:]) if b - a > 250]


def round_of(t):
    return bisect.bisect_right(starts, t) - 1


rounds = collections.defaultdict(list)
for t in every:
    rounds[round_of(t)].append(t)
print("round  start_ms  interval_ms  p50_after_start  p99_after_start  clients")
previous = None
for k in sorted(rounds):
    v = rounds[k]
    s = v[0]
    q = lambda p: v[min(len(v) - 1, int(p * (len(v) - 1)))] - s  # noqa: E731
    interval = "-" if previous is None else f"{s - previous:.1f}"
    print(f"{k:5d} {s:9.1f} {interval:>12} {q(0.5):16.1f} {q(0.99):16.1f} {len(v):8d}")
    previous = s
gaps, over = [], collections.Counter()
for ts in by_client.values():
    ts.sort()
    for a, b in zip(ts, ts[1:]):
        gaps.append(b - a)
        if b - a > goal:
            over[(round_of(a), round_of(b))] += 1
gaps.sort()
if gaps:
    print(f"gaps: {len(gaps)}, p50 {gaps[len(gaps) // 2]:.1f} ms, p99 {gaps[int(0.99 * (len(gaps) - 1))]:.1f} ms, max {gaps[-1]:.1f} ms")
print(f"gaps over {goal:.0f} ms by (round, next round): {dict(over.most_common(8))}, {sum(over.values())} in all")
