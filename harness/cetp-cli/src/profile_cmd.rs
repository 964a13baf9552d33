//! `cetp profile check` and `cetp init`: wiring only; the judgement is
//! `cetp_profile::profile_check`, the starter `profile_init`.

use super::{fetch_failure, infra, load_suite, open_target, parse_target, usage, Failure};
use cetp_commands::profile::conclude;
use cetp_conformance::exit::ExitCode;
use cetp_profile::profile_check::{self, read_live, Live};
use cetp_report::escape;
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ProfileCmd {
    /// Judge a profile without running the suite: every wrong field is a
    /// usage error (exit 2) naming it; every missing field is listed with
    /// the cases and requirements it leaves unjudged. Without --target,
    /// only what the profile alone shows (and says what needs a target).
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// The profile (TOML; profiles/README.md).
    pub profile: PathBuf,
    /// A live Provider to check the profile against: sim[:...] | tcp:HOST:PORT[,b=HOST:PORT] | adb[:SERIAL][,...] | jvm:... (see below).
    #[arg(long)]
    pub target: Option<String>,
    /// Endpoint of the second caller identity (tcp targets).
    #[arg(long, value_name = "HOST:PORT", requires = "target")]
    pub target_b: Option<String>,
    #[arg(long, value_name = "HOST:PORT")]
    pub adb_server: Option<String>,
    #[arg(long)]
    pub vectors: Option<PathBuf>,
    /// `json`: the findings as one JSON object on stdout (`errors`,
    /// `missing`, `needs_target`) for CI; the exit code is the same.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CheckFormat,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    Text,
    Json,
}

#[derive(Args)]
pub struct InitArgs {
    /// The live Provider: sim[:...] | tcp:HOST:PORT[,b=HOST:PORT] | adb[:SERIAL][,...] | jvm:... (see below).
    #[arg(long)]
    pub target: String,
    /// Endpoint of the second caller identity (tcp targets).
    #[arg(long, value_name = "HOST:PORT")]
    pub target_b: Option<String>,
    #[arg(long, value_name = "HOST:PORT")]
    pub adb_server: Option<String>,
    /// The Provider's package, when the device has several.
    #[arg(long)]
    pub package: Option<String>,
    /// Where the starter profile goes.
    #[arg(long)]
    pub out: PathBuf,
    /// Overwrite --out if it exists.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub vectors: Option<PathBuf>,
}

/// A value `schema` accepts from `cetp-gen`, the same on every call (a
/// fixed seed: the same Provider gives the same starter).
fn generate(schema: &serde_json::Value) -> Option<serde_json::Value> {
    use proptest::test_runner::{RngAlgorithm, TestRng};
    let g = cetp_gen::Generator::new(schema).ok()?;
    g.draw_valid(&mut TestRng::from_seed(RngAlgorithm::ChaCha, &[7u8; 32]))
        .ok()
}

fn esc(s: &str) -> String {
    escape::terminal(s, 2000)
}

fn live_of(
    target: &str,
    target_b: &Option<String>,
    adb_server: &Option<String>,
    profile: &Profile,
) -> Result<Live, Failure> {
    let spec = parse_target(target, target_b, adb_server)?;
    let t = open_target(&spec, target)?;
    read_live(&t, profile).map_err(fetch_failure)
}

pub fn check_command(cmd: &ProfileCmd) -> Result<ExitCode, Failure> {
    let ProfileCmd::Check(args) = cmd;
    let text = std::fs::read_to_string(&args.profile)
        .map_err(|e| usage(format!("profile {}: {e}", args.profile.display())))?;
    let profile =
        Profile::from_toml(&text).map_err(|e| usage(format!("{}: {e}", args.profile.display())))?;
    let (_, suite) = load_suite(&args.vectors)?;
    let live = match &args.target {
        Some(t) => Some(live_of(t, &args.target_b, &args.adb_server, &profile)?),
        None => None,
    };
    let report = profile_check::check(&profile, &suite, live.as_ref().map(|l| &l.facts));
    if args.format == CheckFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report)
                .map_err(|e| infra(format!("cannot render the findings: {e}")))?
        );
    }
    conclude(&report, &args.profile.display().to_string())
}

pub fn init_command(args: &InitArgs) -> Result<ExitCode, Failure> {
    if args.out.exists() && !args.force {
        return Err(usage(format!(
            "{} exists: give --force to overwrite it",
            args.out.display()
        )));
    }
    let (_, suite): (_, Suite) = load_suite(&args.vectors)?;
    let mut naming = Profile::default();
    naming.target.package = args.package.clone();
    let live = live_of(&args.target, &args.target_b, &args.adb_server, &naming)?;
    let text = cetp_profile::profile_init::starter(&live, &suite, &args.target, &generate);
    std::fs::write(&args.out, &text)
        .map_err(|e| infra(format!("cannot write {}: {e}", args.out.display())))?;
    let profile = Profile::from_toml(&text)
        .map_err(|e| infra(format!("internal: the starter profile does not parse: {e}")))?;
    let report = profile_check::check(&profile, &suite, Some(&live.facts));
    println!(
        "wrote {}: a starter profile of {} ({} tool(s)); nothing side-effecting was executed",
        args.out.display(),
        esc(&live.package),
        live.facts.tools.len()
    );
    for m in &report.missing {
        println!(
            "  without {}: {} case(s) unjudged ({} core)",
            esc(&m.needs),
            m.cases.len(),
            m.core_cases.len()
        );
    }
    Ok(ExitCode::Ok)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn generate_satisfies_a_pattern_the_runner_cannot() {
        let schema = json!({"type": "object", "properties": {"task_id": {"type": "string", "pattern": "^t[0-9]{1,12}$"}}, "required": ["task_id"], "additionalProperties": false});
        let v = super::generate(&schema);
        let v = v.expect("a value");
        let c = cetp_proto::schema::CompiledSchema::compile(
            &schema,
            "https://json-schema.org/draft/2020-12/schema",
        )
        .unwrap();
        assert!(c.is_valid(&v), "{v}");
        let id = v["task_id"].as_str().unwrap();
        assert!(
            id.starts_with('t') && id[1..].chars().all(|c| c.is_ascii_digit()),
            "{v}"
        );
    }
}
