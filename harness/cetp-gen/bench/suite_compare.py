"""cetp-gen beside hypothesis-jsonschema on the official JSON-Schema-Test-Suite
(draft 2020-12): for how many schemas each generates, refuses, or hangs, and
the share of valid values that validate.

Usage: cetp-gen-suite SUITE_DIR --jsonl | python suite_compare.py SUITE_DIR SECONDS

cetp-gen's rows come from cetp-gen-suite (one process per schema, SECONDS as
its limit; values judged by the jsonschema crate, formats on). Here each
schema's values are drawn from hypothesis-jsonschema's `from_schema` under
an interval timer of SECONDS (construction included, as on the Rust side)
and judged by python-jsonschema's Draft202012Validator with its
FormatChecker. The schemas are the same: the groups of tests/draft2020-12
and of optional/format, keyed "FILE: DESCRIPTION".
"""

import json
import os
import signal
import sys
import warnings

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import NonInteractiveExampleWarning
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator, FormatChecker

DRAWS = 64


class _Hang(Exception):
    pass


class _Done(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Hang()


def groups(directory):
    files = []
    for sub in ("", os.path.join("optional", "format")):
        d = os.path.join(directory, sub)
        if os.path.isdir(d):
            files += [os.path.join(sub, f) for f in os.listdir(d) if f.endswith(".json")]
    for rel in sorted(files, key=lambda r: os.path.join(directory, r)):
        with open(os.path.join(directory, rel)) as fh:
            for g in json.load(fh):
                yield "%s: %s" % (rel, g.get("description", "")), g["schema"]


def draw(schema):
    """Values from hypothesis-jsonschema: a list, or raises."""
    values = []
    strategy = from_schema(schema)

    @settings(
        max_examples=DRAWS,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(strategy)
    def collect(value):
        values.append(value)
        if len(values) >= DRAWS:
            raise _Done()

    try:
        collect()
    except _Done:
        pass
    return values


def hypothesis_row(schema, seconds):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        values = draw(schema)
    except _Hang:
        return {"result": "hang"}
    except Exception as e:  # a schema hypothesis-jsonschema refuses
        return {"result": "refused", "why": type(e).__name__}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if not values:
        return {"result": "refused", "why": "no value"}
    try:
        v = Draft202012Validator(schema, format_checker=FormatChecker())
        ok = sum(1 for x in values if v.is_valid(x))
    except Exception as e:  # the judge cannot compile it (remote refs)
        return {"result": "unjudged", "why": type(e).__name__, "values": len(values)}
    return {
        "result": "generated" if ok == len(values) else "wrong",
        "values": len(values),
        "valid": ok,
    }


def main():
    directory, seconds = sys.argv[1], float(sys.argv[2])
    warnings.simplefilter("ignore", NonInteractiveExampleWarning)
    warnings.simplefilter("ignore")
    ours = {}
    for line in sys.stdin:
        if line.strip():
            row = json.loads(line)
            ours[row["schema"]] = row
    counts = {"cetp-gen": {}, "hypothesis-jsonschema": {}}
    values = {"cetp-gen": [0, 0], "hypothesis-jsonschema": [0, 0]}
    both = 0
    total = 0
    for key, schema in groups(directory):
        total += 1
        mine = ours.get(key, {"result": "missing"})
        theirs = hypothesis_row(schema, seconds)
        for name, row in (("cetp-gen", mine), ("hypothesis-jsonschema", theirs)):
            counts[name][row["result"]] = counts[name].get(row["result"], 0) + 1
        if mine.get("valid") is not None and mine["result"] in ("generated", "wrong"):
            values["cetp-gen"][0] += mine["valid"]
            values["cetp-gen"][1] += mine["valid"] - mine.get("valid_rejected", 0)
        if theirs.get("valid") is not None:
            values["hypothesis-jsonschema"][0] += theirs["values"]
            values["hypothesis-jsonschema"][1] += theirs["valid"]
        if mine["result"] == "generated" and theirs["result"] == "generated":
            both += 1
    results = ["generated", "wrong", "refused", "unjudged", "hang", "missing"]
    header = ("of %d schemas" % total, "cetp-gen", "hypothesis-jsonschema")
    rows = [
        ("generated, every value valid", "generated"),
        ("generated, some value invalid", "wrong"),
        ("refused (an error)", "refused"),
        ("generated, judge could not compile the schema", "unjudged"),
        ("no answer within %g s" % seconds, "hang"),
        ("not run", "missing"),
    ]
    table = [header]
    for label, key in rows:
        a = counts["cetp-gen"].get(key, 0)
        b = counts["hypothesis-jsonschema"].get(key, 0)
        if a or b or key in ("generated", "hang"):
            table.append((label, str(a), str(b)))
    pct = lambda v: "%.2f %% of %d" % (100.0 * v[1] / v[0], v[0]) if v[0] else "-"
    table.append(("valid values", pct(values["cetp-gen"]), pct(values["hypothesis-jsonschema"])))
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(table[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table[1:]:
        print(line(r))
    print()
    print("both generate only valid values for %d schemas" % both)
    assert set(counts["cetp-gen"]) <= set(results), counts


if __name__ == "__main__":
    main()
