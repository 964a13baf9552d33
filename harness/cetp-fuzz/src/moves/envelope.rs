//! Malformed requests: common fields missing, mistyped, borrowed from
//! another caller, or forged.

use super::{call_step, GenStep, Generator};
use crate::world::ToolInfo;
use cetp_conformance::template::literal;
use rand::Rng;
use serde_json::{json, Value as Json};

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
        let mut step =
            json!({"do": "call", "as": ident, "method": method, "session": s, "bind": b});
        if method == "execute_tool" {
            if let Some(t) = &read {
                step["tool"] = json!({"name": literal(&t.name)});
                step["args"] = json!("valid");
            }
        }
        if matches!(method, "get_operation" | "cancel_operation") {
            step["operation_id"] = json!(
                ["op-unknown", "", "00000000-0000-4000-8000-000000000000"]
                    [self.rng.random_range(0..3)]
            );
        }
        let mut tags = vec!["CETP2-5-14"];
        let mut extras = serde_json::Map::new();
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
                        if let Some(o) = self.assertion_extras(ident).as_object() {
                            extras.extend(o.clone());
                        }
                    } else {
                        extras.insert(
                            ["x_unknown", "PROTOCOL_VERSION"][self.rng.random_range(0..2)].into(),
                            json!({"t": "string", "v": "true"}),
                        );
                    }
                    tags.extend(["CETP2-4.3-07", "CETP2-7.1-02"]);
                }
                3 => {
                    let v = self.foreign_token(ident);
                    extras.insert("session_token".into(), json!({"t": "string", "v": v}));
                    tags.extend(["CETP2-2.2-13", "CETP2-2.2-09"]);
                }
                4 => {
                    step["deadline_in_ms"] =
                        json!([-86_400_000i64, -1_000, 5_000][self.rng.random_range(0..3)]);
                    tags.extend(["CETP2-4.1-09", "CETP2-5-17"]);
                }
                _ => {
                    let rid = self.bad_request_id();
                    extras.insert("request_id".into(), json!({"t": "string", "v": rid}));
                    tags.push("CETP2-4.1-03");
                }
            }
        }
        if !extras.is_empty() {
            step["extras"] = Json::Object(extras);
        }
        if !omit.is_empty() {
            step["omit"] = json!(omit);
        }
        tags.sort();
        tags.dedup();
        step["requirements"] = json!(tags);
        vec![call_step(step)]
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
    pub(super) fn confused(&mut self) -> (&'static str, Json) {
        let options: Vec<(&str, Json)> = vec![
            ("protocol_version", json!({"t": "long", "v": 2})),
            ("protocol_version", json!({"t": "string", "v": "2"})),
            ("protocol_version", json!({"t": "int", "v": 1})),
            ("protocol_version", json!({"t": "int", "v": 3})),
            ("protocol_version", json!({"t": "double", "v": 2.0})),
            ("protocol_version", json!({"t": "int[]", "v": [2]})),
            (
                "protocol_version",
                json!({"t": "bundle", "v": {"v": {"t": "int", "v": 2}}}),
            ),
            ("session_token", json!({"t": "int", "v": 7})),
            ("session_token", json!({"t": "string[]", "v": ["a"]})),
            ("request_id", json!({"t": "long", "v": 1})),
            ("request_id", json!({"t": "bundle", "v": {}})),
            ("deadline_at_ms", json!({"t": "int", "v": 5})),
            ("deadline_at_ms", json!({"t": "string", "v": "soon"})),
            ("deadline_at_ms", json!({"t": "double", "v": 1.5})),
            ("deadline_at_ms", json!({"t": "null", "v": null})),
        ];
        let i = self.rng.random_range(0..options.len());
        (options[i].0, options[i].1.clone())
    }
}
