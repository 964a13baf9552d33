//! The conformance run: the §9 claim, the baseline and self-test with
//! mutants, over the vector language of `cetp-vectors` (cases, checks,
//! profiles, the interpreter). It emits the one typed event stream
//! ([`cetp_vectors::event::Event`]) that reporters consume; it knows
//! nothing of transports (a [`cetp_vectors::device::Target`] is handed in).
//!
//! A run, in the order it happens, and where each part lives:
//! - [`rundir::RunDir`]: the report directory and its journal's lifecycle
//!   (a run that did not end is kept for `cetp resume`);
//! - [`dispatch::Dispatcher`]: the one dispatcher both halves go through;
//!   it emits each case's events around an executor, applies the baseline,
//!   and folds retries ([`dispatch::AttemptFolder`], FLAKY);
//! - the executors: [`runner`] (the Provider half: identify, pin, cases,
//!   checks, the §9 claim) and `cetp_consumer::runner` (the Consumer half:
//!   scenarios against the scripted hostile Provider);
//! - [`stats::RunStats`]: what the finished cases, checks and stale
//!   baseline entries add up to: summary, claim and exit code
//!   ([`exit::ExitCode`], the one place exit codes are mapped);
//! - `cetp_selftest`: the fixture Providers, mutants, legal variants and
//!   the proof record, built on this crate.

pub mod config;
pub mod devices;
pub mod dispatch;
pub mod exit;
pub mod identify;
pub mod in_process;
pub mod journal;
pub mod lock_target;
pub mod merge;
pub mod partition;
pub mod pin;
pub mod rundir;
pub mod runner;
pub mod stats;
