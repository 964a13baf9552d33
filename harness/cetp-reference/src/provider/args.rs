//! What an execution works with and yields: the args of a call once
//! validated ([`ToolArgs`], with the limits they are checked against) and
//! what a committed mutation produced ([`Effected`]). Every app's execution
//! path (the reference tools in `execute.rs`, the notes app, a described
//! app) builds on these, so they sit below all of them.

use super::described::DescribedCall;
use super::notes_model::NoteArgs;
use super::state::Failure;
use super::tool::ToolKind;
use super::{Mutant, ReferenceProvider};
use cetp_proto::ErrorCode;
use serde_json::Value as Json;

/// Price at or above which creating an alert is escalated to a per-call
/// confirmation (§3.4: runtime risk above the static declaration).
pub(crate) const ESCALATION_PRICE: f64 = 10_000.0;
pub(crate) const MAX_HISTORY_ROWS: u64 = 200_000;

/// Args after schema and business validation (§7.3: the schema alone is not
/// enough, the Provider checks what it relies on).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ToolArgs {
    GetQuote {
        symbol: String,
    },
    ListAlerts,
    CreateAlert {
        symbol: String,
        price: f64,
    },
    DeleteAlert {
        alert_id: String,
    },
    SyncPortfolio {
        fail: bool,
    },
    ExportHistory {
        rows: u64,
    },
    Notes(NoteArgs),
    /// A tool of a described app (`described.rs`): its args, and the
    /// business's answer once asked.
    Described {
        index: usize,
        args: Json,
        call: Option<Box<DescribedCall>>,
    },
}

impl ToolArgs {
    pub(crate) fn parse(kind: ToolKind, v: &Json) -> Result<ToolArgs, String> {
        if let ToolKind::Described(index) = kind {
            // The schema decides what args are; the rest is the business's.
            return Ok(ToolArgs::Described {
                index,
                args: v.clone(),
                call: None,
            });
        }
        let obj = v.as_object().ok_or("args must be a JSON object")?;
        let string = |k: &str| {
            obj.get(k)
                .and_then(Json::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("`{k}` must be a non-empty string"))
        };
        Ok(match kind {
            ToolKind::GetQuote => ToolArgs::GetQuote {
                symbol: string("symbol")?,
            },
            ToolKind::ListAlerts => ToolArgs::ListAlerts,
            ToolKind::CreateAlert => {
                let price = obj
                    .get("price")
                    .and_then(Json::as_f64)
                    .filter(|p| p.is_finite() && *p > 0.0)
                    .ok_or("`price` must be a positive number")?;
                ToolArgs::CreateAlert {
                    symbol: string("symbol")?,
                    price,
                }
            }
            ToolKind::DeleteAlert => ToolArgs::DeleteAlert {
                alert_id: string("alert_id")?,
            },
            ToolKind::SyncPortfolio => ToolArgs::SyncPortfolio {
                fail: match obj.get("fail") {
                    None => false,
                    Some(Json::Bool(b)) => *b,
                    Some(_) => return Err("`fail` must be a boolean".into()),
                },
            },
            ToolKind::ExportHistory => ToolArgs::ExportHistory {
                rows: obj
                    .get("rows")
                    .and_then(Json::as_u64)
                    .filter(|r| (1..=MAX_HISTORY_ROWS).contains(r))
                    .ok_or("`rows` must be an integer from 1 to 200000")?,
            },
            ToolKind::Notes(tool) => ToolArgs::Notes(NoteArgs::parse(tool, obj)?),
            ToolKind::Described(index) => ToolArgs::Described {
                index,
                args: v.clone(),
                call: None,
            },
        })
    }

    /// §3.4: whether this call is riskier than its tool's annotations say.
    pub(crate) fn escalates(&self) -> bool {
        match self {
            ToolArgs::CreateAlert { price, .. } => *price >= ESCALATION_PRICE,
            ToolArgs::Notes(n) => n.escalates(),
            _ => false,
        }
    }
}

/// What a committed mutation produced.
pub(crate) enum Effected {
    Value(Json),
    Operation(String),
}

pub(crate) fn invalid_args(p: &ReferenceProvider, message: impl Into<String>) -> Failure {
    let code = if p.has(Mutant::InvalidArgsWrongCode) {
        ErrorCode::InvalidRequest
    } else {
        ErrorCode::InvalidArgs
    };
    Failure::new(code, message)
}
