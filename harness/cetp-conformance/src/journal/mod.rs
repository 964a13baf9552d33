//! The run journal (`journal.ndjson` in the run directory) and the device
//! wrapper that writes it and, on `cetp resume`, replays it.
//!
//! Every exchange with the device goes through [`Journal::wrap`]: a `send`
//! record is written before a request leaves the harness (and synced to
//! disk for `execute_tool`, the call that may have a side effect), a `recv`
//! record after its answer, a `now` record for each reading of the device
//! clock. The file is append-only; a run that dies leaves it ending
//! mid-exchange, with at most a torn last line.
//!
//! Resuming runs the same cases again, with the same seed and start, through
//! a wrapper that answers from the journal: the runner is deterministic in
//! the device's answers, so it asks the same questions in the same order
//! and reaches the same bindings, observer snapshots and check findings
//! without sending anything. A request the journal sent but holds no answer
//! for (in flight when the harness died) is sent again as it was, with the
//! same `request_id` and args, and the Provider's answer is taken as the
//! evidence of what happened (§4.1: a retry with the same id; §6: the
//! Provider de-duplicates it, so an effect already made is not made again).
//! Only then does the run go on with new requests.
//!
//! Two things cannot be replayed and are re-obtained instead:
//! - PendingIntent and descriptor handles belong to the probe-wire
//!   connection that received them, which died with the harness. A replayed
//!   answer's handles are renamed `HANDLE@jSEQ`; when a live step uses one,
//!   the call that returned it (record SEQ) is sent again, with its
//!   `request_id`, and the handle at the same place in the new answer is
//!   used.
//! - A clock advance (`advance_clock`) in flight is reconciled by the
//!   clock: applied only for what the device's time still lacks.
//!
//! Fail-closed: a request that matches nothing the journal holds while
//! answers remain to be replayed means the resumed run is not the journaled
//! one (another build of the harness, a profile the pin did not catch);
//! from then on the wrapper sends nothing and every call fails with
//! `journal_diverged`.
//!
//! Where things live: [`record`] the typed records and their encoding,
//! [`codec`] each op's request and answer inside them, [`reader`] reading a
//! journal back, [`pause`] the crash tests' pause points, `replay` the
//! journaled device; this module writes the journal.

pub mod codec;
pub mod pause;
pub mod reader;
pub mod record;
mod replay;

pub use pause::PausePoint;
pub use reader::{read, Exchange, ReadError, Recorded};
pub use record::{Answer, Record, Sent};
pub use replay::ReplayStats;

use crate::pin::Pin;
use cetp_vectors::device::{Device, DeviceError, ErrorKind, Target};
use pause::Pauser;
use replay::{Journaled, Replay};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The journal's file name inside a run directory.
pub const FILE_NAME: &str = "journal.ndjson";
/// Format of the records; a journal of another format is not resumed.
pub const FORMAT: u64 = 1;
/// Longest record read back. A record holds one answer, which the probe
/// wire bounds (its frames), written once more as JSON.
const MAX_RECORD_BYTES: usize = 4 * cetp_wire::MAX_FRAME_BYTES + 4096;
/// Records read back at most (a full run writes a few thousand).
const MAX_RECORDS: usize = 2_000_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn journal_error(message: impl Into<String>) -> DeviceError {
    DeviceError::new(ErrorKind::Journal, message)
}

/// The journal of one run: an append-only file every device exchange is
/// recorded in, and on `cetp resume` the replay that answers from it.
pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    seq: AtomicU64,
    pause: Pauser,
    replay: Mutex<Replay>,
}

impl Journal {
    /// Starts the journal of a new run. Refuses to overwrite one.
    pub fn create(
        path: &Path,
        config: &serde_json::Value,
        pause: Option<PausePoint>,
    ) -> std::io::Result<Arc<Journal>> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)?;
        let j = Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            seq: AtomicU64::new(1),
            pause: Pauser::new(pause),
            replay: Mutex::new(Replay::default()),
        };
        j.append(
            &Record::Run {
                format: Some(FORMAT as i64),
                config: config.clone(),
            },
            true,
        )?;
        Ok(Arc::new(j))
    }

    /// Opens a journal to continue its run, replaying what it holds.
    pub fn resume(
        path: &Path,
        rec: &Recorded,
        pause: Option<PausePoint>,
        host_now_ms: i64,
    ) -> std::io::Result<Arc<Journal>> {
        let mut file = OpenOptions::new().append(true).open(path)?;
        if rec.torn_tail {
            // The torn record is dropped; a new record must start a line.
            file.write_all(b"\n")?;
        }
        let next = rec.exchanges.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
        let j = Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            seq: AtomicU64::new(next),
            pause: Pauser::new(pause),
            replay: Mutex::new(Replay::of(rec)),
        };
        j.append(
            &Record::Resumed {
                at_ms: host_now_ms,
                replaying: next - 1,
                in_flight: rec.in_flight().map(|e| e.seq).collect(),
            },
            true,
        )?;
        Ok(Arc::new(j))
    }

    /// The journal file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One record, written through (no buffer in the harness), so that a
    /// harness that dies leaves it in the file; `sync` also asks the disk.
    fn append(&self, record: &Record, sync: bool) -> std::io::Result<()> {
        let mut line = record.to_line();
        line.push(b'\n');
        let mut f = lock(&self.file);
        f.write_all(&line)?;
        if sync {
            f.sync_data()?;
        }
        Ok(())
    }

    /// Records the run's pin (the latest recorded counts).
    pub fn record_pin(&self, pin: &Pin) -> std::io::Result<()> {
        self.append(
            &Record::Pin {
                hash: pin.hash(),
                fields: pin.fields.clone(),
            },
            true,
        )
    }

    /// A device of a run of several took `case` (see [`Record::Take`]).
    pub fn record_take(&self, case: &str) -> std::io::Result<()> {
        self.append(
            &Record::Take {
                case: case.to_string(),
            },
            false,
        )
    }

    /// The run ended: nothing is left to resume.
    pub fn record_end(&self, exit: i32) -> std::io::Result<()> {
        self.append(
            &Record::End {
                exit: i64::from(exit),
            },
            true,
        )
    }

    /// Why the resumed run stopped sending, if it diverged from the journal.
    pub fn diverged(&self) -> Option<String> {
        lock(&self.replay).diverged.clone()
    }

    /// How the replay has gone so far.
    pub fn stats(&self) -> ReplayStats {
        lock(&self.replay).stats.clone()
    }

    /// The target with every identity's device journaled.
    pub fn wrap(self: &Arc<Self>, target: Target) -> Target {
        let Target { label, a, b } = target;
        let journaled = |dev: &str, inner: Box<dyn Device>| -> Box<dyn Device> {
            Box::new(Journaled::new(dev, inner, self.clone()))
        };
        Target {
            label,
            a: journaled("a", a),
            b: b.map(|b| journaled("b", b)),
        }
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    /// The send record of a request; when it cannot be written, the request
    /// is not sent.
    fn send_record(&self, sent: Sent, sync: bool) -> Result<(), DeviceError> {
        self.append(&Record::Send(sent), sync).map_err(|e| {
            journal_error(format!(
                "cannot write the journal {} ({e}); the call was not sent",
                self.path.display()
            ))
        })
    }

    fn recv_record(&self, seq: u64, ans: Answer, us: u64) -> Result<(), DeviceError> {
        let record = Record::Recv {
            seq,
            ans: Some(ans),
            us,
        };
        self.append(&record, false).map_err(|e| {
            journal_error(format!(
                "cannot write the journal {} ({e})",
                self.path.display()
            ))
        })
    }

    /// A clock reading, best effort: one that is not journaled only makes a
    /// resumed run diverge later, which is caught; it never sends anything
    /// wrong.
    fn now_record(&self, dev: &str, ms: i64) {
        let _ = self.append(
            &Record::Now {
                dev: dev.to_string(),
                ms,
            },
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_wire::json::Json;

    #[test]
    fn a_torn_last_record_is_dropped_and_a_torn_middle_one_refused() {
        let dir = std::env::temp_dir().join(format!("cetp-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        let _ = std::fs::remove_file(&path);
        let j = Journal::create(&path, &serde_json::json!({"seed": 1}), None).unwrap();
        let req = record::obj([("method", "negotiate".into())]);
        j.send_record(
            Sent {
                seq: 7,
                dev: "a".into(),
                op: "call".into(),
                req,
                at: None,
                revives: None,
            },
            false,
        )
        .unwrap();
        drop(j);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"j\":\"recv\",\"seq\":7,\"an");
        std::fs::write(&path, &text).unwrap();
        let rec = read(&path).unwrap();
        assert!(rec.torn_tail);
        assert_eq!(rec.config["seed"], 1);
        assert_eq!(rec.in_flight().map(|e| e.seq).collect::<Vec<_>>(), [7]);
        assert_eq!(
            rec.exchanges[0].req.get("method"),
            Some(&Json::from("negotiate"))
        );
        // The same torn record with a complete one after it: corrupt.
        text.push_str("\n{\"j\":\"end\",\"exit\":0}\n");
        std::fs::write(&path, &text).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
