//! The reference Consumer behind the probe wire's `consumer_act` shape
//! (probe-wire.md, "driving a Consumer under test"): an action in, an
//! outcome out, as a vendor's driver would report it for its own app.

use super::{Consumer, ConsumerConfig, ConsumerError, Execution, Outcome, Unattended};
use crate::port::ConsumerPort;
use cetp_proto::provider::Decision;
use cetp_proto::ErrorCode;
use serde_json::{json, Value as Json};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What the Consumer under test is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Discover the authority, negotiate (or pick v1), list tools.
    Connect {
        /// Authority of the Provider's ContentProvider.
        authority: String,
    },
    /// List tools again (cache and `revision` rules apply).
    ListTools {
        /// Authority of the Provider's ContentProvider.
        authority: String,
    },
    /// Execute `tool` with `args` as its agent would, retries and all.
    CallTool {
        /// Authority of the Provider's ContentProvider.
        authority: String,
        /// Tool name.
        tool: String,
        /// The arguments, sent as `args` JSON text.
        args: Json,
    },
    /// Extension: execute `tool` with `args`, and when it runs as a
    /// background operation, cancel it (the user changed their mind) and
    /// follow it to its end.
    CancelTool {
        /// Authority of the Provider's ContentProvider.
        authority: String,
        /// Tool name.
        tool: String,
        /// The arguments, sent as `args` JSON text.
        args: Json,
    },
    /// The user's decision on the resolution the Consumer is waiting for.
    UserDecision {
        /// Approve, deny or dismiss.
        decision: Decision,
    },
    /// Forget sessions and caches, as a restarted app would.
    Reset,
}

impl Action {
    /// The action as the probe wire's `consumer_act` carries it (`{"do": ...}`).
    pub fn to_json(&self) -> Json {
        match self {
            Action::Connect { authority } => json!({"do": "connect", "authority": authority}),
            Action::ListTools { authority } => {
                json!({"do": "list_tools", "authority": authority})
            }
            Action::CallTool {
                authority,
                tool,
                args,
            } => json!({"do": "call_tool", "authority": authority, "tool": tool, "args": args}),
            Action::CancelTool {
                authority,
                tool,
                args,
            } => json!({"do": "cancel_tool", "authority": authority, "tool": tool, "args": args}),
            Action::UserDecision { decision } => {
                json!({"do": "user_decision", "decision": decision.as_str()})
            }
            Action::Reset => json!({"do": "reset"}),
        }
    }

    /// Reads a `consumer_act` action; the error names what is wrong.
    pub fn from_json(v: &Json) -> Result<Action, String> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Json::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("action lacks the string {k:?}"))
        };
        match v.get("do").and_then(Json::as_str) {
            Some("connect") => Ok(Action::Connect {
                authority: s("authority")?,
            }),
            Some("list_tools") => Ok(Action::ListTools {
                authority: s("authority")?,
            }),
            Some("call_tool") => Ok(Action::CallTool {
                authority: s("authority")?,
                tool: s("tool")?,
                args: v.get("args").cloned().unwrap_or_else(|| json!({})),
            }),
            Some("cancel_tool") => Ok(Action::CancelTool {
                authority: s("authority")?,
                tool: s("tool")?,
                args: v.get("args").cloned().unwrap_or_else(|| json!({})),
            }),
            Some("user_decision") => Ok(Action::UserDecision {
                decision: Decision::parse(&s("decision")?)
                    .ok_or("decision is not approve, deny or dismiss")?,
            }),
            Some("reset") => Ok(Action::Reset),
            other => Err(format!("unknown action {other:?}")),
        }
    }
}

/// What came of an action, in the `consumer_act` outcome shape.
#[derive(Clone, Debug, PartialEq)]
pub enum ActOutcome {
    /// A result the Consumer would hand to its agent.
    Success {
        /// The result value.
        value: Json,
    },
    /// A CETP error the Consumer surfaced (or, with `error_code` `DEVICE`,
    /// a transport failure).
    Error {
        /// The §5 code, or `DEVICE`.
        error_code: String,
        /// What the Consumer reported.
        message: String,
    },
    /// Waiting for a user action.
    NeedsUser {
        /// What the user is asked for.
        detail: String,
    },
    /// The Consumer rejected what the Provider sent.
    Refused {
        /// What was wrong with the Provider's answer.
        detail: String,
    },
    /// The Consumer threw.
    Crashed {
        /// The exception class.
        class: String,
        /// The exception message.
        message: String,
    },
}

impl ActOutcome {
    /// The `outcome` name (`success`, `needs_user`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            ActOutcome::Success { .. } => "success",
            ActOutcome::Error { .. } => "error",
            ActOutcome::NeedsUser { .. } => "needs_user",
            ActOutcome::Refused { .. } => "refused",
            ActOutcome::Crashed { .. } => "crashed",
        }
    }

    /// The outcome as the probe wire's `consumer_act` answer carries it.
    pub fn to_json(&self) -> Json {
        match self {
            ActOutcome::Success { value } => json!({"outcome": "success", "value": value}),
            ActOutcome::Error {
                error_code,
                message,
            } => json!({"outcome": "error", "error_code": error_code, "message": message}),
            ActOutcome::NeedsUser { detail } => json!({"outcome": "needs_user", "detail": detail}),
            ActOutcome::Refused { detail } => json!({"outcome": "refused", "detail": detail}),
            ActOutcome::Crashed { class, message } => {
                json!({"outcome": "crashed", "class": class, "message": message})
            }
        }
    }

    /// Reads a `consumer_act` outcome; missing strings read as empty.
    pub fn from_json(v: &Json) -> Result<ActOutcome, String> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string()
        };
        match v.get("outcome").and_then(Json::as_str) {
            Some("success") => Ok(ActOutcome::Success {
                value: v.get("value").cloned().unwrap_or(Json::Null),
            }),
            Some("error") => Ok(ActOutcome::Error {
                error_code: s("error_code"),
                message: s("message"),
            }),
            Some("needs_user") => Ok(ActOutcome::NeedsUser {
                detail: s("detail"),
            }),
            Some("refused") => Ok(ActOutcome::Refused {
                detail: s("detail"),
            }),
            Some("crashed") => Ok(ActOutcome::Crashed {
                class: s("class"),
                message: s("message"),
            }),
            other => Err(format!("unknown outcome {other:?}")),
        }
    }

    fn of_error(e: &ConsumerError) -> ActOutcome {
        match e {
            ConsumerError::Cetp(c)
                if matches!(
                    c.code,
                    ErrorCode::AuthRequired | ErrorCode::UserActionRequired
                ) =>
            {
                ActOutcome::NeedsUser {
                    detail: e.to_string(),
                }
            }
            ConsumerError::Cetp(c) => ActOutcome::Error {
                error_code: c.code.as_str().to_string(),
                message: e.to_string(),
            },
            ConsumerError::Device(_) => ActOutcome::Error {
                error_code: "DEVICE".into(),
                message: e.to_string(),
            },
            ConsumerError::Protocol(_) | ConsumerError::Refused(_) => ActOutcome::Refused {
                detail: e.to_string(),
            },
        }
    }
}

/// The reference Consumer (or one of its mutants) driven by actions.
pub struct DrivenConsumer {
    config: ConsumerConfig,
    consumer: Consumer,
    /// The execution waiting for the user (after `needs_user`).
    pending: Option<Execution>,
    resets: u64,
}

impl DrivenConsumer {
    /// A fresh Consumer with this configuration, waiting for its first action.
    pub fn new(config: ConsumerConfig) -> Self {
        DrivenConsumer {
            consumer: Consumer::new(config.clone()),
            config,
            pending: None,
            resets: 0,
        }
    }

    /// The Consumer being driven.
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// Forgets everything, with a new request-id stream (a restarted app
    /// never repeats the ids of its previous life).
    fn reset(&mut self) {
        self.resets += 1;
        let seed = self
            .config
            .uuid_seed
            .wrapping_add(self.resets.wrapping_mul(0x5851_F42D_4C95_7F2D));
        self.consumer = Consumer::new(ConsumerConfig {
            uuid_seed: seed,
            ..self.config.clone()
        });
        self.pending = None;
    }

    /// Performs one action. A panic of the Consumer is the `crashed`
    /// outcome, and the Consumer restarts (as the app's process would).
    pub fn act(&mut self, port: &mut dyn ConsumerPort, action: &Action) -> ActOutcome {
        let r = catch_unwind(AssertUnwindSafe(|| self.act_inner(port, action)));
        match r {
            Ok(o) => o,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.reset();
                ActOutcome::Crashed {
                    class: "panic".into(),
                    message,
                }
            }
        }
    }

    fn act_inner(&mut self, port: &mut dyn ConsumerPort, action: &Action) -> ActOutcome {
        let done = |r: Result<Json, ConsumerError>| match r {
            Ok(value) => ActOutcome::Success { value },
            Err(e) => ActOutcome::of_error(&e),
        };
        match action {
            Action::Reset => {
                self.reset();
                ActOutcome::Success { value: json!({}) }
            }
            Action::Connect { authority } => done(self.connect(port, authority)),
            Action::ListTools { authority } => done(self.list(port, authority)),
            Action::CallTool {
                authority,
                tool,
                args,
            } => {
                let exec = match self.consumer.prepare(authority, tool, args) {
                    Ok(e) => e,
                    Err(e) => return ActOutcome::of_error(&e),
                };
                let r = self.consumer.run_to_end(port, &exec, &mut Unattended);
                self.finish(exec, r)
            }
            Action::CancelTool {
                authority,
                tool,
                args,
            } => {
                let exec = match self.consumer.prepare(authority, tool, args) {
                    Ok(e) => e,
                    Err(e) => return ActOutcome::of_error(&e),
                };
                let r = match self.consumer.run(port, &exec, &mut Unattended) {
                    Ok(super::Started::Pending(mut op)) => self.consumer.cancel(port, &mut op),
                    Ok(super::Started::Done(outcome)) => Ok(outcome),
                    Err(e) => Err(e),
                };
                self.finish(exec, r)
            }
            Action::UserDecision { decision } => {
                let Some(exec) = self.pending.take() else {
                    return ActOutcome::Refused {
                        detail: "no resolution is waiting for the user".into(),
                    };
                };
                let mut agent = *decision;
                let r = self.consumer.run_to_end(port, &exec, &mut agent);
                self.finish(exec, r)
            }
        }
    }

    fn finish(&mut self, exec: Execution, r: Result<Outcome, ConsumerError>) -> ActOutcome {
        match r {
            Ok(Outcome::Succeeded(out)) => ActOutcome::Success { value: out.value },
            Ok(Outcome::Cancelled { operation_id }) => ActOutcome::Error {
                error_code: "CANCELLED".into(),
                message: format!("operation {operation_id} was cancelled"),
            },
            Err(e) => {
                let o = ActOutcome::of_error(&e);
                if matches!(o, ActOutcome::NeedsUser { .. }) {
                    self.pending = Some(exec);
                }
                o
            }
        }
    }

    fn connect(
        &mut self,
        port: &mut dyn ConsumerPort,
        authority: &str,
    ) -> Result<Json, ConsumerError> {
        let report = self.consumer.discover(port)?;
        if !report.providers.iter().any(|p| p.authority == authority) {
            let why = report
                .rejected
                .iter()
                .map(|r| r.reason.clone())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ConsumerError::refused(super::Refusal::Undiscoverable {
                package: authority.to_string(),
                reason: if why.is_empty() {
                    "no Provider declares this authority".into()
                } else {
                    why
                },
            }));
        }
        let connected = self.consumer.connect(port, authority)?;
        let tools = self.list(port, authority)?;
        Ok(
            json!({"version": connected.version, "provider_id": connected.provider_id,
                  "tools": tools["tools"]}),
        )
    }

    fn list(
        &mut self,
        port: &mut dyn ConsumerPort,
        authority: &str,
    ) -> Result<Json, ConsumerError> {
        if self.consumer.session(authority).is_some() {
            let c = self.consumer.list_tools(port, authority)?;
            let names: Vec<&str> = c.tools.iter().map(|t| t.name.as_str()).collect();
            Ok(json!({"revision": c.revision, "tools": names}))
        } else {
            let names = self.consumer.list_v1_tools(port, authority)?;
            Ok(json!({"tools": names}))
        }
    }
}
