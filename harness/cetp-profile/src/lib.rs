//! The profile tools: what a vendor runs before and beside a run.
//! [`profile_init`] writes a starter profile from the Provider's own
//! descriptors (`cetp init`); [`profile_check`] judges a profile against
//! the vectors and, when a target is given, the live Provider's tools
//! (`cetp profile check`, a run's start-up line); [`coverage`] maps the
//! requirement catalogue to the cases and checks that enforce it.
//!
//! Built on the vector language (`cetp-vectors`) and the run's lock
//! target and identification (`cetp-conformance`); nothing there imports
//! it.

pub mod coverage;
pub mod profile_check;
pub mod profile_init;
