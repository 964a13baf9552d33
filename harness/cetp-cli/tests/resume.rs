//! Run integrity end to end: the `cetp` binary is killed with SIGKILL at
//! many points of a run against a simulated device served over TCP from
//! this process, and `cetp resume` must reach the verdicts of a run that
//! was never interrupted, with the Provider's count of executed side
//! effects equal to that run's (no effect made twice). A resume after the
//! profile or the Provider build changed is refused, naming the fields.

#[path = "support/scratch.rs"]
mod scratch;
use scratch::Scratch;

use cetp_sim::{Sim, SimConfig};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A simulated device served on two TCP ports by this process.
struct Hosted {
    sim: Arc<Sim>,
    a: SocketAddr,
    b: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

impl Hosted {
    fn new(cfg: SimConfig) -> Hosted {
        Hosted::on(cfg, "127.0.0.1:0", "127.0.0.1:0")
    }

    fn on(cfg: SimConfig, a: &str, b: &str) -> Hosted {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sim = Sim::new(cfg).unwrap();
        let (la, lb) = rt.block_on(async {
            (
                tokio::net::TcpListener::bind(a).await.unwrap(),
                tokio::net::TcpListener::bind(b).await.unwrap(),
            )
        });
        let (a, b) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
        rt.spawn(sim.clone().serve_tcp("a", la));
        rt.spawn(sim.clone().serve_tcp("b", lb));
        Hosted { sim, a, b, _rt: rt }
    }

    fn target(&self) -> String {
        format!("tcp:{}", self.a)
    }

    fn effects(&self) -> u64 {
        self.sim.provider().effects()
    }
}

/// The reference Provider with operations that take 20 minutes of device
/// time (the `slow_operations` legal variant): they finish only when a case
/// moves the device clock. With the reference's 300 ms, an operation left
/// running while the harness was dead could finish before the resumed run
/// cancels it, which the uninterrupted run did in time: a legal difference
/// in the effect count that is not a duplicate, and would hide one.
fn provider() -> SimConfig {
    SimConfig {
        variant: Some("slow_operations".into()),
        ..SimConfig::default()
    }
}

fn cetp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cetp"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cetp ARGS`, sent Ctrl-C once its journal in `dir` shows the run well
/// under way; what it wrote and how it ended.
fn interrupted(args: &[String], dir: &Path) -> Output {
    let child = cetp()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let journal = dir.join("journal.ndjson");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 300 {
        assert!(Instant::now() < deadline, "the run did not get going");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    child.wait_with_output().unwrap()
}

fn tmp(name: &str) -> Scratch {
    Scratch::new("cetp-resume-test", name, false)
}

fn profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/reference.toml")
}

fn run_args(h: &Hosted, dir: &Path, profile: &Path) -> Vec<String> {
    [
        "run",
        "--target",
        &h.target(),
        "--target-b",
        &h.b.to_string(),
        "--profile",
        profile.to_str().unwrap(),
        "--color",
        "never",
        // LIM-001 sends calls at once beyond the Provider's limit: each is
        // served or RATE_LIMITED, both PASS, and which depends on how they
        // overlap on the machine, so its effect count is not a run's own.
        "--skip",
        "LIM-001",
        "--report-dir",
        dir.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Every case's and check's verdict, and the exit code, of a report.
fn verdicts(dir: &Path) -> BTreeMap<String, String> {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let mut v = BTreeMap::new();
    for c in r["cases"].as_array().unwrap() {
        v.insert(
            c["id"].as_str().unwrap().to_string(),
            c["verdict"].as_str().unwrap().to_string(),
        );
    }
    for c in r["checks"].as_array().unwrap() {
        v.insert(
            format!("check {}", c["id"].as_str().unwrap()),
            c["verdict"].as_str().unwrap().to_string(),
        );
    }
    v
}

/// The case an interrupted run stopped in, and before which step.
fn stopped_case(dir: &Path) -> String {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            let why = c["reason"].as_str().unwrap_or("");
            why.contains("stopped before step") && !why.ends_with("before step 1")
        })
        .map(|c| format!("{} ({})", c["id"], c["reason"]))
        .unwrap_or_else(|| "a case boundary".into())
}

/// Starts `args` with `CETP_PAUSE_AT=point`, waits for it to pause, and
/// kills it with SIGKILL. Panics if it ends without reaching the point.
fn kill_at(args: &[String], point: &str) {
    let mut child = cetp()
        .args(args)
        .env("CETP_PAUSE_AT", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("cetp: paused") {
                let _ = tx.send(());
            }
        }
    });
    let paused = rx.recv_timeout(Duration::from_secs(120)).is_ok();
    // Child::kill is SIGKILL on Unix: no handler, no flush, no destructor.
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(
        paused,
        "{point}: the run ended ({status}) without reaching it"
    );
}

fn resume(dir: &Path) -> Output {
    cetp()
        .args(["resume", dir.to_str().unwrap(), "--color", "never"])
        .output()
        .unwrap()
}

/// The verdicts and Provider effect count of a run nothing interrupted, on
/// a fresh device.
fn uninterrupted(name: &str) -> (BTreeMap<String, String>, u64) {
    let base = Hosted::new(provider());
    let dir = tmp(name);
    let o = cetp()
        .args(run_args(&base, &dir, &profile()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    (verdicts(&dir), base.effects())
}

/// SIGKILL at 24 points (between a dispatch record and its call, inside
/// calls, during resolve, around restarts, clock moves and descriptor
/// reads), and twice in one run; each resume reaches the uninterrupted
/// verdicts and effect count.
#[test]
fn a_run_killed_anywhere_resumes_to_the_same_verdicts_and_effects() {
    let (want, want_effects) = uninterrupted("base");
    assert!(
        want_effects > 10,
        "the run executes effects: {want_effects}"
    );

    // `before:` = its dispatch (send) record is on disk, the call not sent;
    // `after:` = the Provider answered, the harness never recorded it.
    let points: &[&[&str]] = &[
        &["before:execute_tool:1"],
        &["after:execute_tool:2"],
        &["before:execute_tool:9"],
        &["after:execute_tool:17"],
        &["before:execute_tool:33"],
        &["after:execute_tool:48"],
        &["before:execute_tool:70"],
        &["after:execute_tool:95"],
        &["before:execute_tool:120"],
        &["after:execute_tool:130"],
        &["before:resolve:1"],
        &["after:resolve:2"],
        &["before:resolve:5"],
        &["after:resolve:7"],
        &["after:get_operation:3"],
        &["before:cancel_operation:2"],
        &["after:cancel_operation:4"],
        &["before:read_fd:1"],
        &["after:read_fd:3"],
        &["before:restart_provider:2"],
        &["after:restart_provider:3"],
        &["after:advance_clock:5"],
        &["before:negotiate:40"],
        // Killed, resumed, killed again while resuming, resumed again.
        &["after:execute_tool:30", "before:execute_tool:12"],
    ];
    // CETP_RESUME_POINTS=P1,P2,... runs only those (single kills), when
    // looking into one.
    let chosen: Vec<Vec<&str>>;
    let only = std::env::var("CETP_RESUME_POINTS").unwrap_or_default();
    let points: &[&[&str]] = if only.is_empty() {
        points
    } else {
        chosen = only.split(',').map(|p| vec![p]).collect();
        let v: Vec<&[&str]> = chosen.iter().map(|p| p.as_slice()).collect();
        Box::leak(v.into_boxed_slice())
    };
    let started = Instant::now();
    let trial = |n: usize, kills: &[&str]| {
        let h = Hosted::new(provider());
        let dir = tmp(&format!("kill-{n}"));
        let args = run_args(&h, &dir, &profile());
        kill_at(&args, kills[0]);
        for again in &kills[1..] {
            kill_at(
                &["resume".to_string(), dir.to_str().unwrap().to_string()],
                again,
            );
        }
        let o = resume(&dir);
        let what = kills.join(" then ");
        assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o));
        assert!(
            text(&o).contains("resumed: "),
            "{what}: the resume says what it replayed: {}",
            text(&o)
        );
        let got = verdicts(&dir);
        let differ: Vec<_> = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: {v} -> {:?}", got.get(k)))
            .collect();
        assert!(differ.is_empty(), "{what}: verdicts differ: {differ:?}");
        assert_eq!(
            h.effects(),
            want_effects,
            "{what}: the Provider executed another number of side effects"
        );
        // The journal ended; a second resume has nothing to do.
        let again = resume(&dir);
        assert_eq!(again.status.code(), Some(2), "{}", text(&again));
        assert!(
            text(&again).contains("nothing to resume"),
            "{}",
            text(&again)
        );
    };
    // One at a time: every trial is a full run, and two cores are all
    // there is.
    for (n, kills) in points.iter().enumerate() {
        trial(n, kills);
    }
    eprintln!(
        "{} kill points resumed in {:.1} s",
        points.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The pin holds: after a kill, another profile or another Provider build
/// (its catalog revision) makes `cetp resume` refuse, naming what moved,
/// and nothing is sent.
#[test]
fn a_resume_against_another_profile_or_build_is_refused_naming_the_fields() {
    let h = Hosted::new(provider());
    let dir = tmp("pin");
    // The profile is copied so it can be edited between kill and resume.
    let profile_dir = Scratch::new("cetp-resume-test", "pin-profile", true);
    let edited = profile_dir.join("profile.toml");
    std::fs::copy(profile(), &edited).unwrap();
    kill_at(&run_args(&h, &dir, &edited), "after:execute_tool:10");
    let effects = h.effects();

    // Another sample for a tool: the same format, another configuration.
    let changed = std::fs::read_to_string(&edited)
        .unwrap()
        .replace("sample_args = { rows = 10 }", "sample_args = { rows = 11 }");
    assert!(cetp_vectors::profile::Profile::from_toml(&changed).is_ok());
    std::fs::write(&edited, changed).unwrap();
    let o = resume(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("these fields differ (profile)"), "{t}");
    assert_eq!(h.effects(), effects, "a refused resume sends nothing");

    // Put the profile back, and replace the Provider by another build on
    // the same ports: its tool catalog has another revision.
    std::fs::copy(profile(), &edited).unwrap();
    let (a, b) = (h.a.to_string(), h.b.to_string());
    drop(h);
    let other = Hosted::on(
        SimConfig {
            variant: Some("hostile_text".into()),
            ..provider()
        },
        &a,
        &b,
    );
    let o = resume(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("revision: was "), "{t}");
    assert!(!t.contains("profile:"), "only what moved is named: {t}");
    assert_eq!(other.effects(), 0, "a refused resume sends nothing");
}

/// Ctrl-C stops at the next step boundary, prints the resume command and
/// exits 130; the resume finishes the run. `--run-timeout` leaves a run
/// that can be resumed too.
#[test]
fn ctrl_c_stops_at_a_step_boundary_and_the_run_resumes() {
    let (want, want_effects) = uninterrupted("ctrl-c-base");

    let h = Hosted::new(provider());
    let dir = tmp("ctrl-c");
    let o = interrupted(&run_args(&h, &dir, &profile()), &dir);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(130), "{t}");
    assert!(
        t.contains(&format!("continue it with: cetp resume {}", dir.display())),
        "{t}"
    );
    let partial = verdicts(&dir);
    assert!(
        partial.values().any(|v| v == "INFRA_ERROR"),
        "the cases left are not judged: {partial:?}"
    );
    let stopped_in = stopped_case(&dir);
    let o = resume(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(verdicts(&dir), want, "interrupted in {stopped_in}");
    assert_eq!(h.effects(), want_effects, "interrupted in {stopped_in}");
    assert!(
        dir.join("events.ndjson.1").exists(),
        "the first stream is kept"
    );
    drop(h);

    // --run-timeout: the run stops, and can be continued.
    let h = Hosted::new(provider());
    let dir = tmp("run-timeout");
    let mut args = run_args(&h, &dir, &profile());
    args.extend(["--run-timeout".to_string(), "1s".to_string()]);
    let o = cetp().args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("cetp resume"), "{}", text(&o));
    let o = resume(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(verdicts(&dir), want);
    assert_eq!(h.effects(), want_effects);

    // A fresh run refuses a directory whose run did not end.
    let h2 = Hosted::new(provider());
    let dir = tmp("unfinished");
    kill_at(&run_args(&h2, &dir, &profile()), "before:execute_tool:3");
    let o = cetp()
        .args(run_args(&h2, &dir, &profile()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("did not end"), "{}", text(&o));
    // And an in-process simulated device cannot be resumed: it died.
    let dir = tmp("in-process");
    kill_at(
        &[
            "run",
            "--target",
            "sim",
            "--report-dir",
            dir.to_str().unwrap(),
        ]
        .map(String::from),
        "after:execute_tool:2",
    );
    let o = resume(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("died with it"), "{}", text(&o));
}

/// The arguments of a sharded run over two hosted devices, each named
/// with its second identity inline.
fn sharded_args(h: &[&Hosted], dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["run".into()];
    for d in h {
        args.push("--target".into());
        args.push(format!("{},b={}", d.target(), d.b));
    }
    for a in [
        "--profile",
        profile().to_str().unwrap(),
        "--color",
        "never",
        "--skip",
        "LIM-001",
        "--report-dir",
        dir.to_str().unwrap(),
    ] {
        args.push(a.to_string());
    }
    args
}

/// A sharded run killed while its devices are mid-case resumes from its
/// journals (one per device) to the verdicts of a sharded run nothing
/// interrupted, with the same number of side effects over the devices:
/// each device takes again the cases its journal says it took, in order.
#[test]
fn a_sharded_run_killed_mid_case_resumes_to_the_same_verdicts_and_effects() {
    let (b1, b2) = (Hosted::new(provider()), Hosted::new(provider()));
    let base = tmp("sharded-base");
    let o = cetp()
        .args(sharded_args(&[&b1, &b2], &base))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (want, want_effects) = (verdicts(&base), b1.effects() + b2.effects());
    assert!(
        want_effects > 10,
        "the run executes effects: {want_effects}"
    );
    // The pause point counts the first device's exchanges; the second goes
    // on until the kill.
    for (n, point) in ["before:execute_tool:6", "after:execute_tool:25"]
        .iter()
        .enumerate()
    {
        let (h1, h2) = (Hosted::new(provider()), Hosted::new(provider()));
        let dir = tmp(&format!("sharded-kill-{n}"));
        kill_at(&sharded_args(&[&h1, &h2], &dir), point);
        assert!(dir.join("journal.device2.ndjson").is_file());
        let o = resume(&dir);
        assert_eq!(o.status.code(), Some(0), "{point}: {}", text(&o));
        assert!(text(&o).contains("resumed: "), "{}", text(&o));
        let got = verdicts(&dir);
        let differ: Vec<_> = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: {v} -> {:?}", got.get(k)))
            .collect();
        assert!(differ.is_empty(), "{point}: verdicts differ: {differ:?}");
        assert_eq!(
            h1.effects() + h2.effects(),
            want_effects,
            "{point}: the Providers executed another number of side effects"
        );
        let again = resume(&dir);
        assert!(
            text(&again).contains("nothing to resume"),
            "{}",
            text(&again)
        );
    }
}

/// An interrupted run against a device the harness started (`sim`, `jvm:`)
/// is not offered `cetp resume`, which refuses it: its Provider's state
/// ended with the device.
#[test]
fn an_interrupted_run_on_the_harness_s_own_device_is_not_offered_resume() {
    let dir = tmp("ctrl-c-sim");
    let args: Vec<String> = [
        "run",
        "--target",
        "sim",
        "--profile",
        profile().to_str().unwrap(),
    ]
    .iter()
    .map(|a| a.to_string())
    .chain(["--color", "never", "--report-dir", dir.to_str().unwrap()].map(String::from))
    .collect();
    let o = interrupted(&args, &dir);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(130), "{t}");
    assert!(
        !t.contains(&format!("cetp resume {}", dir.display())),
        "{t}"
    );
    assert!(t.contains("run it again"), "{t}");
    let again = cetp()
        .args(["resume", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
}
