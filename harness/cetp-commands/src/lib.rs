//! What each `cetp` command does, as library calls: the command line
//! (`cetp-cli`) turns its arguments into one of these calls and its result
//! into an exit code, nothing else (issue 43).
//!
//! It sits above the reporters (`cetp-report`) and the targets
//! (`cetp-targets`), since a run needs both, and below `cetp-cli`:
//! [`provider`] holds `cetp run`, `replay` and `resume`, on the run
//! machinery of [`run`] (one device) and [`devices`] (several);
//! [`consumer`] holds the Consumer half's commands. Their failures are
//! [`Failure`]s, grouped by who is at fault, each with its exit code.

pub mod consumer;
pub mod devices;
pub mod embedded;
pub mod failure;
pub mod inputs;
pub mod options;
pub mod profile;
pub mod provider;
pub mod run;

pub use failure::{dir_failure, infra, now_ms, usage, Failure};
