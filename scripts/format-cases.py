#!/usr/bin/env python3
"""Writes vectors/cases/*.json in the house layout: one case header line,
one line per other field, one line per step. Data is unchanged."""
import json, pathlib, sys

def one(v):
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))

def fmt(doc):
    out = ["{"]
    top = [k for k in doc if k != "cases"]
    for k in top:
        out.append(f'  "{k}": {one(doc[k])},')
    out.append('  "cases": [')
    for ci, c in enumerate(doc["cases"]):
        out.append("    {")
        head = [k for k in ("id", "title", "role", "level") if k in c]
        out.append("      " + ", ".join(f'"{k}": {one(c[k])}' for k in head) + ",")
        rest = [k for k in c if k not in head and k != "steps"]
        for k in rest:
            out.append(f'      "{k}": {one(c[k])},')
        out.append('      "steps": [')
        for si, s in enumerate(c["steps"]):
            out.append("        " + one(s) + ("," if si + 1 < len(c["steps"]) else ""))
        out.append("      ]")
        out.append("    }" + ("," if ci + 1 < len(doc["cases"]) else ""))
    out.append("  ]")
    out.append("}")
    return "\n".join(out) + "\n"

root = pathlib.Path(__file__).resolve().parent.parent / "vectors" / "cases"
check = "--check" in sys.argv
bad = []
for p in sorted(root.glob("*.json")):
    text = p.read_text()
    want = fmt(json.loads(text))
    if text != want:
        if check:
            bad.append(p.name)
        else:
            p.write_text(want)
if bad:
    sys.exit("not in the house layout (run scripts/format-cases.py): " + ", ".join(bad))
