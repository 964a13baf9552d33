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
    pub fn gen(&self, conj: &[Loc], depth: usize) -> Result<BoxedStrategy<Json>, GenError> {
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

    /// Numbers: from the bounds and the integer multiples, or as k·m for a
    /// fractional `multipleOf` m.
    fn gen_number(&self, f: &Flat, types: u8) -> Result<BoxedStrategy<Json>, GenError> {
        check_number_bounds(f)?;
        let int_ms: Vec<i64> = f
            .multiple_of
            .iter()
            .filter(|(m, _)| m.fract() == 0.0 && *m <= 9.0e15)
            .map(|(m, _)| *m as i64)
            .collect();
        let frac_ms: Vec<&(f64, _)> = f
            .multiple_of
            .iter()
            .filter(|(m, _)| m.fract() != 0.0 || *m > 9.0e15)
            .collect();
        let alts = if frac_ms.is_empty() {
            integer_multiple_numbers(f, types, &int_ms)?
        } else {
            vec![self.fractional_multiple_numbers(f, types, &int_ms, &frac_ms)?]
        };
        if alts.is_empty() {
            let (kw, at) = f
                .multiple_of
                .first()
                .map(|(_, s)| (s.kw, s.loc.eval.clone()))
                .or_else(|| f.max.as_ref().map(|b| (b.src.kw, b.src.loc.eval.clone())))
                .unwrap_or(("type", String::new()));
            return Err(unsat(
                kw,
                &at,
                "leaves no number of the allowed type within the bounds",
            ));
        }
        Ok(Union::new(alts).boxed())
    }

    /// Fractional multiples: k·m drawn, then judged by the validator, since
    /// k·m in floating point is not always a multiple of m the way the
    /// validator computes it.
    fn fractional_multiple_numbers(
        &self,
        f: &Flat,
        types: u8,
        int_ms: &[i64],
        frac_ms: &[&(f64, Src)],
    ) -> Result<BoxedStrategy<Json>, GenError> {
        let (m, src) = frac_ms[0];
        let lo = f.min.as_ref().map_or(-FLOAT_SPAN, |b| b.v) / m;
        let hi = f.max.as_ref().map_or(FLOAT_SPAN, |b| b.v) / m;
        let (klo, khi) = (
            lo.ceil().max(-FLOAT_SPAN) as i64,
            hi.floor().min(FLOAT_SPAN) as i64,
        );
        if klo > khi {
            return Err(unsat(
                src.kw,
                &src.loc.eval,
                "has no multiple within the bounds",
            ));
        }
        let m = *m;
        let int_only = types & FLOAT == 0;
        let vs = self.validators(f.multiple_of.iter().map(|x| &x.1.loc))?;
        let mut source = (klo..=khi)
            .prop_map(move |k| Json::from(k as f64 * m))
            .boxed();
        // Integers that are multiples of a decimal fraction a·10^-d are the
        // multiples of a / gcd(a, 10^d): drawn as such when only integers
        // will do (k·m is then rarely an integer).
        if int_only && frac_ms.len() == 1 {
            if let Some(step) = integer_step(m).and_then(|st| lcm_all(st, int_ms)) {
                let mut ints = vec![source];
                if let Some(s) = int_strategy(f, step) {
                    ints.push(s);
                }
                if f.min
                    .as_ref()
                    .is_none_or(|b| b.v < 0.0 || (b.v == 0.0 && !b.excl))
                    && f.max
                        .as_ref()
                        .is_none_or(|b| b.v > 0.0 || (b.v == 0.0 && !b.excl))
                {
                    ints.push(Just(Json::from(0)).boxed());
                }
                source = Union::new(ints).boxed();
            }
        }
        Ok(budget::filter(
            source,
            Label::new(src.kw, &src.loc.eval),
            "k·multipleOf is not a multiple in floating point",
            move |v| (!int_only || type_of(v) == INT) && vs.iter().all(|x| x.is_valid(v)),
        ))
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

    pub(crate) fn item_conj(f: &Flat, i: usize) -> Vec<Loc> {
        let mut c = Vec::new();
        for part in &f.arrays {
            if let Some(l) = part.prefix.get(i) {
                c.push(l.clone());
            } else if let Some(l) = &part.items {
                c.push(l.clone());
            }
        }
        c
    }

    /// Arrays: the positions with their own strategy (prefixes, `contains`
    /// matches, the forced slot of an invalid value), then a tail, cut to
    /// the drawn length; filtered on `uniqueItems`.
    fn gen_array(&self, f: &Flat, depth: usize) -> Result<BoxedStrategy<Json>, GenError> {
        let shape = array_shape(f)?;
        let lo = shape.lo;
        if depth >= MAX_DEPTH {
            if lo > 0 {
                let at = f.nodes.first().map_or("", |l| l.eval.as_str());
                return Err(GenError::new(
                    Kind::TooDeep,
                    "minItems",
                    at,
                    "needs items nested deeper than the generator's bound",
                ));
            }
            return Ok(Just(Json::Array(vec![])).boxed());
        }
        let extra = EXTRA_ITEMS[depth];
        // hi_decl >= lo was checked by array_shape.
        let mut gen_hi = shape
            .hi_decl
            .map_or(usize::MAX, |h| h as usize)
            .min(lo + extra)
            .min(MAX_ITEMS as usize)
            .max(lo);
        let fixed = self.fixed_items(f, &shape, &mut gen_hi, depth)?;
        let tail = self.tail_items(f, &shape, fixed.len(), &mut gen_hi, depth)?;
        Ok(assemble_array(f, fixed, tail, lo, gen_hi))
    }

    /// The strategies of the positions before the tail; a position past
    /// the minimum length whose schema cannot be generated locally ends
    /// the array there (`gen_hi` is lowered to it).
    fn fixed_items(
        &self,
        f: &Flat,
        shape: &ArrayShape,
        gen_hi: &mut usize,
        depth: usize,
    ) -> Result<Vec<BoxedStrategy<Json>>, GenError> {
        let mut fixed: Vec<BoxedStrategy<Json>> = Vec::new();
        for i in 0..shape.fixed_len.min(*gen_hi) {
            let strat = if shape.forced_at == Some(i) {
                match &f.force {
                    Some(Force::Item(_, s)) | Some(Force::Tail(s)) => Ok(s.clone()),
                    _ => unreachable!("forced_at comes from an item force"),
                }
            } else {
                let mut conj = Self::item_conj(f, i);
                if (i as u64) < shape.contains_n {
                    conj.extend(f.contains.iter().map(|s| s.loc.child("contains")));
                }
                self.gen(&conj, depth + 1)
            };
            match strat {
                Ok(s) => fixed.push(s),
                Err(e) if e.is_local() && i >= shape.lo => {
                    *gen_hi = i;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(fixed)
    }

    /// The items after the `k` fixed ones, as many as the drawn length
    /// needs; none when their schema cannot be generated locally and the
    /// minimum length is already met (`gen_hi` is then lowered to `k`).
    fn tail_items(
        &self,
        f: &Flat,
        shape: &ArrayShape,
        k: usize,
        gen_hi: &mut usize,
        depth: usize,
    ) -> Result<BoxedStrategy<Vec<Json>>, GenError> {
        let lo = shape.lo;
        let tail = if *gen_hi > k {
            let conj = Self::item_conj(f, shape.fixed_len.max(shape.prefix_len));
            match self.gen(&conj, depth + 1) {
                Ok(s) => Some(s),
                Err(e) if e.is_local() && lo <= k => {
                    *gen_hi = k;
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        Ok(match tail {
            Some(t) => proptest::collection::vec(t, lo.saturating_sub(k)..=*gen_hi - k).boxed(),
            None => Just(vec![]).boxed(),
        })
    }

    /// The schemas a property called `name` must satisfy.
    pub(crate) fn prop_conj(f: &Flat, name: &str, patterns: &[Vec<Pattern>]) -> Vec<Loc> {
        let mut c = Vec::new();
        for (part, pats) in f.objects.iter().zip(patterns) {
            let mut matched = false;
            if let Some((_, l)) = part.props.iter().find(|(n, _)| n == name) {
                c.push(l.clone());
                matched = true;
            }
            for (p, (_, l)) in pats.iter().zip(&part.patterns) {
                if p.regex.is_match(name) {
                    c.push(l.clone());
                    matched = true;
                }
            }
            if !matched {
                if let Some(a) = &part.additional {
                    c.push(a.clone());
                }
            }
        }
        c
    }

    /// Objects: the required and declared properties, properties no schema
    /// names, one per `patternProperties` pattern, and the forced one of an
    /// invalid value; filtered on the property count.
    fn gen_object(&self, f: &Flat, depth: usize) -> Result<BoxedStrategy<Json>, GenError> {
        let (required, forced_prop, forced_extra) = object_musts(f);
        let min_props = property_count_bounds(f, &required, forced_extra.is_some())?;
        if depth >= MAX_DEPTH {
            if !required.is_empty() || min_props > 0 || forced_extra.is_some() {
                let at = f.nodes.first().map_or("", |l| l.eval.as_str());
                return Err(GenError::new(
                    Kind::TooDeep,
                    "required",
                    at,
                    "needs properties nested deeper than the generator's bound",
                ));
            }
            return Ok(Just(Json::Object(Map::new())).boxed());
        }
        let plan = self.object_plan(f, required, forced_prop)?;
        let (req, opt) = self.declared_props(&plan, depth)?;
        let fresh = plan.fresh_names();
        let need = (min_props as usize)
            .saturating_sub(req.len() + opt.len() + usize::from(forced_extra.is_some()));
        let extras = self.undeclared_props(&plan, &fresh, need, forced_extra.is_some(), depth)?;
        let pat_extras = self.pattern_props(&plan, depth);
        let forced_extra = match forced_extra {
            Some(v) => (fresh, v).prop_map(Some).boxed(),
            None => Just(None).boxed(),
        };
        let s = assemble_object(req, opt, pat_extras, extras, forced_extra);
        Ok(property_count_filter(f, s, min_props))
    }

    /// The object's names and pattern regexes, and `propertyNames`' verdict
    /// on the names the schema spells out: a required one it refuses makes
    /// the object impossible, an optional one is never generated.
    fn object_plan<'f>(
        &self,
        f: &'f Flat,
        required: Vec<String>,
        forced_prop: Option<(String, BoxedStrategy<Json>)>,
    ) -> Result<ObjectPlan<'f>, GenError> {
        let at = f.nodes.first().map_or("", |l| l.eval.as_str());
        let forbidden: BTreeSet<&str> = f.forbidden.iter().map(String::as_str).collect();
        let mut patterns: Vec<Vec<Pattern>> = Vec::new();
        for part in &f.objects {
            let mut v = Vec::new();
            for (p, l) in &part.patterns {
                v.push(Pattern::compile(p, &l.eval)?);
            }
            patterns.push(v);
        }
        let name_validators = self.validators(&f.property_names)?;
        let mut plan = ObjectPlan {
            f,
            at,
            forbidden,
            required,
            forced_prop,
            patterns,
            name_validators,
            declared: BTreeSet::new(),
        };
        if let Some(n) = plan
            .required
            .iter()
            .find(|n| !plan.forbidden.contains(n.as_str()) && !plan.name_ok(n))
        {
            let at = f.property_names.first().map_or("", |l| l.eval.as_str());
            return Err(unsat(
                "propertyNames",
                at,
                format!("refuses the name {n:?}, which `required` asks for"),
            ));
        }
        plan.declared = f
            .objects
            .iter()
            .flat_map(|p| p.props.iter().map(|(n, _)| n.clone()))
            .chain(plan.required.iter().cloned())
            .filter(|n| !plan.forbidden.contains(n.as_str()) && plan.name_ok(n))
            .collect();
        Ok(plan)
    }

    /// The required properties (the forced one of an invalid value among
    /// them), then the optional declared ones; an optional property whose
    /// schema cannot be generated locally is left out.
    #[allow(clippy::type_complexity)]
    fn declared_props(
        &self,
        plan: &ObjectPlan,
        depth: usize,
    ) -> Result<
        (
            Vec<(String, BoxedStrategy<Json>)>,
            Vec<(String, BoxedStrategy<Json>)>,
        ),
        GenError,
    > {
        let f = plan.f;
        let mut req: Vec<(String, BoxedStrategy<Json>)> = Vec::new();
        for name in &plan.required {
            if plan.forbidden.contains(name.as_str()) {
                continue;
            }
            let s = match &plan.forced_prop {
                Some((n, s)) if n == name => s.clone(),
                _ => self.gen(&Self::prop_conj(f, name, &plan.patterns), depth + 1)?,
            };
            req.push((name.clone(), s));
        }
        let mut opt: Vec<(String, BoxedStrategy<Json>)> = Vec::new();
        for name in plan.declared.iter().filter(|n| !plan.required.contains(n)) {
            self.check_build(plan.at)?;
            match self.gen(&Self::prop_conj(f, name, &plan.patterns), depth + 1) {
                Ok(s) => opt.push((name.clone(), s)),
                Err(e) if e.is_local() => {}
                Err(e) => return Err(e),
            }
        }
        Ok((req, opt))
    }

    /// Properties no schema names (at least `need` of them), under every
    /// object part's `additionalProperties`. None when there is no name
    /// left for them (`propertyNames: false`, a pattern matching every
    /// name), which is an error when some are needed.
    fn undeclared_props(
        &self,
        plan: &ObjectPlan,
        fresh: &BoxedStrategy<String>,
        need: usize,
        forced_extra: bool,
        depth: usize,
    ) -> Result<BoxedStrategy<Vec<(String, Json)>>, GenError> {
        let f = plan.f;
        let extra_conj: Vec<Loc> = f
            .objects
            .iter()
            .filter_map(|p| p.additional.clone())
            .collect();
        let fresh_ok = probe(fresh, self.budget.probe);
        if !fresh_ok && (need > 0 || forced_extra) {
            return Err(unsat(
                if f.property_names.is_empty() {
                    "patternProperties"
                } else {
                    "propertyNames"
                },
                plan.at,
                "leaves no name for the properties `minProperties` or the violation needs",
            ));
        }
        Ok(if f.no_extras || !fresh_ok {
            Just(vec![]).boxed()
        } else {
            match self.gen(&extra_conj, depth + 1) {
                Ok(v) => {
                    let hi = EXTRA_PROPS[depth].max(need);
                    proptest::collection::vec((fresh.clone(), v), need..=hi).boxed()
                }
                Err(e) if e.is_local() => Just(vec![]).boxed(),
                Err(e) => return Err(e),
            }
        })
    }

    /// One property per pattern, named from the pattern, when no other
    /// pattern or declared name could claim it (then its schemas are
    /// exactly that pattern's and the other parts' additionalProperties).
    fn pattern_props(
        &self,
        plan: &ObjectPlan,
        depth: usize,
    ) -> Vec<BoxedStrategy<Option<(String, Json)>>> {
        let (f, patterns) = (plan.f, &plan.patterns);
        let mut pat_extras: Vec<BoxedStrategy<Option<(String, Json)>>> = Vec::new();
        if f.no_extras || EXTRA_PROPS[depth] == 0 {
            return pat_extras;
        }
        for (pi, (part, pats)) in f.objects.iter().zip(patterns).enumerate() {
            for (pj, (p, (_, loc))) in pats.iter().zip(&part.patterns).enumerate() {
                let mut conj = vec![loc.clone()];
                conj.extend(
                    f.objects
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != pi)
                        .filter_map(|(_, o)| o.additional.clone()),
                );
                let Ok(value) = self.gen(&conj, depth + 1) else {
                    continue;
                };
                let others: Vec<Arc<regex::Regex>> = patterns
                    .iter()
                    .enumerate()
                    .flat_map(|(i, ps)| {
                        ps.iter()
                            .enumerate()
                            .filter(move |(j, _)| (i, *j) != (pi, pj))
                            .map(|(_, q)| q.regex.clone())
                    })
                    .collect();
                let declared = plan.declared.clone();
                let forbidden = f.forbidden.clone();
                let nv = plan.name_validators.clone();
                let name = budget::filter(
                    p.strategy(1, 24, filler()),
                    Label::new("patternProperties", &loc.eval),
                    "a name another schema claims",
                    move |n| {
                        !declared.contains(n)
                            && !forbidden.contains(n)
                            && !others.iter().any(|r| r.is_match(n))
                            && nv.iter().all(|v| v.is_valid(&Json::String(n.clone())))
                    },
                );
                // `^ab` beside `^a`: every name of the one matches the
                // other, so this pattern gets no property of its own.
                if !probe(&name, self.budget.probe) {
                    continue;
                }
                pat_extras.push(proptest::option::of((name, value)).boxed());
            }
        }
        pat_extras
    }
}

/// What [`Gen::gen_object`] has settled before it builds the property
/// strategies.
struct ObjectPlan<'f> {
    f: &'f Flat,
    /// Where the object's schema is, for errors and budget labels.
    at: &'f str,
    /// Properties an invalid value must not have.
    forbidden: BTreeSet<&'f str>,
    required: Vec<String>,
    /// The property an invalid value gets from its violation.
    forced_prop: Option<(String, BoxedStrategy<Json>)>,
    /// Per object part, its compiled `patternProperties`.
    patterns: Vec<Vec<Pattern>>,
    /// `propertyNames`, judging every name.
    name_validators: Vec<Validator>,
    /// Names some schema spells out that may be generated.
    declared: BTreeSet<String>,
}

impl ObjectPlan<'_> {
    fn name_ok(&self, n: &str) -> bool {
        self.name_validators
            .iter()
            .all(|v| v.is_valid(&Json::String(n.to_string())))
    }

    /// Names nobody declares or matches by pattern and `propertyNames`
    /// accepts, for properties no schema names.
    fn fresh_names(&self) -> BoxedStrategy<String> {
        let all_patterns: Vec<Arc<regex::Regex>> = self
            .patterns
            .iter()
            .flatten()
            .map(|p| p.regex.clone())
            .collect();
        let declared = self.declared.clone();
        let forbidden: Vec<String> = self.f.forbidden.clone();
        let name_validators = self.name_validators.clone();
        budget::filter(
            proptest::string::string_regex("[a-z][a-z0-9_]{0,9}")
                .expect("constant regex")
                .boxed(),
            Label::new("additionalProperties", self.at),
            "a name some schema declares or matches",
            move |n| {
                !declared.contains(n)
                    && !forbidden.contains(n)
                    && !all_patterns.iter().any(|r| r.is_match(n))
                    && name_validators
                        .iter()
                        .all(|v| v.is_valid(&Json::String(n.clone())))
            },
        )
    }
}

/// The length bounds of an array and its positions with their own
/// strategy, as [`array_shape`] settles them.
struct ArrayShape {
    /// The fewest items: `minItems`, raised by `minContains`, the forced
    /// slot and a duplicate to make.
    lo: usize,
    /// `maxItems`, checked to be at least `lo`.
    hi_decl: Option<u64>,
    /// The longest `prefixItems`.
    prefix_len: usize,
    /// Positions with their own strategy: the prefixes, the forced slot,
    /// and the `contains` matches.
    fixed_len: usize,
    /// The first this many positions match every `contains`.
    contains_n: u64,
    /// The position of an invalid value's forced item.
    forced_at: Option<usize>,
}

/// The length bounds and fixed positions of an array, or the error naming
/// the count no generated array can meet.
fn array_shape(f: &Flat) -> Result<ArrayShape, GenError> {
    let mut lo = f.min_items.as_ref().map_or(0, |x| x.0);
    if lo > MAX_ITEMS {
        let src = &f.min_items.as_ref().expect("lo > 0").1;
        return Err(GenError::new(
            Kind::Unsupported,
            "minItems",
            &src.loc.eval,
            format!("asks for {lo} items, more than the generator's bound of {MAX_ITEMS}"),
        ));
    }
    let prefix_len = f.arrays.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
    let mut fixed_len = prefix_len;
    let contains_n = if f.contains.is_empty() {
        0
    } else {
        f.min_contains.max(1)
    };
    if contains_n > MAX_ITEMS {
        let src = &f.contains[0];
        return Err(GenError::new(
            Kind::Unsupported,
            "minContains",
            &src.loc.eval,
            format!("asks for {contains_n} matches, more than the generator's bound of {MAX_ITEMS} items"),
        ));
    }
    if contains_n > 0 {
        fixed_len = fixed_len.max(contains_n as usize);
        lo = lo.max(contains_n);
    }
    let forced_at = match &f.force {
        Some(Force::Item(i, _)) => Some(*i),
        Some(Force::Tail(_)) => Some(prefix_len),
        _ => None,
    };
    if let Some(i) = forced_at {
        fixed_len = fixed_len.max(i + 1);
        lo = lo.max(i as u64 + 1);
    }
    if f.negs.iter().any(|n| matches!(n, Neg::Duplicate)) {
        lo = lo.max(2);
    }
    let hi_decl = f.max_items.as_ref().map(|x| x.0);
    if let (Some(h), Some((_, src))) = (hi_decl, &f.max_items) {
        if h < lo {
            return Err(unsat(
                src.kw,
                &src.loc.eval,
                format!("({h}) is below the {lo} items needed"),
            ));
        }
    }
    Ok(ArrayShape {
        lo: lo as usize,
        hi_decl,
        prefix_len,
        fixed_len,
        contains_n,
        forced_at,
    })
}

/// One array of `lo..=gen_hi` items from the fixed positions and the tail;
/// an invalid value that must repeat an item gets its first one last, and
/// a valid one is filtered on `uniqueItems`.
fn assemble_array(
    f: &Flat,
    fixed: Vec<BoxedStrategy<Json>>,
    tail: BoxedStrategy<Vec<Json>>,
    lo: usize,
    gen_hi: usize,
) -> BoxedStrategy<Json> {
    let duplicate = f.negs.iter().any(|n| matches!(n, Neg::Duplicate));
    let s = (fixed, tail, lo..=gen_hi)
        .prop_map(move |(fixed, tail, n)| {
            let mut v: Vec<Json> = fixed.into_iter().chain(tail).take(n).collect();
            if duplicate && v.len() >= 2 {
                let last = v.len() - 1;
                v[last] = v[0].clone();
            }
            Json::Array(v)
        })
        .boxed();
    match (&f.unique, duplicate) {
        (Some(src), false) => budget::filter(
            s,
            Label::new(src.kw, &src.loc.eval),
            "`uniqueItems`: a repeated item",
            |v| {
                let a = v.as_array().expect("an array");
                a.iter()
                    .enumerate()
                    .all(|(i, x)| a[..i].iter().all(|y| !json_eq(x, y)))
            },
        ),
        _ => s,
    }
}

/// The names an object must have (`required`, and the property an invalid
/// value is forced to have), with the forced property and the forced
/// undeclared one.
#[allow(clippy::type_complexity)]
fn object_musts(
    f: &Flat,
) -> (
    Vec<String>,
    Option<(String, BoxedStrategy<Json>)>,
    Option<BoxedStrategy<Json>>,
) {
    let mut required: Vec<String> = Vec::new();
    for (n, _) in &f.required {
        if !required.contains(n) {
            required.push(n.clone());
        }
    }
    let forced_prop = match &f.force {
        Some(Force::Prop(n, s)) => Some((n.clone(), s.clone())),
        _ => None,
    };
    if let Some((n, _)) = &forced_prop {
        if !required.contains(n) {
            required.push(n.clone());
        }
    }
    let forced_extra = match &f.force {
        Some(Force::Extra(s)) => Some(s.clone()),
        _ => None,
    };
    (required, forced_prop, forced_extra)
}

/// `maxProperties` against the properties the object must have, and
/// `minProperties` against the generator's bound; the minimum count.
fn property_count_bounds(
    f: &Flat,
    required: &[String],
    forced_extra: bool,
) -> Result<u64, GenError> {
    if let Some((max, src)) = &f.max_props {
        let needed = required.len() as u64 + u64::from(forced_extra);
        if *max < needed {
            return Err(unsat(
                src.kw,
                &src.loc.eval,
                format!("({max}) is below the {needed} required properties"),
            ));
        }
    }
    let min_props = f.min_props.as_ref().map_or(0, |x| x.0);
    if min_props > MAX_ITEMS {
        let src = &f.min_props.as_ref().expect("> 0").1;
        return Err(GenError::new(
            Kind::Unsupported,
            "minProperties",
            &src.loc.eval,
            format!(
                "asks for {min_props} properties, more than the generator's bound of {MAX_ITEMS}"
            ),
        ));
    }
    Ok(min_props)
}

/// One object from its parts' strategies; a name made twice keeps its
/// first value (required, optional, pattern, undeclared, forced).
fn assemble_object(
    req: Vec<(String, BoxedStrategy<Json>)>,
    opt: Vec<(String, BoxedStrategy<Json>)>,
    pat_extras: Vec<BoxedStrategy<Option<(String, Json)>>>,
    extras: BoxedStrategy<Vec<(String, Json)>>,
    forced_extra: BoxedStrategy<Option<(String, Json)>>,
) -> BoxedStrategy<Json> {
    let (req_names, req_s): (Vec<String>, Vec<BoxedStrategy<Json>>) = req.into_iter().unzip();
    let (opt_names, opt_s): (Vec<String>, Vec<BoxedStrategy<Json>>) = opt.into_iter().unzip();
    let opt_s: Vec<BoxedStrategy<Option<Json>>> = opt_s
        .into_iter()
        .map(|s| proptest::option::of(s).boxed())
        .collect();
    (req_s, opt_s, pat_extras, extras, forced_extra)
        .prop_map(move |(r, o, p, e, fe)| {
            let mut m = Map::new();
            for (n, v) in req_names.iter().zip(r) {
                m.insert(n.clone(), v);
            }
            for (n, v) in opt_names.iter().zip(o) {
                if let Some(v) = v {
                    m.insert(n.clone(), v);
                }
            }
            for (n, v) in p.into_iter().flatten().chain(e).chain(fe) {
                m.entry(n).or_insert(v);
            }
            Json::Object(m)
        })
        .boxed()
}

/// `minProperties`/`maxProperties` on the assembled object: the counts
/// the parts do not settle (optional and pattern properties) are filtered.
fn property_count_filter(f: &Flat, s: BoxedStrategy<Json>, min_props: u64) -> BoxedStrategy<Json> {
    let max_props = f.max_props.as_ref().map(|x| x.0 as usize);
    if min_props == 0 && max_props.is_none() {
        return s;
    }
    let lo = min_props as usize;
    let src = f
        .min_props
        .as_ref()
        .map(|x| &x.1)
        .or(f.max_props.as_ref().map(|x| &x.1))
        .expect("one of them is set");
    budget::filter(
        s,
        Label::new(src.kw, &src.loc.eval),
        "property count outside minProperties..maxProperties",
        move |v| {
            let n = v.as_object().map_or(0, Map::len);
            n >= lo && max_props.is_none_or(|h| n <= h)
        },
    )
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

/// The lower bound above the upper one leaves no number.
fn check_number_bounds(f: &Flat) -> Result<(), GenError> {
    if let (Some(lo), Some(hi)) = (&f.min, &f.max) {
        if lo.v > hi.v || (lo.v == hi.v && (lo.excl || hi.excl)) {
            return Err(unsat(
                hi.src.kw,
                &hi.src.loc.eval,
                format!(
                    "({}) leaves no number above `{}` ({})",
                    hi.v, lo.src.kw, lo.v
                ),
            ));
        }
    }
    Ok(())
}

/// Numbers whose multiples are all integers (or none): integers of their
/// least common multiple, and floats when there is no multiple at all.
fn integer_multiple_numbers(
    f: &Flat,
    types: u8,
    int_ms: &[i64],
) -> Result<Vec<BoxedStrategy<Json>>, GenError> {
    let mut alts = Vec::new();
    let m = int_ms
        .iter()
        .try_fold(1i64, |acc, &m| lcm(acc, m))
        .ok_or_else(|| {
            GenError::new(
                Kind::Unsupported,
                "multipleOf",
                &f.multiple_of[0].1.loc.eval,
                "combines into a multiple larger than 64-bit integers",
            )
        })?;
    if types & INT != 0 {
        if let Some(s) = int_strategy(f, m) {
            alts.push(s);
        }
    }
    if types & FLOAT != 0 && int_ms.is_empty() {
        if let Some(s) = float_strategy(f) {
            alts.push(s);
        }
    }
    Ok(alts)
}

/// For a fraction `m` = a·10^-d (as its shortest decimal form spells it),
/// the least positive integer that is a multiple of it: a / gcd(a, 10^d).
fn integer_step(m: f64) -> Option<i64> {
    let text = format!("{m:e}");
    let (mantissa, exp) = text.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut a: i64 = format!("{int}{frac}").parse().ok()?;
    let d = frac.len() as i64 - exp;
    if a <= 0 || d <= 0 {
        return None;
    }
    for p in [2, 5] {
        let mut left = d;
        while left > 0 && a % p == 0 {
            a /= p;
            left -= 1;
        }
    }
    Some(a)
}

fn lcm_all(step: i64, others: &[i64]) -> Option<i64> {
    others.iter().try_fold(step, |acc, &m| lcm(acc, m))
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: i64, b: i64) -> Option<i64> {
    (a / gcd(a, b)).checked_mul(b)
}

/// Integers in the bounds, multiples of `m`.
fn int_strategy(f: &Flat, m: i64) -> Option<BoxedStrategy<Json>> {
    const LIM: f64 = 9.2e18;
    let lo = f.min.as_ref().map_or(i64::MIN as f64, |b| {
        if b.excl {
            b.v.floor() + 1.0
        } else {
            b.v.ceil()
        }
    });
    let hi = f.max.as_ref().map_or(i64::MAX as f64, |b| {
        if b.excl {
            b.v.ceil() - 1.0
        } else {
            b.v.floor()
        }
    });
    if lo > hi || lo > LIM || hi < -LIM {
        return None;
    }
    let (lo, hi) = (lo.max(-LIM) as i64, hi.min(LIM) as i64);
    let klo = lo.div_euclid(m) + i64::from(lo.rem_euclid(m) != 0);
    let khi = hi.div_euclid(m);
    if klo > khi {
        return None;
    }
    let to_json = move |k: i64| Json::from(k * m);
    let full = (klo..=khi).prop_map(to_json).boxed();
    if khi.saturating_sub(klo) <= 2 * SMALL_WINDOW {
        return Some(full);
    }
    // Small values near zero (or the bound nearest it) first, so that
    // shrinking and most draws stay readable; the full range as often.
    let (wlo, whi) = if klo > 0 {
        (klo, klo + SMALL_WINDOW)
    } else if khi < 0 {
        (khi - SMALL_WINDOW, khi)
    } else {
        ((-SMALL_WINDOW).max(klo), SMALL_WINDOW.min(khi))
    };
    Some(Union::new(vec![(wlo..=whi).prop_map(to_json).boxed(), full]).boxed())
}

fn float_strategy(f: &Flat) -> Option<BoxedStrategy<Json>> {
    let lo = f
        .min
        .as_ref()
        .map(|b| if b.excl { b.v.next_up() } else { b.v });
    let hi = f
        .max
        .as_ref()
        .map(|b| if b.excl { b.v.next_down() } else { b.v });
    let (lo, hi) = match (lo, hi) {
        (Some(l), Some(h)) => (l, h),
        (Some(l), None) => (l, l + FLOAT_SPAN),
        (None, Some(h)) => (h - FLOAT_SPAN, h),
        (None, None) => (-FLOAT_SPAN, FLOAT_SPAN),
    };
    // NaN bounds compare false both ways: refused here too.
    if lo
        .partial_cmp(&hi)
        .is_none_or(|o| o == std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return None;
    }
    if lo == hi {
        return Some(Just(Json::from(lo)).boxed());
    }
    Some((lo..=hi).prop_map(Json::from).boxed())
}
