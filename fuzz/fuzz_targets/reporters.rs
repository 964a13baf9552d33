//! Every reporter of `cetp-report` on one event stream whose
//! Provider-originated strings (device identity, package, authority,
//! requests and answers, tool names, findings, reasons, pin fields, the
//! claim) come from the input, with the escaping invariant of each medium
//! asserted here:
//!
//! - terminal: no control character but the reporter's own newlines, no
//!   bidi control, and no line a Provider string added;
//! - report.json and report.sarif: the document parses back to itself, the
//!   Provider's text is kept exactly in report.json, and SARIF messages
//!   carry no control or bidi character;
//! - events.ndjson: each event is one line without control or bidi
//!   characters that parses back to the event;
//! - junit.xml: well-formed XML 1.0 (quick-xml, plus the Char production
//!   quick-xml does not check), with the elements the run calls for;
//! - summary.md: no `<`, every `&` an entity, and every character Markdown
//!   gives a meaning (table pipes, links, code, emphasis, newlines) where the
//!   reporter put it;
//! - index.html: every tag and attribute where the reporter put it, every
//!   `&` an entity, no control or bidi character.
//!
//! "Where the reporter put it" is checked against the same run with each
//! Provider string replaced by as many `x`: escaping holds exactly when the
//! markup does not depend on what the Provider wrote.
//!
//! Input: strings separated by 0xFF (never in UTF-8). With at least one
//! separator, the first part is the run's shape (one byte per case: its
//! verdict and whether the baseline knows it) and the others are the
//! Provider strings, used in turn. Bytes 0xF8..=0xFE stand for the hostile
//! characters a byte mutation could hardly spell (see `TOKENS`); other bytes
//! that are not UTF-8 become U+FFFD.
#![no_main]

use cetp_vectors::device::HelloInfo;
use cetp_vectors::event::{
    CapabilityClaim, Claim, Event, Reporter, Summary, Unjudged, Verdict,
};
use cetp_report::html::HtmlReport;
use cetp_report::json::JsonReport;
use cetp_report::junit::JunitReport;
use cetp_report::sarif::{RuleInfo, SarifReport};
use cetp_report::summary_md::SummaryMd;
use cetp_report::terminal::Terminal;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// What the bytes 0xF8..=0xFE stand for: an ANSI sequence, C1 CSI and NEL,
/// bidi overrides and isolates, and the two characters XML 1.0 excludes
/// above the C0 range.
const TOKENS: [&str; 7] = [
    "\u{1b}[2J\u{1b}]0;t\u{7}",
    "\u{9b}31m",
    "\u{202e}",
    "\u{2067}",
    "\u{fffe}\u{ffff}",
    "\u{85}",
    "\u{61c}\u{200f}",
];

fn decode(mut bytes: &[u8]) -> String {
    let mut out = String::new();
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).expect("valid up to here"));
                let bad = e.error_len().unwrap_or(rest.len());
                match rest[0] {
                    b @ 0xF8..=0xFE if bad == 1 => out.push_str(TOKENS[usize::from(b - 0xF8)]),
                    _ => out.push('\u{fffd}'),
                }
                bytes = &rest[bad..];
            }
        }
    }
}

const VERDICTS: [Verdict; 6] = [
    Verdict::Pass,
    Verdict::Fail,
    Verdict::Warn,
    Verdict::NotApplicable,
    Verdict::InfraError,
    Verdict::Flaky,
];
/// At most this many cases: with the two checks, room for every verdict,
/// and short enough that the two renderings of seven media stay fast.
const CASES: [&str; 6] = [
    "IDEM-001",
    "NEG-003",
    "EXE-002",
    "CONF-004",
    "ASYNC-006",
    "LARGE-001",
];

/// The Provider's strings, handed out in turn.
struct Strings<'a> {
    all: &'a [String],
    next: usize,
}

impl Strings<'_> {
    fn s(&mut self) -> String {
        if self.all.is_empty() {
            return String::new();
        }
        let s = self.all[self.next % self.all.len()].clone();
        self.next += 1;
        s
    }
}

/// A run of `shape.len()` cases (one byte each) with Provider text in every
/// field a Provider can reach.
fn run(shape: &[u8], strings: &[String]) -> Vec<Event> {
    let mut p = Strings {
        all: strings,
        next: 0,
    };
    let shape: &[u8] = if shape.is_empty() {
        &[1]
    } else {
        &shape[..shape.len().min(CASES.len())]
    };
    let mut summary = Summary::default();
    let mut ev = vec![
        Event::RunStarted {
            run_id: "run-1".into(),
            harness: "cetp fuzz".into(),
            target: "sim:mutant=no_dedupe".into(),
            seed: 7,
            config_hash: "0".repeat(64),
            started_at_ms: 1_800_000_000_000,
            cases: shape.len(),
            only: vec![],
            skip: vec![],
            attempts: 1,
            // A profile path is the user's, not the Provider's, but it is
            // printed in every reproduce line: hostile here too.
            rerun: vec!["--profile".into(), p.s()],
        },
        Event::TargetIdentified {
            hello: Some(HelloInfo {
                probe: p.s(),
                identity_name: p.s(),
                uid: 10234,
                packages: vec![p.s()],
                cert_sha256: vec![p.s()],
                sdk_int: 34,
                model: p.s(),
                fingerprint: p.s(),
                now_ms: 0,
                ops: vec![p.s()],
            }),
            package: Some(p.s()),
            authority: Some(p.s()),
            manifest: p.s(),
            declared_versions: vec![1, 2],
        },
    ];
    for (i, &b) in shape.iter().enumerate() {
        let case_id = CASES[i].to_string();
        let verdict = VERDICTS[usize::from(b) % VERDICTS.len()];
        let known = (b / 6) % 2 == 1;
        summary.add(verdict);
        let (key, value) = (p.s(), p.s());
        ev.extend([
            Event::CaseStarted {
                case_id: case_id.clone(),
                title: format!("title of {case_id}"),
                // A device label reaches every report of a run of several.
                device: (b % 2 == 1).then(|| p.s()),
            },
            Event::StepSent {
                case_id: case_id.clone(),
                step: 1,
                identity: "a".into(),
                op: "execute_tool".into(),
                request: json!({"method": "execute_tool", "tool_name": p.s(), "args_text": p.s()}),
            },
            Event::Dispatched {
                case_id: case_id.clone(),
                step: 1,
                identity: "a".into(),
                tool: p.s(),
                request_id: p.s(),
                args_sha256: "0".repeat(64),
            },
            Event::StepAnswered {
                case_id: case_id.clone(),
                step: 1,
                // A Provider chooses Bundle keys as well as values.
                answer: json!({"status": "error", "error_message": p.s(), key.clone(): value, "_types": {key: "string"}}),
                elapsed_us: 120,
            },
            Event::CheckFinding {
                case_id: case_id.clone(),
                step: 1,
                check: "CHK-ERROR-MESSAGE".into(),
                requirements: vec!["CETP2-5-22".into()],
                level: "MUST".into(),
                message: p.s(),
            },
            Event::CaseFinished {
                case_id: case_id.clone(),
                title: format!("title of {case_id}"),
                requirements: vec!["CETP2-6-01".into(), "CETP2-6-04".into()],
                cited: vec!["CETP2-6-04".into()],
                verdict,
                reason: p.s(),
                baseline: known.then(|| p.s()),
                duration_ms: 5,
                // A setup-caused N/A names what would judge it: hostile
                // text too, through every reporter's fix line.
                unjudged: (verdict == Verdict::NotApplicable).then(|| p.s()),
            },
        ]);
    }
    for (check, b) in [
        ("CHK-ENVELOPE", shape[0] / 2),
        ("CHK-ERROR-MESSAGE", shape[shape.len() - 1] / 3),
    ] {
        let verdict = VERDICTS[usize::from(b) % VERDICTS.len()];
        summary.add(verdict);
        ev.push(Event::CheckVerdict {
            check: check.into(),
            title: format!("title of {check}"),
            requirements: vec!["CETP2-5-01".into(), "CETP2-5-22".into()],
            cited: vec!["CETP2-5-22".into()],
            verdict,
            reason: p.s(),
            answers_checked: 3,
        });
    }
    ev.push(Event::BaselineStale {
        id: p.s(),
        reason: p.s(),
    });
    // A lost device's reason quotes what its transport said.
    ev.push(Event::DeviceLost {
        device: p.s(),
        reason: p.s(),
        handed_back: vec![p.s()],
    });
    let (mkey, mvalue) = (p.s(), p.s());
    ev.push(Event::RunPinned {
        pin_hash: "a".repeat(64),
        fields: BTreeMap::from([
            ("package".to_string(), json!(p.s())),
            ("revision".to_string(), json!(p.s())),
            ("device".to_string(), json!(p.s())),
            ("manifest".to_string(), json!({ mkey: mvalue })),
        ]),
    });
    ev.push(Event::RunFinished {
        summary,
        claim: Claim {
            v2_declared: true,
            capabilities: vec![CapabilityClaim {
                capability: p.s(),
                declared: true,
                passed: false,
            }],
            unjudged: vec![Unjudged {
                needs: p.s(),
                cases: vec!["ASYNC-006".into()],
                requirements: vec![],
            }],
            statement: p.s(),
            fixes: vec![p.s(), p.s()],
            ..Claim::default()
        },
        exit_code: 1,
        duration_ms: 9,
    });
    ev
}

/// A terminal that lets the target read what was printed.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Write for Screen {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("one thread").write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Outputs {
    terminal: Vec<String>,
    json: Json,
    ndjson: Vec<String>,
    junit: String,
    sarif: Json,
    markdown: String,
    html: String,
}

fn render(events: &[Event]) -> Outputs {
    let feed = |r: &mut dyn Reporter| {
        for e in events {
            r.on_event(e);
        }
    };
    // Quiet and verbose-with-trace: each prints Provider text the other does not.
    let terminal = [(false, false), (true, true)]
        .into_iter()
        .map(|(verbose, trace)| {
            let screen = Screen::default();
            let mut t = Terminal::new(screen.clone(), verbose, trace);
            feed(&mut t);
            t.finish().expect("writes to memory");
            let bytes = screen.0.lock().expect("one thread").clone();
            String::from_utf8(bytes).expect("the terminal reporter writes UTF-8")
        })
        .collect();
    let mut json = JsonReport::new(None);
    feed(&mut json);
    let mut junit = JunitReport::new(std::path::PathBuf::from("/nonexistent/junit.xml"));
    feed(&mut junit);
    let catalog = BTreeMap::from([(
        "CETP2-6-04".to_string(),
        RuleInfo {
            section: "6".into(),
            level: "MUST".into(),
            summary: "A repeated request gets the same terminal result.".into(),
        },
    )]);
    let mut sarif = SarifReport::new(None, catalog);
    feed(&mut sarif);
    let mut md = SummaryMd::new(None);
    feed(&mut md);
    let mut html = HtmlReport::new(None);
    feed(&mut html);
    Outputs {
        terminal,
        json: json.document(),
        // The lines NdjsonReport writes and flushes, one per event.
        ndjson: events.iter().map(cetp_report::ndjson::line).collect(),
        junit: junit.render(),
        sarif: sarif.document(),
        markdown: md.render(),
        html: html.render(),
    }
}

/// Bidi controls: the set `escape::terminal` neutralizes.
fn bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// No control character but newlines, no bidi control.
fn clean(medium: &str, text: &str) {
    if let Some(c) = text
        .chars()
        .find(|&c| (c.is_control() && c != '\n') || bidi(c))
    {
        panic!("{medium}: raw {c:?} in output:\n{text}");
    }
}

fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Element names in document order; panics unless `xml` is well formed.
fn xml_elements(xml: &str) -> Vec<String> {
    use quick_xml::events::Event as X;
    if let Some(c) = xml.chars().find(|&c| !xml_char(c)) {
        panic!("junit.xml: {c:?} is not an XML 1.0 character:\n{xml}");
    }
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut names, mut open, mut roots) = (Vec::new(), Vec::new(), 0);
    loop {
        let event = reader
            .read_event()
            .unwrap_or_else(|e| panic!("junit.xml: {e}:\n{xml}"));
        let start = |e: &quick_xml::events::BytesStart<'_>, names: &mut Vec<String>| {
            for a in e.attributes() {
                let a = a.unwrap_or_else(|e| panic!("junit.xml: attribute: {e}:\n{xml}"));
                a.unescape_value()
                    .unwrap_or_else(|e| panic!("junit.xml: attribute value: {e}:\n{xml}"));
            }
            let name = String::from_utf8(e.name().as_ref().to_vec()).expect("UTF-8 input");
            names.push(name.clone());
            name
        };
        match event {
            X::Start(e) => {
                roots += usize::from(open.is_empty());
                let name = start(&e, &mut names);
                open.push(name);
            }
            X::Empty(e) => {
                roots += usize::from(open.is_empty());
                start(&e, &mut names);
            }
            X::End(_) => {
                open.pop();
            }
            X::GeneralRef(r) => {
                let name = std::str::from_utf8(&r).expect("UTF-8 input");
                let ok = match name.strip_prefix('#') {
                    Some(n) => {
                        let n = match n.strip_prefix('x') {
                            Some(h) => u32::from_str_radix(h, 16).ok(),
                            None => n.parse().ok(),
                        };
                        n.and_then(char::from_u32).is_some_and(xml_char)
                    }
                    None => matches!(name, "lt" | "gt" | "amp" | "quot" | "apos"),
                };
                assert!(ok, "junit.xml: undefined entity &{name};:\n{xml}");
            }
            X::Text(t) => {
                assert!(
                    !open.is_empty() || t.iter().all(u8::is_ascii_whitespace),
                    "junit.xml: text outside the root:\n{xml}"
                );
            }
            X::Eof => break,
            _ => {}
        }
    }
    assert!(
        open.is_empty() && roots == 1,
        "junit.xml: {roots} roots, {open:?} left open:\n{xml}"
    );
    names
}

/// The tags of an HTML page, in order.
fn tags(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        let end = rest[i..].find('>').map_or(rest.len(), |j| i + j + 1);
        out.push(&rest[i..end]);
        rest = &rest[end..];
    }
    out
}

/// Each `&` starts one of these entities.
fn entities_only(medium: &str, text: &str, allowed: &[&str]) {
    for (i, _) in text.match_indices('&') {
        if !allowed.iter().any(|e| text[i..].starts_with(e)) {
            panic!("{medium}: raw & at byte {i}:\n{text}");
        }
    }
}

/// The characters that give Markdown its structure, in order, without the
/// escaped ones (`\x`) and entities.
fn markdown_skeleton(md: &str) -> String {
    let mut out = String::new();
    let mut chars = md.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '&' => {
                let len = ["&lt;", "&gt;", "&amp;"]
                    .iter()
                    .find(|e| md[i..].starts_with(**e))
                    .map_or(1, |e| e.len());
                for _ in 1..len {
                    chars.next();
                }
            }
            '`' | '*' | '_' | '[' | ']' | '|' | '!' | '~' | '<' | '>' | '\n' => out.push(c),
            _ => {}
        }
    }
    out
}

fn judge(events: &[Event], hostile: &Outputs, benign: &Outputs) {
    for (t, b) in hostile.terminal.iter().zip(&benign.terminal) {
        clean("terminal", t);
        assert_eq!(
            t.lines().count(),
            b.lines().count(),
            "terminal: a Provider string added a line:\n{t}"
        );
    }

    let text = serde_json::to_string_pretty(&hostile.json).expect("serializes");
    let back: Json = serde_json::from_str(&text).expect("report.json parses back");
    assert_eq!(back, hostile.json);
    // report.json is data: the Provider's text is kept exactly, escaped by
    // JSON alone.
    let mut reasons = events.iter().filter_map(|e| match e {
        Event::CaseFinished { reason, .. } => Some(reason),
        _ => None,
    });
    for c in hostile.json["cases"].as_array().expect("cases") {
        assert_eq!(c["reason"].as_str(), reasons.next().map(String::as_str));
    }

    assert_eq!(hostile.ndjson.len(), events.len());
    for (line, e) in hostile.ndjson.iter().zip(events) {
        clean("events.ndjson", line);
        assert!(!line.contains('\n'));
        let v: Json = serde_json::from_str(line).expect("an NDJSON line parses");
        assert_eq!(
            v,
            serde_json::to_value(e).expect("events serialize"),
            "events.ndjson: {line}"
        );
    }

    let elements = xml_elements(&hostile.junit);
    assert_eq!(
        elements,
        xml_elements(&benign.junit),
        "junit.xml: elements depend on Provider text:\n{}",
        hostile.junit
    );

    let text = serde_json::to_string_pretty(&hostile.sarif).expect("serializes");
    assert_eq!(
        serde_json::from_str::<Json>(&text).expect("report.sarif parses back"),
        hostile.sarif
    );
    let results = hostile.sarif["runs"][0]["results"]
        .as_array()
        .expect("results");
    assert_eq!(
        results.len(),
        benign.sarif["runs"][0]["results"]
            .as_array()
            .expect("results")
            .len()
    );
    for r in results {
        clean(
            "report.sarif message",
            r["message"]["text"].as_str().expect("message text"),
        );
    }

    let md = &hostile.markdown;
    clean("summary.md", md);
    assert!(!md.contains('<'), "summary.md: raw <:\n{md}");
    entities_only("summary.md", md, &["&lt;", "&gt;", "&amp;"]);
    assert_eq!(
        markdown_skeleton(md),
        markdown_skeleton(&benign.markdown),
        "summary.md: Markdown syntax from Provider text:\n{md}"
    );

    let page = &hostile.html;
    clean("index.html", page);
    entities_only(
        "index.html",
        page,
        &["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"],
    );
    assert_eq!(
        tags(page),
        tags(&benign.html),
        "index.html: markup from Provider text:\n{page}"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut parts: Vec<&[u8]> = data.split(|&b| b == 0xFF).collect();
    let shape: &[u8] = if parts.len() > 1 {
        parts.remove(0)
    } else {
        &[]
    };
    let strings: Vec<String> = parts.iter().map(|p| decode(p)).collect();
    let benign: Vec<String> = strings
        .iter()
        .map(|s| "x".repeat(s.chars().count()))
        .collect();
    let events = run(shape, &strings);
    let hostile_out = render(&events);
    let benign_out = render(&run(shape, &benign));
    judge(&events, &hostile_out, &benign_out);
});
