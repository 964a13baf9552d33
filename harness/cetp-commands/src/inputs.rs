//! The inputs every command reads the same way: the vectors, a Provider
//! target's spec, its profile, a contract lock, the APKs a phone installs.

use crate::embedded;
use crate::failure::{infra, usage, Failure};
use cetp_contract::lock::Lock;
use cetp_targets::TargetSpec;
use cetp_vectors::profile::{builtin, Profile};
use cetp_vectors::suite::Suite;
use std::path::{Path, PathBuf};

/// The vectors directory: `--vectors`, or the one the harness ships.
pub fn vectors_or_default(vectors: &Option<PathBuf>) -> Result<PathBuf, Failure> {
    match vectors {
        Some(d) => Ok(d.clone()),
        None => embedded::vectors_dir().map_err(infra),
    }
}

/// The vectors directory and the suite it holds.
pub fn load_suite(vectors: &Option<PathBuf>) -> Result<(PathBuf, Suite), Failure> {
    let dir = vectors_or_default(vectors)?;
    let suite = Suite::load(&dir).map_err(|e| usage(format!("vectors: {e}")))?;
    Ok((dir, suite))
}

/// A Provider target's spec, with `--target-b` and `--adb-server` applied.
pub fn parse_target(
    target: &str,
    target_b: &Option<String>,
    adb_server: &Option<String>,
) -> Result<TargetSpec, Failure> {
    let mut spec = TargetSpec::parse(target).map_err(|e| usage(e.to_string()))?;
    match (&mut spec, target_b, adb_server) {
        // `--target-b` takes HOST:PORT or the same `tcp:HOST:PORT` as --target.
        (TargetSpec::Tcp(t), Some(b), _) => {
            t.b = Some(b.strip_prefix("tcp:").unwrap_or(b).to_string())
        }
        (TargetSpec::Jvm(_), Some(_), _) => {
            return Err(usage(
                "--target-b applies to tcp targets: a jvm: target starts the JVM device with both identities on ports of its own",
            ))
        }
        (_, Some(_), _) => {
            return Err(usage(
                "--target-b applies to tcp targets (sim, adb and jvm targets bring both identities)",
            ))
        }
        _ => {}
    }
    match (&mut spec, adb_server) {
        (TargetSpec::Adb(a), Some(server)) => {
            a.server = server
                .parse()
                .map_err(|_| usage(format!("--adb-server {server:?} is not IPV4:PORT")))?
        }
        (_, Some(_)) => return Err(usage("--adb-server applies to adb targets")),
        _ => {}
    }
    Ok(spec)
}

/// The built-in profile of a simulated target: the one its vendor wrote.
pub fn sim_profile(s: &cetp_targets::SimSpec) -> &'static str {
    match (s.provider, s.variant.as_deref()) {
        (cetp_targets::FixtureSet::Notes, _) => builtin::NOTES,
        (_, Some("no_effect_counter")) => builtin::NO_COUNTER,
        _ => builtin::REFERENCE,
    }
}

/// The profile at `profile`; without one, a simulated target's built-in
/// profile, or the default (read tools only) for a real one.
pub fn profile_for(profile: &Option<PathBuf>, spec: &TargetSpec) -> Result<Profile, Failure> {
    match profile {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("profile {}: {e}", path.display())))?;
            Profile::from_toml(&text).map_err(|e| usage(format!("{}: {e}", path.display())))
        }
        None => match spec {
            TargetSpec::Sim(s) => Profile::from_toml(sim_profile(s))
                .map_err(|e| usage(format!("built-in profile of the simulated Provider: {e}"))),
            _ => Ok(Profile::default()),
        },
    }
}

/// A contract lock file (`cetp lock`).
pub fn read_lock(path: &Path) -> Result<Lock, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("lock {}: {e}", path.display())))?;
    Lock::parse(&text).map_err(|e| usage(format!("lock {}: {e}", path.display())))
}

/// SHA-256 of each Provider APK an adb target installs or a jvm target
/// hosts, for the pin.
pub fn provider_apks(spec: &TargetSpec) -> Result<Vec<String>, Failure> {
    let apks: Vec<PathBuf> = match spec {
        TargetSpec::Adb(a) => a.install.clone(),
        TargetSpec::Jvm(cetp_targets::JvmSpec {
            code: cetp_targets::JvmCode::Vendor { apk: Some(apk), .. },
            ..
        }) => vec![apk.clone()],
        _ => return Ok(Vec::new()),
    };
    apks.iter()
        .map(|path| {
            use sha2::Digest;
            let mut file = std::fs::File::open(path)
                .map_err(|e| usage(format!("Provider APK {}: {e}", path.display())))?;
            let mut h = sha2::Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = std::io::Read::read(&mut file, &mut buf)
                    .map_err(|e| usage(format!("Provider APK {}: {e}", path.display())))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
        })
        .collect()
}
