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
