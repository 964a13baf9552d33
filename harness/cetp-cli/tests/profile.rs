//! `cetp init` and `cetp profile check` end to end: a starter profile from
//! a live Provider passes the check and gives no FAIL in a run; every wrong
//! field is a usage error naming it, and a run refuses to start on one.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
#[path = "support/served_sim.rs"]
mod served_sim;
use run::{cetp, text};
use scratch::Scratch;

use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp(name: &str) -> Scratch {
    Scratch::new("cetp-profile-test", name, true)
}

fn profiles() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles")
}

/// `cetp sim --listen` on two free ports (identities a and b), killed when
/// dropped.
struct ServedSim(std::process::Child, u16, u16);

impl ServedSim {
    fn start(extra: &[&str]) -> ServedSim {
        // Both ports held at once, so that they differ; released for the sim.
        let (la, lb) = (
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        );
        let (pa, pb) = (
            la.local_addr().unwrap().port(),
            lb.local_addr().unwrap().port(),
        );
        drop((la, lb));
        let (a, b) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
        let child = Command::new(env!("CARGO_BIN_EXE_cetp"))
            .args(["sim", "--listen", &a, "--listen-b", &b])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // On a loaded machine (the CI's two cores) the sim can take seconds
        // to bind.
        let up = (0..300).any(|_| {
            let ok = std::net::TcpStream::connect(&a).is_ok()
                && std::net::TcpStream::connect(&b).is_ok();
            if !ok {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            ok
        });
        let sim = ServedSim(child, pa, pb);
        assert!(up, "cetp sim did not listen on {a} and {b} within 30 s");
        sim
    }

    fn target(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.1)
    }

    fn b(&self) -> String {
        format!("127.0.0.1:{}", self.2)
    }
}

impl Drop for ServedSim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The starter profile `cetp init` writes for a Provider served over TCP
/// passes `cetp profile check` against it, and a full run with it fails
/// nothing: what it cannot fill it leaves unjudged, and says so.
fn init_check_and_run(name: &str, sim_args: &[&str], package: &str) {
    let sim = ServedSim::start(sim_args);
    let dir = tmp(name);
    let out = dir.join("profile.toml");
    let (target, b) = (sim.target(), sim.b());
    let o = cetp(&[
        "init",
        "--target",
        &target,
        "--target-b",
        &b,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains(&format!("package = \"{package}\"")),
        "{written}"
    );
    // Nothing side-effecting is allowed, and each such tool is listed.
    assert!(written.contains("allow = []"), "{written}");
    assert!(
        written.contains("# What this profile leaves unjudged"),
        "{written}"
    );
    assert!(written.contains("without [execute] allow"), "{written}");
    let o = cetp(&[
        "profile",
        "check",
        out.to_str().unwrap(),
        "--target",
        &target,
        "--target-b",
        &b,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{written}", text(&o));
    assert!(text(&o).contains("no wrong field"), "{}", text(&o));
    let report = dir.join("report");
    let o = cetp(&[
        "run",
        "--target",
        &target,
        "--target-b",
        &b,
        "--profile",
        out.to_str().unwrap(),
        "--color",
        "never",
        "--report-dir",
        report.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}\n{written}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(r["summary"]["fail"], 0, "{t}");
    assert_eq!(r["summary"]["flaky"], 0, "{t}");
    // A starter allows nothing side-effecting: the claim is not
    // established, and says what would establish it.
    assert_eq!(r["claim"]["cetp_v2"], false);
    let fixes: Vec<&str> = r["claim"]["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        fixes
            .iter()
            .any(|f| f.contains("[execute] allow") && f.contains("the cases would execute: ")),
        "{fixes:?}"
    );
    assert!(t.contains("to establish it:"), "{t}");
    // Every not-judged case names its fix in report.json.
    let unjudged = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("unjudged").is_some())
        .count();
    assert!(unjudged > 0);
    assert_eq!(r["summary"]["not_judged"], unjudged as u64);
    assert!(r["cases"].as_array().unwrap().iter().all(|c| {
        c.get("unjudged").is_none_or(|u| {
            c["verdict"] == "NOT_APPLICABLE" && u["fix"].as_str().is_some_and(|f| !f.is_empty())
        })
    }));
    // Refuses to overwrite without --force.
    let o = cetp(&["init", "--target", &target, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);
    let o = cetp(&[
        "init",
        "--target",
        &target,
        "--out",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `cetp init`, `profile check` and `run` through a real adb server
/// (Debian's `adb`) to a device's adb endpoint, as on a phone: the probe
/// started by the harness, identity b from the second probe.
#[test]
fn init_through_a_real_adb_server_gives_a_profile_that_checks_and_fails_nothing() {
    let Some(adb) = served_sim::AdbServer::start("init_through_adb") else {
        return;
    };
    let sim = served_sim::AdbSim::start_with(&[]);
    let o = adb.adb(&["connect", &sim.serial]);
    assert!(text(&o).contains("connected"), "{}", text(&o));
    let target = adb.target(&sim.serial);
    let dir = tmp("adb");
    let out = dir.join("profile.toml");
    let o = cetp(&["init", "--target", &target, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains("package = \"com.clawseed.reference\""),
        "{written}"
    );
    assert!(written.contains("allow = []"), "{written}");
    let o = cetp(&[
        "profile",
        "check",
        out.to_str().unwrap(),
        "--target",
        &target,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{written}", text(&o));
    assert!(text(&o).contains("no wrong field"), "{}", text(&o));
    let report = dir.join("report");
    let o = cetp(&[
        "run",
        "--target",
        &target,
        "--profile",
        out.to_str().unwrap(),
        "--report-dir",
        report.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}\n{written}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(r["summary"]["fail"], 0, "{t}");
    assert!(r["summary"]["pass"].as_u64().unwrap() > 30, "{t}");
}

#[test]
fn init_on_the_reference_gives_a_profile_that_checks_and_fails_nothing() {
    init_check_and_run("reference", &[], "com.clawseed.reference");
}

#[test]
fn init_on_the_notes_fixture_gives_a_profile_that_checks_and_fails_nothing() {
    init_check_and_run("notes", &["--provider", "notes"], "com.clawseed.notes");
}

#[test]
fn init_on_a_legal_variant_gives_a_profile_that_checks_and_fails_nothing() {
    // Tools that hide from a caller without their scope: the starter must
    // still not guess a role that would FAIL.
    init_check_and_run(
        "variant",
        &["--variant", "hide_tools_without_scope"],
        "com.clawseed.reference",
    );
}

#[test]
fn the_vendors_profiles_pass_the_check() {
    for (p, target) in [
        ("reference.toml", "sim"),
        ("notes.toml", "sim:provider=notes"),
        ("no-counter.toml", "sim:variant=no_effect_counter"),
    ] {
        let path = profiles().join(p);
        let o = cetp(&[
            "profile",
            "check",
            path.to_str().unwrap(),
            "--target",
            target,
        ]);
        assert_eq!(o.status.code(), Some(0), "{p}: {}", text(&o));
        // Alone, it says what needs a target.
        let o = cetp(&["profile", "check", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{p}: {}", text(&o));
        assert!(text(&o).contains("needs --target"), "{}", text(&o));
    }
    // The JVM example's vendor profile: what it shows alone.
    let java =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/java-provider/profile.toml");
    let o = cetp(&["profile", "check", java.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// The reference's own profile with one field made wrong: `profile check`
/// (and `cetp run`, before anything executes) exits 2 naming the field.
fn wrong(name: &str, edit: impl Fn(&str) -> String, field: &str, says: &str) {
    let dir = tmp(name);
    let base = std::fs::read_to_string(profiles().join("reference.toml")).unwrap();
    let changed = edit(&base);
    assert_ne!(changed, base, "{name}: the edit changed nothing");
    let p = dir.join("p.toml");
    std::fs::write(&p, &changed).unwrap();
    let o = cetp(&["profile", "check", p.to_str().unwrap(), "--target", "sim"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{name}: {t}");
    assert!(t.contains(&format!("error: {field}:")), "{name}: {t}");
    assert!(t.contains(says), "{name}: {t}");
    // The same findings as JSON on stdout, for CI.
    let o = cetp(&[
        "profile",
        "check",
        p.to_str().unwrap(),
        "--target",
        "sim",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        j["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["field"] == field && e["message"].as_str().unwrap().contains(says)),
        "{name}: {j}"
    );
    let report = dir.join("report");
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--profile",
        p.to_str().unwrap(),
        "--report-dir",
        report.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
    assert!(text(&o).contains(field), "{name}: {}", text(&o));
    // Stopped before anything ran: no report was written.
    assert!(!report.join("report.json").exists(), "{name}");
}

#[test]
fn args_that_break_the_input_schema_are_a_usage_error() {
    wrong(
        "args",
        |b| {
            b.replace(
                "sample_args = { symbol = \"ACME\", price = 12.5 }",
                "sample_args = { symbol = \"ACME\", price = \"cheap\" }",
            )
        },
        "tools.create_alert.sample_args",
        "breaks the input_schema of create_alert",
    );
}

#[test]
fn a_bind_pointer_naming_nothing_in_the_output_schema_is_a_usage_error() {
    wrong(
        "bind",
        |b| {
            b.replace(
                "[tools.delete_alert]\nsample_args = { alert_id = \"alert-cetp-probe\" }",
                "[tools.delete_alert]\nsample_args = { alert_id = \"alert-cetp-probe\" }\nsetup = [ { tool = \"create_alert\", args = { symbol = \"ACME\", price = 3.5 }, bind = { \"/alert_id\" = \"/id\" } } ]",
            )
        },
        "tools.delete_alert.setup[0].bind",
        "value \"/id\" names nothing in the output_schema of create_alert",
    );
}

#[test]
fn an_observer_pointer_that_cannot_exist_is_a_usage_error() {
    wrong(
        "observer",
        |b| b.replace("pointer = \"/effects\"", "pointer = \"/effect_count\""),
        "observer.pointer",
        "names nothing the output_schema of list_alerts allows",
    );
    // A count must be a number or a list.
    wrong(
        "observer-type",
        |b| {
            b.replace(
                "tool = \"list_alerts\"\npointer = \"/effects\"",
                "tool = \"get_quote\"\nargs = { symbol = \"ACME\" }\npointer = \"/symbol\"",
            )
        },
        "observer.counts",
        "needs a number or an array",
    );
}

#[test]
fn a_role_on_a_tool_without_its_annotations_is_a_usage_error() {
    // A read tool that b may not use, named on a tool that is no read.
    wrong(
        "role",
        |b| {
            b.replace(
                "[roles.read_scope_missing_for_b]\ntool = \"export_history\"",
                "[roles.read_scope_missing_for_b]\ntool = \"sync_portfolio\"",
            )
        },
        "roles.read_scope_missing_for_b.tool",
        "needs a tool with effect=read",
    );
    // A background operation from a tool that is only ever synchronous.
    wrong(
        "role-async",
        |b| {
            b.replace(
                "[roles.failing_operation]\ntool = \"sync_portfolio\"\nargs = { fail = true }",
                "[roles.failing_operation]\ntool = \"get_quote\"\nargs = { symbol = \"ACME\" }",
            )
        },
        "roles.failing_operation.tool",
        "execution=sync_or_async",
    );
    // A role no case uses (a typo).
    wrong(
        "role-name",
        |b| b.replace("[roles.large_result]", "[roles.large_results]"),
        "roles.large_results",
        "no case uses a role",
    );
}

#[test]
fn a_setup_or_role_tool_that_is_not_allowed_is_a_usage_error() {
    wrong(
        "setup-allowed",
        |b| {
            b.replace(
                "allow = [\"create_alert\", \"delete_alert\", \"sync_portfolio\"]",
                "allow = [\"delete_alert\", \"sync_portfolio\"]",
            )
            .replace(
                "[tools.delete_alert]\nsample_args = { alert_id = \"alert-cetp-probe\" }",
                "[tools.delete_alert]\nsetup = [ { tool = \"create_alert\", args = { symbol = \"ACME\", price = 3.5 }, bind = { \"/alert_id\" = \"/alert_id\" } } ]",
            )
        },
        "tools.delete_alert.setup[0].tool",
        "[execute] allow does not list it",
    );
    wrong(
        "unknown-tool",
        |b| b.replace("[tools.export_history]", "[tools.export_histories]"),
        "tools.export_histories",
        "the Provider lists no tool \"export_histories\"",
    );
}

#[test]
fn missing_fields_name_the_cases_they_leave_unjudged() {
    let dir = tmp("missing");
    let base = std::fs::read_to_string(profiles().join("reference.toml")).unwrap();
    let start = base.find("[observer]").unwrap();
    let end = start + base[start..].find("[roles.").unwrap();
    let p = dir.join("no-observer.toml");
    std::fs::write(&p, format!("{}{}", &base[..start], &base[end..])).unwrap();
    let o = cetp(&["profile", "check", p.to_str().unwrap(), "--target", "sim"]);
    let t = text(&o);
    // Missing is not wrong: the check passes and informs.
    assert_eq!(o.status.code(), Some(0), "{t}");
    let line = t
        .lines()
        .find(|l| l.starts_with("missing: [observer] "))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        line.contains("IDEM-004") && line.contains("CETP2-6-02"),
        "{line}"
    );
    // The run says the same before it starts.
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--profile",
        p.to_str().unwrap(),
        "--only",
        "IDEM-004",
    ]);
    assert!(
        text(&o).contains("profile: without [observer]"),
        "{}",
        text(&o)
    );
}

/// The starter for the reference, as a vendor reads it (a review artifact:
/// a change to what `cetp init` writes shows in the diff).
#[test]
fn the_reference_starter_snapshot() {
    let dir = tmp("snapshot");
    let out = dir.join("reference.toml");
    let o = cetp(&["init", "--target", "sim", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    insta::assert_snapshot!(std::fs::read_to_string(&out).unwrap());
}

/// A Provider whose descriptors break the spec is the run's to judge: the
/// check a run makes first never turns its mutant into a usage error.
#[test]
fn descriptors_that_break_the_spec_fail_the_run_not_the_profile() {
    let profile = profiles().join("reference.toml");
    for m in [
        "annotation_booleans_as_strings",
        "unknown_annotation_enum",
        "remote_ref_in_schema",
        "missing_output_schema",
    ] {
        let o = cetp(&[
            "run",
            "--target",
            &format!("sim:mutant={m}"),
            "--profile",
            profile.to_str().unwrap(),
            "--only",
            "EXE-*",
        ]);
        assert_eq!(o.status.code(), Some(1), "{m}: {}", text(&o));
    }
}

/// `cetp replay FILE --profile P`: the vendor's profile is written for the
/// whole vector set, and a replayed finding uses a few of its roles. The
/// roles no replayed case uses are not typos (the run starts and judges the
/// case); a role the whole set does not know still is.
#[test]
fn a_replayed_case_file_takes_the_whole_suites_profile() {
    let dir = tmp("replay-roles");
    let case = serde_json::json!({
        "format_version": 1,
        "group": "fuzz-findings",
        "description": "one case using one role",
        "cases": [{
            "id": "REPLAY-ROLE-1", "title": "a failing operation is accepted",
            "role": "provider", "level": "MUST",
            "requirements": ["CETP2-4.4-01"],
            "steps": [
                {"do": "negotiate", "as": "a", "bind": "s", "capabilities": ["async_operations"]},
                {"do": "call", "as": "a", "method": "execute_tool", "session": "s",
                 "tool": {"profile_role": "failing_operation"}, "args": "valid", "bind": "e",
                 "expect": {"status": ["accepted"]}, "requirements": ["CETP2-4.4-01"]}
            ]
        }]
    });
    let file = dir.join("finding.json");
    std::fs::write(&file, case.to_string()).unwrap();
    let reference = profiles().join("reference.toml");
    let replay = |profile: &Path| {
        cetp(&[
            "replay",
            file.to_str().unwrap(),
            "--target",
            "sim",
            "--profile",
            profile.to_str().unwrap(),
        ])
    };
    let o = replay(&reference);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(!t.contains("no case uses a role"), "{t}");
    assert!(t.contains("REPLAY-ROLE-1"), "{t}");
    // A typo is still one.
    let typo = dir.join("typo.toml");
    std::fs::write(
        &typo,
        std::fs::read_to_string(&reference)
            .unwrap()
            .replace("[roles.large_result]", "[roles.large_results]"),
    )
    .unwrap();
    let o = replay(&typo);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("roles.large_results"), "{t}");
}
