//! The README and the guides under `docs/` against the command line they
//! describe (issue 43): every `cetp …` command line in their shell blocks
//! parses with the CLI's own clap definitions, so a guide cannot name a
//! flag, a value or a subcommand that does not exist; every relative link
//! in them names a file that exists (and, into Markdown, a heading that
//! does); and the README stays short enough to read in five minutes.
//!
//! A line in a shell block is a command when it starts with `cetp ` (after
//! an optional `$ ` prompt). Lines ending in `\` are joined, the line is
//! split as a shell would (quotes, backslashes, a trailing `# comment`, and
//! the end of the command at `&`, `|`, `;`, `<` or `>`), and the words go to
//! `Cli::try_parse_from`. Lines that are deliberately not commands simply
//! do not start with `cetp `.

use super::Cli;
use clap::error::ErrorKind;
use clap::Parser;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The README's length a newcomer reads in five minutes.
const README_MAX_LINES: usize = 250;
/// Fewer commands than this means the extractor found nothing to check.
const MIN_COMMANDS: usize = 30;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every docs/*.md, as (path relative to the repository, text).
fn doc_files() -> Vec<(String, String)> {
    let root = repo();
    let mut names = vec!["README.md".to_string()];
    let mut guides: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    guides.sort();
    names.extend(guides);
    names
        .into_iter()
        .map(|n| {
            let text =
                std::fs::read_to_string(root.join(&n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, text)
        })
        .collect()
}

/// One `cetp …` command line of a document.
struct DocCommand {
    file: String,
    /// The line it starts on (1-based).
    line: usize,
    /// The command as written, continuation lines joined.
    text: String,
}

/// Whether a fenced block's info string marks shell commands.
fn is_shell_block(info: &str) -> bool {
    let lang = info.split_whitespace().next().unwrap_or("");
    matches!(lang, "" | "sh" | "bash" | "shell" | "console")
}

/// What a line of a Markdown document is.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Prose,
    /// A line that opens or closes a fenced code block.
    Fence,
    /// A line inside a fenced block; `shell` when the block holds commands.
    Code {
        shell: bool,
    },
}

/// The fence a line opens or closes: its character, its length and its
/// info string.
fn fence(line: &str) -> Option<(char, usize, &str)> {
    let t = line.trim_start();
    let ch = t.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let n = t.chars().take_while(|&c| c == ch).count();
    (n >= 3).then(|| (ch, n, t[n..].trim()))
}

/// Each line of a document with its kind.
fn classify(text: &str) -> Vec<(&str, Kind)> {
    let mut open: Option<(char, usize, bool)> = None;
    text.lines()
        .map(|line| match (open, fence(line)) {
            (None, Some((ch, n, info))) => {
                open = Some((ch, n, is_shell_block(info)));
                (line, Kind::Fence)
            }
            (Some((ch, n, _)), Some((c, m, info))) if c == ch && m >= n && info.is_empty() => {
                open = None;
                (line, Kind::Fence)
            }
            (Some((_, _, shell)), _) => (line, Kind::Code { shell }),
            (None, None) => (line, Kind::Prose),
        })
        .collect()
}

/// The `cetp …` command lines of a document's shell blocks.
fn commands(file: &str, text: &str) -> Vec<DocCommand> {
    let mut out = Vec::new();
    // A logical line being joined: its first line number and text so far.
    let mut pending: Option<(usize, String)> = None;
    for (i, (raw, kind)) in classify(text).into_iter().enumerate() {
        if kind != (Kind::Code { shell: true }) {
            if let Some((line, text)) = pending.take() {
                push_command(&mut out, file, line, &text);
            }
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        match raw.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(raw);
                push_command(&mut out, file, start, &joined);
            }
        }
    }
    if let Some((line, text)) = pending.take() {
        push_command(&mut out, file, line, &text);
    }
    out
}

fn push_command(out: &mut Vec<DocCommand>, file: &str, line: usize, text: &str) {
    let t = text.trim_start();
    let t = t.strip_prefix("$ ").map(str::trim_start).unwrap_or(t);
    if t.starts_with("cetp ") || t == "cetp" {
        out.push(DocCommand {
            file: file.to_string(),
            line,
            text: t.trim_end().to_string(),
        });
    }
}

/// Splits a command line into words as a POSIX shell would, for the little
/// the guides use: quotes, backslash escapes, a `#` comment, and the end of
/// the command at an unquoted `&`, `|`, `;`, `<` or `>` (a background job,
/// a pipe, a redirection: what follows is not cetp's).
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated ' quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unterminated \" quote".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated \" quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            '#' if !in_word => break,
            '&' | '|' | ';' | '<' | '>' => {
                // `2>` redirects a file descriptor: the digits are not a word.
                if (c == '>' || c == '<') && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                break;
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[test]
fn every_documented_cetp_command_parses() {
    let mut found = 0;
    let mut failures = Vec::new();
    for (file, text) in doc_files() {
        for cmd in commands(&file, &text) {
            found += 1;
            let argv = match split(&cmd.text) {
                Ok(argv) => argv,
                Err(e) => {
                    failures.push(format!("{}:{}: {}\n    {e}", cmd.file, cmd.line, cmd.text));
                    continue;
                }
            };
            if let Err(e) = Cli::try_parse_from(&argv) {
                if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                    continue;
                }
                let message = e.render().to_string();
                let first = message
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string();
                failures.push(format!(
                    "{}:{}: {}\n    {first}",
                    cmd.file, cmd.line, cmd.text
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} documented command line(s) do not parse with cetp's clap definitions \
         (fix the document, not this test):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        found >= MIN_COMMANDS,
        "only {found} `cetp …` command lines found in README.md and docs/*.md \
         (at least {MIN_COMMANDS} expected): is the extractor still finding them?"
    );
    println!("{found} documented cetp command lines parsed");
}

#[test]
fn the_readme_is_short_and_keeps_its_first_lines() {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.len() <= README_MAX_LINES,
        "README.md has {} lines; at most {README_MAX_LINES} (move the rest to docs/)",
        lines.len()
    );
    // CI and scripts read the two command lines of the first block.
    assert!(lines[0].starts_with("# cetp"), "{:?}", lines[0]);
    assert_eq!(lines[2], "```sh");
    assert!(lines[3].starts_with("scripts/certify-sim.sh    # main job"));
    assert!(lines[4].starts_with("scripts/test-all.sh       # every test"));
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, each space a `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file: its headings' slugs (a repeated one
/// numbered as GitHub numbers it) and explicit `<a id=…>`/`<a name=…>`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (line, kind) in classify(text) {
        if kind != Kind::Prose {
            continue;
        }
        for key in ["<a id=\"", "<a name=\""] {
            for part in line.split(key).skip(1) {
                if let Some(end) = part.find('"') {
                    out.insert(part[..end].to_string());
                }
            }
        }
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !t[hashes..].starts_with(' ') {
            continue;
        }
        let title = strip_links(t[hashes..].trim().trim_end_matches('#').trim());
        let base = slug(&title);
        let mut s = base.clone();
        let mut n = 0;
        while out.contains(&s) {
            n += 1;
            s = format!("{base}-{n}");
        }
        out.insert(s);
    }
    out
}

/// `[text](target)` becomes `text`, as in a heading's anchor.
fn strip_links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The `[text](target)` link targets of a line, code spans left out.
fn link_targets(line: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_span = false;
    for c in line.chars() {
        if c == '`' {
            in_span = !in_span;
        } else if !in_span {
            prose.push(c);
        }
    }
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.to_string());
        rest = &after[end..];
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = repo();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (file, text) in doc_files() {
        let dir = root.join(&file).parent().unwrap().to_path_buf();
        for (i, (line, kind)) in classify(&text).into_iter().enumerate() {
            if kind != Kind::Prose {
                continue;
            }
            for target in link_targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if path.is_empty() {
                    root.join(&file)
                } else {
                    dir.join(path)
                };
                let at = format!("{file}:{}: ({target})", i + 1);
                if !resolved.exists() {
                    broken.push(format!("{at}: no such file"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if !path.is_empty() && !path.ends_with(".md") {
                    continue;
                }
                let target_text = std::fs::read_to_string(&resolved).unwrap();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{at}: no heading with anchor #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 0,
        "no relative link found: is the link reader still working?"
    );
}

#[test]
fn the_extractor_reads_what_the_guides_write() {
    let doc = "text\n```sh\n$ cetp run --target sim   # a comment\ncetp fuzz --out /tmp/fz \\\n    --budget 60s &\nscripts/x.sh\n```\n```toml\ncetp = 1\n```\n```\ncetp list cases | head\n```\n";
    let found: Vec<(usize, Vec<String>)> = commands("t.md", doc)
        .iter()
        .map(|c| (c.line, split(&c.text).unwrap()))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                3,
                vec!["cetp".into(), "run".into(), "--target".into(), "sim".into()]
            ),
            (
                4,
                vec![
                    "cetp".into(),
                    "fuzz".into(),
                    "--out".into(),
                    "/tmp/fz".into(),
                    "--budget".into(),
                    "60s".into()
                ]
            ),
            (12, vec!["cetp".into(), "list".into(), "cases".into()]),
        ]
    );
    assert_eq!(
        split(r#"cetp consumer-act --action '{"do":"reset"}' --target "tcp:h:1" 2>/dev/null"#)
            .unwrap(),
        vec![
            "cetp",
            "consumer-act",
            "--action",
            r#"{"do":"reset"}"#,
            "--target",
            "tcp:h:1"
        ]
    );
    assert_eq!(
        slug("Several devices (`--target` repeated)"),
        "several-devices---target-repeated"
    );
    assert!(anchors("# A\n## A\n```sh\n# not a heading\n```\n").contains("a-1"));
}
