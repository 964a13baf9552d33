//! A small simulated device shared by the integration tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use cetp_adbd::{shell_words, BoxFuture, DeviceServices, DuplexStream, ShellOutput};

/// What the device saw.
#[derive(Default)]
pub struct State {
    /// Every `push_file` call: (path, mode, data).
    pub pushed: Vec<(String, u32, Vec<u8>)>,
    /// Every command that reached `shell`.
    pub shell_log: Vec<String>,
    /// Every `pm install PATH`: (path, bytes that had been pushed there).
    pub installed: Vec<(String, Vec<u8>)>,
    /// Every stream service asked for.
    pub opened: Vec<String>,
}

#[derive(Clone, Default)]
pub struct TestDevice {
    pub state: Arc<Mutex<State>>,
}

impl TestDevice {
    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

impl DeviceServices for TestDevice {
    fn properties(&self) -> Vec<(String, String)> {
        [
            ("ro.product.name", "cetp_sim"),
            ("ro.product.model", "CETP Simulator"),
            ("ro.product.device", "cetpsim"),
            ("ro.build.version.sdk", "34"),
            ("ro.serialno", "CETPSIM0001"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn open_stream(
        &self,
        service: &str,
    ) -> BoxFuture<'static, Result<Box<dyn DuplexStream>, String>> {
        self.state().opened.push(service.to_string());
        let service = service.to_string();
        Box::pin(async move {
            if service == "localabstract:sink" {
                // Accepts 16 bytes, then never reads again: exercises backpressure.
                let (ours, theirs) = tokio::io::duplex(16);
                tokio::spawn(async move {
                    let _keep = ours;
                    std::future::pending::<()>().await;
                });
                return Ok(Box::new(theirs) as Box<dyn DuplexStream>);
            }
            if service != "localabstract:echo" {
                return Err(format!("no such service {service}"));
            }
            let (ours, theirs) = tokio::io::duplex(64 * 1024);
            tokio::spawn(async move {
                let (mut r, mut w) = tokio::io::split(ours);
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
            Ok(Box::new(theirs) as Box<dyn DuplexStream>)
        })
    }

    fn shell(&self, command: &str) -> BoxFuture<'static, ShellOutput> {
        let mut st = self.state();
        st.shell_log.push(command.to_string());
        let words = shell_words(command).unwrap_or_default();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = match words.as_slice() {
            ["echo", rest @ ..] => ShellOutput::ok(format!("{}\n", rest.join(" "))),
            ["pm", "install", .., path] => {
                let found = st
                    .pushed
                    .iter()
                    .rev()
                    .find(|(p, _, _)| p == path)
                    .map(|(_, _, d)| d.clone());
                match found {
                    Some(data) => {
                        st.installed.push((path.to_string(), data));
                        ShellOutput::ok("Success\n")
                    }
                    None => ShellOutput::with_code("Failure [INSTALL_FAILED_INVALID_URI]\n", 1),
                }
            }
            // Debian's adb 29 cleans up after a push install with `rm 'PATH' </dev/null`.
            ["rm", ..] => ShellOutput::ok(""),
            ["repeat", n] => ShellOutput::ok(format!("{}\n", "x".repeat(n.parse().unwrap_or(0)))),
            ["panic"] => panic!("test service panics on purpose"),
            [cmd, ..] => ShellOutput::with_code(
                format!("/system/bin/sh: {cmd}: inaccessible or not found\n"),
                127,
            ),
            [] => ShellOutput::ok(""),
        };
        Box::pin(async move { out })
    }

    fn push_file(
        &self,
        path: &str,
        mode: u32,
        data: Vec<u8>,
    ) -> BoxFuture<'static, Result<(), String>> {
        self.state().pushed.push((path.to_string(), mode, data));
        Box::pin(async { Ok(()) })
    }
}

/// Deterministic pseudo-random bytes (xorshift), so failures are reproducible.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
