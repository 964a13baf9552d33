//! Pause points, for crash tests: the harness stops dead at a chosen
//! exchange so that a test can kill it there and resume the run.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where the harness stops dead, for crash tests: `before:OP:N` (the Nth
/// live OP's send record is written, the request not yet sent) or
/// `after:OP:N` (its answer is back, not yet journaled). OP is a `call`'s
/// method (`execute_tool`, `negotiate`, ...), a device op (`resolve`,
/// `read_fd`, `restart_provider`, `advance_clock`, ...) or `any`. The
/// harness prints one line to stderr and waits to be killed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PausePoint {
    /// `after` (the answer is back) rather than `before` (the request not yet sent).
    pub after: bool,
    /// The op or method paused at, or `any`.
    pub op: String,
    /// Which live occurrence of it (1-based).
    pub nth: u64,
}

impl PausePoint {
    /// Parses `before|after:OP:N`.
    pub fn parse(s: &str) -> Result<PausePoint, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || format!("pause point {s:?}: expected before|after:OP:N");
        let [when, op, n] = parts.as_slice() else {
            return Err(bad());
        };
        let after = match *when {
            "before" => false,
            "after" => true,
            _ => return Err(bad()),
        };
        let nth: u64 = n.parse().map_err(|_| bad())?;
        if nth == 0 || op.is_empty() {
            return Err(bad());
        }
        Ok(PausePoint {
            after,
            op: op.to_string(),
            nth,
        })
    }
}

/// A pause point armed for one run: counts the exchanges it matches.
#[derive(Default)]
pub(crate) struct Pauser {
    point: Option<PausePoint>,
    seen: AtomicU64,
}

impl Pauser {
    pub(crate) fn new(point: Option<PausePoint>) -> Pauser {
        Pauser {
            point,
            seen: AtomicU64::new(0),
        }
    }

    /// Parks the thread for good at the armed point; the crash test kills
    /// the process there, as a power cut would.
    pub(crate) fn pause_if(&self, after: bool, op: &str) {
        let Some(p) = &self.point else { return };
        if p.after != after || (p.op != op && p.op != "any") {
            return;
        }
        let seen = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if seen == p.nth {
            eprintln!(
                "cetp: paused {} {op} #{seen} (CETP_PAUSE_AT); waiting to be killed",
                if after { "after" } else { "before" }
            );
            loop {
                std::thread::park();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_points_parse() {
        assert_eq!(
            PausePoint::parse("before:execute_tool:3"),
            Ok(PausePoint {
                after: false,
                op: "execute_tool".into(),
                nth: 3
            })
        );
        assert!(PausePoint::parse("during:x:1").is_err());
        assert!(PausePoint::parse("after:x:0").is_err());
        assert!(PausePoint::parse("after:x").is_err());
    }

    #[test]
    fn only_the_armed_op_counts() {
        let p = Pauser::new(PausePoint::parse("after:read_fd:2").ok());
        // Neither of these can park: the wrong side, another op.
        p.pause_if(false, "read_fd");
        p.pause_if(true, "call");
        p.pause_if(true, "read_fd");
        assert_eq!(p.seen.load(Ordering::SeqCst), 1);
    }
}
