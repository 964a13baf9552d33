//! Opening a `jvm:…` target: the JVM device (`scripts/jvm-device.sh`)
//! started on two free loopback ports, waited for, and stopped when the
//! target is dropped.
//!
//! The script is `$CETP_JVM_DEVICE`, or else `scripts/jvm-device.sh` of the
//! repository this binary was built from, or of a repository above the
//! binary (`target/release/cetp`). Building (`build=`) is the script's own
//! `--build-only`, bounded by [`BUILD_TIMEOUT`]; starting is bounded by
//! `ready_timeout_ms=`. The device's output goes to a log file (the run's
//! report directory's `jvm-device.log`, or a temporary file), never the
//! terminal; its tail is in the error when the device does not come up.
//!
//! The device runs in a process group of its own, led by a small shell that
//! holds a pipe from this process: when the pipe closes (the target is
//! dropped, or this process ends however it ends, Ctrl-C included) the
//! shell sends the group SIGTERM, then SIGKILL after [`STOP_GRACE`], so no
//! JVM, Maven or converter outlives the run. A terminal's Ctrl-C reaches
//! only this process; the group is ended through the pipe.

use crate::spec::{JvmBuild, JvmSpec};
use crate::TargetError;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The environment variable naming the device script.
pub const SCRIPT_ENV: &str = "CETP_JVM_DEVICE";

/// How long `scripts/jvm-device.sh --build-only` may take: the first build
/// fetches Robolectric's and the app's dependencies through Maven.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// Between the group's SIGTERM and its SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// The line the device prints once both identities accept.
const READY: &str = "jvm-device: ready";

/// Lines of the device's output an error quotes.
const TAIL_LINES: usize = 30;

/// Runs "$@" (the script) in the background with no stdin, and a watcher
/// that ends the whole group when fd 3 (this process's pipe) closes. The
/// leader ignores nothing its children inherit (a trap is reset on exec),
/// waits through the group's SIGTERM for the device to end, and exits with
/// the device's status.
const WRAPPER: &str = r#"exec 3<&0
trap ':' TERM
"$@" </dev/null 3<&- &
dev=$!
{ trap '' TERM; cat <&3 >/dev/null; kill -TERM -- -$$ 2>/dev/null; sleep 3; kill -KILL -- -$$ 2>/dev/null; } </dev/null &
exec 3<&-
while :; do wait "$dev"; rc=$?; kill -0 "$dev" 2>/dev/null || exit "$rc"; done
"#;

/// A started JVM device; dropping it ends its process group.
pub(crate) struct JvmDevice {
    child: Child,
    lifeline: Option<ChildStdin>,
    /// Identity a's `HOST:PORT`.
    pub(crate) a: String,
    /// Identity b's `HOST:PORT`.
    pub(crate) b: String,
}

impl Drop for JvmDevice {
    fn drop(&mut self) {
        stop(&mut self.child, &mut self.lifeline);
    }
}

/// Closes the lifeline (the watcher ends the group) and waits for the
/// leader, which ends with the device; past the grace, kills the leader
/// (the watcher still sends the group its SIGKILL).
fn stop(child: &mut Child, lifeline: &mut Option<ChildStdin>) {
    drop(lifeline.take());
    let deadline = Instant::now() + STOP_GRACE + Duration::from_secs(1);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The device script: `$CETP_JVM_DEVICE`, else this repository's.
pub fn device_script() -> Result<PathBuf, String> {
    if let Some(v) = std::env::var_os(SCRIPT_ENV) {
        let p = PathBuf::from(&v);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "{SCRIPT_ENV}={}: no such file (it names the cetp repository's scripts/jvm-device.sh)",
                p.display()
            ))
        };
    }
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::env::current_exe().ok();
    let above_exe = exe.iter().flat_map(|e| e.ancestors().skip(1));
    for root in std::iter::once(built_from.as_path()).chain(above_exe) {
        let p = root.join("scripts/jvm-device.sh");
        if p.is_file() {
            return Ok(p.canonicalize().unwrap_or(p));
        }
    }
    Err(format!(
        "cannot find scripts/jvm-device.sh (neither in the repository cetp was built from, {}, nor above the binary): set {SCRIPT_ENV} to the path of the cetp repository's scripts/jvm-device.sh",
        built_from.display()
    ))
}

fn infra(message: String) -> TargetError {
    TargetError::Jvm {
        refused: false,
        message,
    }
}

/// A log file of its own for each device this process starts.
fn temp_log() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "cetp-jvm-device-{}-{}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Two loopback ports free now (both held until both are known, so they
/// differ). The device binds them a moment later: another process taking
/// one in between shows as the device's early exit.
fn free_ports() -> std::io::Result<(u16, u16)> {
    let a = std::net::TcpListener::bind("127.0.0.1:0")?;
    let b = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// Starts the script with `args` in a group of its own, appending its
/// output to `log`.
fn spawn(script: &Path, args: &[String], log: &Path) -> Result<Child, TargetError> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| infra(format!("cannot write its log {}: {e}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(|e| infra(format!("cannot write its log {}: {e}", log.display())))?;
    Command::new("bash")
        .arg("-c")
        .arg(WRAPPER)
        .arg("jvm-device")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| infra(format!("cannot run bash {}: {e}", script.display())))
}

/// The last lines of the log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    let shown = lines[from..].join("\n  ");
    if shown.trim().is_empty() {
        "(no output)".into()
    } else {
        format!("\n  {shown}")
    }
}

fn status_text(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("status {c}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "an unknown status".into(),
    }
}

/// Whether the device was ever built (`build=auto`): the classes the
/// script's build leaves, beside it in the repository.
fn built(script: &Path) -> bool {
    script
        .parent()
        .map(|d| d.join("../android-probe-app/jvm/target/device-classes"))
        .is_some_and(|d| d.is_dir())
}

/// `scripts/jvm-device.sh --build-only`, bounded, its output in `log`.
fn build(script: &Path, log: &Path) -> Result<(), TargetError> {
    eprintln!(
        "cetp: building the JVM device ({} --build-only; the first build takes minutes; output in {})",
        script.display(),
        log.display()
    );
    let mut child = spawn(script, &["--build-only".into()], log)?;
    let mut lifeline = child.stdin.take();
    let deadline = Instant::now() + BUILD_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => {
                return Err(infra(format!(
                    "its build ({} --build-only) ended with {} (output in {}):{}",
                    script.display(),
                    status_text(s),
                    log.display(),
                    tail(log)
                )))
            }
            Err(e) => return Err(infra(format!("cannot wait for its build: {e}"))),
            Ok(None) if Instant::now() >= deadline => {
                stop(&mut child, &mut lifeline);
                return Err(infra(format!(
                    "its build ({} --build-only) took longer than {} s (output in {}):{}",
                    script.display(),
                    BUILD_TIMEOUT.as_secs(),
                    log.display(),
                    tail(log)
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Whether `log` from `offset` holds the ready line; moves `offset` past
/// the whole lines read.
fn ready_in(log: &Path, offset: &mut u64) -> bool {
    let Ok(mut f) = std::fs::File::open(log) else {
        return false;
    };
    let mut text = String::new();
    if f.seek(SeekFrom::Start(*offset)).is_err() || f.read_to_string(&mut text).is_err() {
        return false;
    }
    let whole = text.rfind('\n').map_or(0, |i| i + 1);
    *offset += whole as u64;
    text[..whole].lines().any(|l| l.starts_with(READY))
}

/// How many times the device is started on fresh ports when one of them
/// was taken between choosing it and the device binding it.
const PORT_ATTEMPTS: usize = 3;

/// A JVM device started for a command that speaks to it itself (`cetp
/// consumer`, which makes the device's Consumer under test act over its
/// own connections); dropping it ends the device's process group.
pub struct StartedDevice(JvmDevice);

impl StartedDevice {
    /// Starts the device as [`start`] does (building it if `build=` says so).
    pub fn start(spec: &JvmSpec, log: Option<&Path>) -> Result<StartedDevice, TargetError> {
        start(spec, log).map(StartedDevice)
    }

    /// Identity a's `HOST:PORT` (the identity that hosts the hostile Provider).
    pub fn identity_a(&self) -> &str {
        &self.0.a
    }

    /// Identity b's `HOST:PORT`: where the device hosts a Consumer under
    /// test, its peer probe (identity b's probe app, a second Provider of
    /// another package).
    pub fn identity_b(&self) -> &str {
        &self.0.b
    }
}

/// Builds the device if `build=` says so, starts it on two free loopback
/// ports with its output in `log` (or a temporary file), and waits for its
/// ready line. Another process taking a port in between (other runs and
/// devices share the machine) fails the device's bind: it is started again
/// on other ports.
pub(crate) fn start(spec: &JvmSpec, log: Option<&Path>) -> Result<JvmDevice, TargetError> {
    let script = device_script().map_err(infra)?;
    let log = log.map_or_else(temp_log, Path::to_path_buf);
    let _ = std::fs::remove_file(&log);
    if spec.build == JvmBuild::Always || (spec.build == JvmBuild::Auto && !built(&script)) {
        build(&script, &log)?;
    }
    let mut attempt = 1;
    loop {
        match launch(&script, spec, &log) {
            Err(Launch::PortTaken(_)) if attempt < PORT_ATTEMPTS => attempt += 1,
            Err(Launch::PortTaken(e) | Launch::Failed(e)) => return Err(e),
            Ok(device) => return Ok(device),
        }
    }
}

/// Why one start of the device did not give a ready device.
enum Launch {
    /// A port was taken before the device could bind it.
    PortTaken(TargetError),
    /// Anything else.
    Failed(TargetError),
}

/// One start of the device on two free loopback ports, waited for.
fn launch(script: &Path, spec: &JvmSpec, log: &Path) -> Result<JvmDevice, Launch> {
    let failed = |e| Launch::Failed(e);
    let (pa, pb) =
        free_ports().map_err(|e| failed(infra(format!("no free loopback port: {e}"))))?;
    let (a, b) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
    let mut args: Vec<String> = vec![
        "--listen".into(),
        a.clone(),
        "--listen-b".into(),
        b.clone(),
        "--no-build".into(),
    ];
    args.extend(spec.script_args());
    let started = Instant::now();
    let from = std::fs::metadata(log).map_or(0, |m| m.len());
    let mut offset = from;
    let mut child = spawn(script, &args, log).map_err(failed)?;
    let lifeline = child.stdin.take();
    let mut device = JvmDevice {
        child,
        lifeline,
        a,
        b,
    };
    let deadline = started + Duration::from_millis(spec.ready_timeout_ms);
    loop {
        if ready_in(log, &mut offset) {
            eprintln!(
                "cetp: the JVM device is ready in {:.1} s (identity a on {}, b on {}; its output in {})",
                started.elapsed().as_secs_f64(),
                device.a,
                device.b,
                log.display()
            );
            return Ok(device);
        }
        match device.child.try_wait() {
            Ok(Some(s)) => {
                // Exit 2: the script refused its input (a class that does
                // not load, an unknown defect): the user's to fix.
                let e = TargetError::Jvm {
                    refused: s.code() == Some(2),
                    message: format!(
                        "{} ended with {} before it was ready (output in {}):{}",
                        script.display(),
                        status_text(s),
                        log.display(),
                        tail(log)
                    ),
                };
                return Err(if port_taken(log, from) {
                    Launch::PortTaken(e)
                } else {
                    Launch::Failed(e)
                });
            }
            Err(e) => return Err(failed(infra(format!("cannot wait for the device: {e}")))),
            Ok(None) if Instant::now() >= deadline => {
                drop(device);
                return Err(failed(infra(format!(
                    "{} was not ready within {} ms (raise it with ready_timeout_ms=; output in {}):{}",
                    script.display(),
                    spec.ready_timeout_ms,
                    log.display(),
                    tail(log)
                ))));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Whether the device's output since `from` says a port was taken.
fn port_taken(log: &Path, from: u64) -> bool {
    let mut text = String::new();
    std::fs::File::open(log)
        .and_then(|mut f| {
            f.seek(SeekFrom::Start(from))?;
            f.read_to_string(&mut text)
        })
        .is_ok()
        && text.contains("java.net.BindException")
}

#[cfg(test)]
mod tests {
    use super::port_taken;

    #[test]
    fn a_bind_failure_after_the_attempts_start_is_a_port_taken() {
        let log = std::env::temp_dir().join(format!("cetp-jvm-port-{}.log", std::process::id()));
        let first = "    => java.net.BindException: Address already in use\n";
        std::fs::write(&log, first).unwrap();
        assert!(port_taken(&log, 0));
        // An earlier attempt's failure is not this one's.
        let mut again = first.to_string();
        again.push_str("jvm-device: no seeded defect named 'x'\n");
        std::fs::write(&log, &again).unwrap();
        assert!(!port_taken(&log, first.len() as u64));
        assert!(!port_taken(&log.with_extension("none"), 0));
        let _ = std::fs::remove_file(&log);
    }
}
