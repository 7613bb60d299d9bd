#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`make lint`: the engine's files import each other in no circle (issue 42, item 3).

A file imports another when one of its paths (in a `use`, or written out in the
code) names the other file's module or an item of it: `super::Agent` in
src/engine/agent/queues.rs names src/engine/agent.rs. A parent declaring a
child (`mod queues;`) is not an import; a parent naming a child's item is.
Paths are resolved against the crate's files: the longest prefix of the path
that is a module with a file of its own is the file imported.

The check fails when the files under src/engine/ (and src/engine.rs) have a
strongly connected component of more than one file, and prints each such
component with one import of each file that keeps it closed.

Usage: check-imports.py ROOT          check
       check-imports.py ROOT --graph  print every engine file's imports
       check-imports.py --self-test   check the check on a made-up crate
"""
import os
import re
import sys

ENGINE = ("src/engine.rs", "src/engine/")
PATH = re.compile(r"\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+")
USE = re.compile(r"\buse\s+((?:crate|super|self)::[^;]*);", re.S)
CHILD = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+);", re.M)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def module_of(rel):
    """The module path of a crate file: src/engine/agent.rs -> crate::engine::agent."""
    if rel == "src/rmad_main.rs":
        return ("crate",)
    parts = rel[len("src/"):-len(".rs")].split("/")
    return ("crate",) + tuple(parts)


def crate_files(root):
    """Every Rust file of the crate, by module path."""
    files = {}
    for top, _, names in os.walk(os.path.join(root, "src")):
        for name in names:
            if name.endswith(".rs"):
                rel = os.path.relpath(os.path.join(top, name), root)
                files[module_of(rel)] = rel
    return files


def expand(tree):
    """The whole paths of one `use` tree: `a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    depth = 0
    for i, ch in enumerate(tree):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "{" and depth == 1:
            prefix, inner = tree[:i], tree[i + 1:tree.rindex("}")]
            parts, depth2, start = [], 0, 0
            for j, c in enumerate(inner):
                depth2 += {"{": 1, "}": -1}.get(c, 0)
                if c == "," and depth2 == 0:
                    parts.append(inner[start:j])
                    start = j + 1
            parts.append(inner[start:])
            out = []
            for part in parts:
                if part:
                    out += [prefix + sub for sub in expand(part)]
            return out
    return [tree]


def absolute(path, here):
    """`path` (crate::, super::, self::) from module `here`, as a tuple of segments."""
    segs = [s for s in path.split("::") if s]
    if segs[0] == "crate":
        return tuple(["crate"] + [s for s in segs[1:] if s != "self"])
    cur = list(here)
    while segs and segs[0] in ("super", "self"):
        if segs.pop(0) == "super":
            cur.pop()
    return tuple(cur + [s for s in segs if s != "self"])


def target(path, files):
    """The file whose module is the longest prefix of `path`."""
    for n in range(len(path), 0, -1):
        if path[:n] in files:
            return path[:n]
    return None


def imports(root, files, mod):
    """{imported module: first path that imports it} for one file."""
    text = COMMENT.sub("", open(os.path.join(root, files[mod]), encoding="utf-8").read())
    # A child module declared here may be named without `self::` (`use queues::Queues;`).
    for child in CHILD.findall(text):
        text = re.sub(r"(?<![:\w])%s::" % child, "self::%s::" % child, text)
    paths = []
    for m in USE.finditer(text):
        paths += expand(m.group(1))
    text = USE.sub("", text)
    paths += PATH.findall(text)
    out = {}
    for p in paths:
        t = target(absolute(p.replace("::*", ""), mod), files)
        if t and t != mod:
            out.setdefault(t, p)
    return out


def components(graph):
    """Tarjan's strongly connected components of `graph` ({node: {node: why}})."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
            comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def self_test():
    """A made-up crate whose circles the check must find (`make lint` runs it first)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src", "engine", "a"))
        tree = {
            "src/rmad_main.rs": "mod engine;\n",
            # A parent naming its child's item without `self::`, the child its parent's.
            "src/engine.rs": "mod a;\nmod b;\nuse a::{Q as R, X};\n",
            "src/engine/a.rs": "mod c;\nuse super::{\n    b::Y, //\n};\n",
            "src/engine/a/c.rs": "// crate::engine::b is named in a comment only\n",
            "src/engine/b.rs": "fn f() { crate::engine::Z; }\n",
        }
        for rel, text in tree.items():
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        files = crate_files(d)
        graph = {m: set(imports(d, files, m)) for m in files}
        eng, a, b, c = (("crate", "engine"), ("crate", "engine", "a"),
                        ("crate", "engine", "b"), ("crate", "engine", "a", "c"))
        assert graph[eng] == {a}, graph[eng]
        assert graph[a] == {b} and graph[b] == {eng} and graph[c] == set(), graph
        comps = [sorted(x) for x in components(graph) if len(x) > 1]
        assert comps == [sorted([eng, a, b])], comps
    print("check-imports: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = sys.argv[1]
    files = crate_files(root)
    engine = {m for m, rel in files.items() if rel == ENGINE[0] or rel.startswith(ENGINE[1])}
    graph = {}
    for mod in engine:
        graph[mod] = {t: p for t, p in imports(root, files, mod).items() if t in engine}
    if sys.argv[2:] == ["--graph"]:
        for mod in sorted(graph):
            print(files[mod] + ": " + " ".join(sorted(files[t] for t in graph[mod])))
        return
    circles = [c for c in components(graph) if len(c) > 1]
    for comp in circles:
        print("check-imports: these engine files import each other in a circle:")
        for mod in sorted(comp):
            for t in sorted(graph[mod]):
                if t in comp:
                    print("  %s -> %s (%s)" % (files[mod], files[t], graph[mod][t]))
    sys.exit(1 if circles else 0)


if __name__ == "__main__":
    main()
