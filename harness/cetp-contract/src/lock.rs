//! The lock file (`cetp-lock/1`): a Provider's tool contracts as one
//! deterministic JSON document, built from its `negotiate`,
//! `get_provider_info` and `list_tools` answers (§2.2, §3.2, §3.3).
//!
//! The format is documented in `vectors/schema/README.md` and its JSON
//! Schema is `vectors/schema/lock.schema.json`. Determinism: no clocks, no
//! session data, tools sorted by name, scopes sorted, and every object's keys
//! in code-point order (written through `serde_json::Value`, whose maps are
//! sorted as long as serde_json's `preserve_order` feature stays off; a test
//! checks every level).

use crate::order::effect_class;
use cetp_proto::canonical::{canonical_hash, sha256_hex};
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, NegotiateContext,
    ToolListContext, ToolSummary, Violation,
};
use cetp_proto::schema::DEFAULT_DIALECT;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// Format tag of a lock file; a breaking change of the format bumps it.
pub const FORMAT: &str = "cetp-lock/1";

/// A Provider's tool contracts as recorded in a lock file: what a Consumer
/// was built against, to compare the live Provider with ([`crate::diff`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Always [`FORMAT`]; a lock of another format is refused.
    pub format: String,
    /// §3.1: the stable identity tools are routed by, with their name.
    pub provider_id: String,
    /// §3.2: the dialect every schema below is read in.
    pub schema_dialect: String,
    /// Optional capabilities granted when the lock was taken (all were
    /// offered): `execution` depends on them (§3.4).
    pub capabilities: Vec<String>,
    /// The scope catalog of `get_provider_info` (§3.2), by name.
    pub scopes: Vec<Scope>,
    /// The `list_tools` revision (§3.3).
    pub revision: String,
    /// By name.
    pub tools: Vec<ToolContract>,
}

/// One scope of the Provider's catalog (§3.2), as `get_provider_info`
/// declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// The name tools list in their `scopes`.
    pub name: String,
    /// `read` or `write`.
    pub access: String,
    /// The kind of data it reaches (`public`, `financial`, ...): a change to
    /// anything but [`crate::order::SENSITIVITY_PUBLIC`] is breaking.
    pub sensitivity: String,
    /// Display title, if the Provider gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Display description, if the Provider gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One tool's whole contract: what a Consumer relies on, not just its name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolContract {
    /// The name tools are called by; tools are matched across locks by it.
    pub name: String,
    /// Display title, if the Provider gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, as the Provider describes it to a model.
    pub description: String,
    /// The JSON Schema of its arguments: for a Consumer built against the
    /// lock it may only widen ([`crate::schema_diff`]).
    pub input_schema: Json,
    /// SHA-256 of the RFC 8785 form of `input_schema`.
    pub input_schema_sha256: String,
    /// The JSON Schema of its result data: may only narrow.
    pub output_schema: Json,
    /// SHA-256 of the RFC 8785 form of `output_schema`.
    pub output_schema_sha256: String,
    /// Sorted: §3.4 makes them a set ("the complete set" a call needs).
    pub scopes: Vec<String>,
    /// Its safety semantics (§3.4).
    pub annotations: Annotations,
    /// Derived from the annotations ([`crate::order::effect_class`]).
    pub effect_class: String,
}

/// §3.4, with the defaults of absent optional members filled in
/// (`destructive`, `idempotent`, `open_world` false; `execution` sync).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotations {
    /// What it changes: `read`, `create`, `update`, `delete`, `transaction`.
    pub effect: String,
    /// The cost of a failed or mistaken call: `low`, `moderate`, `high`.
    pub risk: String,
    /// Whether it may lose data or assets for good.
    pub destructive: bool,
    /// Whether repeating it with the same arguments has the same effect.
    pub idempotent: bool,
    /// Whether it reaches systems outside the Provider's control.
    pub open_world: bool,
    /// Per-call confirmation: `never`, `provider_policy`, `always`.
    pub confirmation: String,
    /// `sync`, or `sync_or_async` when it may answer with a background
    /// operation.
    pub execution: String,
}

/// The data of the three answers a lock is built from. `provider_info` may
/// be missing when only the tools matter (the §3.3 revision rule).
#[derive(Clone, Debug, PartialEq)]
pub struct Answers {
    /// `negotiate`'s `data`: the Provider id and the capabilities granted.
    pub negotiate: Json,
    /// `get_provider_info`'s `data`: the scope catalog.
    pub provider_info: Option<Json>,
    /// `list_tools`'s `data`: the revision and the tools.
    pub list_tools: Json,
}

/// Something in the answers that breaks the spec or cannot be hashed: the
/// lock built anyway is not one to record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The method whose answer it is in.
    pub method: &'static str,
    /// The tool it concerns, when the answer names one there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// JSON pointer into that answer's `data`.
    pub pointer: String,
    /// `cetp-proto` rule key (`tool.name.pattern`, ...), or `schema.canonical`.
    pub rule: &'static str,
    /// The spec section the rule enforces.
    pub section: &'static str,
    /// What is wrong, for a reader; quotes the Provider.
    pub message: String,
}

impl Problem {
    fn from_violation(method: &'static str, v: Violation, answer: &Json) -> Self {
        // `/tools/N/...` of a list_tools answer: the tool is the one at N.
        let tool =
            v.at.strip_prefix("/tools/")
                .and_then(|rest| rest.split('/').next())
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|_| method == "list_tools")
                .and_then(|i| answer.pointer(&format!("/tools/{i}/name")))
                .and_then(Json::as_str)
                .map(str::to_string);
        Problem {
            method,
            tool,
            pointer: v.at,
            rule: v.rule,
            section: v.section,
            message: v.message,
        }
    }
}

/// A lock and what was wrong with the answers it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Built {
    /// The lock, built as far as the answers allow.
    pub lock: Lock,
    /// Empty for a lock worth recording.
    pub problems: Vec<Problem>,
}

/// SHA-256 of the RFC 8785 form. A schema JCS cannot represent exactly
/// (integers beyond ±2^53) is hashed over serde_json's sorted text instead,
/// and [`build`] reports it.
pub fn schema_sha256(schema: &Json) -> String {
    canonical_hash(schema).unwrap_or_else(|_| sha256_hex(schema.to_string().as_bytes()))
}

fn raw_str(m: &Json, key: &str) -> Option<String> {
    m.get(key).and_then(Json::as_str).map(str::to_string)
}

/// Builds a lock from the answers. `offered` are the capabilities offered in
/// `negotiate`; `package`, when known, lets the provider_id namespace be
/// checked (§3.1). Never fails: what the answers lack is reported as a
/// [`Problem`] and left empty in the lock.
pub fn build(answers: &Answers, offered: &[String], package: Option<&str>) -> Built {
    let mut problems = Vec::new();
    let (negotiated, v) = validate_negotiate(
        &answers.negotiate,
        &NegotiateContext {
            consumer_versions: &[2],
            consumer_capabilities: offered,
            provider_versions: None,
            package,
        },
    );
    problems.extend(
        v.into_iter()
            .map(|v| Problem::from_violation("negotiate", v, &answers.negotiate)),
    );

    let mut scopes = Vec::new();
    let mut dialect = DEFAULT_DIALECT.to_string();
    let mut known_scopes = None;
    let mut provider_id = negotiated.provider_id.clone();
    if let Some(info) = &answers.provider_info {
        let (summary, v) = validate_provider_info(info, package);
        problems.extend(
            v.into_iter()
                .map(|v| Problem::from_violation("get_provider_info", v, info)),
        );
        dialect = summary.schema_dialect.clone();
        if !summary.provider_id.is_empty() {
            provider_id = summary.provider_id.clone();
        }
        scopes = scope_catalog(info);
        known_scopes = Some(summary.scopes);
    }

    let (list, v) = validate_tool_list(
        &answers.list_tools,
        &ToolListContext {
            negotiated: &negotiated.capabilities,
            known_scopes: known_scopes.as_ref(),
            dialect: &dialect,
        },
    );
    problems.extend(
        v.into_iter()
            .map(|v| Problem::from_violation("list_tools", v, &answers.list_tools)),
    );
    let tools = tool_contracts(list.tools, &answers.list_tools, &mut problems);
    Built {
        lock: Lock {
            format: FORMAT.to_string(),
            provider_id,
            schema_dialect: dialect,
            capabilities: negotiated.capabilities.into_iter().collect(),
            scopes,
            revision: list.revision,
            tools,
        },
        problems,
    }
}

/// The scope catalog of a `get_provider_info` answer, as the Provider said
/// it: the first of each name, sorted by name.
fn scope_catalog(info: &Json) -> Vec<Scope> {
    let mut scopes = Vec::new();
    let mut seen = BTreeSet::new();
    for s in info
        .get("scopes")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = raw_str(s, "name") else {
            continue;
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        scopes.push(Scope {
            name,
            access: raw_str(s, "access").unwrap_or_default(),
            sensitivity: raw_str(s, "sensitivity").unwrap_or_default(),
            title: raw_str(s, "title"),
            description: raw_str(s, "description"),
        });
    }
    scopes.sort_by(|a, b| a.name.cmp(&b.name));
    scopes
}

/// The contracts of the validated tools (the first of each name), sorted
/// by name; a schema RFC 8785 cannot represent is a problem.
fn tool_contracts(
    validated: Vec<ToolSummary>,
    list_tools: &Json,
    problems: &mut Vec<Problem>,
) -> Vec<ToolContract> {
    let raw_tools: Vec<&Json> = list_tools
        .get("tools")
        .and_then(Json::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut tools: Vec<ToolContract> = Vec::new();
    let mut seen = BTreeSet::new();
    for t in validated {
        if !seen.insert(t.name.clone()) {
            continue;
        }
        let index = raw_tools
            .iter()
            .position(|r| r.get("name").and_then(Json::as_str) == Some(t.name.as_str()));
        for (key, schema) in [
            ("input_schema", &t.input_schema),
            ("output_schema", &t.output_schema),
        ] {
            if let Err(e) = canonical_hash(schema) {
                problems.push(Problem {
                    method: "list_tools",
                    tool: Some(t.name.clone()),
                    pointer: format!("/tools/{}/{key}", index.unwrap_or_default()),
                    rule: "schema.canonical",
                    section: "3.3",
                    message: e.to_string(),
                });
            }
        }
        tools.push(tool_contract(t, index.map(|i| raw_tools[i])));
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// One tool's contract from its validated summary and, when found, the
/// tool as the Provider wrote it (`raw`).
fn tool_contract(t: ToolSummary, raw: Option<&Json>) -> ToolContract {
    // An annotation outside its enum reads as "" in the summary; the lock
    // keeps what the Provider said, so a drift message can name it.
    let said = |key: &str, read: String| {
        raw.and_then(|r| r.pointer(&format!("/annotations/{key}")))
            .and_then(Json::as_str)
            .map(str::to_string)
            .filter(|_| read.is_empty())
            .unwrap_or(read)
    };
    let mut tool_scopes = t.scopes.clone();
    tool_scopes.sort();
    tool_scopes.dedup();
    ToolContract {
        title: raw.and_then(|r| raw_str(r, "title")),
        description: raw
            .and_then(|r| raw_str(r, "description"))
            .unwrap_or_default(),
        input_schema_sha256: schema_sha256(&t.input_schema),
        output_schema_sha256: schema_sha256(&t.output_schema),
        input_schema: t.input_schema,
        output_schema: t.output_schema,
        scopes: tool_scopes,
        effect_class: effect_class(&said("effect", t.effect.clone()), t.idempotent).to_string(),
        annotations: Annotations {
            effect: said("effect", t.effect),
            risk: said("risk", t.risk),
            destructive: t.destructive,
            idempotent: t.idempotent,
            open_world: t.open_world,
            confirmation: said("confirmation", t.confirmation),
            execution: said("execution", t.execution),
        },
        name: t.name,
    }
}

impl Lock {
    /// The lock as written to disk: pretty JSON, keys sorted at every level,
    /// a final newline.
    pub fn to_pretty_json(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Json::Null);
        serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
    }

    /// Reads a lock file and checks that it is one: the format tag, tools
    /// and scopes sorted and unique, and every hash and effect class agreeing
    /// with what it was derived from (a hand-edited lock must be re-derived,
    /// not half-updated).
    pub fn parse(text: &str) -> Result<Lock, String> {
        let lock: Lock = serde_json::from_str(text).map_err(|e| format!("not a lock file: {e}"))?;
        if lock.format != FORMAT {
            return Err(format!(
                "lock format {:?} is not {FORMAT:?} (the one this harness reads)",
                lock.format
            ));
        }
        if !lock.tools.windows(2).all(|w| w[0].name < w[1].name) {
            return Err("tools are not sorted by name, or a name appears twice".into());
        }
        if !lock.scopes.windows(2).all(|w| w[0].name < w[1].name) {
            return Err("scopes are not sorted by name, or a name appears twice".into());
        }
        for t in &lock.tools {
            for (what, schema, hash) in [
                ("input_schema", &t.input_schema, &t.input_schema_sha256),
                ("output_schema", &t.output_schema, &t.output_schema_sha256),
            ] {
                if &schema_sha256(schema) != hash {
                    return Err(format!(
                        "tool {:?}: {what}_sha256 does not match {what}",
                        t.name
                    ));
                }
            }
            let class = effect_class(&t.annotations.effect, t.annotations.idempotent);
            if t.effect_class != class {
                return Err(format!(
                    "tool {:?}: effect_class {:?} does not follow from its annotations ({class})",
                    t.name, t.effect_class
                ));
            }
        }
        Ok(lock)
    }

    /// Recomputes the derived fields (hashes, effect class) and the order,
    /// after a program changed the lock.
    pub fn rederive(&mut self) {
        for t in &mut self.tools {
            t.input_schema_sha256 = schema_sha256(&t.input_schema);
            t.output_schema_sha256 = schema_sha256(&t.output_schema);
            t.scopes.sort();
            t.scopes.dedup();
            t.effect_class =
                effect_class(&t.annotations.effect, t.annotations.idempotent).to_string();
        }
        self.tools.sort_by(|a, b| a.name.cmp(&b.name));
        self.scopes.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// The contract of the tool `name`, if the lock has it.
    pub fn tool(&self, name: &str) -> Option<&ToolContract> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The contract of the tool `name`, to change (tests make drifted locks
    /// with it).
    pub fn tool_mut(&mut self, name: &str) -> Option<&mut ToolContract> {
        self.tools.iter_mut().find(|t| t.name == name)
    }
}
