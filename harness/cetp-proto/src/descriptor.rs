//! Validation of the descriptor objects a Provider returns: negotiation data
//! (§2.2), provider info and scopes (§3.1, §3.2), tool lists and annotations
//! (§3.3, §3.4).
//!
//! Validators work on the raw JSON rather than on serde structs so that every
//! problem is found (not just the first) and so that an unknown security enum
//! value is reported as such instead of as a generic parse failure. Unknown
//! fields are ignored, as §3.2 requires of both sides.

use crate::envelope::{json_type, Capability};
use crate::schema::{draft_for, foreign_refs, CompiledSchema, DEFAULT_DIALECT};
use serde_json::{Map, Value as Json};
use std::collections::BTreeSet;

pub use crate::violation::{Severity, Violation};

/// Every rule key a [`Violation`] can carry (here and in `schema`). The
/// conformance data maps each to requirement ids; a test keeps both in step.
pub const RULES: &[&str] = &[
    "shape.object",
    "shape.type",
    "shape.required",
    "enum.unknown",
    "negotiate.version.common",
    "negotiate.version.highest",
    "negotiate.capability.subset",
    "session_token.opaque",
    "session_token.length",
    "limits.minimum",
    "provider_id.namespace",
    "tool.name.pattern",
    "tool.name.unique",
    "scope.name.pattern",
    "scope.name.unique",
    "schema.dialect",
    "schema.compiles",
    "schema.ref.same_document",
    "tool.scope.declared",
    "annotation.confirmation.always",
    "annotation.execution.async_negotiated",
];

/// `[a-z][a-z0-9_]{0,63}` (§3.1).
pub fn is_valid_tool_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// `[a-z][a-z0-9_.-]{0,127}` (§3.2).
pub fn is_valid_scope_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_lowercase()
        && b[1..].iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(*c, b'_' | b'.' | b'-')
        })
}

/// `provider_id` must be the package name or live under its namespace (§3.1).
pub fn provider_id_in_namespace(provider_id: &str, package: &str) -> bool {
    provider_id == package
        || (provider_id.len() > package.len() + 1
            && provider_id.starts_with(package)
            && provider_id.as_bytes()[package.len()] == b'.')
}

/// Allowed values of the `effect` annotation (§3.4).
pub const EFFECTS: &[&str] = &["read", "create", "update", "delete", "transaction"];
/// Allowed values of the `risk` annotation (§3.4).
pub const RISKS: &[&str] = &["low", "moderate", "high"];
/// Allowed values of the `confirmation` annotation (§3.4).
pub const CONFIRMATIONS: &[&str] = &["never", "provider_policy", "always"];
/// Allowed values of the `execution` annotation (§3.4).
pub const EXECUTIONS: &[&str] = &["sync", "sync_or_async"];
/// Allowed values of a scope's `access` (§3.2).
pub const ACCESS: &[&str] = &["read", "write"];
/// Allowed values of a scope's `sensitivity` (§3.2).
pub const SENSITIVITIES: &[&str] = &[
    "public",
    "personal",
    "financial",
    "health",
    "device",
    "other",
];

/// Minimums of §2.2 `limits`.
pub const LIMIT_MINIMUMS: &[(&str, i64)] = &[
    ("max_request_bytes", 65_536),
    ("max_inline_result_bytes", 262_144),
    ("max_concurrent_requests", 1),
    ("idempotency_window_seconds", 86_400),
];

/// Longest `session_token` a Provider may issue, in bytes (§2.2).
pub const MAX_SESSION_TOKEN_BYTES: usize = 256;

struct Ctx {
    out: Vec<Violation>,
}

impl Ctx {
    fn must(&mut self, rule: &'static str, section: &'static str, at: &str, msg: String) {
        self.out
            .push(Violation::must(rule, section, at.to_string(), msg));
    }

    fn object<'a>(
        &mut self,
        v: &'a Json,
        at: &str,
        section: &'static str,
    ) -> Option<&'a Map<String, Json>> {
        match v.as_object() {
            Some(m) => Some(m),
            None => {
                self.must(
                    "shape.object",
                    section,
                    at,
                    format!("expected an object, found {}", json_type(v)),
                );
                None
            }
        }
    }

    /// Required string member.
    fn string<'a>(
        &mut self,
        m: &'a Map<String, Json>,
        key: &str,
        at: &str,
        section: &'static str,
    ) -> Option<&'a str> {
        match m.get(key) {
            Some(Json::String(s)) => Some(s),
            Some(other) => {
                self.must(
                    "shape.type",
                    section,
                    &format!("{at}/{key}"),
                    format!("expected a string, found {}", json_type(other)),
                );
                None
            }
            None => {
                self.must(
                    "shape.required",
                    section,
                    &format!("{at}/{key}"),
                    format!("required member `{key}` is missing"),
                );
                None
            }
        }
    }

    fn opt_string<'a>(
        &mut self,
        m: &'a Map<String, Json>,
        key: &str,
        at: &str,
        section: &'static str,
    ) -> Option<&'a str> {
        match m.get(key) {
            None | Some(Json::Null) => None,
            Some(_) => self.string(m, key, at, section),
        }
    }

    fn bool_or_default(
        &mut self,
        m: &Map<String, Json>,
        key: &str,
        at: &str,
        section: &'static str,
    ) -> bool {
        match m.get(key) {
            None => false,
            Some(Json::Bool(b)) => *b,
            Some(other) => {
                self.must(
                    "shape.type",
                    section,
                    &format!("{at}/{key}"),
                    format!("expected a boolean, found {}", json_type(other)),
                );
                false
            }
        }
    }

    /// A required member from a closed (security) enum: unknown values are
    /// rejected, never ignored (§3.2).
    fn enumerated<'a>(
        &mut self,
        m: &'a Map<String, Json>,
        key: &str,
        allowed: &[&str],
        at: &str,
        section: &'static str,
        required: bool,
    ) -> Option<&'a str> {
        let value = if required {
            self.string(m, key, at, section)?
        } else {
            self.opt_string(m, key, at, section)?
        };
        if allowed.contains(&value) {
            Some(value)
        } else {
            self.must(
                "enum.unknown",
                section,
                &format!("{at}/{key}"),
                format!(
                    "unknown value {value:?} for `{key}` (allowed: {})",
                    allowed.join(", ")
                ),
            );
            None
        }
    }

    fn string_array<'a>(
        &mut self,
        m: &'a Map<String, Json>,
        key: &str,
        at: &str,
        section: &'static str,
    ) -> Option<Vec<&'a str>> {
        match m.get(key) {
            Some(Json::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item.as_str() {
                        Some(s) => out.push(s),
                        None => self.must(
                            "shape.type",
                            section,
                            &format!("{at}/{key}/{i}"),
                            format!("expected a string, found {}", json_type(item)),
                        ),
                    }
                }
                Some(out)
            }
            Some(other) => {
                self.must(
                    "shape.type",
                    section,
                    &format!("{at}/{key}"),
                    format!("expected an array, found {}", json_type(other)),
                );
                None
            }
            None => {
                self.must(
                    "shape.required",
                    section,
                    &format!("{at}/{key}"),
                    format!("required member `{key}` is missing"),
                );
                None
            }
        }
    }
}

/// What the Consumer offered in `negotiate`, and what it knows of the Provider.
pub struct NegotiateContext<'a> {
    /// The `consumer_versions` the Consumer sent, highest first (§2.2).
    pub consumer_versions: &'a [i32],
    /// The `consumer_capabilities` the Consumer offered; the answer may only pick from them.
    pub consumer_capabilities: &'a [String],
    /// Versions the manifest declared, if known (to check "highest common").
    pub provider_versions: Option<&'a BTreeSet<i32>>,
    /// The Provider's package, if known (to check the provider_id namespace).
    pub package: Option<&'a str>,
}

/// The parts of a negotiation result the rest of a session needs.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Negotiated {
    /// The `selected_version` the Provider chose.
    pub selected_version: i64,
    /// The Provider's stable id (§3.1).
    pub provider_id: String,
    /// Token every later v2 call must carry (§4.1).
    pub session_token: String,
    /// Optional capabilities both sides agreed on (§2.3).
    pub capabilities: BTreeSet<String>,
    /// The negotiated `limits`, by name (`max_request_bytes`, ...).
    pub limits: std::collections::BTreeMap<String, i64>,
}

impl Negotiated {
    /// Whether the optional capability was negotiated; a Consumer must not use it otherwise (§2.3).
    pub fn has(&self, cap: Capability) -> bool {
        self.capabilities.contains(cap.as_str())
    }
    /// One negotiated limit, `None` when the Provider did not send it.
    pub fn limit(&self, key: &str) -> Option<i64> {
        self.limits.get(key).copied()
    }
}

/// Validates `negotiate` success data (§2.2). Returns what could be read and
/// every violation found, member by member in the order §2.2 lists them.
pub fn validate_negotiate(data: &Json, cx: &NegotiateContext<'_>) -> (Negotiated, Vec<Violation>) {
    let mut c = Ctx { out: Vec::new() };
    let mut n = Negotiated::default();
    let Some(m) = c.object(data, "", "2.2") else {
        return (n, c.out);
    };
    negotiated_version(&mut c, m, cx, &mut n);
    if let Some(id) = c.string(m, "provider_id", "", "2.2") {
        n.provider_id = id.to_string();
        if let Some(pkg) = cx.package {
            if !provider_id_in_namespace(id, pkg) {
                c.must(
                    "provider_id.namespace",
                    "3.1",
                    "/provider_id",
                    format!("provider_id {id:?} is outside package namespace {pkg:?}"),
                );
            }
        }
    }
    c.opt_string(m, "provider_name", "", "2.2");
    negotiated_session_token(&mut c, m, &mut n);
    c.opt_string(m, "expires_at", "", "2.2");
    if let Some(caps) = c.string_array(m, "capabilities", "", "2.2") {
        for (i, cap) in caps.iter().enumerate() {
            if !cx.consumer_capabilities.iter().any(|o| o == cap) {
                c.must(
                    "negotiate.capability.subset",
                    "2.2",
                    &format!("/capabilities/{i}"),
                    format!("capability {cap:?} was not offered by the Consumer"),
                );
            }
            n.capabilities.insert((*cap).to_string());
        }
    }
    negotiated_limits(&mut c, m, &mut n);
    (n, c.out)
}

/// `selected_version`: one the Consumer offered, and the highest common
/// one when the manifest's versions are known.
fn negotiated_version(
    c: &mut Ctx,
    m: &Map<String, Json>,
    cx: &NegotiateContext<'_>,
    n: &mut Negotiated,
) {
    match m.get("selected_version") {
        Some(Json::Number(v)) if v.as_i64().is_some() => {
            n.selected_version = v.as_i64().unwrap_or_default();
            if !cx
                .consumer_versions
                .iter()
                .any(|cv| i64::from(*cv) == n.selected_version)
            {
                c.must(
                    "negotiate.version.common",
                    "2.2",
                    "/selected_version",
                    format!(
                        "selected version {} was not offered by the Consumer",
                        n.selected_version
                    ),
                );
            } else if let Some(pv) = cx.provider_versions {
                let best = cx.consumer_versions.iter().filter(|v| pv.contains(v)).max();
                if let Some(best) = best {
                    if i64::from(*best) != n.selected_version {
                        c.must(
                            "negotiate.version.highest",
                            "2.2",
                            "/selected_version",
                            format!(
                                "selected version {} but {best} is the highest common version",
                                n.selected_version
                            ),
                        );
                    }
                }
            }
        }
        Some(other) => c.must(
            "shape.type",
            "2.2",
            "/selected_version",
            format!("expected an integer, found {}", json_type(other)),
        ),
        None => c.must(
            "shape.required",
            "2.2",
            "/selected_version",
            "required member `selected_version` is missing".into(),
        ),
    }
}

/// `session_token`: not empty, at most [`MAX_SESSION_TOKEN_BYTES`].
fn negotiated_session_token(c: &mut Ctx, m: &Map<String, Json>, n: &mut Negotiated) {
    let Some(tok) = c.string(m, "session_token", "", "2.2") else {
        return;
    };
    n.session_token = tok.to_string();
    if tok.is_empty() {
        c.must(
            "session_token.opaque",
            "2.2",
            "/session_token",
            "session_token is empty".into(),
        );
    }
    if tok.len() > MAX_SESSION_TOKEN_BYTES {
        c.must(
            "session_token.length",
            "2.2",
            "/session_token",
            format!(
                "session_token is {} bytes, more than {MAX_SESSION_TOKEN_BYTES}",
                tok.len()
            ),
        );
    }
}

/// `limits`: each of [`LIMIT_MINIMUMS`] present and at least its minimum.
fn negotiated_limits(c: &mut Ctx, m: &Map<String, Json>, n: &mut Negotiated) {
    match m.get("limits") {
        Some(Json::Object(limits)) => {
            for (key, min) in LIMIT_MINIMUMS {
                match limits.get(*key).and_then(Json::as_i64) {
                    Some(v) => {
                        n.limits.insert((*key).to_string(), v);
                        if v < *min {
                            c.must(
                                "limits.minimum",
                                "2.2",
                                &format!("/limits/{key}"),
                                format!("{key} is {v}, below the minimum {min}"),
                            );
                        }
                    }
                    None => c.must(
                        "limits.minimum",
                        "2.2",
                        &format!("/limits/{key}"),
                        format!("limit `{key}` is missing or not an integer"),
                    ),
                }
            }
        }
        Some(other) => c.must(
            "shape.type",
            "2.2",
            "/limits",
            format!("expected an object, found {}", json_type(other)),
        ),
        None => c.must(
            "shape.required",
            "2.2",
            "/limits",
            "required member `limits` is missing".into(),
        ),
    }
}

/// Provider info, as the rest of a session needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderInfoSummary {
    /// The Provider's stable id (§3.1).
    pub provider_id: String,
    /// JSON Schema dialect of every schema in the session (§3.2; Draft 2020-12 by default).
    pub schema_dialect: String,
    /// Names of the scopes the Provider declares; tools may only require these.
    pub scopes: BTreeSet<String>,
}

/// Validates `get_provider_info` data (§3.2).
pub fn validate_provider_info(
    data: &Json,
    package: Option<&str>,
) -> (ProviderInfoSummary, Vec<Violation>) {
    let mut c = Ctx { out: Vec::new() };
    let mut s = ProviderInfoSummary {
        schema_dialect: DEFAULT_DIALECT.to_string(),
        ..Default::default()
    };
    let Some(m) = c.object(data, "", "3.2") else {
        return (s, c.out);
    };
    if let Some(id) = c.string(m, "provider_id", "", "3.2") {
        s.provider_id = id.to_string();
        if let Some(pkg) = package {
            if !provider_id_in_namespace(id, pkg) {
                c.must(
                    "provider_id.namespace",
                    "3.1",
                    "/provider_id",
                    format!("provider_id {id:?} is outside package namespace {pkg:?}"),
                );
            }
        }
    }
    c.string(m, "provider_name", "", "3.2");
    c.string(m, "description", "", "3.2");
    if let Some(d) = c.opt_string(m, "schema_dialect", "", "3.2") {
        s.schema_dialect = d.to_string();
        if draft_for(d).is_none() {
            c.must(
                "schema.dialect",
                "3.2",
                "/schema_dialect",
                format!("unknown schema dialect {d:?}"),
            );
        }
    }
    match m.get("scopes") {
        Some(Json::Array(scopes)) => {
            for (i, scope) in scopes.iter().enumerate() {
                let at = format!("/scopes/{i}");
                let Some(sm) = c.object(scope, &at, "3.2") else {
                    continue;
                };
                if let Some(name) = c.string(sm, "name", &at, "3.2") {
                    if !is_valid_scope_name(name) {
                        c.must(
                            "scope.name.pattern",
                            "3.2",
                            &format!("{at}/name"),
                            format!("scope name {name:?} does not match [a-z][a-z0-9_.-]{{0,127}}"),
                        );
                    }
                    if !s.scopes.insert(name.to_string()) {
                        c.must(
                            "scope.name.unique",
                            "3.2",
                            &format!("{at}/name"),
                            format!("scope name {name:?} appears twice"),
                        );
                    }
                }
                c.enumerated(sm, "access", ACCESS, &at, "3.2", true);
                c.enumerated(sm, "sensitivity", SENSITIVITIES, &at, "3.2", true);
                c.opt_string(sm, "title", &at, "3.2");
                c.opt_string(sm, "description", &at, "3.2");
            }
        }
        Some(other) => c.must(
            "shape.type",
            "3.2",
            "/scopes",
            format!("expected an array, found {}", json_type(other)),
        ),
        None => c.must(
            "shape.required",
            "3.2",
            "/scopes",
            "required member `scopes` is missing".into(),
        ),
    }
    (s, c.out)
}

/// One tool as the rest of a session needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSummary {
    /// Tool name, unique within the Provider (§3.1).
    pub name: String,
    /// Schema the `args` must satisfy.
    pub input_schema: Json,
    /// Schema the result value must satisfy (§4.2).
    pub output_schema: Json,
    /// Every scope needed to run the tool (§3.4).
    pub scopes: Vec<String>,
    /// The `effect` annotation; anything but `read` must be deduplicated (§6).
    pub effect: String,
    /// The `risk` annotation.
    pub risk: String,
    /// The `destructive` annotation.
    pub destructive: bool,
    /// The `idempotent` annotation (it does not lift deduplication, §6).
    pub idempotent: bool,
    /// The `open_world` annotation.
    pub open_world: bool,
    /// The `confirmation` annotation.
    pub confirmation: String,
    /// The `execution` annotation; `sync_or_async` needs `async_operations` (§3.4).
    pub execution: String,
}

/// What a `list_tools` answer is judged against besides itself.
pub struct ToolListContext<'a> {
    /// The negotiated capabilities (for `execution = sync_or_async`, §3.4).
    pub negotiated: &'a BTreeSet<String>,
    /// Scopes from provider info, when known: tools may only require those.
    pub known_scopes: Option<&'a BTreeSet<String>>,
    /// The session's `schema_dialect`, which the tool schemas are compiled with.
    pub dialect: &'a str,
}

/// A validated `list_tools` answer (§3.3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolList {
    /// The `revision`, which must change with the tools (§3.3).
    pub revision: String,
    /// The tools that could be read.
    pub tools: Vec<ToolSummary>,
}

/// Validates `list_tools` data (§3.1, §3.3, §3.4).
pub fn validate_tool_list(data: &Json, cx: &ToolListContext<'_>) -> (ToolList, Vec<Violation>) {
    let mut c = Ctx { out: Vec::new() };
    let mut list = ToolList::default();
    let Some(m) = c.object(data, "", "3.3") else {
        return (list, c.out);
    };
    if let Some(rev) = c.string(m, "revision", "", "3.3") {
        list.revision = rev.to_string();
    }
    let tools = match m.get("tools") {
        Some(Json::Array(t)) => t,
        Some(other) => {
            c.must(
                "shape.type",
                "3.3",
                "/tools",
                format!("expected an array, found {}", json_type(other)),
            );
            return (list, c.out);
        }
        None => {
            c.must(
                "shape.required",
                "3.3",
                "/tools",
                "required member `tools` is missing".into(),
            );
            return (list, c.out);
        }
    };
    let mut names = BTreeSet::new();
    for (i, tool) in tools.iter().enumerate() {
        if let Some(t) = validate_tool(&mut c, tool, &format!("/tools/{i}"), cx, &mut names) {
            list.tools.push(t);
        }
    }
    (list, c.out)
}

/// One tool of `tools[]` at `at`; None when it is not an object or has no
/// annotations object. `names` are the names seen so far.
fn validate_tool(
    c: &mut Ctx,
    tool: &Json,
    at: &str,
    cx: &ToolListContext<'_>,
    names: &mut BTreeSet<String>,
) -> Option<ToolSummary> {
    let tm = c.object(tool, at, "3.3")?;
    let name = tool_name(c, tm, at, names);
    c.opt_string(tm, "title", at, "3.3");
    c.string(tm, "description", at, "3.3");
    let [input_schema, output_schema] = tool_schemas(c, tm, at, cx);
    let scopes = c.string_array(tm, "scopes", at, "3.3").unwrap_or_default();
    if let Some(known) = cx.known_scopes {
        for (j, s) in scopes.iter().enumerate() {
            if !known.contains(*s) {
                c.must(
                    "tool.scope.declared",
                    "3.3",
                    &format!("{at}/scopes/{j}"),
                    format!("scope {s:?} is not in the provider's scope catalog"),
                );
            }
        }
    }
    let aat = format!("{at}/annotations");
    let Some(am) = tm.get("annotations").and_then(Json::as_object) else {
        c.must(
            "shape.required",
            "3.4",
            &aat,
            "required member `annotations` is missing or not an object".into(),
        );
        return None;
    };
    let a = tool_annotations(c, am, &aat, cx);
    Some(ToolSummary {
        name,
        input_schema,
        output_schema,
        scopes: scopes.into_iter().map(str::to_string).collect(),
        effect: a.effect.to_string(),
        risk: a.risk.to_string(),
        destructive: a.destructive,
        idempotent: a.idempotent,
        open_world: a.open_world,
        confirmation: a.confirmation.to_string(),
        execution: a.execution.to_string(),
    })
}

/// A tool's `name`: the §3.1 pattern, and unique in the list.
fn tool_name(
    c: &mut Ctx,
    tm: &Map<String, Json>,
    at: &str,
    names: &mut BTreeSet<String>,
) -> String {
    let name = c
        .string(tm, "name", at, "3.1")
        .unwrap_or_default()
        .to_string();
    if !name.is_empty() || tm.contains_key("name") {
        if !is_valid_tool_name(&name) {
            c.must(
                "tool.name.pattern",
                "3.1",
                &format!("{at}/name"),
                format!("tool name {name:?} does not match [a-z][a-z0-9_]{{0,63}}"),
            );
        }
        if !names.insert(name.clone()) {
            c.must(
                "tool.name.unique",
                "3.1",
                &format!("{at}/name"),
                format!("tool name {name:?} appears twice"),
            );
        }
    }
    name
}

/// A tool's `input_schema` and `output_schema` (Null when missing): only
/// same-document references, and compiling under the dialect.
fn tool_schemas(
    c: &mut Ctx,
    tm: &Map<String, Json>,
    at: &str,
    cx: &ToolListContext<'_>,
) -> [Json; 2] {
    let mut schemas = [Json::Null, Json::Null];
    for (slot, key) in ["input_schema", "output_schema"].iter().enumerate() {
        let sat = format!("{at}/{key}");
        match tm.get(*key) {
            Some(schema) => {
                let refs = foreign_refs(schema, &sat);
                let had_refs = !refs.is_empty();
                c.out.extend(refs);
                if !had_refs {
                    if let Err(e) = CompiledSchema::compile(schema, cx.dialect) {
                        c.must("schema.compiles", "3.3", &sat, e);
                    }
                }
                schemas[slot] = schema.clone();
            }
            None => c.must(
                "shape.required",
                "3.3",
                &sat,
                format!("required member `{key}` is missing"),
            ),
        }
    }
    schemas
}

/// A tool's §3.4 annotations as read ("" for a missing or unknown enum,
/// `execution` defaulting to "sync").
struct Annotations<'a> {
    effect: &'a str,
    risk: &'a str,
    confirmation: &'a str,
    execution: &'a str,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
}

/// The §3.4 annotations: known enum values, and the two rules that join
/// them (what needs `confirmation: always`; `sync_or_async` only with
/// `async_operations` negotiated).
fn tool_annotations<'a>(
    c: &mut Ctx,
    am: &'a Map<String, Json>,
    aat: &str,
    cx: &ToolListContext<'_>,
) -> Annotations<'a> {
    let effect = c
        .enumerated(am, "effect", EFFECTS, aat, "3.4", true)
        .unwrap_or("");
    let risk = c
        .enumerated(am, "risk", RISKS, aat, "3.4", true)
        .unwrap_or("");
    let confirmation = c
        .enumerated(am, "confirmation", CONFIRMATIONS, aat, "3.4", true)
        .unwrap_or("");
    let execution = c
        .enumerated(am, "execution", EXECUTIONS, aat, "3.4", false)
        .unwrap_or("sync");
    let destructive = c.bool_or_default(am, "destructive", aat, "3.4");
    let idempotent = c.bool_or_default(am, "idempotent", aat, "3.4");
    let open_world = c.bool_or_default(am, "open_world", aat, "3.4");
    let needs_always = matches!(effect, "delete" | "transaction") || destructive || risk == "high";
    if needs_always && !confirmation.is_empty() && confirmation != "always" {
        c.must(
            "annotation.confirmation.always",
            "3.4",
            &format!("{aat}/confirmation"),
            format!("effect={effect}, risk={risk}, destructive={destructive} require confirmation=always, found {confirmation:?}"),
        );
    }
    if execution == "sync_or_async" && !cx.negotiated.contains(Capability::AsyncOperations.as_str())
    {
        c.must(
            "annotation.execution.async_negotiated",
            "3.4",
            &format!("{aat}/execution"),
            "execution=sync_or_async without a negotiated async_operations capability".into(),
        );
    }
    Annotations {
        effect,
        risk,
        confirmation,
        execution,
        destructive,
        idempotent,
        open_world,
    }
}

/// Validates a v1 `list_tools` answer (v1: `tools[]` with name, description,
/// parameters). Returns the tool names.
pub fn validate_v1_tool_list(data: &Json) -> (Vec<String>, Vec<Violation>) {
    let mut c = Ctx { out: Vec::new() };
    let mut names = Vec::new();
    let Some(m) = c.object(data, "", "8") else {
        return (names, c.out);
    };
    let Some(tools) = m.get("tools").and_then(Json::as_array) else {
        c.must(
            "shape.required",
            "8",
            "/tools",
            "required member `tools` is missing or not an array".into(),
        );
        return (names, c.out);
    };
    for (i, t) in tools.iter().enumerate() {
        let at = format!("/tools/{i}");
        let Some(tm) = c.object(t, &at, "8") else {
            continue;
        };
        if let Some(n) = c.string(tm, "name", &at, "8") {
            names.push(n.to_string());
        }
    }
    (names, c.out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(annotations: Json) -> Json {
        json!({"revision": "r1", "tools": [{
            "name": "create_alert", "description": "d",
            "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
            "scopes": ["alerts.write"], "annotations": annotations, "x-vendor": 1
        }]})
    }

    fn check(data: &Json, caps: &[&str]) -> Vec<Violation> {
        let negotiated: BTreeSet<String> = caps.iter().map(|s| s.to_string()).collect();
        let cx = ToolListContext {
            negotiated: &negotiated,
            known_scopes: None,
            dialect: DEFAULT_DIALECT,
        };
        validate_tool_list(data, &cx).1
    }

    #[test]
    fn names() {
        assert!(is_valid_tool_name("a"));
        assert!(is_valid_tool_name(&format!("a{}", "b".repeat(63))));
        assert!(!is_valid_tool_name(&format!("a{}", "b".repeat(64))));
        assert!(!is_valid_tool_name("Create"));
        assert!(!is_valid_tool_name("_x"));
        assert!(is_valid_scope_name("alerts.write-2_x"));
        assert!(!is_valid_scope_name("Alerts"));
        assert!(provider_id_in_namespace("com.a.b", "com.a"));
        assert!(!provider_id_in_namespace("com.ab", "com.a"));
        assert!(!provider_id_in_namespace("com.a.", "com.a"));
    }

    #[test]
    fn clean_tool_passes_and_unknown_fields_are_ignored() {
        let v = check(
            &tool(
                json!({"effect":"create","risk":"moderate","confirmation":"provider_policy","execution":"sync","future":"x"}),
            ),
            &[],
        );
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn high_risk_needs_always() {
        for ann in [
            json!({"effect":"delete","risk":"low","confirmation":"never"}),
            json!({"effect":"transaction","risk":"low","confirmation":"provider_policy"}),
            json!({"effect":"update","risk":"high","confirmation":"provider_policy"}),
            json!({"effect":"update","risk":"low","destructive":true,"confirmation":"never"}),
        ] {
            let v = check(&tool(ann.clone()), &[]);
            assert_eq!(v.len(), 1, "{ann}: {v:?}");
            assert_eq!(v[0].rule, "annotation.confirmation.always");
        }
    }

    #[test]
    fn unknown_security_enum_rejected() {
        let v = check(
            &tool(json!({"effect":"read","risk":"none","confirmation":"never"})),
            &[],
        );
        assert_eq!(v[0].rule, "enum.unknown");
        assert_eq!(v[0].at, "/tools/0/annotations/risk");
    }

    #[test]
    fn async_needs_capability() {
        let ann = json!({"effect":"read","risk":"low","confirmation":"never","execution":"sync_or_async"});
        assert_eq!(
            check(&tool(ann.clone()), &[])[0].rule,
            "annotation.execution.async_negotiated"
        );
        assert!(check(&tool(ann), &["async_operations"]).is_empty());
    }

    #[test]
    fn negotiate_limits_and_token() {
        let data = json!({"selected_version": 2, "provider_id": "com.x", "session_token": "t".repeat(257),
            "capabilities": ["async_operations", "teleport"],
            "limits": {"max_request_bytes": 1024, "max_inline_result_bytes": 262144, "max_concurrent_requests": 1, "idempotency_window_seconds": 86400}});
        let offered = vec!["async_operations".to_string()];
        let pv: BTreeSet<i32> = [1, 2].into();
        let (n, v) = validate_negotiate(
            &data,
            &NegotiateContext {
                consumer_versions: &[2, 1],
                consumer_capabilities: &offered,
                provider_versions: Some(&pv),
                package: Some("com.x"),
            },
        );
        let rules: Vec<_> = v.iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            vec![
                "session_token.length",
                "negotiate.capability.subset",
                "limits.minimum"
            ]
        );
        assert_eq!(n.limit("max_request_bytes"), Some(1024));
    }

    #[test]
    fn not_highest_version() {
        let data = json!({"selected_version": 1, "provider_id": "com.x", "session_token": "t", "capabilities": [],
            "limits": {"max_request_bytes": 65536, "max_inline_result_bytes": 262144, "max_concurrent_requests": 1, "idempotency_window_seconds": 86400}});
        let pv: BTreeSet<i32> = [1, 2].into();
        let (_, v) = validate_negotiate(
            &data,
            &NegotiateContext {
                consumer_versions: &[2, 1],
                consumer_capabilities: &[],
                provider_versions: Some(&pv),
                package: None,
            },
        );
        assert_eq!(v[0].rule, "negotiate.version.highest");
    }

    #[test]
    fn provider_info_scopes() {
        let data = json!({"provider_id": "com.x", "provider_name": "X", "description": "d",
            "scopes": [{"name": "a.b", "access": "write", "sensitivity": "financial"},
                       {"name": "a.b", "access": "admin", "sensitivity": "secret"}]});
        let (s, v) = validate_provider_info(&data, Some("com.x"));
        assert_eq!(s.scopes.len(), 1);
        let rules: Vec<_> = v.iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            vec!["scope.name.unique", "enum.unknown", "enum.unknown"]
        );
    }
}

/// The `data` of a negotiate, get_provider_info or list_tools answer with
/// every list the spec treats as a set put in one order, so that two
/// answers compare equal exactly when they say the same thing.
///
/// §3.3 binds `revision` to the tool *set*, its schemas and security
/// semantics; no clause fixes the order of tools, of a tool's or the
/// Provider's scopes, or of granted capabilities. Inside schemas, the
/// members of `required`, `enum` and a `type` array are sets too (their
/// order changes no validation result). Tools and scopes are ordered by
/// name (ties by their canonical JSON), plain strings by value. Anything
/// else keeps its order (`allOf` and its kin, `prefixItems`, examples).
pub fn sets_in_order(data: &Json) -> Json {
    let mut d = data.clone();
    if let Some(Json::Array(caps)) = d.get_mut("capabilities") {
        sort_values(caps);
    }
    if let Some(Json::Array(scopes)) = d.get_mut("scopes") {
        sort_values(scopes);
    }
    if let Some(Json::Array(tools)) = d.get_mut("tools") {
        for t in tools.iter_mut() {
            if let Some(Json::Array(scopes)) = t.get_mut("scopes") {
                sort_values(scopes);
            }
            for key in ["input_schema", "output_schema"] {
                if let Some(schema) = t.get_mut(key) {
                    schema_sets_in_order(schema, 0);
                }
            }
        }
        sort_values(tools);
    }
    d
}

/// Orders `required`, `enum` and `type` arrays throughout a schema (bounded depth:
/// a hostile schema nested deeper is left as it came below that depth).
fn schema_sets_in_order(schema: &mut Json, depth: usize) {
    if depth > 64 {
        return;
    }
    match schema {
        Json::Object(map) => {
            for (k, v) in map.iter_mut() {
                match (k.as_str(), &mut *v) {
                    ("required" | "type" | "enum", Json::Array(items)) => sort_values(items),
                    // Member names under properties are keys, not schemas
                    // to reorder; their values are schemas.
                    _ => schema_sets_in_order(v, depth + 1),
                }
            }
        }
        Json::Array(items) => {
            for v in items {
                schema_sets_in_order(v, depth + 1);
            }
        }
        _ => {}
    }
}

/// Sorts by `name` when every item has one, else by canonical text.
fn sort_values(items: &mut [Json]) {
    let key = |v: &Json| {
        (
            v.get("name")
                .and_then(Json::as_str)
                .or_else(|| v.as_str())
                .map(str::to_string),
            crate::canonical::canonicalize(v).unwrap_or_else(|_| v.to_string()),
        )
    };
    items.sort_by_cached_key(key);
}

#[cfg(test)]
mod set_order_tests {
    use super::sets_in_order;
    use serde_json::json;

    #[test]
    fn order_of_sets_does_not_matter_and_content_does() {
        let a = json!({"revision": "r", "tools": [
            {"name": "b", "scopes": ["x", "y"], "input_schema": {"type": ["string", "null"], "required": ["p", "q"]}},
            {"name": "a", "scopes": ["z"]}],
            "capabilities": ["large_results", "cancellation"], "scopes": [{"name": "s2"}, {"name": "s1"}]});
        let b = json!({"revision": "r", "tools": [
            {"name": "a", "scopes": ["z"]},
            {"name": "b", "scopes": ["y", "x"], "input_schema": {"required": ["q", "p"], "type": ["null", "string"]}}],
            "capabilities": ["cancellation", "large_results"], "scopes": [{"name": "s1"}, {"name": "s2"}]});
        assert_eq!(sets_in_order(&a), sets_in_order(&b));
        // A changed member is still a change; an enum is a set, a tuple not.
        let mut c = b.clone();
        c["tools"][1]["scopes"] = json!(["x", "w"]);
        assert_ne!(sets_in_order(&a), sets_in_order(&c));
        let e1 = json!({"tools": [{"name": "a", "input_schema": {"enum": [1, 2]}}]});
        let e2 = json!({"tools": [{"name": "a", "input_schema": {"enum": [2, 1]}}]});
        assert_eq!(sets_in_order(&e1), sets_in_order(&e2));
        let t1 = json!({"tools": [{"name": "a", "input_schema": {"prefixItems": [{"type": "string"}, {"type": "integer"}]}}]});
        let t2 = json!({"tools": [{"name": "a", "input_schema": {"prefixItems": [{"type": "integer"}, {"type": "string"}]}}]});
        assert_ne!(sets_in_order(&t1), sets_in_order(&t2));
    }
}
