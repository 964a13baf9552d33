//! One report document rendered from a whole run's events after it ends
//! (`cetp run --format`), by the same reporters that write the report
//! directory's files.

use crate::{html, json, junit, ndjson, sarif, summary_md};
use cetp_vectors::event::{Event, Reporter};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A report document for stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Document {
    /// `report.json` (schema `cetp-report/1`).
    Json,
    /// `junit.xml`, for CI systems that gate on JUnit.
    Junit,
    /// `report.sarif` (SARIF 2.1.0), for code-scanning UIs.
    Sarif,
    /// `summary.md`, for a pull-request comment.
    Markdown,
    /// `index.html`, the self-contained page.
    Html,
    /// `events.ndjson`, the event stream itself.
    Ndjson,
}

/// Keeps a run's events, shared, for a document rendered after the run.
#[derive(Clone, Default)]
pub struct Kept(pub Arc<Mutex<Vec<Event>>>);

impl Kept {
    /// A copy of the events kept so far.
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl Reporter for Kept {
    fn on_event(&mut self, event: &Event) {
        if let Ok(mut v) = self.0.lock() {
            v.push(event.clone());
        }
    }
}

fn feed(r: &mut dyn Reporter, events: &[Event]) {
    for e in events {
        r.on_event(e);
    }
}

/// `doc` of the run whose events these are; `rules` for SARIF
/// ([`sarif::catalog_rules`]).
pub fn render(doc: Document, events: &[Event], rules: BTreeMap<String, sarif::RuleInfo>) -> String {
    match doc {
        Document::Json => {
            let mut r = json::JsonReport::new(None);
            feed(&mut r, events);
            serde_json::to_string_pretty(&r.document()).unwrap_or_default() + "\n"
        }
        Document::Junit => {
            let mut r = junit::JunitReport::new(std::path::PathBuf::new());
            feed(&mut r, events);
            r.render()
        }
        Document::Sarif => {
            let mut r = sarif::SarifReport::new(None, rules);
            feed(&mut r, events);
            serde_json::to_string_pretty(&r.document()).unwrap_or_default() + "\n"
        }
        Document::Markdown => {
            let mut r = summary_md::SummaryMd::new(None);
            feed(&mut r, events);
            r.render()
        }
        Document::Html => {
            let mut r = html::HtmlReport::new(None);
            feed(&mut r, events);
            r.render()
        }
        Document::Ndjson => events.iter().map(|e| ndjson::line(e) + "\n").collect(),
    }
}
