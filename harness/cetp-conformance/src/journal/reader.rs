//! Reading a journal back: every record, bounded, into what a resume needs.

use super::record::{Answer, Record, Sent};
use super::{FORMAT, MAX_RECORDS, MAX_RECORD_BYTES};
use crate::pin::Pin;
use cetp_wire::json::{self as wj, Json};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// One exchange of a journaled run.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// Sequence number of the exchange.
    pub seq: u64,
    /// The identity (`a`, `b`).
    pub dev: String,
    /// The device op.
    pub op: String,
    /// The op's request (see [`super::codec`]).
    pub req: Json,
    /// `None` while in flight.
    pub ans: Option<Answer>,
    /// For `advance_clock`: the device time when it was sent.
    pub at: Option<i64>,
    /// A call sent again to re-obtain handles (not part of the run's own
    /// sequence).
    pub revives: Option<u64>,
}

impl Exchange {
    fn sent(s: Sent) -> Exchange {
        Exchange {
            seq: s.seq,
            dev: s.dev,
            op: s.op,
            req: s.req,
            ans: None,
            at: s.at,
            revives: s.revives,
        }
    }
}

/// What a journal holds.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// The run's configuration as the CLI wrote it.
    pub config: serde_json::Value,
    /// The pin of the run (the latest one recorded).
    pub pin: Option<Pin>,
    /// The run's exit code, when it ended.
    pub finished: Option<i64>,
    /// Every exchange, in sequence order.
    pub exchanges: Vec<Exchange>,
    /// Every clock reading: (identity, device time ms), in order.
    pub now: Vec<(String, i64)>,
    /// Times the run was resumed before.
    pub resumes: usize,
    /// A torn last line (the harness died writing it) was dropped.
    pub torn_tail: bool,
    /// In a run of several devices: the cases this device took, in order.
    pub takes: Vec<String>,
}

impl Recorded {
    /// Exchanges sent but never answered.
    pub fn in_flight(&self) -> impl Iterator<Item = &Exchange> {
        self.exchanges.iter().filter(|e| e.ans.is_none())
    }

    /// Folds one record in; the error says why the journal is corrupt.
    fn add(&mut self, record: Record, by_seq: &mut HashMap<u64, usize>) -> Result<(), String> {
        match record {
            Record::Run { format, config } => {
                if format != Some(FORMAT as i64) {
                    return Err(format!(
                        "journal format {format:?}, this cetp reads {FORMAT}"
                    ));
                }
                self.config = config;
            }
            Record::Pin { fields, .. } => self.pin = Some(Pin { fields }),
            Record::Send(s) => {
                by_seq.insert(s.seq, self.exchanges.len());
                self.exchanges.push(Exchange::sent(s));
            }
            Record::Recv { seq, ans, .. } => {
                let at = *by_seq
                    .get(&seq)
                    .ok_or_else(|| format!("recv of unknown seq {seq}"))?;
                self.exchanges[at].ans = ans;
            }
            Record::Now { dev, ms } => self.now.push((dev, ms)),
            Record::Resumed { .. } => self.resumes += 1,
            Record::End { exit } => self.finished = Some(exit),
            Record::Take { case } => self.takes.push(case),
        }
        Ok(())
    }
}

/// Why a journal cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The journal file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A record is malformed, too large, or out of order.
    #[error("{path} line {line}: {why}")]
    Corrupt {
        /// The journal file.
        path: String,
        /// The 1-based line of the bad record.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

/// The lines of a journal, each bounded, numbered from 1, with whether it
/// ended with its line end.
struct Lines {
    reader: BufReader<File>,
    shown: String,
    n: usize,
}

impl Lines {
    fn next_line(&mut self) -> Result<Option<(usize, Vec<u8>, bool)>, ReadError> {
        let mut buf = Vec::new();
        let got = (&mut self.reader)
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|source| ReadError::Io {
                path: self.shown.clone(),
                source,
            })?;
        if got == 0 {
            return Ok(None);
        }
        self.n += 1;
        let too = |why: String| ReadError::Corrupt {
            path: self.shown.clone(),
            line: self.n,
            why,
        };
        if buf.len() > MAX_RECORD_BYTES {
            return Err(too(format!(
                "a record longer than {MAX_RECORD_BYTES} bytes"
            )));
        }
        if self.n > MAX_RECORDS {
            return Err(too(format!("more than {MAX_RECORDS} records")));
        }
        let complete = buf.last() == Some(&b'\n');
        if complete {
            buf.pop();
        }
        Ok(Some((self.n, buf, complete)))
    }
}

/// Reads a journal: every record, bounded; a torn last line is dropped.
pub fn read(path: &Path) -> Result<Recorded, ReadError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: shown.clone(),
        source,
    })?;
    let mut lines = Lines {
        reader: BufReader::new(file),
        shown: shown.clone(),
        n: 0,
    };
    let mut rec = Recorded::default();
    let mut by_seq: HashMap<u64, usize> = HashMap::new();
    // A line is known to be the last (the only one that may be torn) when
    // the next read finds nothing.
    let mut ahead = lines.next_line()?;
    while let Some((line, bytes, complete)) = ahead.take() {
        ahead = lines.next_line()?;
        let last = ahead.is_none();
        let corrupt = |why: String| ReadError::Corrupt {
            path: shown.clone(),
            line,
            why,
        };
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|t| wj::parse(t).map_err(|e| e.to_string()));
        let v = match parsed {
            Ok(v) if complete => v,
            // Only the last line may be torn: the harness died writing it.
            _ if last => {
                rec.torn_tail = true;
                break;
            }
            Ok(_) => return Err(corrupt("a record without its line end".into())),
            Err(e) => return Err(corrupt(e)),
        };
        Record::from_json(&v)
            .and_then(|r| rec.add(r, &mut by_seq))
            .map_err(corrupt)?;
    }
    Ok(rec)
}
