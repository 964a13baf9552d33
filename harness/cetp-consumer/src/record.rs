//! What the hostile Provider saw of the Consumer under test: one record per
//! call, read by the scenario's rules (which call to answer how) and by the
//! judge (what the Consumer did).

use cetp_proto::envelope::keys;
use cetp_proto::{Bundle, Value};

/// One call the Consumer under test made.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// Index of the scenario act during which it came.
    pub act: usize,
    /// Consumer lives: bumped by every `reset` act.
    pub life: u32,
    /// The method called.
    pub method: String,
    /// The call's extras, as received.
    pub extras: Bundle,
    /// Device time of the call, in milliseconds.
    pub now_ms: i64,
    /// The session token the Provider held valid when the call came.
    pub valid_token: Option<String>,
    /// Capabilities granted by the latest successful negotiation.
    pub granted: Vec<String>,
    /// What the Provider did: `default`, `scripted`, `timeout`, …
    pub answered: &'static str,
    /// The error code answered, if any.
    pub error_code: Option<String>,
}

impl CallRecord {
    /// The string extra `key`, if present and a string.
    pub fn str(&self, key: &str) -> Option<String> {
        match self.extras.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        }
    }
    /// A v2 call other than negotiate (it carries the common fields).
    pub fn is_v2_common(&self) -> bool {
        self.method != "negotiate" && self.extras.contains(keys::PROTOCOL_VERSION)
    }
    /// A v1 call: not negotiate, and no `protocol_version` (§8).
    pub fn is_v1(&self) -> bool {
        self.method != "negotiate" && !self.extras.contains(keys::PROTOCOL_VERSION)
    }
    /// The tool named by the call (`tool_name`), if any.
    pub fn tool(&self) -> Option<String> {
        self.str(keys::TOOL_NAME)
    }
}
