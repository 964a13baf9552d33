//! The whole suite against the reference Provider in-process: every case
//! must PASS or be NOT_APPLICABLE.

use cetp_conformance::event::{Fanout, Verdict};
use cetp_conformance::local::local_target;
use cetp_conformance::profile::Profile;
use cetp_conformance::runner::{run, RunConfig};
use cetp_conformance::suite::{default_vectors_dir, Suite};
use cetp_reference::device::{DeviceClock, IDENTITY_A, IDENTITY_B};
use cetp_reference::provider::{thread_sleeper, ProviderConfig, ReferenceProvider};
use std::sync::Arc;

pub fn reference_config() -> ProviderConfig {
    let mut cfg = ProviderConfig::default();
    let mut b = ProviderConfig::all_scopes();
    b.remove("portfolio.sync");
    cfg.grants
        .insert(IDENTITY_A.uid, ProviderConfig::all_scopes());
    cfg.grants.insert(IDENTITY_B.uid, b);
    cfg.effect_delay_ms = 20;
    cfg.sleeper = thread_sleeper();
    cfg
}

fn profile() -> Profile {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/reference.toml"
    ))
    .unwrap();
    Profile::from_toml(&text).unwrap()
}

#[test]
fn reference_passes_everything() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let app = Arc::new(ReferenceProvider::new(reference_config()));
    let target = local_target(app, DeviceClock::system(0));
    let cfg = RunConfig {
        seed: 7,
        harness_version: "test".into(),
        ..Default::default()
    };
    let out = run(&suite, &target, &profile(), &cfg, &mut Fanout::default());
    let mut bad = Vec::new();
    for c in &out.cases {
        if !matches!(c.verdict, Verdict::Pass | Verdict::NotApplicable) {
            bad.push(format!("{} {:?}: {}", c.id, c.verdict, c.reason));
        }
    }
    for c in &out.checks {
        if c.verdict != Verdict::Pass {
            bad.push(format!("{} {:?}: {}", c.id, c.verdict, c.reason));
        }
    }
    let na: Vec<String> = out
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::NotApplicable)
        .map(|c| format!("{}: {}", c.id, c.reason))
        .collect();
    assert!(
        bad.is_empty(),
        "not passing:\n{}\n(not applicable: {na:?})",
        bad.join("\n")
    );
    assert!(out.claim.cetp_v2, "{}", out.claim.statement);
    assert!(
        na.is_empty(),
        "the reference is complete, nothing should be N/A: {na:?}"
    );
}
