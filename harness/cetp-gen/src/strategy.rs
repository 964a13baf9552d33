//! Strategies from flattened schemas.
//!
//! Values are built from the keywords (bounds, lengths, `pattern`,
//! `format`, properties, items), so that almost nothing is generated and
//! thrown away; what is not built that way is filtered with the validator of
//! the schema that holds it. Everything is made of proptest combinators, so
//! values shrink: numbers toward zero or their bound, strings and arrays
//! toward their shortest, optional properties toward absent, unions toward
//! their first branch.

use crate::budget::Budget;
use crate::budget::{self, Label};
use crate::doc::{json_eq, Doc, Loc, Validator};
use crate::error::{GenError, Kind};
use crate::flat::{
    expand, type_of, Flat, Force, Neg, Src, ARRAY, BOOL, FLOAT, INT, NULL, NUMBER, OBJECT, STRING,
};
use crate::format;
use crate::pattern::Pattern;
use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value as Json};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

mod array;
mod number;
mod object;

/// Nesting levels of arrays and objects. A recursive schema is cut here:
/// optional properties and `anyOf` branches that would go deeper are not
/// generated, arrays stay empty.
pub(crate) const MAX_DEPTH: usize = 8;
/// Longest `minLength`/`minItems`/`minProperties` the generator honours:
/// every generated value stays small.
pub(crate) const MAX_STRING: u64 = 16_384;
pub(crate) const MAX_ITEMS: u64 = 1_024;
/// Characters, items and properties drawn beyond the minimum, by depth:
/// fewer deeper down, so that nested values stay small.
const EXTRA_CHARS: u64 = 24;
const EXTRA_ITEMS: [usize; MAX_DEPTH] = [4, 3, 3, 2, 2, 1, 1, 1];
const EXTRA_PROPS: [usize; MAX_DEPTH] = [2, 1, 1, 1, 0, 0, 0, 0];
/// Integers are drawn from the whole allowed range and, as often, from a
/// window of this size at zero or the nearest bound.
const SMALL_WINDOW: i64 = 100;
/// Floats without a bound come from this far around zero or the bound.
const FLOAT_SPAN: f64 = 1e6;

/// Strategies by (document locations of the conjunction, depth).
type Memo = HashMap<(String, usize), Result<BoxedStrategy<Json>, GenError>>;

pub(crate) struct Gen {
    pub doc: Doc,
    memo: RefCell<Memo>,
    pub budget: Budget,
    /// When the construction under way must have finished.
    build_deadline: Cell<Option<Instant>>,
}

fn filler() -> BoxedStrategy<char> {
    prop_oneof![
        8 => proptest::char::range(' ', '~'),
        1 => proptest::char::any(),
    ]
    .boxed()
}

fn unsat(kw: &str, at: &str, msg: impl Into<String>) -> GenError {
    GenError::new(Kind::Unsatisfiable, kw, at, msg)
}

/// Values of no particular schema (`{}`, `true`, an absent `items`): small
/// and of every type.
pub(crate) fn any_json(depth: usize) -> BoxedStrategy<Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        (-1000i64..1000).prop_map(Json::from),
        (-FLOAT_SPAN..FLOAT_SPAN).prop_map(Json::from),
        proptest::string::string_regex("[ -~]{0,12}")
            .expect("constant regex")
            .prop_map(Json::String),
    ]
    .boxed();
    if depth + 2 >= MAX_DEPTH {
        return leaf;
    }
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Json::Array),
            proptest::collection::btree_map("[a-z]{1,6}", inner, 0..3)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

fn all_valid(vs: Vec<Validator>) -> impl Fn(&Json) -> bool {
    move |v| vs.iter().all(|x| x.is_valid(v))
}

impl Gen {
    pub fn new(doc: Doc, budget: Budget) -> Gen {
        Gen {
            doc,
            memo: RefCell::new(HashMap::new()),
            budget,
            build_deadline: Cell::new(None),
        }
    }

    /// Runs a construction (`valid`, `invalid`) under the build budget.
    pub fn building<T>(&self, f: impl FnOnce() -> Result<T, GenError>) -> Result<T, GenError> {
        let outer = self.build_deadline.get();
        if outer.is_none() {
            self.build_deadline
                .set(Some(Instant::now() + self.budget.build));
        }
        let r = f();
        self.build_deadline.set(outer);
        r
    }

    /// Fails once the construction under way has used its time: named by
    /// the schema being built when it ran out.
    pub fn check_build(&self, at: &str) -> Result<(), GenError> {
        match self.build_deadline.get() {
            Some(d) if Instant::now() >= d => Err(GenError::new(
                Kind::Exhausted,
                "$schema",
                at,
                format!(
                    "took more than the build budget ({} ms) to turn into a strategy",
                    self.budget.build.as_millis()
                ),
            )),
            _ => Ok(()),
        }
    }

    fn validators<'a>(
        &self,
        locs: impl IntoIterator<Item = &'a Loc>,
    ) -> Result<Vec<Validator>, GenError> {
        let mut seen = BTreeSet::new();
        locs.into_iter()
            .filter(|l| seen.insert(l.doc.clone()))
            .map(|l| self.doc.validator(l))
            .collect()
    }

    /// Values valid under every schema of `conj`, nested `depth` levels deep.
    /// Memoised per document location (not per `$ref` path), which keeps a
    /// recursive schema linear to compile.
    pub fn strategy(&self, conj: &[Loc], depth: usize) -> Result<BoxedStrategy<Json>, GenError> {
        if conj.is_empty() {
            return Ok(any_json(depth));
        }
        let key = (
            conj.iter()
                .map(|l| l.doc.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            depth,
        );
        if let Some(r) = self.memo.borrow().get(&key) {
            return r.clone();
        }
        self.check_build(&conj[0].eval)?;
        let r = Flat::of(&self.doc, conj)
            .and_then(|f| self.gen_disjuncts(f, depth))
            .and_then(|s| self.yields(s, &conj[0].eval));
        self.memo.borrow_mut().insert(key, r.clone());
        r
    }

    pub fn gen_disjuncts(&self, f: Flat, depth: usize) -> Result<BoxedStrategy<Json>, GenError> {
        let mut ds = Vec::new();
        expand(&self.doc, f, &mut ds)?;
        let mut alts = Vec::new();
        let mut first_err = None;
        let several = ds.len() > 1;
        for d in &ds {
            let at = d.nodes.first().map_or("", |l| l.eval.as_str());
            self.check_build(at)?;
            // A disjunct that yields nothing (a `oneOf` branch every value
            // of which another branch also accepts) is left out rather than
            // drawn from.
            let r =
                self.gen_flat(d, depth)
                    .and_then(|s| if several { self.yields(s, at) } else { Ok(s) });
            match r {
                Ok(s) => alts.push(s),
                Err(e) if e.is_local() => {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        match alts.len() {
            0 => Err(first_err.expect("expand yields at least one disjunct")),
            1 => Ok(alts.pop().expect("one")),
            _ => Ok(Union::new(alts).boxed()),
        }
    }

    /// One combinator-free conjunction.
    pub fn gen_flat(&self, f: &Flat, depth: usize) -> Result<BoxedStrategy<Json>, GenError> {
        let mut types = f.types();
        match &f.force {
            Some(Force::Prop(..)) | Some(Force::Extra(_)) => types &= OBJECT,
            Some(Force::Item(..)) | Some(Force::Tail(_)) => types &= ARRAY,
            None => {}
        }
        let base = if f.enums.is_empty() {
            self.gen_typed(f, types, depth)?
        } else {
            self.gen_enum(f, types)?
        };
        self.filtered(f, base)
    }

    fn filtered(
        &self,
        f: &Flat,
        mut s: BoxedStrategy<Json>,
    ) -> Result<BoxedStrategy<Json>, GenError> {
        if !f.negated {
            // One filter per keyword, so that a budget that runs out names
            // the keyword that rejected.
            for (loc, kw) in &f.inexact {
                let vs = self.validators([loc])?;
                s = budget::filter(
                    s,
                    Label::new(kw, &loc.eval),
                    "a keyword judged by the validator",
                    all_valid(vs),
                );
            }
        }
        for (loc, src) in &f.nots {
            let vs = self.validators([loc])?;
            s = budget::filter(s, Label::new(src.kw, &src.loc.eval), "`not`", move |v| {
                !vs.iter().any(|x| x.is_valid(v))
            });
        }
        for branches in &f.exclusive {
            let vs = self.validators(branches)?;
            // The branches are `.../oneOf/i`: the keyword's schema is two up.
            let at = branches
                .first()
                .and_then(|b| b.eval.rsplitn(3, '/').nth(2))
                .unwrap_or("");
            s = budget::filter(
                s,
                Label::new("oneOf", at),
                "`oneOf` matched by more than one branch",
                move |v| vs.iter().filter(|x| x.is_valid(v)).take(2).count() == 1,
            );
        }
        let at = f.nodes.first().map_or("", |l| l.eval.as_str());
        for n in &f.negs {
            s = match n {
                Neg::NotEnum(vals) => {
                    let vals = vals.clone();
                    budget::filter(
                        s,
                        Label::new("enum", at),
                        "a member of the enum",
                        move |v| !vals.iter().any(|e| json_eq(e, v)),
                    )
                }
                Neg::NotPattern(re) => {
                    let re = re.clone();
                    budget::filter(
                        s,
                        Label::new("pattern", at),
                        "matches the pattern",
                        move |v| v.as_str().is_some_and(|t| !re.is_match(t)),
                    )
                }
                Neg::NotFormat(name) => {
                    let fv = self.doc.format_validator(name)?;
                    budget::filter(s, Label::new("format", at), "is of the format", move |v| {
                        v.is_string() && !fv.is_valid(v)
                    })
                }
                Neg::NotMultipleOf(m) => {
                    let fv = Arc::new(
                        jsonschema::validator_for(&serde_json::json!({ "multipleOf": m }))
                            .map_err(|e| unsat("multipleOf", "", e.to_string()))?,
                    );
                    budget::filter(s, Label::new("multipleOf", at), "a multiple", move |v| {
                        v.is_number() && !fv.is_valid(v)
                    })
                }
                Neg::NoContains(locs) => {
                    let vs = self.validators(locs)?;
                    budget::filter(
                        s,
                        Label::new("contains", at),
                        "an item matches `contains`",
                        move |v| {
                            v.as_array().is_some_and(|a| {
                                !a.iter().any(|i| vs.iter().any(|x| x.is_valid(i)))
                            })
                        },
                    )
                }
                Neg::Duplicate => s,
            };
        }
        Ok(s)
    }

    /// `enum`/`const`: the members every schema accepts (in valid mode), or
    /// that at least fit the types and every other `enum` (negated).
    fn gen_enum(&self, f: &Flat, types: u8) -> Result<BoxedStrategy<Json>, GenError> {
        let (first, src) = &f.enums[0];
        let node_validators = if f.negated {
            vec![]
        } else {
            self.validators(&f.nodes)?
        };
        let members: Vec<Json> = first
            .iter()
            .filter(|v| types & type_of(v) != 0)
            .filter(|v| {
                f.enums[1..]
                    .iter()
                    .all(|(o, _)| o.iter().any(|w| json_eq(v, w)))
            })
            .filter(|v| node_validators.iter().all(|x| x.is_valid(v)))
            .cloned()
            .collect();
        if members.is_empty() {
            return Err(unsat(
                src.kw,
                &src.loc.eval,
                "has no member that the other keywords accept",
            ));
        }
        Ok(proptest::sample::select(members).boxed())
    }

    fn gen_typed(
        &self,
        f: &Flat,
        types: u8,
        depth: usize,
    ) -> Result<BoxedStrategy<Json>, GenError> {
        let mut alts: Vec<BoxedStrategy<Json>> = Vec::new();
        let mut first_err: Option<GenError> = None;
        let mut keep = |r: Result<BoxedStrategy<Json>, GenError>| -> Result<(), GenError> {
            match r {
                Ok(s) => alts.push(s),
                Err(e) if e.is_local() => {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
            Ok(())
        };
        // Objects first: unions shrink toward their first branch, and the
        // tool arguments this is for are objects.
        if types & OBJECT != 0 {
            keep(self.gen_object(f, depth))?;
        }
        if types & ARRAY != 0 {
            keep(self.gen_array(f, depth))?;
        }
        if types & STRING != 0 {
            keep(self.gen_string(f))?;
        }
        if types & NUMBER != 0 {
            keep(self.gen_number(f, types))?;
        }
        if types & BOOL != 0 {
            alts.push(any::<bool>().prop_map(Json::Bool).boxed());
        }
        if types & NULL != 0 {
            alts.push(Just(Json::Null).boxed());
        }
        match alts.len() {
            0 => Err(first_err.unwrap_or_else(|| {
                let at = f
                    .types
                    .as_ref()
                    .map(|t| t.1.loc.eval.clone())
                    .unwrap_or_default();
                unsat(
                    "type",
                    &at,
                    "allows no type that the other keywords leave a value for",
                )
            })),
            1 => Ok(alts.pop().expect("one")),
            _ => Ok(Union::new(alts).boxed()),
        }
    }

    fn gen_string(&self, f: &Flat) -> Result<BoxedStrategy<Json>, GenError> {
        let lo = f.min_len.as_ref().map_or(0, |x| x.0);
        if lo > MAX_STRING {
            let src = &f.min_len.as_ref().expect("lo > 0").1;
            return Err(GenError::new(
                Kind::Unsupported,
                "minLength",
                &src.loc.eval,
                format!(
                    "asks for {lo} characters, more than the generator's bound of {MAX_STRING}"
                ),
            ));
        }
        let hi = f.max_len.as_ref().map(|x| x.0);
        if let (Some(h), Some((_, src))) = (hi, &f.max_len) {
            if h < lo {
                return Err(unsat(
                    src.kw,
                    &src.loc.eval,
                    format!("({h}) is below `minLength` ({lo})"),
                ));
            }
        }
        let (lo, hi_decl) = (lo as usize, hi.map(|h| h.min(usize::MAX as u64) as usize));
        let gen_hi = hi_decl.unwrap_or(usize::MAX).min(lo + EXTRA_CHARS as usize);
        let in_len = move |s: &str| {
            let n = s.chars().count();
            n >= lo && hi_decl.is_none_or(|h| n <= h)
        };
        let mut patterns = Vec::new();
        for (p, src) in &f.patterns {
            patterns.push(Pattern::compile(p, &src.loc.eval)?);
        }
        let checked: Vec<&str> = f
            .formats
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| format::CHECKED.contains(n) || format::UNCHECKED_GENERATED.contains(n))
            .collect();
        let mut rest_patterns: Vec<Arc<regex::Regex>> = Vec::new();
        let mut rest_formats: Vec<&str> = Vec::new();
        let base: BoxedStrategy<String> = if let Some(first) = checked.first() {
            rest_patterns.extend(patterns.iter().map(|p| p.regex.clone()));
            rest_formats.extend(checked[1..].iter().copied());
            let s = format::strategy(first).expect("every checked format has a generator");
            budget::filter(
                s,
                Label::new("format", &f.formats[0].1.loc.eval),
                "format value outside the length bounds",
                move |s: &String| in_len(s),
            )
        } else if let Some(first) = patterns.first() {
            rest_patterns.extend(patterns[1..].iter().map(|p| p.regex.clone()));
            first.strategy(lo, hi_decl.unwrap_or(MAX_STRING as usize * 2), filler())
        } else {
            proptest::collection::vec(filler(), lo..=gen_hi)
                .prop_map(|cs| cs.into_iter().collect())
                .boxed()
        };
        let mut s = base;
        if !rest_patterns.is_empty() {
            let at = f.patterns.last().map_or("", |p| p.1.loc.eval.as_str());
            s = budget::filter(
                s,
                Label::new("pattern", at),
                "another `pattern` does not match",
                move |t| rest_patterns.iter().all(|r| r.is_match(t)),
            );
        }
        if !rest_formats.is_empty() {
            let vs: Vec<Validator> = rest_formats
                .iter()
                .map(|n| self.doc.format_validator(n))
                .collect::<Result<_, _>>()?;
            let at = f.formats.last().map_or("", |p| p.1.loc.eval.as_str());
            s = budget::filter(
                s,
                Label::new("format", at),
                "another `format` does not hold",
                move |t| {
                    let j = Json::String(t.clone());
                    vs.iter().all(|x| x.is_valid(&j))
                },
            );
        }
        Ok(s.prop_map(Json::String).boxed())
    }
}

/// Whether `s` makes a value on a fixed seed within the probe budget
/// (filter attempts and time): a filtered strategy that cannot is left out,
/// or refused by name, rather than left to fail when a value is drawn.
pub(crate) fn probe<T: std::fmt::Debug>(s: &BoxedStrategy<T>, limits: budget::Limits) -> bool {
    probe_where(s, limits).is_ok()
}

/// [`probe`], and when it fails, the filter that ran the budget out.
pub(crate) fn probe_where<T: std::fmt::Debug>(
    s: &BoxedStrategy<T>,
    limits: budget::Limits,
) -> Result<(), Option<Label>> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    // The budget, not the runner, bounds the work.
    let config = Config {
        max_local_rejects: u32::MAX,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let (ok, label) = budget::within(limits, || {
        (0..4).any(|_| s.new_tree(&mut runner).map(|t| t.current()).is_ok())
    });
    if ok {
        Ok(())
    } else {
        Err(label)
    }
}

impl Gen {
    /// `s` when it yields a value within the probe budget; otherwise the
    /// refusal naming the keyword whose filter rejected every value.
    pub(crate) fn yields(
        &self,
        s: BoxedStrategy<Json>,
        at: &str,
    ) -> Result<BoxedStrategy<Json>, GenError> {
        match probe_where(&s, self.budget.probe) {
            Ok(()) => Ok(s),
            Err(label) => {
                let l = label.unwrap_or_else(|| Label::new("$schema", at));
                Err(GenError::new(
                    Kind::Exhausted,
                    &l.keyword,
                    &l.pointer,
                    format!(
                        "rejected every value drawn within the probe budget ({} attempts, {} ms): \
                         the keywords around it likely contradict each other",
                        self.budget.probe.attempts,
                        self.budget.probe.time.as_millis()
                    ),
                ))
            }
        }
    }
}
