//! `clock=move` on an adb target: where the user allows it and the device
//! lets root set its clock (an emulator or userdebug build after `adb
//! root`, or `su`), time-bound cases move the wall clock instead of
//! waiting, through a real adb server (Debian's `adb`) and the simulated
//! device's adb endpoint, which plays toybox's `id`, `su`, `date` and
//! `settings` as a phone does.
//!
//! Setting the wall clock leaves `elapsedRealtime`, by which a Provider may
//! time its lifetimes (`cetp sim --provider-elapsed-clock`): what fails
//! after such a move is judged again in real time, so that Provider passes
//! and Providers that never expire still fail. The clock and automatic time
//! are the user's: both are as they were after the run, and nothing is set
//! without `clock=move`.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
#[path = "support/served_sim.rs"]
mod served_sim;

use run::text;
use scratch::Scratch;
use served_sim::{AdbServer, AdbSim};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A debug build's lifetimes (ms) and the profile's margin past them.
const LIFETIME_MS: u64 = 3_000;
const MARGIN_MS: u64 = 1_000;

const TIME_BOUND: [&str; 4] = ["--only", "BIND-005", "--only", "CONF-010"];

/// The reference profile with the short resume-token lifetime.
fn profile(dir: &Path) -> PathBuf {
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/reference.toml"),
    )
    .unwrap();
    let line = "resume_token_ttl_ms = 600000";
    assert!(reference.contains(line), "profiles/reference.toml changed");
    let text = reference.replace(
        line,
        &format!("resume_token_ttl_ms = {LIFETIME_MS}\nexpiry_margin_ms = {MARGIN_MS}"),
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("short-lifetimes.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A rooted (or not) simulated phone with a short-lived debug build,
/// connected to the adb server.
fn phone(adb: &AdbServer, root: &str, extra: &[&str]) -> AdbSim {
    let ttl = LIFETIME_MS.to_string();
    let mut args = vec![
        "--fixed-clock",
        "--root",
        root,
        "--session-ttl-ms",
        &ttl,
        "--resume-token-ttl-ms",
        &ttl,
    ];
    args.extend_from_slice(extra);
    let sim = AdbSim::start_with(&args);
    let o = adb.adb(&["connect", &sim.serial]);
    assert!(text(&o).contains("connected"), "{}", text(&o));
    sim
}

/// `cetp run` of the time-bound cases; the report's id → (verdict, reason)
/// and the trace.
fn run(
    adb: &AdbServer,
    sim: &AdbSim,
    options: &str,
    dir: &Path,
) -> (BTreeMap<String, (String, String)>, String) {
    let report = dir.join("report");
    let o = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args([
            "run",
            "--target",
            &format!("{}{options}", adb.target(&sim.serial)),
        ])
        .args(TIME_BOUND)
        .args(["--profile", profile(&dir.join("p")).to_str().unwrap()])
        .args(["--report-dir", report.to_str().unwrap(), "--color", "never"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json"))
            .unwrap_or_else(|e| panic!("no report ({e}): {}", text(&o))),
    )
    .unwrap();
    let cases = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                (
                    c["verdict"].as_str().unwrap().to_string(),
                    c["reason"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect();
    let trace = std::fs::read_to_string(report.join("events.ndjson")).unwrap();
    (cases, trace)
}

/// The device's wall clock is within a few seconds of the host's, and
/// automatic time is on, as a phone's were before the run.
fn left_as_found(adb: &AdbServer, sim: &AdbSim) {
    let o = adb.adb(&["-s", &sim.serial, "shell", "date", "+%s"]);
    let device: i64 = text(&o).trim().parse().unwrap();
    let host = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((device - host).abs() <= 3, "device {device}, host {host}");
    let o = adb.adb(&[
        "-s",
        &sim.serial,
        "shell",
        "settings",
        "get",
        "global",
        "auto_time",
    ]);
    assert_eq!(text(&o).trim(), "1");
}

fn device_log(adb: &AdbServer, sim: &AdbSim) -> String {
    text(&adb.adb(&["-s", &sim.serial, "shell", "logcat", "-d"]))
}

#[test]
fn clock_move_sets_the_wall_clock_where_allowed_and_judges_again_in_real_time() {
    let Some(adb) = AdbServer::start("clock_move") else {
        return;
    };
    let rooted = phone(&adb, "adbd", &[]);
    let elapsed = phone(&adb, "su", &["--provider-elapsed-clock"]);
    let session_mutant = phone(&adb, "adbd", &["--mutant", "session_never_expires"]);
    let token_mutant = phone(&adb, "su", &["--mutant", "resume_token_never_expires"]);
    let user_build = phone(&adb, "none", &[]);
    let untouched = phone(&adb, "adbd", &[]);
    let dirs: Vec<Scratch> = ["rooted", "elapsed", "session", "token", "user", "untouched"]
        .iter()
        .map(|n| Scratch::new("cetp-clock-move", n, true))
        .collect();
    let mv = ",clock=move";
    // Each run waits in real time somewhere: all at once.
    let [ok, el, se, to, us, un] = std::thread::scope(|s| {
        let runs = [
            (&rooted, mv),
            (&elapsed, mv),
            (&session_mutant, mv),
            (&token_mutant, mv),
            (&user_build, mv),
            (&untouched, ""),
        ]
        .into_iter()
        .zip(&dirs)
        .map(|((sim, opt), dir)| s.spawn(|| run(&adb, sim, opt, dir)))
        .collect::<Vec<_>>();
        let done: Vec<_> = runs.into_iter().map(|h| h.join().unwrap()).collect();
        <[_; 6]>::try_from(done).ok().unwrap()
    });

    // A rooted phone: the wall clock moves, nothing waits.
    for id in ["BIND-005", "CONF-010"] {
        let (verdict, reason) = &ok.0[id];
        assert_eq!(verdict, "PASS", "{id}: {reason}");
        assert_eq!(
            reason, "judged with the device's wall clock set forward through adb",
            "{id}"
        );
    }
    assert!(ok.1.contains("the wall clock, set through adb"));
    left_as_found(&adb, &rooted);
    assert!(device_log(&adb, &rooted).contains("wall clock set to"));

    // A Provider timing lifetimes by elapsedRealtime did not expire after
    // the move: that proves nothing, and real time passes it.
    // The first case moved the clock and was judged again in real time;
    // the run then stopped moving it, and the second waited from the start.
    let reasons: Vec<&String> = ["BIND-005", "CONF-010"]
        .iter()
        .map(|id| {
            let (verdict, reason) = &el.0[*id];
            assert_eq!(verdict, "PASS", "{id}: {reason}");
            reason
        })
        .collect();
    let again = reasons.iter().filter(|r| {
        r.starts_with("judged again by waiting")
            && r.contains("proves nothing where the Provider times lifetimes by the elapsed clock")
    });
    assert_eq!(again.count(), 1, "{reasons:?}");
    let stopped = reasons
        .iter()
        .filter(|r| r.contains("so the run stopped moving it"));
    assert_eq!(stopped.count(), 1, "{reasons:?}");
    // After the first case proved the moves pointless, no case moved the
    // clock again: a case waiting in real time would otherwise see its due
    // time come early.
    assert_eq!(
        el.1.matches("the wall clock, set through adb").count(),
        1,
        "{}",
        el.1
    );
    left_as_found(&adb, &elapsed);

    // Providers that never expire fail after the move and in real time.
    let (verdict, reason) = &se.0["BIND-005"];
    assert_eq!(verdict, "FAIL", "{reason}");
    assert!(reason.contains("judged again by waiting"), "{reason}");
    let (verdict, reason) = &to.0["CONF-010"];
    assert_eq!(verdict, "FAIL", "{reason}");
    assert!(reason.contains("judged again by waiting"), "{reason}");
    left_as_found(&adb, &session_mutant);
    left_as_found(&adb, &token_mutant);

    // A user build: no root, so the cases wait in real time, and the
    // trace says why the clock stayed.
    for id in ["BIND-005", "CONF-010"] {
        let (verdict, reason) = &us.0[id];
        assert_eq!(verdict, "PASS", "{id}: {reason}");
        assert!(reason.starts_with("judged by waiting"), "{id}: {reason}");
    }
    assert!(us
        .1
        .contains("the device does not let the shell set its clock"));
    assert!(!device_log(&adb, &user_build).contains("wall clock set to"));

    // Without clock=move a rooted phone's clock is never touched.
    for id in ["BIND-005", "CONF-010"] {
        let (verdict, reason) = &un.0[id];
        assert_eq!(verdict, "PASS", "{id}: {reason}");
        assert!(reason.starts_with("judged by waiting"), "{id}: {reason}");
    }
    let log = device_log(&adb, &untouched);
    assert!(
        !log.contains("shell: date") && !log.contains("auto_time"),
        "{log}"
    );
}
