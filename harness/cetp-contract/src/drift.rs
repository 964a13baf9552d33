//! Contract drift: every difference between a locked contract and the
//! current one, classified.
//!
//! - **breaking**: a Consumer built against the lock can fail (a tool
//!   removed, an input narrowed, an output widened or a field removed, a
//!   scope added, effect or risk raised, `destructive` on, `confirmation`
//!   weakened, `execution` now `sync_or_async`, or anything unclassified);
//! - **compatible**: nothing a Consumer relied on changed (an optional input
//!   or an output field added, an input widened, a title or description
//!   changed, a schema restructured);
//! - **violation**: §3.3 — the tool set, a schema or a tool's safety
//!   semantics changed and `revision` did not.
//!
//! The annotation orders are data in [`crate::order`]; the schema rules are
//! in [`crate::schema_diff`].

use crate::lock::{Lock, Problem, Scope, ToolContract};
use crate::order::{self, rank};
use crate::schema_diff::{compare, Position};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Format tag of `cetp drift --format json`.
pub const FORMAT: &str = "cetp-drift/1";

pub use crate::class::Class;

/// One classified difference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// How bad it is for a Consumer built against the lock.
    pub class: Class,
    /// The tool it concerns; none for Provider-level differences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// JSON pointer inside the tool's lock entry (`/input_schema/...`,
    /// `/annotations/risk`), or inside the lock for Provider-level ones.
    pub pointer: String,
    /// Stable key of the rule that classified it (`schema.required.narrowed`).
    pub rule: String,
    /// What changed, for a reader; quotes the Provider.
    pub message: String,
    /// Part of what §3.3 binds to `revision`: the tool set, a schema, or a
    /// tool's safety semantics (annotations, scopes).
    pub revision_bound: bool,
}

/// The findings counted by class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Findings of class [`Class::Breaking`].
    pub breaking: usize,
    /// Findings of class [`Class::Compatible`].
    pub compatible: usize,
    /// Findings of class [`Class::Violation`].
    pub violation: usize,
}

/// Every difference between a locked contract and the current one
/// (`cetp drift`), classified; serialized as `cetp drift --format json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftReport {
    /// Always [`FORMAT`].
    pub format: String,
    /// The current Provider's id (the locked one when they differ is a
    /// finding).
    pub provider_id: String,
    /// The `list_tools` revision recorded in the lock.
    pub locked_revision: String,
    /// The `list_tools` revision the Provider reports now.
    pub current_revision: String,
    /// Provider-level findings first, then by tool name.
    pub findings: Vec<Finding>,
    /// The findings counted by class.
    pub summary: Summary,
}

impl DriftReport {
    fn new(locked: &Lock, current: &Lock, findings: Vec<Finding>) -> Self {
        let mut r = DriftReport {
            format: FORMAT.to_string(),
            provider_id: current.provider_id.clone(),
            locked_revision: locked.revision.clone(),
            current_revision: current.revision.clone(),
            findings,
            summary: Summary::default(),
        };
        r.recount();
        r
    }

    fn recount(&mut self) {
        let mut s = Summary::default();
        for f in &self.findings {
            match f.class {
                Class::Breaking => s.breaking += 1,
                Class::Compatible => s.compatible += 1,
                Class::Violation => s.violation += 1,
            }
        }
        self.summary = s;
    }

    /// The worst class found; `None` when nothing drifted.
    pub fn worst(&self) -> Option<Class> {
        self.findings.iter().map(|f| f.class).max()
    }

    /// Adds what is wrong with the current Provider's answers as violations
    /// (they break the spec whatever the lock says).
    pub fn add_problems(&mut self, problems: &[Problem]) {
        for p in problems {
            self.findings.push(Finding {
                class: Class::Violation,
                tool: p.tool.clone(),
                pointer: p.pointer.clone(),
                rule: format!("descriptor.{}", p.rule),
                message: format!("{} answer breaks §{}: {}", p.method, p.section, p.message),
                revision_bound: false,
            });
        }
        self.recount();
    }
}

/// Compares a locked contract with the current one.
pub fn diff(locked: &Lock, current: &Lock) -> DriftReport {
    let mut f = provider_findings(locked, current);
    let tools = diff_tools(&locked.tools, &current.tools, &current.schema_dialect);
    f.extend(revision_rule(&locked.revision, &current.revision, &tools));
    f.extend(tools);
    // Provider-level first, then by tool (stable: within a tool the order of
    // discovery is kept, the violation first).
    f.sort_by(|a, b| a.tool.cmp(&b.tool));
    DriftReport::new(locked, current, f)
}

fn finding(
    class: Class,
    tool: Option<&str>,
    pointer: impl Into<String>,
    rule: impl Into<String>,
    message: impl Into<String>,
    revision_bound: bool,
) -> Finding {
    Finding {
        class,
        tool: tool.map(str::to_string),
        pointer: pointer.into(),
        rule: rule.into(),
        message: message.into(),
        revision_bound,
    }
}

/// What changed at the Provider level: its identity and dialect, its
/// granted capabilities, its scope catalog.
fn provider_findings(locked: &Lock, current: &Lock) -> Vec<Finding> {
    let mut out = Vec::new();
    identity_findings(locked, current, &mut out);
    capability_findings(locked, current, &mut out);
    scope_catalog_findings(locked, current, &mut out);
    out
}

/// `provider_id` and `schema_dialect`: any change breaks.
fn identity_findings(locked: &Lock, current: &Lock, out: &mut Vec<Finding>) {
    if locked.provider_id != current.provider_id {
        out.push(finding(
            Class::Breaking,
            None,
            "/provider_id",
            "provider_id.changed",
            format!(
                "provider_id {:?} → {:?}: tools are routed by (provider_id, name) (§3.1)",
                locked.provider_id, current.provider_id
            ),
            false,
        ));
    }
    if locked.schema_dialect != current.schema_dialect {
        out.push(finding(
            Class::Breaking,
            None,
            "/schema_dialect",
            "schema_dialect.changed",
            format!(
                "unclassified change: every schema is now read as {:?}, not {:?} (§3.2)",
                current.schema_dialect, locked.schema_dialect
            ),
            false,
        ));
    }
}

/// Capabilities: one no longer granted breaks, a new one is compatible.
fn capability_findings(locked: &Lock, current: &Lock, out: &mut Vec<Finding>) {
    let (a, b): (BTreeSet<&String>, BTreeSet<&String>) = (
        locked.capabilities.iter().collect(),
        current.capabilities.iter().collect(),
    );
    for c in a.difference(&b) {
        out.push(finding(
            Class::Breaking,
            None,
            "/capabilities",
            "capability.removed",
            format!("capability {c:?} is no longer granted (§2.3)"),
            false,
        ));
    }
    for c in b.difference(&a) {
        out.push(finding(
            Class::Compatible,
            None,
            "/capabilities",
            "capability.added",
            format!("capability {c:?} is now granted (§2.3)"),
            false,
        ));
    }
}

/// The scope catalog: a scope removed breaks, one added is compatible,
/// and a kept scope's changes are judged by [`scope_findings`].
fn scope_catalog_findings(locked: &Lock, current: &Lock, out: &mut Vec<Finding>) {
    for (i, s) in locked.scopes.iter().enumerate() {
        let Some((j, now)) = current
            .scopes
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == s.name)
        else {
            out.push(finding(
                Class::Breaking,
                None,
                format!("/scopes/{i}"),
                "scope_catalog.removed",
                format!(
                    "scope {:?} left the catalog: grants and consent screens name it (§3.2)",
                    s.name
                ),
                false,
            ));
            continue;
        };
        scope_findings(s, now, j, out);
    }
    for (j, s) in current.scopes.iter().enumerate() {
        if !locked.scopes.iter().any(|l| l.name == s.name) {
            out.push(finding(
                Class::Compatible,
                None,
                format!("/scopes/{j}"),
                "scope_catalog.added",
                format!("scope {:?} joined the catalog", s.name),
                false,
            ));
        }
    }
}

/// One scope kept in the catalog (now at index `j`): access raised and
/// sensitivity changed (except to public) break; lowering them, and a new
/// title or description, are compatible.
fn scope_findings(s: &Scope, now: &Scope, j: usize, out: &mut Vec<Finding>) {
    if s.access != now.access {
        let raised = !(s.access == "write" && now.access == "read");
        out.push(finding(
            if raised {
                Class::Breaking
            } else {
                Class::Compatible
            },
            None,
            format!("/scopes/{j}/access"),
            if raised {
                "scope_catalog.access.raised"
            } else {
                "scope_catalog.access.lowered"
            },
            format!("scope {:?}: access {} → {}", s.name, s.access, now.access),
            false,
        ));
    }
    if s.sensitivity != now.sensitivity {
        let lowered = now.sensitivity == order::SENSITIVITY_PUBLIC;
        out.push(finding(
            if lowered {
                Class::Compatible
            } else {
                Class::Breaking
            },
            None,
            format!("/scopes/{j}/sensitivity"),
            if lowered {
                "scope_catalog.sensitivity.lowered"
            } else {
                "scope_catalog.sensitivity.changed"
            },
            format!(
                "scope {:?}: sensitivity {} → {}",
                s.name, s.sensitivity, now.sensitivity
            ),
            false,
        ));
    }
    for (key, x, y) in [
        ("title", &s.title, &now.title),
        ("description", &s.description, &now.description),
    ] {
        if x != y {
            out.push(finding(
                Class::Compatible,
                None,
                format!("/scopes/{j}/{key}"),
                format!("scope_catalog.{key}.changed"),
                format!("scope {:?}: {key} changed", s.name),
                false,
            ));
        }
    }
}

/// Compares two tool sets. `dialect` is the current Provider's schema
/// dialect (a dialect change is itself a Provider-level finding).
pub fn diff_tools(
    locked: &[ToolContract],
    current: &[ToolContract],
    dialect: &str,
) -> Vec<Finding> {
    let names: BTreeSet<&str> = locked
        .iter()
        .chain(current)
        .map(|t| t.name.as_str())
        .collect();
    let mut out = Vec::new();
    for name in names {
        let old = locked.iter().find(|t| t.name == name);
        let new = current.iter().find(|t| t.name == name);
        match (old, new) {
            (Some(_), None) => out.push(finding(
                Class::Breaking,
                Some(name),
                "",
                "tool.removed",
                format!("tool `{name}` was removed"),
                true,
            )),
            (None, Some(_)) => out.push(finding(
                Class::Compatible,
                Some(name),
                "",
                "tool.added",
                format!("tool `{name}` was added"),
                true,
            )),
            (Some(o), Some(n)) => diff_tool(o, n, dialect, &mut out),
            (None, None) => {}
        }
    }
    out
}

fn diff_tool(o: &ToolContract, n: &ToolContract, dialect: &str, out: &mut Vec<Finding>) {
    let tool = Some(o.name.as_str());
    // §3.3 binds the revision to the tool set, schemas and safety semantics;
    // a title or description is none of them.
    if o.title != n.title {
        out.push(finding(
            Class::Compatible,
            tool,
            "/title",
            "tool.title.changed",
            "the title changed",
            false,
        ));
    }
    if o.description != n.description {
        out.push(finding(
            Class::Compatible,
            tool,
            "/description",
            "tool.description.changed",
            "the description changed",
            false,
        ));
    }
    for (pos, base, a, b) in [
        (
            Position::Input,
            "/input_schema",
            &o.input_schema,
            &n.input_schema,
        ),
        (
            Position::Output,
            "/output_schema",
            &o.output_schema,
            &n.output_schema,
        ),
    ] {
        for c in compare(a, b, pos, base, dialect) {
            // A schema written differently but accepting the same instances
            // did not change in the sense of §3.3.
            let bound = c.rule != "schema.restructured";
            out.push(finding(c.class, tool, c.pointer, c.rule, c.message, bound));
        }
    }
    let (sa, sb): (BTreeSet<&String>, BTreeSet<&String>) =
        (o.scopes.iter().collect(), n.scopes.iter().collect());
    for s in sb.difference(&sa) {
        out.push(finding(
            Class::Breaking,
            tool,
            "/scopes",
            "scope.added",
            format!("scope {s:?} is now required: callers without it are refused (§3.4)"),
            true,
        ));
    }
    for s in sa.difference(&sb) {
        out.push(finding(
            Class::Compatible,
            tool,
            "/scopes",
            "scope.removed",
            format!("scope {s:?} is no longer required"),
            true,
        ));
    }
    annotations(o, n, tool, out);
}

/// A change along an order: up is `up_class`, down the other one.
fn ordered(
    order: &[&str],
    key: &str,
    from: &str,
    to: &str,
    up_breaking: bool,
    tool: Option<&str>,
    out: &mut Vec<Finding>,
) {
    if from == to {
        return;
    }
    let pointer = format!("/annotations/{key}");
    match (rank(order, from), rank(order, to)) {
        (Some(a), Some(b)) => {
            let up = b > a;
            let breaking = up == up_breaking;
            let word = match (key, up) {
                ("confirmation", true) => "strengthened",
                ("confirmation", false) => "weakened",
                (_, true) => "raised",
                (_, false) => "lowered",
            };
            out.push(finding(
                if breaking {
                    Class::Breaking
                } else {
                    Class::Compatible
                },
                tool,
                pointer,
                format!("annotation.{key}.{word}"),
                format!("{key} {word}: {from} → {to} (§3.4)"),
                true,
            ));
        }
        _ => out.push(finding(
            Class::Breaking,
            tool,
            pointer,
            "annotation.unclassified",
            format!("unclassified change: {key} {from:?} → {to:?} is outside §3.4"),
            true,
        )),
    }
}

/// A boolean annotation where turning it on (or off) is the breaking way.
fn flag(
    key: &str,
    from: bool,
    to: bool,
    on_breaking: bool,
    why: &str,
    tool: Option<&str>,
    out: &mut Vec<Finding>,
) {
    if from == to {
        return;
    }
    let breaking = to == on_breaking;
    out.push(finding(
        if breaking {
            Class::Breaking
        } else {
            Class::Compatible
        },
        tool,
        format!("/annotations/{key}"),
        format!("annotation.{key}.{}", if to { "on" } else { "off" }),
        format!("{key} {from} → {to}{}", if breaking { why } else { "" }),
        true,
    ));
}

fn annotations(o: &ToolContract, n: &ToolContract, tool: Option<&str>, out: &mut Vec<Finding>) {
    let (a, b) = (&o.annotations, &n.annotations);
    if a.effect != b.effect {
        let ranks = (order::effect_rank(&a.effect), order::effect_rank(&b.effect));
        let (class, rule, word) = match ranks {
            (Some(_), Some(0)) => (Class::Compatible, "annotation.effect.lowered", "lowered"),
            (Some(x), Some(y)) if y > x => (Class::Breaking, "annotation.effect.raised", "raised"),
            (Some(_), Some(_)) => (
                Class::Breaking,
                "annotation.effect.changed",
                "changed to another kind of side effect",
            ),
            _ => (
                Class::Breaking,
                "annotation.unclassified",
                "changed outside §3.4 (unclassified change)",
            ),
        };
        out.push(finding(
            class,
            tool,
            "/annotations/effect",
            rule,
            format!("effect {word}: {} → {} (§3.4)", a.effect, b.effect),
            true,
        ));
    }
    ordered(order::RISK, "risk", &a.risk, &b.risk, true, tool, out);
    flag(
        "destructive",
        a.destructive,
        b.destructive,
        true,
        ": it may now cause irreversible loss",
        tool,
        out,
    );
    flag(
        "idempotent",
        a.idempotent,
        b.idempotent,
        false,
        ": repeating it no longer yields the same effect",
        tool,
        out,
    );
    flag(
        "open_world",
        a.open_world,
        b.open_world,
        true,
        ": it now reaches systems outside the Provider's control",
        tool,
        out,
    );
    ordered(
        order::CONFIRMATION,
        "confirmation",
        &a.confirmation,
        &b.confirmation,
        false,
        tool,
        out,
    );
    ordered(
        order::EXECUTION,
        "execution",
        &a.execution,
        &b.execution,
        true,
        tool,
        out,
    );
}

/// §3.3: one violation per tool whose revision-bound contract changed while
/// `revision` stayed the same.
pub fn revision_rule(locked: &str, current: &str, tool_findings: &[Finding]) -> Vec<Finding> {
    if locked != current {
        return Vec::new();
    }
    let mut per_tool: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    for f in tool_findings.iter().filter(|f| f.revision_bound) {
        let e = per_tool
            .entry(f.tool.as_deref().unwrap_or_default())
            .or_insert((0, f.rule.as_str()));
        e.0 += 1;
    }
    per_tool
        .into_iter()
        .map(|(name, (n, first))| {
            finding(
                Class::Violation,
                Some(name),
                "/revision",
                "revision.unchanged",
                format!(
                    "the contract of `{name}` changed ({n} difference(s), first {first}) but revision stayed {current:?} (§3.3)"
                ),
                true,
            )
        })
        .collect()
}
