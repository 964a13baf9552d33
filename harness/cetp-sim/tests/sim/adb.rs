//! The device-side adb services, driven directly (no adb server needed).

use crate::support::*;
use cetp_reference::provider::PACKAGE;
use cetp_sim::SimConfig;
use std::sync::Arc;

#[tokio::test]
async fn probe_sockets_and_shell() {
    let sim = sim(SimConfig::default());
    let services = Arc::clone(&sim).adb_services();
    let props = services.properties();
    let prop = |k: &str| {
        props
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(prop("ro.product.model").as_deref(), Some("cetp-sim"));
    assert_eq!(prop("ro.build.version.sdk").as_deref(), Some("34"));
    assert!(prop("ro.serialno").is_some() && prop("ro.build.fingerprint").is_some());

    let stream = services
        .open_stream("localabstract:cetp-probe")
        .await
        .unwrap();
    let mut a = Client::new(stream);
    let h = a.hello().await;
    assert_eq!(h.identity.uid, 10123);
    let stream = services
        .open_stream("localabstract:cetp-probe-b")
        .await
        .unwrap();
    let mut b = Client::new(stream);
    assert_eq!(b.hello().await.identity.uid, 10200);
    assert!(services.open_stream("localabstract:other").await.is_err());

    let token = a.negotiate(&[]).await;
    assert_eq!(
        status(
            &a.bundle("list_tools", Some(common(&token, &rid(1), h.now_ms)))
                .await
        ),
        "success"
    );
    let out = services.shell(&format!("am force-stop {PACKAGE}")).await;
    assert_eq!((out.stdout.as_slice(), out.exit_code), (&b""[..], 0));
    let after = a
        .bundle("list_tools", Some(common(&token, &rid(2), h.now_ms)))
        .await;
    assert_eq!(
        code(&after).as_deref(),
        Some("NEGOTIATION_REQUIRED"),
        "{after:?}"
    );

    let out = services.shell("no-such-tool --x").await;
    assert_eq!(out.exit_code, 127);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "sh: no-such-tool: not found\n"
    );
    let out = services.shell("pm list packages").await;
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("package:com.clawseed.reference\n"), "{text}");
    assert!(text.contains("package:com.clawseed.probe.b\n"));

    // `adb install`: push, pm install, rm.
    services
        .push_file("/data/local/tmp/probe.apk", 0o100644, vec![0; 100])
        .await
        .unwrap();
    assert_eq!(
        services.stat("/data/local/tmp/probe.apk").map(|s| s.size),
        Some(100)
    );
    let out = services
        .shell("pm 'install' '/data/local/tmp/probe.apk'")
        .await;
    assert_eq!(out.stdout, b"Success\n");
    let out = services
        .shell("rm '/data/local/tmp/probe.apk' </dev/null")
        .await;
    assert_eq!((out.stdout.len(), out.exit_code), (0, 0));
    assert!(services.stat("/data/local/tmp/probe.apk").is_none());
    assert!(services.stat("/data/local/tmp").is_some());
    assert_eq!(sim.installed_apks(), ["/data/local/tmp/probe.apk"]);

    let log = String::from_utf8(services.shell("logcat -d").await.stdout).unwrap();
    assert!(log.contains("call negotiate -> success"), "{log}");
    assert!(
        log.contains("force-stop com.clawseed.reference: process restarted"),
        "{log}"
    );
    assert!(
        log.contains("pm install /data/local/tmp/probe.apk"),
        "{log}"
    );
}
