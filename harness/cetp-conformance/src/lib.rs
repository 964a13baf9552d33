//! The conformance runner: vectors, checks, profiles, the §9 claim, the
//! baseline and self-test with mutants. It emits one typed event stream
//! ([`event::Event`]) that reporters consume; it knows nothing of transports
//! (a [`device::Target`] is handed in).
//!
//! A run, in the order it happens, and where each part lives:
//! - [`rundir::RunDir`]: the report directory and its journal's lifecycle
//!   (a run that did not end is kept for `cetp resume`);
//! - [`dispatch::Dispatcher`]: the one dispatcher both halves go through;
//!   it emits each case's events around an executor, applies the baseline,
//!   and folds retries ([`dispatch::AttemptFolder`], FLAKY);
//! - the executors: [`runner`] (the Provider half: identify, pin, cases,
//!   checks, the §9 claim) and [`consumer::runner`] (the Consumer half:
//!   scenarios against the scripted hostile Provider);
//! - [`stats::RunStats`]: what the finished cases, checks and stale
//!   baseline entries add up to: summary, claim and exit code
//!   ([`exit::ExitCode`], the one place exit codes are mapped);
//! - [`selftest`]: the fixture Providers, mutants, legal variants and the
//!   proof record.

pub mod advice;
pub mod answer;
pub mod args;
pub mod checks;
pub mod config;
pub mod consumer;
pub mod coverage;
pub mod device;
pub mod devices;
pub mod dispatch;
pub mod event;
pub mod exit;
pub mod identify;
pub mod in_process;
pub mod interp;
pub mod journal;
pub mod lock_target;
pub mod merge;
pub mod partition;
pub mod pin;
pub mod profile;
pub mod profile_check;
pub mod profile_init;
pub mod rundir;
pub mod runner;
pub mod selftest;
pub mod stall;
pub mod stats;
pub mod suite;
pub mod template;
pub mod vector;
