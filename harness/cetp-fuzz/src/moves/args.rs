//! Arguments for tool calls: drawn among the step language's kinds, from
//! the tool's input schema (`cetp-gen`), or at the edges of what a
//! Provider must parse.

use super::steps::typed;
use super::{Generator, Move};
use crate::world::{ToolInfo, World};
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, TypedValue};
use proptest::test_runner::{RngAlgorithm, TestRng};
use rand::{Rng, RngCore};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// Input schemas cetp-gen refused or gave up on (by their text): not tried
/// again, and reported once per process.
static UNGENERATED: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());

impl Generator<'_> {
    /// Args for a call of `tool`, drawn among the kinds the step language
    /// has (valid, invalid, escalating, oversize, edge text, generated),
    /// and the requirements the kind is about.
    pub(super) fn args_for(&mut self, tool: &ToolInfo) -> (Args, Vec<&'static str>) {
        let r = self.rng.random_range(0..100);
        match r {
            0..=49 => (Args::Valid, vec![]),
            50..=64 => (Args::Invalid, vec!["CETP2-5-13", "CETP2-7.3-04"]),
            65..=74 if tool.escalating => (Args::Escalating, vec!["CETP2-3.4-12", "CETP2-4.3-01"]),
            75..=79 => (Args::Oversize, vec!["CETP2-4.1-06", "CETP2-2.2-16"]),
            80..=89 => (
                Args::Text(self.edge_text(tool)),
                vec!["CETP2-5-13", "CETP2-7.3-04"],
            ),
            _ => match self.generated(tool) {
                Some(v) => (Args::Json(v), vec![]),
                None => (Args::Valid, vec![]),
            },
        }
    }

    /// Valid args drawn from the input schema by `cetp-gen`, within its
    /// budget (construction and draw): the schema is the Provider's, so a
    /// schema the generator cannot serve must not stall the run. Such a
    /// tool's args are "not generated": said once on stderr, and its calls
    /// use the other argument kinds.
    pub(super) fn generated(&mut self, tool: &ToolInfo) -> Option<Json> {
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let key = tool.input_schema.to_string();
        let refused = |e: cetp_gen::GenError| {
            let mut seen = UNGENERATED.lock().unwrap_or_else(|p| p.into_inner());
            if seen.insert(key.clone()) {
                // Debug formatting escapes the Provider's control characters.
                eprintln!(
                    "cetp fuzz: arguments not generated for tool {:?}: {:?}",
                    tool.name,
                    e.to_string()
                );
            }
        };
        if UNGENERATED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return None;
        }
        let g = cetp_gen::Generator::new(&tool.input_schema)
            .map_err(refused)
            .ok()?;
        g.draw_valid(&mut TestRng::from_seed(RngAlgorithm::ChaCha, &seed))
            .map_err(refused)
            .ok()
    }

    /// Args text at the edges: lone surrogates, BOM, NUL, bidi overrides,
    /// huge numbers, duplicate keys, deep nesting, broken JSON, sizes just
    /// under and over the negotiated `max_request_bytes`.
    fn edge_text(&mut self, tool: &ToolInfo) -> String {
        let base = self.generated(tool).unwrap_or(json!({}));
        let limit = self.world.max_request_bytes;
        let variants: Vec<String> = vec![
            r#"{"k":"\ud800"}"#.into(),
            format!("\u{feff}{base}"),
            base.to_string().replacen('"', "\"\u{0}", 1),
            base.to_string().replacen('"', "\"\u{202e}", 1),
            r#"{"a":1,"a":2}"#.into(),
            "1e400".into(),
            "{".into(),
            String::new(),
            "null".into(),
            "[]".into(),
            format!("{}{}", "[".repeat(300), "]".repeat(300)),
            pad_to(&base, limit.saturating_sub(600)),
            pad_to(&base, limit + 1),
            "\u{fffe}\u{ffff}".into(),
        ];
        let i = self.rng.random_range(0..variants.len());
        variants[i].clone()
    }

    /// Extras asserting a confirmation or another caller's identity.
    pub(super) fn assertion_extras(&mut self, ident: &str) -> BTreeMap<String, TypedValue> {
        let a_uid = || ("calling_uid", typed("int", json!("${env/a/uid}")));
        // The second identity lacks scopes the first holds: claiming to be
        // the first is the borrowing §7.1 forbids.
        let (k, v) = if ident == "b" && self.chance(0.6) {
            a_uid()
        } else {
            match self.rng.random_range(0..4) {
                0 => ("confirmed", typed("bool", json!(true))),
                1 => a_uid(),
                2 => (
                    "caller_package",
                    typed("string", json!("${env/a/packages/0}")),
                ),
                _ => ("confirmed", typed("string", json!("true"))),
            }
        };
        BTreeMap::from([(k.to_string(), v)])
    }
}

/// `moves` with every argument drawn from a tool's input schema drawn
/// anew (seeded by `seed`), or `None` when none was drawn. A re-run of a
/// failure needs this when the first run changed what its values meet: a
/// read that creates the object it was asked for shows that only for an id
/// that does not exist yet, and the first run made it exist.
pub fn redraw_generated(moves: &[Move], world: &World, seed: u64) -> Option<Vec<Move>> {
    let mut g = Generator::new(world, seed);
    let mut changed = false;
    let mut out = moves.to_vec();
    for step in out.iter_mut().flat_map(|m| m.steps.iter_mut()) {
        let j = &mut step.step;
        if j.pointer("/args/json").is_none() {
            continue;
        }
        let Some(name) = j.pointer("/tool/name").and_then(Json::as_str) else {
            continue;
        };
        let Some(tool) = world.tools.iter().find(|t| literal(&t.name) == name) else {
            continue;
        };
        if let Some(v) = g.generated(tool) {
            j["args"] = json!({ "json": v });
            changed = true;
        }
    }
    changed.then_some(out)
}

/// `base` as JSON text padded with a string member to about `size` bytes.
fn pad_to(base: &Json, size: usize) -> String {
    let mut v = base.clone();
    let text = v.to_string();
    let room = size.saturating_sub(text.len() + 16);
    if let Some(o) = v.as_object_mut() {
        o.insert("_pad".into(), json!("p".repeat(room)));
        v.to_string()
    } else {
        text
    }
}
