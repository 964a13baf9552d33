//! The vector language and its interpreter: what a conformance case is
//! ([`vector`], loaded as a [`suite::Suite`]), the values it draws
//! ([`args`], [`template`]), the answers it expects ([`answer`]), the
//! checks judged over every answer ([`checks`]), the profile a vendor
//! writes ([`profile`]), and the interpreter that runs one case against a
//! [`device::Target`] ([`interp`]), emitting the one typed event stream
//! ([`event::Event`]) that the run and every reporter consume.
//!
//! It knows nothing of runs, journals or transports: the run
//! (`cetp-conformance`), the fuzzer and the Consumer half build on it;
//! nothing here imports them.

pub mod advice;
pub mod answer;
pub mod args;
pub mod checks;
pub mod device;
pub mod event;
pub mod interp;
pub mod profile;
pub mod stall;
pub mod suite;
pub mod template;
pub mod vector;
