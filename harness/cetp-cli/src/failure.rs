//! The failures every command shares, with their exit codes, and the small
//! readers they use (the vectors, a target's spec): the library's
//! (`cetp_commands`), named here for the command modules.

pub(crate) use cetp_commands::failure::{cannot_open, dir_failure, infra, now_ms, usage, Failure};
pub(crate) use cetp_commands::inputs::{
    load_suite, parse_target, profile_for, read_lock, vectors_or_default,
};
pub(crate) use cetp_commands::run::on_interrupt;
use std::path::{Path, PathBuf};

pub(crate) fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
