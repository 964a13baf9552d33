//! The requirement catalog: one entry per normative statement of the CETP v2
//! spec, with a stable id (`CETP2-4.4-07`), our own English summary, and a
//! source location plus fingerprint instead of a copy of the spec text.
//!
//! The data lives in `vectors/requirements/catalog.json` (format and rules in
//! that folder's README). Reports quote the spec at run time with
//! [`clause_text`], so the repository never carries the spec's wording, and
//! [`Catalog::verify_against_spec`] proves every location still points at the
//! clause it was written for: the fingerprint is the SHA-256 of the clause with
//! whitespace normalized, so an edited or shifted spec is caught immediately.
//!
//! Pure functions over strings: callers read the files.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// The only catalog format this code reads.
pub const FORMAT_VERSION: u32 = 1;

/// Shape of a requirement id. The section part is checked against the spec's
/// headings separately (see [`section_at_line`]).
pub const ID_PATTERN: &str = r"^CETP2-((?:0|[1-9][0-9]*)(?:\.[1-9][0-9]*)?)-([0-9]{2})$";

/// The requirement catalog as stored in `vectors/requirements/catalog.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Must be [`FORMAT_VERSION`]; anything else is refused.
    pub format_version: u32,
    /// The spec revision the entries point into.
    pub spec: SpecRef,
    /// Every requirement, retired ones included (their ids are never reused).
    pub requirements: Vec<Requirement>,
}

/// The spec revision a catalog was written against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecRef {
    /// Name of the protocol the spec defines (`CETP`).
    pub name: String,
    /// The protocol major version the spec describes (`2`).
    pub version: String,
    /// File name of the spec that [`SourceLoc::file`] must repeat.
    pub file: String,
    /// Lowercase hex SHA-256 of the whole spec file.
    pub sha256: String,
}

/// One normative statement of the spec, as the catalog records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// Stable id such as `CETP2-4.4-07` (see [`ID_PATTERN`]); reports and vectors cite it.
    pub id: String,
    /// Spec section number, e.g. `"4.4"`; `"0"` is the unnumbered introduction.
    pub section: String,
    /// How binding the statement is (MUST, SHOULD, MAY...).
    pub level: Level,
    /// Our own English summary of the clause (the spec's text is never copied).
    pub summary: String,
    /// Whose duty it is: Provider, Consumer or both.
    pub side: Side,
    /// How the harness can observe whether it holds.
    pub observable: Observability,
    /// Why the requirement cannot be judged from outside, for [`Observability::NotRemote`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_remote_reason: Option<String>,
    /// Where the clause sits in the spec.
    pub source: SourceLoc,
    /// SHA-256 of the clause text with whitespace normalized ([`clause_fingerprint`]).
    pub fingerprint: String,
    /// Ids of requirements that bear on this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
    /// Free-form remarks on how the clause is read or tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Added after its section was first numbered, so its number may be out of
    /// spec order.
    #[serde(default, skip_serializing_if = "is_false")]
    pub late_addition: bool,
    /// Kept so the id is never reused; no longer checked.
    #[serde(default, skip_serializing_if = "is_false")]
    pub retired: bool,
    /// Why the requirement was retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_reason: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The normative strength of a requirement (spec introduction: 必须/不得/应该/可以).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Level {
    /// A required behaviour.
    Must,
    /// A forbidden behaviour.
    MustNot,
    /// A recommended behaviour.
    Should,
    /// A behaviour recommended against.
    ShouldNot,
    /// An optional behaviour.
    May,
}

impl Level {
    /// Breaking a mandatory requirement is a `FAIL`; missing a SHOULD is a `WARN`.
    pub fn is_mandatory(self) -> bool {
        matches!(self, Level::Must | Level::MustNot)
    }

    /// The level as the catalog spells it (`MUST_NOT`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::MustNot => "MUST_NOT",
            Level::Should => "SHOULD",
            Level::ShouldNot => "SHOULD_NOT",
            Level::May => "MAY",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose duty the requirement is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The Provider must do it.
    Provider,
    /// The Consumer must do it.
    Consumer,
    /// Both sides must do it.
    Both,
}

/// How the harness can see whether the requirement holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observability {
    /// The harness, acting as a Consumer, sees it in the Provider's answers.
    ConsumerCalls,
    /// The harness, acting as a hostile Provider, sees it in a Consumer's calls.
    HostileProvider,
    /// Only with the vendor's help (effect observer, UI selectors, policies).
    VendorProfile,
    /// Cannot be judged from outside; `not_remote_reason` says why.
    NotRemote,
}

/// Where a clause sits in the spec: a 1-based line and a half-open range of
/// character (Unicode scalar value) offsets within it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceLoc {
    /// Spec file name; must equal [`SpecRef::file`].
    pub file: String,
    /// 1-based line number of the clause.
    pub line: usize,
    /// Character offset where the clause starts within the line.
    pub start: usize,
    /// Character offset just past the clause's end (the range is half-open).
    pub end: usize,
}

/// Why a catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The text is not JSON of the catalog's shape.
    #[error("catalog is not valid JSON for this format: {0}")]
    Json(#[from] serde_json::Error),
    /// The catalog is of a format this code does not read.
    #[error("catalog format_version {found} is not supported (this code reads {FORMAT_VERSION})")]
    UnsupportedFormat {
        /// The catalog's `format_version`.
        found: u32,
    },
    /// Two entries share an id.
    #[error("requirement id {0} appears more than once")]
    DuplicateId(String),
}

impl Catalog {
    /// Parses a catalog. Only the shape and id uniqueness are checked here;
    /// content rules are the job of the JSON Schema and the catalog tests.
    pub fn from_json(text: &str) -> Result<Catalog, CatalogError> {
        let catalog: Catalog = serde_json::from_str(text)?;
        if catalog.format_version != FORMAT_VERSION {
            return Err(CatalogError::UnsupportedFormat {
                found: catalog.format_version,
            });
        }
        let mut seen = std::collections::HashSet::new();
        for r in &catalog.requirements {
            if !seen.insert(r.id.as_str()) {
                return Err(CatalogError::DuplicateId(r.id.clone()));
            }
        }
        Ok(catalog)
    }

    /// The requirement with this id, retired or not.
    pub fn get(&self, id: &str) -> Option<&Requirement> {
        self.requirements.iter().find(|r| r.id == id)
    }

    /// Requirements that are still in force.
    pub fn active(&self) -> impl Iterator<Item = &Requirement> {
        self.requirements.iter().filter(|r| !r.retired)
    }

    /// Checks every active entry's location and fingerprint against the spec
    /// text. An empty result means every clause is where the catalog says.
    pub fn verify_against_spec(&self, spec_text: &str) -> Vec<FingerprintMismatch> {
        let lines: Vec<&str> = spec_lines(spec_text).collect();
        let mut out = Vec::new();
        for r in self.active() {
            let problem = if r.source.file != self.spec.file {
                Some(MismatchProblem::WrongFile {
                    found: r.source.file.clone(),
                    expected: self.spec.file.clone(),
                })
            } else {
                check_location(&lines, r)
            };
            if let Some(problem) = problem {
                out.push(FingerprintMismatch {
                    id: r.id.clone(),
                    problem,
                });
            }
        }
        out
    }
}

fn check_location(lines: &[&str], r: &Requirement) -> Option<MismatchProblem> {
    let loc = &r.source;
    let Some(line) = loc.line.checked_sub(1).and_then(|i| lines.get(i)) else {
        return Some(MismatchProblem::LineOutOfRange {
            line: loc.line,
            lines: lines.len(),
        });
    };
    let Some(clause) = slice_chars(line, loc.start, loc.end) else {
        return Some(MismatchProblem::SpanOutOfRange {
            line: loc.line,
            start: loc.start,
            end: loc.end,
            line_chars: line.chars().count(),
        });
    };
    let actual = clause_fingerprint(clause);
    if actual == r.fingerprint {
        None
    } else {
        Some(MismatchProblem::FingerprintDiffers {
            expected: r.fingerprint.clone(),
            actual,
            clause: normalize_clause(clause),
        })
    }
}

/// One catalog entry that no longer matches the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FingerprintMismatch {
    /// Id of the entry.
    pub id: String,
    /// What no longer matches.
    pub problem: MismatchProblem,
}

/// How a catalog location fails to point at its clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MismatchProblem {
    /// The entry names another spec file than the catalog's.
    WrongFile {
        /// The file the entry names.
        found: String,
        /// The catalog's spec file.
        expected: String,
    },
    /// The line number is past the end of the spec.
    LineOutOfRange {
        /// The line the entry names.
        line: usize,
        /// How many lines the spec has.
        lines: usize,
    },
    /// The character range is empty or does not fit the line.
    SpanOutOfRange {
        /// The line the entry names.
        line: usize,
        /// Start of the range.
        start: usize,
        /// End of the range.
        end: usize,
        /// How many characters the line has.
        line_chars: usize,
    },
    /// The text at the location no longer hashes to the recorded fingerprint: the spec was edited or shifted.
    FingerprintDiffers {
        /// The fingerprint the catalog records.
        expected: String,
        /// The fingerprint of the text now there.
        actual: String,
        /// The normalized text now found at the location.
        clause: String,
    },
}

impl fmt::Display for FingerprintMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            MismatchProblem::WrongFile { found, expected } => {
                write!(f, "{}: source file {found:?}, catalog is for {expected:?}", self.id)
            }
            MismatchProblem::LineOutOfRange { line, lines } => {
                write!(f, "{}: line {line} is outside the spec (1..={lines})", self.id)
            }
            MismatchProblem::SpanOutOfRange {
                line,
                start,
                end,
                line_chars,
            } => write!(
                f,
                "{}: chars {start}..{end} do not fit line {line} ({line_chars} chars) or are empty",
                self.id
            ),
            MismatchProblem::FingerprintDiffers {
                expected,
                actual,
                clause,
            } => write!(
                f,
                "{}: fingerprint {actual} of the text now at the location differs from {expected}; found: {clause}",
                self.id
            ),
        }
    }
}

/// Lines as the catalog counts them: split on `\n`, a trailing `\r` dropped.
fn spec_lines(spec_text: &str) -> impl Iterator<Item = &str> {
    spec_text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// Non-empty character range `start..end` of `s`, or `None` if it does not fit.
fn slice_chars(s: &str, start: usize, end: usize) -> Option<&str> {
    if start >= end {
        return None;
    }
    let mut bounds = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()));
    let from = bounds.nth(start)?;
    let to = bounds.nth(end - start - 1)?;
    Some(&s[from..to])
}

/// Collapses every run of Unicode whitespace to one ASCII space and trims.
pub fn normalize_clause(clause: &str) -> String {
    clause.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lowercase hex SHA-256 of the normalized clause.
pub fn clause_fingerprint(clause: &str) -> String {
    hex::encode(Sha256::digest(normalize_clause(clause).as_bytes()))
}

/// Lowercase hex SHA-256 of the whole spec file, as pinned in `spec.sha256`.
pub fn spec_sha256(spec_bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(spec_bytes))
}

/// The spec text at `loc`, exactly as written (not normalized), for quoting
/// in reports. `None` if the location does not fit the text.
pub fn clause_text(spec_text: &str, loc: &SourceLoc) -> Option<String> {
    let line = spec_lines(spec_text).nth(loc.line.checked_sub(1)?)?;
    slice_chars(line, loc.start, loc.end).map(str::to_owned)
}

/// The section a 1-based spec line belongs to, from the spec's numbered
/// headings (`2. …¶`, `2.1 …¶`). Lines before the first numbered heading are
/// section `"0"`; unnumbered headings (`非目标¶`) do not start a section.
pub fn section_at_line(spec_text: &str, line: usize) -> Option<String> {
    if line == 0 {
        return None;
    }
    let mut section = "0".to_string();
    let mut seen = 0;
    for text in spec_lines(spec_text).take(line) {
        seen += 1;
        if let Some(number) = heading_number(text) {
            section = number;
        }
    }
    (seen == line).then_some(section)
}

fn heading_number(line: &str) -> Option<String> {
    if !line.trim_end().ends_with('¶') {
        return None;
    }
    let (first, _) = line.split_once(' ')?;
    let number = first.strip_suffix('.').unwrap_or(first);
    let well_formed = !number.is_empty()
        && number.split('.').count() <= 2
        && number
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    well_formed.then(|| number.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_collapses_unicode_whitespace() {
        assert_eq!(normalize_clause("  a\t\tb \u{3000} c\u{a0}\n"), "a b c");
        assert_eq!(normalize_clause(""), "");
        assert_eq!(
            clause_fingerprint("a\tb"),
            hex::encode(Sha256::digest(b"a b"))
        );
    }

    #[test]
    fn slices_by_scalar_values() {
        let spec = "first\n你好，world\r\nlast";
        let loc = |line, start, end| SourceLoc {
            file: "x".into(),
            line,
            start,
            end,
        };
        assert_eq!(clause_text(spec, &loc(2, 0, 2)).as_deref(), Some("你好"));
        assert_eq!(clause_text(spec, &loc(2, 3, 8)).as_deref(), Some("world"));
        assert_eq!(
            clause_text(spec, &loc(2, 3, 9)),
            None,
            "\\r is not part of the line"
        );
        assert_eq!(clause_text(spec, &loc(3, 0, 4)).as_deref(), Some("last"));
        assert_eq!(clause_text(spec, &loc(4, 0, 1)), None);
        assert_eq!(clause_text(spec, &loc(0, 0, 1)), None);
        assert_eq!(clause_text(spec, &loc(1, 2, 2)), None, "empty span");
    }

    #[test]
    fn sections_follow_numbered_headings() {
        let spec = "intro¶\nx\n1. Goals¶\nnon-goals¶\ny\n2.1 Sub¶\nz\n10. Last¶\nw";
        let at = |l| section_at_line(spec, l);
        assert_eq!(at(2).as_deref(), Some("0"));
        assert_eq!(at(5).as_deref(), Some("1"));
        assert_eq!(at(7).as_deref(), Some("2.1"));
        assert_eq!(at(9).as_deref(), Some("10"));
        assert_eq!(at(1).as_deref(), Some("0"));
        assert_eq!(at(0), None);
        assert_eq!(at(10), None);
    }
}
