//! Failures before or outside a run, with their exit codes, and the
//! small readers every command shares (the vectors, a target's spec).

use super::*;

/// A failure before or outside a run, with its exit code.
pub(crate) struct Failure {
    pub(crate) code: ExitCode,
    pub(crate) message: String,
}

pub(crate) fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: ExitCode::Usage,
        message: message.into(),
    }
}

pub(crate) fn infra(message: impl Into<String>) -> Failure {
    Failure {
        code: ExitCode::Infra,
        message: message.into(),
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub(crate) fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn vectors_or_default(vectors: &Option<PathBuf>) -> Result<PathBuf, Failure> {
    match vectors {
        Some(d) => Ok(d.clone()),
        None => embedded::vectors_dir().map_err(infra),
    }
}

pub(crate) fn load_suite(vectors: &Option<PathBuf>) -> Result<(PathBuf, Suite), Failure> {
    let dir = vectors_or_default(vectors)?;
    let suite = Suite::load(&dir).map_err(|e| usage(format!("vectors: {e}")))?;
    Ok((dir, suite))
}

pub(crate) fn parse_target(
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
        (_, Some(_), _) => {
            return Err(usage(
                "--target-b applies to tcp targets (sim and adb targets bring both identities)",
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

pub(crate) fn dir_failure(e: DirError) -> Failure {
    Failure {
        code: e.exit,
        message: e.message,
    }
}
