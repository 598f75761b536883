#!/usr/bin/env python3
"""Derives kubernetes/history.tsv: which fields of the vendored (newest)
schema an older Kubernetes minor lacks or held otherwise in Go.

usage: history.py VENDORED OPENAPI_OLD OPENAPI_NEW GO_OLD > history.tsv
  VENDORED     wire/kubernetes (the schema's Go types, Kubernetes 1.36)
  OPENAPI_OLD  an unpacked k8s-openapi 0.24.0 crate (src/v1_28 .. src/v1_32)
  OPENAPI_NEW  an unpacked k8s-openapi 0.29.0 crate (src/v1_33 .. src/v1_37)
  GO_OLD       usr/share/gocode/src of Debian's golang-k8s-api-dev and
               golang-k8s-apimachinery-dev 0.32.3 (Kubernetes 1.32)
"""
import glob, os, re, sys

NEWEST = 36
OLDEST = 28
# Go holdings the sources above cannot date (no Go types older than 1.32 are
# packaged): the golden corpus (kube-apiserver 1.28.4) writes these fields as
# null when unset; 1.32's types have omitempty. Kubernetes PR #120204 (1.29)
# made the rule's onPodConditions optional.
MANUAL = [
    ("k8s.io.api.batch.v1.PodFailurePolicyOnExitCodesRequirement", "containerName", "go", 29, "Nil"),
    ("k8s.io.api.batch.v1.PodFailurePolicyRule", "onPodConditions", "go", 29, "Nil"),
]

def go_structs(root):
    """(pkg, struct) -> [(json, omitempty, go type, embedded)] of structs with protobuf tags."""
    out = {}
    files = glob.glob(root + "/k8s.io/api/**/types.go", recursive=True)
    files += glob.glob(root + "/k8s.io/apimachinery/pkg/**/types.go", recursive=True)
    files += [root + "/k8s.io/apimachinery/pkg/apis/meta/v1/" + f for f in ("group_version.go", "watch.go")]
    for f in files:
        if not os.path.exists(f):
            continue
        pkg = os.path.dirname(os.path.relpath(f, root))
        cur = None
        for line in open(f):
            m = re.match(r"^type (\w+) struct", line)
            if m:
                cur = out.setdefault((pkg, m.group(1)), [])
                continue
            if line.startswith("}"):
                cur = None
                continue
            tombstone = line.lstrip().startswith("//")
            m = re.search(r'json:"([^"]*)".*protobuf:"', line) if cur is not None and not tombstone else None
            if m:
                words = line.split()
                name, *opts = m.group(1).split(",")
                embedded = words[1].startswith("`")
                ty = words[0] if embedded else words[1]
                cur.append((name, "omitempty" in opts, ty, embedded))
    return out

def holding(omitempty, ty):
    nil = ty.startswith(("*", "[]", "map["))
    return ("NilOmitEmpty" if omitempty else "Nil") if nil else ("ValueOmitEmpty" if omitempty else "Value")

def openapi(crate, minor):
    """(pkg, struct) -> set of JSON keys, from k8s-openapi's src/v1_MM."""
    base = f"{crate}/src/v1_{minor}"
    out = {}
    for f in glob.glob(base + "/**/*.rs", recursive=True):
        text = open(f).read()
        m = re.search(r"^pub struct (\w+)", text, re.M)
        if not m:
            continue
        rel = os.path.dirname(os.path.relpath(f, base))
        pkg = "k8s.io/" + rel
        out[(pkg, m.group(1))] = set(re.findall(r'^\s*"([^"]+)" => Field::Key_', text, re.M))
    return out

def proto_name(pkg, struct):
    return pkg.replace("/", ".") + "." + struct

def main():
    vendored, old_crate, new_crate, go_old = sys.argv[1:5]
    newest = go_structs(vendored)
    older = go_structs(go_old)
    keys = {m: openapi(old_crate if m <= 32 else new_crate, m) for m in range(OLDEST, NEWEST + 1)}
    # Inline-embedded structs have no OpenAPI definition: their keys are the embedder's.
    inline = {}
    for (pkg, struct), fields in newest.items():
        for name, _, ty, embedded in fields:
            if embedded and name == "":
                inline[(pkg, ty.lstrip("*"))] = (pkg, struct)
    rows = set(MANUAL)
    for (pkg, struct), fields in newest.items():
        owner = inline.get((pkg, struct), (pkg, struct))
        for name, omitempty, ty, embedded in fields:
            if name in ("", "-"):
                continue
            # The first minor from which every minor up to the newest has the field.
            since = None
            for minor in range(NEWEST, OLDEST - 1, -1):
                known = keys[minor].get(owner)
                if known is None:
                    break  # the struct is newer: the field came with it
                if name not in known:
                    since = minor + 1
                    break
            if since is not None:
                rows.add((proto_name(pkg, struct), name, "added", since, ""))
            before = {n: (o, t) for n, o, t, _ in older.get((pkg, struct), [])}
            if name in before:
                was, now = holding(*before[name]), holding(omitempty, ty)
                if was != now:
                    # Changed between 1.33 and 1.36: taken as 1.33.
                    rows.add((proto_name(pkg, struct), name, "go", 33, was))
    print("# message\tfield\tchange\tminor\tbefore  (derived by history.py; see README.md)")
    for row in sorted(rows):
        print("\t".join(str(c) for c in row))

main()
