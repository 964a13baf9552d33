//! The harness's proof of itself (`cetp selftest`): every fixture Provider
//! of the reference runs the suite and passes it, every mutant fails the
//! case citing the requirement it breaks, every legal variant (a choice
//! the spec leaves open) passes, and the proof record says so.
//!
//! Built on the run (`cetp-conformance`); nothing imports it but the CLI.

pub mod selftest;
