//! Judgements of a Consumer's observable behaviour: the calls it made (with
//! their fields, request ids and device times), the descriptors it read and
//! closed, the confirmations it launched, and the outcome of every act.

use super::hostile::{CallRecord, IssuedIntent};
use super::port::{FdTrace, ResolveRecord};
use super::scenario::{
    CallCount, CallFilter, CallGap, ConsumerCheck, DecoyCalls, Expect, OutcomeIs, ReadCap,
};
use cetp_proto::envelope::{is_uuid, keys};
use cetp_proto::Value;
use cetp_reference::consumer::ActOutcome;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// Every check a scenario may name, with what it judges.
pub const CHECKS: &[(&str, &str)] = &[
    ("negotiate_first", "no v2 call but negotiate before a negotiation of the same Consumer life"),
    ("negotiate_request", "consumer_versions an int[] in descending order, consumer_capabilities a JSON text of a string array"),
    ("protocol_version_int", "every v2 call but negotiate carries protocol_version as Int 2"),
    ("current_token", "every v2 call carries the session token the Provider holds valid, never a dead or superseded one"),
    ("request_id_uuid", "every v2 call but negotiate carries a UUID request_id"),
    ("fresh_read_ids", "a new read of `method` (after an answered one) carries a new request_id"),
    ("deadline_absolute", "deadline_at_ms is a Long, an epoch time after the call and within a day"),
    ("same_request_id", "all calls of `method` (and `tool`) carry one request_id"),
    ("calls", "the number of calls of `method` (`tool`, `act`, `v1`) is `count` / within `min`..`max`"),
    ("retry_waited", "consecutive calls of `method` (`tool`) are at least `ms` of device time apart"),
    ("no_v1", "no v1 call (a call without protocol_version) reaches the Provider"),
    ("no_calls", "the Consumer makes no call to the Provider at all"),
    ("list_after_negotiate", "every renegotiation is followed by a v2 list_tools before the act that made it ends in success"),
    ("outcome", "act `act` ends in one of the outcomes `is` (with `code`)"),
    ("no_crash", "no act ends in `crashed`"),
    ("only_asked_tools", "execute_tool is called only for tools an act asked for"),
    ("no_decoy_calls", "no call of `method` (default: any) reached the decoy Provider unless an act named it"),
    ("fds_closed", "every descriptor handed to the Consumer is read or closed (in-process; over the wire, closed as the device reports with `fd_closed`)"),
    ("read_bounded", "no descriptor read asks for more than `max_bytes` (in-process only)"),
    ("resolved_before_resume", "a call carrying a resume_token comes after the resolution issued with it was launched"),
    ("no_unnegotiated", "no operation method (get_operation, cancel_operation) unless its capability was granted"),
    ("polled_after_cancel", "every answered cancel_operation is followed by a get_operation of the same operation (§4.4: a cancel request is not an end)"),
];

/// What an act of the scenario was and what came of it.
#[derive(Clone, Debug)]
pub struct ActRecord {
    /// The act as the scenario gave it (`consumer_act` shape).
    pub action: Json,
    /// None for harness-side acts (`advance_clock`).
    pub outcome: Option<ActOutcome>,
}

/// Everything observed in one scenario run.
pub struct Trace<'a> {
    /// Every call the hostile Provider received, in order.
    pub calls: &'a [CallRecord],
    /// Every act and how it ended.
    pub acts: &'a [ActRecord],
    /// Every PendingIntent the Provider issued.
    pub intents: &'a [IssuedIntent],
    /// Descriptors and resolutions, when the harness could see them.
    pub fds: Option<&'a BTreeMap<String, FdTrace>>,
    /// Every confirmation the Consumer launched, when the harness could see them.
    pub resolves: Option<&'a [ResolveRecord]>,
    /// Calls that reached the decoy Provider, and the acts that named it.
    pub decoy_calls: &'a [CallRecord],
    /// Over the probe wire, where `fds` is not visible: each descriptor a
    /// reply handed out (by the call's id) and how the device saw the
    /// Consumer let go of it (`fd_closed`'s `how`; `None`: not by the end
    /// of the wait). `None` when the device does not report closes.
    pub fd_closes: Option<&'a BTreeMap<String, Option<String>>>,
}

/// The result of one expectation.
#[derive(Clone, Debug, PartialEq)]
pub enum Judged {
    /// The expectation held.
    Pass,
    /// The expectation broke, with what was seen.
    Broken(String),
    /// This target cannot judge the expectation, with why.
    NotJudged(String),
    /// The target cannot see what the expectation looks at (a device
    /// ability, not the Consumer's choice): the scenario may still pass on
    /// its other expectations, but the Consumer claim is not established
    /// on it (design: what a device cannot play is never passed).
    Unseen {
        /// What is not visible.
        why: String,
        /// The device ability that would judge it, as the claim names it.
        needs: &'static str,
    },
}

/// What judges a descriptor's close over the wire (`fd_closed`).
pub const NEEDS_CLOSES: &str = "a device that reports the Consumer's descriptor closes (fd_closed: the probe app, the JVM device, cetp sim)";
/// What judges a descriptor's reads. No device shows them, so no command
/// judges a vendor's Consumer on them: the claim says so rather than
/// suggest one.
pub const NEEDS_READS: &str =
    "a target that shows the Consumer's descriptor reads (no device does; only the in-process reference Consumer of --target sim is seen reading)";
/// What judges a confirmation's launch.
pub const NEEDS_RESOLVES: &str =
    "a device that reports the Consumer's launches (intent_launched: the probe app, the JVM device, cetp sim)";

fn first(mut problems: Vec<String>) -> Judged {
    if problems.is_empty() {
        return Judged::Pass;
    }
    let more = problems.len().saturating_sub(3);
    problems.truncate(3);
    let mut msg = problems.join("; ");
    if more > 0 {
        msg.push_str(&format!(" (and {more} more)"));
    }
    Judged::Broken(msg)
}

fn label(i: usize, c: &CallRecord) -> String {
    format!("call #{} ({} in act {})", i + 1, c.method, c.act)
}

fn selected<'a>(t: &'a Trace<'_>, on: &CallFilter) -> Vec<(usize, &'a CallRecord)> {
    t.calls
        .iter()
        .enumerate()
        .filter(|(_, c)| on.method.as_ref().is_none_or(|m| c.method == *m))
        .filter(|(_, c)| {
            on.tool
                .as_ref()
                .is_none_or(|x| c.tool().as_ref() == Some(x))
        })
        .filter(|(_, c)| on.act.is_none_or(|a| c.act as u64 == a))
        .filter(|(_, c)| on.v1.is_none_or(|w| c.is_v1() == w))
        .collect()
}

/// Judges one expectation against a trace.
pub fn judge(t: &Trace<'_>, e: &Expect) -> Judged {
    match &e.check {
        ConsumerCheck::NegotiateFirst {} => negotiate_first(t),
        ConsumerCheck::NegotiateRequest {} => negotiate_request(t),
        ConsumerCheck::ProtocolVersionInt {} => protocol_version_int(t),
        ConsumerCheck::CurrentToken(on) => current_token(t, on),
        ConsumerCheck::RequestIdUuid {} => request_id_uuid(t),
        ConsumerCheck::FreshReadIds(on) => fresh_read_ids(t, on),
        ConsumerCheck::DeadlineAbsolute {} => deadline_absolute(t),
        ConsumerCheck::SameRequestId(on) => same_request_id(t, on),
        ConsumerCheck::Calls(n) => calls(t, n),
        ConsumerCheck::RetryWaited(gap) => retry_waited(t, gap),
        ConsumerCheck::NoV1 {} => no_v1(t),
        ConsumerCheck::NoCalls {} => no_calls(t),
        ConsumerCheck::ListAfterNegotiate {} => list_after_negotiate(t),
        ConsumerCheck::Outcome(want) => outcome(t, want),
        ConsumerCheck::NoCrash {} => no_crash(t),
        ConsumerCheck::OnlyAskedTools {} => only_asked_tools(t),
        ConsumerCheck::NoDecoyCalls(d) => no_decoy_calls(t, d),
        ConsumerCheck::FdsClosed {} => fds_closed(t),
        ConsumerCheck::ReadBounded(cap) => read_bounded(t, cap),
        ConsumerCheck::ResolvedBeforeResume {} => resolved_before_resume(t),
        ConsumerCheck::NoUnnegotiated {} => no_unnegotiated(t),
        ConsumerCheck::PolledAfterCancel {} => polled_after_cancel(t),
    }
}

fn negotiate_first(t: &Trace<'_>) -> Judged {
    let mut negotiated: BTreeSet<u32> = BTreeSet::new();
    let mut bad = Vec::new();
    for (i, c) in t.calls.iter().enumerate() {
        if c.method == "negotiate" {
            negotiated.insert(c.life);
        } else if c.is_v2_common() && !negotiated.contains(&c.life) {
            bad.push(format!("{} came before any negotiate", label(i, c)));
        }
    }
    first(bad)
}

fn negotiate_request(t: &Trace<'_>) -> Judged {
    let mut bad = Vec::new();
    for (i, c) in t
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.method == "negotiate")
    {
        match c.extras.get(keys::CONSUMER_VERSIONS) {
            Some(Value::IntArray(v)) if v.windows(2).all(|w| w[0] > w[1]) && !v.is_empty() => {}
            Some(Value::IntArray(v)) => bad.push(format!(
                "{}: consumer_versions {v:?} is not in descending order",
                label(i, c)
            )),
            other => bad.push(format!(
                "{}: consumer_versions is {}, not an int[]",
                label(i, c),
                other.map_or("absent", Value::type_tag)
            )),
        }
        match c.extras.get(keys::CONSUMER_CAPABILITIES) {
            Some(Value::String(s)) if serde_json::from_str::<Vec<String>>(s).is_ok() => {}
            other => bad.push(format!(
                "{}: consumer_capabilities is {}, not a String holding a JSON array of strings",
                label(i, c),
                other.map_or("absent", Value::type_tag)
            )),
        }
    }
    first(bad)
}

/// The envelope every v2 request but negotiate carries (§4.1), judged on
/// every scenario: (check, requirement, judgement). A scenario that names
/// one of these checks judges it itself.
pub fn envelope(t: &Trace<'_>) -> [(&'static str, &'static str, Judged); 4] {
    [
        (
            "protocol_version_int",
            "CETP2-4.1-01",
            protocol_version_int(t),
        ),
        (
            "session_token_present",
            "CETP2-4.1-02",
            session_token_present(t),
        ),
        ("request_id_uuid", "CETP2-4.1-03", request_id_uuid(t)),
        ("deadline_absolute", "CETP2-4.1-04", deadline_absolute(t)),
    ]
}

/// A session_token String on every v2 request after a negotiation (which
/// token is current is `current_token`'s).
fn session_token_present(t: &Trace<'_>) -> Judged {
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_v2_common())
            .filter(|(_, c)| {
                t.calls
                    .iter()
                    .any(|o| o.method == "negotiate" && o.life == c.life)
            })
            .filter(|(_, c)| !matches!(c.extras.get(keys::SESSION_TOKEN), Some(Value::String(_))))
            .map(|(i, c)| {
                format!(
                    "{}: session_token is {}, not a String",
                    label(i, c),
                    c.extras
                        .get(keys::SESSION_TOKEN)
                        .map_or("absent", Value::type_tag)
                )
            })
            .collect(),
    )
}

fn protocol_version_int(t: &Trace<'_>) -> Judged {
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_v2_common())
            .filter(|(_, c)| c.extras.get(keys::PROTOCOL_VERSION) != Some(&Value::Int(2)))
            .map(|(i, c)| {
                format!(
                    "{}: protocol_version is {} {:?}, not Int 2",
                    label(i, c),
                    c.extras
                        .get(keys::PROTOCOL_VERSION)
                        .map_or("absent", Value::type_tag),
                    c.extras.get(keys::PROTOCOL_VERSION)
                )
            })
            .collect(),
    )
}

fn current_token(t: &Trace<'_>, on: &CallFilter) -> Judged {
    first(
        selected(t, on)
            .into_iter()
            .filter(|(_, c)| c.is_v2_common())
            .filter(|(_, c)| {
                // A call before any negotiation is negotiate_first's.
                t.calls.iter().any(|o| o.method == "negotiate" && o.life == c.life)
            })
            .filter(|(_, c)| c.valid_token.is_none() || c.str(keys::SESSION_TOKEN) != c.valid_token)
            .map(|(i, c)| match &c.valid_token {
                None => format!(
                    "{} carried {:?} while no session was valid (it had been answered NEGOTIATION_REQUIRED or expired): negotiate first",
                    label(i, c),
                    c.str(keys::SESSION_TOKEN)
                ),
                Some(v) => format!(
                    "{} carried {:?}, not the current session token {v:?}",
                    label(i, c),
                    c.str(keys::SESSION_TOKEN)
                ),
            })
            .collect(),
    )
}

fn fresh_read_ids(t: &Trace<'_>, on: &CallFilter) -> Judged {
    let calls = selected(t, on);
    first(
        calls
            .windows(2)
            .filter(|w| {
                // The earlier one was answered (no retry is due) and the
                // later one is a new read under the same id.
                w[0].1.answered != "timeout"
                    && w[0].1.answered != "died"
                    && w[0].1.error_code.is_none()
                    && w[0].1.str(keys::REQUEST_ID) == w[1].1.str(keys::REQUEST_ID)
            })
            .map(|w| {
                format!(
                    "{} is a new read under the request id of the answered {}",
                    label(w[1].0, w[1].1),
                    label(w[0].0, w[0].1)
                )
            })
            .collect(),
    )
}

fn request_id_uuid(t: &Trace<'_>) -> Judged {
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_v2_common())
            .filter(|(_, c)| !c.str(keys::REQUEST_ID).is_some_and(|r| is_uuid(&r)))
            .map(|(i, c)| {
                format!(
                    "{}: request_id {:?} is not a UUID",
                    label(i, c),
                    c.str(keys::REQUEST_ID)
                )
            })
            .collect(),
    )
}

fn deadline_absolute(t: &Trace<'_>) -> Judged {
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_v2_common())
            .filter_map(|(i, c)| match c.extras.get(keys::DEADLINE_AT_MS) {
                Some(Value::Long(d)) if *d > c.now_ms && *d <= c.now_ms + 86_400_000 => None,
                Some(Value::Long(d)) => Some(format!(
                    "{}: deadline_at_ms {d} is not an epoch time after the call (device time {})",
                    label(i, c),
                    c.now_ms
                )),
                other => Some(format!(
                    "{}: deadline_at_ms is {}, not a Long",
                    label(i, c),
                    other.map_or("absent", Value::type_tag)
                )),
            })
            .collect(),
    )
}

fn same_request_id(t: &Trace<'_>, on: &CallFilter) -> Judged {
    let calls = selected(t, on);
    let ids: BTreeSet<Option<String>> =
        calls.iter().map(|(_, c)| c.str(keys::REQUEST_ID)).collect();
    if calls.is_empty() {
        return Judged::Broken("no such call was made".into());
    }
    if ids.len() == 1 {
        Judged::Pass
    } else {
        Judged::Broken(format!(
            "{} calls of one logical execution carried {} request ids: {:?}",
            calls.len(),
            ids.len(),
            ids.iter().flatten().collect::<Vec<_>>()
        ))
    }
}

/// The filter as a finding shows it: `act=…, method="…", tool="…", v1=…`,
/// the parameters given, in this order.
fn describe_filter(on: &CallFilter) -> String {
    let mut shown = Vec::new();
    if let Some(a) = on.act {
        shown.push(format!("act={a}"));
    }
    if let Some(m) = &on.method {
        shown.push(format!("method={}", Json::from(m.as_str())));
    }
    if let Some(x) = &on.tool {
        shown.push(format!("tool={}", Json::from(x.as_str())));
    }
    if let Some(v) = on.v1 {
        shown.push(format!("v1={v}"));
    }
    shown.join(", ")
}

fn calls(t: &Trace<'_>, want: &CallCount) -> Judged {
    let on = want.on();
    let n = selected(t, &on).len() as u64;
    let min = want.min.or(want.count).unwrap_or(0);
    let max = want.max.or(want.count).unwrap_or(u64::MAX);
    if (min..=max).contains(&n) {
        return Judged::Pass;
    }
    let expected = if min == max {
        format!("{min}")
    } else if max == u64::MAX {
        format!("at least {min}")
    } else {
        format!("{min}..{max}")
    };
    Judged::Broken(format!(
        "{n} matching calls ({}), expected {expected}",
        describe_filter(&on)
    ))
}

fn retry_waited(t: &Trace<'_>, gap: &CallGap) -> Judged {
    let ms = gap.ms as i64;
    let calls = selected(t, &gap.on());
    if calls.len() < 2 {
        return Judged::NotJudged("no retry was made".into());
    }
    first(
        calls
            .windows(2)
            .filter(|w| w[1].1.now_ms - w[0].1.now_ms < ms)
            .map(|w| {
                format!(
                    "{} came {} ms after {}, not the {ms} ms retry_after_ms asked",
                    label(w[1].0, w[1].1),
                    w[1].1.now_ms - w[0].1.now_ms,
                    label(w[0].0, w[0].1)
                )
            })
            .collect(),
    )
}

fn no_v1(t: &Trace<'_>) -> Judged {
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_v1())
            .map(|(i, c)| {
                format!(
                    "{} is a v1 call to a Provider that declared v2",
                    label(i, c)
                )
            })
            .collect(),
    )
}

fn no_calls(t: &Trace<'_>) -> Judged {
    first(
        t.calls
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{} reached a Provider that must not be used", label(i, c)))
            .collect(),
    )
}

fn list_after_negotiate(t: &Trace<'_>) -> Judged {
    let mut bad = Vec::new();
    for (i, c) in t.calls.iter().enumerate() {
        let renegotiation = c.method == "negotiate"
            && t.calls[..i]
                .iter()
                .any(|o| o.method == "negotiate" && o.life == c.life);
        if !renegotiation {
            continue;
        }
        let succeeded = t
            .acts
            .get(c.act)
            .and_then(|a| a.outcome.as_ref())
            .is_some_and(|o| matches!(o, ActOutcome::Success { .. }));
        let listed = t.calls[i + 1..]
            .iter()
            .take_while(|o| o.act == c.act)
            .any(|o| o.method == "list_tools" && o.is_v2_common());
        if succeeded && !listed {
            bad.push(format!(
                "after the renegotiation at {} the act ended in success without checking list_tools",
                label(i, c)
            ));
        }
    }
    first(bad)
}

fn outcome(t: &Trace<'_>, want: &OutcomeIs) -> Judged {
    let i = want.act;
    let Some(o) = t.acts.get(i).and_then(|a| a.outcome.as_ref()) else {
        return Judged::Broken(format!("act {i} has no outcome"));
    };
    let allowed: Vec<&str> = want.is.iter().map(String::as_str).collect();
    if !allowed.contains(&o.kind()) {
        return Judged::Broken(format!(
            "act {i} ended in {} ({}), expected one of {allowed:?}",
            o.kind(),
            describe(o)
        ));
    }
    match (&want.code, o) {
        (Some(code), ActOutcome::Error { error_code, .. }) if error_code != code => {
            Judged::Broken(format!("act {i} surfaced {error_code}, expected {code}"))
        }
        _ => Judged::Pass,
    }
}

/// §4.4: a successful cancel_operation only says the request was taken;
/// the Consumer still queries the operation until a terminal state. A
/// cancel the Provider refused (an error answer) asks nothing more.
fn polled_after_cancel(t: &Trace<'_>) -> Judged {
    let op_of = |c: &CallRecord| c.str(keys::OPERATION_ID);
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.method == "cancel_operation" && c.error_code.is_none())
            .filter(|(i, c)| {
                !t.calls[i + 1..]
                    .iter()
                    .any(|later| later.method == "get_operation" && op_of(later) == op_of(c))
            })
            .map(|(i, c)| {
                format!(
                    "{} was answered, and operation {:?} was never queried after it",
                    label(i, c),
                    op_of(c).unwrap_or_default()
                )
            })
            .collect(),
    )
}

fn no_crash(t: &Trace<'_>) -> Judged {
    first(
        t.acts
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match &a.outcome {
                Some(o @ ActOutcome::Crashed { .. }) => {
                    Some(format!("act {i} crashed: {}", describe(o)))
                }
                _ => None,
            })
            .collect(),
    )
}

fn no_decoy_calls(t: &Trace<'_>, d: &DecoyCalls) -> Judged {
    // A call made during an act that named the decoy was asked for.
    let named: BTreeSet<usize> = t
        .acts
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.action.get("authority").and_then(Json::as_str)
                == Some(super::hostile::DECOY_AUTHORITY)
        })
        .map(|(i, _)| i)
        .collect();
    first(
        t.decoy_calls
            .iter()
            .filter(|c| d.method.as_ref().is_none_or(|m| c.method == *m))
            .filter(|c| !named.contains(&c.act))
            .map(|c| {
                format!(
                    // Not named by package: on a phone or the JVM device
                    // the decoy is the peer probe's Provider, not DECOY_PACKAGE.
                    "act {}: {}{} went to the decoy Provider (a second Provider with the same tools and name), instead of the one the act named",
                    c.act,
                    c.method,
                    c.tool().map(|t| format!(" {t:?}")).unwrap_or_default(),
                )
            })
            .collect(),
    )
}

fn only_asked_tools(t: &Trace<'_>) -> Judged {
    let asked: BTreeSet<&str> = t
        .acts
        .iter()
        .filter(|a| a.action.get("do").and_then(Json::as_str) == Some("call_tool"))
        .filter_map(|a| a.action.get("tool").and_then(Json::as_str))
        .collect();
    first(
        t.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.method == "execute_tool")
            .filter(|(_, c)| !c.tool().is_some_and(|x| asked.contains(x.as_str())))
            .map(|(i, c)| {
                format!(
                    "{} executed {:?}, which no user request asked for",
                    label(i, c),
                    c.tool()
                )
            })
            .collect(),
    )
}

fn fds_closed(t: &Trace<'_>) -> Judged {
    let Some(fds) = t.fds else {
        return match t.fd_closes {
            Some(closes) => closes_reported(closes),
            None => Judged::Unseen {
                why: "descriptors are not visible on this target".into(),
                needs: NEEDS_CLOSES,
            },
        };
    };
    first(
        fds.values()
            .filter(|f| !f.closed)
            .map(|f| format!("descriptor {} was never read or closed", f.handle))
            .collect(),
    )
}

/// §4.5 (CETP2-4.5-07) over the probe wire: the device reports how the
/// Consumer let go of each descriptor (`fd_closed`). `closed` is a close;
/// `detached` is the Consumer taking the raw descriptor into its own code,
/// whose close no device sees, so it is not charged. A descriptor
/// garbage-collected unclosed (`leaked`), whose copies vanished without a
/// close (`dead`), closed with an error, or not let go of by the end of the
/// wait was not closed.
fn closes_reported(closes: &BTreeMap<String, Option<String>>) -> Judged {
    first(
        closes
            .iter()
            .filter_map(|(call, how)| match how.as_deref() {
                Some("closed" | "detached") => None,
                Some("leaked") => Some(format!(
                    "the descriptor answered to {call} was garbage-collected without being closed"
                )),
                Some("dead") => Some(format!(
                    "the descriptor answered to {call} vanished without a close (its holder died?)"
                )),
                Some(other) => Some(format!(
                    "the descriptor answered to {call} was let go of as {:?}, not closed",
                    clip(other, 40)
                )),
                None => Some(format!(
                    "the descriptor answered to {call} was never closed (the device saw no close by the end of the scenario and its wait)"
                )),
            })
            .collect(),
    )
}

fn read_bounded(t: &Trace<'_>, cap: &ReadCap) -> Judged {
    let Some(fds) = t.fds else {
        return Judged::Unseen {
            why: "descriptor reads are not visible on this target".into(),
            needs: NEEDS_READS,
        };
    };
    let cap = cap.max_bytes.unwrap_or(u64::MAX);
    first(
        fds.values()
            .flat_map(|f| f.reads.iter().map(move |r| (f, *r)))
            .filter(|(_, r)| *r > cap)
            .map(|(f, r)| {
                format!(
                    "descriptor {} was read asking for {r} bytes, over {cap}",
                    f.handle
                )
            })
            .collect(),
    )
}

fn resolved_before_resume(t: &Trace<'_>) -> Judged {
    let Some(resolves) = t.resolves else {
        return Judged::Unseen {
            why: "resolutions are not visible on this target".into(),
            needs: NEEDS_RESOLVES,
        };
    };
    first(
        t.calls
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.str(keys::RESUME_TOKEN).map(|tok| (i, c, tok)))
            .filter(|(i, _, tok)| {
                !t.intents
                    .iter()
                    .filter(|p| p.resume_token == *tok)
                    .any(|p| {
                        resolves
                            .iter()
                            .any(|r| r.handle == p.handle && r.after_calls <= *i)
                    })
            })
            .map(|(i, c, _)| {
                format!(
                    "{} resumed before the user's resolution was launched",
                    label(i, c)
                )
            })
            .collect(),
    )
}

/// Judges what the Consumer calls (§2.3, §8): an operation method of a
/// capability it did not negotiate. A file result the Provider sends unasked
/// is the Provider's breach of §4.5, not the Consumer's, so reading it is
/// not charged here.
fn no_unnegotiated(t: &Trace<'_>) -> Judged {
    let bad: Vec<String> = t
        .calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let cap = match c.method.as_str() {
                "get_operation" => "async_operations",
                "cancel_operation" => "cancellation",
                _ => return None,
            };
            (!c.granted.iter().any(|g| g == cap))
                .then(|| format!("{} used {cap}, which was not negotiated", label(i, c)))
        })
        .collect();
    first(bad)
}

/// A short, bounded description of an outcome.
pub fn describe(o: &ActOutcome) -> String {
    let s = match o {
        ActOutcome::Success { value } => value.to_string(),
        ActOutcome::Error {
            error_code,
            message,
        } => format!("{error_code}: {message}"),
        ActOutcome::NeedsUser { detail } | ActOutcome::Refused { detail } => detail.clone(),
        ActOutcome::Crashed { class, message } => format!("{class}: {message}"),
    };
    clip(&s, 200)
}

pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Expect;
    use serde_json::json;

    fn call(act: usize, method: &str) -> CallRecord {
        CallRecord {
            act,
            life: 0,
            method: method.into(),
            extras: Default::default(),
            now_ms: 0,
            valid_token: None,
            granted: Vec::new(),
            answered: "default",
            error_code: None,
        }
    }

    fn judged(calls: &[CallRecord], e: serde_json::Value) -> Judged {
        let e: Expect = serde_json::from_value(e).unwrap();
        let t = Trace {
            calls,
            acts: &[],
            intents: &[],
            fds: None,
            resolves: None,
            decoy_calls: &[],
            fd_closes: None,
        };
        judge(&t, &e)
    }

    /// §4.5 (CETP2-4.5-07) over the wire: a close or a detach as the
    /// device reports it passes; a leak, a vanished holder, an error or no
    /// report at all is a descriptor not closed; a device that reports no
    /// closes leaves the check not judged.
    #[test]
    fn descriptor_closes_the_device_reports_judge_fds_closed() {
        let with = |closes: Option<&BTreeMap<String, Option<String>>>| {
            let e: Expect = serde_json::from_value(json!({"check": "fds_closed"})).unwrap();
            judge(
                &Trace {
                    calls: &[],
                    acts: &[],
                    intents: &[],
                    fds: None,
                    resolves: None,
                    decoy_calls: &[],
                    fd_closes: closes,
                },
                &e,
            )
        };
        let of = |how: Option<&str>| {
            BTreeMap::from([
                ("c-1".to_string(), Some("closed".to_string())),
                ("c-2".to_string(), how.map(str::to_string)),
            ])
        };
        assert_eq!(with(Some(&of(Some("closed")))), Judged::Pass);
        assert_eq!(with(Some(&of(Some("detached")))), Judged::Pass);
        assert_eq!(with(Some(&BTreeMap::new())), Judged::Pass);
        for (how, says) in [
            (None, "never closed"),
            (Some("leaked"), "garbage-collected"),
            (Some("dead"), "vanished"),
            (Some("error"), "\"error\""),
        ] {
            match with(Some(&of(how))) {
                Judged::Broken(m) => {
                    assert!(m.contains("c-2") && m.contains(says), "{how:?}: {m}")
                }
                other => panic!("{how:?}: {other:?}"),
            }
        }
        assert!(matches!(
            with(None),
            Judged::Unseen {
                needs: NEEDS_CLOSES,
                ..
            }
        ));
    }

    #[test]
    fn calls_counts_what_its_filter_selects_and_shows_the_filter() {
        let calls = [
            call(1, "execute_tool"),
            call(1, "execute_tool"),
            call(1, "list_tools"),
        ];
        assert_eq!(
            judged(
                &calls,
                json!({"check": "calls", "method": "execute_tool", "act": 1, "count": 1})
            ),
            Judged::Broken("2 matching calls (act=1, method=\"execute_tool\"), expected 1".into())
        );
        assert_eq!(
            judged(
                &calls,
                json!({"check": "calls", "method": "execute_tool", "min": 2})
            ),
            Judged::Pass
        );
        assert_eq!(
            judged(
                &calls,
                json!({"check": "calls", "method": "list_tools", "min": 2})
            ),
            Judged::Broken("1 matching calls (method=\"list_tools\"), expected at least 2".into())
        );
        assert_eq!(
            judged(&calls, json!({"check": "no_calls"})),
            Judged::Broken(
                "call #1 (execute_tool in act 1) reached a Provider that must not be used; \
                 call #2 (execute_tool in act 1) reached a Provider that must not be used; \
                 call #3 (list_tools in act 1) reached a Provider that must not be used"
                    .into()
            )
        );
    }
}
