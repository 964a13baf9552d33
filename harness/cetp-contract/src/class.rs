//! How bad a difference between a lock and a Provider is, for a Consumer
//! built against the lock: what schema comparison and drift reports share.

use serde::{Deserialize, Serialize};

/// Ordered by severity: the worst class of a report decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Nothing a Consumer relied on changed.
    Compatible,
    /// A Consumer built against the lock can fail.
    Breaking,
    /// Revision-bound contract changed under the same `revision` (§3.3).
    Violation,
}

impl Class {
    /// The class as reports and `--format json` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Compatible => "compatible",
            Class::Breaking => "breaking",
            Class::Violation => "violation",
        }
    }
}
