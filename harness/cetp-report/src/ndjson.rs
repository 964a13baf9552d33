//! `events.ndjson`: the event stream itself, one typed event a line
//! (`{"event": "case_finished", ...}`, the names and fields of
//! `cetp_vectors::event::Event`; documented in `reports/README.md`).
//!
//! Each line is written and flushed as its event arrives, so a run that dies
//! leaves every event up to its last one. JSON escaping makes Provider text
//! safe here: no raw newline or control character reaches the file (the C1
//! controls and bidi overrides serde_json leaves are escaped too).

use cetp_vectors::event::{Event, Reporter};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// serde_json escapes only the C0 controls; DEL, the C1 controls (U+009B is
/// a CSI to a terminal that reads 8-bit controls) and bidi controls it
/// leaves as they are. Written as `\u` escapes (the same JSON value), a `cat`
/// or `less` of the file can neither be reordered nor drive the terminal.
fn json_ascii_bidi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
        {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// One event as its NDJSON line (without the newline).
pub fn line(event: &Event) -> String {
    json_ascii_bidi(&serde_json::to_string(event).unwrap_or_default())
}

/// Writes `events.ndjson` as the events arrive.
pub struct NdjsonReport {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    /// The first write error; reported by `finish`, so the run goes on.
    error: Option<std::io::Error>,
}

impl NdjsonReport {
    /// `path`: created (with its directory) at the first event.
    pub fn new(path: PathBuf) -> Self {
        NdjsonReport {
            path,
            out: None,
            error: None,
        }
    }

    fn write(&mut self, event: &Event) -> std::io::Result<()> {
        if self.out.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            self.out = Some(BufWriter::new(File::create(&self.path)?));
        }
        let out = self.out.as_mut().expect("opened above");
        out.write_all(line(event).as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

impl Reporter for NdjsonReport {
    fn on_event(&mut self, event: &Event) {
        if self.error.is_none() {
            if let Err(e) = self.write(event) {
                self.error = Some(e);
            }
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        match self.error.take() {
            Some(e) => Err(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", self.path.display()),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_serde_json_leaves_are_escaped_and_the_value_kept() {
        let e = Event::CheckFinding {
            case_id: "EXE-001".into(),
            step: 1,
            check: "CHK-ERROR-MESSAGE".into(),
            requirements: vec![],
            level: "MUST".into(),
            message: "a\u{9b}31m\u{7f}\u{85}\u{202E}b\u{1b}[2J".into(),
        };
        let l = line(&e);
        assert!(
            !l.chars().any(|c| c.is_control() || c == '\u{202E}'),
            "{l:?}"
        );
        assert!(l.contains("\\u009b31m"), "{l}");
        let back: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(back, serde_json::to_value(&e).unwrap());
    }
}
