//! Reference implementations of CETP v2 built on `cetp-proto`: the oracle the
//! harness judges against, and the home of the mutants that prove every check
//! can fail.
//!
//! - [`app::ProviderApp`]: what a device (simulated or in-process) hosts.
//! - [`provider`]: the reference Provider (all of v2, the three optional
//!   capabilities, and the read-only v1 view of a dual-stack Provider), with
//!   named mutants; its engine hosts the reference app or the notes app.
//! - [`device::LocalDevice`]: an in-process device hosting a `ProviderApp`,
//!   with per-connection handle tables and a device clock.
//! - [`consumer`]: the reference Consumer, written against
//!   [`port::ConsumerPort`] so it runs in-process or over any transport.

pub mod app;
pub mod consumer;
pub mod device;
pub mod port;
pub mod provider;
