//! The reference Provider's tools and scopes, and what they compute; the
//! catalog machinery both fixture sets share (the notes set lives in
//! `notes.rs`). The tool table itself is data: `data/reference-tools.json`.
//!
//! Descriptors follow §3.1-§3.4; the listing faults change only what is
//! published, the routing faults (`tool_name_invalid`,
//! `high_risk_without_always`) change the definition the Provider acts on.

use super::args::MAX_HISTORY_ROWS;
use super::hostile;
use super::mutant::Mutant;
use super::notes;
use super::tool::{parse_table, ScopeDef, Spec, TableTool, ToolDef, ToolKind};
use super::variant::Variant;
use super::FixtureSet;
use cetp_proto::canonical::{canonical_hash, sha256_hex};
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use serde_json::{json, Value as Json};
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

pub(crate) const SCOPES: &[ScopeDef] = &[
    ScopeDef {
        name: "quotes.read",
        title: "Read quotes",
        description: "Look up current prices of securities",
        access: "read",
        sensitivity: "public",
    },
    ScopeDef {
        name: "alerts.read",
        title: "Read price alerts",
        description: "See your price alerts",
        access: "read",
        sensitivity: "personal",
    },
    ScopeDef {
        name: "alerts.write",
        title: "Manage price alerts",
        description: "Create and delete your price alerts",
        access: "write",
        sensitivity: "financial",
    },
    ScopeDef {
        name: "portfolio.sync",
        title: "Synchronise portfolio",
        description: "Synchronise your portfolio with your broker",
        access: "write",
        sensitivity: "financial",
    },
    ScopeDef {
        name: "history.read",
        title: "Read trading history",
        description: "Export your trading history",
        access: "read",
        sensitivity: "personal",
    },
];

/// The scope catalog of a fixture set.
pub(crate) fn scope_defs(set: FixtureSet) -> &'static [ScopeDef] {
    match set {
        FixtureSet::Reference => SCOPES,
        FixtureSet::Notes => notes::SCOPES,
    }
}

/// Scopes every caller holds unless configured otherwise: the read scopes.
pub(crate) fn read_scopes(set: FixtureSet) -> BTreeSet<String> {
    scope_defs(set)
        .iter()
        .filter(|s| s.access == "read")
        .map(|s| s.name.to_string())
        .collect()
}

pub(crate) fn all_scopes(set: FixtureSet) -> BTreeSet<String> {
    scope_defs(set).iter().map(|s| s.name.to_string()).collect()
}

/// Longest `symbol` get_quote accepts, and the shorter one of the catalog's
/// next release (an incompatible input change: the input narrowed).
pub(crate) const SYMBOL_MAX_LENGTH: u64 = 32;
pub(crate) const NEXT_RELEASE_SYMBOL_MAX_LENGTH: u64 = 16;

pub(crate) struct Catalog {
    pub tools: Vec<ToolDef>,
    /// The catalog whose list the revision is computed from, when it is not
    /// this one (the `schema_changed_revision_kept` mutant).
    revision_of: Option<Box<Catalog>>,
    /// `list_tools` answers by their inputs: the list and its revision hash
    /// depend on nothing else, and the oracle of `cetp fuzz` asks for them
    /// thousands of times.
    listed: std::sync::Mutex<std::collections::HashMap<String, Json>>,
}

/// The reference app's tools, in their published order, as
/// `data/reference-tools.json` writes them down (see `data/README.md`):
/// parsed at first use and kept for the process.
fn table() -> &'static [TableTool] {
    static TABLE: OnceLock<Vec<TableTool>> = OnceLock::new();
    TABLE.get_or_init(|| {
        parse_table(
            "reference-tools.json",
            include_str!("../../data/reference-tools.json"),
            &[
                (
                    "get_quote",
                    "/properties/symbol/maxLength",
                    SYMBOL_MAX_LENGTH,
                ),
                (
                    "export_history",
                    "/properties/rows/maximum",
                    MAX_HISTORY_ROWS,
                ),
            ],
        )
    })
}

/// The engine's kind of a reference tool, by its name in the table.
fn kind_of(name: &str) -> ToolKind {
    match name {
        "get_quote" => ToolKind::GetQuote,
        "list_alerts" => ToolKind::ListAlerts,
        "create_alert" => ToolKind::CreateAlert,
        "delete_alert" => ToolKind::DeleteAlert,
        "sync_portfolio" => ToolKind::SyncPortfolio,
        "export_history" => ToolKind::ExportHistory,
        _ => panic!("data/reference-tools.json: no reference tool is named {name}"),
    }
}

/// The reference app's tools under `faults`, in the release `next_release`
/// picks: the table, with what the routing faults and the next release change.
fn specs(faults: &BTreeSet<Mutant>, next_release: bool) -> Vec<Spec> {
    let mut specs: Vec<Spec> = table().iter().map(|t| t.spec(kind_of(&t.name))).collect();
    for s in &mut specs {
        match s.kind {
            ToolKind::GetQuote => {
                // Mutant::ToolNameInvalid: a name §3.1 forbids, published and routed.
                if faults.contains(&Mutant::ToolNameInvalid) {
                    s.name = "getQuote";
                }
                // The next release narrows the input (an incompatible change).
                if next_release {
                    s.input["properties"]["symbol"]["maxLength"] =
                        json!(NEXT_RELEASE_SYMBOL_MAX_LENGTH);
                }
            }
            // Mutant::HighRiskWithoutAlways: a high-risk destructive tool that
            // leaves confirmation to the Provider's policy.
            ToolKind::DeleteAlert if faults.contains(&Mutant::HighRiskWithoutAlways) => {
                s.confirmation = "provider_policy";
            }
            _ => {}
        }
    }
    specs
}

impl Catalog {
    /// The catalog published under `faults` and `latitudes`;
    /// `next_release` publishes the next release
    /// ([`super::ProviderConfig::next_release`]).
    pub fn new(
        set: FixtureSet,
        faults: &BTreeSet<Mutant>,
        latitudes: &BTreeSet<Variant>,
        next_release: bool,
    ) -> Catalog {
        if faults.contains(&Mutant::SchemaChangedRevisionKept) {
            // The next release's schema (published and enforced), under the
            // revision of the release it replaced.
            let mut catalog = Catalog::build(set, faults, latitudes, true);
            catalog.revision_of = Some(Box::new(Catalog::build(set, faults, latitudes, false)));
            return catalog;
        }
        Catalog::build(set, faults, latitudes, next_release)
    }

    fn build(
        set: FixtureSet,
        faults: &BTreeSet<Mutant>,
        latitudes: &BTreeSet<Variant>,
        next_release: bool,
    ) -> Catalog {
        let specs = match set {
            FixtureSet::Reference => specs(faults, next_release),
            FixtureSet::Notes => notes::specs(),
        };
        let tools = specs
            .into_iter()
            .map(|mut s| {
                match s.kind {
                    ToolKind::GetQuote if latitudes.contains(&Variant::AsyncReadTool) => {
                        s.may_run_async = true
                    }
                    ToolKind::ExportHistory
                        if latitudes.contains(&Variant::LargeResultViaOperation)
                            || latitudes.contains(&Variant::LargeResultInlineViaOperation) =>
                    {
                        s.may_run_async = true
                    }
                    ToolKind::ListAlerts if latitudes.contains(&Variant::NoEffectCounter) => {
                        if let Some(props) = s.output["properties"].as_object_mut() {
                            props.remove("effects");
                        }
                        s.output["required"] = json!(["count", "alerts"]);
                        s.description = "Your price alerts";
                    }
                    // The trades carry the user's notes (see `history`).
                    ToolKind::ExportHistory if latitudes.contains(&Variant::HostileText) => {
                        s.output["properties"]["rows"]["items"]["properties"]["note"] =
                            json!({"type": "string"});
                    }
                    _ => {}
                }
                // The fixtures are constants of this file; a schema that does
                // not compile is a bug here, caught by every test.
                let input = CompiledSchema::compile(&s.input, DEFAULT_DIALECT)
                    .unwrap_or_else(|e| panic!("fixture input schema of {}: {e}", s.name));
                let output = CompiledSchema::compile(&s.output, DEFAULT_DIALECT)
                    .unwrap_or_else(|e| panic!("fixture output schema of {}: {e}", s.name));
                ToolDef {
                    kind: s.kind,
                    name: s.name.to_string(),
                    title: hostile::vendor_text(s.title, latitudes),
                    description: hostile::vendor_text(s.description, latitudes),
                    input_schema: s.input,
                    output_schema: s.output,
                    input,
                    output,
                    scopes: s.scopes,
                    effect: s.effect,
                    risk: s.risk,
                    destructive: s.destructive,
                    idempotent: s.idempotent,
                    open_world: s.open_world,
                    confirmation: s.confirmation,
                    may_run_async: s.may_run_async,
                }
            })
            .collect();
        Catalog {
            tools,
            revision_of: None,
            listed: Default::default(),
        }
    }

    /// The catalog of a described app: the target's tools as published. A
    /// schema the harness cannot compile accepts nothing (the regular
    /// checks report the descriptor; the shadow refuses every call of it).
    pub fn described(d: &super::described::Described) -> Catalog {
        use super::described::{intern, known};
        let never = json!({"not": {}});
        let tools = d
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let compile = |s: &Json| {
                    CompiledSchema::compile(s, DEFAULT_DIALECT)
                        .or_else(|_| CompiledSchema::compile(&never, DEFAULT_DIALECT))
                        .unwrap_or_else(|e| panic!("the schema that accepts nothing: {e}"))
                };
                ToolDef {
                    kind: ToolKind::Described(i),
                    name: t.name.clone(),
                    title: t.title.clone(),
                    description: t.description.clone(),
                    input: compile(&t.input_schema),
                    output: compile(&t.output_schema),
                    input_schema: t.input_schema.clone(),
                    output_schema: t.output_schema.clone(),
                    scopes: t.scopes.iter().map(|s| intern(s)).collect(),
                    effect: known(
                        &t.effect,
                        &["read", "create", "update", "delete", "transaction"],
                        "update",
                    ),
                    risk: known(&t.risk, &["low", "moderate", "high"], "moderate"),
                    destructive: t.destructive,
                    idempotent: t.idempotent,
                    open_world: t.open_world,
                    confirmation: known(
                        &t.confirmation,
                        &["never", "provider_policy", "always"],
                        "always",
                    ),
                    may_run_async: t.may_run_async,
                }
            })
            .collect();
        Catalog {
            tools,
            revision_of: None,
            listed: Default::default(),
        }
    }

    /// Routing is by exact name (§3.1), never by position or title.
    pub fn find(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn by_kind(&self, kind: ToolKind) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.kind == kind)
    }

    /// `list_tools` data for a session (§3.3). `async_negotiated` decides
    /// `execution` (§3.4), so the revision differs between sessions that
    /// negotiated differently.
    /// `hidden` names tools this caller may not discover (§7.2 lets a
    /// Provider hide them entirely).
    pub fn list_tools(
        &self,
        async_negotiated: bool,
        faults: &BTreeSet<Mutant>,
        latitudes: &BTreeSet<Variant>,
        hidden: &BTreeSet<String>,
    ) -> Json {
        let key = format!("{async_negotiated}|{faults:?}|{latitudes:?}|{hidden:?}");
        let memo = || self.listed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(j) = memo().get(&key) {
            return j.clone();
        }
        let list = self.list_uncached(async_negotiated, faults, latitudes, hidden);
        memo().insert(key, list.clone());
        list
    }

    fn list_uncached(
        &self,
        async_negotiated: bool,
        faults: &BTreeSet<Mutant>,
        latitudes: &BTreeSet<Variant>,
        hidden: &BTreeSet<String>,
    ) -> Json {
        let tools = self.published(async_negotiated, faults, latitudes, hidden);
        let basis = match &self.revision_of {
            Some(other) => other.published(async_negotiated, faults, latitudes, hidden),
            None => tools.clone(),
        };
        // §3.3: the revision must change with the list; a hash of its
        // canonical form changes exactly then.
        let revision = if faults.contains(&Mutant::StaticRevision) {
            "tools-1".to_string()
        } else {
            let h =
                canonical_hash(&basis).unwrap_or_else(|_| sha256_hex(basis.to_string().as_bytes()));
            super::issued_string(latitudes, format!("tools-{}", &h[..16]))
        };
        json!({"revision": revision, "tools": tools})
    }

    /// The `tools` array of `list_tools`.
    fn published(
        &self,
        async_negotiated: bool,
        faults: &BTreeSet<Mutant>,
        latitudes: &BTreeSet<Variant>,
        hidden: &BTreeSet<String>,
    ) -> Json {
        let mut tools: Vec<Json> = self
            .tools
            .iter()
            .filter(|t| !hidden.contains(&t.name))
            .map(|t| {
                let execution = if t.may_run_async
                    && (async_negotiated || faults.contains(&Mutant::SyncOrAsyncWithoutNegotiation))
                {
                    "sync_or_async"
                } else {
                    "sync"
                };
                let mut input_schema = t.input_schema.clone();
                if t.kind == ToolKind::CreateAlert && faults.contains(&Mutant::RemoteRefInSchema) {
                    input_schema["properties"]["price"] =
                        json!({"$ref": "https://schemas.clawseed.example/price.json"});
                }
                let risk = if t.kind == ToolKind::ListAlerts
                    && faults.contains(&Mutant::UnknownAnnotationEnum)
                {
                    "negligible"
                } else {
                    t.risk
                };
                let scopes: Vec<String> = t
                    .scopes
                    .iter()
                    .map(|s| published_scope_name(s, faults))
                    .collect();
                let mut tool = json!({
                    "name": t.name,
                    "title": t.title,
                    "description": t.description,
                    "input_schema": input_schema,
                    "output_schema": t.output_schema,
                    "scopes": scopes,
                    "annotations": {
                        "effect": t.effect,
                        "risk": risk,
                        "destructive": bool_annotation(t.destructive, faults),
                        "idempotent": bool_annotation(t.idempotent, faults),
                        "open_world": bool_annotation(t.open_world, faults),
                        "confirmation": t.confirmation,
                        "execution": execution
                    }
                });
                if latitudes.contains(&Variant::DescriptorUnknownFields) {
                    tool["x_vendor_category"] = json!("finance");
                    tool["annotations"]["x_ui_hint"] = json!({"color": "amber"});
                }
                if t.kind == ToolKind::GetQuote && faults.contains(&Mutant::MissingOutputSchema) {
                    if let Some(m) = tool.as_object_mut() {
                        m.remove("output_schema");
                    }
                }
                tool
            })
            .collect();
        if faults.contains(&Mutant::DuplicateToolNames) {
            if let Some(first) = tools.first().cloned() {
                let mut dup = first;
                dup["description"] = json!("Current price of a security (delayed)");
                tools.push(dup);
            }
        }
        Json::Array(tools)
    }

    /// The v1 view (§2.1, §8): only tools without side effects.
    pub fn list_tools_v1(&self, faults: &BTreeSet<Mutant>) -> Json {
        let tools: Vec<Json> = self
            .tools
            .iter()
            .filter(|t| t.is_read() || faults.contains(&Mutant::V1ListsWriteTools))
            .map(|t| {
                json!({"name": t.name, "description": t.description, "parameters": t.input_schema})
            })
            .collect();
        json!({ "tools": tools })
    }
}

fn published_scope_name(name: &str, faults: &BTreeSet<Mutant>) -> String {
    if faults.contains(&Mutant::ScopeNameInvalid) && name == "history.read" {
        "History Read".to_string()
    } else {
        name.to_string()
    }
}

/// `get_provider_info` scope catalog (§3.2).
pub(crate) fn scopes_json(
    set: FixtureSet,
    faults: &BTreeSet<Mutant>,
    latitudes: &BTreeSet<Variant>,
) -> Json {
    Json::Array(
        scope_defs(set)
            .iter()
            .map(|s| {
                let sensitivity = if faults.contains(&Mutant::UnknownScopeSensitivity)
                    && s.name == "alerts.write"
                {
                    "secret"
                } else {
                    s.sensitivity
                };
                json!({
                    "name": published_scope_name(s.name, faults),
                    "title": hostile::vendor_text(s.title, latitudes),
                    "description": hostile::vendor_text(s.description, latitudes),
                    "access": s.access,
                    "sensitivity": sensitivity
                })
            })
            .collect(),
    )
}

/// A deterministic price for a symbol, in cents from 1.00 to 1000.99.
pub(crate) fn quote_price(symbol: &str) -> f64 {
    let h = sha256_hex(symbol.as_bytes());
    let n = u64::from_str_radix(&h[..8], 16).unwrap_or(0);
    (100 + n % 100_000) as f64 / 100.0
}

/// `rows` rows of trading history. Each row serializes to roughly 60 bytes,
/// so about 4,400 rows cross the 262,144-byte inline limit.
pub(crate) fn history(rows: u64) -> Json {
    let rows: Vec<Json> = (0..rows.min(MAX_HISTORY_ROWS))
        .map(|i| {
            let symbol = ["CLAW", "SEED", "TOOL"][(i % 3) as usize];
            json!({
                "seq": i,
                "symbol": symbol,
                "price": (10_000 + (i * 37) % 9_000) as f64 / 100.0,
                "side": if i % 2 == 0 { "buy" } else { "sell" }
            })
        })
        .collect();
    json!({ "rows": rows })
}

/// A tool's result serialized once: its value, the value's JSON text (a
/// large result's file content) and, when first asked, that text's SHA-256.
/// A shared result ([`Serialized::shared`]) also remembers its validity per
/// output_schema; a result built for one answer is validated once anyway, so
/// it keeps nothing (and pays for no key).
pub(crate) struct Serialized {
    pub value: Json,
    pub text: Arc<[u8]>,
    sha256: OnceLock<String>,
    /// Validity per output_schema, for a shared result only.
    valid: Option<Mutex<Vec<(Json, bool)>>>,
}

impl Serialized {
    /// A result built for one answer.
    pub fn new(value: Json) -> Serialized {
        let text = Arc::from(value.to_string().into_bytes().into_boxed_slice());
        Serialized {
            value,
            text,
            sha256: OnceLock::new(),
            valid: None,
        }
    }

    /// A result many answers share: it remembers its validity per schema.
    pub fn shared(value: Json) -> Serialized {
        Serialized {
            valid: Some(Mutex::new(Vec::new())),
            ..Serialized::new(value)
        }
    }

    pub fn sha256(&self) -> &str {
        self.sha256.get_or_init(|| sha256_hex(&self.text))
    }

    /// Whether the value validates against `tool`'s output_schema. The
    /// schemas are the fixtures' own, a handful per process, so the list a
    /// shared result keeps stays short.
    pub fn valid_for(&self, tool: &ToolDef) -> bool {
        let Some(valid) = &self.valid else {
            return tool.output.is_valid(&self.value);
        };
        let mut v = valid.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, ok)) = v.iter().find(|(k, _)| *k == tool.output_schema) {
            return *ok;
        }
        let ok = tool.output.is_valid(&self.value);
        v.push((tool.output_schema.clone(), ok));
        ok
    }

    /// The value, without a copy when nothing else holds it.
    pub fn into_value(self: Arc<Self>) -> Json {
        Arc::try_unwrap(self).map_or_else(|s| s.value.clone(), |s| s.value)
    }
}

/// The history export of `rows` rows (with the hostile trade notes when
/// `hostile`), built and serialized once per process. It is deterministic,
/// and the fuzzer's oracle asks every one of its members for the same
/// megabyte export: building, validating and serializing it each time was
/// most of a large sequence's cost.
pub(crate) fn history_export(rows: u64, hostile: bool) -> Arc<Serialized> {
    type Cache = Mutex<VecDeque<((u64, bool), Arc<Serialized>)>>;
    static BUILT: LazyLock<Cache> = LazyLock::new(Default::default);
    const KEEP: usize = 4;
    let key = (rows.min(MAX_HISTORY_ROWS), hostile);
    let cache = || BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = cache().iter().find(|(k, _)| *k == key) {
        return s.clone();
    }
    let mut value = history(key.0);
    if hostile {
        hostile::note_trades(&mut value);
    }
    let s = Arc::new(Serialized::shared(value));
    let mut c = cache();
    if c.len() >= KEEP {
        c.pop_back();
    }
    c.push_front((key, s.clone()));
    s
}

/// A boolean annotation as published (§3.4: a Boolean).
fn bool_annotation(v: bool, faults: &BTreeSet<Mutant>) -> Json {
    if faults.contains(&Mutant::AnnotationBooleansAsStrings) {
        Json::String(v.to_string())
    } else {
        Json::Bool(v)
    }
}
