//! How a run is configured, besides its target and profile: what the
//! command line gives the runner, the lock target, the pin and the
//! partitions alike.

use cetp_vectors::interp::DEFAULT_MAX_WAIT_MS;
use cetp_vectors::suite::Baseline;

/// How a run is configured (from the command line), besides target and profile.
#[derive(Clone, Debug, Default)]
pub struct RunConfig {
    /// Seed of every generated request id and value; with `started_at_ms`, it
    /// replays the run.
    pub seed: u64,
    /// Attempts per case that does not pass (1 = no retry).
    pub attempts: u32,
    /// Case id patterns (`*` wildcards); empty = all.
    pub only: Vec<String>,
    /// Case id patterns (`*` wildcards) not to run.
    pub skip: Vec<String>,
    /// Known failures accepted, with their reasons.
    pub baseline: Option<Baseline>,
    /// Included in the config hash: the harness version and anything else
    /// that changes behaviour.
    pub harness_version: String,
    /// Wall clock at start (Unix ms), passed in so runs are reproducible in
    /// tests.
    pub started_at_ms: i64,
    /// A contract lock to hold the target to: adds `LOCK-001`.
    pub lock: Option<cetp_contract::Lock>,
    /// Bounds the whole run (`--run-timeout`): no step starts after it, and
    /// the cases left are INFRA_ERROR.
    pub run_timeout: Option<std::time::Duration>,
    /// Set from outside (Ctrl-C) to stop the run at the next step
    /// boundary; the cases left are INFRA_ERROR and the run can be resumed
    /// from its journal.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// SHA-256 of each Provider APK the target installs before the run
    /// (`adb:…,install=`), pinned: the build under test when it is known.
    pub provider_apks: Vec<String>,
    /// The longest real-time wait for device time on a device whose clock
    /// cannot move (`--max-wait`; `None`: [`DEFAULT_MAX_WAIT_MS`]).
    pub max_wait: Option<std::time::Duration>,
    /// `--partition`: run only this part of the selection ([`crate::partition`]).
    pub partition: Option<crate::partition::Partition>,
    /// The flags besides `--target` and `--seed` that rerun one case as
    /// this run runs it (`--target-b B`, `--profile P`), for the reproduce
    /// lines (`Event::RunStarted::rerun`).
    pub rerun: Vec<String>,
}

impl RunConfig {
    /// `--max-wait` in ms.
    pub fn max_wait_ms(&self) -> u64 {
        self.max_wait.map_or(DEFAULT_MAX_WAIT_MS, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
        })
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}
