#!/usr/bin/env python3
"""Lists the Rust functions of harness/ longer than a limit (issue 28: no
function outside data tables runs past about 120 lines), counted as rustc
sees them: comments and string contents stripped, blank lines not counted,
`#[cfg(test)]` modules and tests/ directories left out.

    scripts/long-functions.py [--max N] [--allow FILE] [ROOT...]

Exits 1 when a function over the limit is not in the allow list
(scripts/long-functions.allow: `path function` per line, each with the
reason it may be long, for data tables). Prints every function over the
limit either way, longest first, so the figures are seen in the test log.
"""
import argparse
import os
import re
import sys

IDENT = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z_0-9]*)")
CHAR = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'")
RAW = re.compile(r'r(#*)"')


def strip(src):
    """The source with comments removed and string/char literals emptied;
    newlines are kept so that line numbers still hold."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
            continue
        prev = src[i - 1] if i else " "
        m = RAW.match(src, i) if c == "r" and not (prev.isalnum() or prev == "_") else None
        if m:
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            m = CHAR.match(src, i)
            if m:
                out.append("' '")
                i = m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def test_module_spans(text):
    """(start, end) of each `#[cfg(test)]` item's braces."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        k = text.find("{", m.end())
        semi = text.find(";", m.end())
        if k < 0 or (0 <= semi < k):
            continue
        end = matching(text, k)
        spans.append((m.start(), end))
    return spans


def matching(text, k):
    depth = 0
    for j in range(k, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def functions(path):
    text = strip(open(path, encoding="utf-8").read())
    tests = test_module_spans(text)
    for m in IDENT.finditer(text):
        if any(a <= m.start() <= b for a, b in tests):
            continue
        # The body opens at the first `{` outside parentheses; a `;` first
        # means a declaration without a body (a trait method).
        k, par = m.end(), 0
        while k < len(text):
            ch = text[k]
            if ch in "([":
                par += 1
            elif ch in ")]":
                par -= 1
            elif ch == ";" and par == 0:
                k = -1
                break
            elif ch == "{" and par == 0:
                break
            k += 1
        if k < 0 or k >= len(text):
            continue
        end = matching(text, k)
        lines = sum(1 for line in text[m.start() : end + 1].split("\n") if line.strip())
        yield lines, m.group(1), text.count("\n", 0, m.start()) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--allow", default=os.path.join(os.path.dirname(__file__), "long-functions.allow"))
    ap.add_argument("roots", nargs="*", default=["harness"])
    a = ap.parse_args()
    allowed = set()
    if os.path.exists(a.allow):
        for line in open(a.allow, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                path, name = line.split()[:2]
                allowed.add((path, name))
    found = []
    for root in a.roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in ("target", "tests")]
            for f in filenames:
                if f.endswith(".rs"):
                    p = os.path.join(dirpath, f)
                    for lines, name, line in functions(p):
                        if lines > a.max:
                            found.append((lines, name, p, line))
    found.sort(reverse=True)
    bad = 0
    for lines, name, p, line in found:
        ok = (p, name) in allowed
        bad += not ok
        print(f"{lines:5} {p}:{line} {name}{'  (allowed: data table)' if ok else ''}")
    print(f"long-functions: {len(found)} over {a.max} lines, {bad} not allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
