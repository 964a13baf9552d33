//! The catalogue's types: a tool as a fixture set writes it down ([`Spec`]),
//! as the engine acts on it ([`ToolDef`], [`ToolKind`]), and a scope
//! ([`ScopeDef`]), and a tool of a data table ([`TableTool`]: a line of
//! `data/reference-tools.json` or `data/notes-tools.json`, see
//! `data/README.md`). Both fixture sets' tables (`fixtures.rs`, `notes.rs`)
//! and everything that routes a call by its tool use them, so they sit below
//! all of those rather than in `fixtures.rs`, which builds on `notes.rs`.

use super::notes_model::NoteTool;
use cetp_proto::schema::CompiledSchema;
use serde::Deserialize;
use serde_json::Value as Json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolKind {
    GetQuote,
    ListAlerts,
    CreateAlert,
    DeleteAlert,
    SyncPortfolio,
    ExportHistory,
    Notes(NoteTool),
    /// The tool at this index of a described app (`described.rs`).
    Described(usize),
}

pub(crate) struct ToolDef {
    pub kind: ToolKind,
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: Json,
    pub output_schema: Json,
    pub input: CompiledSchema,
    pub output: CompiledSchema,
    pub scopes: Vec<&'static str>,
    pub effect: &'static str,
    pub risk: &'static str,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
    pub confirmation: &'static str,
    /// May answer with an operation when async_operations is negotiated.
    pub may_run_async: bool,
}

impl ToolDef {
    pub fn is_read(&self) -> bool {
        self.effect == "read"
    }
}

pub(crate) struct ScopeDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub access: &'static str,
    pub sensitivity: &'static str,
}

/// A tool as a fixture set writes it down, before its schemas are compiled.
pub(crate) struct Spec {
    pub kind: ToolKind,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input: Json,
    pub output: Json,
    pub scopes: Vec<&'static str>,
    pub effect: &'static str,
    pub risk: &'static str,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
    pub confirmation: &'static str,
    pub may_run_async: bool,
}

/// A tool as a data table writes it down (`data/README.md`): a [`Spec`]
/// without its kind, which the table's module gives by the tool's name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableTool {
    pub name: String,
    title: String,
    description: String,
    scopes: Vec<String>,
    annotations: TableAnnotations,
    may_run_async: bool,
    input_schema: Json,
    output_schema: Json,
}

/// The annotations of a [`TableTool`], as `list_tools` publishes them
/// (§3.4) less `execution`, which follows from `may_run_async`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableAnnotations {
    effect: String,
    risk: String,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
    confirmation: String,
}

impl TableTool {
    /// The tool as a [`Spec`] of `kind`; its strings borrow from the table,
    /// which a fixture module parses once and keeps for the process.
    pub fn spec(&'static self, kind: ToolKind) -> Spec {
        let a = &self.annotations;
        Spec {
            kind,
            name: &self.name,
            title: &self.title,
            description: &self.description,
            input: self.input_schema.clone(),
            output: self.output_schema.clone(),
            scopes: self.scopes.iter().map(String::as_str).collect(),
            effect: &a.effect,
            risk: &a.risk,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
            confirmation: &a.confirmation,
            may_run_async: self.may_run_async,
        }
    }
}

/// The tools of the data table `file` (its text `text`), checked against
/// the limits the code enforces on its own: each `(tool, pointer into its
/// input_schema, value)` of `limits` must hold, so that the published
/// schema and the argument checks cannot drift apart. A table that does not
/// parse or fails a check is a broken build of the reference: it panics.
pub(crate) fn parse_table(file: &str, text: &str, limits: &[(&str, &str, u64)]) -> Vec<TableTool> {
    let tools: Vec<TableTool> =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("data/{file}: {e}"));
    for (tool, pointer, value) in limits {
        let found = tools
            .iter()
            .find(|t| t.name == *tool)
            .and_then(|t| t.input_schema.pointer(pointer))
            .and_then(Json::as_u64);
        assert_eq!(
            found,
            Some(*value),
            "data/{file}: {tool}'s input_schema {pointer} is not the limit the code enforces"
        );
    }
    tools
}
