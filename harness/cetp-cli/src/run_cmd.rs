//! `cetp run`, `cetp replay` and `cetp resume`: their arguments turned
//! into the library's options ([`cetp_commands::options`]); what the
//! commands do is [`cetp_commands::provider`]'s.

use super::{ColorWhen, ExitCode, Failure, Format, ResumeArgs, RunArgs};
use cetp_commands::options::{Color, ResumeOptions, RunOptions};

impl ColorWhen {
    /// The library's colour choice.
    fn color(self) -> Color {
        match self {
            ColorWhen::Auto => Color::Auto,
            ColorWhen::Always => Color::Always,
            ColorWhen::Never => Color::Never,
        }
    }
}

impl RunArgs {
    /// The run's options, as the library takes them.
    fn options(&self) -> RunOptions {
        RunOptions {
            target: self.target.clone(),
            devices: self.devices.mode(),
            target_b: self.target_b.clone(),
            adb_server: self.adb_server.clone(),
            profile: self.profile.clone(),
            report_dir: self.report_dir.clone(),
            only: self.only.clone(),
            skip: self.skip.clone(),
            partition: self.partition,
            baseline: self.baseline.clone(),
            seed: self.seed,
            attempts: self.attempts,
            run_timeout: self.run_timeout,
            max_wait: self.max_wait,
            vectors: self.vectors.clone(),
            verbose: self.verbose,
            require_claim: self.require_claim,
            lock: self.lock.clone(),
            replay_run: self.replay_run.clone(),
            color: self.color.color(),
            format: Format::document(self.format),
        }
    }
}

/// `cetp run` (`replay` none) and `cetp replay CASE|FILE`.
pub(crate) fn run_command(args: &RunArgs, replay: Option<&str>) -> Result<ExitCode, Failure> {
    cetp_commands::provider::run(&args.options(), replay)
}

/// `cetp resume DIR`.
pub(crate) fn resume_command(r: &ResumeArgs) -> Result<ExitCode, Failure> {
    cetp_commands::provider::resume(&ResumeOptions {
        dir: r.dir.clone(),
        run_timeout: r.run_timeout,
        verbose: r.verbose,
        color: r.color.color(),
    })
}
