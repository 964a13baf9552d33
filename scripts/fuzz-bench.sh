#!/usr/bin/env bash
# Time to first finding per mutant, `cetp fuzz` (structured) judged by the
# differential oracle and by the descriptor oracle (`--oracle descriptor`,
# the one any Provider gets), beside the blind byte-level baseline, with no
# vectors; then fuzz runs against the reference, the notes fixture and each
# legal variant, which must report no finding.
#
#   BUDGET=60s        per mutant, structured mutator
#   DESC_BUDGET=...   per mutant, descriptor oracle (default BUDGET); DESCRIPTOR=0 skips it
#   BLIND_BUDGET=...  per mutant, blind mutator (default BUDGET); BLIND=0 skips it
#   CLEAN_ORACLES="differential descriptor"  oracles of the clean runs
#   CLEAN_BUDGET=600s per clean run (reference, each legal variant)
#   MUTANTS="a b"     only these mutants (default: every non-equivalent one)
#   VARIANTS="a b"    only these variants (default: all); VARIANTS=none skips
#   THROUGHPUT=0      skips the throughput figures; THROUGHPUT_BUDGET=30s per run
#   FOREIGN=0         skips the Providers not built on the reference engine:
#                     the Java sample on the JVM device once per observer kind,
#                     its seeded defects, the reference on `cetp sim
#                     --fixed-clock` (scripts/fuzz-foreign-check.sh, with
#                     FOREIGN_BUDGET=600s per clean run, DEFECT_BUDGET=60s;
#                     each clean run again with --no-fill beside it: the
#                     waits slept out, the pace to compare with)
#   SEED=7
#
#   scripts/fuzz-bench.sh --full-clean
#       only the issue's clean runs, in one command: the reference, the notes
#       fixture and every legal variant, 10 minutes each through the
#       descriptor oracle (about 5.5 hours; CLEAN_BUDGET overrides the 10 min)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --full-clean ]; then
  MUTANTS=none THROUGHPUT=0 CLEAN_ORACLES=descriptor CLEAN_BUDGET=${CLEAN_BUDGET:-600s}
  export MUTANTS THROUGHPUT CLEAN_ORACLES CLEAN_BUDGET
  unset VARIANTS
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--full-clean]  (the rest is set through the environment, see the header)" >&2
  exit 2
fi
budget=${BUDGET:-60s}
blind_budget=${BLIND_BUDGET:-$budget}
desc_budget=${DESC_BUDGET:-$budget}
clean_oracles=${CLEAN_ORACLES:-differential descriptor}
clean=${CLEAN_BUDGET:-600s}
seed=${SEED:-7}
cargo build -q --release -p cetp-cli
cetp=target/release/cetp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fixture/mutant pairs from the mutants' documentation
pairs=$(python3 - <<'PY'
import json, os
ms = json.load(open("vectors/mutants/mutants.json"))["mutants"]
only = os.environ.get("MUTANTS", "").split()
if only == ["none"]:
    ms = []
for m in ms:
    if m.get("equivalent"):
        continue
    if only and m["name"] not in only:
        continue
    for p in m.get("providers", ["reference"]):
        print(f"{p} {m['name']}")
PY
)

first_ms() { python3 -c "import json,sys;r=json.load(open(sys.argv[1]));v=r['first_finding_ms'];print('-' if v is None else f'{v/1000:.1f}')" "$1" 2>/dev/null || echo "err"; }

# Each fixture's lock, as the release before: every mutant is held to it, as
# `cetp selftest` holds every run (a schema changed under the same revision
# shows only against the release before).
"$cetp" lock --target sim --out "$work/reference.lock" >/dev/null
"$cetp" lock --target sim:provider=notes --out "$work/notes.lock" >/dev/null

target_of() { if [ "$1" = reference ]; then echo "sim:mutant=$2"; else echo "sim:provider=$1,mutant=$2"; fi; }

if [ -n "$pairs" ]; then
printf '%-8s %-42s %12s %12s %12s\n' fixture mutant "structured s" "descriptor s" "blind s"
found=0; total=0; s_times=(); d_times=(); b_times=()
while read -r fixture mutant; do
  [ -z "$fixture" ] && continue
  total=$((total+1))
  t=$(target_of "$fixture" "$mutant")
  "$cetp" fuzz --target "$t" --lock "$work/$fixture.lock" --budget "$budget" --seed "$seed" --max-findings 1 --out "$work/s" -q >/dev/null 2>&1 || true
  s=$(first_ms "$work/s/fuzz.json")
  if [ "${DESCRIPTOR:-1}" = 0 ]; then d=skipped; else
    "$cetp" fuzz --target "$t" --oracle descriptor --lock "$work/$fixture.lock" --budget "$desc_budget" --seed "$seed" --max-findings 1 --out "$work/d" -q >/dev/null 2>&1 || true
    d=$(first_ms "$work/d/fuzz.json")
  fi
  if [ "${BLIND:-1}" = 0 ]; then b=skipped; else
    "$cetp" fuzz --target "$t" --lock "$work/$fixture.lock" --budget "$blind_budget" --seed "$seed" --max-findings 1 --mutator blind --out "$work/b" -q >/dev/null 2>&1 || true
    b=$(first_ms "$work/b/fuzz.json")
  fi
  printf '%-8s %-42s %12s %12s %12s\n' "$fixture" "$mutant" "$s" "$d" "$b"
  [ "$s" != "-" ] && [ "$s" != "err" ] && found=$((found+1))
  s_times+=("$s"); d_times+=("$d"); b_times+=("$b")
done <<< "$pairs"
python3 - "$budget" "$blind_budget" "$desc_budget" "${s_times[@]}" -- "${b_times[@]}" -- "${d_times[@]}" <<'PY'
import sys, statistics
args = sys.argv[4:]
i = args.index("--")
j = args.index("--", i + 1)
def secs(x, cap):
    return cap if x in ("-", "err") else float(x)
cap = float(sys.argv[1].rstrip("s"))
bcap = float(sys.argv[2].rstrip("s"))
dcap = float(sys.argv[3].rstrip("s"))
sa, ba = args[:i], [x for x in args[i+1:j] if x != "skipped"]
da = [x for x in args[j+1:] if x != "skipped"]
s = [secs(x, cap) for x in sa]
b = [secs(x, bcap) for x in ba]
d = [secs(x, dcap) for x in da]
if s:
    print(f"structured: found {sum(1 for x in sa if x not in ('-','err'))}/{len(s)} within {cap:.0f}s, median {statistics.median(s):.2f}s, max {max(s):.1f}s (a miss counts as the budget)")
if d:
    print(f"descriptor: found {sum(1 for x in da if x not in ('-','err'))}/{len(d)} within {dcap:.0f}s, median {statistics.median(d):.2f}s, max {max(d):.1f}s (a miss counts as the budget)")
    both = [(x, y) for x, y in zip(sa, da) if x not in ('-','err') and y not in ('-','err')]
    if both:
        print(f"descriptor / differential time to first finding, median over the {len(both)} both found: {statistics.median([float(y)/max(float(x),0.01) for x, y in both]):.1f}x")
    missed = [i for i, y in enumerate(da) if y in ('-','err')]
    if missed:
        print(f"descriptor missed: {len(missed)} (rows marked '-' above)")
if b:
    print(f"blind:      found {sum(1 for x in ba if x not in ('-','err'))}/{len(b)} within {bcap:.0f}s, median {statistics.median(b):.2f}s (a miss counts as the budget)")
    ms, mb = statistics.median(s), statistics.median(b)
    print(f"median speed-up: at least {mb/max(ms,0.01):.0f}x (the blind median is capped at its budget)")
PY
fi

if [ "${THROUGHPUT:-1}" != 0 ]; then
  echo
  cargo build -q --release -p cetp-fuzz --example fuzz_throughput
  target/release/examples/fuzz_throughput --ms 2000
  # The whole fuzz loop (generation, the target, the oracle, every check):
  # judged envelopes per second, in-process and over TCP to `cetp sim`.
  tb=${THROUGHPUT_BUDGET:-30s}
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  "$cetp" sim --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  sim_pid=$!
  for _ in $(seq 50); do python3 -c "import socket,sys;socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null && break; sleep 0.1; done
  echo
  printf '%-44s %-13s %10s %12s\n' "whole fuzz loop (${tb}, reference)" oracle sequences envelopes/s
  for where in in-process tcp; do
    if [ "$where" = tcp ]; then t=(--target "tcp:127.0.0.1:$port" --profile profiles/reference.toml); else t=(--target sim); fi
    for o in descriptor differential; do
      rm -f "$work/t/fuzz.json"
      "$cetp" fuzz "${t[@]}" --oracle "$o" --budget "$tb" --seed "$seed" --out "$work/t" -q >/dev/null 2>&1 || true
      python3 -c "import json,sys;r=json.load(open(sys.argv[1]));s=r['stats'];print(f\"{sys.argv[2]:<44} {r['oracle_kind']:<13} {s['cases']:>10} {s['envelopes']*1000/max(s['elapsed_ms'],1):>12.0f}\")" "$work/t/fuzz.json" "$where" || echo "$where $o: no report"
    done
  done
  kill "$sim_pid" 2>/dev/null || true
  wait "$sim_pid" 2>/dev/null || true
fi

if [ "${VARIANTS:-}" != none ]; then
  echo
  printf '%-36s %-13s %10s %10s %9s %6s %13s\n' "clean run (${clean})" oracle sequences envelopes findings flaky "oracle notes"
  variants=${VARIANTS:-$(python3 -c "import json;print(' '.join(v['name'] for v in json.load(open('vectors/variants/variants.json'))['variants']))")}
  for v in reference notes $variants; do
    if [ "$v" = reference ]; then t=sim; p=();
    elif [ "$v" = notes ]; then t=sim:provider=notes; p=(); else
      t=$(python3 -c "import json,sys;print(next(x['target'] for x in json.load(open('vectors/variants/variants.json'))['variants'] if x['name']==sys.argv[1]))" "$v")
      prof=$(python3 -c "import json,sys;print(next(x['profile'] for x in json.load(open('vectors/variants/variants.json'))['variants'] if x['name']==sys.argv[1]))" "$v")
      p=(--profile "profiles/$prof")
    fi
    for o in $clean_oracles; do
      rm -f "$work/c/fuzz.json"
      "$cetp" fuzz --target "$t" "${p[@]}" --oracle "$o" --budget "$clean" --seed "$seed" --out "$work/c" -q >/dev/null 2>&1 || true
      python3 -c "import json,sys;r=json.load(open(sys.argv[1]));s=r['stats'];print(f\"{sys.argv[2]:<36} {r['oracle_kind']:<13} {s['cases']:>10} {s['envelopes']:>10} {len(r['findings']):>9} {len(r.get('flaky',[])):>6} {len(r['oracle_notes']):>13}\")" "$work/c/fuzz.json" "$v" || echo "$v $o: no report"
    done
  done
fi

if [ "${FOREIGN:-1}" != 0 ]; then
  echo
  echo "== Providers not built on the reference engine, clocks that cannot move (per target: sequences judged, envelopes/s, findings; time to each seeded defect)"
  FILL_COMPARE=1 CETP_BIN="$PWD/$cetp" FUZZ_BUDGET="${FOREIGN_BUDGET:-600s}" DEFECT_BUDGET="${DEFECT_BUDGET:-60s}" \
    scripts/fuzz-foreign-check.sh || echo "(the foreign runs above did not all pass)"
fi
