//! The baseline a user would reach for instead: a blind byte-level mutator.
//! It knows nothing of CETP: it takes the envelopes of a fixed seed
//! sequence (negotiate, provider info, the tool list, one valid call of each
//! executable tool) and, on their way to the device, flips, overwrites,
//! inserts or deletes random bytes of their probe-wire JSON. The same oracle
//! judges it, so the comparison measures only the generation.

use crate::world::World;
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use cetp_vectors::device::{Device, DeviceError, HelloInfo, Target};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value as Json};
use std::sync::{Arc, Mutex};

use crate::moves::{GenStep, Meta, Move, Sequence};

/// The seed sequence: the same envelopes every time; only the bytes vary.
pub fn sequence(world: &World) -> Sequence {
    let mut steps = vec![
        plain(json!({"do": "negotiate", "bind": "s"})),
        placeholder(
            json!({"do": "call", "method": "get_provider_info", "session": "s", "bind": "i",
                           "requirements": ["CETP2-4-02"]}),
        ),
        placeholder(
            json!({"do": "call", "method": "list_tools", "session": "s", "bind": "l",
                           "requirements": ["CETP2-4-03"]}),
        ),
    ];
    for (n, t) in world.executable().enumerate() {
        let bind = format!("e{n}");
        let call = placeholder(
            json!({"do": "call", "method": "execute_tool", "session": "s",
            "tool": {"name": t.name}, "args": "valid", "bind": bind,
            "requirements": ["CETP2-4-04", "CETP2-6-01"]}),
        );
        if t.effect != "read" && world.observer {
            steps.push(plain(json!({"do": "observe", "bind": format!("o{n}")})));
            steps.push(call);
            steps.push(GenStep {
                step: json!({"do": "observe", "bind": format!("p{n}"), "requirements": ["CETP2-6-01"]}),
                meta: Meta::EffectsAfter {
                    since: format!("o{n}"),
                    tool_of: Some(bind),
                },
            });
        } else {
            steps.push(call);
        }
    }
    Sequence {
        moves: vec![Move { steps }],
    }
}

fn plain(step: Json) -> GenStep {
    GenStep {
        step,
        meta: Meta::Plain,
    }
}

fn placeholder(mut step: Json) -> GenStep {
    step["expect"] = json!({});
    plain(step)
}

/// The mutator's generator, reseeded before each case so that the oracle's
/// members and the target see the same mutations.
#[derive(Clone)]
pub struct Mutations {
    rng: Arc<Mutex<ChaCha8Rng>>,
    /// The observer's tool: its calls are the harness's eyes, not input.
    skip_tool: Option<String>,
}

impl Mutations {
    /// A mutator that leaves the calls of `skip_tool` (the profile's
    /// observer tool) unchanged.
    pub fn new(skip_tool: Option<String>) -> Self {
        Mutations {
            rng: Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(0))),
            skip_tool,
        }
    }

    /// Reseeds the mutator before a case, so that every oracle member and
    /// the target see the same mutations.
    pub fn reseed(&self, seed: u64) {
        *self.rng.lock().unwrap_or_else(|e| e.into_inner()) = ChaCha8Rng::seed_from_u64(seed);
    }

    /// `target` with every identity's calls passing through the mutator.
    pub fn wrap(&self, target: Target) -> Target {
        Target {
            label: target.label,
            a: Box::new(Blind {
                inner: target.a,
                m: self.clone(),
            }),
            b: target.b.map(|b| {
                Box::new(Blind {
                    inner: b,
                    m: self.clone(),
                }) as Box<dyn Device>
            }),
        }
    }

    /// Half the envelopes get one to four byte edits of their wire JSON;
    /// an edit that leaves no decodable Bundle is sent as the original (the
    /// probe's codec would reject it before any Provider saw it).
    fn mutate(&self, extras: Option<&Bundle>) -> Option<Bundle> {
        let b = extras?;
        if let (Some(skip), Ok(Some(tool))) = (&self.skip_tool, b.opt_string("tool_name")) {
            if *skip == tool {
                return None;
            }
        }
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        if !rng.random_bool(0.5) {
            return None;
        }
        let mut bytes = Vec::new();
        cetp_wire::json::write(&mut bytes, &cetp_wire::bundle_to_json(b));
        for _ in 0..rng.random_range(1..=4) {
            if bytes.is_empty() {
                break;
            }
            let i = rng.random_range(0..bytes.len());
            match rng.random_range(0..4) {
                0 => bytes[i] ^= 1 << rng.random_range(0..8),
                1 => bytes[i] = rng.random(),
                2 => bytes.insert(i, rng.random()),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        let text = String::from_utf8(bytes).ok()?;
        let json = cetp_wire::json::parse(&text).ok()?;
        cetp_wire::bundle_from_json(&json, &cetp_wire::Path::ROOT).ok()
    }
}

struct Blind {
    inner: Box<dyn Device>,
    m: Mutations,
}

impl Device for Blind {
    forward_device!();
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        match self.m.mutate(extras) {
            Some(b) => self
                .inner
                .call(authority, method, arg, Some(&b), timeout_ms),
            None => self.inner.call(authority, method, arg, extras, timeout_ms),
        }
    }
}
