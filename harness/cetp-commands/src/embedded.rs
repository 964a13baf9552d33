//! The data `cetp` ships inside its binary (vectors and profiles), so that
//! `cargo install --path harness/cetp-cli` gives a `cetp` that works outside
//! the source tree. The files of the source tree win when they are there
//! (a developer edits them); otherwise the embedded copy is written once to
//! a directory of its own under the temp dir, named by the content's hash,
//! and read from there like the source tree. `--vectors DIR` overrides both.
//! `CETP_EMBEDDED=1` forces the embedded copy (its tests).

use include_dir::{include_dir, Dir};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

static VECTORS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../vectors");
static PROFILES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../profiles");

fn source_tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn forced() -> bool {
    std::env::var_os("CETP_EMBEDDED").is_some_and(|v| v == "1")
}

/// The vectors directory: `CETP_VECTORS`, the source tree's, or the
/// embedded copy.
pub fn vectors_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("CETP_VECTORS") {
        return Ok(PathBuf::from(dir));
    }
    let src = source_tree().join("vectors");
    if !forced() && src.join("requirements/catalog.json").is_file() {
        return Ok(src);
    }
    unpack(&VECTORS, "vectors")
}

/// The profiles directory (the legal variants' profiles, for `selftest`).
pub fn profiles_dir() -> Result<PathBuf, String> {
    let src = source_tree().join("profiles");
    if !forced() && src.join("reference.toml").is_file() {
        return Ok(src);
    }
    unpack(&PROFILES, "profiles")
}

fn hash(dir: &Dir<'_>, h: &mut Sha256) {
    for f in dir.files() {
        h.update(f.path().to_string_lossy().as_bytes());
        h.update([0]);
        h.update(f.contents());
    }
    for d in dir.dirs() {
        hash(d, h);
    }
}

fn write_all(dir: &Dir<'_>, root: &Path) -> std::io::Result<()> {
    for f in dir.files() {
        let path = root.join(f.path());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, f.contents())?;
    }
    for d in dir.dirs() {
        write_all(d, root)?;
    }
    Ok(())
}

/// Writes `dir` once under the temp dir; a directory named by the content's
/// hash is complete (it is renamed into place only when fully written).
fn unpack(dir: &Dir<'_>, name: &str) -> Result<PathBuf, String> {
    let mut h = Sha256::new();
    hash(dir, &mut h);
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let base = std::env::temp_dir().join("cetp-embedded");
    let target = base.join(format!("{name}-{}", &digest[..16]));
    if target.is_dir() {
        return Ok(target);
    }
    let partial = base.join(format!(".{name}-{}-{}", &digest[..16], std::process::id()));
    let err = |e: std::io::Error| {
        format!(
            "cannot unpack the embedded {name} to {}: {e}",
            base.display()
        )
    };
    std::fs::create_dir_all(&partial).map_err(err)?;
    write_all(dir, &partial).map_err(err)?;
    match std::fs::rename(&partial, &target) {
        Ok(()) => Ok(target),
        // Another cetp unpacked the same content first: use it.
        Err(_) if target.is_dir() => {
            let _ = std::fs::remove_dir_all(&partial);
            Ok(target)
        }
        Err(e) => Err(err(e)),
    }
}
