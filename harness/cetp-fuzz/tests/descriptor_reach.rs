//! The fixture mutants the descriptor oracle used to miss, each held to the
//! sequence that shows it: the mutant is found (citing the clause it
//! breaks), and the unmutated fixture and the legal variants whose latitude
//! touches the same answers pass the very same sequence. The generator
//! makes each of these sequences (`moves.rs`: `retry`, `restart_operation`,
//! the retry after a decision in `resolve`, the poll before
//! `cancel_consistent` in `async_flow`); here they are written out, so that a
//! change of the generator's odds cannot hide a regression of the oracle.

use cetp_fuzz::moves::{redraw_generated, GenStep, Meta, Move};
use cetp_fuzz::{FuzzConfig, Fuzzer, Judgement, OracleChoice};
use cetp_targets::{open, TargetSpec};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use serde_json::{json, Value as Json};
use std::path::PathBuf;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors")
}

fn profile(name: &str) -> Profile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../profiles")
        .join(name);
    Profile::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A fuzzer judging `target` through the descriptor oracle.
fn fuzzer<'a>(target: &str, p: &'a Profile, suite: &'a Suite) -> Fuzzer<'a> {
    fuzzer_with(OracleChoice::Descriptor, target, p, suite)
}

fn fuzzer_with<'a>(
    oracle: OracleChoice,
    target: &str,
    p: &'a Profile,
    suite: &'a Suite,
) -> Fuzzer<'a> {
    let kind = match oracle {
        OracleChoice::Descriptor => "descriptor",
        _ => "differential",
    };
    let t = open(&TargetSpec::parse(target).unwrap()).unwrap();
    let (_, env) = cetp_conformance::runner::identify(&t, p).unwrap();
    let cfg = FuzzConfig {
        seed: 1,
        oracle,
        ..FuzzConfig::default()
    };
    let f = Fuzzer::new(t, p, env, &suite.rules, cfg).unwrap();
    assert_eq!(f.oracle_kind(), kind);
    f
}

fn judge(target: &str, prof: &str, moves: &[Move]) -> Judgement {
    judge_with(OracleChoice::Descriptor, target, prof, moves)
}

fn judge_with(oracle: OracleChoice, target: &str, prof: &str, moves: &[Move]) -> Judgement {
    let p = profile(prof);
    let suite = Suite::load(&vectors()).unwrap();
    fuzzer_with(oracle, target, &p, &suite).judge_moves(moves, 11)
}

fn step(j: Json, meta: Meta) -> GenStep {
    GenStep { step: j, meta }
}

/// A call whose expectation the oracle compiles.
fn call(mut j: Json) -> GenStep {
    if j.get("expect").is_none() {
        j["expect"] = json!({});
    }
    if j.get("requirements").is_none() {
        j["requirements"] = json!([]);
    }
    step(j, Meta::Plain)
}

fn negotiate(bind: &str, caps: &[&str]) -> GenStep {
    step(
        json!({"do": "negotiate", "as": "a", "bind": bind, "capabilities": caps}),
        Meta::Plain,
    )
}

fn execute(session: &str, tool: Json, args: Json, bind: &str) -> GenStep {
    call(
        json!({"do": "call", "as": "a", "method": "execute_tool", "session": session,
        "tool": tool, "args": args, "bind": bind,
        "expect": {"status": ["success", "accepted", "error"]}}),
    )
}

fn same(a: &str, b: &str, reqs: &[&str]) -> GenStep {
    step(
        json!({"do": "same", "a": a, "b": b,
            "unless_code": ["RATE_LIMITED", "NEGOTIATION_REQUIRED", "UNAVAILABLE"],
            "requirements": reqs}),
        Meta::Judgement,
    )
}

fn effects_after(bind: &str, since: &str, of: &str, reqs: &[&str]) -> GenStep {
    step(
        json!({"do": "observe", "bind": bind, "requirements": reqs}),
        Meta::EffectsAfter {
            since: since.into(),
            tool_of: Some(of.into()),
        },
    )
}

/// `get_operation` of the operation `of` answered, in `session`.
fn get_operation(session: &str, of: &str, bind: &str) -> GenStep {
    call(
        json!({"do": "call", "as": "a", "method": "get_operation", "session": session,
        "request_id": format!("${{{of}/_request/request_id}}"),
        "operation_id": format!("${{{of}/data/operation_id}}"), "bind": bind}),
    )
}

/// One poll of the operation `of` answered, in `session`.
fn poll(session: &str, of: &str, bind: &str) -> GenStep {
    call(json!({"do": "poll", "as": "a", "session": session, "operation_of": of, "bind": bind}))
}

/// §4.4 (CETP2-4.4-17): the final state `fin` read is held to the effects
/// seen since `since`.
fn cancel_consistent(fin: &str, since: &str) -> GenStep {
    step(
        json!({"do": "cancel_consistent", "final": fin, "since": since,
            "requirements": ["CETP2-4.4-17"]}),
        Meta::Judgement,
    )
}

fn moves(groups: Vec<Vec<GenStep>>) -> Vec<Move> {
    groups.into_iter().map(|steps| Move { steps }).collect()
}

/// §6 (CETP2-6-01, CETP2-6-04): a side effect retried with its request id
/// and args gets the first answer.
fn retried(tool: Json) -> Vec<Move> {
    moves(vec![
        vec![negotiate("s1", &[])],
        vec![execute("s1", tool.clone(), json!("valid"), "e2")],
        vec![
            call(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                "tool": tool, "args": {"same_as": "e2"},
                "request_id": "${e2/_request/request_id}", "bind": "r3",
                "requirements": ["CETP2-6-01", "CETP2-6-04"]}),
            ),
            same("e2", "r3", &["CETP2-6-04"]),
        ],
    ])
}

/// §4.4 (CETP2-4.4-13): an operation accepted before a restart is still
/// known to its caller after it.
fn read_after_restart(tool: Json) -> Vec<Move> {
    let caps = ["async_operations", "cancellation"];
    moves(vec![
        vec![negotiate("s1", &caps)],
        vec![execute("s1", tool, json!("valid"), "e2")],
        vec![
            step(json!({"do": "restart", "requirements": []}), Meta::Plain),
            negotiate("s3", &caps),
        ],
        vec![call(
            json!({"do": "call", "as": "a", "method": "get_operation", "session": "s3",
            "request_id": "${e2/_request/request_id}", "operation_id": "${e2/data/operation_id}",
            "bind": "g4", "requirements": ["CETP2-4.4-13"]}),
        )],
    ])
}

/// §4.4 (CETP2-4.4-13, -14), §6 (CETP2-6-04): an operation that ended
/// before a restart ends the same way after it.
fn settled_across_restart(tool: Json) -> Vec<Move> {
    let caps = ["async_operations"];
    moves(vec![
        vec![negotiate("s1", &caps)],
        vec![
            execute("s1", tool, json!("valid"), "e2"),
            call(json!({"do": "settle", "as": "a", "session": "s1", "of": "e2", "bind": "f2"})),
        ],
        vec![
            step(json!({"do": "restart", "requirements": []}), Meta::Plain),
            negotiate("s3", &caps),
        ],
        vec![
            call(
                json!({"do": "settle", "as": "a", "session": "s3", "of": "e2", "bind": "f4",
                "requirements": ["CETP2-4.4-13"]}),
            ),
            same("f2", "f4", &["CETP2-4.4-13", "CETP2-6-04"]),
        ],
    ])
}

/// §4.4 (CETP2-4.4-17): an operation that reports itself cancelled had no
/// effect; the state is read with a poll.
fn cancelled(tool: Json) -> Vec<Move> {
    cancelled_with(tool, json!(null))
}

/// The same, with the cancel guarded as the generator writes it (`only_if`
/// the call answered with an operation, as `Call::step` sets it).
fn cancelled_guarded(tool: Json) -> Vec<Move> {
    cancelled_with(tool, json!("${e2/data/operation_id}"))
}

/// The guarded cancel, then time passes: an operation that reported itself
/// cancelled has no effect later either (§4.4, CETP2-4.4-12, -17).
fn cancelled_then_time_passes(tool: Json) -> Vec<Move> {
    let mut m = cancelled_guarded(tool);
    m.extend(moves(vec![vec![
        step(json!({"do": "observe", "bind": "o7"}), Meta::Plain),
        step(
            json!({"do": "advance_clock", "ms": 61_000, "requirements": []}),
            Meta::Plain,
        ),
        effects_after("p8", "o7", "e2", &["CETP2-4.4-17"]),
    ]]));
    m
}

fn cancelled_with(tool: Json, only_if: Json) -> Vec<Move> {
    let mut cancel = json!({"do": "call", "as": "a", "method": "cancel_operation", "session": "s1",
        "request_id": "${e2/_request/request_id}", "operation_id": "${e2/data/operation_id}",
        "bind": "g3", "requirements": ["CETP2-4.4-17"]});
    if !only_if.is_null() {
        cancel["only_if"] = only_if;
    }
    moves(vec![
        vec![negotiate("s1", &["async_operations", "cancellation"])],
        vec![
            step(json!({"do": "observe", "bind": "o1"}), Meta::Plain),
            execute("s1", tool, json!("valid"), "e2"),
            call(cancel),
            call(json!({"do": "settle", "as": "a", "session": "s1", "of": "e2", "bind": "f4"})),
            poll("s1", "e2", "f5"),
            cancel_consistent("f5", "o1"),
            effects_after("p6", "o1", "e2", &["CETP2-4.4-17"]),
        ],
    ])
}

/// §4.3, §6 (CETP2-6-04): a denial is the request's terminal result. The
/// request sent again may be asked about again (validate_before_dedupe
/// does), but what an approval then resumes is still the denial; the
/// resolution and the resumed call run only where the retry asked.
fn denied_then_retried() -> Vec<Move> {
    let tool = json!({"name": "create_alert"});
    let resumed = |bind: &str, token: &str| {
        json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
            "tool": tool, "args": {"same_as": "e2"}, "request_id": "${e2/_request/request_id}",
            "resume_token": token, "bind": bind, "expect": {},
            "requirements": ["CETP2-4.3-05", "CETP2-6-04"]})
    };
    moves(vec![
        vec![negotiate("s1", &[])],
        vec![
            step(json!({"do": "observe", "bind": "o2"}), Meta::Plain),
            execute("s1", tool.clone(), json!("escalating"), "e2"),
            step(
                json!({"do": "resolve", "as": "a", "handle": "${e2/resolution/handle}",
                    "decision": "deny", "requirements": []}),
                Meta::Plain,
            ),
            call(resumed("r3", "${e2/resume_token}")),
            call(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                "tool": tool, "args": {"same_as": "e2"}, "request_id": "${e2/_request/request_id}",
                "bind": "r4", "requirements": ["CETP2-6-04"]}),
            ),
            step(
                json!({"do": "resolve", "as": "a", "handle": "${r4/resolution/handle}",
                    "decision": "approve", "requirements": []}),
                Meta::Optional,
            ),
            step(resumed("r5", "${r4/resume_token}"), Meta::Optional),
            effects_after("p6", "o2", "r3", &["CETP2-6-04"]),
        ],
    ])
}

/// A read of a note id that does not exist (§3.4, CETP2-3.4-08: a read
/// changes no business state).
fn missing_note_read(id: &str) -> Vec<Move> {
    moves(vec![
        vec![negotiate("s1", &[])],
        vec![
            step(json!({"do": "observe", "bind": "o2"}), Meta::Plain),
            call(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                "tool": {"name": "get_note"}, "args": {"json": {"note_id": id}}, "bind": "e3"}),
            ),
            effects_after("p4", "o2", "e3", &["CETP2-3.4-08"]),
        ],
    ])
}

fn assert_found(j: &Judgement, target: &str, requirement: &str) {
    match j {
        Judgement::Finding { signature, .. } => assert!(
            signature.contains(requirement),
            "{target}: found, but not citing {requirement}: {j:?}"
        ),
        other => panic!("{target}: not found: {other:?}"),
    }
}

fn assert_passes(j: &Judgement, target: &str) {
    assert!(
        matches!(j, Judgement::Pass | Judgement::Unjudged),
        "{target}: {j:?}"
    );
}

/// Each mutant is found by its sequence, and the unmutated fixture passes
/// the same sequence.
#[test]
fn the_mutants_once_missed_are_found_and_their_fixtures_pass() {
    let archive = json!({"profile_role": "async"});
    let sync_portfolio = json!({"name": "sync_portfolio"});
    let cases: Vec<(&str, &str, Vec<Move>, &str)> = vec![
        (
            "notes,mutant=sync_archive_not_deduped",
            "notes.toml",
            retried(json!({"name": "archive_notes"})),
            "CETP2-6-04",
        ),
        (
            "notes,mutant=archive_replayed_after_restart",
            "notes.toml",
            settled_across_restart(archive.clone()),
            "CETP2-4.4-13",
        ),
        (
            "mutant=operation_lost_on_restart",
            "reference.toml",
            read_after_restart(sync_portfolio.clone()),
            "CETP2-4.4-13",
        ),
        (
            "notes,mutant=operation_lost_on_restart",
            "notes.toml",
            read_after_restart(archive.clone()),
            "CETP2-4.4-13",
        ),
        (
            "mutant=cancel_reports_cancelled_after_effect",
            "reference.toml",
            cancelled(sync_portfolio.clone()),
            "CETP2-4.4-17",
        ),
        (
            "notes,mutant=cancel_reports_cancelled_after_effect",
            "notes.toml",
            cancelled(archive.clone()),
            "CETP2-4.4-17",
        ),
        (
            "mutant=cancel_reports_cancelled_after_effect",
            "reference.toml",
            cancelled_guarded(sync_portfolio.clone()),
            "CETP2-4.4-17",
        ),
        (
            "notes,mutant=cancel_reports_cancelled_after_effect",
            "notes.toml",
            cancelled_guarded(archive),
            "CETP2-4.4-17",
        ),
        (
            "mutant=cancelled_then_succeeds",
            "reference.toml",
            cancelled_then_time_passes(sync_portfolio.clone()),
            "CETP2-4.4-17",
        ),
        (
            "mutant=denial_not_recorded",
            "reference.toml",
            denied_then_retried(),
            "CETP2-6-04",
        ),
    ];
    for (spec, prof, m, requirement) in cases {
        let (app, _) = spec.rsplit_once("mutant=").unwrap();
        let mutant = format!(
            "sim:{}{}",
            if app.is_empty() { "" } else { "provider=" },
            spec
        );
        let clean = if app.is_empty() {
            "sim".to_string()
        } else {
            "sim:provider=notes".to_string()
        };
        assert_found(&judge(&mutant, prof, &m), &mutant, requirement);
        assert_passes(&judge(&clean, prof, &m), &clean);
    }
}

/// The legal variants whose latitude touches these answers (a sync answer,
/// a terminal replay, another order of validation and dedupe, sessions or a
/// warm-up across a restart, an acknowledged cancel of a finished
/// operation, ...) pass every sequence above: no finding on a legal choice.
#[test]
fn legal_variants_pass_the_same_sequences() {
    let sync_portfolio = json!({"name": "sync_portfolio"});
    let sequences = [
        read_after_restart(sync_portfolio.clone()),
        settled_across_restart(sync_portfolio.clone()),
        cancelled(sync_portfolio.clone()),
        cancelled_guarded(sync_portfolio.clone()),
        cancelled_then_time_passes(sync_portfolio.clone()),
        retried(sync_portfolio),
        retried(json!({"name": "create_alert"})),
        denied_then_retried(),
    ];
    for v in [
        "validate_before_dedupe",
        "replay_returns_terminal",
        "sync_for_async_tool",
        "slow_operations",
        "cancel_finished_acknowledged",
        "sessions_survive_restart",
        "unavailable_after_restart",
        "operation_results_as_files",
        "confirm_with_auth_required",
        "escalation_refused",
        "dedupe_raw_args",
    ] {
        let target = format!("sim:variant={v}");
        for (i, m) in sequences.iter().enumerate() {
            assert_passes(
                &judge(&target, "reference.toml", m),
                &format!("{target}, sequence {i}"),
            );
        }
    }
}

/// get_note_creates_missing was reported flaky: the mutant is
/// deterministic, but its first run creates the note it was asked for, so
/// the same moves run again meet a note that exists. The confirmation run
/// draws the schema-drawn args anew, and the mutant fails again.
#[test]
fn a_read_that_creates_what_it_was_asked_for_fails_again_with_args_drawn_anew() {
    let p = profile("notes.toml");
    let suite = Suite::load(&vectors()).unwrap();
    let mut f = fuzzer(
        "sim:provider=notes,mutant=get_note_creates_missing",
        &p,
        &suite,
    );
    let first = missing_note_read("n_zzzzzzzzzz");
    assert_found(
        &f.judge_moves(&first, 11),
        "get_note_creates_missing",
        "CETP2-3.4-08",
    );
    // The same args again: the note exists now, nothing is created.
    assert_eq!(f.judge_moves(&first, 12), Judgement::Pass);
    let again = redraw_generated(&first, f.world(), 13).expect("the note id is drawn anew");
    assert_ne!(
        again[1].steps[1].step["args"], first[1].steps[1].step["args"],
        "a fresh note id"
    );
    assert_found(
        &f.judge_moves(&again, 14),
        "get_note_creates_missing",
        "CETP2-3.4-08",
    );
    // The unmutated notes app refuses the missing id and creates nothing.
    assert_passes(
        &judge("sim:provider=notes", "notes.toml", &first),
        "sim:provider=notes",
    );
}

/// A `cancel_consistent` that some shadow run cannot pass (the slow
/// business flavour's operation fails, so it ended neither cancelled nor
/// succeeded) is not judged; it still takes an observer snapshot on the
/// target, whose request id the shadow must draw too, or every later call
/// is keyed differently and its repeated answer is lost (the reference was
/// charged with its own `accepted` in a 2-minute clean run).
#[test]
fn a_judgement_the_shadow_cannot_vouch_for_keeps_later_request_ids_aligned() {
    let tool = json!({"name": "sync_portfolio"});
    let caps = ["async_operations", "cancellation"];
    let m = moves(vec![
        vec![negotiate("s1", &caps)],
        vec![
            step(json!({"do": "observe", "bind": "o2"}), Meta::Plain),
            execute("s1", tool.clone(), json!("valid"), "e3"),
            get_operation("s1", "e3", "g4"),
            poll("s1", "e3", "f5"),
            cancel_consistent("f5", "o2"),
        ],
        vec![
            negotiate("s6", &caps),
            execute("s6", tool, json!("valid"), "e7"),
        ],
    ]);
    for target in ["sim", "sim:variant=slow_operations"] {
        assert_eq!(
            judge(target, "reference.toml", &m),
            Judgement::Pass,
            "{target}"
        );
    }
}

/// §4.4: a cancel a Provider refuses (the transaction is committed) leaves
/// the operation's outcome to its business, which may fail with a §5 error
/// of its own. Found as a false finding by a ten-minute clean run of
/// `cancel_refused_committed` (seed 101): the settle after a refused cancel
/// was held to "cancelled or success". The first operation's refused cancel
/// and its poll come first, as in that run.
fn refused_cancel_then_business_failure() -> Vec<Move> {
    let caps = ["async_operations", "cancellation"];
    let cancel = |session: &str, of: &str, bind: &str| {
        call(
            json!({"do": "call", "as": "a", "method": "cancel_operation", "session": session,
            "request_id": format!("${{{of}/_request/request_id}}"),
            "operation_id": format!("${{{of}/data/operation_id}}"),
            "bind": bind, "requirements": ["CETP2-4.4-17"]}),
        )
    };
    moves(vec![
        vec![negotiate("s1", &caps)],
        vec![
            step(json!({"do": "observe", "bind": "o1"}), Meta::Plain),
            execute(
                "s1",
                json!({"name": "sync_portfolio"}),
                json!({"json": {}}),
                "e2",
            ),
            cancel("s1", "e2", "g3"),
            poll("s1", "e2", "f4"),
            cancel_consistent("f4", "o1"),
        ],
        vec![negotiate("s5", &caps)],
        vec![
            execute(
                "s5",
                json!({"name": "sync_portfolio"}),
                json!({"json": {"fail": true}}),
                "e6",
            ),
            cancel("s5", "e6", "g7"),
            call(json!({"do": "settle", "as": "a", "session": "s5", "of": "e6", "bind": "f8"})),
        ],
    ])
}

#[test]
fn a_business_failure_after_a_refused_cancel_passes() {
    for target in [
        "sim:variant=cancel_refused_committed",
        "sim",
        "sim:variant=cancel_finished_acknowledged",
    ] {
        let j = judge(
            target,
            "reference.toml",
            &refused_cancel_then_business_failure(),
        );
        assert_passes(&j, target);
    }
}

/// A `cancel_consistent` the shadow cannot vouch for stands in the shadow's
/// case as an observation only where the target's own run took a snapshot
/// there (a final state `cancelled` or `succeeded`): after `failed` it took
/// none, and an observation in its place would shift every later request
/// id, and with them the answers repeated from the target (two false
/// findings of the ten-minute clean runs, on the reference and on
/// `cancel_refused_committed`: a later call answered `accepted` was held to
/// what the shadow's unmirrored business answered).
fn failed_operation_judged_then_called_again() -> Vec<Move> {
    let caps = ["async_operations", "cancellation"];
    let failing = json!({"profile_role": "failing_operation"});
    moves(vec![
        vec![negotiate("s1", &caps)],
        vec![
            // The observation `since` names was shrunk away, as in the run
            // that found it: the shadow's runs that reach a snapshot stop.
            execute("s1", failing, json!("valid"), "e2"),
            get_operation("s1", "e2", "g3"),
            poll("s1", "e2", "f4"),
            cancel_consistent("f4", "o1"),
        ],
        vec![negotiate("s5", &caps)],
        vec![execute(
            "s5",
            json!({"name": "sync_portfolio"}),
            json!("valid"),
            "e6",
        )],
    ])
}

#[test]
fn a_failed_operations_cancel_judgement_shifts_no_request_id() {
    for target in ["sim", "sim:variant=cancel_refused_committed"] {
        let j = judge(
            target,
            "reference.toml",
            &failed_operation_judged_then_called_again(),
        );
        assert_passes(&j, target);
    }
}

/// The snapshot `cancel_consistent` takes after a succeeded operation (and
/// not after a failed one) draws its request id from the observer's own
/// stream: the oracle's quick business (the operation succeeds) and the
/// target (it failed) then send the next call with the same request id,
/// and the target's business answer to it is repeated in both flavours. A
/// ten-minute clean run of `negotiate_errors_without_version` found the
/// shift: the quick flavour, no longer repeating the target's refusal,
/// counted an effect the slow one counted too (an error that may have
/// committed), and the target's zero was charged.
fn judged_failure_then_refused_call() -> Vec<Move> {
    moves(vec![
        vec![negotiate("s2", &["async_operations", "cancellation"])],
        vec![
            step(json!({"do": "observe", "bind": "o9"}), Meta::Plain),
            execute(
                "s2",
                json!({"profile_role": "failing_operation"}),
                json!("valid"),
                "e3",
            ),
            get_operation("s2", "e3", "g4"),
        ],
        vec![negotiate("s7", &["large_results"])],
        vec![poll("s2", "e3", "f10"), cancel_consistent("f10", "o9")],
        vec![
            step(json!({"do": "observe", "bind": "o13"}), Meta::Plain),
            execute(
                "s7",
                json!({"name": "sync_portfolio"}),
                json!({"json": {"fail": true}}),
                "e12",
            ),
            effects_after("p14", "o13", "e12", &["CETP2-6-01"]),
        ],
    ])
}

#[test]
fn a_snapshot_some_flavours_take_moves_no_request_id_of_the_calls_after_it() {
    for target in ["sim", "sim:variant=negotiate_errors_without_version"] {
        let j = judge(
            target,
            "reference.toml",
            &judged_failure_then_refused_call(),
        );
        assert_passes(&j, target);
    }
}

/// The differential oracle on the same denial: the legal variant that
/// refuses the escalation outright has no resolution to deny, so it stops
/// at the deny step. That stop is its latitude, not a step to drop for
/// every member (which left a case that denied nothing, and
/// `denial_not_recorded` passed it); and a target that refuses the same
/// way is left unjudged there, not charged.
#[test]
fn the_differential_oracle_keeps_a_denial_a_variant_cannot_reach() {
    let m = denied_then_retried();
    let differential = || OracleChoice::Differential;
    assert_found(
        &judge_with(
            differential(),
            "sim:mutant=denial_not_recorded",
            "reference.toml",
            &m,
        ),
        "denial_not_recorded",
        "CETP2-6-04",
    );
    // The reference judges the sequence to its end: the kept denial is
    // what a passing target is held to.
    let clean = judge_with(differential(), "sim", "reference.toml", &m);
    assert!(matches!(clean, Judgement::Pass), "sim: {clean:?}");
    for target in [
        "sim:variant=escalation_refused",
        "sim:variant=validate_before_dedupe",
        "sim:variant=replay_returns_terminal",
        "sim:variant=confirm_with_auth_required",
        "sim:variant=dedupe_raw_args",
    ] {
        assert_passes(
            &judge_with(differential(), target, "reference.toml", &m),
            target,
        );
    }
}

/// Backing out of the confirmation, asking again under the same request id,
/// approving, resuming: the sequence of a fuzz finding on the Java sample,
/// whose confirmation records Back as a refusal.
fn dismissed_then_approved() -> Vec<Move> {
    let tool = json!({"name": "create_alert"});
    moves(vec![
        vec![negotiate("s1", &[])],
        vec![
            execute("s1", tool.clone(), json!("escalating"), "e2"),
            step(
                json!({"do": "resolve", "as": "a", "handle": "${e2/resolution/handle}",
                    "decision": "dismiss", "requirements": []}),
                Meta::Plain,
            ),
            call(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                "tool": tool, "args": {"same_as": "e2"}, "request_id": "${e2/_request/request_id}",
                "bind": "r3", "requirements": ["CETP2-6-04"]}),
            ),
            step(
                json!({"do": "resolve", "as": "a", "handle": "${r3/resolution/handle}",
                    "decision": "approve", "requirements": []}),
                Meta::Optional,
            ),
            step(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                "tool": tool, "args": {"same_as": "e2"}, "request_id": "${e2/_request/request_id}",
                "resume_token": "${r3/resume_token}", "bind": "r4", "expect": {},
                "requirements": ["CETP2-4.3-05", "CETP2-6-04"]}),
                Meta::Optional,
            ),
        ],
    ])
}

/// §5 lets USER_CANCELLED report an abandoned confirmation: a Provider that
/// takes Back as the user's refusal (`dismiss_cancels`, as the Java sample
/// did) passes the descriptor oracle, as the reference, which asks again.
#[test]
fn a_dismissal_taken_as_refusal_passes_the_descriptor_oracle() {
    for target in ["sim", "sim:variant=dismiss_cancels"] {
        let j = judge(target, "reference.toml", &dismissed_then_approved());
        assert_passes(&j, target);
    }
}

/// An escalated call that runs at once, then the user's decision on the
/// resolution it never returned: the finding is the call (§3.4,
/// CETP2-3.4-12), where a replay of the file FAILs first, not the resolve
/// that had nothing to launch because of it (the Kotlin sample's
/// `pin-unconfirmed`, charged to the resolve before).
#[test]
fn an_escalated_call_run_at_once_is_the_finding_not_the_resolve_after_it() {
    let tool = json!({"name": "create_alert"});
    let m = moves(vec![
        vec![negotiate("s1", &[])],
        vec![
            call(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                "tool": tool, "args": "escalating", "bind": "e2",
                "expect": {"status": ["success", "accepted", "error"]},
                "requirements": ["CETP2-4.3-01", "CETP2-4.3-05", "CETP2-3.4-12"]}),
            ),
            step(
                json!({"do": "resolve", "as": "a", "handle": "${e2/resolution/handle}",
                    "decision": "approve", "requirements": ["CETP2-4.3-02"]}),
                Meta::Plain,
            ),
        ],
    ]);
    let j = judge("sim:mutant=no_escalation", "reference.toml", &m);
    match &j {
        Judgement::Finding { signature, .. } => assert!(
            signature.starts_with("step call") && signature.contains("CETP2-3.4-12"),
            "charged to another step: {j:?}"
        ),
        other => panic!("not found: {other:?}"),
    }
    assert_passes(&judge("sim", "reference.toml", &m), "sim");
}
