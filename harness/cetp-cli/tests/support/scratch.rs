//! A test's scratch directory under the system temp dir.
//!
//! Each test run used to leave its directories behind (hundreds of MB
//! per `scripts/test-all.sh`). The guard removes the directory when the
//! test ends, except when the test panicked, so a failure keeps what it
//! wrote for whoever reads the failure message.

use std::ops::Deref;
use std::path::{Path, PathBuf};

pub struct Scratch(PathBuf);

impl Scratch {
    /// `<temp>/<prefix>-<pid>-<name>`, emptied first; created only when
    /// `create` is set (some tests check that a run creates it).
    pub fn new(prefix: &str, name: &str, create: bool) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if create {
            std::fs::create_dir_all(&dir).unwrap();
        }
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn scratch_is_removed_unless_its_test_panicked() {
    let kept = std::panic::catch_unwind(|| {
        let s = Scratch::new("cetp-scratch-test", "panicked", true);
        std::fs::write(s.join("note"), "kept").unwrap();
        let path = s.to_path_buf();
        // Unwinding drops `s` while panicking, so it must keep the dir.
        std::panic::panic_any(path);
    })
    .unwrap_err()
    .downcast::<PathBuf>()
    .unwrap();
    assert!(kept.join("note").is_file(), "{} kept", kept.display());
    std::fs::remove_dir_all(&*kept).unwrap();

    let s = Scratch::new("cetp-scratch-test", "passed", true);
    let path = s.to_path_buf();
    std::fs::write(s.join("note"), "gone").unwrap();
    drop(s);
    assert!(!path.exists(), "{} removed", path.display());
}
