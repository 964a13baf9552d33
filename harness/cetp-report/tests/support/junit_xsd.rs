//! JUnit XML judged by the Jenkins JUnit schema with `xmllint`, for the
//! tests of `cetp-report` and `cetp-cli` (the latter includes this file by
//! path). `scripts/setup.sh` fetches the schema (Debian's junit5 source
//! ships it) into target/test-tools/junit/ and `scripts/test-all.sh` names
//! it in `CETP_JUNIT_XSD`; a plain `cargo test` without it skips with a note,
//! and `CETP_REQUIRE_JUNIT_XSD` turns that skip into a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// xmllint reads a few hundred kilobytes; anything near this is a hang.
const XMLLINT_TIMEOUT: Duration = Duration::from_secs(60);

pub struct JunitXsd {
    xsd: PathBuf,
}

/// The schema, or None with a note when it (or xmllint) is absent and not
/// required.
pub fn junit_xsd() -> Option<JunitXsd> {
    let required = std::env::var_os("CETP_REQUIRE_JUNIT_XSD").is_some();
    let xsd = match std::env::var("CETP_JUNIT_XSD") {
        Ok(p) if Path::new(&p).is_file() => PathBuf::from(p),
        _ => {
            assert!(
                !required,
                "CETP_JUNIT_XSD names no file; run scripts/setup.sh"
            );
            eprintln!("note: no JUnit XSD (run scripts/setup.sh); junit.xml not validated");
            return None;
        }
    };
    if Command::new("xmllint").arg("--version").output().is_err() {
        assert!(!required, "xmllint is not installed; run scripts/setup.sh");
        eprintln!("note: no xmllint (run scripts/setup.sh); junit.xml not validated");
        return None;
    }
    let v = JunitXsd { xsd };
    // The validator judges: a suite without its required name is not JUnit.
    let rejected = v.errors(r#"<testsuites><testsuite tests="0"/></testsuites>"#);
    assert!(
        rejected
            .as_deref()
            .is_some_and(|e| e.contains("fails to validate")),
        "xmllint did not reject a <testsuite> without name: {rejected:?}"
    );
    Some(v)
}

impl JunitXsd {
    /// What xmllint says is wrong with `xml`, or None when it validates.
    pub fn errors(&self, xml: &str) -> Option<String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let stem = format!(
            "cetp-junit-xsd-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let doc = std::env::temp_dir().join(format!("{stem}.xml"));
        let log = std::env::temp_dir().join(format!("{stem}.log"));
        std::fs::write(&doc, xml).unwrap();
        // Its complaints go to a file: a pipe nobody reads while we wait
        // could fill and stall it.
        let mut child = Command::new("xmllint")
            .args(["--noout", "--schema"])
            .arg(&self.xsd)
            .arg(&doc)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("xmllint runs");
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > XMLLINT_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("xmllint took over {XMLLINT_TIMEOUT:?} on {}", doc.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&doc);
        let _ = std::fs::remove_file(&log);
        (!status.success()).then(|| format!("{status}: {said}"))
    }

    pub fn assert_valid(&self, xml: &str, what: &str) {
        if let Some(e) = self.errors(xml) {
            panic!("{what} is not valid JUnit (Jenkins XSD): {e}");
        }
    }
}
