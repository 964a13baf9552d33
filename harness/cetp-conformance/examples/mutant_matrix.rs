//! Prints, for every fault of the reference Provider, which cases and checks
//! fail against it in-process (a development aid for documenting mutants).

use cetp_conformance::in_process::in_process_target;
use cetp_conformance::runner::{run, RunConfig};
use cetp_reference::device::{DeviceClock, IDENTITY_A, IDENTITY_B};
use cetp_reference::provider::{thread_sleeper, Mutant, ProviderConfig, ReferenceProvider};
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::{default_vectors_dir, Suite};
use std::sync::Arc;

fn main() {
    let suite = Suite::load(&default_vectors_dir()).expect("vectors");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/reference.toml"
    ))
    .expect("profile");
    let profile = Profile::from_toml(&text).expect("profile");
    let only: Vec<String> = std::env::args().skip(1).collect();
    for fault in Mutant::ALL {
        if !only.is_empty() && !only.iter().any(|o| o == fault.name()) {
            continue;
        }
        let mut cfg = ProviderConfig::default();
        let mut b = ProviderConfig::all_scopes();
        b.remove("portfolio.sync");
        b.remove("history.read");
        cfg.grants
            .insert(IDENTITY_A.uid, ProviderConfig::all_scopes());
        cfg.grants.insert(IDENTITY_B.uid, b);
        cfg.effect_delay_ms = 20;
        cfg.sleeper = thread_sleeper();
        cfg.faults.insert(*fault);
        let target = in_process_target(
            Arc::new(ReferenceProvider::new(cfg)),
            DeviceClock::system(0),
        );
        let rc = RunConfig {
            seed: 7,
            harness_version: "dev".into(),
            ..Default::default()
        };
        let out = run(&suite, &target, &profile, &rc, &mut Fanout::default());
        let fails: Vec<String> = out
            .cases
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::Fail | Verdict::InfraError))
            .map(|c| {
                format!(
                    "{}[{}]",
                    c.id,
                    c.reason.chars().take(70).collect::<String>()
                )
            })
            .chain(
                out.checks
                    .iter()
                    .filter(|c| c.verdict == Verdict::Fail)
                    .map(|c| {
                        format!(
                            "{}[{}]",
                            c.id,
                            c.reason.chars().take(70).collect::<String>()
                        )
                    }),
            )
            .collect();
        println!(
            "{}: {}",
            fault.name(),
            if fails.is_empty() {
                "SURVIVED".to_string()
            } else {
                fails.join(" | ")
            }
        );
    }
}
