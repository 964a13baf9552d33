//! Source locations and fingerprints for the requirement catalog, so that no
//! entry is ever hashed by hand.
//!
//! ```text
//! catalog_locate [--line N] <text>   where <text> occurs in the spec: line, start, end, fingerprint
//! catalog_locate --show <ID>...      the spec clause behind each id
//! catalog_locate --show-all          every entry with its clause (review after a spec change)
//! catalog_locate --refresh           recompute fingerprints and spec.sha256 from the locations
//!                                    and rewrite catalog.json, printing every clause that changed
//! ```
//!
//! The spec is `<repo root>/../shared/spec/cetp-v2.zh.md` unless `CETP_SPEC` is set.

use cetp_proto::catalog::{
    clause_fingerprint, clause_text, section_at_line, spec_sha256, Catalog, Requirement,
};
use std::path::PathBuf;
use std::process::ExitCode;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn catalog_path() -> PathBuf {
    repo_root().join("vectors/requirements/catalog.json")
}

fn read(path: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("catalog_locate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let spec_path = std::env::var_os("CETP_SPEC")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/spec/cetp-v2.zh.md"));
    let spec = read(&spec_path)?;
    let load = || Catalog::from_json(&read(&catalog_path())?).map_err(|e| e.to_string());
    match args.first().map(String::as_str) {
        None | Some("-h" | "--help") => Err(
            "usage: catalog_locate [--line N] <text> | --show <ID>... | --show-all | --refresh"
                .into(),
        ),
        Some("--show") => {
            let catalog = load()?;
            for id in &args[1..] {
                let r = catalog
                    .get(id)
                    .ok_or_else(|| format!("no requirement {id}"))?;
                show(&spec, r);
            }
            Ok(())
        }
        Some("--show-all") => {
            load()?.requirements.iter().for_each(|r| show(&spec, r));
            Ok(())
        }
        Some("--refresh") => refresh(&spec, load()?),
        Some("--line") => {
            let line = args
                .get(1)
                .and_then(|n| n.parse().ok())
                .ok_or("--line needs a number")?;
            locate(&spec, Some(line), &args[2..].join(" "))
        }
        Some(_) => locate(&spec, None, &args.join(" ")),
    }
}

fn show(spec: &str, r: &Requirement) {
    let quote =
        clause_text(spec, &r.source).unwrap_or_else(|| "<location outside the spec>".into());
    println!(
        "{} [{}] line {}\n  ours: {}\n  spec: {quote}",
        r.id, r.level, r.source.line, r.summary
    );
}

fn locate(spec: &str, only_line: Option<usize>, needle: &str) -> Result<(), String> {
    if needle.is_empty() {
        return Err("give the text to look for".into());
    }
    let mut hits = 0;
    for (i, line) in spec.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if only_line.is_some_and(|n| n != i + 1) {
            continue;
        }
        for (byte, _) in line.match_indices(needle) {
            let start = line[..byte].chars().count();
            let end = start + needle.chars().count();
            let section = section_at_line(spec, i + 1).unwrap_or_default();
            println!(
                "section {section}\n\"source\": {{ \"file\": \"cetp-v2.zh.md\", \"line\": {}, \"start\": {start}, \"end\": {end} }},\n\"fingerprint\": \"{}\"",
                i + 1,
                clause_fingerprint(needle)
            );
            hits += 1;
        }
    }
    if hits == 0 {
        return Err(format!("{needle:?} does not occur in the spec"));
    }
    Ok(())
}

fn refresh(spec: &str, mut catalog: Catalog) -> Result<(), String> {
    let mut changed = 0;
    for r in catalog.requirements.iter_mut().filter(|r| !r.retired) {
        let quote = clause_text(spec, &r.source)
            .ok_or_else(|| format!("{}: location is outside the spec; fix it first", r.id))?;
        let fingerprint = clause_fingerprint(&quote);
        if fingerprint != r.fingerprint {
            println!("{}: clause is now: {quote}", r.id);
            r.fingerprint = fingerprint;
            changed += 1;
        }
    }
    catalog.spec.sha256 = spec_sha256(spec.as_bytes());
    let text = serde_json::to_string_pretty(&catalog).map_err(|e| e.to_string())? + "\n";
    std::fs::write(catalog_path(), text).map_err(|e| e.to_string())?;
    println!("{changed} fingerprints changed; review each clause above against its summary");
    Ok(())
}
