//! The conformance runner: vectors, checks, profiles, the §9 claim, the
//! baseline and self-test with mutants. It emits one typed event stream
//! ([`event::Event`]) that reporters consume; it knows nothing of transports
//! (a [`device::Target`] is handed in).

pub mod answer;
pub mod args;
pub mod checks;
pub mod consumer;
pub mod contract;
pub mod coverage;
pub mod device;
pub mod dispatch;
pub mod event;
pub mod exit;
pub mod interp;
pub mod journal;
pub mod local;
pub mod pin;
pub mod profile;
pub mod rundir;
pub mod runner;
pub mod selftest;
pub mod stall;
pub mod stats;
pub mod suite;
pub mod template;
pub mod vector;
