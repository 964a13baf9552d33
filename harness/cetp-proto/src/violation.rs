//! A rule a Provider's document breaks, and how badly: what the descriptor
//! validators and the schema checks report alike.

/// How bad a [`Violation`] is: it decides between `FAIL` and `WARN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Breaks a MUST / MUST NOT.
    Must,
    /// Misses a SHOULD.
    Should,
}

/// One rule broken by a descriptor.
///
/// `rule` is a stable key (e.g. `tool.name.pattern`); the conformance layer
/// maps it to requirement ids in data, so this crate does not hard-code the
/// catalog's numbering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Stable rule key, one of [`crate::descriptor::RULES`].
    pub rule: &'static str,
    /// Spec section the rule comes from (`"3.1"`).
    pub section: &'static str,
    /// Whether it breaks a MUST or misses a SHOULD.
    pub severity: Severity,
    /// JSON pointer into the checked document.
    pub at: String,
    /// What is wrong, for the report.
    pub message: String,
}

impl Violation {
    /// A broken MUST / MUST NOT.
    pub fn must(rule: &'static str, section: &'static str, at: String, message: String) -> Self {
        Violation {
            rule,
            section,
            severity: Severity::Must,
            at,
            message,
        }
    }
    /// A missed SHOULD.
    pub fn should(rule: &'static str, section: &'static str, at: String, message: String) -> Self {
        Violation {
            rule,
            section,
            severity: Severity::Should,
            at,
            message,
        }
    }
}
