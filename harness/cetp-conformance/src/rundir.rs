//! A run's report directory and the lifecycle of the journal it holds
//! (`journal.ndjson`, [`crate::journal`]): a directory holding a run that
//! never ended is not overwritten, since it may be resumed; a resumed run
//! keeps the event stream of the run that died; a run that reaches its end
//! closes its journal, and one stopped short leaves it open for
//! `cetp resume`.

use crate::exit::ExitCode;
use crate::journal::{self, Journal, PausePoint, Recorded};
use crate::pin::Pin;
use cetp_vectors::event::{Event, Reporter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the directory or its journal cannot be used, with its exit code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirError {
    /// The exit code to end with.
    pub exit: ExitCode,
    /// What is wrong, for a human.
    pub message: String,
}

fn usage(message: String) -> DirError {
    DirError {
        exit: ExitCode::Usage,
        message,
    }
}

fn infra(message: String) -> DirError {
    DirError {
        exit: ExitCode::Infra,
        message,
    }
}

/// A run's report directory and its journal.
pub struct RunDir {
    dir: PathBuf,
    journal: Option<Arc<Journal>>,
    /// In a run of several devices, the journals of the devices after the
    /// first (whose journal is `journal`).
    others: Vec<Arc<Journal>>,
}

impl RunDir {
    /// The report directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Where its journal is.
    pub fn journal_path(&self) -> PathBuf {
        self.dir.join(journal::FILE_NAME)
    }

    /// Every journal of the run: the first device's, then the others'.
    pub fn journals(&self) -> Vec<Arc<Journal>> {
        self.journal.iter().chain(&self.others).cloned().collect()
    }

    /// The journal, once started or resumed.
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref()
    }

    /// A reporter that writes the run's pin into the journal as soon as the
    /// run has one (`RunPinned`), so that `cetp resume` can check it before
    /// anything is replayed.
    pub fn pin_recorder(&self) -> Option<PinRecorder> {
        self.journal.clone().map(PinRecorder)
    }

    /// The directory of a new run: a finished run's journal is removed, an
    /// unfinished one refused (it may be resumed), and the directory made.
    pub fn for_new_run(dir: &Path) -> Result<RunDir, DirError> {
        let d = RunDir {
            dir: dir.to_path_buf(),
            journal: None,
            others: Vec::new(),
        };
        let path = d.journal_path();
        if path.exists() {
            match journal::read(&path) {
                Ok(rec) if rec.finished.is_some() => std::fs::remove_file(&path)
                    .map_err(|e| infra(format!("{}: {e}", path.display())))?,
                _ => {
                    return Err(usage(format!(
                        "{} holds a run that did not end: continue it with `cetp resume {}`, or remove {} to start over",
                        dir.display(),
                        dir.display(),
                        path.display()
                    )))
                }
            }
        }
        // The other devices' journals of a run that ended (or of none).
        for k in 1.. {
            let p = d.device_journal_path(k);
            if !p.exists() {
                break;
            }
            std::fs::remove_file(&p).map_err(|e| infra(format!("{}: {e}", p.display())))?;
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| infra(format!("cannot write the report to {}: {e}", dir.display())))?;
        Ok(d)
    }

    /// The journal of device `k` (from 0) of a run of several devices: the
    /// first device's is the run's own.
    pub fn device_journal_path(&self, k: usize) -> PathBuf {
        match k {
            0 => self.journal_path(),
            _ => self.dir.join(format!("journal.device{}.ndjson", k + 1)),
        }
    }

    /// Starts the journals of the devices after the first of a run of
    /// `n` (the first's is [`Self::start_journal`]'s).
    pub fn start_device_journals(&mut self, n: usize) -> Result<Vec<Arc<Journal>>, DirError> {
        for k in 1..n {
            let path = self.device_journal_path(k);
            let j = Journal::create(&path, &serde_json::json!({ "device": k + 1 }), None)
                .map_err(|e| infra(format!("cannot start the journal {}: {e}", path.display())))?;
            self.others.push(j);
        }
        Ok(self.others.clone())
    }

    /// Reopens the journals of the devices after the first of a run of
    /// `n`, to replay them; with each one's records.
    pub fn resume_device_journals(
        &mut self,
        n: usize,
        now_ms: i64,
    ) -> Result<Vec<(Arc<Journal>, Recorded)>, DirError> {
        let mut out = Vec::new();
        for k in 1..n {
            let path = self.device_journal_path(k);
            let rec = journal::read(&path).map_err(|e| usage(format!("cannot resume: {e}")))?;
            let j = Journal::resume(&path, &rec, None, now_ms)
                .map_err(|e| infra(format!("cannot open the journal {}: {e}", path.display())))?;
            self.others.push(j.clone());
            out.push((j, rec));
        }
        Ok(out)
    }

    /// Starts the journal of a new run with its `run` record (`config`:
    /// what `cetp resume` needs to run it again).
    pub fn start_journal(
        &mut self,
        config: &serde_json::Value,
        pause: Option<PausePoint>,
    ) -> Result<Arc<Journal>, DirError> {
        let path = self.journal_path();
        let j = Journal::create(&path, config, pause)
            .map_err(|e| infra(format!("cannot start the journal {}: {e}", path.display())))?;
        self.journal = Some(j.clone());
        Ok(j)
    }

    /// The directory of a run that did not end, and its journal's records.
    pub fn unfinished(dir: &Path) -> Result<(RunDir, Recorded), DirError> {
        let d = RunDir {
            dir: dir.to_path_buf(),
            journal: None,
            others: Vec::new(),
        };
        let path = d.journal_path();
        if !path.exists() {
            return Err(usage(format!(
                "{} holds no journal ({}): only a run with --report-dir can be resumed",
                dir.display(),
                journal::FILE_NAME
            )));
        }
        let rec = journal::read(&path).map_err(|e| usage(format!("cannot resume: {e}")))?;
        if let Some(exit) = rec.finished {
            return Err(usage(format!(
                "the run in {} ended (exit code {exit}); there is nothing to resume",
                dir.display()
            )));
        }
        Ok((d, rec))
    }

    /// Reopens the journal of [`Self::unfinished`] to replay it, and keeps
    /// the event stream of the run that died ([`Self::keep_events`]).
    pub fn resume_journal(
        &mut self,
        rec: &Recorded,
        pause: Option<PausePoint>,
        now_ms: i64,
    ) -> Result<Arc<Journal>, DirError> {
        let path = self.journal_path();
        let j = Journal::resume(&path, rec, pause, now_ms)
            .map_err(|e| infra(format!("cannot open the journal {}: {e}", path.display())))?;
        self.journal = Some(j.clone());
        Ok(j)
    }

    /// The event stream of the run that died is kept as it was
    /// (`events.ndjson.N`); the resumed run writes the whole stream again.
    pub fn keep_events(&self) -> Result<(), DirError> {
        let events = self.dir.join("events.ndjson");
        if !events.exists() {
            return Ok(());
        }
        let mut n = 1;
        while self.dir.join(format!("events.ndjson.{n}")).exists() {
            n += 1;
        }
        let kept = self.dir.join(format!("events.ndjson.{n}"));
        std::fs::rename(&events, &kept)
            .map_err(|e| infra(format!("cannot keep {}: {e}", events.display())))
    }

    /// Closes the journal of a run that reached its end with `exit`; a run
    /// stopped short (`interrupted`) leaves it open for `cetp resume`.
    pub fn end(&self, exit: ExitCode, interrupted: bool) -> Result<(), DirError> {
        if interrupted {
            return Ok(());
        }
        // The first device's journal last: it says whether the run ended.
        for j in self.others.iter().chain(&self.journal) {
            j.record_end(exit.code())
                .map_err(|e| infra(format!("cannot write the journal: {e}")))?;
        }
        Ok(())
    }
}

/// See [`RunDir::pin_recorder`].
pub struct PinRecorder(Arc<Journal>);

impl Reporter for PinRecorder {
    fn on_event(&mut self, event: &Event) {
        if let Event::RunPinned { fields, .. } = event {
            let _ = self.0.record_pin(&Pin {
                fields: fields.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cetp-rundir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn an_unfinished_run_is_kept_and_a_finished_one_makes_room() {
        let dir = tmp("lifecycle");
        let mut d = RunDir::for_new_run(&dir).unwrap();
        d.start_journal(&serde_json::json!({"seed": 1}), None)
            .unwrap();
        // Not ended: neither a new run nor a second start may overwrite it.
        let e = RunDir::for_new_run(&dir).err().unwrap();
        assert_eq!(e.exit, ExitCode::Usage);
        assert!(e.message.contains("cetp resume"), "{}", e.message);
        let (_, rec) = RunDir::unfinished(&dir).unwrap();
        assert_eq!(rec.config["seed"], 1);
        // Interrupted: still open; ended: closed, and a new run may start.
        d.end(ExitCode::Interrupted, true).unwrap();
        assert!(RunDir::for_new_run(&dir).is_err());
        d.end(ExitCode::Fail, false).unwrap();
        let e = RunDir::unfinished(&dir).err().unwrap();
        assert!(e.message.contains("exit code 1"), "{}", e.message);
        assert!(RunDir::for_new_run(&dir).is_ok());
        assert!(!dir.join(journal::FILE_NAME).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_resumed_run_keeps_every_earlier_event_stream() {
        let dir = tmp("events");
        std::fs::create_dir_all(&dir).unwrap();
        let d = RunDir {
            dir: dir.clone(),
            journal: None,
            others: Vec::new(),
        };
        d.keep_events().unwrap();
        std::fs::write(dir.join("events.ndjson"), "first").unwrap();
        d.keep_events().unwrap();
        std::fs::write(dir.join("events.ndjson"), "second").unwrap();
        d.keep_events().unwrap();
        assert!(!dir.join("events.ndjson").exists());
        let read =
            |n: u32| std::fs::read_to_string(dir.join(format!("events.ndjson.{n}"))).unwrap();
        assert_eq!((read(1).as_str(), read(2).as_str()), ("first", "second"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
