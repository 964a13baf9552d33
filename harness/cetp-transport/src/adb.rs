//! The adb transport: a device behind an adb server, reached with
//! `adb forward tcp:N localabstract:cetp-probe`, plus the few adb services
//! the harness needs around the probe (install, start, `am force-stop`,
//! `logcat -d`).
//!
//! adb_client is blocking and its calls can block forever (no connect or
//! read timeouts, and its socket is private), so every call runs on the
//! blocking pool under a Tokio timeout and comes back as a named
//! [`AdbError`]. A call that timed out may leave its thread blocked until the
//! server closes the socket; a runtime that owns such calls should be shut
//! down with `shutdown_background`/`shutdown_timeout`, not dropped.
//!
//! Quirks of adb_client 3.2.3 this module works around:
//! - `ADBServer` starts `adb start-server` (on the default port, whatever
//!   address it was given) before talking to a loopback server, so it is not
//!   used: [`ADBServerDevice`] is built directly for the configured address.
//! - `ADBServerDevice::install` streams through `exec:cmd package install`,
//!   which older devices (and the simulated device) refuse; installs are
//!   done as `adb install` did for years: push to `/data/local/tmp` and
//!   `pm install`.
//! - `forward(remote, local)` takes the device side first.
//! - Shell v1 (what the server uses without the `shell_v2` feature) loses
//!   the exit status: commands run as `CMD; echo __rc=$?` and the marker is
//!   parsed.
//! - `get_logs` runs `exec logcat`, which never ends; `logcat -d` is used.
//! - `shell_command` blocks until the command ends and its socket cannot be
//!   closed from outside, so the long-lived `am instrument -w -r` stream of
//!   the probe is opened with the adb host protocol directly
//!   ([`Adb::open_shell_stream`]).

use crate::error::{AdbError, AdbErrorKind, TransportError};
use adb_client::server_device::ADBServerDevice;
use adb_client::{ADBDeviceExt, RustADBError};
use std::io::{ErrorKind, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The probe app's socket for caller identity `a`.
pub const PROBE_SOCKET_A: &str = "localabstract:cetp-probe";
/// The second probe APK's socket (caller identity `b`).
pub const PROBE_SOCKET_B: &str = "localabstract:cetp-probe-b";

/// The idiom whose output carries a shell v1 command's exit status.
pub const RC_SUFFIX: &str = "; echo __rc=$?";
const RC_MARK: &[u8] = b"__rc=";

/// The adb server's default address: loopback, port `$ANDROID_ADB_SERVER_PORT`
/// or 5037.
pub fn default_server() -> SocketAddrV4 {
    let port = std::env::var("ANDROID_ADB_SERVER_PORT")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(5037);
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
}

/// Where the device is and how long and how much the harness waits for and
/// keeps from it: every adb call is bounded.
#[derive(Clone, Debug)]
pub struct AdbConfig {
    /// The adb server (not the device).
    pub server: SocketAddrV4,
    /// The device's serial; `None` means the only device the server has.
    pub serial: Option<String>,
    /// Shell commands, forwards, pushes of small files.
    pub op_timeout: Duration,
    /// Pushing and installing an APK.
    pub install_timeout: Duration,
    /// Output kept from a shell command (the tail).
    pub shell_max_bytes: usize,
    /// Output kept from `logcat -d` (the tail).
    pub logcat_max_bytes: usize,
    /// How the probe's socket is reached: `None` picks by the server's
    /// address (see [`Adb::relays_through_server`]).
    pub relay_through_server: Option<bool>,
}

impl Default for AdbConfig {
    fn default() -> Self {
        AdbConfig {
            server: default_server(),
            serial: None,
            op_timeout: Duration::from_secs(10),
            install_timeout: Duration::from_secs(120),
            shell_max_bytes: 1024 * 1024,
            logcat_max_bytes: 256 * 1024,
            relay_through_server: None,
        }
    }
}

/// What a shell command printed (stdout and stderr, merged by shell v1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellOutput {
    /// The output without the exit-status marker; the tail when truncated.
    pub output: Vec<u8>,
    /// `None` when the marker never came (the connection dropped).
    pub exit_code: Option<i32>,
    /// Whether output was dropped to keep within `shell_max_bytes`.
    pub truncated: bool,
}

impl ShellOutput {
    /// The output as text, invalid UTF-8 replaced, for messages and parsing.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }
}

/// Keeps the last `max` bytes written to it.
struct Tail {
    buf: Vec<u8>,
    max: usize,
    truncated: bool,
}

impl Tail {
    fn new(max: usize) -> Self {
        Tail {
            buf: Vec::new(),
            max: max.max(1),
            truncated: false,
        }
    }

    fn into_inner(mut self) -> (Vec<u8>, bool) {
        if self.buf.len() > self.max {
            let cut = self.buf.len() - self.max;
            self.buf.drain(..cut);
            self.truncated = true;
        }
        (self.buf, self.truncated)
    }
}

impl Write for Tail {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        // Amortized: trim only when twice the limit is buffered.
        self.buf.extend_from_slice(data);
        if self.buf.len() > 2 * self.max {
            let cut = self.buf.len() - self.max;
            self.buf.drain(..cut);
            self.truncated = true;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Splits the `__rc=N` marker off the end of a command's output.
pub fn split_exit_code(out: &[u8]) -> (Vec<u8>, Option<i32>) {
    let trimmed = out.strip_suffix(b"\n").unwrap_or(out);
    let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
    let line_start = trimmed
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let last = &trimmed[line_start..];
    match last.strip_prefix(RC_MARK) {
        Some(code) => match std::str::from_utf8(code)
            .ok()
            .and_then(|c| c.trim().parse().ok())
        {
            Some(rc) => (out[..line_start].to_vec(), Some(rc)),
            None => (out.to_vec(), None),
        },
        None => (out.to_vec(), None),
    }
}

/// Quotes a word for the device's `sh` where it needs it (the
/// `shell-words` crate: single quotes, a quote inside as `'\''`).
pub fn sh_quote(word: &str) -> String {
    shell_words::quote(word).into_owned()
}

fn classify(what: &str, e: RustADBError) -> AdbError {
    use AdbErrorKind as K;
    let kind = match &e {
        RustADBError::IOError(io) => match io.kind() {
            ErrorKind::ConnectionRefused
            | ErrorKind::AddrNotAvailable
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable => K::ServerUnreachable,
            ErrorKind::TimedOut | ErrorKind::WouldBlock => K::Timeout,
            _ => K::ConnectionDropped,
        },
        RustADBError::ADBRequestFailed(msg) => {
            let m = msg.to_ascii_lowercase();
            if ["offline", "unauthorized", "authorizing", "connecting"]
                .iter()
                .any(|w| m.contains(w))
            {
                K::DeviceOffline
            } else if m.contains("more than one") {
                K::DeviceAmbiguous
            } else if m.contains("not found")
                || m.contains("no devices")
                || m.contains("no emulators")
            {
                K::DeviceNotFound
            } else {
                K::CommandFailed
            }
        }
        RustADBError::DeviceNotFound(_) => K::DeviceNotFound,
        _ => K::CommandFailed,
    };
    AdbError::new(kind, format!("{what}: {e}"))
}

/// A device behind an adb server. Cheap to clone; every method opens its
/// own connections to the server.
#[derive(Clone, Debug)]
pub struct Adb {
    cfg: AdbConfig,
}

impl Adb {
    /// The device `cfg` names; nothing is contacted until a method is called.
    pub fn new(cfg: AdbConfig) -> Self {
        Adb { cfg }
    }

    /// Where the device is and the limits its calls run under.
    pub fn config(&self) -> &AdbConfig {
        &self.cfg
    }

    /// `SERIAL` or `any device`, for messages.
    pub fn device_label(&self) -> String {
        match &self.cfg.serial {
            Some(s) => format!("device {s}"),
            None => "the only device".to_string(),
        }
    }

    fn server_device(&self) -> ADBServerDevice {
        match &self.cfg.serial {
            Some(s) => ADBServerDevice::new(s.clone(), Some(self.cfg.server)),
            None => ADBServerDevice::autodetect(Some(self.cfg.server)),
        }
    }

    /// Runs one blocking adb_client call under `timeout`.
    async fn blocking<T, F>(&self, what: &str, timeout: Duration, f: F) -> Result<T, AdbError>
    where
        T: Send + 'static,
        F: FnOnce(&mut ADBServerDevice) -> Result<T, RustADBError> + Send + 'static,
    {
        let mut dev = self.server_device();
        let task = tokio::task::spawn_blocking(move || f(&mut dev));
        match tokio::time::timeout(timeout, task).await {
            Err(_) => Err(AdbError::new(
                AdbErrorKind::Timeout,
                format!(
                    "{what}: no answer from the adb server at {} for {} within {} ms",
                    self.cfg.server,
                    self.device_label(),
                    timeout.as_millis()
                ),
            )),
            // adb_client panicking on what a server sent is a failed
            // command, not a harness crash.
            Ok(Err(join)) => Err(AdbError::new(
                AdbErrorKind::CommandFailed,
                format!("{what}: adb client failed: {join}"),
            )),
            Ok(Ok(r)) => r.map_err(|e| {
                let mut err = classify(what, e);
                err.message = format!("{} (adb server {})", err.message, self.cfg.server);
                err
            }),
        }
    }

    /// Runs `command` in the device's shell; the exit status comes from the
    /// `__rc=` marker.
    pub async fn shell(&self, command: &str) -> Result<ShellOutput, AdbError> {
        self.shell_within(command, self.cfg.op_timeout).await
    }

    /// [`Adb::shell`] under `timeout` instead of the op timeout.
    pub async fn shell_within(
        &self,
        command: &str,
        timeout: Duration,
    ) -> Result<ShellOutput, AdbError> {
        let line = format!("{command}{RC_SUFFIX}");
        let max = self.cfg.shell_max_bytes;
        let (raw, truncated) = self
            .blocking(&format!("shell {command:?}"), timeout, move |d| {
                let mut tail = Tail::new(max);
                d.shell_command(&line, Some(&mut tail), None)?;
                Ok(tail.into_inner())
            })
            .await?;
        let (output, exit_code) = split_exit_code(&raw);
        Ok(ShellOutput {
            output,
            exit_code,
            truncated,
        })
    }

    /// Runs `command` and requires exit status 0.
    pub async fn shell_ok(&self, command: &str) -> Result<ShellOutput, AdbError> {
        let out = self.shell(command).await?;
        match out.exit_code {
            Some(0) => Ok(out),
            Some(rc) => Err(AdbError::new(
                AdbErrorKind::CommandFailed,
                format!(
                    "`{command}` exited with {rc}: {}",
                    tail_text(&out.output, 2048)
                ),
            )),
            None => Err(AdbError::new(
                AdbErrorKind::ConnectionDropped,
                format!(
                    "`{command}` ended without its exit status: {}",
                    tail_text(&out.output, 2048)
                ),
            )),
        }
    }

    /// Fails with the named error when the server is unreachable or the
    /// device is missing or offline.
    pub async fn check_device(&self) -> Result<(), AdbError> {
        let out = self.shell_ok("echo cetp-ready").await?;
        if out.text().contains("cetp-ready") {
            Ok(())
        } else {
            Err(AdbError::new(
                AdbErrorKind::CommandFailed,
                format!("`echo` on {} printed {:?}", self.device_label(), out.text()),
            ))
        }
    }

    /// `adb push LOCAL REMOTE`.
    pub async fn push(&self, local: &Path, remote: &str) -> Result<(), AdbError> {
        let file = local.to_path_buf();
        let remote = remote.to_string();
        self.blocking(
            &format!("push {}", local.display()),
            self.cfg.install_timeout,
            move |d| {
                let mut f = std::fs::File::open(&file)?;
                d.push(&mut f, &remote)
            },
        )
        .await
    }

    /// Installs an APK as `adb install -r -t` does on devices without
    /// streamed install: push to `/data/local/tmp`, `pm install`, remove.
    pub async fn install(&self, apk: &Path) -> Result<(), AdbError> {
        self.install_replacing(apk, &[]).await.map(|_| ())
    }

    /// [`Adb::install`], and when the device already has one of the
    /// `replaceable` packages signed with another key (`pm install -r`
    /// fails with `INSTALL_FAILED_UPDATE_INCOMPATIBLE`, as for a probe built
    /// on another machine), uninstalls it and installs again. Returns the
    /// package it removed. Any other package signed differently is an error
    /// naming it: the harness never removes a Provider, whose data is the
    /// user's.
    ///
    /// `pm install` and `pm uninstall` run under the install timeout, not
    /// the op timeout: a large APK, Play Protect's scan or a vendor's
    /// "install via USB" prompt takes longer than a shell command.
    pub async fn install_replacing(
        &self,
        apk: &Path,
        replaceable: &[&str],
    ) -> Result<Option<String>, AdbError> {
        self.install_as(apk, None, replaceable).await
    }

    /// [`Adb::install_replacing`] of an APK whose package the caller knows:
    /// `pm install --pkg PACKAGE`, which a phone refuses when the APK is
    /// another package, and by which a device that records installs knows
    /// what it installed.
    pub async fn install_package(
        &self,
        apk: &Path,
        package: &str,
        replaceable: &[&str],
    ) -> Result<Option<String>, AdbError> {
        check_package(package)?;
        self.install_as(apk, Some(package), replaceable).await
    }

    /// The SHA-256 (lower-case hex) of the APK the device holds for
    /// `package` (`pm path`, then `sha256sum` of its base APK); `None` when
    /// the package is not installed or the device cannot say (a toybox
    /// without `sha256sum`). Bounded like any shell command.
    pub async fn installed_apk_sha256(&self, package: &str) -> Result<Option<String>, AdbError> {
        check_package(package)?;
        let paths = self.shell(&format!("pm path {package}")).await?;
        let text = paths.text();
        let listed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("package:"))
            .collect();
        let Some(base) = listed
            .iter()
            .find(|p| p.ends_with("/base.apk"))
            .or(listed.first())
        else {
            return Ok(None);
        };
        let sum = self.shell(&format!("sha256sum {}", sh_quote(base))).await?;
        let text = sum.text();
        let digest = text.split_whitespace().next().unwrap_or("");
        let is_digest = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
        Ok((sum.exit_code == Some(0) && is_digest).then(|| digest.to_ascii_lowercase()))
    }

    async fn install_as(
        &self,
        apk: &Path,
        package: Option<&str>,
        replaceable: &[&str],
    ) -> Result<Option<String>, AdbError> {
        let name: String = apk
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = if name.ends_with(".apk") {
            name
        } else {
            format!("{name}.apk")
        };
        let remote = format!("/data/local/tmp/{name}");
        self.push(apk, &remote).await?;
        let outcome = self.pm_install(apk, &remote, package, replaceable).await;
        let _ = self.shell(&format!("rm -f {}", sh_quote(&remote))).await;
        outcome
    }

    async fn pm_install(
        &self,
        apk: &Path,
        remote: &str,
        package: Option<&str>,
        replaceable: &[&str],
    ) -> Result<Option<String>, AdbError> {
        let install = match package {
            Some(p) => format!("pm install -r -t --pkg {p} {}", sh_quote(remote)),
            None => format!("pm install -r -t {}", sh_quote(remote)),
        };
        let out = self
            .shell_within(&install, self.cfg.install_timeout)
            .await?;
        if installed(&out) {
            return Ok(None);
        }
        let failed = |out: &ShellOutput, note: String| {
            AdbError::new(
                AdbErrorKind::CommandFailed,
                format!(
                    "installing {} failed (exit {:?}): {}{note}",
                    apk.display(),
                    out.exit_code,
                    tail_text(&out.output, 2048)
                ),
            )
        };
        let Some(package) = incompatible_package(&out.text()) else {
            return Err(failed(&out, String::new()));
        };
        if !replaceable.contains(&package.as_str()) {
            return Err(failed(
                &out,
                format!(
                    " ({package} is installed signed with another key: uninstall it first with `adb uninstall {package}`; the harness removes only the probe's own packages)"
                ),
            ));
        }
        check_package(&package)?;
        let removed = self
            .shell_within(&format!("pm uninstall {package}"), self.cfg.install_timeout)
            .await?;
        if !installed(&removed) {
            return Err(failed(
                &removed,
                format!(" (uninstalling {package}, signed with another key, failed too)"),
            ));
        }
        let again = self
            .shell_within(&install, self.cfg.install_timeout)
            .await?;
        if installed(&again) {
            Ok(Some(package))
        } else {
            Err(failed(
                &again,
                format!(" (after uninstalling {package}, signed with another key)"),
            ))
        }
    }

    /// `adb forward tcp:LOCAL REMOTE`.
    pub async fn forward(&self, local_port: u16, remote: &str) -> Result<(), AdbError> {
        let remote = remote.to_string();
        self.blocking(
            &format!("forward tcp:{local_port} {remote}"),
            self.cfg.op_timeout,
            move |d| d.forward(remote, format!("tcp:{local_port}")),
        )
        .await
    }

    /// Whether [`Adb::connect_socket`] goes through the adb server's host
    /// protocol (`host:transport:SERIAL`, then `localabstract:NAME`, the
    /// server relaying the stream) instead of `adb forward`. A forward
    /// listens on the server's own loopback unless that server was started
    /// with `-a`, so dialing `server.ip():port` of a remote server fails
    /// (finding 9 of issue 27): remote servers are always relayed; a local
    /// one is forwarded, as `adb forward` users expect to see, unless the
    /// config says otherwise.
    pub fn relays_through_server(&self) -> bool {
        self.cfg
            .relay_through_server
            .unwrap_or(!self.cfg.server.ip().is_loopback())
    }

    /// A stream to a device service (`localabstract:NAME`), relayed by the
    /// adb server.
    pub async fn open_service_stream(&self, service: &str) -> Result<TcpStream, AdbError> {
        let what = format!("device socket {service:?}");
        let server = self.cfg.server;
        let transport = match &self.cfg.serial {
            Some(s) => format!("host:transport:{s}"),
            None => "host:transport-any".to_string(),
        };
        let service = service.to_string();
        let setup = async {
            let mut sock = TcpStream::connect(server).await?;
            host_request(&mut sock, &transport).await?;
            host_request(&mut sock, &service).await?;
            Ok::<_, RustADBError>(sock)
        };
        match tokio::time::timeout(self.cfg.op_timeout, setup).await {
            Err(_) => Err(AdbError::new(
                AdbErrorKind::Timeout,
                format!(
                    "{what}: no answer from the adb server at {server} for {} within {} ms",
                    self.device_label(),
                    self.cfg.op_timeout.as_millis()
                ),
            )),
            Ok(Err(e)) => {
                let mut err = classify(&what, e);
                err.message = format!("{} (adb server {server})", err.message);
                Err(err)
            }
            Ok(Ok(sock)) => Ok(sock),
        }
    }

    /// `adb forward --remove tcp:LOCAL`; nothing for port 0 (no forward).
    pub async fn forward_remove(&self, local_port: u16) -> Result<(), AdbError> {
        if local_port == 0 {
            return Ok(());
        }
        self.blocking(
            &format!("forward --remove tcp:{local_port}"),
            self.cfg.op_timeout,
            move |d| d.forward_remove(format!("tcp:{local_port}")),
        )
        .await
    }

    /// Forwards a free local port to `remote` on the device and connects to
    /// it. Returns the stream and the port (to remove the forward later).
    /// A device that refuses the socket shows as a connection the server
    /// closes at once: the first request then fails with
    /// `connection_closed`.
    pub async fn connect_socket(&self, remote: &str) -> Result<(TcpStream, u16), TransportError> {
        if self.relays_through_server() {
            // No forward: port 0, which forward_remove ignores.
            return Ok((self.open_service_stream(remote).await?, 0));
        }
        let port = free_port().map_err(|e| TransportError::io("picking a free local port", &e))?;
        self.forward(port, remote).await?;
        let addr = format!("{}:{port}", self.cfg.server.ip());
        match crate::tcp::connect(&addr, self.cfg.op_timeout).await {
            Ok(s) => Ok((s, port)),
            Err(e) => {
                let _ = self.forward_remove(port).await;
                Err(e)
            }
        }
    }

    /// `am force-stop PACKAGE`: kills the app's processes, as a user's
    /// "Force stop" does.
    pub async fn force_stop(&self, package: &str) -> Result<(), AdbError> {
        check_package(package)?;
        self.shell_ok(&format!("am force-stop {package}"))
            .await
            .map(|_| ())
    }

    /// Starts the probe, which runs as an instrumentation (`PKG/RUNNER`,
    /// see android-probe-app/README.md), as `am instrument -w -r COMPONENT`
    /// on a shell stream that stays open for as long as the returned handle
    /// lives. Android gives an instrumentation a UiAutomation only when `am
    /// instrument` waits (`-w`), and the probe needs it for `resolve` and
    /// `restart_provider`; `-r` makes `am` print the probe's status as raw
    /// lines. End it with [`ProbeInstrumentation::stop`].
    pub async fn start_probe(&self, component: &str) -> Result<ProbeInstrumentation, AdbError> {
        check_component(component)?;
        let package = component
            .split_once('/')
            .map(|(p, _)| p.to_string())
            .unwrap_or_default();
        let stream = self
            .open_shell_stream(&format!("am instrument -w -r {component}"))
            .await?;
        Ok(ProbeInstrumentation {
            adb: self.clone(),
            component: component.to_string(),
            package,
            stream: Some(stream),
        })
    }

    /// Runs `command` in the device's shell on a stream of its own, reached
    /// with the adb host protocol (`host:transport:SERIAL`, then
    /// `shell:COMMAND`), and keeps its output's tail. The command lives until
    /// it ends on the device or the stream is closed.
    pub async fn open_shell_stream(&self, command: &str) -> Result<ShellStream, AdbError> {
        let what = format!("shell stream {command:?}");
        let server = self.cfg.server;
        let transport = match &self.cfg.serial {
            Some(s) => format!("host:transport:{s}"),
            None => "host:transport-any".to_string(),
        };
        let service = format!("shell:{command}");
        let setup = async {
            let mut sock = TcpStream::connect(server).await?;
            host_request(&mut sock, &transport).await?;
            host_request(&mut sock, &service).await?;
            Ok::<_, RustADBError>(sock)
        };
        let sock = match tokio::time::timeout(self.cfg.op_timeout, setup).await {
            Err(_) => {
                return Err(AdbError::new(
                    AdbErrorKind::Timeout,
                    format!(
                        "{what}: no answer from the adb server at {server} for {} within {} ms",
                        self.device_label(),
                        self.cfg.op_timeout.as_millis()
                    ),
                ))
            }
            Ok(Err(e)) => {
                let mut err = classify(&what, e);
                err.message = format!("{} (adb server {server})", err.message);
                return Err(err);
            }
            Ok(Ok(sock)) => sock,
        };
        Ok(ShellStream::spawn(command, sock, self.cfg.shell_max_bytes))
    }

    /// `logcat -d`: the device log so far, the last
    /// [`AdbConfig::logcat_max_bytes`] of it.
    pub async fn logcat(&self) -> Result<Vec<u8>, AdbError> {
        let max = self.cfg.logcat_max_bytes;
        let (raw, _) = self
            .blocking("logcat -d", self.cfg.op_timeout, move |d| {
                let mut tail = Tail::new(max);
                d.shell_command(&"logcat -d", Some(&mut tail), None)?;
                Ok(tail.into_inner())
            })
            .await?;
        Ok(raw)
    }
}

/// One request of the adb host protocol: a 4-digit hex length, the payload,
/// then `OKAY`, or `FAIL` with a hex-length message.
async fn host_request(sock: &mut TcpStream, payload: &str) -> Result<(), RustADBError> {
    sock.write_all(&host_frame(payload)).await?;
    let mut status = [0u8; 4];
    sock.read_exact(&mut status).await?;
    match &status {
        b"OKAY" => Ok(()),
        b"FAIL" => {
            let mut len = [0u8; 4];
            sock.read_exact(&mut len).await?;
            let len = parse_hex_len(&len).ok_or_else(|| {
                RustADBError::ADBRequestFailed(format!("bad FAIL length {len:?}"))
            })?;
            let mut msg = vec![0u8; len];
            sock.read_exact(&mut msg).await?;
            Err(RustADBError::ADBRequestFailed(
                String::from_utf8_lossy(&msg).into_owned(),
            ))
        }
        other => Err(RustADBError::ADBRequestFailed(format!(
            "unexpected answer {:?} to {payload:?}",
            String::from_utf8_lossy(other)
        ))),
    }
}

fn host_frame(payload: &str) -> Vec<u8> {
    let mut out = format!("{:04x}", payload.len()).into_bytes();
    out.extend_from_slice(payload.as_bytes());
    out
}

fn parse_hex_len(digits: &[u8; 4]) -> Option<usize> {
    usize::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// A shell command on a stream of its own. Its output is read in the
/// background (the tail is kept); dropping the handle closes the stream,
/// which makes adbd close the command's side. Needs a Tokio runtime to
/// open; may be dropped anywhere.
#[derive(Debug)]
pub struct ShellStream {
    command: String,
    output: Arc<Mutex<Tail>>,
    ended: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tail")
            .field("bytes", &self.buf.len())
            .finish()
    }
}

impl ShellStream {
    fn spawn(command: &str, mut sock: TcpStream, max_bytes: usize) -> ShellStream {
        let output = Arc::new(Mutex::new(Tail::new(max_bytes)));
        let ended = Arc::new(AtomicBool::new(false));
        let (out, done) = (output.clone(), ended.clone());
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut tail = out.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = tail.write_all(&buf[..n]);
                    }
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        ShellStream {
            command: command.to_string(),
            output,
            ended,
            reader,
        }
    }

    /// The shell command the stream runs, for messages.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Whether the command ended on the device (its stream reached EOF).
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// What the command printed so far (the tail).
    pub fn output(&self) -> String {
        let tail = self.output.lock().unwrap_or_else(|e| e.into_inner());
        let start = tail.buf.len().saturating_sub(tail.max);
        String::from_utf8_lossy(&tail.buf[start..]).into_owned()
    }

    /// Closes the stream now.
    pub fn close(&self) {
        self.reader.abort();
    }
}

impl Drop for ShellStream {
    fn drop(&mut self) {
        // The reader task owns the socket: ending it closes the stream.
        self.reader.abort();
    }
}

/// The probe started by [`Adb::start_probe`]: the `am instrument -w -r`
/// stream that keeps it (and its UiAutomation) alive. The transport owns it
/// and ends it with the run.
#[derive(Debug)]
pub struct ProbeInstrumentation {
    adb: Adb,
    component: String,
    package: String,
    stream: Option<ShellStream>,
}

impl ProbeInstrumentation {
    /// The instrumentation component started (`PACKAGE/CLASS`).
    pub fn component(&self) -> &str {
        &self.component
    }

    /// Whether `am instrument` ended: the probe failed to start or died.
    pub fn has_ended(&self) -> bool {
        self.stream.as_ref().is_none_or(ShellStream::has_ended)
    }

    /// What `am instrument -r` printed so far (`INSTRUMENTATION_STATUS: ...`,
    /// or `INSTRUMENTATION_FAILED: ...` when the component does not exist).
    pub fn output(&self) -> String {
        self.stream
            .as_ref()
            .map(ShellStream::output)
            .unwrap_or_default()
    }

    /// Ends the probe: closes the stream, then `am force-stop` its package,
    /// since on a device a closed stream alone may leave `am` waiting and
    /// the probe holding the UiAutomation.
    pub async fn stop(mut self) -> Result<(), AdbError> {
        if let Some(stream) = self.stream.take() {
            stream.close();
        }
        self.adb.force_stop(&self.package).await
    }
}

/// `pm install` / `pm uninstall` succeeded.
fn installed(out: &ShellOutput) -> bool {
    out.exit_code == Some(0) && out.text().contains("Success")
}

/// The package `pm install` names in `INSTALL_FAILED_UPDATE_INCOMPATIBLE`:
/// "Existing package P signatures do not match newer version" (Android 9
/// and later) or "Package P signatures do not match the previously installed
/// version" (earlier).
pub fn incompatible_package(pm_output: &str) -> Option<String> {
    let at = pm_output.find("INSTALL_FAILED_UPDATE_INCOMPATIBLE")?;
    let mut words = pm_output[at..].split_whitespace();
    words.find(|w| w.eq_ignore_ascii_case("package"))?;
    let p = words.next()?.trim_end_matches([':', ',', ';', ']']);
    check_package(p).ok().map(|_| p.to_string())
}

fn check_package(p: &str) -> Result<(), AdbError> {
    let ok = !p.is_empty()
        && p.split('.')
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if ok {
        Ok(())
    } else {
        Err(AdbError::new(
            AdbErrorKind::CommandFailed,
            format!("{p:?} is not a package name"),
        ))
    }
}

fn check_component(c: &str) -> Result<(), AdbError> {
    let bad = || {
        AdbError::new(
            AdbErrorKind::CommandFailed,
            format!("{c:?} is not a component name (PACKAGE/CLASS)"),
        )
    };
    let (pkg, class) = c.split_once('/').ok_or_else(bad)?;
    check_package(pkg).map_err(|_| bad())?;
    let class = class.strip_prefix('.').unwrap_or(class);
    check_package(class).map_err(|_| bad())?;
    Ok(())
}

/// The last `max` bytes of `out` as text.
pub fn tail_text(out: &[u8], max: usize) -> String {
    let start = out.len().saturating_sub(max);
    String::from_utf8_lossy(&out[start..])
        .trim_end()
        .to_string()
}

/// A local TCP port nothing listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_protocol_framing() {
        assert_eq!(host_frame("host:transport-any"), b"0012host:transport-any");
        assert_eq!(
            host_frame("shell:am instrument -w -r p/.R"),
            b"001eshell:am instrument -w -r p/.R"
        );
        assert_eq!(parse_hex_len(b"001f"), Some(31));
        assert_eq!(parse_hex_len(b"zz00"), None);
    }

    /// A scripted adb server: answers the transport switch, then `script`.
    async fn fake_server(
        script: &'static [u8],
    ) -> (
        SocketAddrV4,
        tokio::task::JoinHandle<Vec<u8>>,
        tokio::sync::oneshot::Receiver<()>,
    ) {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let std::net::SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
            unreachable!()
        };
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            for _ in 0..2 {
                let mut len = [0u8; 4];
                s.read_exact(&mut len).await.unwrap();
                let mut req = vec![0u8; parse_hex_len(&len).unwrap()];
                s.read_exact(&mut req).await.unwrap();
                got.extend_from_slice(&req);
                got.push(b'\n');
                s.write_all(b"OKAY").await.unwrap();
            }
            s.write_all(script).await.unwrap();
            // Wait for the client to close its end.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
            let _ = closed_tx.send(());
            got
        });
        (addr, task, closed_rx)
    }

    fn adb_at(server: SocketAddrV4, serial: Option<&str>) -> Adb {
        Adb::new(AdbConfig {
            server,
            serial: serial.map(str::to_string),
            op_timeout: Duration::from_secs(5),
            ..AdbConfig::default()
        })
    }

    #[tokio::test]
    async fn the_probe_starts_on_a_stream_that_stays_open_until_closed() {
        let (addr, server, closed) =
            fake_server(b"INSTRUMENTATION_STATUS: cetp-probe=listening\n").await;
        let adb = adb_at(addr, Some("emulator-5554"));
        let probe = adb
            .start_probe("com.clawseed.probe/com.clawseed.probe.ProbeInstrumentation")
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !probe.output().contains("listening") {
            assert!(tokio::time::Instant::now() < deadline, "no output");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!probe.has_ended(), "the stream must stay open");
        let stream = probe.stream.as_ref().unwrap();
        assert_eq!(
            stream.command(),
            "am instrument -w -r com.clawseed.probe/com.clawseed.probe.ProbeInstrumentation"
        );
        stream.close();
        tokio::time::timeout(Duration::from_secs(5), closed)
            .await
            .expect("closing the handle closes the stream")
            .unwrap();
        assert_eq!(
            String::from_utf8(server.await.unwrap()).unwrap(),
            "host:transport:emulator-5554\nshell:am instrument -w -r com.clawseed.probe/com.clawseed.probe.ProbeInstrumentation\n"
        );
    }

    #[tokio::test]
    async fn a_refused_transport_is_named() {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let std::net::SocketAddr::V4(addr) = listener.local_addr().unwrap() else {
            unreachable!()
        };
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await.unwrap();
            let mut req = vec![0u8; parse_hex_len(&len).unwrap()];
            s.read_exact(&mut req).await.unwrap();
            let msg = b"device 'X' not found";
            s.write_all(format!("FAIL{:04x}", msg.len()).as_bytes())
                .await
                .unwrap();
            s.write_all(msg).await.unwrap();
        });
        let e = adb_at(addr, Some("X"))
            .open_shell_stream("am instrument -w -r p/.R")
            .await
            .unwrap_err();
        assert_eq!(e.kind, AdbErrorKind::DeviceNotFound, "{e}");
        assert!(adb_at(addr, None)
            .start_probe("not a component")
            .await
            .is_err());
    }

    #[test]
    fn exit_code_marker_is_split_off() {
        assert_eq!(
            split_exit_code(b"Success\n__rc=0\n"),
            (b"Success\n".to_vec(), Some(0))
        );
        assert_eq!(split_exit_code(b"__rc=127\r\n"), (Vec::new(), Some(127)));
        assert_eq!(
            split_exit_code(b"partial output"),
            (b"partial output".to_vec(), None)
        );
        assert_eq!(split_exit_code(b"__rc=x\n"), (b"__rc=x\n".to_vec(), None));
    }

    #[test]
    fn the_package_of_a_signature_mismatch_is_read_from_pm() {
        assert_eq!(
            incompatible_package("Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Existing package com.clawseed.probe signatures do not match newer version; ignoring!]\n").as_deref(),
            Some("com.clawseed.probe")
        );
        assert_eq!(
            incompatible_package("Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package com.clawseed.probe.b signatures do not match the previously installed version; ignoring!]").as_deref(),
            Some("com.clawseed.probe.b")
        );
        assert_eq!(
            incompatible_package("Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE]"),
            None
        );
        // A name that is not a package never reaches the shell.
        assert_eq!(
            incompatible_package("INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package `rm -rf` x"),
            None
        );
    }

    #[test]
    fn a_remote_server_is_relayed_a_local_one_forwarded_unless_told() {
        let at = |server: &str, relay: Option<bool>| {
            Adb::new(AdbConfig {
                server: server.parse().unwrap(),
                relay_through_server: relay,
                ..AdbConfig::default()
            })
            .relays_through_server()
        };
        assert!(
            at("192.0.2.7:5037", None),
            "a remote server's forwards are not reachable"
        );
        assert!(!at("127.0.0.1:5037", None));
        assert!(at("127.0.0.1:5037", Some(true)));
        assert!(!at("192.0.2.7:5037", Some(false)));
    }

    #[test]
    fn tail_keeps_the_end() {
        let mut t = Tail::new(4);
        for chunk in [&b"abc"[..], b"defgh", b"ij"] {
            t.write_all(chunk).unwrap();
        }
        assert_eq!(t.into_inner(), (b"ghij".to_vec(), true));
        let mut t = Tail::new(10);
        t.write_all(b"short").unwrap();
        assert_eq!(t.into_inner(), (b"short".to_vec(), false));
    }

    #[test]
    fn names_are_checked_before_reaching_the_shell() {
        assert!(check_package("com.clawseed.reference").is_ok());
        assert!(check_package("com.x; reboot").is_err());
        assert!(check_package("").is_err());
        assert!(check_component("com.clawseed.probe/.ProbeService").is_ok());
        assert!(check_component("com.clawseed.probe/com.clawseed.probe.ProbeService").is_ok());
        assert!(check_component("com.clawseed.probe").is_err());
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn request_failures_are_named() {
        let k = |msg: &str| classify("x", RustADBError::ADBRequestFailed(msg.into())).kind;
        assert_eq!(k("device offline"), AdbErrorKind::DeviceOffline);
        assert_eq!(k("device unauthorized."), AdbErrorKind::DeviceOffline);
        assert_eq!(k("device 'X' not found"), AdbErrorKind::DeviceNotFound);
        assert_eq!(
            k("no devices/emulators found"),
            AdbErrorKind::DeviceNotFound
        );
        assert_eq!(
            k("more than one device/emulator"),
            AdbErrorKind::DeviceAmbiguous
        );
        assert_eq!(k("cannot bind listener"), AdbErrorKind::CommandFailed);
        let io =
            |kind: ErrorKind| classify("x", RustADBError::IOError(std::io::Error::from(kind))).kind;
        assert_eq!(
            io(ErrorKind::ConnectionRefused),
            AdbErrorKind::ServerUnreachable
        );
        assert_eq!(
            io(ErrorKind::UnexpectedEof),
            AdbErrorKind::ConnectionDropped
        );
        assert_eq!(
            io(ErrorKind::ConnectionReset),
            AdbErrorKind::ConnectionDropped
        );
    }
}
