//! Operations a run left running, followed to their end in real time on a
//! device whose clock cannot move (a phone, the JVM device, `cetp sim
//! --fixed-clock`).
//!
//! An operation a sequence was answered `accepted` for and did not see end
//! may finish, with its effect, inside a later sequence's effect window,
//! whose oracle starts afresh and expects nothing of it. Where the harness
//! can move the device clock it moves it past every job's end
//! ([`crate::Fuzzer`]'s quiesce). Where it cannot, the operations are asked
//! for by their owner (a fresh session of the same identity: §4.4 binds an
//! operation to the caller and its request id, not to a session), cancelled
//! once where the session grants `cancellation`, and polled at the
//! Provider's `poll_after_ms` until they end, for at most the run's
//! `--max-wait`. Only the sequence that starts while one is still open has
//! its effects left unjudged; effects stay judged for the rest of the run.

use crate::exec::run_case;
use cetp_vectors::device::Target;
use cetp_vectors::interp::Env;
use cetp_vectors::profile::Profile;
use cetp_vectors::template::{literal, Bindings};
use cetp_vectors::vector::Case;
use serde_json::{json, Value as Json};
use std::time::{Duration, Instant};

/// One operation a run was answered `accepted` for and did not see end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Open {
    /// The identity that started it (`a` or `b`).
    pub ident: String,
    /// The Provider's operation id.
    pub operation_id: String,
    /// The request id of the execution that created it (§4.1).
    pub request_id: String,
    /// A cancel was sent already.
    pub cancelled: bool,
}

/// The longest pause between two polls: a Provider's `poll_after_ms` is
/// advice, and a long one must not hold the run past its budget.
const MAX_PAUSE_MS: u64 = 1_000;

/// The operations `steps` (as the target ran them, sub-steps of
/// `concurrent` included) were answered `accepted` for and whose end no
/// later answer of the run `bindings` shows.
pub fn left_open(steps: &[Json], bindings: &Bindings) -> Vec<Open> {
    let mut flat: Vec<&Json> = Vec::new();
    for s in steps {
        flat.push(s);
        if let Some(sub) = s.get("steps").and_then(Json::as_array) {
            flat.extend(sub);
        }
    }
    let mut open: Vec<Open> = Vec::new();
    let mut ended: Vec<String> = Vec::new();
    for s in flat {
        let Some(doc) = s
            .get("bind")
            .and_then(Json::as_str)
            .and_then(|b| bindings.get(b))
        else {
            continue;
        };
        let Some((id, state)) = crate::oracle::operation_in(doc) else {
            continue;
        };
        if doc.get("status").and_then(Json::as_str) == Some("accepted") {
            let request_id = doc
                .pointer("/_request/request_id")
                .and_then(Json::as_str)
                .unwrap_or_default();
            if !request_id.is_empty() && !open.iter().any(|o| o.operation_id == id) {
                open.push(Open {
                    ident: s
                        .get("as")
                        .and_then(Json::as_str)
                        .unwrap_or("a")
                        .to_string(),
                    operation_id: id.to_string(),
                    request_id: request_id.to_string(),
                    cancelled: false,
                });
            }
        } else if matches!(state, Some("succeeded" | "failed" | "cancelled")) {
            ended.push(id.to_string());
        }
    }
    open.retain(|o| !ended.contains(&o.operation_id));
    open
}

/// Asks for each of `open` once (cancelling it first where its owner's
/// session grants `cancellation`), and keeps those not yet ended. An
/// operation the Provider no longer answers for (refused, expired) is
/// taken as ended: nothing more can be learned of it.
fn poll_once(
    target: &Target,
    profile: &Profile,
    env: &Env,
    open: &mut Vec<Open>,
    seed: u64,
) -> Option<u64> {
    let mut pause: Option<u64> = None;
    let mut still = Vec::new();
    for (k, o) in open.drain(..).enumerate() {
        if o.ident == "b" && target.b.is_none() {
            continue;
        }
        let mut steps = vec![json!({"do": "negotiate", "as": o.ident, "bind": "s"})];
        let call = |method: &str, bind: &str| {
            json!({"do": "call", "as": o.ident, "method": method, "session": "s",
                   "request_id": literal(&o.request_id), "operation_id": literal(&o.operation_id),
                   "bind": bind, "requirements": []})
        };
        if !o.cancelled {
            steps.push(call("cancel_operation", "c"));
        }
        steps.push(call("get_operation", "g"));
        let case = json!({"id": "FUZZ-SETTLE", "title": "follow an operation to its end",
                          "role": "provider", "level": "MUST", "requirements": [],
                          "identities": if o.ident == "b" { json!(["a", "b"]) } else { json!(["a"]) },
                          "steps": steps});
        let Ok(case) = serde_json::from_value::<Case>(case) else {
            continue;
        };
        let seed = seed.wrapping_add(k as u64);
        let run = run_case(target, profile, env, &Default::default(), &case, seed);
        let Some(g) = run.bindings.get("g") else {
            // Not even asked (the device failed): try again next time.
            still.push(o);
            continue;
        };
        let state = g.pointer("/data/state").and_then(Json::as_str);
        let running = g.get("status").and_then(Json::as_str) == Some("success")
            && matches!(state, Some("pending" | "running"));
        if running {
            let after = g
                .pointer("/data/poll_after_ms")
                .and_then(Json::as_u64)
                .unwrap_or(250);
            pause = Some(pause.map_or(after, |p| p.min(after)));
            still.push(Open {
                cancelled: true,
                ..o
            });
        }
    }
    *open = still;
    pause
}

/// Follows `open` to their end in real time, for at most `max_wait`:
/// what is left is still running.
pub fn settle(
    target: &Target,
    profile: &Profile,
    env: &Env,
    open: &mut Vec<Open>,
    max_wait: Duration,
    seed: u64,
) {
    let started = Instant::now();
    let mut round = 0u64;
    while !open.is_empty() {
        let pause = poll_once(target, profile, env, open, seed.wrapping_add(round << 16));
        round += 1;
        let left = max_wait.saturating_sub(started.elapsed());
        if open.is_empty() || left.is_zero() {
            return;
        }
        let pause = Duration::from_millis(pause.unwrap_or(250).clamp(10, MAX_PAUSE_MS)).min(left);
        target.a.sleep_ms(pause.as_millis() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An accepted execution is open until a later answer shows its end;
    /// one seen ended, or never accepted, is not.
    #[test]
    fn an_operation_is_open_until_an_answer_shows_its_end() {
        let steps = vec![
            json!({"do": "call", "as": "b", "bind": "e"}),
            json!({"do": "call", "as": "a", "bind": "f"}),
            json!({"do": "concurrent", "steps": [{"do": "call", "as": "a", "bind": "g"}]}),
            json!({"do": "poll", "as": "a", "bind": "h"}),
        ];
        let accepted = |op: &str, rid: &str| {
            json!({"status": "accepted", "data": {"operation_id": op},
                   "_request": {"request_id": rid}})
        };
        let mut bindings = Bindings::new();
        bindings.insert("e".into(), accepted("op-1", "r1"));
        bindings.insert("f".into(), json!({"status": "success", "data": {}}));
        bindings.insert("g".into(), accepted("op-2", "r2"));
        bindings.insert(
            "h".into(),
            json!({"status": "success", "data": {"operation_id": "op-2", "state": "succeeded"}}),
        );
        let open = left_open(&steps, &bindings);
        assert_eq!(
            open,
            vec![Open {
                ident: "b".into(),
                operation_id: "op-1".into(),
                request_id: "r1".into(),
                cancelled: false,
            }]
        );
    }
}
