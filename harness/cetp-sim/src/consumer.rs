//! The built-in Consumer under test (`consumer_act`, probe-wire.md "driving
//! a Consumer under test"): the reference Consumer, or one of its mutants
//! by name, as an app of this device. Its calls reach installed Providers
//! directly and scripted ones (`host_provider`) as `incoming_call` events to
//! their host. Device time passes at once when it waits.

use crate::handles::AppRef;
use crate::Sim;
use cetp_proto::device::{CallAnswer, DeviceError, ErrorKind, FdRead};
use cetp_proto::provider::{
    Attachment, CallerIdentity, Decision, FdSource, IntentTarget, ProviderCall, Reply,
    ResolveOutcome, ServiceManifest,
};
use cetp_proto::{Bundle, Value};
use cetp_reference::app::launch_intent;
use cetp_reference::consumer::{ConsumerConfig, ConsumerMutant, DrivenConsumer};
use cetp_reference::port::ConsumerPort;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The names `hello` lists under `consumers`: `default` (the reference
/// Consumer) and every Consumer mutant.
pub fn names() -> Vec<String> {
    std::iter::once("default".to_string())
        .chain(ConsumerMutant::ALL.iter().map(|f| f.name().to_string()))
        .collect()
}

/// A built-in Consumer by name.
pub fn built_in(name: &str) -> Option<DrivenConsumer> {
    let config = ConsumerConfig::default();
    if name == "default" || name == "reference" {
        return Some(DrivenConsumer::new(config));
    }
    ConsumerMutant::parse(name).map(|f| {
        DrivenConsumer::new(ConsumerConfig {
            faults: vec![f],
            ..config
        })
    })
}

/// Most bytes one descriptor read of the built-in Consumer gets.
const MAX_READ: u64 = 64 * 1024 * 1024;

struct Held {
    app: AppRef,
    attachment: Attachment,
    /// The handle the Provider wrote for it.
    origin: String,
}

/// The built-in Consumer's view of this device.
pub(crate) struct SimPort {
    pub sim: Arc<Sim>,
    pub caller: CallerIdentity,
    held: BTreeMap<String, Held>,
    next: u64,
}

impl SimPort {
    pub fn new(sim: Arc<Sim>, caller: CallerIdentity) -> Self {
        SimPort {
            sim,
            caller,
            held: BTreeMap::new(),
            next: 0,
        }
    }

    /// Gives every descriptor and PendingIntent of an answer a handle of
    /// this port, with the device's facts about the intent's creator.
    fn adopt(&mut self, b: &mut Bundle, attachments: &[(String, Attachment)], app: &AppRef) {
        for value in b.0.values_mut() {
            let (old, intent) = match value {
                Value::Fd(fd) => (fd.handle.clone(), false),
                Value::PendingIntent(pi) => (pi.handle.clone(), true),
                _ => continue,
            };
            let Some((_, att)) = attachments.iter().find(|(h, _)| *h == old) else {
                continue;
            };
            self.next += 1;
            let handle = format!("builtin-{}-{}", if intent { "pi" } else { "fd" }, self.next);
            match (value, att) {
                (Value::Fd(fd), _) => fd.handle = handle.clone(),
                (Value::PendingIntent(pi), Attachment::Intent(t)) => {
                    pi.handle = handle.clone();
                    pi.creator_package = Some(t.creator_package.clone());
                    pi.creator_uid = Some(i64::from(t.creator_uid));
                    pi.immutable = Some(t.immutable);
                    pi.activity = Some(t.activity);
                }
                _ => {}
            }
            self.held.insert(
                handle,
                Held {
                    app: app.clone(),
                    attachment: att.clone(),
                    origin: old,
                },
            );
        }
    }
}

impl SimPort {
    /// The Consumer let go of a descriptor (read to its end or closed): a
    /// scripted Provider tells its host (`fd_closed`), as the probe app's
    /// close listener does on a phone.
    fn released(&self, held: &Held) {
        if let (AppRef::Hosted(h), Attachment::File(_)) = (&held.app, &held.attachment) {
            h.fd_released(&held.origin, self.sim.now_ms());
        }
    }
}

fn port_error(e: cetp_wire::WireError) -> DeviceError {
    DeviceError::new(e.kind, e.message)
}

impl ConsumerPort for SimPort {
    fn now_ms(&mut self) -> i64 {
        self.sim.now_ms()
    }

    fn sleep_ms(&mut self, ms: u64) {
        self.sim.device().clock().advance(ms);
    }

    fn discover(&mut self) -> Result<Vec<ServiceManifest>, DeviceError> {
        Ok(self.sim.discover())
    }

    fn call(
        &mut self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let app = self.sim.app_for(authority).ok_or_else(|| {
            DeviceError::new(
                ErrorKind::UnknownAuthority,
                format!("no provider is installed for authority {authority:?}"),
            )
        })?;
        let call = ProviderCall {
            method: method.to_string(),
            arg: arg.map(str::to_string),
            extras: extras.cloned(),
        };
        let now = self.sim.now_ms();
        let reply = match &app {
            AppRef::Installed(a) => a.call(&self.caller, now, &call),
            AppRef::Hosted(h) => match h.call(&self.caller, now, &call) {
                Ok(r) => r,
                Err(e) => {
                    if e.kind == cetp_wire::ErrorKind::Timeout {
                        // The Consumer waited its whole timeout, in device time.
                        self.sim.device().clock().advance(timeout_ms);
                    }
                    return Err(port_error(e));
                }
            },
        };
        // The Consumer is another app: the Provider's exception crosses Binder.
        match crate::binder::cross(reply) {
            Reply::Threw { class, message } => Ok(CallAnswer::Threw { class, message }),
            // A phone's Binder carries no answer over its transaction limit
            // (the probe app's hosted Provider answers through two of
            // them); where the device plays the probe app's rules, neither
            // does this one (`hello`'s `binder_transaction_limit`).
            Reply::Result {
                bundle: Some(b), ..
            } if matches!(app, AppRef::Hosted(_))
                && self.sim.cfg.hosting.enforces_binder_limit()
                && cetp_proto::binder::exceeds_transaction_limit(&b) =>
            {
                Err(DeviceError::new(
                    ErrorKind::TransactionTooLarge,
                    format!(
                        "the scripted provider's answer is larger than one Binder transaction carries ({} bytes)",
                        cetp_proto::binder::TRANSACTION_LIMIT_BYTES
                    ),
                ))
            }
            Reply::Result {
                bundle,
                attachments,
            } => {
                let mut bundle = bundle;
                if let Some(b) = bundle.as_mut() {
                    self.adopt(b, &attachments, &app);
                }
                Ok(CallAnswer::Result(bundle))
            }
        }
    }

    fn read_fd(&mut self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        let held = self.held.remove(handle).ok_or_else(|| {
            DeviceError::new(ErrorKind::UnknownHandle, format!("no fd {handle:?}"))
        })?;
        // A read takes the descriptor to its end and closes it (probe-wire
        // `read_fd`).
        self.released(&held);
        let Attachment::File(src) = held.attachment else {
            return Err(DeviceError::new(
                ErrorKind::UnknownHandle,
                format!("{handle:?} is no fd"),
            ));
        };
        let limit = max_bytes.min(MAX_READ);
        let (bytes, eof) = match &src {
            FdSource::Bytes(b) => {
                let n = (b.len() as u64).min(limit) as usize;
                (b[..n].to_vec(), b.len() as u64 <= limit)
            }
            FdSource::Pattern { len, byte } => {
                let n = len.map_or(limit, |l| l.min(limit));
                (vec![*byte; n as usize], len.is_some_and(|l| l <= limit))
            }
        };
        Ok(FdRead {
            bytes,
            eof,
            error: None,
            writable: Some(false),
        })
    }

    fn close_fd(&mut self, handle: &str) -> Result<(), DeviceError> {
        let held = self.held.remove(handle).ok_or_else(|| {
            DeviceError::new(ErrorKind::UnknownHandle, format!("no fd {handle:?}"))
        })?;
        self.released(&held);
        Ok(())
    }

    fn resolve(&mut self, handle: &str, decision: Decision) -> Result<ResolveOutcome, DeviceError> {
        let held = self.held.remove(handle).ok_or_else(|| {
            DeviceError::new(ErrorKind::UnknownHandle, format!("no intent {handle:?}"))
        })?;
        let Attachment::Intent(target) = held.attachment else {
            return Err(DeviceError::new(
                ErrorKind::UnknownHandle,
                format!("{handle:?} is no intent"),
            ));
        };
        let target: IntentTarget = target;
        let now = self.sim.now_ms();
        match &held.app {
            AppRef::Installed(a) => Ok(launch_intent(
                a.as_ref(),
                &self.caller,
                &target,
                decision,
                now,
            )),
            AppRef::Hosted(h) => h
                .resolve(&self.caller, &target, decision, now)
                .map_err(port_error),
        }
    }
}
