//! Sans-IO core of CETP v2 (spec: `cetp-v2.zh.md`).
//!
//! Everything here is pure data and pure functions: no sockets, no threads, no
//! wall clock (time is always passed in as Unix epoch milliseconds). Every other
//! crate of the harness depends on this one; it depends on nothing of ours.

pub mod binder;
pub mod bundle;
pub mod canonical;
pub mod catalog;
pub mod descriptor;
pub mod device;
pub mod discovery;
pub mod envelope;
pub mod error;
pub mod pointer;
pub mod provider;
pub mod schema;
pub mod violation;

pub use bundle::{Bundle, FdValue, FieldError, PendingIntentValue, Value};
pub use error::{ErrorCode, RetryRule};
