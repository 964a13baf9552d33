//! Tool contract lock and drift classification for CETP v2, sans I/O.
//!
//! After `background-tool-contracts.zh.md`, a tool is its whole contract,
//! not its name; §3.3 of the spec binds `revision` to that contract. This
//! crate turns the `negotiate`, `get_provider_info` and `list_tools` answers
//! into a deterministic lock (`cetp-lock/1`, [`lock`]) and classifies every
//! difference between two locks ([`drift`]): breaking, compatible, or a
//! violation of the §3.3 revision rule. Talking to a device is the runner's
//! business (`cetp-conformance`).

pub mod class;
pub mod drift;
pub mod lock;
pub mod order;
pub mod schema_diff;

pub use drift::{diff, Class, DriftReport, Finding};
pub use lock::{build, Answers, Built, Lock, Problem};
