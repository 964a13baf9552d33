//! Structured mutations of the real case files: the input picks one of
//! `vectors/cases/*.json` and a few edits of its JSON tree (replace, remove,
//! insert or graft a member, with keys and values drawn from the real files),
//! so that the mutants stay close enough to the format to reach the typed
//! step and expectation parsers, which random text rarely gets past. The
//! loader and what the runner computes from a case must never panic.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value as Json};
use std::collections::BTreeSet;
use std::sync::OnceLock;

const FILES: &[&str] = &[
    include_str!("../../vectors/cases/async.json"),
    include_str!("../../vectors/cases/bindings.json"),
    include_str!("../../vectors/cases/confirmation.json"),
    include_str!("../../vectors/cases/descriptors.json"),
    include_str!("../../vectors/cases/discovery.json"),
    include_str!("../../vectors/cases/envelope.json"),
    include_str!("../../vectors/cases/execute.json"),
    include_str!("../../vectors/cases/idempotency.json"),
    include_str!("../../vectors/cases/large.json"),
    include_str!("../../vectors/cases/limits.json"),
    include_str!("../../vectors/cases/negotiate.json"),
    include_str!("../../vectors/cases/results.json"),
    include_str!("../../vectors/cases/v1.json"),
];

/// Values the format gives a meaning to, or that sit at its edges, beyond
/// what the real files hold.
const EXTRA_STRINGS: &[&str] = &[
    "",
    "${",
    "${s",
    "${s/data/",
    "${}",
    "${/}",
    "}",
    "/",
    "~",
    "~1",
    "~2",
    "${s/data/session_token}",
    "${env/package}${env",
    "\u{0}",
    "é${s}",
    "/value",
    "new",
];

struct Pools {
    files: Vec<Json>,
    keys: Vec<String>,
    values: Vec<Json>,
}

/// The parsed files, every object key they use and every leaf value, so
/// that an edit speaks the format's own vocabulary.
fn pools() -> &'static Pools {
    static P: OnceLock<Pools> = OnceLock::new();
    P.get_or_init(|| {
        let files: Vec<Json> = FILES
            .iter()
            .map(|t| serde_json::from_str(t).expect("a committed case file is JSON"))
            .collect();
        let mut keys = BTreeSet::new();
        let mut values = Vec::new();
        fn walk(v: &Json, keys: &mut BTreeSet<String>, values: &mut Vec<Json>) {
            match v {
                Json::Object(m) => {
                    for (k, x) in m {
                        keys.insert(k.clone());
                        walk(x, keys, values);
                    }
                }
                Json::Array(a) => a.iter().for_each(|x| walk(x, keys, values)),
                leaf => {
                    if !values.contains(leaf) {
                        values.push(leaf.clone())
                    }
                }
            }
        }
        for f in &files {
            walk(f, &mut keys, &mut values);
        }
        values.extend(EXTRA_STRINGS.iter().map(|s| Json::from(*s)));
        values.extend(
            [i64::MIN, -1, 0, 1, 2, 3, i64::from(i32::MAX) + 1, i64::MAX]
                .into_iter()
                .map(Json::from),
        );
        values.extend([Json::from(u64::MAX), Json::from(1e308), Json::from(-0.5)]);
        values.extend([
            Json::Null,
            Json::Bool(true),
            Json::Array(vec![]),
            Json::Object(Map::new()),
        ]);
        Pools {
            files,
            keys: keys.into_iter().collect(),
            values,
        }
    })
}

/// Paths (indices into objects in key order, or into arrays) of every node.
fn paths(v: &Json, here: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    out.push(here.clone());
    let children: Vec<&Json> = match v {
        Json::Object(m) => m.values().collect(),
        Json::Array(a) => a.iter().collect(),
        _ => return,
    };
    for (i, c) in children.into_iter().enumerate() {
        here.push(i);
        paths(c, here, out);
        here.pop();
    }
}

fn node<'a>(v: &'a mut Json, path: &[usize]) -> &'a mut Json {
    path.iter().fold(v, |v, &i| match v {
        Json::Object(m) => m.values_mut().nth(i).expect("path from paths()"),
        Json::Array(a) => &mut a[i],
        _ => unreachable!("paths() descends only into containers"),
    })
}

fn value(u: &mut Unstructured<'_>, p: &Pools) -> Result<Json> {
    Ok(match u.int_in_range(0..=9)? {
        // A string of the input's own bytes, now and then.
        0 => Json::from(u.arbitrary::<String>()?),
        // A subtree of another file (a whole step, an expectation): grafts
        // keep the shape valid where a leaf would not.
        1 => {
            let f = u.choose(&p.files)?;
            let mut all = Vec::new();
            paths(f, &mut Vec::new(), &mut all);
            let at = u.choose(&all)?;
            let mut f = f.clone();
            node(&mut f, at).take()
        }
        _ => u.choose(&p.values)?.clone(),
    })
}

fn mutate(u: &mut Unstructured<'_>, doc: &mut Json, p: &Pools) -> Result<()> {
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    let at = u.choose(&all)?.clone();
    let op = u.int_in_range(0..=3)?;
    let target = node(doc, &at);
    match (op, target) {
        (0, t) => *t = value(u, p)?,
        (1, Json::Object(m)) if !m.is_empty() => {
            let k = u.choose_index(m.len())?;
            let key = m.keys().nth(k).cloned().expect("index in range");
            m.remove(&key);
        }
        (1, Json::Array(a)) if !a.is_empty() => {
            let i = u.choose_index(a.len())?;
            a.remove(i);
        }
        (2, Json::Object(m)) => {
            let key = u.choose(&p.keys)?.clone();
            m.insert(key, value(u, p)?);
        }
        (2, Json::Array(a)) => {
            let v = if a.is_empty() || u.arbitrary()? {
                value(u, p)?
            } else {
                a[u.choose_index(a.len())?].clone()
            };
            let i = u.int_in_range(0..=a.len())?;
            a.insert(i, v);
        }
        // Rename a member: the same value under a key another step uses.
        (3, Json::Object(m)) if !m.is_empty() => {
            let k = u.choose_index(m.len())?;
            let old = m.keys().nth(k).cloned().expect("index in range");
            let v = m.remove(&old).expect("key present");
            m.insert(u.choose(&p.keys)?.clone(), v);
        }
        (_, t) => *t = value(u, p)?,
    }
    Ok(())
}

fn run(data: &[u8]) -> Result<()> {
    let p = pools();
    let mut u = Unstructured::new(data);
    let mut doc = u.choose(&p.files)?.clone();
    for _ in 0..u.int_in_range(0..=6)? {
        mutate(&mut u, &mut doc, p)?;
    }
    cetp_fuzz::exercise_vector_text(&doc.to_string());
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});
