//! The notes app: a second fixture set for the shared engine, shaped unlike
//! the reference app so that the suite cannot lean on one app's habits.
//!
//! - No effect counter anywhere: `list_notes` shows notes only, so an
//!   observer can count objects (create +1, delete -1) and nothing else.
//! - `delete_note` of an id that does not exist is a business error
//!   (CONFLICT), found when the confirmed delete commits.
//! - `get_note` of an id that does not exist is INVALID_ARGS: the argument
//!   names nothing, and no state could make it valid (§7.3 business checks).
//! - `archive_notes` is `sync_or_async`, but only large inputs (more than
//!   [`ARCHIVE_BACKGROUND_OVER`](super::ARCHIVE_BACKGROUND_OVER) ids, or
//!   `all`) go to the background, and only when async_operations was
//!   negotiated. An archive naming a note that does not exist archives
//!   nothing and fails with CONFLICT: synchronously, or as the error of its
//!   operation.
//! - `export_notes` grows with `copies`; big exports need large_results.
//! - `add_note` with `share_publicly` is riskier than its `provider_policy`
//!   annotation says and needs a per-call confirmation (§3.4).
//! - Ids and tokens have their own shapes: note ids `n_` + 10 base32
//!   characters, operation ids UUIDs, session tokens `ns1.` + base64url,
//!   resume tokens `rt_` + base32.

use super::args::{invalid_args, Effected, ToolArgs};
use super::notes_model::{
    Note, NoteArgs, NoteTool, NotesJob, MAX_BODY_CHARS, MAX_COPIES, MAX_ID_CHARS, MAX_NOTE_IDS,
    MAX_TITLE_CHARS,
};
use super::state::{DurableState, Failure, Job, Operation};
use super::tool::{parse_table, ScopeDef, Spec, TableTool, ToolKind};
use super::util::{lock, DetRng};
use super::{Cx, Mutant, ReferenceProvider};
use cetp_proto::envelope::{Capability, OpState};
use cetp_proto::ErrorCode;
use serde_json::{json, Value as Json};
use std::sync::OnceLock;

/// Package of the notes app (the second fixture set).
pub const NOTES_PACKAGE: &str = "com.clawseed.notes";
/// Authority of the notes app's ContentProvider.
pub const NOTES_AUTHORITY: &str = "com.clawseed.notes.clawseed.tools";
/// UID of the notes app (creator of its PendingIntents).
pub const NOTES_UID: u32 = 10051;
/// Lifetime of a pending confirmation and its resume token: five minutes.
pub const NOTES_RESUME_TOKEN_TTL_MS: i64 = 300_000;
pub(crate) const NOTES_SESSION_TTL_MS: i64 = 1_800_000;
pub(crate) const POLL_AFTER_MS: i64 = 250;
/// Background archives: queued until this age, then running.
pub(crate) const ARCHIVE_RUNNING_AFTER_MS: i64 = 100;
/// Background archives finish at this age.
pub(crate) const ARCHIVE_DONE_AFTER_MS: i64 = 800;

/// Notes the app holds at most, so a fuzzer cannot make it grow unbounded.
const MAX_NOTES: usize = 10_000;
/// Note entries one export may hold (copies times notes), bounding its size.
const MAX_EXPORT_ENTRIES: u64 = 400_000;

pub(crate) const SCOPES: &[ScopeDef] = &[
    ScopeDef {
        name: "notes.read",
        title: "Read notes",
        description: "See and export your notes",
        access: "read",
        sensitivity: "personal",
    },
    ScopeDef {
        name: "notes.write",
        title: "Write notes",
        description: "Add notes and delete them",
        access: "write",
        sensitivity: "personal",
    },
    ScopeDef {
        name: "notes.archive",
        title: "Archive notes",
        description: "Move your notes to the archive",
        access: "write",
        sensitivity: "personal",
    },
];

/// The notes app's tools, in their published order, as
/// `data/notes-tools.json` writes them down (see `data/README.md`): parsed
/// at first use and kept for the process. No fault or release changes them.
pub(crate) fn specs() -> Vec<Spec> {
    static TABLE: OnceLock<Vec<TableTool>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        parse_table(
            "notes-tools.json",
            include_str!("../../data/notes-tools.json"),
            &[
                ("get_note", "/properties/note_id/maxLength", MAX_ID_CHARS),
                ("delete_note", "/properties/note_id/maxLength", MAX_ID_CHARS),
                ("add_note", "/properties/title/maxLength", MAX_TITLE_CHARS),
                ("add_note", "/properties/body/maxLength", MAX_BODY_CHARS),
                (
                    "archive_notes",
                    "/properties/note_ids/items/maxLength",
                    MAX_ID_CHARS,
                ),
                (
                    "archive_notes",
                    "/properties/note_ids/maxItems",
                    MAX_NOTE_IDS,
                ),
                ("export_notes", "/properties/copies/maximum", MAX_COPIES),
            ],
        )
    });
    table
        .iter()
        .map(|t| t.spec(ToolKind::Notes(note_tool(&t.name))))
        .collect()
}

/// The engine's kind of a notes tool, by its name in the table.
fn note_tool(name: &str) -> NoteTool {
    match name {
        "list_notes" => NoteTool::List,
        "get_note" => NoteTool::Get,
        "add_note" => NoteTool::Add,
        "delete_note" => NoteTool::Delete,
        "archive_notes" => NoteTool::Archive,
        "export_notes" => NoteTool::Export,
        _ => panic!("data/notes-tools.json: no notes tool is named {name}"),
    }
}

/// What the scope_degraded_data mutant would pass off as a complete result.
pub(crate) fn degraded(tool: NoteTool) -> Json {
    match tool {
        NoteTool::List => json!({"notes": []}),
        NoteTool::Get => {
            json!({"note_id": "", "title": "", "body": "", "archived": false, "shared": false})
        }
        NoteTool::Add => json!({"note_id": "n_aaaaaaaaaa"}),
        NoteTool::Delete => json!({"note_id": "", "deleted": true}),
        NoteTool::Archive => json!({"archived": 0}),
        NoteTool::Export => json!({"copies": []}),
    }
}

pub(crate) fn session_token(rng: &mut DetRng) -> String {
    format!("ns1.{}", rng.base64url("session"))
}

pub(crate) fn resume_token(rng: &mut DetRng) -> String {
    format!("rt_{}", rng.base32("resume", 32))
}

fn no_such_notes(ids: Vec<String>) -> Failure {
    let message = match ids.as_slice() {
        [one] => format!("There is no note {one}; nothing was changed."),
        _ => format!(
            "{} of the notes do not exist; nothing was changed.",
            ids.len()
        ),
    };
    Failure::new(ErrorCode::Conflict, message).details(json!({ "missing_note_ids": ids }))
}

fn note_json(id: &str, n: &Note) -> Json {
    json!({
        "note_id": id,
        "title": n.title,
        "body": n.body,
        "archived": n.archived,
        "shared": n.shared,
    })
}

impl ReferenceProvider {
    /// The business effect of a notes mutation, under the durable lock.
    pub(crate) fn notes_effect(
        &self,
        d: &mut DurableState,
        now_ms: i64,
        uid: u32,
        request_id: &str,
        async_ok: bool,
        args: &NoteArgs,
    ) -> Result<Effected, Failure> {
        match args {
            NoteArgs::Add {
                title,
                body,
                share_publicly,
            } => {
                if d.notes.notes.len() >= MAX_NOTES {
                    return Err(Failure::new(
                        ErrorCode::Conflict,
                        "The notebook is full; delete some notes first.",
                    ));
                }
                let id = loop {
                    let id = format!("n_{}", d.rng.base32("note", 10));
                    if !d.notes.notes.contains_key(&id) {
                        break id;
                    }
                };
                d.notes
                    .insert(id.clone(), title.clone(), body.clone(), *share_publicly);
                d.effects += 1;
                Ok(Effected::Value(json!({ "note_id": id })))
            }
            NoteArgs::Delete { note_id } => match d.notes.notes.remove(note_id) {
                Some(_) => {
                    d.effects += 1;
                    Ok(Effected::Value(
                        json!({"note_id": note_id, "deleted": true}),
                    ))
                }
                None => Err(no_such_notes(vec![note_id.clone()])),
            },
            NoteArgs::Archive(target) if async_ok && target.is_large() => {
                // The notes app names its operations with UUIDs.
                let id = d.rng.uuid();
                d.operations.insert(
                    id.clone(),
                    Operation {
                        uid,
                        request_id: request_id.to_string(),
                        created_ms: now_ms,
                        job: Job::Notes(NotesJob::Archive(target.clone())),
                        state: OpState::Queued,
                        cancel_requested: false,
                        progress: 0,
                        outcome: None,
                        file: None,
                    },
                );
                d.active_ops.insert(id.clone());
                Ok(Effected::Operation(id))
            }
            NoteArgs::Archive(target) => {
                let missing = d.notes.missing(target);
                if !missing.is_empty() {
                    return Err(no_such_notes(missing));
                }
                let changed = d.notes.archive(target);
                d.effects += 1;
                Ok(Effected::Value(json!({ "archived": changed.len() })))
            }
            NoteArgs::List | NoteArgs::Get { .. } | NoteArgs::Export { .. } => {
                Err(Failure::new(ErrorCode::InternalError, "Internal error."))
            }
        }
    }

    /// The value of a notes read tool (§3.4: it changes no business state).
    pub(crate) fn notes_read(&self, args: &NoteArgs) -> Result<Json, Failure> {
        match args {
            NoteArgs::List => {
                let d = lock(&self.durable.state);
                Ok(json!({ "notes": d.notes.summaries() }))
            }
            NoteArgs::Get { note_id } => {
                let mut d = lock(&self.durable.state);
                if let Some(n) = d.notes.notes.get(note_id) {
                    return Ok(note_json(note_id, n));
                }
                if self.has(Mutant::GetNoteCreatesMissing) {
                    d.notes.insert(
                        note_id.clone(),
                        "Untitled".to_string(),
                        String::new(),
                        false,
                    );
                    d.effects += 1;
                    return Ok(note_json(note_id, &d.notes.notes[note_id]));
                }
                Err(invalid_args(self, format!("There is no note {note_id}."))
                    .details(json!({ "note_id": note_id })))
            }
            NoteArgs::Export { copies } => {
                let d = lock(&self.durable.state);
                let notes = d.notes.summaries();
                if copies.saturating_mul(notes.len().max(1) as u64) > MAX_EXPORT_ENTRIES {
                    return Err(invalid_args(
                        self,
                        "That export would be too big; ask for fewer copies.",
                    ));
                }
                let copies: Vec<Json> = (1..=*copies)
                    .map(|i| {
                        json!({
                            "copy": i,
                            "label": format!("ClawSeed Notes export, copy {i}"),
                            "notes": notes,
                        })
                    })
                    .collect();
                Ok(json!({ "copies": copies }))
            }
            NoteArgs::Add { .. } | NoteArgs::Delete { .. } | NoteArgs::Archive(_) => {
                Err(Failure::new(ErrorCode::InternalError, "Internal error."))
            }
        }
    }

    /// Ends a background job: the result envelope, or the error of a failed
    /// operation. Nothing is archived unless every named note exists and the
    /// result is valid.
    pub(crate) fn notes_finish_job(
        &self,
        d: &mut DurableState,
        job: &NotesJob,
    ) -> Result<Json, Failure> {
        let NotesJob::Archive(target) = job;
        let missing = d.notes.missing(target);
        if !missing.is_empty() {
            return Err(no_such_notes(missing));
        }
        let changing = d.notes.to_archive(target);
        let value = if self.has(Mutant::BackgroundArchiveResultShape) {
            json!({ "archived_ids": changing })
        } else {
            let value = json!({ "archived": changing.len() });
            let valid = self
                .catalog
                .by_kind(ToolKind::Notes(NoteTool::Archive))
                .is_some_and(|t| t.output.is_valid(&value));
            if !valid {
                return Err(Failure::new(
                    ErrorCode::InternalError,
                    "The provider could not produce a valid result.",
                ));
            }
            value
        };
        self.notes_apply_job(d, job);
        Ok(json!({"kind": "inline", "value": value}))
    }

    /// Commits a background job's effect on what exists.
    pub(crate) fn notes_apply_job(&self, d: &mut DurableState, job: &NotesJob) {
        let NotesJob::Archive(target) = job;
        d.notes.archive(target);
        d.effects += 1;
    }

    /// The delete_note_unconfirmed mutant: delete_note skips its
    /// confirmation.
    pub(crate) fn confirmation_skipped(&self, targs: &ToolArgs) -> bool {
        self.has(Mutant::DeleteNoteUnconfirmed)
            && matches!(targs, ToolArgs::Notes(NoteArgs::Delete { .. }))
    }

    /// The background_archive_skips_scope mutant: an archive that will run in
    /// the background is not checked for its scope.
    pub(crate) fn scope_check_skipped(&self, cx: &Cx<'_>, targs: &ToolArgs) -> bool {
        self.has(Mutant::BackgroundArchiveSkipsScope)
            && cx.caps.contains(&Capability::AsyncOperations)
            && matches!(targs, ToolArgs::Notes(NoteArgs::Archive(t)) if t.is_large())
    }

    /// The sync_archive_not_deduped mutant: an archive that runs
    /// synchronously is executed without a dedupe record.
    pub(crate) fn dedupe_skipped(&self, cx: &Cx<'_>, targs: &ToolArgs) -> bool {
        let background = cx.caps.contains(&Capability::AsyncOperations);
        self.has(Mutant::SyncArchiveNotDeduped)
            && matches!(targs, ToolArgs::Notes(NoteArgs::Archive(t)) if !(background && t.is_large()))
    }

    /// The archive_replayed_after_restart mutant: the job queue forgets which
    /// archives it finished and queues them again when the process restarts.
    pub(crate) fn replay_jobs_after_restart(&self, d: &mut DurableState) {
        if !self.has(Mutant::ArchiveReplayedAfterRestart) {
            return;
        }
        let DurableState {
            operations,
            active_ops,
            ..
        } = d;
        for (id, op) in operations.iter_mut() {
            if matches!(op.job, Job::Notes(_)) && op.state == OpState::Succeeded {
                op.state = OpState::Queued;
                op.outcome = None;
                op.progress = 0;
                active_ops.insert(id.clone());
            }
        }
    }
}
