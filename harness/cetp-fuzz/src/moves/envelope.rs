//! Malformed requests: common fields missing, mistyped, borrowed from
//! another caller, or forged.

use super::steps::{call_step, named, strings, typed, Call};
use super::{GenStep, Generator};
use crate::world::ToolInfo;
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, TypedValue};
use rand::Rng;
use serde_json::json;
use std::collections::BTreeMap;

impl Generator<'_> {
    /// Move: a call whose common fields (§4.1) are missing, of another type,
    /// another caller's, or claim what only the Provider may decide. No
    /// precondition.
    pub(super) fn envelope(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let reads: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.effect == "read")
            .cloned()
            .collect();
        let methods = [
            "get_provider_info",
            "list_tools",
            "execute_tool",
            "get_operation",
            "cancel_operation",
        ];
        let mut method = methods[self.rng.random_range(0..methods.len())];
        let read = self.pick(&reads);
        if method == "execute_tool" && read.is_none() {
            method = "list_tools";
        }
        let b = self.name("v");
        let mut call = Call::new(ident, method, &s, &b);
        if method == "execute_tool" {
            if let Some(t) = &read {
                call.tool = named(literal(&t.name));
                call.args = Some(Args::Valid);
            }
        }
        if matches!(method, "get_operation" | "cancel_operation") {
            let id = ["op-unknown", "", "00000000-0000-4000-8000-000000000000"]
                [self.rng.random_range(0..3)];
            call.operation_id = Some(id.into());
        }
        let mut tags = vec!["CETP2-5-14"];
        let mut extras = BTreeMap::new();
        let mut omit = Vec::new();
        for _ in 0..self.rng.random_range(1..=2) {
            match self.rng.random_range(0..6) {
                0 => {
                    let mut keys = vec![
                        "protocol_version",
                        "session_token",
                        "request_id",
                        "deadline_at_ms",
                    ];
                    if method == "execute_tool" {
                        keys.extend(["tool_name", "args"]);
                    }
                    let k = keys[self.rng.random_range(0..keys.len())];
                    omit.push(k);
                    tags.extend(["CETP2-2.2-13", "CETP2-4-08"]);
                }
                1 => {
                    let (k, v) = self.confused();
                    extras.insert(k.into(), v);
                    tags.push("CETP2-4-08");
                }
                2 => {
                    if self.chance(0.5) {
                        extras.extend(self.assertion_extras(ident));
                    } else {
                        extras.insert(
                            ["x_unknown", "PROTOCOL_VERSION"][self.rng.random_range(0..2)].into(),
                            typed("string", json!("true")),
                        );
                    }
                    tags.extend(["CETP2-4.3-07", "CETP2-7.1-02"]);
                }
                3 => {
                    let v = self.foreign_token(ident);
                    extras.insert("session_token".into(), typed("string", json!(v)));
                    tags.extend(["CETP2-2.2-13", "CETP2-2.2-09"]);
                }
                4 => {
                    call.deadline_in_ms =
                        Some([-86_400_000i64, -1_000, 5_000][self.rng.random_range(0..3)]);
                    tags.extend(["CETP2-4.1-09", "CETP2-5-17"]);
                }
                _ => {
                    let rid = self.bad_request_id();
                    extras.insert("request_id".into(), typed("string", json!(rid)));
                    tags.push("CETP2-4.1-03");
                }
            }
        }
        call.extras = extras;
        call.omit = strings(&omit);
        tags.sort();
        tags.dedup();
        vec![call_step(call.citing(&tags))]
    }

    /// A session token that is not `ident`'s: another identity's, a forged
    /// one, or one far too long (§2.2: a token is bound to its caller).
    pub(super) fn foreign_token(&mut self, ident: &str) -> String {
        let others: Vec<String> = self
            .st
            .sessions
            .iter()
            .filter(|x| x.ident != ident)
            .map(|x| format!("${{{}/data/session_token}}", x.name))
            .collect();
        let forged = ["", "AAAA", "forged-token-0000000000000000", "x"]
            [self.rng.random_range(0..4)]
        .to_string();
        let long = "t".repeat(300);
        self.pick(&others)
            .filter(|_| self.rng.random_bool(0.6))
            .unwrap_or(if self.rng.random_bool(0.2) {
                long
            } else {
                forged
            })
    }

    /// A request_id that is not a lower-case UUID (§4.1).
    pub(super) fn bad_request_id(&mut self) -> &'static str {
        [
            "",
            "not-a-uuid",
            "00000000-0000-0000-0000-000000000000",
            "F47AC10B-58CC-4372-A567-0E02B2C3D479",
            "f47ac10b-58cc-4372-a567-0e02b2c3d4790",
            "f47ac10b58cc4372a5670e02b2c3d479",
        ][self.rng.random_range(0..6)]
    }

    /// A common field with a value of another Bundle type.
    pub(super) fn confused(&mut self) -> (&'static str, TypedValue) {
        let options: Vec<(&str, TypedValue)> = vec![
            ("protocol_version", typed("long", json!(2))),
            ("protocol_version", typed("string", json!("2"))),
            ("protocol_version", typed("int", json!(1))),
            ("protocol_version", typed("int", json!(3))),
            ("protocol_version", typed("double", json!(2.0))),
            ("protocol_version", typed("int[]", json!([2]))),
            (
                "protocol_version",
                typed("bundle", json!({"v": {"t": "int", "v": 2}})),
            ),
            ("session_token", typed("int", json!(7))),
            ("session_token", typed("string[]", json!(["a"]))),
            ("request_id", typed("long", json!(1))),
            ("request_id", typed("bundle", json!({}))),
            ("deadline_at_ms", typed("int", json!(5))),
            ("deadline_at_ms", typed("string", json!("soon"))),
            ("deadline_at_ms", typed("double", json!(1.5))),
            ("deadline_at_ms", typed("null", json!(null))),
        ];
        let i = self.rng.random_range(0..options.len());
        (options[i].0, options[i].1.clone())
    }
}
