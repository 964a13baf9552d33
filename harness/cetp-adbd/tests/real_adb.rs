//! Drives the endpoint with the real `adb` client and server.
//!
//! A private adb server is started on a free port (so the user's server and
//! devices are untouched) with a private `HOME` (so its keys are too), and is
//! always killed at the end by a guard. Every adb invocation runs under a
//! timeout, so a protocol bug fails the test instead of hanging it.
//!
//! If `adb` is missing the test fails (CI installs it) unless
//! `CETP_SKIP_ADB=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cetp_adbd::{serve, AdbdConfig};
use common::{pattern, TestDevice};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ADB_TIMEOUT: Duration = Duration::from_secs(30);

fn find_adb() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("adb"))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private adb server; `Drop` kills it (also when the test panics) and
/// removes the private home directory.
struct AdbServer {
    adb: PathBuf,
    port: u16,
    home: PathBuf,
}

impl AdbServer {
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(&self.adb);
        c.arg("-P").arg(self.port.to_string()).args(args);
        c.env("ANDROID_ADB_SERVER_PORT", self.port.to_string())
            .env("HOME", &self.home)
            .env_remove("ANDROID_SERIAL")
            .env_remove("ADB_TRACE")
            .stdin(Stdio::null());
        c
    }

    /// Run `adb -P PORT ARGS...` under a timeout; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let mut cmd = tokio::process::Command::from(self.command(args));
        cmd.kill_on_drop(true)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().expect("spawn adb");
        match tokio::time::timeout(ADB_TIMEOUT, child.wait_with_output()).await {
            Ok(Ok(o)) => (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ),
            Ok(Err(e)) => panic!("adb {args:?} failed to run: {e}"),
            Err(_) => panic!("adb {args:?} timed out after {ADB_TIMEOUT:?}"),
        }
    }

    /// Like `run`, but the command must succeed.
    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        eprintln!("$ adb {}\n{out}{err}", args.join(" "));
        assert!(ok, "adb {args:?} failed\nstdout: {out}\nstderr: {err}");
        out
    }
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        if let Ok(mut child) = self
            .command(&["kill-server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

fn scratch_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let d = std::env::temp_dir().join(format!("cetp-adbd-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Round-trip `data` through a forwarded port, writing and reading at once
/// (the echo service can only keep echoing while we keep reading).
async fn echo_roundtrip(port: u16, data: Vec<u8>) -> Vec<u8> {
    let sock = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to forward");
    let (mut r, mut w) = sock.into_split();
    let len = data.len();
    let writer = tokio::spawn(async move {
        w.write_all(&data).await.expect("write to forward");
        w // keep the write half open until everything has been read back
    });
    let mut got = vec![0u8; len];
    r.read_exact(&mut got).await.expect("read echo");
    let _w = writer.await.unwrap();
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_adb_server_sees_and_uses_the_device() {
    let Some(adb) = find_adb() else {
        if std::env::var("CETP_SKIP_ADB").as_deref() == Ok("1") {
            eprintln!("SKIPPED: adb not on PATH and CETP_SKIP_ADB=1");
            return;
        }
        panic!("`adb` is not on PATH: install it (Debian: apt-get install adb) or set CETP_SKIP_ADB=1 to skip this test");
    };

    let server = AdbServer {
        adb,
        port: free_port(),
        home: scratch_dir("home"),
    };
    let files = scratch_dir("files");
    let result = tokio::time::timeout(Duration::from_secs(240), scenario(&server, &files)).await;
    let _ = std::fs::remove_dir_all(&files);
    result.expect("scenario timed out");
}

async fn scenario(server: &AdbServer, files: &Path) {
    server.ok(&["start-server"]).await;

    let device = TestDevice::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dev_port = listener.local_addr().unwrap().port();
    let serial = format!("127.0.0.1:{dev_port}");
    let endpoint = tokio::spawn(serve(
        listener,
        Arc::new(device.clone()),
        AdbdConfig::default(),
    ));

    // connect + devices
    let out = server.ok(&["connect", &serial]).await;
    assert!(
        out.contains(&format!("connected to {serial}")),
        "connect said: {out}"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = server.ok(&["devices"]).await;
        if out
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == [serial.as_str(), "device"])
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "device never listed as `device`:\n{out}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = server.ok(&["devices", "-l"]).await;
    assert!(
        out.contains("model:CETP_Simulator") || out.contains("model:CETP Simulator"),
        "devices -l: {out}"
    );
    assert!(out.contains("device:cetpsim"), "devices -l: {out}");

    let s = |args: &[&str]| {
        let mut v = vec!["-s", serial.as_str()];
        v.extend_from_slice(args);
        v.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    macro_rules! adb_s {
        ($($a:expr),*) => {{
            let v = s(&[$($a),*]);
            let refs: Vec<&str> = v.iter().map(String::as_str).collect();
            server.ok(&refs).await
        }};
    }

    assert_eq!(adb_s!("get-state").trim(), "device");
    // We advertise no features, so the host falls back to shell v1, sync v1
    // and push + `pm install`.
    assert_eq!(adb_s!("features").trim(), "");

    // shell v1: built-in getprop, and the exit-code idiom.
    assert_eq!(adb_s!("shell", "getprop ro.build.version.sdk"), "34\n");
    assert_eq!(adb_s!("shell", "getprop", "ro.build.version.sdk"), "34\n");
    assert_eq!(adb_s!("shell", "echo hi; echo __rc=$?"), "hi\n__rc=0\n");
    assert_eq!(
        adb_s!("shell", "nosuchcmd --x; echo __rc=$?"),
        "/system/bin/sh: nosuchcmd: inaccessible or not found\n__rc=127\n"
    );
    {
        let st = device.state();
        assert!(
            st.shell_log.contains(&"echo hi".to_string()),
            "{:?}",
            st.shell_log
        );
        assert!(
            !st.shell_log.iter().any(|c| c.contains("getprop")),
            "getprop reached the service: {:?}",
            st.shell_log
        );
    }

    // Refused services: exec: (we do not advertise `cmd`).
    let v = s(&["exec-out", "echo hi"]);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    let (ok, out, err) = server.run(&refs).await;
    assert!(
        !ok && out.is_empty() && err.contains("closed"),
        "exec: should be refused, got {ok} {out:?} {err:?}"
    );

    // forward: big payloads through flow control, two connections at once.
    let fwd = free_port();
    adb_s!("forward", &format!("tcp:{fwd}"), "localabstract:echo");
    let list = server.ok(&["forward", "--list"]).await;
    assert!(
        list.contains(&format!("{serial} tcp:{fwd} localabstract:echo")),
        "forward --list: {list}"
    );
    let a = pattern(1_500_000, 1);
    let b = pattern(1_100_000, 2);
    let (ga, gb) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(
            echo_roundtrip(fwd, a.clone()),
            echo_roundtrip(fwd, b.clone())
        )
    })
    .await
    .expect("echo round trips timed out");
    assert!(ga == a, "first forwarded connection corrupted the data");
    assert!(gb == b, "second forwarded connection corrupted the data");
    assert_eq!(
        device
            .state()
            .opened
            .iter()
            .filter(|s| *s == "localabstract:echo")
            .count(),
        2
    );

    // A forward to a service the device refuses: the host closes our socket.
    let bad = free_port();
    adb_s!("forward", &format!("tcp:{bad}"), "localabstract:nope");
    let mut sock = TcpStream::connect(("127.0.0.1", bad)).await.unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf))
        .await
        .expect("refused forward not closed")
        .unwrap_or(0);
    assert_eq!(n, 0, "refused forward delivered data");
    assert!(device
        .state()
        .opened
        .contains(&"localabstract:nope".to_string()));
    adb_s!("forward", "--remove-all");

    // push: to a file path, and to a directory (basename appended).
    let data = pattern(300_000, 3);
    let local = files.join("blob.bin");
    std::fs::write(&local, &data).unwrap();
    let local_s = local.to_str().unwrap();
    adb_s!("push", local_s, "/data/local/tmp/pushed.bin");
    adb_s!("push", local_s, "/data/local/tmp/");
    {
        let st = device.state();
        let paths: Vec<&str> = st.pushed.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            ["/data/local/tmp/pushed.bin", "/data/local/tmp/blob.bin"]
        );
        for (_, mode, got) in &st.pushed {
            assert!(
                got == &data,
                "pushed bytes differ ({} vs {} bytes)",
                got.len(),
                data.len()
            );
            assert_eq!(
                mode & 0o170000,
                0o100000,
                "mode {mode:o} is not a regular file"
            );
        }
    }
    // An empty file too.
    let empty = files.join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    adb_s!("push", empty.to_str().unwrap(), "/data/local/tmp/empty.txt");
    assert_eq!(device.state().pushed.last().unwrap().2, b"");

    // pull: the default `read_file`/`stat` know no such file; adb must fail, not hang.
    let pulled = files.join("pulled.bin");
    let v = s(&["pull", "/data/local/tmp/nothing", pulled.to_str().unwrap()]);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    let (ok, out, err) = server.run(&refs).await;
    // (adb 29 prints this error on stdout.)
    assert!(
        !ok && format!("{out}{err}").contains("does not exist"),
        "pull: {ok} {out:?} {err:?}"
    );

    // install: legacy push + `pm install` (we advertise no `cmd`).
    let apk_bytes = pattern(200_000, 4);
    let apk = files.join("dummy.apk");
    std::fs::write(&apk, &apk_bytes).unwrap();
    let out = adb_s!("install", apk.to_str().unwrap());
    assert!(out.contains("Success"), "install said: {out}");
    assert!(!out.contains("not found"), "install said: {out}");
    {
        let st = device.state();
        assert_eq!(st.installed.len(), 1, "shell log: {:?}", st.shell_log);
        assert_eq!(st.installed[0].0, "/data/local/tmp/dummy.apk");
        assert!(st.installed[0].1 == apk_bytes, "installed bytes differ");
        // Debian's adb 29 quotes every argument and removes the pushed APK afterwards.
        assert!(
            st.shell_log
                .contains(&"pm 'install' '/data/local/tmp/dummy.apk'".to_string()),
            "{:?}",
            st.shell_log
        );
        assert!(
            st.shell_log
                .iter()
                .any(|c| c.starts_with("rm '/data/local/tmp/dummy.apk'")),
            "{:?}",
            st.shell_log
        );
    }

    let out = server.ok(&["disconnect", &serial]).await;
    assert!(out.contains("disconnected"), "disconnect said: {out}");
    endpoint.abort();
}
