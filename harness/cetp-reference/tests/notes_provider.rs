//! The notes app hosted by the shared engine: every method and shape that
//! differs from the reference app, in one in-process session each.

mod provider_support;

use cetp_proto::canonical::sha256_hex;
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, validate_v1_tool_list,
    NegotiateContext, ToolListContext,
};
use cetp_proto::discovery::{check_same_package, parse_declared, plan, Plan};
use cetp_proto::envelope::{is_uuid, keys, V1Response};
use cetp_proto::provider::Decision;
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use cetp_proto::Value;
use cetp_reference::app::ProviderApp;
use cetp_reference::provider::{
    FixtureSet, ProviderConfig, ReferenceProvider, ARCHIVE_BACKGROUND_OVER, NOTES_AUTHORITY,
    NOTES_PACKAGE, NOTES_UID,
};
use provider_support::*;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;

fn assert_error(o: &Outcome, code: &str) {
    assert_eq!(o.status(), "error", "{:?}", o.bundle);
    assert_eq!(o.code().as_deref(), Some(code), "{:?}", o.bundle);
    assert_eq!(o.protocol_version(), Some(&Value::Int(2)), "{:?}", o.bundle);
    assert!(o.retryable().is_some(), "{:?}", o.bundle);
    assert!(!o.message().is_empty());
}

fn op_state(o: &Outcome) -> String {
    o.data()["state"].as_str().unwrap_or_default().to_string()
}

fn caps_set(caps: &[&str]) -> BTreeSet<String> {
    caps.iter().map(|s| s.to_string()).collect()
}

fn is_base32(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(&c))
}

/// `n` notes added by identity a, request ids from `first`.
fn add_many(w: &World, first: u64, n: u64) -> Vec<String> {
    (0..n)
        .map(|i| w.add_note(A, &rid(first + i), &format!("note {i}")))
        .collect()
}

fn archive_ids(ids: &[String]) -> String {
    json!({ "note_ids": ids }).to_string()
}

#[test]
fn manifest_negotiation_and_identity() {
    let mut w = World::notes();
    let m = w.p.manifests();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].package, NOTES_PACKAGE);
    assert!(check_same_package(&m[0]).is_ok());
    let d = parse_declared(&m[0].meta).unwrap();
    assert_eq!(d.authority, NOTES_AUTHORITY);
    assert_eq!(w.p.authority(), NOTES_AUTHORITY);
    assert_eq!(d.versions, [1, 2].into_iter().collect());
    assert_eq!(d.legacy_version, Some(1));
    assert_eq!(plan(&d, &[2, 1]), Plan::NegotiateV2);

    let o = w.negotiate_raw(A, &[2, 1], ALL_CAPS);
    let offered: Vec<String> = ALL_CAPS.iter().map(|s| s.to_string()).collect();
    let ours: BTreeSet<i32> = [1, 2].into();
    let (n, v) = validate_negotiate(
        &o.data(),
        &NegotiateContext {
            consumer_versions: &[2, 1],
            consumer_capabilities: &offered,
            provider_versions: Some(&ours),
            package: Some(NOTES_PACKAGE),
        },
    );
    assert!(v.is_empty(), "{v:?}");
    assert_eq!(n.selected_version, 2);
    assert_eq!(n.capabilities, caps_set(ALL_CAPS));
    assert_eq!(n.provider_id, NOTES_PACKAGE);
    assert_eq!(o.data()["provider_name"], "ClawSeed Notes");
    assert_eq!(n.limit("max_request_bytes"), Some(131_072));
    assert_eq!(n.limit("idempotency_window_seconds"), Some(172_800));
    assert_eq!(n.limit("max_concurrent_requests"), Some(8));
    // Half an hour, unlike the reference's hour.
    assert_eq!(o.data()["expires_at"], "2026-09-02T12:30:00Z");
    let token = n.session_token.strip_prefix("ns1.").expect("ns1. token");
    assert_eq!(token.len(), 43);
    assert!(token
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));

    w.connect(A);
    let info = w.v2(A, "get_provider_info", &rid(1));
    let (s, v) = validate_provider_info(&info.data(), Some(NOTES_PACKAGE));
    assert!(v.is_empty(), "{v:?}");
    assert_eq!(
        s.scopes,
        ["notes.archive", "notes.read", "notes.write"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

#[test]
fn tools_have_their_own_shape() {
    let mut w = World::notes();
    let mut revisions = BTreeSet::new();
    for caps in [&[][..], ALL_CAPS] {
        w.connect_with(A, caps);
        let info = w.v2(A, "get_provider_info", &rid(1)).data();
        let (summary, _) = validate_provider_info(&info, Some(NOTES_PACKAGE));
        let o = w.v2(A, "list_tools", &rid(2));
        let negotiated = caps_set(caps);
        let (list, v) = validate_tool_list(
            &o.data(),
            &ToolListContext {
                negotiated: &negotiated,
                known_scopes: Some(&summary.scopes),
                dialect: DEFAULT_DIALECT,
            },
        );
        assert!(v.is_empty(), "{v:?}");
        let shape: Vec<(&str, &str, &str, &str, &str)> = list
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.effect.as_str(),
                    t.risk.as_str(),
                    t.confirmation.as_str(),
                    t.execution.as_str(),
                )
            })
            .collect();
        let archive_execution = if caps.is_empty() {
            "sync"
        } else {
            "sync_or_async"
        };
        assert_eq!(
            shape,
            [
                ("list_notes", "read", "low", "never", "sync"),
                ("get_note", "read", "low", "never", "sync"),
                ("add_note", "create", "moderate", "provider_policy", "sync"),
                ("delete_note", "delete", "high", "always", "sync"),
                (
                    "archive_notes",
                    "update",
                    "moderate",
                    "never",
                    archive_execution
                ),
                ("export_notes", "read", "low", "never", "sync"),
            ]
        );
        let delete = &o.data()["tools"][3];
        assert_eq!(delete["annotations"]["destructive"], true);
        assert_eq!(delete["annotations"]["idempotent"], false);
        assert_eq!(o.data()["tools"][4]["scopes"], json!(["notes.archive"]));
        revisions.insert(o.data()["revision"].to_string());
    }
    assert_eq!(revisions.len(), 2);
}

#[test]
fn list_get_and_add() {
    let mut w = World::notes();
    w.connect(A);
    assert_eq!(
        w.exec(A, &rid(1), "list_notes", "{}").value(),
        json!({"notes": []})
    );
    let id = w.add_note(A, &rid(2), "Groceries");
    let suffix = id.strip_prefix("n_").expect("n_ id");
    assert_eq!(suffix.len(), 10);
    assert!(is_base32(suffix), "{id}");
    let second = w.add_note(A, &rid(3), "Ideas");
    // Oldest first, and never anything but the notes.
    let list = w.exec(A, &rid(4), "list_notes", "{}").value();
    assert_eq!(
        list,
        json!({"notes": [
            {"note_id": id, "title": "Groceries", "archived": false},
            {"note_id": second, "title": "Ideas", "archived": false},
        ]})
    );
    let got = w.exec(
        A,
        &rid(5),
        "get_note",
        &json!({ "note_id": id }).to_string(),
    );
    assert_eq!(
        got.value(),
        json!({"note_id": id, "title": "Groceries", "body": "", "archived": false, "shared": false})
    );
    let missing = w.exec(A, &rid(6), "get_note", r#"{"note_id":"n_aaaaaaaaaa"}"#);
    assert_error(&missing, "INVALID_ARGS");
    assert_eq!(missing.retryable(), Some(false));
    // Business validation beyond the schema (§7.3).
    assert_error(
        &w.exec(A, &rid(7), "add_note", r#"{"title":"   "}"#),
        "INVALID_ARGS",
    );
    assert_error(
        &w.exec(A, &rid(8), "archive_notes", r#"{"all":false}"#),
        "INVALID_ARGS",
    );
    assert_error(
        &w.exec(
            A,
            &rid(9),
            "archive_notes",
            r#"{"all":true,"note_ids":["x"]}"#,
        ),
        "INVALID_ARGS",
    );
    assert_eq!(w.note_count(), 2);
}

#[test]
fn sharing_publicly_escalates_to_a_confirmation() {
    let mut w = World::notes();
    w.connect(A);
    let args = r#"{"title":"Party","share_publicly":true}"#;
    let ask = w.exec(A, &rid(1), "add_note", args);
    assert_error(&ask, "USER_ACTION_REQUIRED");
    let token = ask.resume_token().unwrap();
    let rt = token.strip_prefix("rt_").expect("rt_ token");
    assert_eq!(rt.len(), 32);
    assert!(is_base32(rt));
    let target = ask.resolution().unwrap();
    assert_eq!(
        target.component.as_deref(),
        Some("com.clawseed.notes/.ConfirmActivity")
    );
    assert_eq!(
        (target.creator_package.as_str(), target.creator_uid),
        (NOTES_PACKAGE, NOTES_UID)
    );
    assert!(ask.message().contains("ClawSeed Notes"));
    assert_eq!(w.note_count(), 0);
    let done = w.exec_confirmed(A, &rid(1), "add_note", args, Decision::Approve);
    assert!(done.is_success(), "{:?}", done.bundle);
    let id = done.value()["note_id"].as_str().unwrap().to_string();
    let got = w.exec(
        A,
        &rid(2),
        "get_note",
        &json!({ "note_id": id }).to_string(),
    );
    assert_eq!(got.value()["shared"], true);
    // Denied: nothing is added, and the denial is the id's terminal answer.
    let denied = w.exec_confirmed(A, &rid(3), "add_note", args, Decision::Deny);
    assert_error(&denied, "USER_CANCELLED");
    assert_eq!(w.exec(A, &rid(3), "add_note", args).bundle, denied.bundle);
    assert_eq!(w.note_count(), 1);
    // Not shared: no confirmation.
    assert!(w
        .exec(A, &rid(4), "add_note", r#"{"title":"Quiet"}"#)
        .is_success());
}

#[test]
fn delete_needs_confirmation_and_an_existing_note() {
    let mut w = World::notes();
    w.connect(A);
    let id = w.add_note(A, &rid(1), "Old");
    let args = json!({ "note_id": id }).to_string();
    let ask = w.exec(A, &rid(2), "delete_note", &args);
    assert_error(&ask, "USER_ACTION_REQUIRED");
    assert_eq!(w.note_count(), 1, "no effect before the confirmation");
    w.decide(A, &ask, Decision::Approve);
    let done = w.resume(
        A,
        &rid(2),
        "delete_note",
        &args,
        &ask.resume_token().unwrap(),
    );
    assert!(done.is_success(), "{:?}", done.bundle);
    assert_eq!(done.value(), json!({"note_id": id, "deleted": true}));
    assert_eq!(w.note_count(), 0);
    // The same id again: the recorded result, not a second delete.
    assert_eq!(w.exec(A, &rid(2), "delete_note", &args).bundle, done.bundle);
    // A new delete of the gone note is confirmed, then fails.
    let again = w.exec_confirmed(A, &rid(3), "delete_note", &args, Decision::Approve);
    assert_error(&again, "CONFLICT");
    assert_eq!(again.retryable(), Some(false));
    let details = again.bundle.get_json(keys::ERROR_DETAILS).unwrap();
    assert_eq!(details["missing_note_ids"], json!([id]));
    assert_eq!(
        w.exec(A, &rid(3), "delete_note", &args).bundle,
        again.bundle
    );
}

#[test]
fn small_archives_run_synchronously() {
    let mut w = World::notes();
    w.connect(A);
    let ids = add_many(&w, 100, 3);
    let o = w.exec(A, &rid(1), "archive_notes", &archive_ids(&ids[..2]));
    assert!(o.is_success(), "{:?}", o.bundle);
    assert_eq!(o.value(), json!({"archived": 2}));
    assert_eq!(w.archived(&ids[0]), Some(true));
    assert_eq!(w.archived(&ids[2]), Some(false));
    // Archiving an archived note changes nothing and says so.
    let o = w.exec(A, &rid(2), "archive_notes", &archive_ids(&ids[..1]));
    assert_eq!(o.value(), json!({"archived": 0}));
    // One unknown id: nothing is archived.
    let mut bad = ids[1..].to_vec();
    bad.push("n_zzzzzzzzzz".into());
    let o = w.exec(A, &rid(3), "archive_notes", &archive_ids(&bad));
    assert_error(&o, "CONFLICT");
    assert_eq!(w.archived(&ids[2]), Some(false));
    // Large inputs run synchronously too when async was not negotiated.
    w.connect_with(A, &["large_results"]);
    let o = w.exec(A, &rid(4), "archive_notes", r#"{"all":true}"#);
    assert!(o.is_success(), "{:?}", o.bundle);
    assert_eq!(o.value(), json!({"archived": 1}));
}

#[test]
fn large_archives_run_in_the_background() {
    let mut w = World::notes();
    w.connect(A);
    let ids = add_many(&w, 100, ARCHIVE_BACKGROUND_OVER as u64 + 1);
    // Exactly the threshold: synchronous.
    let o = w.exec(
        A,
        &rid(1),
        "archive_notes",
        &archive_ids(&ids[..ARCHIVE_BACKGROUND_OVER]),
    );
    assert_eq!(o.status(), "success", "{:?}", o.bundle);
    let args = archive_ids(&ids);
    let acc = w.exec(A, &rid(2), "archive_notes", &args);
    assert_eq!(acc.status(), "accepted", "{:?}", acc.bundle);
    assert_eq!(acc.request_id(), Some(rid(2)));
    assert_eq!(acc.data()["poll_after_ms"], 250);
    let op = acc.operation_id().unwrap();
    assert!(is_uuid(&op), "{op}");
    assert_eq!(op_state(&w.get_op(A, &rid(2), &op)), "queued");
    w.now += 450;
    let r = w.get_op(A, &rid(2), &op);
    assert_eq!(op_state(&r), "running");
    assert_eq!(r.data()["progress"]["current"], 50);
    assert_eq!(r.data()["progress"]["message"], "Archiving notes");
    assert_eq!(w.archived(ids.last().unwrap()), Some(false));
    w.now += 350;
    let s = w.get_op(A, &rid(2), &op);
    assert_eq!(op_state(&s), "succeeded");
    assert_eq!(
        s.data()["result"],
        json!({"kind": "inline", "value": {"archived": 1}})
    );
    assert_eq!(w.archived(ids.last().unwrap()), Some(true));
    assert_eq!(
        w.exec(A, &rid(2), "archive_notes", &args).bundle,
        acc.bundle
    );
    assert_error(&w.cancel_op(A, &rid(2), &op), "CONFLICT");
}

#[test]
fn a_background_archive_of_a_missing_note_fails() {
    let mut w = World::notes();
    w.connect(A);
    let mut ids = add_many(&w, 100, ARCHIVE_BACKGROUND_OVER as u64);
    ids.push("n_zzzzzzzzzz".into());
    let op = w
        .exec(A, &rid(1), "archive_notes", &archive_ids(&ids))
        .operation_id()
        .expect("accepted");
    w.now += 800;
    let f = w.get_op(A, &rid(1), &op);
    assert_eq!(op_state(&f), "failed");
    let e = &f.data()["error"];
    assert_eq!(e["error_code"], "CONFLICT");
    assert_eq!(e["retryable"], false);
    assert!(e["error_message"].is_string());
    assert_eq!(
        e["error_details"]["missing_note_ids"],
        json!(["n_zzzzzzzzzz"])
    );
    assert_eq!(w.archived(&ids[0]), Some(false), "nothing archived");
}

#[test]
fn a_cancelled_background_archive_archives_nothing() {
    let mut w = World::notes();
    w.connect(A);
    let id = w.add_note(A, &rid(100), "Keep");
    let op = w
        .exec(A, &rid(1), "archive_notes", r#"{"all":true}"#)
        .operation_id()
        .expect("accepted");
    w.now += 200;
    let c = w.cancel_op(A, &rid(1), &op);
    assert_eq!(
        c.data(),
        json!({"operation_id": op, "state": "cancellation_requested"})
    );
    w.now += 1000;
    assert_eq!(op_state(&w.get_op(A, &rid(1), &op)), "cancelled");
    assert_eq!(w.archived(&id), Some(false));
}

#[test]
fn large_exports_need_large_results() {
    let mut w = World::notes();
    w.connect(A);
    w.add_note(A, &rid(100), "One");
    let small = w.exec(A, &rid(1), "export_notes", r#"{"copies":2}"#);
    assert_eq!(small.data()["kind"], "inline");
    assert_eq!(small.value()["copies"].as_array().unwrap().len(), 2);
    let big = w.exec(A, &rid(2), "export_notes", r#"{"copies":5000}"#);
    let data = big.data();
    assert_eq!(data["kind"], "file", "{:?}", big.bundle);
    let bytes = big.file().expect("result_fd");
    assert_eq!(data["size_bytes"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(data["sha256"].as_str(), Some(sha256_hex(&bytes).as_str()));
    let value: Json = serde_json::from_slice(&bytes).unwrap();
    let tools = w.v2(A, "list_tools", &rid(3)).data();
    let schema = &tools["tools"][5]["output_schema"];
    assert!(CompiledSchema::compile(schema, DEFAULT_DIALECT)
        .unwrap()
        .is_valid(&value));
    assert_eq!(value["copies"].as_array().unwrap().len(), 5000);
    w.connect_with(A, &["async_operations", "cancellation"]);
    assert_error(
        &w.exec(A, &rid(4), "export_notes", r#"{"copies":5000}"#),
        "RESULT_TOO_LARGE",
    );
}

#[test]
fn adds_are_deduplicated_and_survive_restart() {
    let mut w = World::notes();
    w.connect(A);
    let args = r#"{"title":"Once"}"#;
    let first = w.exec(A, &rid(1), "add_note", args);
    assert_eq!(w.exec(A, &rid(1), "add_note", args).bundle, first.bundle);
    assert_error(
        &w.exec(A, &rid(1), "add_note", r#"{"title":"Twice"}"#),
        "INVALID_REQUEST",
    );
    // Same content, key order changed: the same request.
    let reordered = w.exec(A, &rid(2), "add_note", r#"{"body":"b","title":"T"}"#);
    assert_eq!(
        w.exec(A, &rid(2), "add_note", r#"{"title":"T","body":"b"}"#)
            .bundle,
        reordered.bundle
    );
    let op = w
        .exec(A, &rid(3), "archive_notes", r#"{"all":true}"#)
        .operation_id()
        .expect("accepted");
    w.restart();
    assert_error(&w.v2(A, "list_tools", &rid(4)), "NEGOTIATION_REQUIRED");
    w.connect(A);
    assert_eq!(w.exec(A, &rid(1), "add_note", args).bundle, first.bundle);
    assert_eq!(w.note_count(), 2);
    w.now += 800;
    let s = w.get_op(A, &rid(3), &op);
    assert_eq!(op_state(&s), "succeeded");
    assert_eq!(s.data()["result"]["value"], json!({"archived": 2}));
    // The idempotency window is two days here.
    w.now = T0 + 172_800_000;
    w.connect(A);
    assert_eq!(w.exec(A, &rid(1), "add_note", args).bundle, first.bundle);
    assert_eq!(w.note_count(), 2);
}

#[test]
fn scopes_are_the_notes_scopes() {
    let mut c = ProviderConfig::notes();
    let mut b_scopes = FixtureSet::Notes.all_scopes();
    b_scopes.remove("notes.archive");
    c.grants.insert(B, b_scopes);
    let mut w = World::with_config(c);
    w.connect(A);
    w.connect(B);
    let id = w.add_note(B, &rid(1), "Mine");
    let o = w.exec(
        B,
        &rid(2),
        "archive_notes",
        &archive_ids(std::slice::from_ref(&id)),
    );
    assert_error(&o, "AUTH_REQUIRED");
    assert_eq!(
        o.resolution().unwrap().component.as_deref(),
        Some("com.clawseed.notes/.GrantActivity")
    );
    assert_eq!(w.archived(&id), Some(false));
    // Callers the app does not know read only.
    let mut fresh = World::notes();
    fresh.connect(B);
    assert_error(
        &fresh.exec(B, &rid(1), "add_note", r#"{"title":"x"}"#),
        "AUTH_REQUIRED",
    );
    assert!(fresh.exec(B, &rid(2), "list_notes", "{}").is_success());
}

#[test]
fn v1_view_lists_only_reads() {
    let w = World::notes();
    let o = w.call(B, "list_tools", None);
    let V1Response::Success(data) = V1Response::from_bundle(&o.bundle).unwrap() else {
        panic!("{:?}", o.bundle)
    };
    let (names, v) = validate_v1_tool_list(&data);
    assert!(v.is_empty());
    assert_eq!(names, ["list_notes", "get_note", "export_notes"]);
}

#[test]
fn tokens_and_ids_follow_the_seed() {
    let run = |seed| {
        let mut w = World::new(ReferenceProvider::new(ProviderConfig {
            seed,
            ..ProviderConfig::notes()
        }));
        let token = w.connect(A);
        (token, w.add_note(A, &rid(1), "x"))
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}
