//! The notes app's own types: its tools, the args they take, its background
//! jobs and its database. They sit below the engine's state (which keeps the
//! notes database and jobs), the catalogue (whose tool kinds name the notes
//! tools) and the args of an execution, so that none of those has to import
//! the notes app's behaviour (`notes.rs`), which itself builds on them.

use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;

/// `archive_notes` with more note ids than this runs in the background.
pub const ARCHIVE_BACKGROUND_OVER: usize = 50;

// Limits of the notes tools' args: `NoteArgs::parse` enforces them and the
// input schemas of `notes.rs` publish them.
pub(crate) const MAX_TITLE_CHARS: u64 = 200;
pub(crate) const MAX_BODY_CHARS: u64 = 10_000;
pub(crate) const MAX_ID_CHARS: u64 = 64;
pub(crate) const MAX_NOTE_IDS: u64 = 1_000;
pub(crate) const MAX_COPIES: u64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoteTool {
    List,
    Get,
    Add,
    Delete,
    Archive,
    Export,
}

/// Which notes an archive names.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ArchiveTarget {
    Ids(Vec<String>),
    All,
}

impl ArchiveTarget {
    pub(crate) fn is_large(&self) -> bool {
        match self {
            ArchiveTarget::All => true,
            ArchiveTarget::Ids(ids) => ids.len() > ARCHIVE_BACKGROUND_OVER,
        }
    }
}

/// Args of a notes tool after schema and business validation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NoteArgs {
    List,
    Get {
        note_id: String,
    },
    Add {
        title: String,
        body: String,
        share_publicly: bool,
    },
    Delete {
        note_id: String,
    },
    Archive(ArchiveTarget),
    Export {
        copies: u64,
    },
}

impl NoteArgs {
    pub(crate) fn parse(tool: NoteTool, obj: &Map<String, Json>) -> Result<NoteArgs, String> {
        let text = |k: &str, max: u64| -> Result<Option<String>, String> {
            match obj.get(k) {
                None => Ok(None),
                Some(Json::String(s)) if s.chars().count() as u64 <= max => Ok(Some(s.clone())),
                Some(_) => Err(format!(
                    "`{k}` must be a string of at most {max} characters"
                )),
            }
        };
        let note_id = || {
            text("note_id", MAX_ID_CHARS)?
                .filter(|s| !s.is_empty())
                .ok_or_else(|| "`note_id` must name a note".to_string())
        };
        Ok(match tool {
            NoteTool::List => NoteArgs::List,
            NoteTool::Get => NoteArgs::Get {
                note_id: note_id()?,
            },
            NoteTool::Delete => NoteArgs::Delete {
                note_id: note_id()?,
            },
            NoteTool::Add => NoteArgs::Add {
                // A title of blanks would list as an empty line.
                title: text("title", MAX_TITLE_CHARS)?
                    .filter(|t| !t.trim().is_empty())
                    .ok_or("`title` must have a visible character")?,
                body: text("body", MAX_BODY_CHARS)?.unwrap_or_default(),
                share_publicly: match obj.get("share_publicly") {
                    None => false,
                    Some(Json::Bool(b)) => *b,
                    Some(_) => return Err("`share_publicly` must be a boolean".into()),
                },
            },
            NoteTool::Archive => {
                let all = match obj.get("all") {
                    None => false,
                    Some(Json::Bool(b)) => *b,
                    Some(_) => return Err("`all` must be a boolean".into()),
                };
                match (obj.get("note_ids"), all) {
                    (Some(_), true) => return Err("give `note_ids` or `all`, not both".into()),
                    (None, true) => NoteArgs::Archive(ArchiveTarget::All),
                    (None, false) => return Err("give `note_ids`, or `all`: true".into()),
                    (Some(ids), false) => {
                        let ids: Vec<String> = ids
                            .as_array()
                            .filter(|a| !a.is_empty() && a.len() as u64 <= MAX_NOTE_IDS)
                            .ok_or(format!("`note_ids` must list 1 to {MAX_NOTE_IDS} note ids"))?
                            .iter()
                            .map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_string))
                            .collect::<Option<_>>()
                            .ok_or("every note id must be a non-empty string")?;
                        NoteArgs::Archive(ArchiveTarget::Ids(ids))
                    }
                }
            }
            NoteTool::Export => NoteArgs::Export {
                copies: match obj.get("copies") {
                    None => 1,
                    Some(v) => {
                        v.as_u64()
                            .filter(|c| (1..=MAX_COPIES).contains(c))
                            .ok_or(format!(
                                "`copies` must be an integer from 1 to {MAX_COPIES}"
                            ))?
                    }
                },
            },
        })
    }

    /// §3.4: sharing a note publicly reaches people outside the app, a risk
    /// above what `add_note`'s annotations declare.
    pub(crate) fn escalates(&self) -> bool {
        matches!(
            self,
            NoteArgs::Add {
                share_publicly: true,
                ..
            }
        )
    }
}

/// A background job of the notes app.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NotesJob {
    Archive(ArchiveTarget),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Note {
    /// Creation order, the order `list_notes` shows.
    pub seq: u64,
    pub title: String,
    pub body: String,
    pub archived: bool,
    pub shared: bool,
}

/// The notes app's database.
#[derive(Clone, Debug, Default)]
pub(crate) struct NotesState {
    pub notes: BTreeMap<String, Note>,
    pub next_seq: u64,
}

impl NotesState {
    pub(crate) fn insert(&mut self, id: String, title: String, body: String, shared: bool) {
        self.next_seq += 1;
        self.notes.insert(
            id,
            Note {
                seq: self.next_seq,
                title,
                body,
                archived: false,
                shared,
            },
        );
    }

    pub(crate) fn summaries(&self) -> Vec<Json> {
        let mut notes: Vec<(&String, &Note)> = self.notes.iter().collect();
        notes.sort_by_key(|(_, n)| n.seq);
        notes
            .into_iter()
            .map(|(id, n)| json!({"note_id": id, "title": n.title, "archived": n.archived}))
            .collect()
    }

    /// The ids an archive names that do not exist, in the order given.
    pub(crate) fn missing(&self, target: &ArchiveTarget) -> Vec<String> {
        match target {
            ArchiveTarget::All => Vec::new(),
            ArchiveTarget::Ids(ids) => ids
                .iter()
                .filter(|id| !self.notes.contains_key(*id))
                .cloned()
                .collect(),
        }
    }

    /// The existing notes `target` names that are not archived yet.
    pub(crate) fn to_archive(&self, target: &ArchiveTarget) -> Vec<String> {
        self.notes
            .iter()
            .filter(|(id, n)| {
                !n.archived
                    && match target {
                        ArchiveTarget::All => true,
                        ArchiveTarget::Ids(ids) => ids.contains(id),
                    }
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Archives what `target` names and exists; returns the ids it changed.
    pub(crate) fn archive(&mut self, target: &ArchiveTarget) -> Vec<String> {
        let changed = self.to_archive(target);
        for id in &changed {
            if let Some(n) = self.notes.get_mut(id) {
                n.archived = true;
            }
        }
        changed
    }
}
