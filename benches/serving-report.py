"""Renders benches/SERVING.md from the JSON reports of benches/run-serving.

Usage: serving-report.py DIR PODS BIG_PODS NPROC LOADAVG
"""

import datetime
import json
import os
import sys
from pathlib import Path

out, pods, big, nproc, loadavg = sys.argv[1:6]


def load(name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f)


def op(report, name):
    return next(r for r in report["requests"] if r["op"] == name)


def ratio(a, b):
    return f"{a / b:.2f}" if b else "–"


def verdict(ok, how):
    return ("met" if ok else "**missed**") + f" ({how})"


LABELS = {
    "kubecache": "kubecache",
    "stalled": "kubecache, plus 1 stalled watcher",
    "apiserver": "simulated API server",
}
rows = []
targets = []
for scenario, name, what in [
    ("get", "get", f"GET one pod of {int(pods):,}"),
    ("list", "list", f"full list of {int(pods):,} pods (one response)"),
    ("index", "index", f"index query: pods of one node of 1,000 ({int(big):,} pods)"),
]:
    cache, peer = op(load(f"{scenario}-kubecache"), name), op(load(f"{scenario}-apiserver"), name)
    c, p = cache["latency"], peer["latency"]
    rows.append(
        f"| {what} | {cache['per_sec']:,.0f} | {c['p50_ms']:.2f} | {c['p99_ms']:.2f} | {c['max_ms']:.1f} "
        f"| {peer['per_sec']:,.0f} | {p['p50_ms']:.2f} | {p['p99_ms']:.2f} "
        f"| {ratio(cache['per_sec'], peer['per_sec'])} | {ratio(c['p99_ms'], p['p99_ms'])} "
        f"| {cache['errors'] + peer['errors']} |"
    )
    if scenario == "get":
        ok = c["p99_ms"] <= 1.0 and cache["per_sec"] >= 20_000
        targets.append(
            f"- GET p99 <= 1 ms at >= 20k req/s: "
            + verdict(ok, f"p99 {c['p99_ms']:.2f} ms at {cache['per_sec']:,.0f} req/s")
        )
    elif scenario == "list":
        ok = c["p50_ms"] <= 50
        targets.append(
            f"- full list of 10k pods <= 50 ms: "
            + verdict(ok, f"p50 {c['p50_ms']:.1f} ms, p99 {c['p99_ms']:.1f} ms client-observed, transfer included")
        )
    else:
        ok = c["p99_ms"] <= 2.0
        targets.append(
            f"- index query returning about 100 of 100k objects, p99 <= 2 ms: "
            + verdict(ok, f"p99 {c['p99_ms']:.2f} ms")
        )

fan = []
for side in ["kubecache", "stalled", "apiserver"]:
    report = load(f"fanout-{side}")
    w = report["watch"]
    lag = w["lag"]
    fan.append(
        f"| {LABELS[side]} | {w['watchers']:,} | {report['writes']:,} of {report['writes_offered']:,} "
        f"| {w['deliveries']:,} | {w['deliveries_per_sec']:,.0f} | {w['mb_per_sec']:,.0f} "
        f"| {lag['p50_ms']:.1f} | {lag['p99_ms']:.1f} | {lag['max_ms']:.1f} | {'yes' if w['complete'] else '**no**'} |"
    )
    if side == "stalled":
        base = load("fanout-kubecache")["watch"]["lag"]["p99_ms"]
        added = lag["p99_ms"] - base
        targets.append(
            "- one stalled watcher adds <= 1 ms to the others' p99 lag: "
            + verdict(
                added <= 1.0,
                f"p99 {lag['p99_ms']:.1f} ms against {base:.1f} ms in the run without it: {added:+.1f} ms; the two runs are separate, so this includes their own noise",
            )
        )
    if side == "kubecache":
        ok = w["deliveries_per_sec"] >= 100_000 and lag["p99_ms"] <= 100
        targets.append(
            "- fan-out, 1,000 watchers: >= 100k deliveries/s with p99 lag <= 100 ms: "
            + verdict(
                ok,
                f"{w['deliveries_per_sec']:,.0f} deliveries/s at {report['writes_offered'] / report['seconds']:.0f} writes/s offered, {report['writes']:,} of {report['writes_offered']:,} done, p99 lag {lag['p99_ms']:.1f} ms",
            )
        )

today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
print(f"""# kubecache serving, side by side with the API server it caches

Measured by `benches/run-serving` on {today}; `nproc` = {nproc}; load average at the end: {loadavg}.
Everything shares the machine's cores: the simulated API server, kubecache and
the load generator (`kubecache-loadtest run`, closed loop: each of its workers
sends its next request when the last is answered; its writer is open loop,
each write sent when due). The peer is the simulated API
server answering the same requests from its own memory (kube-apiserver's watch
cache does the same for `resourceVersion=0`), so `x peer` compares two in-memory
servers; DESIGN.md's reference numbers for a real kube-apiserver are in its
targets table. Reads use `resourceVersion=0` (the cache as it is); kubecache's
index query is `/v1/pods/index/node/NODE`, the peer's the list with
`fieldSelector=spec.nodeName=NODE`. Latencies are client-observed, transfer
included, in ms.

## Requests

| what | kubecache req/s | p50 | p99 | max | peer req/s | p50 | p99 | req/s x peer | p99 x peer | errors |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|
""" + "\n".join(rows) + f"""

## Watch fan-out

1,000 unfiltered watchers of {int(pods):,} pods; writes are merge patches of
random pods upstream (each event is a whole pod, about 4 KB once kubecache has
stripped managedFields, 6–8 KB from the sim). Lag: from the write's
acknowledgement by the API server to a watcher's receipt of that
resourceVersion. Complete: every watcher got every event of the API server's
history that matches it, in order.

| server | watchers | writes done | deliveries | deliveries/s | MB/s | lag p50 | lag p99 | lag max | complete |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|
""" + "\n".join(fan) + """

## DESIGN.md targets

""" + "\n".join(targets) + "\n")
# The hand-kept fan-out comparison of benches/run-fanout (before/after a
# change, same session) rides along.
fanout = Path(__file__).with_name("FANOUT.md")
if fanout.exists():
    sys.stdout.write("\n" + fanout.read_text())
