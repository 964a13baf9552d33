//! `cetp coverage`, `cetp list` and `cetp catalog`: what the suite holds.

use super::*;

pub(crate) fn coverage_command(args: &CoverageArgs) -> Result<ExitCode, Failure> {
    let (dir, suite) = load_suite(&args.vectors)?;
    let catalog_path = dir.join("requirements/catalog.json");
    let text = std::fs::read_to_string(&catalog_path)
        .map_err(|e| usage(format!("{}: {e}", catalog_path.display())))?;
    let catalog = cetp_proto::catalog::Catalog::from_json(&text)
        .map_err(|e| usage(format!("{}: {e}", catalog_path.display())))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| repo_dir().join("reports"));
    let proof = coverage::load_proof(&out.join("proof.json")).map_err(usage)?;
    let exemptions =
        coverage::load_exemptions(&dir.join("coverage/exemptions.json")).map_err(usage)?;
    let scenarios = cetp_consumer::scenario::load_dir(&dir.join("consumer")).map_err(usage)?;
    let consumer = coverage::ConsumerCoverage {
        index: cetp_consumer::requirement_index(&scenarios),
        proof: coverage::load_proof(&out.join("consumer-proof.json")).map_err(usage)?,
    };
    let rows = coverage::rows_with_consumer(&catalog, &suite, &proof, &exemptions, &consumer);
    let md = coverage::render_markdown(&rows);
    let json =
        serde_json::to_string_pretty(&coverage::render_json(&rows)).unwrap_or_default() + "\n";
    let (md_path, json_path) = (out.join("coverage.md"), out.join("coverage.json"));
    let gaps: Vec<&str> = rows
        .iter()
        .filter(|r| r.status == coverage::Status::Gap)
        .map(|r| r.id.as_str())
        .collect();
    if args.write {
        std::fs::create_dir_all(&out).map_err(|e| usage(e.to_string()))?;
        std::fs::write(&md_path, &md).map_err(|e| usage(e.to_string()))?;
        std::fs::write(&json_path, &json).map_err(|e| usage(e.to_string()))?;
        println!("wrote {} and {}", md_path.display(), json_path.display());
    } else if args.check {
        let stale = std::fs::read_to_string(&md_path).ok().as_deref() != Some(md.as_str())
            || std::fs::read_to_string(&json_path).ok().as_deref() != Some(json.as_str());
        if stale {
            eprintln!("coverage report is stale: run `cetp coverage --write` and commit reports/coverage.*");
            return Ok(ExitCode::Fail);
        }
        println!("coverage report is up to date");
    } else {
        print!("{md}");
    }
    if !gaps.is_empty() {
        eprintln!(
            "requirements observable from outside but enforced by no case: {}",
            gaps.join(", ")
        );
        return Ok(ExitCode::Fail);
    }
    Ok(ExitCode::Ok)
}

/// One line each: the id, then what it is about and what it cites.
pub(crate) fn list_command(what: ListWhat, vectors: &Option<PathBuf>) -> Result<ExitCode, Failure> {
    let (dir, suite) = load_suite(vectors)?;
    match what {
        ListWhat::Cases => {
            for c in &suite.cases {
                let needs = if c.needs.is_empty() {
                    "core".to_string()
                } else {
                    c.needs.join("+")
                };
                println!(
                    "{:<11} {:<9} {:<28} {}  [{}]",
                    c.id,
                    format!("{:?}", c.level).to_uppercase(),
                    needs,
                    c.title,
                    c.requirements.join(", ")
                );
            }
        }
        ListWhat::Checks => {
            for c in &suite.checks {
                println!("{:<19} {}  [{}]", c.id, c.title, c.requirements.join(", "));
            }
        }
        ListWhat::Mutants => {
            for m in load_mutants(&dir.join("mutants/mutants.json")).map_err(usage)? {
                let mark = if m.equivalent.is_some() {
                    " (equivalent)"
                } else {
                    ""
                };
                println!(
                    "{:<40} {:<16} [{}]{mark}  {}",
                    m.name,
                    m.providers.join(","),
                    m.requirements.join(", "),
                    m.description
                );
            }
        }
        ListWhat::Variants => {
            for v in load_variants(&dir.join("variants/variants.json")).map_err(usage)? {
                println!(
                    "{:<34} {:<11} [{}]  {}",
                    v.name,
                    v.latitude,
                    v.allowed_by.join(", "),
                    v.description
                );
            }
        }
    }
    Ok(ExitCode::Ok)
}

pub(crate) fn catalog_command(
    ids: &[String],
    spec: &Option<PathBuf>,
    vectors: &Option<PathBuf>,
) -> Result<ExitCode, Failure> {
    let dir = vectors_or_default(vectors)?;
    let text = std::fs::read_to_string(dir.join("requirements/catalog.json"))
        .map_err(|e| usage(e.to_string()))?;
    let catalog =
        cetp_proto::catalog::Catalog::from_json(&text).map_err(|e| usage(e.to_string()))?;
    let spec_path = spec
        .clone()
        .unwrap_or_else(|| repo_dir().join("../shared/spec/cetp-v2.zh.md"));
    let spec_text = std::fs::read_to_string(&spec_path).ok();
    for id in ids {
        if !catalog.active().any(|r| &r.id == id) {
            return Err(usage(format!("no requirement {id:?} in the catalog")));
        }
    }
    for r in catalog.active() {
        if !ids.is_empty() && !ids.contains(&r.id) {
            continue;
        }
        println!(
            "{} [{} {}] §{}: {}",
            r.id,
            r.level,
            format!("{:?}", r.side).to_lowercase(),
            r.section,
            r.summary
        );
        match spec_text
            .as_deref()
            .and_then(|t| cetp_proto::catalog::clause_text(t, &r.source))
        {
            Some(clause) => println!("    spec line {}: {}", r.source.line, clause),
            None => println!(
                "    spec line {} (spec not found at {})",
                r.source.line,
                spec_path.display()
            ),
        }
    }
    Ok(ExitCode::Ok)
}
