//! One Rust test per vector case: `cargo test -p cetp-cli --test vector_cases
//! -- NEG-003` runs that case against a fresh simulated device hosting the
//! reference Provider, through the probe-wire codec, and fails unless the
//! case PASSes (or is NOT_APPLICABLE with a reason the reference should never
//! give: the reference is complete, so that fails too).

use cetp_conformance::runner::{run, RunConfig};
use cetp_reference::provider::ManifestVariant;
use cetp_targets::{open, SimSpec, TargetSpec};
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::{default_vectors_dir, Suite};
use libtest_mimic::{Arguments, Failed, Trial};

const REFERENCE_PROFILE: &str = include_str!("../../../profiles/reference.toml");

fn run_case(id: &str) -> Result<(), Failed> {
    let suite = Suite::load(&default_vectors_dir()).map_err(|e| Failed::from(e.to_string()))?;
    let profile = Profile::from_toml(REFERENCE_PROFILE).map_err(|e| Failed::from(e.to_string()))?;
    // A case for one manifest shape only runs against a reference that
    // declares it (the reference app is dual-stack; NEG-014 is v2-only).
    let case = suite.cases.iter().find(|c| c.id == id);
    let manifest = match case.map(|c| c.manifests.as_slice()) {
        Some(m) if !m.is_empty() && !m.iter().any(|k| k == "dual_stack") => match m[0].as_str() {
            "v2_only" => ManifestVariant::V2Only,
            "v1_only" => ManifestVariant::V1Only,
            _ => ManifestVariant::VersionsOnly,
        },
        _ => ManifestVariant::DualStack,
    };
    let target = open(&TargetSpec::Sim(SimSpec {
        manifest,
        ..SimSpec::default()
    }))
    .map_err(|e| Failed::from(e.to_string()))?;
    let cfg = RunConfig {
        seed: 1,
        only: vec![id.to_string()],
        harness_version: "test".into(),
        ..RunConfig::default()
    };
    let out = run(&suite, &target, &profile, &cfg, &mut Fanout::default());
    let case = out
        .cases
        .first()
        .ok_or_else(|| Failed::from(format!("case {id} did not run")))?;
    match case.verdict {
        Verdict::Pass => Ok(()),
        other => Err(format!("{id}: {} — {}", other.as_str(), case.reason).into()),
    }
}

fn main() {
    let args = Arguments::from_args();
    let suite = Suite::load(&default_vectors_dir()).expect("vectors load");
    let trials = suite
        .cases
        .iter()
        .map(|c| {
            let id = c.id.clone();
            Trial::test(c.id.clone(), move || run_case(&id)).with_kind(c.requirements.join(" "))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
