//! The values drawn from the corpus (`tests/schemas/`) on fixed seeds,
//! pinned as a snapshot: they reach the conformance proofs (tool arguments
//! and the invalid calls), which must stay byte-for-byte what they were
//! when the generator's code is moved around. A change to what is generated
//! shows here as a snapshot diff to review (`cargo insta review`), not as a
//! silent change of every proof.

use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::{json, Value as Json};
use std::path::PathBuf;

/// Few draws keep the snapshot readable; the seeds make them exact.
const VALID_DRAWS: usize = 4;
const INVALID_DRAWS: usize = 1;

fn drawn(schema: &Json) -> Json {
    let refusal = |e: cetp_gen::GenError| json!({"refused": e.to_string()});
    let g = match cetp_gen::Generator::new(schema) {
        Ok(g) => g,
        Err(e) => return refusal(e),
    };
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let valid = g
        .draw_valid_n(&mut rng, VALID_DRAWS)
        .map_or_else(refusal, |v| json!(v));
    let invalid = g
        .draw_invalid(&mut rng, INVALID_DRAWS)
        .map_or_else(refusal, |per| {
            per.into_iter()
                .map(|(v, xs)| json!({"violation": v.to_string(), "values": xs}))
                .collect()
        });
    json!({"valid": valid, "invalid": invalid})
}

#[test]
fn the_corpus_draws_what_it_drew() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schemas");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/schemas")
        .filter_map(|e| {
            let p = e.expect("dir entry").path();
            (p.extension()? == "json").then_some(p)
        })
        .collect();
    files.sort();
    // One line per schema: a diff names the schema whose values moved.
    let mut out = String::new();
    for p in files {
        let entry: Json = serde_json::from_str(&std::fs::read_to_string(&p).expect("read"))
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let name = p.file_stem().expect("stem").to_string_lossy().into_owned();
        out.push_str(&format!("{name} {}\n", drawn(&entry["schema"])));
    }
    insta::assert_snapshot!(out);
}
