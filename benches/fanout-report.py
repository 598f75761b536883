"""Renders the fan-out table of benches/run-fanout from its JSON reports.

Usage: fanout-report.py DIR NPROC LOADAVG
"""

import datetime
import json
import sys
from pathlib import Path

out, nproc, loadavg = sys.argv[1:4]
SIDES = {"before": "kubecache before", "after": "kubecache after", "sim": "sim (peer)"}


def key(path):
    side, watchers, round = path.stem.split("-")
    return int(watchers), int(round), list(SIDES).index(side)


rows = []
for path in sorted(Path(out).glob("*-*-*.json"), key=key):
    side, watchers, round = path.stem.split("-")
    report = json.loads(path.read_text())
    write = report["write_latency"]
    cells = [
        SIDES[side],
        f"{int(watchers):,}",
        round,
        f"{report['writes_offered']:,}",
        f"{report['writes']:,}",
        f"{write['p50_ms']:.1f}",
        f"{write['p99_ms']:.1f}",
    ]
    w = report.get("watch")
    if w:
        lag = w["lag"]
        cells += [
            f"{w['deliveries_per_sec']:,.0f}",
            f"{w['mb_per_sec']:,.0f}",
            f"{lag['p50_ms']:.1f}",
            f"{lag['p99_ms']:.1f}",
            f"{lag['max_ms']:.1f}",
            "yes" if w["complete"] else "**no**",
        ]
    else:
        cells += ["–"] * 6
    rows.append("| " + " | ".join(cells) + " |")

scenario = json.loads(next(Path(out).glob("*-*-*.json")).read_text())["scenario"]
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
print(f"""`benches/run-fanout`, {now}; `nproc` = {nproc}; load average at the end: {loadavg}.
{scenario['writesPerSec']:.0f} writes/s offered for {scenario['durationSecs']} s (open loop, up to
{scenario['writesInFlight']} in flight), each padding a pod with {scenario['writePadBytes']:,} bytes;
write latency from when a write is due to its acknowledgement, lag from the
acknowledgement to a watcher's receipt (ms).

| server | watchers | round | writes offered | writes done | write p50 | write p99 | deliveries/s | MB/s | lag p50 | lag p99 | lag max | complete |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|""")
print("\n".join(rows))
