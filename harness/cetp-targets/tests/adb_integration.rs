//! The same probe-wire session through a real adb server (adb transport,
//! the simulated device's adb endpoint), through TCP, and in-process, with
//! identical (normalized) results.
//!
//! Needs `adb` on PATH (fails with a clear message otherwise, unless
//! `CETP_SKIP_ADB=1`). The adb server runs on a private port with a private
//! HOME and is killed at the end, also when the test fails.

mod common;

use cetp_targets::{open, TargetSpec};
use common::{adb_or_skip, run_session, session_sim_config, AdbServer, SimHost};

#[test]
fn one_session_three_transports_identical_results() {
    let Some(adb) = adb_or_skip("one_session_three_transports_identical_results") else {
        return;
    };
    let over_adb = SimHost::start(session_sim_config(), true);
    let over_tcp = SimHost::start(session_sim_config(), false);
    let server = AdbServer::start(adb);
    server.connect(&over_adb.adbd_addr());

    let adb_spec = TargetSpec::parse(&format!(
        "adb:{},server={}",
        over_adb.adbd_addr(),
        server.addr()
    ))
    .unwrap();
    let adb_target = open(&adb_spec).unwrap_or_else(|e| panic!("open {adb_spec}: {e}"));
    assert!(adb_target.b.is_some(), "the sim offers identity b over adb");
    let via_adb = run_session(&adb_target);

    let tcp_target = open(&TargetSpec::parse(&over_tcp.tcp_spec()).unwrap()).unwrap();
    let via_tcp = run_session(&tcp_target);

    let sim_spec = TargetSpec::parse(&format!(
        "sim:seed={},effect_delay_ms=0",
        common::SESSION_SEED
    ))
    .unwrap();
    let via_sim = run_session(&open(&sim_spec).unwrap());

    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
    assert_eq!(pretty(&via_adb), pretty(&via_tcp), "adb and tcp differ");
    assert_eq!(
        pretty(&via_tcp),
        pretty(&via_sim),
        "tcp and in-process differ"
    );
    assert_eq!(via_adb["hello_b"], serde_json::json!("b"));
    assert_eq!(
        via_adb["resolve"]["decision_applied"],
        serde_json::json!(true)
    );

    // The adb side of the target: the probe sockets were forwarded, and
    // nothing else was left behind once the target is gone.
    let forwards = server.ok(&["forward", "--list"]);
    assert_eq!(
        forwards.lines().filter(|l| !l.trim().is_empty()).count(),
        2,
        "{forwards}"
    );
    drop(adb_target);
    let forwards = server.ok(&["forward", "--list"]);
    assert_eq!(forwards.trim(), "", "forwards left behind: {forwards}");
}

/// With two devices on one server, the serial decides which one the probe
/// sockets are forwarded to (adb_client's `forward` is sent after a
/// transport switch; this pins that the server honours the serial).
#[test]
fn the_serial_picks_the_device_when_several_are_attached() {
    let Some(adb) = adb_or_skip("the_serial_picks_the_device_when_several_are_attached") else {
        return;
    };
    const DAY_MS: i64 = 86_400_000;
    let near = SimHost::start(session_sim_config(), true);
    let far = SimHost::start(
        cetp_sim::SimConfig {
            clock_skew_ms: 10 * DAY_MS,
            ..session_sim_config()
        },
        true,
    );
    let server = AdbServer::start(adb);
    server.connect(&near.adbd_addr());
    server.connect(&far.adbd_addr());
    let host_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (host, skewed) in [(&far, true), (&near, false)] {
        let spec = TargetSpec::parse(&format!(
            "adb:{},server={},b=off",
            host.adbd_addr(),
            server.addr()
        ))
        .unwrap();
        let t = open(&spec).unwrap_or_else(|e| panic!("open {spec}: {e}"));
        let now = t.a.hello().unwrap().now_ms;
        assert_eq!(
            now - host_now > 5 * DAY_MS,
            skewed,
            "{spec} reached the wrong device (device clock {now}, host {host_now})"
        );
    }
    // Without a serial, two devices are ambiguous: a named error, not a guess.
    let spec = TargetSpec::parse(&format!("adb,server={}", server.addr())).unwrap();
    let e = open(&spec).err().expect("ambiguous device must fail");
    assert_eq!(e.kind(), "adb_device_ambiguous", "{e}");
}
