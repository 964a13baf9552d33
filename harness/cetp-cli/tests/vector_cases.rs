//! One Rust test per vector case: `cargo test -p cetp-cli --test vector_cases
//! -- NEG-003` runs that case against a fresh simulated device hosting the
//! reference Provider, through the probe-wire codec, and fails unless the
//! case PASSes (or is NOT_APPLICABLE with a reason the reference should never
//! give: the reference is complete, so that fails too).

use cetp_conformance::event::{Fanout, Verdict};
use cetp_conformance::profile::Profile;
use cetp_conformance::runner::{run, RunConfig};
use cetp_conformance::suite::{default_vectors_dir, Suite};
use cetp_targets::{open, SimSpec, TargetSpec};
use libtest_mimic::{Arguments, Failed, Trial};

const REFERENCE_PROFILE: &str = include_str!("../../../profiles/reference.toml");

fn run_case(id: &str) -> Result<(), Failed> {
    let suite = Suite::load(&default_vectors_dir()).map_err(|e| Failed::from(e.to_string()))?;
    let profile = Profile::from_toml(REFERENCE_PROFILE).map_err(|e| Failed::from(e.to_string()))?;
    let target =
        open(&TargetSpec::Sim(SimSpec::default())).map_err(|e| Failed::from(e.to_string()))?;
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
