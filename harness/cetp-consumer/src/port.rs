//! The hostile Provider in-process: a [`ConsumerPort`] whose device is the
//! scripted Provider, on a manual clock, recording every descriptor read
//! and close and every confirmation launched. It stands for an Android
//! device: no call or answer larger than one Binder transaction crosses
//! ([`cetp_proto::binder`]).

use super::hostile::{FdSpec, Hostile, Scripted};
use cetp_proto::device::{CallAnswer, DeviceError, ErrorKind, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use cetp_reference::port::ConsumerPort;
use std::collections::BTreeMap;

/// Most bytes one `read_fd` serves, whatever is asked: the harness never
/// allocates what a Consumer mutant asks for.
pub const SERVE_CAP: u64 = 17 * 1024 * 1024;

/// A result descriptor handed to the Consumer.
#[derive(Clone, Debug)]
pub struct FdTrace {
    /// The handle the Consumer knows it by.
    pub handle: String,
    /// What reading it yields.
    pub spec: FdSpec,
    /// `max_bytes` of every read (a read uses the descriptor up).
    pub reads: Vec<u64>,
    /// Bytes served by the read.
    pub served: u64,
    /// Whether the Consumer closed it.
    pub closed: bool,
    /// Capabilities granted when it was handed out.
    pub granted: Vec<String>,
}

/// A confirmation PendingIntent the Consumer launched (§4.3).
#[derive(Clone, Debug)]
pub struct ResolveRecord {
    /// The handle of the PendingIntent.
    pub handle: String,
    /// The user decision played.
    pub decision: Decision,
    /// Calls in the log when it was launched.
    pub after_calls: usize,
}

/// The in-process device of a Consumer scenario: the hostile Provider
/// (and the decoy) behind a [`ConsumerPort`], with a manual clock.
pub struct HostilePort {
    /// The scripted Provider under which the Consumer acts.
    pub hostile: Hostile,
    /// The decoy Provider, discovered first, when the scenario has one.
    pub decoy: Option<Hostile>,
    /// The manual device clock, Unix epoch ms.
    pub now_ms: i64,
    /// Every descriptor handed out, by handle.
    pub fds: BTreeMap<String, FdTrace>,
    /// Every confirmation launched, in order.
    pub resolves: Vec<ResolveRecord>,
}

impl HostilePort {
    /// A port serving `hostile`, its clock at `start_ms`.
    pub fn new(hostile: Hostile, start_ms: i64) -> Self {
        HostilePort {
            hostile,
            decoy: None,
            now_ms: start_ms,
            fds: BTreeMap::new(),
            resolves: Vec::new(),
        }
    }
}

/// What a call over Binder's transaction limit fails with.
fn too_large(what: &str) -> DeviceError {
    DeviceError::new(
        ErrorKind::TransactionTooLarge,
        format!(
            "{what} is larger than one Binder transaction carries ({} bytes)",
            cetp_proto::binder::TRANSACTION_LIMIT_BYTES
        ),
    )
}

impl ConsumerPort for HostilePort {
    fn now_ms(&mut self) -> i64 {
        self.now_ms
    }

    fn sleep_ms(&mut self, ms: u64) {
        self.now_ms = self
            .now_ms
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
    }

    fn discover(&mut self) -> Result<Vec<ServiceManifest>, DeviceError> {
        let manifest = |h: &Hostile| ServiceManifest {
            package: h.package().into(),
            service: format!("{}/.cetp.ToolProviderService", h.package()),
            exported: true,
            permission: None,
            meta: h.meta(),
            authority_package: Some(h.authority_package()),
            signing_cert_sha256: Vec::new(),
            meta_types: None,
        };
        // The decoy comes first: scan order must not decide routing.
        Ok(self
            .decoy
            .iter()
            .chain(std::iter::once(&self.hostile))
            .map(manifest)
            .collect())
    }

    fn call(
        &mut self,
        authority: &str,
        method: &str,
        _arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let extras = extras.cloned().unwrap_or_default();
        if let Some(d) = self.decoy.as_mut().filter(|d| d.authority() == authority) {
            // The decoy answers plainly: only where calls went is judged.
            return match d.on_call(method, &extras, self.now_ms) {
                Scripted::Reply { bundle, .. } => Ok(CallAnswer::Result(Some(bundle))),
                _ => Err(DeviceError::new(
                    ErrorKind::ProviderDied,
                    "the decoy failed",
                )),
            };
        }
        // Binder carries no transaction over its buffer (§2's Android
        // transport): a request that large never reaches the Provider, and
        // an answer that large never reaches the Consumer.
        if cetp_proto::binder::exceeds_transaction_limit(&extras) {
            return Err(too_large("the request"));
        }
        if authority != self.hostile.authority() {
            return Err(DeviceError::new(
                ErrorKind::UnknownAuthority,
                format!("no ContentProvider answers on {authority:?}"),
            ));
        }
        match self.hostile.on_call(method, &extras, self.now_ms) {
            Scripted::Timeout => {
                self.sleep_ms(timeout_ms);
                Err(DeviceError::new(
                    ErrorKind::Timeout,
                    "the Provider did not answer in time",
                ))
            }
            Scripted::Died => Err(DeviceError::new(
                ErrorKind::ProviderDied,
                "the Provider's process died",
            )),
            Scripted::Throw { class, message } => Ok(CallAnswer::Threw { class, message }),
            Scripted::Reply { bundle, .. }
                if cetp_proto::binder::exceeds_transaction_limit(&bundle) =>
            {
                Err(too_large("the Provider's answer"))
            }
            Scripted::Reply { bundle, fd, .. } => {
                if let Some((handle, spec)) = fd {
                    let granted = self.hostile.log.last().map(|r| r.granted.clone());
                    self.fds.insert(
                        handle.clone(),
                        FdTrace {
                            handle,
                            spec,
                            reads: Vec::new(),
                            served: 0,
                            closed: false,
                            granted: granted.unwrap_or_default(),
                        },
                    );
                }
                Ok(CallAnswer::Result(Some(bundle)))
            }
        }
    }

    fn read_fd(&mut self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        let fd = self
            .fds
            .get_mut(handle)
            .filter(|f| !f.closed)
            .ok_or_else(|| {
                DeviceError::new(ErrorKind::UnknownHandle, format!("no open fd {handle:?}"))
            })?;
        fd.reads.push(max_bytes);
        fd.closed = true;
        let limit = max_bytes.min(SERVE_CAP);
        let (bytes, eof) = match &fd.spec {
            FdSpec::Bytes(b) => {
                let n = (b.len() as u64).min(limit) as usize;
                (b[..n].to_vec(), b.len() as u64 <= limit)
            }
            FdSpec::Endless { prefix, fill } => {
                let mut v: Vec<u8> = prefix.iter().copied().take(limit as usize).collect();
                v.resize(limit as usize, *fill);
                (v, false)
            }
        };
        fd.served = bytes.len() as u64;
        Ok(FdRead {
            bytes,
            eof,
            error: None,
            writable: Some(false),
        })
    }

    fn close_fd(&mut self, handle: &str) -> Result<(), DeviceError> {
        match self.fds.get_mut(handle).filter(|f| !f.closed) {
            Some(f) => {
                f.closed = true;
                Ok(())
            }
            None => Err(DeviceError::new(
                ErrorKind::UnknownHandle,
                format!("no open fd {handle:?}"),
            )),
        }
    }

    fn resolve(&mut self, handle: &str, decision: Decision) -> Result<ResolveOutcome, DeviceError> {
        if !self.hostile.intents.iter().any(|i| i.handle == handle) {
            return Err(DeviceError::new(
                ErrorKind::UnknownHandle,
                format!("no PendingIntent {handle:?}"),
            ));
        }
        self.resolves.push(ResolveRecord {
            handle: handle.to_string(),
            decision,
            after_calls: self.hostile.log.len(),
        });
        Ok(ResolveOutcome {
            launched: true,
            decision_applied: decision != Decision::Dismiss,
            result_code: if decision == Decision::Approve { -1 } else { 0 },
            launched_package: Some(self.hostile.package().into()),
        })
    }
}
