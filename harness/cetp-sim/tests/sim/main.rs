//! The simulated device over the probe wire: in-process pipes, TCP, the adb
//! services, scripted Providers.

mod adb;
mod hosted;
mod support;
mod tcp;
mod wire;
