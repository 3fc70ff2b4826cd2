#!/usr/bin/env python3
"""The map of the code, kept true to the tree.

`docs/code-map.md` is generated: every module of the workspace's crates
(each `.rs` file and folder under a crate's `src/`) with the first
sentence of its `//!` doc comment. The README's "Map of the code" is the
guide written by hand; it must name every module down to two levels below
a crate's `src/` (`agent/src/sync_loop.rs`, `agent/src/dns/zone.rs`,
`control/src/api/strategy/`), in backticks, by its name (`zone`,
`zone.rs`, `dns/zone.rs`; a folder as `dns/`), and every path it names (a
backticked word with a `/` or ending in `.rs`) must exist.

    python3 scripts/code-map.py            # check both (scripts/test.sh)
    python3 scripts/code-map.py --write    # regenerate docs/code-map.md
    python3 scripts/code-map.py --missing  # the modules the README omits
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATE_SOURCES = ["src", "control/src", "agent/src", "test-support/src"]
SKIP_FILES = {"lib.rs", "main.rs", "mod.rs", "tests.rs"}


def map_section():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    start = text.index("## Map of the code")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def modules(max_depth=None):
    """(path relative to the repo, its names a map may use), down to
    `max_depth` levels below a crate's src/ (1: src/x.rs and src/x/)."""
    found = []
    for crate in CRATE_SOURCES:
        base = os.path.join(ROOT, crate)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "tests")
            rel_dir = os.path.relpath(dirpath, base)
            depth = 0 if rel_dir == "." else rel_dir.count(os.sep) + 1
            if max_depth is not None and depth >= max_depth:
                dirnames[:] = []
                continue
            for d in dirnames:
                if only_tests(os.path.join(dirpath, d)):
                    continue
                rel = os.path.normpath(os.path.join(rel_dir, d))
                path = os.path.join(crate, rel) + "/"
                found.append((path, folder_names(rel) | {path}))
            for f in sorted(filenames):
                if not f.endswith(".rs") or f in SKIP_FILES or f.endswith("_tests.rs"):
                    continue
                rel = os.path.normpath(os.path.join(rel_dir, f))
                path = os.path.join(crate, rel)
                found.append((path, file_names(rel) | {path}))
    return found


def only_tests(folder):
    """A folder holding nothing but a file's `tests.rs` (its unit tests)."""
    entries = os.listdir(folder)
    return all(e in SKIP_FILES for e in entries) and "mod.rs" not in entries


def folder_names(rel):
    parts = rel.split(os.sep)
    names = {parts[-1] + "/", parts[-1]}
    for i in range(len(parts)):
        names.add("/".join(parts[i:]) + "/")
    return names


def file_names(rel):
    parts = rel.split(os.sep)
    stem = parts[-1][:-3]
    names = {stem, parts[-1]}
    for i in range(len(parts) - 1):
        tail = "/".join(parts[i:])
        names.add(tail)
        names.add(tail[:-3])
    return names


def named_in(section):
    words = set()
    for quoted in re.findall(r"`([^`]+)`", section):
        for word in re.split(r"[\s,()]+", quoted):
            word = word.strip(".:;")
            if word:
                words.add(word)
                # `patch/schema.rs` names the folder `patch/` too.
                parts = word.split("/")
                for i in range(1, len(parts)):
                    words.add("/".join(parts[:i]) + "/")
    return words


def stale_paths(section, tree):
    """Backticked paths in the map that name nothing in the tree."""
    stale = []
    all_paths = [p for p, _ in tree]
    for word in sorted(named_in(section)):
        if word.startswith(("/", "-", "http", "$", "~", "..")) or "*" in word or "<" in word:
            continue
        if not (word.endswith(".rs") or word.endswith("/")) or word in SKIP_FILES:
            continue
        if word.endswith("/") and word.count("/") == 1 and word[:-1] in ("proto",):
            continue
        if not any(p == word or p.endswith("/" + word) for p in all_paths):
            if not os.path.exists(os.path.join(ROOT, word)):
                stale.append(word)
    return stale


def first_sentence(path):
    """The first sentence of a file's `//!` comment, on one line."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("//!"):
                break
            text = line[3:].strip()
            if not text:
                if lines:
                    break
                continue
            lines.append(text)
    text = " ".join(lines)
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return (m.group(1) if m else text) or "(no doc comment)"


def generated():
    out = [
        "# Every module of the code",
        "",
        "Generated by `python3 scripts/code-map.py --write` from each module's",
        "doc comment (its first sentence); `scripts/test.sh` checks it is up",
        "to date. The README's \"Map of the code\" is the guided tour.",
    ]
    for crate in CRATE_SOURCES:
        base = os.path.join(ROOT, crate)
        if not os.path.isdir(base):
            continue
        out += ["", f"## `{crate}/`", ""]
        for name in ("lib.rs", "main.rs"):
            if os.path.exists(os.path.join(base, name)):
                out.append(f"- `{name}`: {first_sentence(os.path.join(base, name))}")
        walk(base, "", 0, out)
    return "\n".join(out) + "\n"


def walk(base, rel, depth, out):
    here = os.path.join(base, rel)
    indent = "  " * depth
    for entry in sorted(os.listdir(here)):
        path = os.path.join(here, entry)
        if os.path.isdir(path):
            if entry == "tests" or only_tests(path):
                continue
            doc = os.path.join(path, "mod.rs")
            line = first_sentence(doc) if os.path.exists(doc) else ""
            out.append(f"{indent}- `{entry}/`" + (f": {line}" if line else ""))
            walk(base, os.path.join(rel, entry), depth + 1, out)
        elif entry.endswith(".rs") and entry not in SKIP_FILES and not (depth == 0 and entry in ("lib.rs", "main.rs")):
            out.append(f"{indent}- `{entry}`: {first_sentence(path)}")


GENERATED = os.path.join(ROOT, "docs", "code-map.md")


def main():
    if "--write" in sys.argv:
        with open(GENERATED, "w", encoding="utf-8") as f:
            f.write(generated())
        print(f"wrote {os.path.relpath(GENERATED, ROOT)}")
        return 0
    section = map_section()
    words = named_in(section)
    tree = modules(max_depth=2)
    missing = [p for p, names in tree if not names & words]
    stale = stale_paths(section, modules())
    if "--missing" in sys.argv:
        print("\n".join(missing))
        return 0
    for p in missing:
        print(f"README map: {p} is not named in the map of the code")
    for w in stale:
        print(f"README map: `{w}` names no file or folder in the tree")
    current = os.path.exists(GENERATED) and open(GENERATED, encoding="utf-8").read() == generated()
    if not current:
        print("docs/code-map.md is out of date: run python3 scripts/code-map.py --write")
    if missing or stale:
        print(f"{len(missing)} modules missing, {len(stale)} stale paths: update README.md's map")
    if missing or stale or not current:
        return 1
    print(f"README map: all {len(tree)} modules two levels deep named; docs/code-map.md up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
