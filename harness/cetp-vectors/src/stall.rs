//! A Provider that stops answering: stop paying the wait again.
//!
//! Every call waits up to [`crate::interp::CALL_TIMEOUT_MS`] for its answer.
//! A Provider whose tool hangs would make every case that uses the tool pay
//! that wait, one after another (a run of half an hour of INFRA_ERRORs that
//! each say "timeout"). [`Stalls`] counts consecutive call timeouts per tool
//! (per method for the other methods) and for the Provider as a whole; once
//! one of them reaches its threshold, the calls it covers fail at once with
//! an INFRA_ERROR that says so, and the cases that do not need that tool go
//! on. Any answer from the tool (a success or an error envelope, a throw)
//! clears its count; a restart of the Provider clears all of them, since a
//! new process may answer again.
//!
//! A stalled call is never a Provider FAIL here. §4.1 binds the Provider to
//! check `deadline_at_ms` before it starts a side effect; no clause requires
//! it to answer by then, so a missing answer judges nothing.

use crate::device::DeviceError;
use cetp_proto::device::ErrorKind;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

/// Consecutive timeouts of one tool after which its calls stop waiting.
pub const TOOL_TIMEOUTS: u32 = 3;
/// Consecutive timeouts, whatever the tool, after which every call stops
/// waiting.
pub const PROVIDER_TIMEOUTS: u32 = 6;

#[derive(Default)]
struct Count {
    timeouts: u32,
    since: Option<SystemTime>,
}

impl Count {
    fn hit(&mut self) {
        if self.timeouts == 0 {
            self.since = Some(SystemTime::now());
        }
        self.timeouts += 1;
    }
}

#[derive(Default)]
struct State {
    tools: BTreeMap<String, Count>,
    provider: Count,
}

/// The run's record of consecutive call timeouts. Shared by the cases of one
/// run; safe to use from the threads of concurrent calls.
#[derive(Default)]
pub struct Stalls {
    state: Mutex<State>,
}

impl Stalls {
    /// An empty record.
    pub fn new() -> Self {
        Stalls::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Some(reason)` when calls of `tool` should not be sent: the Provider
    /// stopped answering it, or stopped answering altogether.
    pub fn blocked(&self, tool: &str) -> Option<String> {
        let s = self.lock();
        if s.provider.timeouts >= PROVIDER_TIMEOUTS {
            return Some(format!(
                "the Provider stopped answering ({} call timeouts in a row since {}); calls are no longer sent",
                s.provider.timeouts,
                stamp(s.provider.since)
            ));
        }
        match s.tools.get(tool) {
            Some(c) if c.timeouts >= TOOL_TIMEOUTS => Some(format!(
                "the Provider stopped answering `{tool}` ({} timeouts since {}); its calls are no longer sent",
                c.timeouts,
                stamp(c.since)
            )),
            _ => None,
        }
    }

    /// `Some(reason)` once the Provider stopped answering altogether (not
    /// one tool): a device that shares a run then hands its cases over.
    pub fn provider_stalled(&self) -> Option<String> {
        let s = self.lock();
        (s.provider.timeouts >= PROVIDER_TIMEOUTS).then(|| {
            format!(
                "the Provider stopped answering ({} call timeouts in a row since {})",
                s.provider.timeouts,
                stamp(s.provider.since)
            )
        })
    }

    /// Records how a call of `tool` ended.
    pub fn record<T>(&self, tool: &str, result: &Result<T, DeviceError>) {
        let mut s = self.lock();
        match result {
            Err(e) if e.kind == ErrorKind::Timeout => {
                s.provider.hit();
                s.tools.entry(tool.to_string()).or_default().hit();
            }
            // The transport or device broke: says nothing of the Provider.
            Err(e) if e.fault() == crate::device::Fault::Infra => {}
            // An answer, or a Binder-level failure of the Provider: it is
            // not hanging.
            _ => {
                s.provider = Count::default();
                s.tools.remove(tool);
            }
        }
    }

    /// The Provider's process was restarted: a new one may answer.
    pub fn restarted(&self) {
        *self.lock() = State::default();
    }
}

/// UTC time of day, for the reason a blocked call gives.
fn stamp(t: Option<SystemTime>) -> String {
    let Some(t) = t else {
        return "?".into();
    };
    let dt: chrono::DateTime<chrono::Utc> = t.into();
    dt.format("%H:%M:%S UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout() -> Result<(), DeviceError> {
        Err(DeviceError::new(
            ErrorKind::Timeout,
            "no answer within 10000 ms",
        ))
    }

    #[test]
    fn a_tool_is_blocked_after_its_consecutive_timeouts_and_cleared_by_an_answer() {
        let s = Stalls::new();
        for _ in 0..TOOL_TIMEOUTS - 1 {
            s.record("get_quote", &timeout());
        }
        assert!(s.blocked("get_quote").is_none());
        s.record("get_quote", &timeout());
        let why = s.blocked("get_quote").expect("blocked");
        assert!(why.contains("`get_quote` (3 timeouts since"), "{why}");
        // Another tool still goes out.
        assert!(s.blocked("list_alerts").is_none());
        s.record("get_quote", &Ok(()));
        assert!(s.blocked("get_quote").is_none());
    }

    #[test]
    fn the_provider_is_blocked_after_timeouts_across_tools() {
        let s = Stalls::new();
        for i in 0..PROVIDER_TIMEOUTS {
            s.record(&format!("tool{}", i % 2 + 10 * i), &timeout());
        }
        let why = s.blocked("anything").expect("blocked");
        assert!(why.contains("stopped answering (6 call timeouts"), "{why}");
        s.restarted();
        assert!(s.blocked("anything").is_none());
    }

    #[test]
    fn transport_failures_neither_count_nor_clear() {
        let s = Stalls::new();
        s.record("t", &timeout());
        s.record("t", &timeout());
        s.record::<()>(
            "t",
            &Err(DeviceError::new(ErrorKind::ConnectionClosed, "gone")),
        );
        s.record("t", &timeout());
        assert!(s.blocked("t").is_some());
        // A Provider that died answered, in its way: not a hang.
        s.record::<()>("t", &Err(DeviceError::new(ErrorKind::ProviderDied, "dead")));
        assert!(s.blocked("t").is_none());
    }
}
