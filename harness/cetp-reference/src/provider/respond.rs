//! Turning answers into reply Bundles: the echo fields of §4.2/§4.4/§5, the
//! resolution PendingIntent of §4.3 and the result descriptor of §4.5.

use super::state::{Answer, Failure};
use super::{Mutant, ReferenceProvider, Variant};
use cetp_proto::envelope::{keys, ErrorEnvelope, V1Response};
use cetp_proto::provider::{Attachment, FdSource, Reply};
use cetp_proto::{Bundle, ErrorCode, FdValue, PendingIntentValue, Value};
use serde_json::Value as Json;

/// A trace a careless Provider would paste into `error_message`.
const LEAKED_TRACE: &str = "java.lang.IllegalArgumentException: price must be positive\n\
\tat com.clawseed.reference.cetp.AlertRepository.create(AlertRepository.kt:88)\n\
\tat com.clawseed.reference.cetp.ToolProvider.call(ToolProvider.kt:142)";

impl ReferenceProvider {
    pub(crate) fn finish_v2(&self, answer: Answer, request_id: Option<&str>) -> Reply {
        let echo = match request_id {
            Some(_) if self.has(Mutant::WrongRequestIdEcho) => {
                Some(super::util::lock(&self.durable.state).rng.uuid())
            }
            other => other.map(str::to_string),
        };
        let mut attachments = Vec::new();
        let bundle = match answer {
            Answer::Success { data, file } => {
                let mut b = Bundle::new()
                    .with(keys::STATUS, Value::str("success"))
                    .with(keys::PROTOCOL_VERSION, Value::Int(2))
                    .with(keys::DATA, Value::String(data.to_string()));
                if let Some(id) = &echo {
                    b.insert(keys::REQUEST_ID, Value::str(id));
                }
                if let Some(bytes) = file {
                    let handle = self.next_handle("result");
                    b.insert(
                        keys::RESULT_FD,
                        Value::Fd(FdValue {
                            handle: handle.clone(),
                        }),
                    );
                    let src = FdSource::Bytes(bytes);
                    attachments.push((
                        handle,
                        if self.has(Mutant::WritableResultFd) {
                            Attachment::WritableFile(src)
                        } else {
                            Attachment::File(src)
                        },
                    ));
                }
                b
            }
            Answer::Accepted { data } => {
                let mut b = Bundle::new()
                    .with(keys::STATUS, Value::str("accepted"))
                    .with(keys::PROTOCOL_VERSION, Value::Int(2))
                    .with(keys::DATA, Value::String(data.to_string()));
                if let Some(id) = &echo {
                    b.insert(keys::REQUEST_ID, Value::str(id));
                }
                b
            }
            Answer::Error(f) if self.has(Mutant::RefusalsThrown) => {
                return Reply::Threw {
                    class: "java.lang.SecurityException".into(),
                    message: f.message,
                };
            }
            Answer::Error(f) => {
                let (b, pi) = self.error_bundle(f, echo);
                attachments.extend(pi);
                b
            }
        };
        Reply::Result {
            bundle: Some(bundle),
            attachments,
        }
    }

    fn error_bundle(
        &self,
        f: Failure,
        echo: Option<String>,
    ) -> (Bundle, Option<(String, Attachment)>) {
        let invalid_args = f.code == ErrorCode::InvalidArgs;
        let code = if invalid_args && self.has(Mutant::UnknownErrorCode) {
            "BAD_ARGS".to_string()
        } else {
            f.code.as_str().to_string()
        };
        let message = if invalid_args && self.has(Mutant::StackTraceInMessage) {
            format!("{}\n{LEAKED_TRACE}", f.message)
        } else {
            self.error_message(f.message)
        };
        let retryable = f.retryable || (invalid_args && self.has(Mutant::InvalidArgsRetryable));
        let mut attachment = None;
        let resolution = f.resolution.map(|target| {
            let handle = self.next_handle("resolution");
            let value = PendingIntentValue {
                handle: handle.clone(),
                creator_package: Some(target.creator_package.clone()),
                creator_uid: Some(i64::from(target.creator_uid)),
                // A device before Android 12 cannot tell (PendingIntent
                // .isImmutable() is API 31).
                immutable: (!self.takes(Variant::PendingIntentMutabilityUnknown))
                    .then_some(target.immutable),
                activity: Some(target.activity),
            };
            attachment = Some((handle, Attachment::Intent(*target)));
            value
        });
        let env = ErrorEnvelope {
            code,
            message,
            retryable,
            protocol_version: if self.has(Mutant::NoProtocolVersionEcho) {
                None
            } else {
                Some(2)
            },
            request_id: if self.has(Mutant::NoRequestIdEcho) {
                None
            } else {
                echo
            },
            details: f.details.or_else(|| {
                self.takes(Variant::ErrorDetailsEverywhere)
                    .then(|| serde_json::json!({"reason": f.code.as_str(), "support": "https://help.example/cetp"}))
            }),
            retry_after_ms: f.retry_after_ms,
            resolution,
            resume_token: f.resume_token,
        };
        let mut b = env.to_bundle();
        if self.has(Mutant::ErrorMissingRetryable) {
            b.remove(keys::RETRYABLE);
        }
        (b, attachment)
    }

    /// v1 answers carry only status and data, or status, code and message.
    pub(crate) fn finish_v1(&self, result: Result<Json, Failure>) -> Reply {
        let r = match result {
            Ok(data) => V1Response::Success(data),
            Err(f) => V1Response::Error {
                code: f.code.as_str().to_string(),
                message: self.error_message(f.message),
            },
        };
        Reply::bundle(r.to_bundle())
    }

    /// The `error_message` of a v1 or v2 error answer.
    fn error_message(&self, mut message: String) -> String {
        if self.takes(Variant::HostileText) {
            message.push_str(super::hostile::ERROR_NOTE);
        }
        message
    }
}
