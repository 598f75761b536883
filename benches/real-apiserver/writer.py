#!/usr/bin/env python3
"""Patch pods on a real kube-apiserver at a fixed rate, until killed.

usage: writer.py RATE [--namespace NS] [--pods N]   (environment: the kit's env.sh)

Merge patches `{"metadata":{"annotations":{"kubecache-bench/churn":"<n>"}}}`
round-robin over the first N pods of NS (default: the first namespace with
pods), offered open-loop at RATE per second over 8 keep-alive connections as
admin. Prints the writes done and the p50/p99 latency every 10 s to stderr.
"""
import argparse, http.client, json, os, ssl, sys, threading, time, urllib.parse

p = argparse.ArgumentParser()
p.add_argument("rate", type=float)
p.add_argument("--namespace", default="")
p.add_argument("--pods", type=int, default=200)
p.add_argument("--token", default="admin-token")
a = p.parse_args()
url = urllib.parse.urlparse(os.environ["REAL_APISERVER_URL"])
ctx = ssl.create_default_context(cafile=os.environ["REAL_APISERVER_CA"])
H = {"Authorization": f"Bearer {a.token}"}


def conn():
    return http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30)


c = conn()
c.request("GET", "/api/v1/pods?limit=2000" if not a.namespace else f"/api/v1/namespaces/{a.namespace}/pods", headers=H)
items = json.load(c.getresponse())["items"]
if not a.namespace:
    a.namespace = items[0]["metadata"]["namespace"]
names = [i["metadata"]["name"] for i in items if i["metadata"]["namespace"] == a.namespace][: a.pods]
if not names or a.rate <= 0:
    sys.exit(0 if a.rate <= 0 else "no pods to patch")
lock, n, lat = threading.Lock(), [0], []
start = time.monotonic()


def worker(k, workers=8):
    c, i = conn(), k
    while True:
        due = start + i / a.rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        body = json.dumps({"metadata": {"annotations": {"kubecache-bench/churn": str(i)}}})
        path = f"/api/v1/namespaces/{a.namespace}/pods/{names[i % len(names)]}"
        t = time.monotonic()
        try:
            c.request("PATCH", path, body, {**H, "Content-Type": "application/merge-patch+json"})
            c.getresponse().read()
        except Exception:
            c = conn()
            continue
        with lock:
            n[0] += 1
            lat.append(time.monotonic() - t)
        i += workers


for k in range(8):
    threading.Thread(target=worker, args=(k,), daemon=True).start()
while True:
    time.sleep(10)
    with lock:
        s = sorted(lat) or [0]
        print(f"writes {n[0]} ({n[0] / (time.monotonic() - start):.1f}/s) p50 {s[len(s)//2]*1e3:.1f} ms "
              f"p99 {s[int(len(s)*.99)]*1e3:.1f} ms", file=sys.stderr, flush=True)
        lat.clear()
