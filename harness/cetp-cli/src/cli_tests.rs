//! The command line's own promises, checked against its clap definitions:
//! every suggestion naming a flag parses with the command that prints it,
//! and every command that takes `--target` lists the target forms in its
//! `--help` (issue 42).

use super::Cli;
use cetp_vectors::advice;
use clap::{CommandFactory, Parser};
use std::path::Path;

/// What a command needs before a suggested flag (its required arguments).
fn base(command: &str) -> Vec<&'static str> {
    match command {
        "run" => vec!["run"],
        "replay" => vec!["replay", "ENV-001"],
        "fuzz" => vec!["fuzz", "--out", "/tmp/fz", "--budget", "60s"],
        // The suggestion comes from a check against a live Provider.
        "profile check" => vec![
            "profile",
            "check",
            "p.toml",
            "--target",
            "tcp:127.0.0.1:7000",
        ],
        "init" => vec!["init", "--target", "sim", "--out", "p.toml"],
        other => panic!("advice names {other:?}: add its required arguments here"),
    }
}

/// Suggestions a command prints but does not accept yet, each with the
/// issue that makes it accept it. The test fails once it does, so the entry
/// goes (`cetp fuzz` accepts `--max-wait` since issue 40).
const PENDING: &[(&str, &str)] = &[];

#[test]
fn every_suggested_flag_parses_with_the_command_that_prints_it() {
    let mut broken = Vec::new();
    for f in advice::ALL {
        for cmd in f.printed_by {
            let mut argv = vec!["cetp"];
            argv.extend(base(cmd));
            let with = f.with(f.example);
            argv.extend(with.split(' '));
            let parsed = Cli::try_parse_from(&argv);
            let pending = PENDING.contains(&(*cmd, f.flag));
            match (parsed, pending) {
                (Ok(_), false) | (Err(_), true) => {}
                (Ok(_), true) => broken.push(format!(
                    "`cetp {cmd}` now accepts {}: drop it from PENDING",
                    f.flag
                )),
                (Err(e), false) => broken.push(format!(
                    "`cetp {cmd}` prints `{with}` but refuses it: {}",
                    e.to_string().lines().next().unwrap_or("")
                )),
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// Long flags named in string literals of `src`'s files (comments left
/// out): texts a user reads and may type.
fn flags_in_strings(src: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            flags_in_strings(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            // Only what lies between double quotes.
            for (i, part) in code.split('"').enumerate() {
                if i % 2 == 0 {
                    continue;
                }
                for (at, _) in part.match_indices("--") {
                    let flag: String = part[at..]
                        .chars()
                        .take_while(|c| *c == '-' || c.is_ascii_lowercase())
                        .collect();
                    if flag.len() > 3 && !part[..at].ends_with(|c: char| c.is_alphanumeric()) {
                        out.push((flag, path.display().to_string()));
                    }
                }
            }
        }
    }
}

#[test]
fn every_flag_the_library_texts_name_is_a_flag_of_some_command() {
    let mut known = std::collections::BTreeSet::new();
    fn walk(c: &clap::Command, known: &mut std::collections::BTreeSet<String>) {
        for a in c.get_arguments() {
            if let Some(l) = a.get_long() {
                known.insert(format!("--{l}"));
            }
        }
        for s in c.get_subcommands() {
            walk(s, known);
        }
    }
    walk(&Cli::command(), &mut known);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for krate in [
        "cetp-conformance",
        "cetp-report",
        "cetp-targets",
        "cetp-fuzz",
    ] {
        flags_in_strings(&root.join(krate).join("src"), &mut found);
    }
    assert!(
        found.iter().any(|(f, _)| f == "--max-wait"),
        "the scan finds nothing"
    );
    // Arguments of other programs the harness runs (`am instrument`, a
    // vendor's driver, scripts/jvm-device.sh for a jvm: target), not of cetp.
    let foreign = [
        "--es",
        "--do",
        "--defect",
        "--provider-jar",
        "--provider-apk",
        "--provider-class",
        "--authority",
        "--package",
        "--permission",
        "--manifest",
        "--meta",
        "--provider-meta",
        "--classpath",
        "--jvm-prop",
        "--build-only",
        "--no-build",
        "--listen-b",
        "--consumer-jar",
        "--consumer-class",
        "--consumer-package",
        "--consumer-apk",
    ];
    let unknown: Vec<&(String, String)> = found
        .iter()
        .filter(|(f, _)| !known.contains(f) && !foreign.contains(&f.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "flags no cetp command takes: {unknown:?}"
    );
}

/// Every command (with its path of subcommand names) whose arguments
/// include `--target`.
fn taking_target(c: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    for s in c.get_subcommands() {
        let p = format!("{path} {}", s.get_name()).trim().to_string();
        if s.get_arguments().any(|a| a.get_long() == Some("target")) {
            out.push((p.clone(), s.clone()));
        }
        taking_target(s, &p, out);
    }
}

#[test]
fn the_help_of_every_command_taking_a_target_lists_the_target_forms() {
    let mut commands = Vec::new();
    taking_target(&Cli::command(), "", &mut commands);
    let names: Vec<&str> = commands.iter().map(|c| c.0.as_str()).collect();
    for want in [
        "run",
        "replay",
        "fuzz",
        "consumer",
        "lock",
        "init",
        "profile check",
        "drift",
    ] {
        assert!(names.contains(&want), "{want} takes no --target? {names:?}");
    }
    for (name, mut c) in commands {
        let help = c.render_long_help().to_string();
        let forms = match name.as_str() {
            "consumer" => crate::consumer_cmd::CONSUMER_TARGET_FORMS,
            // One endpoint only: its --target help says `tcp:HOST:PORT`.
            "consumer-act" => {
                assert!(help.contains("tcp:HOST:PORT"), "{help}");
                continue;
            }
            _ => cetp_targets::spec::TARGET_FORMS,
        };
        assert!(
            help.contains(forms),
            "`cetp {name} --help` lacks the target forms:\n{help}"
        );
    }
    // What a vendor looks for, in `cetp run --help` as printed.
    let mut run = Cli::command();
    let help = run
        .find_subcommand_mut("run")
        .unwrap()
        .render_long_help()
        .to_string();
    for form in [
        "sim[:OPTION,...]",
        "tcp:HOST:PORT[,b=HOST:PORT]",
        "adb[:SERIAL][,OPTION,...]",
        "clock=move",
        "jvm:sample|APP.apk|JAR",
    ] {
        assert!(help.contains(form), "{form} not in `cetp run --help`");
    }
}
