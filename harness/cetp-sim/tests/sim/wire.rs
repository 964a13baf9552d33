//! Every op over an in-process pipe (`tokio::io::duplex`).

use crate::support::*;
use cetp_proto::canonical::sha256_hex;
use cetp_proto::envelope::keys;
use cetp_proto::provider::Decision;
use cetp_proto::Value;
use cetp_reference::provider::ManifestVariant;
use cetp_reference::provider::{AUTHORITY, IMPOSTOR_PACKAGE, PACKAGE, PROVIDER_UID};
use cetp_sim::{SimConfig, MAX_OUTSTANDING_REQUESTS};
use cetp_wire::ops::{
    DiscoverOk, OkPayload, OpRequest, ReadFdOk, ReadFdParams, ResolveOk, ResolveParams,
};
use cetp_wire::{ErrorKind, Final, Frame, Json, MAX_CHUNK_BYTES, MAX_FRAME_BYTES};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

fn host_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn hello_reports_identity_device_and_device_time() {
    let sim = sim(SimConfig {
        clock_skew_ms: 7_200_000,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&sim, "a");
    let h = c.hello().await;
    assert_eq!(h.wire, 1);
    assert_eq!(h.probe, format!("cetp-sim/{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(h.identity.name, "a");
    assert_eq!(h.identity.uid, 10123);
    assert_eq!(h.identity.packages, ["com.clawseed.probe"]);
    assert_eq!(h.identity.cert_sha256.len(), 1);
    assert_eq!(h.identity.cert_sha256[0].len(), 64);
    assert_eq!(h.device.sdk_int, 34);
    assert_eq!(h.device.model, "cetp-sim");
    assert!(!h.device.fingerprint.is_empty());
    let skew = h.now_ms - host_now_ms();
    assert!(
        (skew - 7_200_000).abs() < 10_000,
        "device time is host time + skew: {skew}"
    );
    for op in [
        "hello",
        "discover",
        "call",
        "read_fd",
        "close_fd",
        "resolve",
        "restart_provider",
        "host_provider",
        "reply",
    ] {
        assert!(
            h.ops.iter().any(|o| o == op),
            "{op} missing from {:?}",
            h.ops
        );
    }
    let mut b = Client::duplex(&sim, "b");
    let hb = b.hello().await;
    assert_eq!(hb.identity.uid, 10200);
    assert_eq!(hb.identity.packages, ["com.clawseed.probe.b"]);
    assert_ne!(hb.identity.cert_sha256, h.identity.cert_sha256);
}

#[tokio::test]
async fn discover_lists_the_hosted_app() {
    let mut c = Client::duplex(&reference(), "a");
    let d = DiscoverOk::from_ok(&c.ok(OpRequest::Discover).await).unwrap();
    assert_eq!(d.providers.len(), 1);
    let p = &d.providers[0];
    assert_eq!(p.package, PACKAGE);
    assert_eq!(p.authority_package.as_deref(), Some(PACKAGE));
    assert!(p.exported);
    assert_eq!(
        p.meta
            .get("com.clawseed.tools.authority")
            .map(String::as_str),
        Some(AUTHORITY)
    );
    assert_eq!(
        p.meta
            .get("com.clawseed.tools.versions")
            .map(String::as_str),
        Some("1,2")
    );

    let mismatched = sim(SimConfig {
        manifest: ManifestVariant::MismatchedPackage,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&mismatched, "a");
    let d = DiscoverOk::from_ok(&c.ok(OpRequest::Discover).await).unwrap();
    assert_eq!(
        d.providers[0].authority_package.as_deref(),
        Some(IMPOSTOR_PACKAGE)
    );
    let v2 = sim(SimConfig {
        manifest: ManifestVariant::V2Only,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&v2, "a");
    let d = DiscoverOk::from_ok(&c.ok(OpRequest::Discover).await).unwrap();
    assert_eq!(
        d.providers[0]
            .meta
            .get("com.clawseed.tools.versions")
            .map(String::as_str),
        Some("2")
    );
}

#[tokio::test]
async fn negotiate_then_list_tools() {
    let mut c = Client::duplex(&reference(), "a");
    let now = c.hello().await.now_ms;
    let ok = c
        .call("negotiate", Some(negotiate_extras(&["async_operations"])))
        .await
        .unwrap();
    let b = ok.result.expect("bundle");
    assert_eq!(status(&b), "success");
    assert_eq!(b.get(keys::PROTOCOL_VERSION), Some(&Value::Int(2)));
    let token = data(&b)["session_token"].as_str().unwrap().to_string();
    let tools = c
        .bundle("list_tools", Some(common(&token, &rid(1), now)))
        .await;
    assert_eq!(status(&tools), "success", "{tools:?}");
    let names: Vec<String> = data(&tools)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"get_quote".to_string()), "{names:?}");
    assert!(names.contains(&"export_history".to_string()));
    // A v2 error is a successful call.
    let unknown = c
        .call("no_such_method", Some(common(&token, &rid(2), now)))
        .await
        .unwrap();
    assert_eq!(
        code(&unknown.result.unwrap()).as_deref(),
        Some("METHOD_NOT_FOUND")
    );
}

async fn on_notes(c: &mut Client, method: &str, extras: cetp_proto::Bundle) -> cetp_proto::Bundle {
    c.call_on(
        cetp_reference::provider::NOTES_AUTHORITY,
        method,
        Some(extras),
        10_000,
    )
    .await
    .unwrap_or_else(|e| panic!("{method}: {e}"))
    .result
    .expect("a Bundle")
}

#[tokio::test]
async fn the_notes_app_is_hosted_with_its_own_package_and_scopes() {
    use cetp_reference::provider::{FixtureSet, NOTES_AUTHORITY, NOTES_PACKAGE};
    let notes = sim(SimConfig {
        provider: FixtureSet::Notes,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&notes, "a");
    let now = c.hello().await.now_ms;
    let d = DiscoverOk::from_ok(&c.ok(OpRequest::Discover).await).unwrap();
    assert_eq!(d.providers.len(), 1);
    assert_eq!(d.providers[0].package, NOTES_PACKAGE);
    assert_eq!(
        d.providers[0]
            .meta
            .get("com.clawseed.tools.authority")
            .map(String::as_str),
        Some(NOTES_AUTHORITY)
    );
    let offer = negotiate_extras(&["async_operations"]);
    let negotiated = on_notes(&mut c, "negotiate", offer.clone()).await;
    let token_a = data(&negotiated)["session_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(token_a.starts_with("ns1."), "{token_a}");
    let tools = on_notes(&mut c, "list_tools", common(&token_a, &rid(1), now)).await;
    let names: Vec<String> = data(&tools)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "list_notes",
            "get_note",
            "add_note",
            "delete_note",
            "archive_notes",
            "export_notes"
        ]
    );
    // Identity b writes notes but may not archive them.
    let mut b = Client::duplex(&notes, "b");
    let negotiated = on_notes(&mut b, "negotiate", offer).await;
    let token_b = data(&negotiated)["session_token"]
        .as_str()
        .unwrap()
        .to_string();
    let add = exec_extras(&token_b, &rid(2), now, "add_note", r#"{"title":"b's"}"#);
    let added = on_notes(&mut b, "execute_tool", add).await;
    assert_eq!(status(&added), "success", "{added:?}");
    let id = data(&added)["value"]["note_id"]
        .as_str()
        .unwrap()
        .to_string();
    let archive = exec_extras(
        &token_b,
        &rid(3),
        now,
        "archive_notes",
        &format!(r#"{{"note_ids":["{id}"]}}"#),
    );
    let refused = on_notes(&mut b, "execute_tool", archive).await;
    assert_eq!(code(&refused).as_deref(), Some("AUTH_REQUIRED"));
}

#[tokio::test]
async fn typed_values_keep_their_java_types() {
    let mut c = Client::duplex(&reference(), "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&[]).await;
    // protocol_version comes back as an Int, on the wire too.
    let id = c
        .send(&call_op(
            AUTHORITY,
            "list_tools",
            Some(common(&token, &rid(1), now)),
            5000,
        ))
        .await;
    let (_, fin) = c.final_for(id).await;
    let Final::Ok { ok, .. } = fin else {
        panic!("{fin:?}")
    };
    let pv = ok["result"].get("protocol_version").unwrap();
    assert_eq!(pv.get("t").and_then(Json::as_str), Some("int"));
    assert_eq!(pv.get("v").and_then(Json::as_i64), Some(2));
    // deadline_at_ms must be a Long: the same number as an Int is refused,
    // so the device did not collapse the two.
    let mut as_int = common(&token, &rid(2), now);
    as_int.insert(keys::DEADLINE_AT_MS, Value::Int(i32::MAX));
    let refused = c.bundle("list_tools", Some(as_int)).await;
    assert_eq!(
        code(&refused).as_deref(),
        Some("INVALID_REQUEST"),
        "{refused:?}"
    );
    let accepted = c
        .bundle("list_tools", Some(common(&token, &rid(3), now)))
        .await;
    assert_eq!(status(&accepted), "success");
    // A Long protocol_version is not the Int the spec requires.
    let mut long_version = common(&token, &rid(4), now);
    long_version.insert(keys::PROTOCOL_VERSION, Value::Long(2));
    let answer = c.bundle("list_tools", Some(long_version)).await;
    assert_ne!(status(&answer), "success", "{answer:?}");
}

#[tokio::test]
async fn requests_are_pipelined_and_answered_out_of_order() {
    let sim = sim(SimConfig {
        effect_delay_ms: 400,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&sim, "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&[]).await;
    let slow = c
        .send(&call_op(
            AUTHORITY,
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(1),
                now,
                "create_alert",
                r#"{"symbol":"CLAW","price":1}"#,
            )),
            10_000,
        ))
        .await;
    let fast = c
        .send(&call_op(
            AUTHORITY,
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(2),
                now,
                "get_quote",
                r#"{"symbol":"CLAW"}"#,
            )),
            10_000,
        ))
        .await;
    let first = c.next_frame().await.unwrap();
    assert_eq!(
        first.id(),
        Some(fast),
        "the fast call is answered first: {first:?}"
    );
    let (_, second) = c.final_for(slow).await;
    assert!(matches!(second, Final::Ok { .. }), "{second:?}");
}

#[tokio::test]
async fn concurrent_calls_with_one_request_id_execute_once() {
    let sim = sim(SimConfig {
        effect_delay_ms: 300,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&sim, "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&[]).await;
    let op = call_op(
        AUTHORITY,
        "execute_tool",
        Some(exec_extras(
            &token,
            &rid(7),
            now,
            "create_alert",
            r#"{"symbol":"CLAW","price":3}"#,
        )),
        10_000,
    );
    let started = std::time::Instant::now();
    let x = c.send(&op).await;
    let y = c.send(&op).await;
    let (_, fx) = c.final_for(x).await;
    let (_, fy) = c.final_for(y).await;
    let (Final::Ok { ok: ox, .. }, Final::Ok { ok: oy, .. }) = (fx, fy) else {
        panic!()
    };
    assert_eq!(ox["result"], oy["result"], "one execution, one result");
    // They overlapped: two sequential executions would take 600 ms.
    assert!(
        started.elapsed() < std::time::Duration::from_millis(550),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(sim.provider().effects(), 1);
}

#[tokio::test]
async fn large_results_are_read_in_chunks() {
    let mut c = Client::duplex(&reference(), "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&["large_results"]).await;
    let b = c
        .bundle(
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(1),
                now,
                "export_history",
                r#"{"rows":40000}"#,
            )),
        )
        .await;
    assert_eq!(status(&b), "success", "{b:?}");
    let d = data(&b);
    assert_eq!(d["kind"], "file");
    let Some(Value::Fd(fd)) = b.get(keys::RESULT_FD) else {
        panic!("{b:?}")
    };
    assert_eq!(fd.handle, "fd-1");
    let size = d["size_bytes"].as_u64().unwrap();
    assert!(size > 2 * MAX_CHUNK_BYTES as u64, "{size}");
    let id = c
        .send(&OpRequest::ReadFd(ReadFdParams {
            handle: fd.handle.clone(),
            max_bytes: u64::MAX,
        }))
        .await;
    let (chunks, fin) = c.final_for(id).await;
    assert!(chunks.len() >= 3, "{}", chunks.len());
    let mut all = Vec::new();
    for ch in &chunks {
        assert!(!ch.data.is_empty() && ch.data.len() <= MAX_CHUNK_BYTES);
        all.extend_from_slice(&ch.data);
    }
    let Final::Ok { ok, .. } = fin else {
        panic!("{fin:?}")
    };
    let r = ReadFdOk::from_ok(&ok).unwrap();
    assert_eq!(r.bytes, all.len() as u64);
    assert_eq!(r.bytes, size);
    assert!(r.eof);
    assert_eq!(r.error, None);
    assert_eq!(r.sha256, sha256_hex(&all));
    assert_eq!(d["sha256"].as_str(), Some(r.sha256.as_str()));
    serde_json::from_slice::<serde_json::Value>(&all).expect("the file is the JSON result");
    // Used up.
    let e = c
        .err(OpRequest::ReadFd(ReadFdParams {
            handle: fd.handle.clone(),
            max_bytes: 1,
        }))
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);

    // A partial read stops at max_bytes and says data was left.
    let b = c
        .bundle(
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(2),
                now,
                "export_history",
                r#"{"rows":40001}"#,
            )),
        )
        .await;
    let Some(Value::Fd(fd)) = b.get(keys::RESULT_FD) else {
        panic!("{b:?}")
    };
    let id = c
        .send(&OpRequest::ReadFd(ReadFdParams {
            handle: fd.handle.clone(),
            max_bytes: 1000,
        }))
        .await;
    let (chunks, fin) = c.final_for(id).await;
    let Final::Ok { ok, .. } = fin else {
        panic!("{fin:?}")
    };
    let r = ReadFdOk::from_ok(&ok).unwrap();
    assert_eq!((r.bytes, r.eof), (1000, false));
    let mut h = Sha256::new();
    chunks.iter().for_each(|c| h.update(&c.data));
    assert_eq!(r.sha256, hex::encode(h.finalize()));
}

#[tokio::test]
async fn descriptors_can_be_closed_unread_and_handles_are_per_connection() {
    let sim = reference();
    let mut c = Client::duplex(&sim, "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&["large_results"]).await;
    let b = c
        .bundle(
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(1),
                now,
                "export_history",
                r#"{"rows":5000}"#,
            )),
        )
        .await;
    let Some(Value::Fd(fd)) = b.get(keys::RESULT_FD) else {
        panic!("{b:?}")
    };
    // Another connection does not hold it.
    let mut other = Client::duplex(&sim, "a");
    let e = other
        .err(OpRequest::CloseFd {
            handle: fd.handle.clone(),
        })
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);
    assert!(c
        .ok(OpRequest::CloseFd {
            handle: fd.handle.clone()
        })
        .await
        .is_empty());
    let e = c
        .err(OpRequest::CloseFd {
            handle: fd.handle.clone(),
        })
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);
}

#[tokio::test]
async fn confirmation_is_resolved_end_to_end() {
    let sim = reference();
    let mut c = Client::duplex(&sim, "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&[]).await;
    let args = r#"{"symbol":"CLAW","price":25000}"#;
    let ask = c
        .bundle(
            "execute_tool",
            Some(exec_extras(&token, &rid(1), now, "create_alert", args)),
        )
        .await;
    assert_eq!(
        code(&ask).as_deref(),
        Some("USER_ACTION_REQUIRED"),
        "{ask:?}"
    );
    let Some(Value::PendingIntent(pi)) = ask.get(keys::RESOLUTION) else {
        panic!("{ask:?}")
    };
    assert_eq!(pi.handle, "pi-1");
    assert_eq!(pi.creator_package.as_deref(), Some(PACKAGE));
    assert_eq!(pi.creator_uid, Some(i64::from(PROVIDER_UID)));
    assert_eq!(pi.immutable, Some(true));
    let resume = ask.get_string(keys::RESUME_TOKEN).unwrap();
    assert_eq!(sim.provider().effects(), 0);
    let r = ResolveOk::from_ok(
        &c.ok(OpRequest::Resolve(ResolveParams {
            handle: pi.handle.clone(),
            decision: Decision::Approve,
            timeout_ms: 5000,
            ui: None,
        }))
        .await,
    )
    .unwrap();
    assert_eq!(
        (r.launched, r.decision_applied, r.result_code),
        (true, true, -1)
    );
    let done = c
        .bundle(
            "execute_tool",
            Some(
                exec_extras(&token, &rid(1), now, "create_alert", args)
                    .with(keys::RESUME_TOKEN, Value::str(resume)),
            ),
        )
        .await;
    assert_eq!(status(&done), "success", "{done:?}");
    assert_eq!(sim.provider().effects(), 1);
    // The PendingIntent was used up.
    let e = c
        .err(OpRequest::Resolve(ResolveParams {
            handle: pi.handle.clone(),
            decision: Decision::Deny,
            timeout_ms: 5000,
            ui: None,
        }))
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);
}

#[tokio::test]
async fn identity_b_lacks_the_portfolio_scope() {
    let sim = reference();
    let mut a = Client::duplex(&sim, "a");
    let mut b = Client::duplex(&sim, "b");
    let now = a.hello().await.now_ms;
    let ta = a.negotiate(&[]).await;
    let tb = b.negotiate(&[]).await;
    let ok = a
        .bundle(
            "execute_tool",
            Some(exec_extras(&ta, &rid(1), now, "sync_portfolio", "{}")),
        )
        .await;
    assert_eq!(status(&ok), "success", "{ok:?}");
    let denied = b
        .bundle(
            "execute_tool",
            Some(exec_extras(&tb, &rid(1), now, "sync_portfolio", "{}")),
        )
        .await;
    assert_eq!(
        code(&denied).as_deref(),
        Some("AUTH_REQUIRED"),
        "{denied:?}"
    );
    // b reads.
    let quote = b
        .bundle(
            "execute_tool",
            Some(exec_extras(
                &tb,
                &rid(2),
                now,
                "get_quote",
                r#"{"symbol":"CLAW"}"#,
            )),
        )
        .await;
    assert_eq!(status(&quote), "success");
}

#[tokio::test]
async fn restart_provider_loses_sessions() {
    let sim = reference();
    let mut c = Client::duplex(&sim, "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&[]).await;
    assert_eq!(
        status(
            &c.bundle("list_tools", Some(common(&token, &rid(1), now)))
                .await
        ),
        "success"
    );
    assert!(c
        .ok(OpRequest::RestartProvider {
            package: PACKAGE.into()
        })
        .await
        .is_empty());
    let after = c
        .bundle("list_tools", Some(common(&token, &rid(2), now)))
        .await;
    assert_eq!(
        code(&after).as_deref(),
        Some("NEGOTIATION_REQUIRED"),
        "{after:?}"
    );
    let e = c
        .err(OpRequest::RestartProvider {
            package: "com.nobody".into(),
        })
        .await;
    assert_eq!(e.kind, ErrorKind::BadRequest);
    assert!(sim
        .log_lines()
        .iter()
        .any(|l| l.contains("force-stop com.clawseed.reference")));
}

#[tokio::test]
async fn device_errors() {
    let mut c = Client::duplex(&reference(), "a");
    let e = c
        .err(OpRequest::Unknown {
            op: "teleport".into(),
            params: Default::default(),
        })
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownOp);
    let e = c
        .err(call_op(
            "com.nobody.clawseed.tools",
            "negotiate",
            None,
            1000,
        ))
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownAuthority);
    let e = c
        .err(OpRequest::CloseFd {
            handle: "fd-99".into(),
        })
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);
    let e = c
        .err(OpRequest::Resolve(ResolveParams {
            handle: "pi-3".into(),
            decision: Decision::Approve,
            timeout_ms: 100,
            ui: None,
        }))
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);
    // Wrong parameter types, and a frame the device cannot use, keep the id.
    c.send_raw(b"{\"id\":41,\"op\":\"call\",\"authority\":7}\n")
        .await
        .unwrap();
    c.send_raw(b"{\"id\":42,\"op\":7}\n").await.unwrap();
    c.send_raw(b"{\"id\":43,\"ok\":{}}\n").await.unwrap();
    for id in [41, 42, 43] {
        let (_, f) = c.final_for(id).await;
        let Final::Error { error, .. } = f else {
            panic!("{f:?}")
        };
        assert_eq!(error.kind, ErrorKind::BadRequest, "{id}: {error}");
    }
    // Still usable.
    assert_eq!(c.hello().await.identity.name, "a");
    // Bad JSON carries no id: the connection is closed.
    c.send_raw(b"{\"id\":44,\"op\":\"hello\",}\n")
        .await
        .unwrap();
    assert!(c.closed().await);
}

#[tokio::test]
async fn oversized_frames_close_the_connection() {
    let sim = reference();
    let mut c = Client::duplex(&sim, "a");
    assert_eq!(c.hello().await.identity.uid, 10123);
    let mut huge = br#"{"id":9,"op":"hello","pad":""#.to_vec();
    huge.resize(MAX_FRAME_BYTES + 10, b'x');
    // The device stops reading part way; the write may fail then.
    let _ = c.send_raw(&huge).await;
    assert!(c.closed().await);
    // The device itself is fine.
    let mut d = Client::duplex(&sim, "a");
    assert_eq!(d.hello().await.identity.uid, 10123);
}

#[tokio::test]
async fn outstanding_requests_are_bounded() {
    // Calls that wait for a scripted Provider that never answers hold their
    // slots until they time out.
    let sim = reference();
    let mut host = Client::duplex(&sim, "a");
    host.ok(OpRequest::HostProvider(
        cetp_wire::ops::HostProviderParams {
            authority: "com.silent.clawseed.tools".into(),
            meta: Default::default(),
            extra: Default::default(),
        },
    ))
    .await;
    let mut c = Client::duplex(&sim, "b");
    let mut ids = Vec::new();
    for _ in 0..MAX_OUTSTANDING_REQUESTS {
        ids.push(
            c.send(&call_op(
                "com.silent.clawseed.tools",
                "negotiate",
                None,
                1500,
            ))
            .await,
        );
    }
    let extra = c.send(&OpRequest::Hello).await;
    let (_, f) = c.final_for(extra).await;
    let Final::Error { error, .. } = f else {
        panic!("{f:?}")
    };
    assert_eq!(error.kind, ErrorKind::BadRequest);
    assert!(
        error.message.contains("too many outstanding requests"),
        "{}",
        error.message
    );
    for id in ids {
        let (_, f) = c.final_for(id).await;
        let Final::Error { error, .. } = f else {
            panic!("{f:?}")
        };
        assert_eq!(error.kind, ErrorKind::Timeout);
    }
    // Slots are free again.
    assert_eq!(c.hello().await.identity.name, "b");
    drop(host);
}

#[tokio::test]
async fn a_host_may_half_close_and_still_get_its_answers() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let sim = reference();
    let task = tokio::spawn({
        let sim = sim.clone();
        async move { sim.serve_connection("a", theirs).await }
    });
    let (rd, mut wr) = tokio::io::split(ours);
    use tokio::io::AsyncWriteExt;
    wr.write_all(b"{\"id\":1,\"op\":\"hello\"}\n{\"id\":2,\"op\":\"discover\"}\n")
        .await
        .unwrap();
    wr.shutdown().await.unwrap();
    let mut reader = cetp_wire::AsyncFrameReader::new(tokio::io::BufReader::new(rd));
    let mut ids = Vec::new();
    while let Some(f) = reader.read_frame().await.unwrap() {
        assert!(matches!(f, Frame::Final(Final::Ok { .. })), "{f:?}");
        ids.extend(f.id());
    }
    ids.sort();
    assert_eq!(ids, [1, 2]);
    task.await.unwrap();
}

#[tokio::test]
async fn unknown_identity_is_refused() {
    let mut c = Client::duplex(&reference(), "c");
    let _ = c.send_raw(b"{\"id\":1,\"op\":\"hello\"}\n").await;
    assert!(c.closed().await);
}

#[tokio::test]
async fn a_mutant_answers_differently() {
    async fn echo_of_bad_session(cfg: SimConfig) -> Option<String> {
        let mut c = Client::duplex(&sim(cfg), "a");
        let now = c.hello().await.now_ms;
        let b = c
            .bundle("list_tools", Some(common("not-a-session", &rid(5), now)))
            .await;
        assert_eq!(code(&b).as_deref(), Some("NEGOTIATION_REQUIRED"), "{b:?}");
        b.opt_string(keys::REQUEST_ID).ok().flatten()
    }
    assert_eq!(
        echo_of_bad_session(SimConfig::default()).await,
        Some(rid(5))
    );
    let mutant = SimConfig {
        mutant: Some("no_request_id_echo".into()),
        ..SimConfig::default()
    };
    assert_eq!(echo_of_bad_session(mutant).await, None);
}

#[tokio::test]
async fn timeouts_are_real_waits() {
    let sim = sim(SimConfig {
        effect_delay_ms: 800,
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&sim, "a");
    let now = c.hello().await.now_ms;
    let token = c.negotiate(&[]).await;
    let started = std::time::Instant::now();
    let e = c
        .call_on(
            AUTHORITY,
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(1),
                now,
                "create_alert",
                r#"{"symbol":"CLAW","price":2}"#,
            )),
            100,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(started.elapsed() < std::time::Duration::from_millis(700));
    assert_eq!(sim.provider().effects(), 0);
    // The Provider finishes the call anyway.
    let deadline = std::time::Instant::now() + WAIT;
    while sim.provider().effects() == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(sim.provider().effects(), 1);
    let replay = c
        .bundle(
            "execute_tool",
            Some(exec_extras(
                &token,
                &rid(1),
                now,
                "create_alert",
                r#"{"symbol":"CLAW","price":2}"#,
            )),
        )
        .await;
    assert_eq!(status(&replay), "success");
    assert_eq!(sim.provider().effects(), 1);
}

/// `--fixed-clock` is a phone's clock: not offered, `advance_clock`
/// answered `unknown_op`, device time moving with real time only; and the
/// debug build's short session lifetime is the one negotiate declares.
#[tokio::test]
async fn a_fixed_clock_cannot_be_moved_and_short_lifetimes_are_declared() {
    let sim = sim(SimConfig {
        fixed_clock: true,
        session_ttl_ms: Some(5_000),
        resume_token_ttl_ms: Some(5_000),
        ..SimConfig::default()
    });
    let mut c = Client::duplex(&sim, "a");
    let h = c.hello().await;
    assert!(!h.ops.iter().any(|o| o == "advance_clock"), "{:?}", h.ops);
    let mut params = cetp_wire::Map::new();
    params.insert("ms".into(), Json::from(60_000u64));
    let e = c
        .err(OpRequest::Unknown {
            op: "advance_clock".into(),
            params,
        })
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownOp);
    assert!((sim.now_ms() - host_now_ms()).abs() < 10_000, "not moved");
    assert_eq!(sim.provider().config().resume_token_ttl_ms, 5_000);
    let b = c.bundle("negotiate", Some(negotiate_extras(&[]))).await;
    let expires = data(&b)["expires_at"].as_str().unwrap().to_string();
    let now = sim.now_ms();
    let at = chrono_free_rfc3339_ms(&expires);
    assert!(
        (at - now - 5_000).abs() < 2_000,
        "expires_at {expires} is not 5 s after {now}"
    );
}

/// Milliseconds of an RFC 3339 UTC time `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn chrono_free_rfc3339_ms(t: &str) -> i64 {
    let (date, time) = t.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let h: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms: i64 = format!("{frac:0<3}")[..3].parse().unwrap();
    ((days * 24 + h[0]) * 60 + h[1]) * 60_000 + h[2] * 1000 + ms
}
