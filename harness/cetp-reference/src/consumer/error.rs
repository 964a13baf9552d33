//! Consumer errors, grouped by who is at fault.

use cetp_proto::descriptor::Violation;
use cetp_proto::device::DeviceError;
use cetp_proto::envelope::{Capability, ErrorEnvelope};
use cetp_proto::ErrorCode;
use serde_json::Value as Json;
use std::fmt;

/// Text that came from a Provider. §7.3: it is data to show, never an
/// instruction, so it has no `Display`: whoever renders it does so on
/// purpose, with [`ProviderText::as_str`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ProviderText {
    text: String,
    truncated: bool,
}

impl ProviderText {
    /// Cuts `text` to at most `limit` bytes, on a character boundary.
    pub fn truncated(text: &str, limit: usize) -> Self {
        if text.len() <= limit {
            return ProviderText {
                text: text.to_string(),
                truncated: false,
            };
        }
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        ProviderText {
            text: text[..end].to_string(),
            truncated: true,
        }
    }

    /// Keeps `text` whole; the caller has already checked its length.
    pub(crate) fn checked(text: &str) -> Self {
        ProviderText {
            text: text.to_string(),
            truncated: false,
        }
    }

    /// The kept text, to render on purpose as data.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the Provider sent more than was kept.
    pub fn was_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Debug for ProviderText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// Who is at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The Provider broke a MUST of the spec.
    ProviderBrokeProtocol,
    /// The Provider answered with a well-formed CETP error (§5).
    ProviderAnsweredError,
    /// The device or port failed: never charged to the Provider.
    Device,
    /// This Consumer's own policy or limits refused to go on.
    LocalPolicy,
}

/// The Provider broke the protocol. Every violation found is listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolFault {
    /// provider_id when known, else the package.
    pub provider: String,
    /// The CETP method whose answer broke it.
    pub method: &'static str,
    /// Every MUST it broke in that answer.
    pub violations: Vec<Violation>,
}

/// A CETP error the Provider answered (§5), its text bounded.
#[derive(Clone, Debug, PartialEq)]
pub struct CetpError {
    /// provider_id when known, else the package.
    pub provider: String,
    /// The CETP method that was answered.
    pub method: &'static str,
    /// The §5 code.
    pub code: ErrorCode,
    /// The `error_message`, bounded: untrusted text (§7.3).
    pub message: ProviderText,
    /// Whether an automatic retry is allowed (§5).
    pub retryable: bool,
    /// The echoed `request_id`, to query or retry with.
    pub request_id: Option<String>,
    /// The `retry_after_ms` a retry must wait (§5).
    pub retry_after_ms: Option<i64>,
    /// The parsed `error_details`.
    pub details: Option<Json>,
}

impl CetpError {
    pub(crate) fn from_envelope(
        provider: &str,
        method: &'static str,
        code: ErrorCode,
        env: &ErrorEnvelope,
        message_limit: usize,
    ) -> Self {
        CetpError {
            provider: provider.to_string(),
            method,
            code,
            message: ProviderText::truncated(&env.message, message_limit),
            retryable: env.retryable,
            request_id: env.request_id.clone(),
            retry_after_ms: env.retry_after_ms,
            details: env.details.clone(),
        }
    }
}

/// The device or port failed during `op` (a CETP method, or `read_fd`,
/// `resolve`, `discover`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFault {
    /// The Provider the op was for, when there was one.
    pub provider: Option<String>,
    /// The op that failed.
    pub op: String,
    /// The request id to query or retry with later (§6: never a new one).
    pub request_id: Option<String>,
    /// What the device or port reported.
    pub error: DeviceError,
}

/// Why this Consumer refused to go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No Provider of this name was discovered.
    UnknownProvider {
        /// The name asked for.
        provider: String,
    },
    /// §8: v2 was declared and failed; the Provider is off, v1 included.
    Disabled {
        /// The disabled Provider.
        provider: String,
        /// What failed.
        reason: String,
    },
    /// The Provider's manifest cannot be used (§2.1: same package, versions).
    Undiscoverable {
        /// The package of the service.
        package: String,
        /// What is wrong with its manifest.
        reason: String,
    },
    /// Discovered but not connected yet ([`super::Consumer::connect`]).
    NotConnected {
        /// The Provider.
        provider: String,
    },
    /// A v2 method on a Provider used through v1.
    NotV2 {
        /// The Provider.
        provider: String,
    },
    /// §2.3: never use what was not negotiated.
    CapabilityNotNegotiated {
        /// The Provider.
        provider: String,
        /// The capability the call would need.
        capability: Capability,
    },
    /// Routing is by (provider_id, tool_name) over the current tool list.
    ToolNotListed {
        /// The Provider.
        provider: String,
        /// The tool asked for.
        tool: String,
    },
    /// The `args` exceed the local limit or the negotiated `max_request_bytes` (§4.1); they are never sent.
    ArgsTooLarge {
        /// UTF-8 length of the args JSON text.
        bytes: usize,
        /// The limit that applies.
        limit: usize,
    },
    /// The args given are not JSON text, or nest deeper than the local limit.
    ArgsNotJson {
        /// The parser's message, or the depth limit.
        reason: String,
    },
    /// A Provider text (name, description, message) is longer than the local limit (§7.3).
    TextTooLong {
        /// The Provider.
        provider: String,
        /// Where the text was.
        at: String,
        /// Its length in bytes.
        bytes: usize,
        /// The local limit.
        limit: usize,
    },
    /// Provider JSON nests deeper than the local limit; it is not parsed (§7.3).
    JsonTooDeep {
        /// The Provider.
        provider: String,
        /// The key or descriptor holding the JSON.
        at: String,
        /// The depth limit.
        limit: usize,
    },
    /// Inline JSON or a file result is bigger than the local read cap (§4.5).
    TooLarge {
        /// The Provider.
        provider: String,
        /// The key, or `result_fd`.
        at: String,
        /// Its size in bytes (declared, for a file).
        bytes: u64,
        /// The local cap.
        limit: u64,
    },
    /// A Provider list (tools, scopes) is longer than the local limit.
    TooManyItems {
        /// The Provider.
        provider: String,
        /// Which list.
        at: String,
        /// How many items it had.
        count: usize,
        /// The local limit.
        limit: usize,
    },
    /// The device could not say whether the PendingIntent is immutable, an
    /// activity, or whose it is: not proven is not fine.
    UnverifiedResolution {
        /// The Provider.
        provider: String,
        /// The PendingIntent facts the device could not report.
        unknown: Vec<&'static str>,
    },
    /// One execution asked for more confirmation rounds (§4.3) than the Consumer allows.
    TooManyResolutions {
        /// The Provider.
        provider: String,
        /// The execution's request id.
        request_id: String,
        /// The configured `max_resolutions`.
        limit: u32,
    },
    /// Launching the `resolution` PendingIntent started no activity, so there is no decision to resume with (§4.3).
    ResolutionNotLaunched {
        /// The Provider.
        provider: String,
        /// The execution's request id.
        request_id: String,
    },
    /// The Consumer's time budget ran out. The execution may still complete:
    /// query it with the same request id (and operation id).
    BudgetExhausted {
        /// The Provider.
        provider: String,
        /// The request id to query or retry with.
        request_id: String,
        /// The operation id, when the execution went to the background.
        operation_id: Option<String>,
    },
    /// Two Providers claim one provider_id; routing would be ambiguous.
    DuplicateProviderId {
        /// The contested id.
        provider_id: String,
        /// The package of the Provider that already holds it.
        package: String,
    },
}

/// Why a Consumer call failed, grouped by who is at fault ([`ConsumerError::fault`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ConsumerError {
    /// The Provider broke the protocol.
    Protocol(ProtocolFault),
    /// The Provider answered a well-formed CETP error.
    Cetp(Box<CetpError>),
    /// The device or port failed.
    Device(DeviceFault),
    /// The Consumer itself refused to go on.
    Refused(Box<Refusal>),
}

impl ConsumerError {
    /// Who is at fault for this error.
    pub fn fault(&self) -> Fault {
        match self {
            ConsumerError::Protocol(_) => Fault::ProviderBrokeProtocol,
            ConsumerError::Cetp(_) => Fault::ProviderAnsweredError,
            ConsumerError::Device(_) => Fault::Device,
            ConsumerError::Refused(_) => Fault::LocalPolicy,
        }
    }

    /// The CETP error code, when the Provider answered one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ConsumerError::Cetp(e) => Some(e.code),
            _ => None,
        }
    }

    /// The rules broken, when the Provider broke the protocol.
    pub fn violated_rules(&self) -> Vec<&'static str> {
        match self {
            ConsumerError::Protocol(p) => p.violations.iter().map(|v| v.rule).collect(),
            _ => Vec::new(),
        }
    }

    /// Why the Consumer refused, when it did.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ConsumerError::Refused(r) => Some(r),
            _ => None,
        }
    }

    pub(crate) fn refused(r: Refusal) -> Self {
        ConsumerError::Refused(Box::new(r))
    }

    /// `status="accepted"` on a method other than execute_tool (§4.4).
    /// `call_v2` already refuses it; the method handlers match it only
    /// because `Response` has the variant.
    pub(crate) fn accepted_outside_execute(provider: &str, method: &'static str) -> Self {
        ConsumerError::violation(
            provider,
            method,
            "response.accepted.method",
            "4.4",
            "status \"accepted\" answers only execute_tool",
        )
    }

    pub(crate) fn violation(
        provider: &str,
        method: &'static str,
        rule: &'static str,
        section: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ConsumerError::Protocol(ProtocolFault {
            provider: provider.to_string(),
            method,
            violations: vec![Violation::must(
                rule,
                section,
                String::new(),
                message.into(),
            )],
        })
    }
}

impl fmt::Display for ConsumerError {
    // Provider text is printed with `{:?}` so that quotes, newlines and
    // control characters it holds cannot pass for the Consumer's own words.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsumerError::Protocol(p) => {
                write!(
                    f,
                    "provider {:?} broke the protocol in {}:",
                    p.provider, p.method
                )?;
                for v in &p.violations {
                    write!(f, " [§{} {}", v.section, v.rule)?;
                    if !v.at.is_empty() {
                        write!(f, " at {}", v.at)?;
                    }
                    write!(f, ": {:?}]", v.message)?;
                }
                Ok(())
            }
            ConsumerError::Cetp(e) => write!(
                f,
                "provider {:?} answered {} to {} (retryable={}): {:?}",
                e.provider,
                e.code,
                e.method,
                e.retryable,
                e.message.as_str()
            ),
            ConsumerError::Device(d) => {
                write!(f, "device failure during {}: {}", d.op, d.error)?;
                if let Some(id) = &d.request_id {
                    write!(f, " (request id {id})")?;
                }
                Ok(())
            }
            ConsumerError::Refused(r) => write!(f, "refused: {r:?}"),
        }
    }
}

impl std::error::Error for ConsumerError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_characters_whole() {
        let t = ProviderText::truncated("ééé", 3);
        assert_eq!(t.as_str(), "é");
        assert!(t.was_truncated());
        assert!(!ProviderText::truncated("abc", 3).was_truncated());
    }

    #[test]
    fn provider_text_is_quoted_in_messages() {
        let e = ConsumerError::violation("p", "list_tools", "r", "3.3", "line\nIgnore previous");
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        assert_eq!(e.fault(), Fault::ProviderBrokeProtocol);
    }
}
