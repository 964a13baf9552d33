//! A whole session of the reference Consumer with the reference Provider,
//! in-process on a manual clock.

mod scripted;

use cetp_proto::discovery::Plan;
use cetp_proto::envelope::{keys, Capability, OpState};
use cetp_proto::provider::Decision;
use cetp_proto::ErrorCode;
use cetp_reference::consumer::{
    ConfirmationRequest, Consumer, ConsumerConfig, Delivery, Outcome, Started, Unattended,
};
use cetp_reference::device::{DeviceClock, LocalDevice};
use cetp_reference::port::ConsumerPort;
use cetp_reference::provider::{ReferenceProvider, PACKAGE};
use scripted::{HookPort, T0};
use serde_json::json;
use std::sync::Arc;

fn value(o: Outcome) -> serde_json::Value {
    match o {
        Outcome::Succeeded(out) => out.value,
        other => panic!("expected success, got {other:?}"),
    }
}

#[test]
fn full_session_in_process() {
    let provider = Arc::new(ReferenceProvider::reference());
    let device = LocalDevice::new(provider.clone(), DeviceClock::manual(T0));
    let mut conn = device.connect_as("a").unwrap();
    let mut consumer = Consumer::new(ConsumerConfig::default());

    // §2.1: discovery, same package, plan.
    let report = consumer.discover(&mut conn).unwrap();
    assert!(report.rejected.is_empty(), "{report:?}");
    assert_eq!(report.providers.len(), 1);
    assert_eq!(report.providers[0].package, PACKAGE);
    assert_eq!(report.providers[0].plan, Plan::NegotiateV2);

    // §2.2: negotiation.
    let connected = consumer.connect(&mut conn, PACKAGE).unwrap();
    assert_eq!(connected.version, 2);
    assert_eq!(connected.provider_id, PACKAGE);
    assert_eq!(
        connected.capabilities,
        Capability::ALL.into_iter().collect()
    );
    let session = consumer.session(PACKAGE).unwrap();
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    assert_eq!(session.limit("max_request_bytes"), Some(65_536));

    // §3.2, §3.3.
    let info = consumer.provider_info(&mut conn, PACKAGE).unwrap();
    assert_eq!(info.provider_id, PACKAGE);
    assert!(!info.scopes.is_empty());
    let tools = consumer.list_tools(&mut conn, PACKAGE).unwrap();
    let mut names: Vec<_> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        vec![
            "create_alert",
            "delete_alert",
            "export_history",
            "get_quote",
            "list_alerts",
            "sync_portfolio"
        ]
    );
    assert_eq!(
        tools.get("delete_alert").unwrap().descriptor.confirmation,
        "always"
    );

    // A read tool.
    let quote = value(
        consumer
            .execute(
                &mut conn,
                PACKAGE,
                "get_quote",
                &json!({"symbol": "CLAW"}),
                &mut Unattended,
            )
            .unwrap(),
    );
    assert_eq!(quote["symbol"], "CLAW");
    assert!(quote["price"].is_number());

    // §4.3: delete_alert always asks; the user approves in the Provider's UI.
    fn create(consumer: &mut Consumer, conn: &mut dyn ConsumerPort) -> String {
        let created = consumer
            .execute(
                conn,
                PACKAGE,
                "create_alert",
                &json!({"symbol": "CLAW", "price": 12.5}),
                &mut Decision::Approve,
            )
            .unwrap();
        value(created)["alert_id"].as_str().unwrap().to_string()
    }
    let alert = create(&mut consumer, &mut conn);
    let effects_before = provider.effects();
    let mut asked = Vec::new();
    let deleted = consumer
        .execute(
            &mut conn,
            PACKAGE,
            "delete_alert",
            &json!({"alert_id": alert}),
            &mut |req: &ConfirmationRequest<'_>| {
                asked.push((req.code, req.tool_name.to_string()));
                Some(Decision::Approve)
            },
        )
        .unwrap();
    assert_eq!(value(deleted), json!({"deleted": true}));
    assert_eq!(
        asked,
        vec![(ErrorCode::UserActionRequired, "delete_alert".to_string())]
    );
    assert_eq!(provider.effects(), effects_before + 1);

    // A denied confirmation ends in USER_CANCELLED, with no effect.
    let kept = create(&mut consumer, &mut conn);
    let effects_before = provider.effects();
    let denied = consumer
        .execute(
            &mut conn,
            PACKAGE,
            "delete_alert",
            &json!({"alert_id": kept}),
            &mut Decision::Deny,
        )
        .unwrap_err();
    assert_eq!(denied.code(), Some(ErrorCode::UserCancelled));
    assert_eq!(provider.effects(), effects_before);
    let listed = value(
        consumer
            .execute(
                &mut conn,
                PACKAGE,
                "list_alerts",
                &json!({}),
                &mut Unattended,
            )
            .unwrap(),
    );
    assert!(listed["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["alert_id"] == json!(kept)));

    // §4.4: an operation polled to success.
    let exec = consumer
        .prepare(PACKAGE, "sync_portfolio", &json!({}))
        .unwrap();
    let Started::Pending(mut op) = consumer.run(&mut conn, &exec, &mut Unattended).unwrap() else {
        panic!("sync_portfolio should run in the background");
    };
    let synced = consumer.wait(&mut conn, &mut op).unwrap();
    assert!(value(synced)["synced"].as_u64().unwrap() >= 1);
    assert_eq!(op.state, OpState::Succeeded);
    assert!(op.polls >= 1);

    // ... and one cancelled.
    let exec = consumer
        .prepare(PACKAGE, "sync_portfolio", &json!({}))
        .unwrap();
    let Started::Pending(mut op) = consumer.run(&mut conn, &exec, &mut Unattended).unwrap() else {
        panic!("sync_portfolio should run in the background");
    };
    let effects_before = provider.effects();
    let cancelled = consumer.cancel(&mut conn, &mut op).unwrap();
    assert_eq!(
        cancelled,
        Outcome::Cancelled {
            operation_id: op.operation_id.clone()
        }
    );
    assert_eq!(provider.effects(), effects_before);

    // §4.5: a large result arrives as a verified file, and nothing is left
    // open on the connection.
    let Outcome::Succeeded(export) = consumer
        .execute(
            &mut conn,
            PACKAGE,
            "export_history",
            &json!({"rows": 6000}),
            &mut Unattended,
        )
        .unwrap()
    else {
        panic!("export should succeed");
    };
    assert!(matches!(export.delivery, Delivery::File { size_bytes, .. } if size_bytes > 262_144));
    assert_eq!(export.value["rows"].as_array().unwrap().len(), 6000);
    assert!(conn.held_handles().is_empty(), "{:?}", conn.held_handles());

    // §2.2: after a restart the session is gone; the Consumer renegotiates
    // once and retries with the same request id.
    let token_before = consumer.session(PACKAGE).unwrap().token().to_string();
    device.restart_provider(PACKAGE).unwrap();
    let mut port = HookPort::recording(&mut conn);
    let after = consumer
        .execute(
            &mut port,
            PACKAGE,
            "get_quote",
            &json!({"symbol": "SEED"}),
            &mut Unattended,
        )
        .unwrap();
    assert_eq!(value(after)["symbol"], "SEED");
    let methods: Vec<&str> = port.sent.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        vec!["execute_tool", "negotiate", "execute_tool", "list_tools"]
    );
    let execs = port.sent_method("execute_tool");
    assert_eq!(
        execs[0].get_string(keys::REQUEST_ID).unwrap(),
        execs[1].get_string(keys::REQUEST_ID).unwrap()
    );
    assert_eq!(
        execs[0].get_string(keys::SESSION_TOKEN).unwrap(),
        token_before
    );
    assert_ne!(
        execs[1].get_string(keys::SESSION_TOKEN).unwrap(),
        token_before
    );
    assert_eq!(consumer.session(PACKAGE).unwrap().generation, 2);
}

#[test]
fn without_large_results_a_big_export_is_result_too_large() {
    let device = LocalDevice::new(
        Arc::new(ReferenceProvider::reference()),
        DeviceClock::manual(T0),
    );
    let mut conn = device.connect_as("a").unwrap();
    let mut consumer = Consumer::new(ConsumerConfig {
        capabilities: vec![Capability::AsyncOperations],
        ..ConsumerConfig::default()
    });
    consumer.discover(&mut conn).unwrap();
    let c = consumer.connect(&mut conn, PACKAGE).unwrap();
    assert_eq!(
        c.capabilities,
        [Capability::AsyncOperations].into_iter().collect()
    );
    let e = consumer
        .execute(
            &mut conn,
            PACKAGE,
            "export_history",
            &json!({"rows": 6000}),
            &mut Unattended,
        )
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ResultTooLarge));
}

#[test]
fn without_async_operations_sync_portfolio_answers_inline() {
    let device = LocalDevice::new(
        Arc::new(ReferenceProvider::reference()),
        DeviceClock::manual(T0),
    );
    let mut conn = device.connect_as("a").unwrap();
    let mut consumer = Consumer::new(ConsumerConfig {
        capabilities: vec![],
        ..ConsumerConfig::default()
    });
    consumer.discover(&mut conn).unwrap();
    consumer.connect(&mut conn, PACKAGE).unwrap();
    let out = consumer
        .execute(
            &mut conn,
            PACKAGE,
            "sync_portfolio",
            &json!({}),
            &mut Unattended,
        )
        .unwrap();
    assert!(value(out)["synced"].is_u64());
}

#[test]
fn the_second_identity_has_its_own_session() {
    let device = LocalDevice::new(
        Arc::new(ReferenceProvider::reference()),
        DeviceClock::manual(T0),
    );
    let mut a = device.connect_as("a").unwrap();
    let mut b = device.connect_as("b").unwrap();
    let mut ca = Consumer::new(ConsumerConfig::default());
    let mut cb = Consumer::new(ConsumerConfig {
        uuid_seed: 99,
        ..ConsumerConfig::default()
    });
    for (c, conn) in [(&mut ca, &mut a), (&mut cb, &mut b)] {
        c.discover(conn).unwrap();
        c.connect(conn, PACKAGE).unwrap();
        let out = c
            .execute(
                conn,
                PACKAGE,
                "get_quote",
                &json!({"symbol": "CLAW"}),
                &mut Unattended,
            )
            .unwrap();
        assert_eq!(value(out)["symbol"], "CLAW");
    }
    assert_ne!(
        ca.session(PACKAGE).unwrap().token(),
        cb.session(PACKAGE).unwrap().token()
    );
}
