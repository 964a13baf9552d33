//! `pattern` (ECMA-262, unanchored) as a string strategy.
//!
//! The pattern is translated to Rust regex syntax exactly as the jsonschema
//! crate does (`jsonschema_regex::to_rust_regex`: `\d` is ASCII, `.` stops
//! at every line terminator), parsed with regex-syntax, its leading `^` and
//! trailing `$` removed (proptest's `string_regex` generates whole strings
//! and cannot handle anchors), and handed to
//! `proptest::string::string_regex_parsed`. A pattern not anchored at an end
//! matches anywhere, so characters may be added on that side: that is how
//! `minLength` is met for patterns like `^sk_`.

use crate::budget::{self, Label};
use crate::error::{GenError, Kind};
use proptest::prelude::*;
use regex_syntax::ast::ErrorKind as AstError;
use regex_syntax::hir::{Hir, HirKind, Look};
use std::sync::Arc;

pub(crate) struct Pattern {
    core: BoxedStrategy<String>,
    anchored_start: bool,
    anchored_end: bool,
    /// Where the `pattern` is: the budget names it.
    label: Label,
    /// The translated pattern, compiled: the judge of "matches" for filters.
    pub regex: Arc<regex::Regex>,
}

fn unsupported(pointer: &str, pattern: &str, reason: &str) -> GenError {
    GenError::new(
        Kind::Unsupported,
        "pattern",
        pointer,
        format!("{pattern:?} uses {reason}, which is not supported"),
    )
}

/// Which ends of the whole pattern are anchored, with the anchors removed.
fn strip(hir: &Hir) -> (Hir, bool, bool) {
    match hir.kind() {
        HirKind::Look(Look::Start) => (Hir::empty(), true, false),
        HirKind::Look(Look::End) => (Hir::empty(), false, true),
        HirKind::Concat(subs) => {
            let mut subs = subs.clone();
            let mut start = false;
            let mut end = false;
            if let Some(first) = subs.first() {
                let (h, s, e) = strip(first);
                start = s;
                if subs.len() == 1 {
                    end = e;
                }
                subs[0] = h;
            }
            if subs.len() > 1 {
                let last = subs.len() - 1;
                let (h, s, e) = strip(&subs[last]);
                // A start anchor at the end (`a^`) is not an edge: keep it so
                // that it is reported below.
                if !s {
                    end = e;
                    subs[last] = h;
                }
            }
            (Hir::concat(subs), start, end)
        }
        HirKind::Capture(c) => {
            let (h, s, e) = strip(&c.sub);
            (h, s, e)
        }
        HirKind::Alternation(subs) => {
            // `^a$|^b$`: strip every branch. A branch left unanchored still
            // matches as generated; padding is added only when no branch is
            // anchored on that side.
            let mut start = false;
            let mut end = false;
            let subs = subs
                .iter()
                .map(|s| {
                    let (h, a, b) = strip(s);
                    start |= a;
                    end |= b;
                    h
                })
                .collect();
            (Hir::alternation(subs), start, end)
        }
        _ => (hir.clone(), false, false),
    }
}

impl Pattern {
    pub fn compile(pattern: &str, pointer: &str) -> Result<Pattern, GenError> {
        let translated = jsonschema_regex::to_rust_regex(pattern).map_err(|()| {
            GenError::new(
                Kind::Invalid,
                "pattern",
                pointer,
                format!("{pattern:?} is not an ECMA-262 regular expression"),
            )
        })?;
        let ast = regex_syntax::ast::parse::Parser::new()
            .parse(&translated)
            .map_err(|e| match e.kind() {
                AstError::UnsupportedLookAround => unsupported(pointer, pattern, "a look-around"),
                AstError::UnsupportedBackreference => {
                    unsupported(pointer, pattern, "a backreference")
                }
                _ => GenError::new(
                    Kind::Invalid,
                    "pattern",
                    pointer,
                    format!("{pattern:?} cannot be parsed: {e}"),
                ),
            })?;
        let hir = regex_syntax::hir::translate::Translator::new()
            .translate(&translated, &ast)
            .map_err(|e| {
                GenError::new(
                    Kind::Invalid,
                    "pattern",
                    pointer,
                    format!("{pattern:?} cannot be parsed: {e}"),
                )
            })?;
        let (hir, anchored_start, anchored_end) = strip(&hir);
        if !hir.properties().look_set().is_empty() {
            return Err(unsupported(
                pointer,
                pattern,
                "a word boundary or an anchor inside the pattern",
            ));
        }
        let regex = regex::Regex::new(&translated).map_err(|e| {
            GenError::new(
                Kind::Unsupported,
                "pattern",
                pointer,
                format!("{pattern:?} does not compile here: {e}"),
            )
        })?;
        let core = proptest::string::string_regex_parsed(&hir)
            .map_err(|e| unsupported(pointer, pattern, &e.to_string()))?
            .boxed();
        Ok(Pattern {
            core,
            anchored_start,
            anchored_end,
            label: Label::new("pattern", pointer),
            regex: Arc::new(regex),
        })
    }

    /// Strings matching the pattern whose length (in characters) is in
    /// `min..=max`. Padding goes on the unanchored sides; `filler` draws it.
    pub fn strategy(
        &self,
        min: usize,
        max: usize,
        filler: BoxedStrategy<char>,
    ) -> BoxedStrategy<String> {
        let core = self.core.clone();
        let in_bounds = move |s: &String| (min..=max).contains(&s.chars().count());
        if self.anchored_start && self.anchored_end {
            return budget::filter(
                core,
                self.label.clone(),
                "pattern match outside the length bounds",
                in_bounds,
            );
        }
        let (pad_front, pad_back) = (!self.anchored_start, !self.anchored_end);
        let padded = core
            .prop_flat_map(move |c| {
                let n = c.chars().count();
                let need = min.saturating_sub(n);
                let room = max.saturating_sub(n).max(need);
                // A few characters of slack beyond what minLength needs, so that
                // the padding itself varies.
                let pad = proptest::collection::vec(filler.clone(), need..=room.min(need + 4));
                (Just(c), pad, any::<bool>())
            })
            .prop_map(move |(c, pad, front)| {
                let pad: String = pad.into_iter().collect();
                if pad_front && (front || !pad_back) {
                    pad + &c
                } else {
                    c + &pad
                }
            })
            .boxed();
        budget::filter(
            padded,
            self.label.clone(),
            "pattern match outside the length bounds",
            in_bounds,
        )
    }
}
