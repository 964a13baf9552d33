//! Real threads against the reference Provider: one executor per request id,
//! the concurrency limit, and a restart in the middle of an effect.

mod provider_support;

use cetp_proto::envelope::keys;
use cetp_proto::Value;
use cetp_reference::app::ProviderApp;
use cetp_reference::provider::{thread_sleeper, ProviderConfig};
use provider_support::*;
use std::sync::Barrier;
use std::time::Duration;

fn slow(delay_ms: u64) -> ProviderConfig {
    ProviderConfig {
        effect_delay_ms: delay_ms,
        sleeper: thread_sleeper(),
        ..ProviderConfig::default()
    }
}

#[test]
fn same_request_id_on_two_threads_executes_once() {
    let mut w = World::with_config(slow(150));
    w.connect(A);
    let args = r#"{"symbol":"CLAW","price":3}"#;
    let barrier = Barrier::new(2);
    let (x, y) = std::thread::scope(|s| {
        let t1 = s.spawn(|| {
            barrier.wait();
            w.exec(A, &rid(1), "create_alert", args)
        });
        let t2 = s.spawn(|| {
            barrier.wait();
            w.exec(A, &rid(1), "create_alert", args)
        });
        (t1.join().unwrap(), t2.join().unwrap())
    });
    assert!(x.is_success(), "{:?}", x.bundle);
    assert_eq!(x.bundle, y.bundle);
    assert_eq!(w.effects(), 1);
    assert_eq!(w.alert_ids().len(), 1);
}

#[test]
fn same_request_id_concurrently_yields_one_operation() {
    let mut w = World::with_config(slow(100));
    w.connect(A);
    let barrier = Barrier::new(3);
    let outs: Vec<Outcome> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    w.exec(A, &rid(7), "sync_portfolio", "{}")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let op = outs[0].operation_id().expect("accepted");
    for o in &outs {
        assert_eq!(o.operation_id().as_deref(), Some(op.as_str()));
    }
    w.now += 400;
    assert_eq!(w.get_op(A, &rid(7), &op).data()["state"], "succeeded");
    assert_eq!(w.effects(), 1);
}

#[test]
fn more_than_max_concurrent_requests_is_rate_limited() {
    let mut w = World::with_config(slow(400));
    w.connect(A);
    let barrier = Barrier::new(5);
    let outs: Vec<Outcome> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..5u64)
            .map(|i| {
                let (w, barrier) = (&w, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    w.exec(
                        A,
                        &rid(10 + i),
                        "create_alert",
                        r#"{"symbol":"CLAW","price":1}"#,
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let limited: Vec<&Outcome> = outs
        .iter()
        .filter(|o| o.code().as_deref() == Some("RATE_LIMITED"))
        .collect();
    assert_eq!(limited.len(), 1, "{outs:?}");
    assert_eq!(limited[0].retryable(), Some(true));
    assert_eq!(
        limited[0].bundle.get(keys::RETRY_AFTER_MS),
        Some(&Value::Long(100))
    );
    assert!(limited[0].request_id().is_some());
    assert_eq!(outs.iter().filter(|o| o.is_success()).count(), 4);
    assert_eq!(w.effects(), 4);
    // The slots are free again; another caller was never limited.
    assert!(w
        .exec(A, &rid(20), "get_quote", r#"{"symbol":"CLAW"}"#)
        .is_success());
}

#[test]
fn restart_during_an_effect_commits_nothing() {
    let mut w = World::with_config(slow(300));
    w.connect(A);
    let args = r#"{"symbol":"CLAW","price":1}"#;
    let o = std::thread::scope(|s| {
        let t = s.spawn(|| w.exec(A, &rid(1), "create_alert", args));
        std::thread::sleep(Duration::from_millis(100));
        w.p.restart();
        t.join().unwrap()
    });
    assert_eq!(o.code().as_deref(), Some("UNAVAILABLE"), "{:?}", o.bundle);
    assert_eq!(o.retryable(), Some(true));
    assert_eq!(w.effects(), 0);
    w.connect(A);
    let again = w.exec(A, &rid(1), "create_alert", args);
    assert!(again.is_success());
    assert_eq!(w.effects(), 1);
}

#[test]
fn a_waiting_duplicate_gives_up_at_its_deadline() {
    let mut w = World::with_config(slow(600));
    w.connect(A);
    let args = r#"{"symbol":"CLAW","price":1}"#;
    let (first, waiter) = std::thread::scope(|s| {
        let t = s.spawn(|| w.exec(A, &rid(1), "create_alert", args));
        std::thread::sleep(Duration::from_millis(100));
        let mut b = w.exec_bundle(A, &rid(1), "create_alert", args);
        b.insert(keys::DEADLINE_AT_MS, Value::Long(w.now + 100));
        let waiter = w.call(A, "execute_tool", Some(b));
        (t.join().unwrap(), waiter)
    });
    assert_eq!(waiter.code().as_deref(), Some("DEADLINE_EXCEEDED"));
    assert_eq!(waiter.retryable(), Some(true));
    assert!(first.is_success());
    assert_eq!(
        w.exec(A, &rid(1), "create_alert", args).bundle,
        first.bundle
    );
    assert_eq!(w.effects(), 1);
}
