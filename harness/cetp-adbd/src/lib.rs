//! The device side of the ADB protocol (what `adbd` does on a phone), so that
//! an unmodified `adb` server sees a simulated Android device after
//! `adb connect 127.0.0.1:PORT`.
//!
//! Why this exists: the conformance harness drives real devices through the
//! stock `adb` tool (`adb shell`, `adb forward`, `adb install`). Making the
//! simulator speak the device half of ADB lets the very same harness code
//! path — including the real `adb` server — run against the simulator, so the
//! simulator tests the harness's transport and not a mock of it.
//!
//! This crate knows nothing of what runs on the device: everything behind the
//! transport is supplied through [`DeviceServices`]. It implements:
//!
//! * the transport: `CNXN` (no `AUTH` is ever required: we answer the host's
//!   `CNXN` with ours straight away), `OPEN`, `OKAY`, `WRTE`, `CLSE`, with
//!   per-stream flow control (one unacknowledged `WRTE` per direction);
//! * `shell:CMD` (shell protocol v1: raw stdout, then `CLSE`), with a built-in
//!   `getprop` answered from [`DeviceServices::properties`] and emulation of
//!   the `CMD; echo __rc=$?` exit-code idiom;
//! * socket services (`localabstract:`, `localreserved:`, `localfilesystem:`,
//!   `tcp:`), routed to [`DeviceServices::open_stream`] — this is what
//!   `adb forward tcp:N localabstract:NAME` opens per forwarded connection;
//! * `sync:` v1: `STAT`, `LIST`, `SEND`/`DATA`/`DONE`, `RECV`, `QUIT`, so
//!   `adb push` and the legacy (push + `pm install`) `adb install` work.
//!
//! Everything else (`exec:`, interactive `shell:`, `shell,v2`, `reboot:`, ...)
//! is refused with `CLSE`.
//!
//! The host is treated as hostile: malformed packets end only their own
//! connection, payloads are bounded by the negotiated maximum, the number of
//! streams and connections is capped, and a stream's buffered input is
//! bounded by withholding `OKAY` until it has been consumed.

#![warn(missing_docs)]

mod conn;
pub mod packet;
mod shell;
mod stream;
mod sync;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub use shell::{rc_line, shell_words, split_rc_probe};

/// A boxed, `Send` future, so [`DeviceServices`] stays object-safe without
/// pulling in the `futures` crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A bidirectional byte stream handed out by [`DeviceServices::open_stream`].
///
/// Blanket-implemented for every `AsyncRead + AsyncWrite + Send + Unpin`
/// type (a `TcpStream`, one end of `tokio::io::duplex`, ...).
pub trait DuplexStream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> DuplexStream for T {}

/// Output of a shell command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellOutput {
    /// Bytes written to stdout (shell v1 has no separate stderr: a device
    /// running a v1 shell merges it, so services may append it here).
    pub stdout: Vec<u8>,
    /// Exit status. Shell v1 cannot carry it to the host; it is only visible
    /// through the `; echo __rc=$?` idiom, which the endpoint emulates.
    pub exit_code: i32,
}

impl ShellOutput {
    /// Successful output.
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Self {
        ShellOutput {
            stdout: stdout.into(),
            exit_code: 0,
        }
    }

    /// Output with an explicit exit code.
    pub fn with_code(stdout: impl Into<Vec<u8>>, exit_code: i32) -> Self {
        ShellOutput {
            stdout: stdout.into(),
            exit_code,
        }
    }
}

/// File metadata for the sync protocol's `STAT` (v1 fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// `st_mode`, including the file-type bits (`0o040000` directory, `0o100000` regular file).
    pub mode: u32,
    /// Size in bytes (v1 `STAT` truncates to 32 bits).
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: u32,
}

/// `st_mode` bits of a directory.
pub const S_IFDIR: u32 = 0o040_000;
/// `st_mode` bits of a regular file.
pub const S_IFREG: u32 = 0o100_000;

/// Directories a stock Android device has and that `adb push`/`adb install`
/// target. `adb push FILE DIR` stats `DIR` first and appends the file's
/// basename only if the device says it is a directory, so the default
/// [`DeviceServices::stat`] reports these as directories.
pub const WELL_KNOWN_DIRS: &[&str] = &[
    "/",
    "/data",
    "/data/local",
    "/data/local/tmp",
    "/sdcard",
    "/sdcard/Download",
    "/storage",
    "/storage/emulated",
    "/storage/emulated/0",
];

/// What the simulated device provides behind the ADB transport.
///
/// Implemented by the device simulator; the endpoint calls it from its own
/// tasks, hence `Send + Sync + 'static`. Futures are `'static` so a method can
/// clone what it needs out of `&self` and the endpoint can run them while
/// also watching the connection (a closed stream drops the future).
pub trait DeviceServices: Send + Sync + 'static {
    /// Device properties, used for the `CNXN` banner (`ro.product.name`,
    /// `ro.product.model`, `ro.product.device`) and answered by the built-in
    /// `getprop` (`ro.build.version.sdk`, `ro.serialno`, ...). Called on each
    /// connect and each `getprop`, so it may change over time.
    fn properties(&self) -> Vec<(String, String)>;

    /// Open a stream service such as `"localabstract:cetp-probe"` or
    /// `"tcp:8080"` (the full service name, as `adb forward tcp:N
    /// localabstract:NAME` opens it for each forwarded connection). Returns a
    /// duplex byte stream; `Err(reason)` makes the endpoint refuse the open
    /// with `CLSE` (the host's client then sees the connection closed).
    /// When the service's read side reaches EOF, the ADB stream is closed.
    fn open_stream(
        &self,
        service: &str,
    ) -> BoxFuture<'static, Result<Box<dyn DuplexStream>, String>>;

    /// Run a shell v1 command line such as `pm list packages`,
    /// `pm 'install' '/data/local/tmp/x.apk'` (Debian's adb single-quotes
    /// every argument it builds; see [`shell_words`]), `am force-stop PKG`,
    /// `am instrument ...`, `logcat -d`, `echo ...`.
    ///
    /// `getprop` is answered by the endpoint from [`properties`](Self::properties)
    /// and does not reach this method. A trailing `; echo __rc=$?` is stripped
    /// by the endpoint, which appends `__rc=<exit_code>` to the output itself,
    /// because shell v1 carries no exit status.
    ///
    /// After `pm install`, Debian's adb 29 deletes the pushed APK with
    /// `rm '/data/local/tmp/x.apk' </dev/null`; whatever this returns is
    /// printed by `adb install`, so answer it (empty output) to keep that quiet.
    fn shell(&self, command: &str) -> BoxFuture<'static, ShellOutput>;

    /// A file pushed with the sync protocol (`adb push`, and the push step of
    /// `adb install x.apk`, which pushes to `/data/local/tmp/x.apk` and then
    /// runs `pm install` on that path). `mode` is the host's `st_mode`
    /// (including file-type bits). `Err(reason)` is reported to the host as
    /// a sync `FAIL`.
    fn push_file(
        &self,
        path: &str,
        mode: u32,
        data: Vec<u8>,
    ) -> BoxFuture<'static, Result<(), String>>;

    /// Metadata for the sync `STAT` request. `adb push` stats its target to
    /// decide whether it names a directory. The default reports
    /// [`WELL_KNOWN_DIRS`] as directories and everything else as missing,
    /// which is what a fresh device looks like to `adb push`.
    fn stat(&self, path: &str) -> Option<FileStat> {
        let p = path.trim_end_matches('/');
        let p = if p.is_empty() { "/" } else { p };
        WELL_KNOWN_DIRS.contains(&p).then_some(FileStat {
            mode: S_IFDIR | 0o771,
            size: 4096,
            mtime: 0,
        })
    }

    /// Contents of a file for the sync `RECV` request (`adb pull`). The
    /// default refuses, which the host reports as a failed pull.
    fn read_file(&self, path: &str) -> BoxFuture<'static, Result<Vec<u8>, String>> {
        let msg = format!("remote object '{path}' does not exist");
        Box::pin(async move { Err(msg) })
    }
}

/// Features advertised in our `CNXN` banner by default: none.
///
/// Why none, as tested against Debian's adb 29.0.6 (`tests/real_adb.rs`):
/// with an empty list the host uses exactly what this endpoint implements —
/// shell protocol v1 (`shell:CMD`), sync v1 (`STAT`, `SEND`/`DATA`/`DONE`,
/// `QUIT`), and the legacy install (push to `/data/local/tmp/NAME.apk`, then
/// `shell:pm 'install' '/data/local/tmp/NAME.apk'`, then
/// `shell:rm '/data/local/tmp/NAME.apk' </dev/null`).
///
/// Each feature was tried alone against that server:
///
/// * `shell_v2` makes the host open `shell,v2,...:CMD` (we implement only v1,
///   so every `adb shell` fails);
/// * `cmd` makes `adb install` stream through
///   `exec:cmd package 'install' -S SIZE` instead of push + `pm install`;
/// * `stat_v2` makes `adb push` send `STA2`, which sync v1 lacks;
/// * `ls_v2`, `fixed_push_mkdir`, `fixed_push_symlink_timestamp`, `apex`,
///   `abb`, `abb_exec` and `remount_shell` changed nothing the host sent for
///   shell, forward, single-file push or install; `sendrecv_v2` is unknown
///   to adb 29 and is dropped by it. Listing any of them would only promise
///   requests we do not serve (`LST2`, `abb:`, ...), so none is listed.
pub const DEFAULT_FEATURES: &[&str] = &[];

/// Limits and identity of the endpoint.
#[derive(Debug, Clone)]
pub struct AdbdConfig {
    /// Upper bound on the payload size of a packet in either direction. The
    /// negotiated maximum is `min(host's CNXN arg1, this)`; we advertise it
    /// in our `CNXN` so the host never sends more. Default 256 KiB.
    pub max_payload: u32,
    /// Concurrent streams per connection; further `OPEN`s are refused with
    /// `CLSE`. Default 64.
    pub max_streams: usize,
    /// Concurrent host connections; further ones are closed on accept. Default 16.
    pub max_connections: usize,
    /// Largest file accepted by sync `SEND`; larger pushes get `FAIL`. Default 256 MiB.
    pub max_push_bytes: usize,
    /// Features listed in the `CNXN` banner. Default [`DEFAULT_FEATURES`].
    pub features: Vec<String>,
    /// A connection that has not sent `CNXN` within this time is dropped. Default 30 s.
    pub handshake_timeout: Duration,
}

impl Default for AdbdConfig {
    fn default() -> Self {
        AdbdConfig {
            max_payload: 256 * 1024,
            max_streams: 64,
            max_connections: 16,
            max_push_bytes: 256 * 1024 * 1024,
            features: DEFAULT_FEATURES.iter().map(|s| s.to_string()).collect(),
            handshake_timeout: Duration::from_secs(30),
        }
    }
}

/// The device banner sent in our `CNXN`:
/// `device::ro.product.name=..;ro.product.model=..;ro.product.device=..;features=..`.
/// The `device` state is what makes `adb devices` list us as `device`.
pub fn banner(props: &[(String, String)], features: &[String]) -> String {
    // `;` and `=` delimit the banner; keep property values from breaking it.
    let clean = |s: &str| {
        s.chars()
            .filter(|c| !matches!(c, ';' | '=' | '\0'))
            .collect::<String>()
    };
    let get = |k: &str| {
        props
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| clean(v))
            .unwrap_or_else(|| "unknown".to_string())
    };
    let features = features
        .iter()
        .map(|f| clean(f))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "device::ro.product.name={};ro.product.model={};ro.product.device={};features={}",
        get("ro.product.name"),
        get("ro.product.model"),
        get("ro.product.device"),
        features
    )
}

/// Accept ADB host connections on `listener` and serve each one with
/// `services` until this future is dropped (dropping it also ends every
/// connection it started).
///
/// A failing connection ends only itself. Accept errors (for instance running
/// out of file descriptors) are retried after a short pause; `Err` is
/// returned only after 100 consecutive accept failures, which means the
/// listener itself is unusable.
pub async fn serve(
    listener: TcpListener,
    services: Arc<dyn DeviceServices>,
    config: AdbdConfig,
) -> std::io::Result<()> {
    let config = Arc::new(config);
    let mut conns: JoinSet<()> = JoinSet::new();
    let mut failures = 0u32;
    loop {
        while conns.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((sock, _peer)) => {
                failures = 0;
                if conns.len() >= config.max_connections {
                    drop(sock);
                    continue;
                }
                let _ = sock.set_nodelay(true);
                let services = services.clone();
                let config = config.clone();
                conns.spawn(async move {
                    // The error only says why this connection ended.
                    let _ = conn::handle_connection(sock, services, config).await;
                });
            }
            Err(e) => {
                failures += 1;
                if failures >= 100 {
                    return Err(e);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner_format() {
        let props = vec![
            ("ro.product.name".to_string(), "cetp_sim".to_string()),
            ("ro.product.model".to_string(), "CETP;Sim=1".to_string()),
        ];
        assert_eq!(
            banner(&props, &["a".to_string(), "b".to_string()]),
            "device::ro.product.name=cetp_sim;ro.product.model=CETPSim1;ro.product.device=unknown;features=a,b"
        );
        assert!(!banner(&props, &AdbdConfig::default().features).contains("shell_v2"));
    }
}
