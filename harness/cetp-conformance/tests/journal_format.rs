//! The journal's on-disk format does not change under the harness's feet: a
//! run journaled by an older build must be resumable by this one, byte for
//! byte. `tests/fixtures/journal/` holds journals written by the code before
//! journal records became typed (see its README); this test writes the same
//! scripted exchanges again and compares the bytes, and reads the fixtures
//! of real runs back.

use cetp_conformance::journal::{self, Journal, Record};
use cetp_conformance::pin::Pin;
use cetp_proto::bundle::{FdValue, PendingIntentValue};
use cetp_proto::device::{CallAnswer, ErrorKind, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::{Bundle, Value};
use cetp_vectors::device::{Device, DeviceError, HelloInfo, Target};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

/// A device whose every answer is scripted by the request, so the journal
/// it produces is the same on every run (but for the `us` timings).
struct Scripted {
    clock: AtomicI64,
}

fn manifests() -> Vec<ServiceManifest> {
    let mut meta = BTreeMap::new();
    meta.insert("cetp.version".to_string(), "2".to_string());
    vec![
        ServiceManifest {
            package: "com.example.a".into(),
            service: "com.example.a.Tools".into(),
            exported: true,
            permission: None,
            meta: meta.clone(),
            authority_package: Some("com.example.a".into()),
            signing_cert_sha256: vec![],
            meta_types: None,
        },
        ServiceManifest {
            package: "com.example.b".into(),
            service: "com.example.b.Tools".into(),
            exported: false,
            permission: Some("com.example.PERM".into()),
            meta,
            authority_package: None,
            signing_cert_sha256: vec!["ab".repeat(32)],
            meta_types: None,
        },
    ]
}

fn handles_bundle() -> Bundle {
    let mut inner = Bundle::new();
    inner.insert(
        "file",
        Value::Fd(FdValue {
            handle: "fd-1".into(),
        }),
    );
    inner.insert("lone", Value::Utf16String(vec![0x61, 0xd800]));
    let mut b = Bundle::new();
    b.insert(
        "confirm",
        Value::PendingIntent(PendingIntentValue {
            handle: "pi-1".into(),
            creator_package: Some("com.example.a".into()),
            creator_uid: Some(10_123),
            immutable: Some(true),
            activity: None,
        }),
    );
    b.insert("nested", Value::Bundle(inner));
    b.insert("n", Value::Long(1 << 40));
    b.insert("i", Value::Int(-3));
    b.insert("d", Value::Double(0.1));
    b
}

impl Device for Scripted {
    fn hello(&self) -> Result<HelloInfo, DeviceError> {
        Ok(HelloInfo {
            probe: "scripted/1".into(),
            identity_name: "a".into(),
            uid: 10_001,
            packages: vec!["com.clawseed.probe".into()],
            cert_sha256: vec!["cd".repeat(32)],
            sdk_int: 34,
            model: "scripted".into(),
            fingerprint: "cetp/scripted".into(),
            now_ms: self.now_ms(),
            ops: vec!["hello".into(), "call".into()],
        })
    }
    fn now_ms(&self) -> i64 {
        self.clock.load(Ordering::SeqCst)
    }
    fn sleep_ms(&self, ms: u64) {
        self.clock.fetch_add(ms as i64, Ordering::SeqCst);
    }
    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
        Ok(manifests())
    }
    fn call(
        &self,
        _authority: &str,
        method: &str,
        _arg: Option<&str>,
        _extras: Option<&Bundle>,
        _timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        match method {
            "handles" => Ok(CallAnswer::Result(Some(handles_bundle()))),
            "null" => Ok(CallAnswer::Result(None)),
            "throws" => Ok(CallAnswer::Threw {
                class: "java.lang.IllegalStateException".into(),
                message: "no \"quotes\" \u{1b}[31m".into(),
            }),
            "hangs" => Err(DeviceError::new(
                ErrorKind::Timeout,
                "no answer within 50 ms",
            )),
            "dies" => Err(DeviceError::new(ErrorKind::ProviderDied, "process gone")),
            _ => Err(DeviceError::new(
                ErrorKind::Other("a_kind_from_a_newer_device".into()),
                "kept as it came",
            )),
        }
    }
    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        if !handle.starts_with("fd-1") {
            return Err(DeviceError::new(
                ErrorKind::UnknownHandle,
                format!("no fd {handle}"),
            ));
        }
        Ok(if max_bytes > 4 {
            FdRead {
                bytes: vec![0, 1, 0xfe, 0xff, b'x'],
                eof: true,
                error: Some("writer failed".into()),
                writable: Some(false),
            }
        } else {
            FdRead {
                bytes: vec![],
                eof: false,
                error: None,
                writable: None,
            }
        })
    }
    fn close_fd(&self, _handle: &str) -> Result<(), DeviceError> {
        Ok(())
    }
    fn resolve(
        &self,
        _handle: &str,
        decision: Decision,
        _ui: Option<&serde_json::Value>,
        _timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError> {
        Ok(ResolveOutcome {
            launched: true,
            decision_applied: decision != Decision::Dismiss,
            result_code: -1,
            launched_package: (decision == Decision::Deny).then(|| "com.example.a".into()),
        })
    }
    fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        if package == "com.example.a" {
            Ok(())
        } else {
            Err(DeviceError::new(
                ErrorKind::UnknownAuthority,
                "no such package",
            ))
        }
    }
    fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
        Ok(self.clock.fetch_add(ms as i64, Ordering::SeqCst) + ms as i64)
    }
}

fn target() -> Target {
    Target {
        label: "scripted".into(),
        a: Box::new(Scripted {
            clock: AtomicI64::new(1_700_000_000_000),
        }),
        b: Some(Box::new(Scripted {
            clock: AtomicI64::new(1_700_000_000_500),
        })),
    }
}

/// The handles in a `handles` answer: (PendingIntent, descriptor).
fn handles_of(answer: &Result<CallAnswer, DeviceError>) -> (String, String) {
    let Ok(CallAnswer::Result(Some(b))) = answer else {
        panic!("no handles in {answer:?}")
    };
    let pi = match b.get("confirm") {
        Some(Value::PendingIntent(p)) => p.handle.clone(),
        other => panic!("{other:?}"),
    };
    let fd = match b.get("nested") {
        Some(Value::Bundle(n)) => match n.get("file") {
            Some(Value::Fd(f)) => f.handle.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    (pi, fd)
}

/// Every op, every answer shape, the first `upto` of them; the answers are
/// returned (journal-renamed handles put back) so that a replay can be
/// compared with the live run. The handles used are the ones the `handles`
/// call answered, as the runner does: after a resume, a live step that uses
/// a replayed handle makes the journal re-obtain it.
fn exchanges(t: &Target, upto: usize) -> Vec<String> {
    let a = t.a.as_ref();
    let b = t.b.as_deref().unwrap();
    let mut extras = Bundle::new();
    extras.insert("deadline_at_ms", Value::Long(1_700_000_100_000));
    extras.insert("s", Value::String("x/y~z".into()));
    let handles = std::cell::RefCell::new((String::new(), String::new()));
    let pi = || handles.borrow().0.clone();
    let fd = || handles.borrow().1.clone();
    let steps: Vec<Box<dyn Fn() -> String + '_>> = vec![
        Box::new(|| format!("{:?}", a.hello())),
        Box::new(|| format!("{:?}", a.now_ms())),
        Box::new(|| format!("{:?}", a.discover())),
        Box::new(|| {
            let answer = a.call("auth.a", "handles", Some("arg"), Some(&extras), 5_000);
            *handles.borrow_mut() = handles_of(&answer);
            format!("{answer:?}")
        }),
        Box::new(|| format!("{:?}", a.call("auth.a", "null", None, None, 5_000))),
        Box::new(|| format!("{:?}", a.call("auth.a", "throws", None, None, 5_000))),
        Box::new(|| format!("{:?}", a.call("auth.a", "hangs", None, None, 50))),
        Box::new(|| format!("{:?}", a.call("auth.a", "dies", None, None, 5_000))),
        Box::new(|| format!("{:?}", a.call("auth.a", "newer", None, None, 5_000))),
        Box::new(|| format!("{:?}", a.read_fd(&fd(), 64))),
        Box::new(|| format!("{:?}", a.read_fd("fd-9", 4))),
        Box::new(|| format!("{:?}", a.advance_clock(60_000))),
        // The run is cut here: what follows is live after the resume.
        Box::new(|| format!("{:?}", a.read_fd(&fd(), 4))),
        Box::new(|| format!("{:?}", a.close_fd(&fd()))),
        Box::new(|| {
            let ui = serde_json::json!({"approve": {"text": "OK"}});
            format!(
                "{:?}",
                a.resolve(&pi(), Decision::Approve, Some(&ui), 9_000)
            )
        }),
        Box::new(|| format!("{:?}", a.resolve(&pi(), Decision::Deny, None, 9_000))),
        Box::new(|| format!("{:?}", a.resolve(&pi(), Decision::Dismiss, None, 9_000))),
        Box::new(|| format!("{:?}", a.restart_provider("com.example.a"))),
        Box::new(|| format!("{:?}", a.restart_provider("com.example.zz"))),
        Box::new(|| format!("{:?}", a.advance_clock(1_000))),
        Box::new(|| format!("{:?}", b.now_ms())),
        Box::new(|| format!("{:?}", b.call("auth.a", "null", None, None, 5_000))),
    ];
    let unrenamed = |s: String| {
        let mut out = s;
        while let Some(at) = out.find("@j") {
            let end = out[at + 2..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(out.len(), |e| at + 2 + e);
            out.replace_range(at..end, "");
        }
        out
    };
    steps.iter().take(upto).map(|s| unrenamed(s())).collect()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/journal")
        .join(name)
}

fn pin() -> Pin {
    let mut fields = BTreeMap::new();
    fields.insert("build".to_string(), serde_json::json!("test"));
    fields.insert("profile".to_string(), serde_json::json!({"tools": ["x"]}));
    Pin { fields }
}

/// Exchanges the scripted run makes before it is cut short.
const CUT: usize = 12;

/// The scripted run: a run cut short after [`CUT`] exchanges, then resumed
/// to its end; returns the journal's bytes.
fn scripted_journal(dir: &Path) -> Vec<u8> {
    let path = dir.join(journal::FILE_NAME);
    let _ = std::fs::remove_file(&path);
    let config = serde_json::json!({"seed": 7, "target": "scripted", "only": ["A-*"]});
    {
        let j = Journal::create(&path, &config, None).unwrap();
        j.record_pin(&pin()).unwrap();
        exchanges(&j.wrap(target()), CUT);
    }
    resume_to_the_end(&path);
    std::fs::read(&path).unwrap()
}

/// Resumes the scripted run journaled in `path` and runs it to its end:
/// the answers replayed are the ones a device gives live.
fn resume_to_the_end(path: &Path) {
    let rec = journal::read(path).unwrap();
    let j = Journal::resume(path, &rec, None, 1_700_000_200_000).unwrap();
    j.record_pin(&pin()).unwrap();
    let all = exchanges(&j.wrap(target()), usize::MAX);
    let live = exchanges(&target(), CUT);
    assert_eq!(
        live[..],
        all[..CUT],
        "the replayed answers are the live ones"
    );
    assert_eq!(j.diverged(), None);
    let stats = j.stats();
    assert_eq!(
        (stats.replayed, stats.revived),
        (CUT as u64 - 1, 2),
        "{stats:?}"
    );
    j.record_end(1).unwrap();
}

/// `"us":N` (how long an exchange took) is the one field that varies.
fn without_timings(bytes: &[u8]) -> String {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(r#","us":"#) {
        let (head, tail) = rest.split_at(at + r#","us":"#.len());
        out.push_str(head);
        out.push('0');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// The bytes a scripted run writes are the fixture's, which the code before
/// typed journal records wrote. `CETP_WRITE_JOURNAL_FIXTURE=PATH` writes
/// them to PATH instead (to make a fixture of a new format, never to make
/// this test pass).
#[test]
fn a_scripted_run_writes_the_bytes_the_old_code_wrote() {
    let dir = std::env::temp_dir().join(format!("cetp-journal-fx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let written = without_timings(&scripted_journal(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    if let Ok(out) = std::env::var("CETP_WRITE_JOURNAL_FIXTURE") {
        std::fs::write(out, written).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(fixture("scripted.ndjson")).unwrap();
    for (n, (w, e)) in written.lines().zip(expected.lines()).enumerate() {
        assert_eq!(w, e, "line {} differs", n + 1);
    }
    assert_eq!(written.lines().count(), expected.lines().count());
}

/// A run the old code journaled and that stopped is resumed by this code:
/// it replays the old records and appends what the old code appended.
#[test]
fn a_run_journaled_by_the_old_code_resumes() {
    let old = std::fs::read_to_string(fixture("scripted.ndjson")).unwrap();
    let stopped: String = old
        .lines()
        .take_while(|l| !l.contains(r#""j":"resumed""#))
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = std::env::temp_dir().join(format!("cetp-journal-old-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(journal::FILE_NAME);
    std::fs::write(&path, &stopped).unwrap();
    resume_to_the_end(&path);
    let written = without_timings(&std::fs::read(&path).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(written, old);
}

/// Every record of the old code's journals is written back, by the typed
/// records, as the very bytes it was.
#[test]
fn every_old_record_is_written_back_as_it_was() {
    for name in [
        "scripted.ndjson",
        "sim-run.ndjson",
        "tcp-run-resumed.ndjson",
    ] {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        for (n, line) in text.lines().enumerate() {
            let json = cetp_wire::json::parse(line).unwrap();
            let record = Record::from_json(&json).unwrap_or_else(|e| panic!("{name}:{n}: {e}"));
            assert_eq!(
                String::from_utf8(record.to_line()).unwrap(),
                line,
                "{name} line {}",
                n + 1
            );
        }
    }
}

/// Journals of real runs by the old code read back, and resume: what each
/// holds, counted independently of the reader.
#[test]
fn journals_of_real_runs_by_the_old_code_read_back() {
    for (name, resumes, finished) in [
        ("sim-run.ndjson", 0, Some(0)),
        ("tcp-run-resumed.ndjson", 1, Some(1)),
        ("scripted.ndjson", 1, Some(1)),
    ] {
        let path = fixture(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let count = |tag: &str| text.matches(&format!(r#""j":"{tag}""#)).count();
        let rec = journal::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rec.exchanges.len(), count("send"), "{name}");
        let answered = rec.exchanges.iter().filter(|e| e.ans.is_some()).count();
        assert_eq!(answered, count("recv"), "{name}");
        assert_eq!(rec.now.len(), count("now"), "{name}");
        assert_eq!(rec.resumes, resumes, "{name}");
        assert_eq!(rec.finished, finished, "{name}");
        assert!(rec.pin.is_some(), "{name}");
        assert!(!rec.torn_tail, "{name}");
        assert!(rec.config.get("seed").is_some(), "{name}");
    }
}
