//! The catalogue's types: a tool as a fixture set writes it down ([`Spec`]),
//! as the engine acts on it ([`ToolDef`], [`ToolKind`]), and a scope
//! ([`ScopeDef`]). Both fixture sets' data tables (`fixtures.rs`, `notes.rs`)
//! and everything that routes a call by its tool use them, so they sit below
//! all of those rather than in `fixtures.rs`, which builds on `notes.rs`.

use super::notes_model::NoteTool;
use cetp_proto::schema::CompiledSchema;
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
