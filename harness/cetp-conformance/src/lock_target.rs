//! The contract lock against a target: read the descriptors a lock is made
//! of, record a lock, compare a live Provider with one, and the run's
//! `LOCK-001` case (the §3.3 revision rule across two releases). The lock
//! format and every classification are `cetp-contract`'s; this module only
//! talks to the device.

use crate::config::{wildcard, RunConfig};
use crate::dispatch::{CaseInfo, Dispatcher, Executed};
use crate::identify::identify;
use crate::stats::CaseOutcome;
use cetp_contract::drift::{diff, diff_tools, revision_rule, Class, DriftReport};
use cetp_contract::lock::{build, Answers, Built, Lock};
use cetp_proto::device::CallAnswer;
use cetp_proto::envelope::{Capability, Common, NegotiateRequest, Response};
use cetp_vectors::device::{Device, DeviceError, Fault, Target};
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::interp::Env;
use cetp_vectors::profile::Profile;
use serde_json::Value as Json;

pub use cetp_vectors::suite::LOCK_CASE_ID;
/// Title of the contract lock case.
pub const LOCK_CASE_TITLE: &str =
    "The contract differs from the lock only under a new revision (§3.3)";
/// §3.3: revision changes whenever the tool set, a schema or a tool's
/// safety semantics change.
pub const LOCK_REQUIREMENT: &str = "CETP2-3.3-03";

const CALL_TIMEOUT_MS: u64 = 10_000;
const DEADLINE_MS: i64 = 30_000;

/// Why the descriptors could not be read, by who is at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchError {
    /// The device, adb or the transport: never charged to the Provider.
    Infra(String),
    /// The Provider did not answer what the spec requires.
    Provider(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Infra(m) | FetchError::Provider(m) => f.write_str(m),
        }
    }
}

impl From<DeviceError> for FetchError {
    fn from(e: DeviceError) -> Self {
        match e.fault() {
            Fault::Infra => FetchError::Infra(e.to_string()),
            Fault::Provider => FetchError::Provider(e.to_string()),
        }
    }
}

/// Every optional capability: a lock records what the Provider grants when
/// offered all of them, so two locks of one Provider are taken alike.
pub fn offered() -> Vec<String> {
    Capability::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect()
}

fn success_data(method: &str, answer: CallAnswer) -> Result<Json, FetchError> {
    let bundle = match answer {
        CallAnswer::Result(Some(b)) => b,
        CallAnswer::Result(None) => {
            return Err(FetchError::Provider(format!("{method} answered null")))
        }
        CallAnswer::Threw { class, message } => {
            return Err(FetchError::Provider(format!(
                "{method} threw {class}: {message}"
            )))
        }
    };
    match Response::from_bundle(&bundle) {
        Ok(Response::Success { data, .. }) => Ok(data),
        Ok(Response::Error(e)) => Err(FetchError::Provider(format!(
            "{method} answered {}: {}",
            e.code, e.message
        ))),
        Ok(other) => Err(FetchError::Provider(format!(
            "{method} answered status {:?}",
            other.status()
        ))),
        Err(e) => Err(FetchError::Provider(format!(
            "{method} answered a malformed Bundle: {e}"
        ))),
    }
}

/// Negotiates (version 2, every capability offered), then reads
/// `list_tools` and, when `provider_info`, `get_provider_info`.
pub fn fetch(
    device: &dyn Device,
    authority: &str,
    provider_info: bool,
) -> Result<Answers, FetchError> {
    let offer = NegotiateRequest {
        consumer_versions: vec![2],
        consumer_capabilities: offered(),
    }
    .to_bundle();
    let negotiate = success_data(
        "negotiate",
        device.call(authority, "negotiate", None, Some(&offer), CALL_TIMEOUT_MS)?,
    )?;
    let token = negotiate
        .get("session_token")
        .and_then(Json::as_str)
        .ok_or_else(|| FetchError::Provider("negotiate answered no session_token".into()))?
        .to_string();
    let read = |method: &str| -> Result<Json, FetchError> {
        let extras = Common {
            session_token: token.clone(),
            request_id: uuid::Uuid::new_v4().to_string(),
            deadline_at_ms: device.now_ms() + DEADLINE_MS,
        }
        .to_bundle();
        success_data(
            method,
            device.call(authority, method, None, Some(&extras), CALL_TIMEOUT_MS)?,
        )
    };
    let provider_info = if provider_info {
        Some(read("get_provider_info")?)
    } else {
        None
    };
    let list_tools = read("list_tools")?;
    Ok(Answers {
        negotiate,
        provider_info,
        list_tools,
    })
}

/// Identifies the Provider the way a run does (`[target]` of the profile,
/// or the only one discovered) and builds its lock.
pub fn record(target: &Target, profile: &Profile) -> Result<Built, FetchError> {
    let (_, env) = identify(target, profile).map_err(FetchError::Infra)?;
    let answers = fetch(target.a.as_ref(), &env.authority, true)?;
    Ok(build(&answers, &offered(), Some(&env.package)))
}

/// Compares the target's current contract with `lock`; what breaks the spec
/// in the current answers is added as violations.
pub fn drift(target: &Target, profile: &Profile, lock: &Lock) -> Result<DriftReport, FetchError> {
    let built = record(target, profile)?;
    let mut report = diff(lock, &built.lock);
    report.add_problems(&built.problems);
    Ok(report)
}

/// Whether `LOCK-001` is in a run's selection (`--only`, `--skip`).
pub fn selected(cfg: &RunConfig) -> bool {
    (cfg.only.is_empty() || cfg.only.iter().any(|p| wildcard(p, LOCK_CASE_ID)))
        && !cfg.skip.iter().any(|p| wildcard(p, LOCK_CASE_ID))
        && cfg.partition.is_none_or(|p| p.runs_lock_case())
}

/// `LOCK-001`: FAIL when a tool's schemas or safety semantics differ from
/// the lock while `revision` is the lock's. Drift under a new revision is
/// what §3.3 asks for, and passes.
pub fn lock_case(target: &Target, env: &Env, lock: &Lock) -> (Verdict, String) {
    if !env.declares_v2() {
        return (
            Verdict::NotApplicable,
            "the Provider does not declare v2: it has no revision".into(),
        );
    }
    let answers = match fetch(target.a.as_ref(), &env.authority, false) {
        Ok(a) => a,
        Err(FetchError::Infra(m)) => return (Verdict::InfraError, m),
        Err(FetchError::Provider(m)) => {
            return (
                Verdict::Fail,
                format!("cannot read the tool list to hold it to the lock: {m}"),
            )
        }
    };
    let current = build(&answers, &offered(), Some(&env.package)).lock;
    if current.provider_id != lock.provider_id {
        return (
            Verdict::NotApplicable,
            format!(
                "the lock is of provider_id {:?}, the target is {:?}",
                lock.provider_id, current.provider_id
            ),
        );
    }
    let findings = diff_tools(&lock.tools, &current.tools, &lock.schema_dialect);
    let violations = revision_rule(&lock.revision, &current.revision, &findings);
    if violations.is_empty() {
        let drifted = |c: Class| findings.iter().filter(|f| f.class == c).count();
        let reason = if findings.is_empty() {
            String::new()
        } else {
            format!(
                "the contract drifted under a new revision {:?} ({} breaking, {} compatible difference(s)): §3.3 is kept",
                current.revision,
                drifted(Class::Breaking),
                drifted(Class::Compatible)
            )
        };
        return (Verdict::Pass, reason);
    }
    let mut shown: Vec<String> = Vec::new();
    for v in &violations {
        let tool = v.tool.as_deref();
        let first = findings
            .iter()
            .find(|f| f.tool.as_deref() == tool && f.revision_bound);
        if let Some(f) = first {
            shown.push(format!(
                "{} {}: {}",
                tool.unwrap_or_default(),
                f.pointer,
                f.message
            ));
        }
    }
    (
        Verdict::Fail,
        format!(
            "revision {:?} is the lock's, but the contract of {} tool(s) changed: {}",
            current.revision,
            violations.len(),
            shown.join("; ")
        ),
    )
}

/// `LOCK-001` as the dispatcher reports it.
pub fn lock_case_info() -> CaseInfo {
    CaseInfo {
        id: LOCK_CASE_ID.into(),
        title: LOCK_CASE_TITLE.into(),
        requirements: vec![LOCK_REQUIREMENT.into()],
        needs: Vec::new(),
        device: None,
    }
}

/// `LOCK-001`'s executor: a FAIL cites the §3.3 revision rule.
pub fn lock_executed(target: &Target, env: &Env, lock: &Lock) -> Executed {
    let (verdict, reason) = lock_case(target, env, lock);
    let mut e = Executed::new(verdict, reason);
    if verdict == Verdict::Fail {
        e.cited = vec![LOCK_REQUIREMENT.into()];
    }
    e
}

/// Runs `LOCK-001` on its own, outside a run's dispatcher: its events, and
/// its outcome with the baseline applied as for any case.
pub fn run_lock_case(
    target: &Target,
    env: &Env,
    lock: &Lock,
    cfg: &RunConfig,
    out: &mut Fanout,
) -> CaseOutcome {
    let mut d = Dispatcher::new(out, cfg.baseline.as_ref());
    d.run_case(lock_case_info(), |_| lock_executed(target, env, lock));
    let mut stats = d.into_stats();
    stats.cases.remove(0)
}
