//! What the simulated device offers behind its adb endpoint: the probe
//! sockets and the shell commands a harness runs on a device.

use crate::{lock, Sim};
use cetp_adbd::{shell_words, BoxFuture, DeviceServices, DuplexStream, FileStat, ShellOutput};
use std::sync::Arc;

/// Buffer of the in-process pipe behind one forwarded probe connection.
const PIPE_BYTES: usize = 256 * 1024;

/// The abstract sockets of the two probe apps, and the identity each speaks
/// for.
const PROBE_SOCKETS: [(&str, &str); 2] = [
    ("localabstract:cetp-probe", "a"),
    ("localabstract:cetp-probe-b", "b"),
];

pub(crate) struct SimServices {
    sim: Arc<Sim>,
}

impl SimServices {
    pub(crate) fn new(sim: Arc<Sim>) -> Self {
        SimServices { sim }
    }
}

impl DeviceServices for SimServices {
    fn properties(&self) -> Vec<(String, String)> {
        self.sim.properties()
    }

    fn open_stream(
        &self,
        service: &str,
    ) -> BoxFuture<'static, Result<Box<dyn DuplexStream>, String>> {
        let identity = PROBE_SOCKETS
            .iter()
            .find(|(s, _)| *s == service)
            .map(|(_, i)| *i);
        let sim = Arc::clone(&self.sim);
        let service = service.to_string();
        Box::pin(async move {
            let Some(identity) = identity else {
                sim.log('W', &format!("adb: no listener on {service}"));
                return Err(format!("connection refused: nothing listens on {service}"));
            };
            let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
            tokio::spawn(async move { sim.serve_connection(identity, ours).await });
            Ok(Box::new(theirs) as Box<dyn DuplexStream>)
        })
    }

    fn shell(&self, command: &str) -> BoxFuture<'static, ShellOutput> {
        let sim = Arc::clone(&self.sim);
        if let Some(component) = waited_instrumentation(command) {
            return Box::pin(run_instrumentation(sim, component, command.to_string()));
        }
        let command = command.to_string();
        Box::pin(async move {
            // `am force-stop` waits for the Provider's locks like a real
            // process kill waits for the process: keep it off the runtime.
            tokio::task::spawn_blocking(move || run_shell(&sim, &command))
                .await
                .unwrap_or_else(|_| ShellOutput::with_code("sh: internal error\n", 1))
        })
    }

    fn push_file(
        &self,
        path: &str,
        _mode: u32,
        data: Vec<u8>,
    ) -> BoxFuture<'static, Result<(), String>> {
        self.sim.record_push(path, &data);
        self.sim
            .log('I', &format!("adb push {path} ({} bytes)", data.len()));
        Box::pin(async { Ok(()) })
    }

    fn stat(&self, path: &str) -> Option<FileStat> {
        if let Some(size) = self.sim.pushed_size(path) {
            return Some(FileStat {
                mode: cetp_adbd::S_IFREG | 0o644,
                size,
                mtime: 0,
            });
        }
        let p = path.trim_end_matches('/');
        let p = if p.is_empty() { "/" } else { p };
        cetp_adbd::WELL_KNOWN_DIRS.contains(&p).then_some(FileStat {
            mode: cetp_adbd::S_IFDIR | 0o771,
            size: 4096,
            mtime: 0,
        })
    }
}

/// The component of `am instrument -w ... COMPONENT`, a command that lasts
/// until the instrumentation ends.
fn waited_instrumentation(line: &str) -> Option<String> {
    let words = shell_words(line).ok()?;
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !is_redirection(w))
        .collect();
    match words.as_slice() {
        ["am", "instrument", rest @ ..] if rest.contains(&"-w") => {
            operands(rest, &["-p", "--user", "--abi"])
                .last()
                .map(|c| c.to_string())
        }
        _ => None,
    }
}

/// Ends the record of a running instrumentation however its command ends:
/// dropped when the host closes the shell stream, or after a force-stop.
struct Running {
    sim: Arc<Sim>,
    id: u64,
    why: &'static str,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.sim.instrumentation_ended(self.id, self.why);
    }
}

/// `am instrument -w`: on a device it waits for as long as the probe runs,
/// which is until its package is force-stopped, and adbd ends it when the
/// host closes the stream. The simulated probes serve their sockets anyway;
/// what this keeps is the record of the stream's life.
async fn run_instrumentation(sim: Arc<Sim>, component: String, line: String) -> ShellOutput {
    sim.log('I', &format!("shell: {line}"));
    let (id, stop) = sim.instrumentation_started(&component);
    let mut running = Running {
        sim,
        id,
        why: "the host closed the shell stream",
    };
    let _ = stop.await;
    running.why = "force-stop";
    drop(running);
    ShellOutput::ok("INSTRUMENTATION_RESULT: shortMsg=Process crashed.\nINSTRUMENTATION_CODE: 0\n")
}

/// Redirections hosts append (Debian's adb runs `rm '...' </dev/null`);
/// they change nothing these commands print here.
fn is_redirection(word: &str) -> bool {
    let w = word.trim_start_matches(|c: char| c.is_ascii_digit());
    w.starts_with('<') || w.starts_with('>')
}

/// Arguments that are not options, skipping the value of the options in
/// `valued` (`--user 0`).
fn operands<'a>(args: &[&'a str], valued: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if valued.contains(a) {
            it.next();
        } else if !a.starts_with('-') {
            out.push(*a);
        }
    }
    out
}

/// Where `pm path` says a package's APK is.
fn base_apk(package: &str) -> String {
    format!("/data/app/{package}-1/base.apk")
}

/// toybox's `sha256sum`, for the installed packages' base.apk only (what a
/// host asks to know which build a package holds).
fn sha256sum(sim: &Sim, files: &[&str]) -> ShellOutput {
    let mut out = String::new();
    let mut code = 0;
    for file in files {
        let digest = file
            .strip_prefix("/data/app/")
            .and_then(|rest| rest.strip_suffix("-1/base.apk"))
            .and_then(|package| sim.package_apk_sha256(package));
        match digest {
            Some(d) => out.push_str(&format!("{d}  {file}\n")),
            None => {
                out.push_str(&format!("sha256sum: {file}: No such file or directory\n"));
                code = 1;
            }
        }
    }
    ShellOutput::with_code(out, code)
}

/// The value following `flag`, if any.
fn flag_value<'a>(args: &[&'a str], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| *a == flag)
        .and_then(|i| args.get(i + 1))
        .copied()
}

/// `pm SUB ...`: the package manager's listing, paths and installs (what a
/// host asks to find and place the APKs); kept apart from `run_shell`'s
/// dispatch.
fn pm_command(sim: &Sim, sub: &str, rest: &[&str]) -> ShellOutput {
    match (sub, rest) {
        ("list", ["packages", rest @ ..]) => {
            let with_path = rest.contains(&"-f");
            let filter = operands(rest, &["--user", "--uid"])
                .first()
                .copied()
                .unwrap_or("");
            let out: String = sim
                .packages()
                .iter()
                .filter(|p| p.contains(filter))
                .map(|p| {
                    if with_path {
                        format!("package:/data/app/{p}-1/base.apk={p}\n")
                    } else {
                        format!("package:{p}\n")
                    }
                })
                .collect();
            ShellOutput::ok(out)
        }
        ("path", rest) => match operands(rest, &["--user"]).first() {
            Some(package) if sim.package_apk_sha256(package).is_some() => {
                ShellOutput::ok(format!("package:{}\n", base_apk(package)))
            }
            _ => ShellOutput::with_code("", 1),
        },
        ("install", rest) => {
            match operands(rest, &["--user", "-i", "-p", "--install-location", "--pkg"]).last() {
                Some(path) => {
                    sim.record_install(path);
                    if let Some(package) = flag_value(rest, "--pkg") {
                        sim.record_package_install(package, path);
                    }
                    sim.log('I', &format!("pm install {path}: Success"));
                    ShellOutput::ok("Success\n")
                }
                None => ShellOutput::with_code("Error: no package specified\n", 1),
            }
        }
        (sub, _) => ShellOutput::with_code(format!("Unknown command: {sub}\n"), 1),
    }
}

/// `am SUB ...`: the activity manager's stops, starts and instrumentation
/// (what a host asks to run the apps); kept apart from `run_shell`'s
/// dispatch.
fn am_command(sim: &Sim, sub: &str, rest: &[&str]) -> ShellOutput {
    match (sub, rest) {
        ("force-stop", rest) => {
            for package in operands(rest, &["--user"]) {
                sim.stop_instrumentations(package);
                if sim.packages().iter().any(|p| p == package) {
                    // Apps without a running process (the probes) have
                    // nothing to stop.
                    let _ = sim.restart_package(package);
                }
            }
            ShellOutput::ok("")
        }
        ("start", rest) => {
            let target = flag_value(rest, "-n")
                .map(|c| format!("cmp={c}"))
                .or_else(|| flag_value(rest, "-a").map(|a| format!("act={a}")))
                .unwrap_or_default();
            ShellOutput::ok(format!("Starting: Intent {{ {target} }}\n"))
        }
        (
            "start-foreground-service"
            | "startforegroundservice"
            | "startservice"
            | "start-service",
            rest,
        ) => {
            let target = flag_value(rest, "-n")
                .map(|c| format!("cmp={c}"))
                .unwrap_or_default();
            ShellOutput::ok(format!("Starting service: Intent {{ {target} }}\n"))
        }
        ("instrument", rest) => {
            // Over adb, `-w` runs in `run_instrumentation` and lasts; this is
            // what it prints once the instrumentation finishes.
            if rest.contains(&"-w") {
                ShellOutput::ok("INSTRUMENTATION_RESULT: stream=\nINSTRUMENTATION_CODE: -1\n")
            } else {
                ShellOutput::ok("")
            }
        }
        (sub, _) => ShellOutput::with_code(format!("Unknown command: {sub}\n"), 1),
    }
}

pub(crate) fn run_shell(sim: &Sim, line: &str) -> ShellOutput {
    let words = match shell_words(line) {
        Ok(w) => w,
        Err(e) => return ShellOutput::with_code(format!("sh: syntax error: {e}\n"), 2),
    };
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !is_redirection(w))
        .collect();
    sim.log('I', &format!("shell: {line}"));
    // After `adb root` the shell is uid 0; `su 0 COMMAND` exists on
    // userdebug builds and emulators, never on a user build.
    let root = sim.config().root;
    let (words, uid) = match words.as_slice() {
        ["su", "0" | "root", rest @ ..] if root != crate::Root::None => (rest.to_vec(), 0),
        _ if root == crate::Root::Adbd => (words, 0),
        _ => (words, SHELL_UID),
    };
    if let Some(out) = clock_command(sim, uid, &words) {
        return out;
    }
    match words.as_slice() {
        [] => ShellOutput::ok(""),
        ["pm", sub, rest @ ..] => pm_command(sim, sub, rest),
        ["sha256sum", files @ ..] => sha256sum(sim, files),
        ["am", sub, rest @ ..] => am_command(sim, sub, rest),
        ["logcat", rest @ ..] => {
            if rest.contains(&"-c") {
                sim.clear_log();
                return ShellOutput::ok("");
            }
            // Without `-d` logcat follows the log forever; a bounded dump
            // is what a harness can use.
            let mut out = String::from("--------- beginning of main\n");
            for l in sim.log_lines() {
                out.push_str(&l);
                out.push('\n');
            }
            ShellOutput::ok(out)
        }
        ["rm", rest @ ..] => {
            for path in operands(rest, &[]) {
                sim.forget_pushed(path);
            }
            ShellOutput::ok("")
        }
        ["echo", rest @ ..] => ShellOutput::ok(format!("{}\n", rest.join(" "))),
        [cmd, ..] => ShellOutput::with_code(format!("sh: {cmd}: not found\n"), 127),
    }
}

/// What a phone's shell answers about who runs it and its clock: `id -u`,
/// toybox's `date`, and the `settings` that hold automatic time.
fn clock_command(sim: &Sim, uid: u32, words: &[&str]) -> Option<ShellOutput> {
    Some(match words {
        ["id", "-u"] => ShellOutput::ok(format!("{uid}\n")),
        ["date", rest @ ..] => date(sim, uid, rest),
        ["settings", "get", ns, key] => ShellOutput::ok(format!(
            "{}\n",
            lock(&sim.settings)
                .get(&format!("{ns}/{key}"))
                .map_or("null", String::as_str)
        )),
        ["settings", "put", ns, key, value] => {
            lock(&sim.settings).insert(format!("{ns}/{key}"), (*value).to_string());
            ShellOutput::ok("")
        }
        ["settings", "delete", ns, key] => {
            let gone = lock(&sim.settings).remove(&format!("{ns}/{key}")).is_some();
            ShellOutput::ok(format!("Deleted {} rows\n", u8::from(gone)))
        }
        _ => return None,
    })
}

/// The uid of adb's shell on a device without root.
const SHELL_UID: u32 = 2000;

/// Toybox's `date`: `+%s` prints the wall clock's seconds; `@SECONDS[.FRACTION]`
/// sets it, as root only. The elapsed clock does not move.
fn date(sim: &Sim, uid: u32, args: &[&str]) -> ShellOutput {
    let now = sim.device().clock().now_ms();
    match args {
        [] => ShellOutput::ok(format!("{}\n", now.div_euclid(1000))),
        ["+%s"] => ShellOutput::ok(format!("{}\n", now.div_euclid(1000))),
        [set] if set.starts_with('@') => {
            let Some(ms) = set[1..]
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && (0.0..1e11).contains(s))
                .map(|s| (s * 1000.0).round() as i64)
            else {
                return ShellOutput::with_code(format!("date: bad date '{set}'\n"), 1);
            };
            if uid != 0 {
                return ShellOutput::with_code(
                    "date: cannot set date: Operation not permitted\n",
                    1,
                );
            }
            sim.device().clock().set_wall_ms(ms);
            sim.log('I', &format!("wall clock set to {ms} (was {now})"));
            ShellOutput::ok(format!("{}\n", ms.div_euclid(1000)))
        }
        _ => ShellOutput::with_code("date: unsupported arguments\n", 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimConfig;
    use sha2::{Digest, Sha256};

    #[test]
    fn root_sets_the_wall_clock_and_nobody_else_does() {
        let out = |sim: &Sim, line: &str| {
            let o = run_shell(sim, line);
            (
                String::from_utf8_lossy(&o.stdout).trim().to_string(),
                o.exit_code,
            )
        };
        let user = Sim::new(SimConfig::default()).unwrap();
        assert_eq!(out(&user, "id -u").0, "2000");
        assert_eq!(out(&user, "su 0 id -u").1, 127);
        let before = user.now_ms();
        assert_eq!(out(&user, "date @4000000000").1, 1);
        assert!(user.now_ms() - before < 60_000);
        let su = Sim::new(SimConfig {
            root: crate::Root::Su,
            provider_elapsed_clock: true,
            ..SimConfig::default()
        })
        .unwrap();
        assert_eq!(out(&su, "id -u").0, "2000");
        assert_eq!(out(&su, "su 0 id -u").0, "0");
        assert_eq!(out(&su, "su 0 date @4000000000").1, 0);
        assert_eq!(out(&su, "date +%s").0, "4000000000");
        // The elapsed clock, which this Provider times by, stayed.
        assert!(su.device().app_now_ms() < 4_000_000_000_000 - 86_400_000);
        assert_eq!(out(&su, "settings get global auto_time").0, "1");
        out(&su, "settings put global auto_time 0");
        assert_eq!(out(&su, "settings get global auto_time").0, "0");
        out(&su, "settings delete global auto_time");
        assert_eq!(out(&su, "settings get global auto_time").0, "null");
        let adbd = Sim::new(SimConfig {
            root: crate::Root::Adbd,
            ..SimConfig::default()
        })
        .unwrap();
        assert_eq!(out(&adbd, "id -u").0, "0");
        assert_eq!(out(&adbd, "date @bad").1, 1);
    }

    #[test]
    fn words_and_options() {
        assert!(is_redirection("</dev/null"));
        assert!(is_redirection("2>&1"));
        assert!(!is_redirection("a<b"));
        assert_eq!(operands(&["--user", "0", "-r", "x"], &["--user"]), ["x"]);
        assert_eq!(operands(&["-t", "/a.apk"], &[]), ["/a.apk"]);
        assert_eq!(flag_value(&["-n", "p/.A", "-W"], "-n"), Some("p/.A"));
        assert_eq!(flag_value(&["-n"], "-n"), None);
    }

    #[test]
    fn a_waiting_instrumentation_is_recognised() {
        assert_eq!(
            waited_instrumentation("am instrument -w -r com.clawseed.probe/.R").as_deref(),
            Some("com.clawseed.probe/.R")
        );
        assert_eq!(waited_instrumentation("am instrument p/.R"), None);
        assert_eq!(waited_instrumentation("am force-stop p"), None);
    }

    #[tokio::test]
    async fn an_instrumentation_lasts_until_its_stream_closes_or_its_package_stops() {
        let sim = Sim::new(SimConfig::default()).unwrap();
        let services = SimServices::new(sim.clone());
        let component = "com.clawseed.probe/com.clawseed.probe.ProbeInstrumentation";
        let closed = services.shell(&format!("am instrument -w -r {component}"));
        let stopped = tokio::spawn(services.shell(&format!("am instrument -w -r {component}")));
        // Futures run only when polled: give the spawned one a turn.
        tokio::task::yield_now().await;
        let mut closed = tokio::spawn(closed);
        tokio::task::yield_now().await;
        assert_eq!(sim.running_instrumentations().len(), 2);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), &mut closed)
                .await
                .is_err(),
            "a waiting instrumentation must not end by itself"
        );
        closed.abort();
        let _ = closed.await;
        assert_eq!(sim.running_instrumentations(), vec![component.to_string()]);
        run_shell(&sim, "am force-stop com.clawseed.probe");
        let out = stopped.await.unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("INSTRUMENTATION_RESULT"));
        assert!(sim.running_instrumentations().is_empty());
        let log = sim.log_lines().join("\n");
        assert!(
            log.contains("ended (the host closed the shell stream)"),
            "{log}"
        );
        assert!(log.contains("ended (force-stop)"), "{log}");
    }

    #[test]
    fn shell_commands() {
        let sim = Sim::new(SimConfig::default()).unwrap();
        let out = |cmd: &str| {
            let o = run_shell(&sim, cmd);
            (String::from_utf8(o.stdout).unwrap(), o.exit_code)
        };
        let (list, rc) = out("pm list packages");
        assert_eq!(rc, 0);
        assert_eq!(
            list,
            "package:com.clawseed.probe\npackage:com.clawseed.probe.b\npackage:com.clawseed.reference\n"
        );
        assert_eq!(
            out("pm list packages probe.b").0,
            "package:com.clawseed.probe.b\n"
        );
        assert!(out("pm list packages -f reference")
            .0
            .contains("base.apk=com.clawseed.reference"));
        assert_eq!(
            out("pm 'install' '/data/local/tmp/a b.apk'"),
            ("Success\n".into(), 0)
        );
        assert_eq!(sim.installed_apks(), ["/data/local/tmp/a b.apk"]);
        // Which build a package holds: a built-in probe has a digest no
        // APK has; `pm install --pkg` of a pushed APK makes it that APK's.
        assert_eq!(
            out("pm path com.clawseed.probe"),
            (
                "package:/data/app/com.clawseed.probe-1/base.apk\n".into(),
                0
            )
        );
        assert_eq!(out("pm path com.example.absent"), (String::new(), 1));
        let built_in = out("sha256sum /data/app/com.clawseed.probe-1/base.apk").0;
        sim.record_push("/data/local/tmp/p.apk", b"PK probe");
        assert_eq!(
            out("pm install -r -t --pkg com.clawseed.probe /data/local/tmp/p.apk"),
            ("Success\n".into(), 0)
        );
        let (sum, rc) = out("sha256sum /data/app/com.clawseed.probe-1/base.apk");
        assert_eq!(rc, 0);
        assert_ne!(sum, built_in);
        assert_eq!(
            sum,
            format!(
                "{}  /data/app/com.clawseed.probe-1/base.apk\n",
                hex::encode(Sha256::digest(b"PK probe"))
            )
        );
        assert_eq!(out("sha256sum /data/app/nothing-1/base.apk").1, 1);
        assert_eq!(
            sim.installed_apks(),
            ["/data/local/tmp/a b.apk", "/data/local/tmp/p.apk"]
        );
        assert_eq!(
            out("rm '/data/local/tmp/a b.apk' </dev/null"),
            (String::new(), 0)
        );
        assert!(out("am start -n com.clawseed.probe/.Main")
            .0
            .contains("cmp=com.clawseed.probe/.Main"));
        assert!(out("am start-foreground-service -n p/.S")
            .0
            .starts_with("Starting service"));
        assert!(out("am instrument -w p/.R")
            .0
            .contains("INSTRUMENTATION_CODE: -1"));
        assert_eq!(out("am force-stop com.clawseed.probe"), (String::new(), 0));
        assert_eq!(
            out("frobnicate --now"),
            ("sh: frobnicate: not found\n".into(), 127)
        );
        assert_eq!(out("pm frob").1, 1);
        assert_eq!(out("echo 'x'  y").0, "x y\n");
        assert_eq!(out("echo 'oops").1, 2);
        let (log, _) = out("logcat -d");
        assert!(log.starts_with("--------- beginning of main\n"));
        assert!(log.contains("shell: frobnicate --now"), "{log}");
        assert_eq!(out("logcat -c"), (String::new(), 0));
        assert_eq!(
            out("logcat -d").0.lines().count(),
            2,
            "the clear, then this dump"
        );
    }
}
