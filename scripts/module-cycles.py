#!/usr/bin/env python3
"""Fails if the modules of a crate import each other in a cycle.

For each production source file (tests apart) it reads the `crate::` and
`super::` paths it names and draws an edge between the two sibling modules
under their closest common parent (`controllers::daemonset::sync` naming
`controllers::daemonset::update` is an edge sync -> update; `scheduler`
naming `crate::toolkit` an edge scheduler -> toolkit). A strongly connected
set of more than one module is a cycle. Run by scripts/test.sh.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

CRATES = {
    "bosun": "src",
    "bosun-control": "control/src",
    "bosun-agent": "agent/src",
    "bosun-test-support": "test-support/src",
}


def module_path(src, path):
    parts = os.path.relpath(path, src)[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def references(module, path, text):
    text = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
    cut = text.find("#[cfg(test)]\nmod tests {")
    if cut >= 0:
        text = text[:cut]
    refs = [m.group(1).split("::") for m in re.finditer(r"crate::((?:\w+::)*\w+)", text)]
    for group in re.finditer(r"use crate::\{([^;]*)\};", text, re.S):
        refs += [p.split("::") for p in re.findall(r"(\w+(?:::\w+)*)", group.group(1))]
    parent = module[:-1]
    for group in re.finditer(r"use super::\{([^;]*)\};", text, re.S):
        refs += [parent + p.split("::") for p in re.findall(r"(\w+(?:::\w+)*)", group.group(1))]
    refs += [parent + m.group(1).split("::") for m in re.finditer(r"super::((?:\w+::)*\w+)", text)]
    return refs


def cycles(root, src):
    files = subprocess.check_output(["git", "ls-files", src + "/*.rs"], cwd=root, text=True).split()
    edges = defaultdict(set)
    for f in files:
        module = module_path(src, f)
        if f.startswith(src + "/bin/") or (module and module[-1] in ("tests", "testing")) or f.endswith("_tests.rs"):
            continue
        with open(os.path.join(root, f)) as fh:
            text = fh.read()
        for ref in references(module, f, text):
            k = 0
            while k < len(module) and k < len(ref) and module[k] == ref[k]:
                k += 1
            if k >= len(module) or k >= len(ref):
                continue
            a, b = tuple(module[: k + 1]), tuple(ref[: k + 1])
            if a != b:
                edges[a].add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted("::".join(x) for x in comp))

    for v in set(edges) | {x for vs in edges.values() for x in vs}:
        if v not in index:
            visit(v)
    return found


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    bad = [(crate, c) for crate, src in CRATES.items() for c in cycles(root, src)]
    for crate, c in bad:
        print(f"{crate}: modules import each other in a cycle: {', '.join(c)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
