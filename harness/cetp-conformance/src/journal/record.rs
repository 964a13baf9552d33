//! The records of a journal, one per line, as a typed enum with its one
//! encoding.
//!
//! A record carries requests and answers as the device sent them, and a
//! Provider's strings may hold a lone UTF-16 surrogate, which serde_json
//! cannot represent: records are therefore written with the probe wire's
//! own JSON ([`cetp_wire::json`]: its bounded parser and canonical writer,
//! members in code-point order), not derived through serde. That writer is
//! also what keeps format 1's bytes: `tests/fixtures/journal/` pins them.
//! The tag of a record is its `j` member.

use cetp_vectors::device::{DeviceError, ErrorKind};
use cetp_wire::json::{self as wj, Json, Map};
use std::collections::BTreeMap;

/// One line of a journal.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// The first line: the format, and the run's configuration as the CLI
    /// wrote it (what `cetp resume` runs again).
    Run {
        /// Journal format; a reader refuses any but its own (absent included).
        format: Option<i64>,
        /// The run's configuration as the CLI wrote it.
        config: serde_json::Value,
    },
    /// The run's pin (the latest one counts).
    Pin {
        /// Hash of the pin.
        hash: String,
        /// Each pinned input by name.
        fields: BTreeMap<String, serde_json::Value>,
    },
    /// A request about to leave the harness.
    Send(Sent),
    /// Its answer; `ans` is absent only from a journal nobody here wrote.
    Recv {
        /// Sequence number of the `send` it answers.
        seq: u64,
        /// The answer.
        ans: Option<Answer>,
        /// How long the exchange took, in microseconds (for the record only).
        us: u64,
    },
    /// A reading of a device's clock.
    Now {
        /// The identity whose device clock was read.
        dev: String,
        /// The reading, Unix epoch ms.
        ms: i64,
    },
    /// A resume started: host time, the records it replays, those in flight.
    Resumed {
        /// Host time the resume started, Unix epoch ms.
        at_ms: i64,
        /// Number of records it replays.
        replaying: u64,
        /// Sequence numbers of the requests that were in flight (sent, unanswered).
        in_flight: Vec<u64>,
    },
    /// The run ended with this exit code: nothing is left to resume.
    End {
        /// The exit code.
        exit: i64,
    },
    /// A device of a run of several took this case (its id), before any
    /// of the case's exchanges: a resume gives each device the cases it
    /// took, in its order, so it asks the questions its journal answers.
    Take {
        /// Id of the case taken.
        case: String,
    },
}

/// A `send` record: one request to one identity's device.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// Sequence number of the exchange, unique in the journal.
    pub seq: u64,
    /// The identity (`a`, `b`).
    pub dev: String,
    /// The device op (`call`, `read_fd`, ..., `advance_clock`).
    pub op: String,
    /// The op's parameters (see [`super::codec`]).
    pub req: Json,
    /// For `advance_clock`: the device time when it was sent.
    pub at: Option<i64>,
    /// A call sent again to re-obtain the handles of this earlier one (not
    /// part of the run's own sequence).
    pub revives: Option<u64>,
}

/// What a device op came back with: its `ok` payload (see
/// [`super::codec`]), or the device error.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The op's `ok` payload.
    Ok(Json),
    /// The device error it failed with.
    Err(DeviceError),
}

impl Answer {
    /// The journaled form of a device op's result.
    pub fn of(result: &Result<Json, DeviceError>) -> Answer {
        match result {
            Ok(v) => Answer::Ok(v.clone()),
            Err(e) => Answer::Err(e.clone()),
        }
    }

    /// The result it stands for.
    pub fn result(&self) -> Result<&Json, DeviceError> {
        match self {
            Answer::Ok(v) => Ok(v),
            Answer::Err(e) => Err(e.clone()),
        }
    }

    fn to_json(&self) -> Json {
        match self {
            Answer::Ok(v) => obj([("ok", v.clone())]),
            Answer::Err(e) => obj([(
                "err",
                obj([
                    ("kind", e.kind.as_str().into()),
                    ("message", e.message.as_str().into()),
                ]),
            )]),
        }
    }

    /// An answer without `ok` is an error; its kind is kept whatever it
    /// says (a journal records kinds by name).
    fn from_json(v: &Json) -> Answer {
        if let Some(ok) = v.get("ok") {
            return Answer::Ok(ok.clone());
        }
        let field = |k: &str| {
            v.get("err")
                .and_then(|e| e.get(k))
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_string()
        };
        Answer::Err(DeviceError::new(
            ErrorKind::parse(&field("kind")),
            field("message"),
        ))
    }
}

pub(crate) fn obj<const N: usize>(fields: [(&str, Json); N]) -> Json {
    Json::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map>(),
    )
}

impl Record {
    /// The record's line, without its line end.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = Vec::new();
        wj::write(&mut line, &self.to_json());
        line
    }

    /// The record as JSON (its `j` member the tag).
    pub fn to_json(&self) -> Json {
        let tag = |t: &str| ("j", Json::from(t));
        match self {
            Record::Run { format, config } => obj([
                tag("run"),
                ("format", Json::from(*format)),
                ("config", Json::from(config.clone())),
            ]),
            Record::Pin { hash, fields } => obj([
                tag("pin"),
                ("hash", hash.as_str().into()),
                ("fields", Json::from(serde_json::json!(fields))),
            ]),
            Record::Send(s) => s.to_json(),
            Record::Recv { seq, ans, us } => obj([
                tag("recv"),
                ("seq", Json::from(*seq)),
                ("ans", ans.as_ref().map_or(Json::Null, Answer::to_json)),
                ("us", Json::from(*us)),
            ]),
            Record::Now { dev, ms } => obj([
                tag("now"),
                ("dev", dev.as_str().into()),
                ("ms", Json::from(*ms)),
            ]),
            Record::Resumed {
                at_ms,
                replaying,
                in_flight,
            } => obj([
                tag("resumed"),
                ("at_ms", Json::from(*at_ms)),
                ("replaying", Json::from(*replaying)),
                (
                    "in_flight",
                    Json::Array(in_flight.iter().map(|s| Json::from(*s)).collect()),
                ),
            ]),
            Record::End { exit } => obj([tag("end"), ("exit", Json::from(*exit))]),
            Record::Take { case } => obj([tag("take"), ("case", case.as_str().into())]),
        }
    }

    /// Reads a record back; the error says what is wrong with it. Members a
    /// record does not need are not checked (the reader must accept every
    /// journal an earlier build wrote).
    pub fn from_json(v: &Json) -> Result<Record, String> {
        let num = |k: &str| v.get(k).and_then(Json::as_i64);
        let seq = |what: &str| {
            num("seq")
                .map(|s| s as u64)
                .ok_or_else(|| format!("{what} without seq"))
        };
        Ok(match v.get("j").and_then(Json::as_str).unwrap_or("") {
            "run" => Record::Run {
                format: num("format"),
                config: v
                    .get("config")
                    .and_then(|c| c.to_serde().ok())
                    .unwrap_or_default(),
            },
            "pin" => Record::Pin {
                hash: v.get("hash").and_then(Json::as_str).unwrap_or("").into(),
                fields: v
                    .get("fields")
                    .and_then(|f| f.to_serde().ok())
                    .and_then(|f| serde_json::from_value(f).ok())
                    .ok_or("a pin without fields")?,
            },
            "send" => Record::Send(Sent::from_json(v, seq("send")?)?),
            "recv" => Record::Recv {
                seq: seq("recv")?,
                ans: v.get("ans").map(Answer::from_json),
                us: v.get("us").and_then(Json::as_u64).unwrap_or(0),
            },
            "now" => Record::Now {
                dev: v.get("dev").and_then(Json::as_str).unwrap_or("a").into(),
                ms: num("ms").ok_or("now without ms")?,
            },
            "resumed" => Record::Resumed {
                at_ms: num("at_ms").unwrap_or(0),
                replaying: v.get("replaying").and_then(Json::as_u64).unwrap_or(0),
                in_flight: v
                    .get("in_flight")
                    .and_then(Json::as_array)
                    .map(|a| a.iter().filter_map(Json::as_u64).collect())
                    .unwrap_or_default(),
            },
            "end" => Record::End {
                exit: num("exit").unwrap_or(0),
            },
            "take" => Record::Take {
                case: v
                    .get("case")
                    .and_then(Json::as_str)
                    .ok_or("take without case")?
                    .into(),
            },
            other => return Err(format!("unknown record {other:?}")),
        })
    }
}

impl Sent {
    fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("j".into(), "send".into());
        m.insert("seq".into(), Json::from(self.seq));
        m.insert("dev".into(), self.dev.as_str().into());
        m.insert("op".into(), self.op.as_str().into());
        m.insert("req".into(), self.req.clone());
        if let Some(at) = self.at {
            m.insert("at".into(), Json::from(at));
        }
        if let Some(r) = self.revives {
            m.insert("revives".into(), Json::from(r));
        }
        Json::Object(m)
    }

    fn from_json(v: &Json, seq: u64) -> Result<Sent, String> {
        let field = |k: &str| {
            v.get(k)
                .and_then(Json::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("send without {k}"))
        };
        Ok(Sent {
            seq,
            dev: field("dev")?,
            op: field("op")?,
            req: v.get("req").cloned().unwrap_or(Json::Null),
            at: v.get("at").and_then(Json::as_i64),
            revives: v.get("revives").and_then(Json::as_i64).map(|s| s as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_reads_back_as_written() {
        let records = [
            Record::Run {
                format: Some(1),
                config: serde_json::json!({"seed": 3}),
            },
            Record::Send(Sent {
                seq: 4,
                dev: "b".into(),
                op: "advance_clock".into(),
                req: obj([("ms", Json::from(5u64))]),
                at: Some(-1),
                revives: Some(2),
            }),
            Record::Recv {
                seq: 4,
                ans: Some(Answer::Err(DeviceError::new(
                    ErrorKind::Other("newer".into()),
                    "m",
                ))),
                us: 9,
            },
            Record::Recv {
                seq: 5,
                ans: Some(Answer::Ok(Json::Utf16String(vec![0xdc00]))),
                us: 0,
            },
            Record::Now {
                dev: "a".into(),
                ms: 7,
            },
            Record::Resumed {
                at_ms: 1,
                replaying: 2,
                in_flight: vec![3],
            },
            Record::End { exit: 2 },
        ];
        for r in records {
            let line = r.to_line();
            let back = wj::parse(std::str::from_utf8(&line).unwrap()).unwrap();
            assert_eq!(Record::from_json(&back).unwrap(), r);
        }
        let untagged = obj([("seq", Json::from(1u64))]);
        assert_eq!(
            Record::from_json(&untagged).unwrap_err(),
            "unknown record \"\""
        );
    }
}
