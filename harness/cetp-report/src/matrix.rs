//! The report of a matrix run (`cetp run --devices matrix`): every case
//! on every device, as a case × device table (terminal, `summary.md`,
//! `index.html`, `report.json` of schema `cetp-matrix/1`), a JUnit file
//! with one test suite per device, and one SARIF log whose results each
//! name their device (`properties.device`). Each device's own report set
//! is written by the standard reporters; this module only joins them.
//!
//! Device labels come from the user's `--target`, case and check titles
//! from the vectors, verdicts are ours; all are still escaped for their
//! medium, since a label may be any text.

use crate::escape;
use cetp_vectors::event::{Summary, Verdict};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;

/// Largest per-device report file joined (JUnit, SARIF).
const MAX_FILE_BYTES: u64 = 64 << 20;

/// One device of the matrix.
#[derive(Clone, Debug)]
pub struct Column {
    /// The device as the user named it (`--target`).
    pub label: String,
    /// The §9 claim is established on this device.
    pub established: bool,
    /// The §9 claim's statement for this device.
    pub statement: String,
    /// Its run's exit code.
    pub exit: i32,
    /// Its run's counts by verdict.
    pub summary: Summary,
    /// Its report set, relative to the matrix's directory.
    pub dir: Option<String>,
    /// Its run's pin hash (the fields are in its own report.json).
    pub pin: String,
}

/// One case or check: its verdict on each device (`None`: not run there).
#[derive(Clone, Debug)]
pub struct Row {
    /// The case or check id.
    pub id: String,
    /// Its title, from the first device that ran it.
    pub title: String,
    /// One per column, in column order.
    pub verdicts: Vec<Option<Verdict>>,
}

impl Row {
    /// Whether the devices disagree (the rows a reader looks at first).
    pub fn differs(&self) -> bool {
        self.verdicts.windows(2).any(|w| w[0] != w[1])
    }
}

/// A matrix run joined: the devices, and every case and check across them.
#[derive(Clone, Debug)]
pub struct Matrix {
    /// The devices, in the order they were given.
    pub columns: Vec<Column>,
    /// The cases, in the order they first appear across the devices.
    pub cases: Vec<Row>,
    /// The checks, in the order they first appear across the devices.
    pub checks: Vec<Row>,
}

/// (id, title, verdict) of every case or check of one device's run.
pub type Verdicts = Vec<(String, String, Verdict)>;

fn rows(per_device: &[Verdicts]) -> Vec<Row> {
    let n = per_device.len();
    let mut order: Vec<String> = Vec::new();
    let mut by_id: BTreeMap<String, Row> = BTreeMap::new();
    for (k, list) in per_device.iter().enumerate() {
        for (id, title, v) in list {
            let row = by_id.entry(id.clone()).or_insert_with(|| {
                order.push(id.clone());
                Row {
                    id: id.clone(),
                    title: title.clone(),
                    verdicts: vec![None; n],
                }
            });
            row.verdicts[k] = Some(*v);
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect()
}

fn cell(v: Option<Verdict>) -> &'static str {
    v.map_or("-", Verdict::as_str)
}

impl Matrix {
    /// The matrix of `columns`, given each device's case and check verdicts
    /// in column order.
    pub fn new(columns: Vec<Column>, cases: Vec<Verdicts>, checks: Vec<Verdicts>) -> Matrix {
        Matrix {
            columns,
            cases: rows(&cases),
            checks: rows(&checks),
        }
    }

    /// The rows where the devices disagree, cases then checks.
    pub fn differing(&self) -> impl Iterator<Item = &Row> {
        self.cases
            .iter()
            .chain(&self.checks)
            .filter(|r| r.differs())
    }

    /// The terminal view: each device's claim, then the rows where the
    /// devices disagree (all rows agree: one line says so), or with `all`
    /// (`--verbose`) every row.
    pub fn terminal(&self, all: bool) -> String {
        let mut s = String::from("matrix run: every case on every device\n");
        for (k, c) in self.columns.iter().enumerate() {
            s += &format!(
                "  [{}] {}: {} pass, {} fail, {} warn, {} n/a, {} infra, {} flaky; {}\n",
                k + 1,
                escape::terminal(&c.label, 120),
                c.summary.pass,
                c.summary.fail,
                c.summary.warn,
                c.summary.not_applicable,
                c.summary.infra_error,
                c.summary.flaky,
                escape::terminal(&c.statement, 300),
            );
        }
        let differing: Vec<&Row> = if all {
            self.cases.iter().chain(&self.checks).collect()
        } else {
            self.differing().collect()
        };
        if all {
            s += "every case and check on every device:\n";
        } else if differing.is_empty() {
            s += &format!(
                "every device gave every case and check the same verdict ({} cases, {} checks)\n",
                self.cases.len(),
                self.checks.len()
            );
            return s;
        } else {
            s += &format!(
                "{} case(s)/check(s) differ between devices:\n",
                differing.len()
            );
        }
        for r in differing {
            let cells: Vec<String> = r
                .verdicts
                .iter()
                .enumerate()
                .map(|(k, v)| format!("[{}] {}", k + 1, cell(*v)))
                .collect();
            s += &format!(
                "  {:<14} {}\n",
                escape::terminal(&r.id, 60),
                cells.join("  ")
            );
        }
        s
    }

    /// `summary.md`: the devices and their claims, then the full table.
    pub fn markdown(&self) -> String {
        let md = |t: &str| escape::markdown(t, 200);
        let mut s = String::from("# cetp matrix run\n\n| device | claim | pass | fail | warn | n/a | infra | flaky |\n|---|---|---|---|---|---|---|---|\n");
        for c in &self.columns {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                md(&c.label),
                if c.established {
                    "established"
                } else {
                    "not established"
                },
                c.summary.pass,
                c.summary.fail,
                c.summary.warn,
                c.summary.not_applicable,
                c.summary.infra_error,
                c.summary.flaky
            );
        }
        for (title, rows) in [("Cases", &self.cases), ("Checks", &self.checks)] {
            s += &format!("\n## {title}\n\n| id |");
            for c in &self.columns {
                s += &format!(" {} |", md(&c.label));
            }
            s += "\n|---|";
            s += &"---|".repeat(self.columns.len());
            s += "\n";
            for r in rows {
                s += &format!("| {} |", md(&r.id));
                for v in &r.verdicts {
                    let mark = if r.differs() { "**" } else { "" };
                    s += &format!(" {mark}{}{mark} |", cell(*v));
                }
                s += "\n";
            }
        }
        s
    }

    /// `index.html`: self-contained, script-free; differing rows marked.
    pub fn html(&self) -> String {
        let h = |t: &str| crate::html::html(t, 300);
        let mut s = String::from("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>cetp matrix run</title><style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:2px 6px}table{border-collapse:collapse}.PASS{background:#cfc}.FAIL{background:#fcc}.WARN{background:#ffc}.INFRA_ERROR{background:#ddd}.FLAKY{background:#fdb}tr.differs td:first-child{font-weight:bold}</style></head><body>\n<h1>cetp matrix run</h1>\n<table><tr><th>device</th><th>claim</th><th>report</th></tr>\n");
        for c in &self.columns {
            let link = c.dir.as_ref().map_or(String::new(), |d| {
                format!("<a href=\"{}/index.html\">{}</a>", h(d), h(d))
            });
            s += &format!(
                "<tr><td>{}</td><td>{}</td><td>{link}</td></tr>\n",
                h(&c.label),
                h(&c.statement)
            );
        }
        s += "</table>\n";
        for (title, rows) in [("Cases", &self.cases), ("Checks", &self.checks)] {
            s += &format!("<h2>{title}</h2>\n<table><tr><th>id</th><th>title</th>");
            for c in &self.columns {
                s += &format!("<th>{}</th>", h(&c.label));
            }
            s += "</tr>\n";
            for r in rows {
                let class = if r.differs() {
                    " class=\"differs\""
                } else {
                    ""
                };
                s += &format!("<tr{class}><td>{}</td><td>{}</td>", h(&r.id), h(&r.title));
                for v in &r.verdicts {
                    s += &format!("<td class=\"{0}\">{0}</td>", cell(*v));
                }
                s += "</tr>\n";
            }
            s += "</table>\n";
        }
        s + "</body></html>\n"
    }

    /// `report.json` of a matrix run (`cetp-matrix/1`).
    pub fn json(&self) -> Json {
        let rows = |rows: &[Row]| -> Json {
            rows.iter()
                .map(|r| {
                    let by: serde_json::Map<String, Json> = self
                        .columns
                        .iter()
                        .zip(&r.verdicts)
                        .map(|(c, v)| (c.label.clone(), json!(v.map(Verdict::as_str))))
                        .collect();
                    json!({"id": r.id, "title": r.title, "verdicts": by, "differs": r.differs()})
                })
                .collect()
        };
        json!({
            "schema": "cetp-matrix/1",
            "devices": self.columns.iter().map(|c| json!({
                "label": c.label,
                "claim_established": c.established,
                "claim": c.statement,
                "exit_code": c.exit,
                "summary": c.summary,
                "report_dir": c.dir,
                "pin_hash": c.pin,
            })).collect::<Vec<_>>(),
            "cases": rows(&self.cases),
            "checks": rows(&self.checks),
        })
    }
}

/// Reads a per-device report file, refusing one larger than any report
/// a run writes.
pub fn read_bounded(path: &std::path::Path) -> std::io::Result<String> {
    let len = std::fs::metadata(path)?.len();
    if len > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "{len} bytes, more than {MAX_FILE_BYTES}"
        )));
    }
    std::fs::read_to_string(path)
}

/// The value of attribute `name` in the first `<tag …>` of `xml`.
fn attribute(xml: &str, tag: &str, name: &str) -> Option<u64> {
    let open = xml.find(&format!("<{tag} "))?;
    let end = open + xml[open..].find('>')?;
    let head = &xml[open..end];
    let at = head.find(&format!(" {name}=\""))? + name.len() + 3;
    head[at..].split('"').next()?.parse().ok()
}

/// One JUnit file from the devices' own (as `quick-junit` writes them: a
/// `<testsuites>` holding one `<testsuite>`): each device's test suite,
/// its name prefixed with the device, and the totals summed.
pub fn junit_per_device(files: &[(String, String)]) -> String {
    let mut suites = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for (device, xml) in files {
        tests += attribute(xml, "testsuites", "tests").unwrap_or(0);
        failures += attribute(xml, "testsuites", "failures").unwrap_or(0);
        errors += attribute(xml, "testsuites", "errors").unwrap_or(0);
        let (Some(from), Some(to)) = (xml.find("<testsuite "), xml.rfind("</testsuite>")) else {
            continue;
        };
        let body = &xml[from..to + "</testsuite>".len()];
        let renamed = body.replacen(
            "<testsuite name=\"",
            &format!("<testsuite name=\"{}: ", escape::xml(device)),
            1,
        );
        suites += &renamed;
        suites.push('\n');
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"cetp\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n{suites}</testsuites>\n"
    )
}

/// One SARIF log from the devices' own: the first device's run (its tool
/// and rules), with every device's results, each naming its device in
/// `properties.device`, and the run's `properties.target` listing them.
pub fn sarif_per_device(files: &[(String, String)]) -> Result<Json, String> {
    let mut merged: Option<Json> = None;
    let mut results: Vec<Json> = Vec::new();
    for (device, text) in files {
        let log: Json =
            serde_json::from_str(text).map_err(|e| format!("{device}: report.sarif: {e}"))?;
        let run = log
            .get("runs")
            .and_then(|r| r.get(0))
            .ok_or_else(|| format!("{device}: report.sarif has no run"))?;
        for r in run
            .get("results")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let mut r = r.clone();
            if let Some(obj) = r.as_object_mut() {
                let props = obj.entry("properties").or_insert_with(|| json!({}));
                if let Some(p) = props.as_object_mut() {
                    p.insert("device".into(), json!(device));
                }
            }
            results.push(r);
        }
        if merged.is_none() {
            merged = Some(log);
        }
    }
    let mut log = merged.ok_or("no device wrote a SARIF log")?;
    let devices: Vec<&String> = files.iter().map(|(d, _)| d).collect();
    if let Some(run) = log.get_mut("runs").and_then(|r| r.get_mut(0)) {
        run["results"] = json!(results);
        run["properties"]["target"] = json!(devices);
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(label: &str) -> Column {
        Column {
            label: label.into(),
            established: true,
            statement: "May claim".into(),
            exit: 0,
            summary: Summary::default(),
            dir: None,
            pin: String::new(),
        }
    }

    #[test]
    fn rows_keep_each_devices_verdict_and_mark_disagreement() {
        let a = vec![
            ("IDEM-001".to_string(), "t".to_string(), Verdict::Pass),
            ("CONF-001".to_string(), "t".to_string(), Verdict::Pass),
        ];
        let b = vec![
            ("IDEM-001".to_string(), "t".to_string(), Verdict::Fail),
            ("CONF-001".to_string(), "t".to_string(), Verdict::Pass),
        ];
        let m = Matrix::new(vec![col("sim"), col("<b>x</b>")], vec![a, b], vec![]);
        assert_eq!(
            m.cases[0].verdicts,
            [Some(Verdict::Pass), Some(Verdict::Fail)]
        );
        let diff: Vec<&str> = m.differing().map(|r| r.id.as_str()).collect();
        assert_eq!(diff, ["IDEM-001"]);
        assert!(m.terminal(false).contains("IDEM-001"));
        assert!(!m.terminal(false).contains("CONF-001"));
        assert!(m.terminal(true).contains("CONF-001"));
        assert!(m.markdown().contains("**FAIL**"));
        assert!(!m.html().contains("<b>x</b>"), "labels are escaped");
        assert_eq!(m.json()["cases"][0]["verdicts"]["<b>x</b>"], "FAIL");
    }

    #[test]
    fn junit_suites_are_named_by_device_and_totals_summed() {
        let one = "<?xml version=\"1.0\"?>\n<testsuites name=\"cetp\" tests=\"2\" failures=\"1\" errors=\"0\">\n<testsuite name=\"sim\" tests=\"2\"><testcase name=\"a\"/></testsuite>\n</testsuites>\n";
        let out = junit_per_device(&[("d&1".into(), one.into()), ("d2".into(), one.into())]);
        assert!(out.contains("tests=\"4\" failures=\"2\""));
        assert!(out.contains("<testsuite name=\"d&amp;1: sim\""));
        assert_eq!(out.matches("<testsuite ").count(), 2);
    }

    #[test]
    fn sarif_results_name_their_device() {
        let log = json!({"version": "2.1.0", "runs": [{"tool": {}, "results": [{"ruleId": "X"}]}]})
            .to_string();
        let m = sarif_per_device(&[("a".into(), log.clone()), ("b".into(), log)]).unwrap();
        let r = &m["runs"][0]["results"];
        assert_eq!(r.as_array().unwrap().len(), 2);
        assert_eq!(r[1]["properties"]["device"], "b");
        assert!(sarif_per_device(&[("a".into(), "{".into())]).is_err());
    }
}
