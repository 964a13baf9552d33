#!/usr/bin/env python3
"""The workspace's import graph, by file: every `crate::`, `super::` and
`self::` path in code outside tests (comments, doc comments, string literals
and `#[cfg(test)]` modules are left out), resolved to the file that holds
the module it names. Prints each import loop (a strongly connected set of
files) and exits 1 if there is one.

    python3 scripts/import-graph.py [--crate NAME] [--edges]
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness")


def strip(src):
    """Source without comments, strings, char literals and test modules."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or (c == "'" and re.match(r"'\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2})'", src[i:i + 12])):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", src[i:])
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    # drop `#[cfg(test)] mod x { ... }` blocks
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
        if not m:
            break
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        text = text[:m.start()] + text[j:]
    return text


def crate_files(crate):
    src = os.path.join(ROOT, crate, "src")
    files = {}
    for dp, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(dp, f)
                rel = os.path.relpath(p, src)[:-3]
                parts = rel.split(os.sep)
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                files[tuple(parts)] = p
    return files


def resolve(files, path):
    """The longest module prefix of `path` that is a file."""
    for k in range(len(path), -1, -1):
        if tuple(path[:k]) in files:
            return tuple(path[:k])
    return None


def uses(text):
    """Every path that starts at crate/super/self, `use` groups expanded."""
    paths = []
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)*)(::\{)?", text):
        if not m.group(2) and not m.group(3):
            continue
        base = [m.group(1)] + [p for p in m.group(2).strip(":").split("::") if p]
        if m.group(3):
            depth, j = 1, m.end()
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            for item in re.split(r"[,{}]", text[m.end():j - 1]):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self" and re.match(r"^[\w:]+$", item):
                    paths.append(base + item.split("::"))
        paths.append(base)
    return paths


def graph(crate):
    files = crate_files(crate)
    edges = {}
    for mod, p in files.items():
        text = strip(open(p, encoding="utf-8").read())
        is_dir_mod = p.endswith(("mod.rs", "lib.rs", "main.rs"))
        for path in uses(text):
            head, rest = path[0], path[1:]
            if head == "crate":
                full = rest
            else:
                here = list(mod) if is_dir_mod else list(mod)
                if head == "super":
                    here = here[:-1] if not is_dir_mod else here[:-1]
                    while rest and rest[0] == "super":
                        here, rest = here[:-1], rest[1:]
                    full = here + rest
                else:
                    full = (list(mod) if is_dir_mod else list(mod)) + rest
            target = resolve(files, full)
            if target is not None and target != mod and target != ():
                # A module's own children are below it.
                edges.setdefault(mod, set()).add(target)
    return files, edges


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
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
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    args = sys.argv[1:]
    only = args[args.index("--crate") + 1] if "--crate" in args else None
    loops = 0
    for crate in sorted(os.listdir(ROOT)):
        if only and crate != only:
            continue
        if not os.path.isdir(os.path.join(ROOT, crate, "src")):
            continue
        files, edges = graph(crate)
        if "--edges" in args:
            for a in sorted(edges):
                print(crate, "/".join(a) or "lib", "->", " ".join("/".join(b) or "lib" for b in sorted(edges[a])))
        for comp in sccs(sorted(files), edges):
            loops += 1
            names = ["/".join(c) or "lib" for c in comp]
            print(f"{crate}: import loop among {len(comp)} files: {', '.join(names)}")
            for a in comp:
                for b in sorted(edges.get(a, ())):
                    if b in comp:
                        print(f"    {'/'.join(a)} -> {'/'.join(b)}")
    print(f"import-graph: {loops} loop(s)")
    sys.exit(1 if loops else 0)


if __name__ == "__main__":
    main()
