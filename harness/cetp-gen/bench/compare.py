"""hypothesis-jsonschema's values per second on the cetp-gen corpus, printed
beside cetp-gen's (JSON lines from cetp-gen-bench on stdin) as one table.

Usage: cetp-gen-bench DIR SECONDS | python compare.py DIR SECONDS

Each schema gets SECONDS of generation through @given (generate phase only,
no database, no deadline, health checks off); strategy construction is not
timed, as on the Rust side. Hypothesis stops early on a schema whose values
it has exhausted; the rate is still values over time spent.
"""

import json
import os
import sys
import time
import warnings

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import NonInteractiveExampleWarning
from hypothesis_jsonschema import from_schema


class _Stop(Exception):
    pass


def rate(schema, seconds):
    strategy = from_schema(schema)
    count = 0
    start = [None]
    end = [None]

    @settings(
        max_examples=10**9,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    @given(strategy)
    def draw(value):
        nonlocal count
        if start[0] is None:
            start[0] = time.perf_counter()
        count += 1
        if time.perf_counter() - start[0] > seconds:
            end[0] = time.perf_counter()
            raise _Stop()

    try:
        draw()
    except Exception:
        # Hypothesis replays the stopping example and, as the clock has moved
        # on, may report it as Flaky: the count is what matters.
        if end[0] is None:
            raise
    if start[0] is None:
        return None
    return count / max((end[0] or time.perf_counter()) - start[0], 1e-9)


def main():
    directory, seconds = sys.argv[1], float(sys.argv[2])
    warnings.simplefilter("ignore", NonInteractiveExampleWarning)
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    header = ("schema", "kind", "cetp-gen/s", "hypothesis/s", "ratio", "valid%", "invalid-fail%", "violations")
    table = []
    ratios = {"flat": [], "nested": []}
    for row in rows:
        with open(os.path.join(directory, row["schema"] + ".json")) as fh:
            schema = json.load(fh)["schema"]
        try:
            theirs = rate(schema, seconds)
            theirs_text = "%.0f" % theirs if theirs else "-"
        except Exception as e:  # a schema hypothesis-jsonschema refuses
            theirs, theirs_text = None, "error: %s" % type(e).__name__
        if "error" in row:
            table.append((row["schema"], row["kind"], "error: " + row["error"], theirs_text, "-", "-", "-", "-"))
            continue
        ratio = row["values_per_s"] / theirs if theirs else None
        if ratio:
            ratios[row["kind"]].append(ratio)
        fail = row["invalid_fail_pct"]
        table.append((
            row["schema"],
            row["kind"],
            "%.0f" % row["values_per_s"],
            theirs_text,
            "%.0fx" % ratio if ratio else "-",
            "%.1f" % row["valid_pct"],
            "%.1f" % fail if fail is not None else "-",
            str(row["violations"]),
        ))
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print(line(r))
    print()
    for kind, rs in ratios.items():
        if rs:
            rs = sorted(rs)
            print("%s: %d schemas, ratio min %.0fx, median %.0fx" % (kind, len(rs), rs[0], rs[len(rs) // 2]))
    valid = [r["valid_pct"] for r in rows if "error" not in r]
    fails = [r["invalid_fail_pct"] for r in rows if r.get("invalid_fail_pct") is not None]
    print("valid%% min %.2f over %d schemas; invalid-fail%% min %.2f over %d schemas" % (min(valid), len(valid), min(fails), len(fails)))


if __name__ == "__main__":
    main()
