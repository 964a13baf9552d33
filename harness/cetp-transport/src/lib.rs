//! Transports for the probe wire: a pipelined client over any byte stream,
//! and the ways to get such a stream to a device — in-process, TCP, and adb
//! (through an adb server, `adb forward` to the probe's abstract socket).
//!
//! This crate moves frames and knows nothing of CETP semantics: Bundles go
//! through untouched, and every error is a transport condition or a
//! probe-wire error kind ([`TransportError::kind`]).

#![forbid(unsafe_code)]

pub mod adb;
pub mod client;
pub mod error;
pub mod pipe;
pub mod tcp;

pub use client::{
    ui_to_wire, ClientConfig, ClientStats, Direction, EventStream, ProbeClient, RawReply, Tap,
};
pub use error::{AdbError, AdbErrorKind, TransportError};
