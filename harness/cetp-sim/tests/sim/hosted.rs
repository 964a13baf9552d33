//! Scripted (hostile) Providers: `host_provider`, `incoming_call`, `reply`.

use crate::support::*;
use cetp_proto::envelope::keys;
use cetp_proto::provider::Decision;
use cetp_proto::{Bundle, PendingIntentValue, Value};
use cetp_wire::ops::{
    DiscoverOk, HostProviderParams, IncomingCall, OkPayload, OpRequest, ReadFdOk, ReadFdParams,
    ReplyOutcome, ReplyParams, ResolveOk, ResolveParams,
};
use cetp_wire::{ErrorKind, Final, Json, Map};
use std::collections::BTreeMap;

const HOSTILE: &str = "com.hostile.app.clawseed.tools";

fn host_params(authority: &str) -> HostProviderParams {
    HostProviderParams {
        authority: authority.into(),
        meta: BTreeMap::from([
            (
                "com.clawseed.tools.authority".to_string(),
                authority.to_string(),
            ),
            ("com.clawseed.tools.versions".to_string(), "1,2".to_string()),
        ]),
        extra: Map::new(),
    }
}

fn reply(call: &str, outcome: ReplyOutcome) -> OpRequest {
    OpRequest::Reply(ReplyParams {
        call: call.into(),
        outcome,
        delay_ms: 0,
    })
}

#[tokio::test]
async fn a_scripted_provider_answers_consumers() {
    let sim = reference();
    let mut host = Client::duplex(&sim, "a");
    host.ok(OpRequest::HostProvider(host_params(HOSTILE))).await;
    let e = host
        .err(OpRequest::HostProvider(host_params(HOSTILE)))
        .await;
    assert_eq!(e.kind, ErrorKind::BadRequest, "authority taken");
    let mut consumer = Client::duplex(&sim, "b");
    let d = DiscoverOk::from_ok(&consumer.ok(OpRequest::Discover).await).unwrap();
    let m = d
        .providers
        .iter()
        .find(|p| {
            p.meta
                .get("com.clawseed.tools.authority")
                .map(String::as_str)
                == Some(HOSTILE)
        })
        .expect("discovered");
    assert_eq!(m.package, "com.hostile.app");
    assert_eq!(m.authority_package.as_deref(), Some("com.hostile.app"));

    // A Bundle with a result descriptor.
    let call = consumer
        .send(&call_op(
            HOSTILE,
            "negotiate",
            Some(negotiate_extras(&[])),
            5000,
        ))
        .await;
    let ev = IncomingCall::from_event(&host.event("incoming_call").await).unwrap();
    assert_eq!(ev.caller.uid, 10200);
    assert_eq!(ev.caller.packages, ["com.clawseed.probe.b"]);
    assert_eq!(ev.method, "negotiate");
    assert_eq!(ev.extras, Some(negotiate_extras(&[])));
    let result = Bundle::new()
        .with(keys::STATUS, Value::str("success"))
        .with(keys::PROTOCOL_VERSION, Value::Long(2));
    host.ok(reply(
        &ev.call,
        ReplyOutcome::Result {
            result: Some(result),
            fd_data: Some(b"hello file".to_vec()),
        },
    ))
    .await;
    let (_, f) = consumer.final_for(call).await;
    let Final::Ok { ok, .. } = f else {
        panic!("{f:?}")
    };
    let got = cetp_wire::ops::CallOk::from_ok(&ok)
        .unwrap()
        .result
        .unwrap();
    assert_eq!(
        got.get(keys::PROTOCOL_VERSION),
        Some(&Value::Long(2)),
        "types as scripted"
    );
    let Some(Value::Fd(fd)) = got.get(keys::RESULT_FD) else {
        panic!("{got:?}")
    };
    let id = consumer
        .send(&OpRequest::ReadFd(ReadFdParams {
            handle: fd.handle.clone(),
            max_bytes: 1 << 20,
        }))
        .await;
    let (chunks, f) = consumer.final_for(id).await;
    let Final::Ok { ok, .. } = f else {
        panic!("{f:?}")
    };
    assert_eq!(chunks.concat_data(), b"hello file");
    assert!(ReadFdOk::from_ok(&ok).unwrap().eof);

    // An exception.
    let call = consumer
        .send(&call_op(HOSTILE, "list_tools", None, 5000))
        .await;
    let ev = IncomingCall::from_event(&host.event("incoming_call").await).unwrap();
    host.ok(reply(
        &ev.call,
        ReplyOutcome::Throw {
            class: "java.lang.SecurityException".into(),
            message: Some("no".into()),
        },
    ))
    .await;
    let (_, f) = consumer.final_for(call).await;
    let Final::Error { error, .. } = f else {
        panic!("{f:?}")
    };
    assert_eq!(error.kind, ErrorKind::ProviderException);
    assert_eq!(error.class.as_deref(), Some("java.lang.SecurityException"));
    assert_eq!(error.message, "no");

    // A PendingIntent the hosted app created; launching it tells the host.
    let call = consumer
        .send(&call_op(HOSTILE, "execute_tool", None, 5000))
        .await;
    let ev = IncomingCall::from_event(&host.event("incoming_call").await).unwrap();
    let pi = Value::PendingIntent(PendingIntentValue {
        handle: "confirm-1".into(),
        creator_package: Some("com.clawseed.reference".into()),
        creator_uid: Some(1),
        immutable: Some(false),
        activity: Some(true),
    });
    host.ok(reply(
        &ev.call,
        ReplyOutcome::Result {
            result: Some(Bundle::new().with(keys::RESOLUTION, pi)),
            fd_data: None,
        },
    ))
    .await;
    let (_, f) = consumer.final_for(call).await;
    let Final::Ok { ok, .. } = f else {
        panic!("{f:?}")
    };
    let got = cetp_wire::ops::CallOk::from_ok(&ok)
        .unwrap()
        .result
        .unwrap();
    let Some(Value::PendingIntent(held)) = got.get(keys::RESOLUTION) else {
        panic!("{got:?}")
    };
    assert_eq!(
        held.creator_package.as_deref(),
        Some("com.hostile.app"),
        "the device reports the real creator"
    );
    assert_eq!(held.immutable, Some(false));
    let r = ResolveOk::from_ok(
        &consumer
            .ok(OpRequest::Resolve(ResolveParams {
                handle: held.handle.clone(),
                decision: Decision::Approve,
                timeout_ms: 5000,
                ui: None,
            }))
            .await,
    )
    .unwrap();
    assert_eq!((r.launched, r.result_code), (true, -1));
    let launched = host.event("intent_launched").await;
    assert_eq!(
        launched.fields.get("handle").and_then(Json::as_str),
        Some("confirm-1")
    );
    assert_eq!(
        launched.fields.get("decision").and_then(Json::as_str),
        Some("approve")
    );

    // Replies only reach calls that wait.
    let e = host
        .err(reply(
            "c-999",
            ReplyOutcome::Result {
                result: None,
                fd_data: None,
            },
        ))
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownHandle);
}

#[tokio::test]
async fn a_scripted_provider_dies_with_its_connection() {
    let sim = reference();
    let mut host = Client::duplex(&sim, "a");
    host.ok(OpRequest::HostProvider(host_params(HOSTILE))).await;
    let mut consumer = Client::duplex(&sim, "b");
    let slow = consumer
        .send(&call_op(HOSTILE, "negotiate", None, 200))
        .await;
    let waiting = consumer
        .send(&call_op(HOSTILE, "negotiate", None, 10_000))
        .await;
    let (_, f) = consumer.final_for(slow).await;
    let Final::Error { error, .. } = f else {
        panic!("{f:?}")
    };
    assert_eq!(error.kind, ErrorKind::Timeout);
    // Both calls reached the host; it goes away without replying.
    host.event("incoming_call").await;
    host.event("incoming_call").await;
    drop(host);
    let (_, f) = consumer.final_for(waiting).await;
    let Final::Error { error, .. } = f else {
        panic!("{f:?}")
    };
    assert_eq!(error.kind, ErrorKind::ProviderDied, "{error}");
    let e = consumer
        .err(call_op(HOSTILE, "negotiate", None, 1000))
        .await;
    assert_eq!(e.kind, ErrorKind::UnknownAuthority);
    // The authority is free again.
    let mut host2 = Client::duplex(&sim, "a");
    host2
        .ok(OpRequest::HostProvider(host_params(HOSTILE)))
        .await;
    // An installed app's authority cannot be taken.
    let e = host2
        .err(OpRequest::HostProvider(host_params(
            cetp_reference::provider::AUTHORITY,
        )))
        .await;
    assert_eq!(e.kind, ErrorKind::BadRequest);
}

trait ConcatData {
    fn concat_data(&self) -> Vec<u8>;
}

impl ConcatData for Vec<cetp_wire::Chunk> {
    fn concat_data(&self) -> Vec<u8> {
        self.iter().flat_map(|c| c.data.iter().copied()).collect()
    }
}

/// Finding 4 of issue 27: the simulated device carries a Provider's
/// exception across "Binder" as Android does (`cetp_sim::binder`): a class
/// Parcel has a code for arrives as itself, a plain RuntimeException never
/// arrives, and the caller reads an empty Bundle.
#[tokio::test]
async fn a_scripted_providers_exception_crosses_binder_as_on_a_phone() {
    let sim = reference();
    let mut host = Client::duplex(&sim, "a");
    host.ok(OpRequest::HostProvider(host_params(HOSTILE))).await;
    let mut consumer = Client::duplex(&sim, "b");
    for (thrown, seen) in [
        (
            "java.lang.IllegalStateException",
            Some("java.lang.IllegalStateException"),
        ),
        (
            "java.lang.NumberFormatException",
            Some("java.lang.IllegalArgumentException"),
        ),
        ("java.lang.RuntimeException", None),
        ("java.io.IOException", None),
    ] {
        let call = consumer
            .send(&call_op(HOSTILE, "list_tools", None, 5000))
            .await;
        let ev = IncomingCall::from_event(&host.event("incoming_call").await).unwrap();
        host.ok(reply(
            &ev.call,
            ReplyOutcome::Throw {
                class: thrown.into(),
                message: Some("why".into()),
            },
        ))
        .await;
        let (_, f) = consumer.final_for(call).await;
        match (f, seen) {
            (Final::Error { error, .. }, Some(class)) => {
                assert_eq!(error.kind, ErrorKind::ProviderException, "{thrown}");
                assert_eq!(error.class.as_deref(), Some(class), "{thrown}");
                assert_eq!(error.message, "why");
            }
            (Final::Ok { ok, .. }, None) => {
                let got = cetp_wire::ops::CallOk::from_ok(&ok).unwrap().result;
                assert_eq!(got, Some(Bundle::new()), "{thrown}: an empty Bundle");
            }
            (f, seen) => panic!("{thrown}: expected {seen:?}, got {f:?}"),
        }
    }
}
