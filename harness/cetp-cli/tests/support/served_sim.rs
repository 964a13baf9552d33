//! A simulated device served over TCP by the `cetp sim` binary, killed
//! when dropped. Shared by the test files: each uses what it needs.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};

/// The process, identity a's address and identity b's.
pub struct ServedSim(pub Child, pub String, pub String);

impl ServedSim {
    pub fn start_with(extra: &[&str]) -> ServedSim {
        // Port 0: the sim picks a free port itself and names it (`listening
        // identity=a addr=HOST:PORT`), so tests starting sims at once never
        // race for a port. Its output is drained to the end, so it never
        // blocks on a full pipe.
        let mut child = Command::new(env!("CARGO_BIN_EXE_cetp"))
            .args(["sim", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut tx = Some(tx);
            let (mut a, mut b) = (None, None);
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                match line
                    .strip_prefix("listening identity=")
                    .and_then(|rest| rest.split_once(" addr="))
                {
                    Some(("a", addr)) => a = Some(addr.to_string()),
                    Some(("b", addr)) => b = Some(addr.to_string()),
                    _ => {}
                }
                if let (Some(a), Some(b)) = (&a, &b) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send((a.clone(), b.clone()));
                    }
                }
            }
        });
        // A loaded CI machine can take seconds to start a debug binary.
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok((a, b)) => ServedSim(child, a, b),
            Err(_) => {
                let status = child.try_wait();
                let _ = child.kill();
                panic!("cetp sim {extra:?} named no address within 60 s (exit: {status:?})");
            }
        }
    }
}

impl Drop for ServedSim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl ServedSim {
    /// `tcp:A,b=B`: both identities.
    pub fn target(&self) -> String {
        format!("tcp:{},b={}", self.1, self.2)
    }
}

/// A simulated device that also serves the device side of adb
/// (`cetp sim --adb-listen`), for runs through a real adb server.
pub struct AdbSim {
    pub sim: ServedSim,
    /// The address `adb connect` takes; also the device's serial.
    pub serial: String,
}

impl AdbSim {
    // Every path hands the child to the returned AdbSim (killed and waited
    // for on drop) or kills and waits for it before panicking; the lint
    // does not follow the move out of the loop.
    #[allow(clippy::zombie_processes)]
    pub fn start_with(extra: &[&str]) -> AdbSim {
        let dir = std::env::temp_dir().join(format!(
            "cetp-adbsim-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let mut child = Command::new(env!("CARGO_BIN_EXE_cetp"))
            .args([
                "sim",
                "--listen",
                "127.0.0.1:0",
                "--adb-listen",
                "127.0.0.1:0",
            ])
            .args(extra)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let field = |text: &str, prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(str::to_string)
        };
        let t0 = std::time::Instant::now();
        loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if let (Some(a), Some(b), Some(adb)) = (
                field(&text, "listening identity=a addr="),
                field(&text, "listening identity=b addr="),
                field(&text, "listening adb addr="),
            ) {
                return AdbSim {
                    sim: ServedSim(child, a, b),
                    serial: adb,
                };
            }
            if t0.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("cetp sim --adb-listen named no address within 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A private adb server (Debian's `adb`) on a free port with its own HOME,
/// killed when dropped. `None` when `adb` is missing and `CETP_SKIP_ADB=1`;
/// a missing adb otherwise fails the test.
pub struct AdbServer {
    pub port: u16,
    home: std::path::PathBuf,
}

impl AdbServer {
    pub fn start(test: &str) -> Option<AdbServer> {
        let found = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("adb"))
                .find(|p| p.is_file())
        });
        if found.is_none() {
            if std::env::var("CETP_SKIP_ADB").as_deref() == Ok("1") {
                eprintln!("{test}: skipped, `adb` is not installed and CETP_SKIP_ADB=1");
                return None;
            }
            panic!(
                "{test}: `adb` is not on PATH (Debian: apt-get install adb; CETP_SKIP_ADB=1 skips)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let home = std::env::temp_dir().join(format!("cetp-cli-adb-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let server = AdbServer { port, home };
        assert!(server.adb(&["start-server"]).status.success());
        Some(server)
    }

    /// `adb -P PORT ARGS…` against this server.
    pub fn adb(&self, args: &[&str]) -> std::process::Output {
        Command::new("adb")
            .arg("-P")
            .arg(self.port.to_string())
            .args(args)
            .env("HOME", &self.home)
            .env("ANDROID_ADB_SERVER_PORT", self.port.to_string())
            .env_remove("ANDROID_SERIAL")
            .stdin(Stdio::null())
            .output()
            .expect("adb runs")
    }

    /// `adb:SERIAL,server=127.0.0.1:PORT`.
    pub fn target(&self, serial: &str) -> String {
        format!("adb:{serial},server=127.0.0.1:{}", self.port)
    }
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        let _ = self.adb(&["kill-server"]);
        let _ = std::fs::remove_dir_all(&self.home);
    }
}
