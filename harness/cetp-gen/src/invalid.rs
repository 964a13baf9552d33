//! Values that break one named constraint and are valid everywhere else.
//!
//! For a keyword `k` of a conjunction, the conjunction is generated with `k`
//! replaced by its negation (`minLength: n` by "at most n-1 characters",
//! `required: [p]` by "p absent", `additionalProperties: false` by "one
//! property nobody declares", ...), every other keyword kept. A constraint
//! of a nested value is broken inside an otherwise valid container: the
//! child's invalid strategy is forced into its slot (the property made
//! present, the array long enough).
//!
//! Which constraints are offered:
//! - keywords inside an `anyOf`/`oneOf` branch are not broken one by one
//!   (another branch may accept the value); the combinator itself is, by a
//!   value matching no branch, and for `oneOf` by one matching two;
//! - at a level with `enum`/`const`, only those and `type` are broken: the
//!   members are the only candidates there;
//! - a constraint no value can break (`minLength: 0`, a `pattern` matching
//!   every string of the allowed lengths) is left out: every strategy is
//!   tried on a fixed seed before it is offered, and must yield a value the
//!   whole schema rejects.

use crate::budget::{self, Label, Limits};
use crate::doc::{Doc, Loc};
use crate::error::{GenError, Kind, Violation};
use crate::flat::{expand, Bound, Flat, Force, Neg, Src, ALL, ARRAY, NUMBER, OBJECT, STRING};
use crate::format;
use crate::pattern::Pattern;
use crate::strategy::{any_json, probe, Gen, MAX_ITEMS, MAX_STRING};
use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// Nesting levels whose constraints are broken: deeper ones repeat the
/// shapes of those above in a recursive schema.
const MAX_INVALID_DEPTH: usize = 4;
/// Violations offered per schema, against schemas with thousands of
/// constraints.
const MAX_VIOLATIONS: usize = 512;

type Found = BTreeMap<Violation, Vec<BoxedStrategy<Json>>>;

fn violation(src: &Src) -> Violation {
    Violation {
        pointer: src.loc.eval.clone(),
        keyword: src.kw.to_string(),
    }
}

/// Each candidate is probed on its own: a union that holds one impossible
/// alternative (a `oneOf` whose branches cannot overlap, asked for a value
/// matching two) would otherwise fail on the draws that pick it.
fn add(found: &mut Found, v: Violation, s: BoxedStrategy<Json>, limits: Limits) {
    if (found.len() < MAX_VIOLATIONS || found.contains_key(&v)) && probe(&s, limits) {
        found.entry(v).or_default().push(s);
    }
}

/// `f` with its types narrowed to `bits` (the keyword applies to those
/// only); None when nothing is left.
fn narrowed(f: &Flat, bits: u8) -> Option<Flat> {
    let t = f.types() & bits;
    if t == 0 {
        return None;
    }
    let mut g = f.clone();
    let src = g.types.as_ref().map(|x| x.1.clone());
    g.types = Some((
        t,
        src.unwrap_or(Src {
            loc: Loc::root(),
            kw: "type",
            branch: false,
        }),
    ));
    g.negated = true;
    Some(g)
}

/// The negations [`Gen::negations`] collects: each is `base` (the
/// conjunction, marked negated) with one keyword replaced by its negation.
struct Negations {
    base: Flat,
    out: Vec<(Violation, Flat)>,
}

impl Negations {
    /// Offers `f` as the negation of the keyword at `src`, unless that
    /// keyword came in through an `anyOf`/`oneOf` branch (another branch
    /// may accept the value) or there is no such value (`f` is None: the
    /// keyword does not apply to the types allowed).
    fn push(&mut self, src: &Src, f: Option<Flat>) {
        if let Some(f) = f {
            if !src.branch {
                self.out.push((violation(src), f));
            }
        }
    }

    /// `type`: any other type.
    fn negate_type(&mut self, d: &Flat) {
        if let Some((mask, src)) = &d.types {
            if *mask != ALL {
                let mut f = self.base.clone();
                f.types = Some((ALL & !mask, src.clone()));
                self.push(src, Some(f));
            }
        }
    }

    /// `enum`/`const`: a value that is no member.
    fn negate_enums(&mut self, d: &Flat) {
        for (i, (vals, src)) in d.enums.iter().enumerate() {
            let mut f = self.base.clone();
            f.enums.remove(i);
            f.negs.push(Neg::NotEnum(vals.clone()));
            self.push(src, Some(f));
        }
    }

    /// The bounds, reversed, and `multipleOf`, missed.
    fn negate_number_keywords(&mut self, d: &Flat) {
        if let Some(b) = &d.min {
            let f = narrowed(&self.base, NUMBER).map(|mut f| {
                f.min = None;
                f.set_max(Bound {
                    v: b.v,
                    excl: !b.excl,
                    src: b.src.clone(),
                });
                f
            });
            self.push(&b.src, f);
        }
        if let Some(b) = &d.max {
            let f = narrowed(&self.base, NUMBER).map(|mut f| {
                f.max = None;
                f.set_min(Bound {
                    v: b.v,
                    excl: !b.excl,
                    src: b.src.clone(),
                });
                f
            });
            self.push(&b.src, f);
        }
        for (i, (m, src)) in d.multiple_of.iter().enumerate() {
            let f = narrowed(&self.base, NUMBER).map(|mut f| {
                f.multiple_of.remove(i);
                f.negs.push(Neg::NotMultipleOf(*m));
                f
            });
            self.push(src, f);
        }
    }

    /// The lengths, one past their bound; `pattern` and the checked
    /// `format`s, missed.
    fn negate_string_keywords(&mut self, d: &Flat) -> Result<(), GenError> {
        if let Some((n, src)) = &d.min_len {
            if *n > 0 {
                let f = narrowed(&self.base, STRING).map(|mut f| {
                    f.min_len = None;
                    if f.max_len.as_ref().is_none_or(|m| m.0 > n - 1) {
                        f.max_len = Some((n - 1, src.clone()));
                    }
                    f
                });
                self.push(src, f);
            }
        }
        if let Some((n, src)) = &d.max_len {
            if *n < MAX_STRING {
                let f = narrowed(&self.base, STRING).map(|mut f| {
                    f.max_len = None;
                    f.min_len = Some((n + 1, src.clone()));
                    f
                });
                self.push(src, f);
            }
        }
        for (i, (p, src)) in d.patterns.iter().enumerate() {
            let re = Pattern::compile(p, &src.loc.eval)?.regex;
            let f = narrowed(&self.base, STRING).map(|mut f| {
                f.patterns.remove(i);
                f.negs.push(Neg::NotPattern(re));
                f
            });
            self.push(src, f);
        }
        for (i, (name, src)) in d.formats.iter().enumerate() {
            if !format::CHECKED.contains(&name.as_str()) {
                continue;
            }
            let f = narrowed(&self.base, STRING).map(|mut f| {
                f.formats.remove(i);
                f.negs.push(Neg::NotFormat(name.clone()));
                f
            });
            self.push(src, f);
        }
        Ok(())
    }

    /// The item counts, one past their bound; `uniqueItems` by a repeated
    /// item; `contains` by no match.
    fn negate_array_keywords(&mut self, d: &Flat) {
        if let Some((n, src)) = &d.min_items {
            if *n > 0 {
                let f = narrowed(&self.base, ARRAY).map(|mut f| {
                    f.min_items = None;
                    if f.max_items.as_ref().is_none_or(|m| m.0 > n - 1) {
                        f.max_items = Some((n - 1, src.clone()));
                    }
                    f
                });
                self.push(src, f);
            }
        }
        if let Some((n, src)) = &d.max_items {
            if *n < MAX_ITEMS {
                let f = narrowed(&self.base, ARRAY).map(|mut f| {
                    f.max_items = None;
                    f.min_items = Some((n + 1, src.clone()));
                    f
                });
                self.push(src, f);
            }
        }
        if let Some(src) = &d.unique {
            let f = narrowed(&self.base, ARRAY).map(|mut f| {
                f.unique = None;
                f.negs.push(Neg::Duplicate);
                f
            });
            self.push(src, f);
        }
        for (i, src) in d.contains.iter().enumerate() {
            let f = narrowed(&self.base, ARRAY).map(|mut f| {
                f.contains.remove(i);
                f.negs
                    .push(Neg::NoContains(vec![src.loc.child("contains")]));
                f
            });
            self.push(src, f);
        }
    }

    /// The property counts, one past their bound; `required` by the
    /// property absent; `additionalProperties: false` by one property
    /// nobody declares.
    fn negate_object_keywords(&mut self, d: &Flat, doc: &Doc) {
        if let Some((n, src)) = &d.min_props {
            if *n > 0 {
                let f = narrowed(&self.base, OBJECT).map(|mut f| {
                    f.min_props = None;
                    if f.max_props.as_ref().is_none_or(|m| m.0 > n - 1) {
                        f.max_props = Some((n - 1, src.clone()));
                    }
                    f
                });
                self.push(src, f);
            }
        }
        if let Some((n, src)) = &d.max_props {
            if *n < MAX_ITEMS {
                let f = narrowed(&self.base, OBJECT).map(|mut f| {
                    f.max_props = None;
                    f.min_props = Some((n + 1, src.clone()));
                    f
                });
                self.push(src, f);
            }
        }
        let mut names: Vec<&String> = Vec::new();
        for (name, src) in &d.required {
            if names.contains(&name) {
                continue;
            }
            names.push(name);
            let f = narrowed(&self.base, OBJECT).map(|mut f| {
                f.required.retain(|(n, _)| n != name);
                f.forbidden.push(name.clone());
                f
            });
            self.push(src, f);
        }
        for part in &d.objects {
            let closed = part
                .additional
                .as_ref()
                .is_some_and(|l| doc.node(l) == Some(&Json::Bool(false)));
            if closed {
                let f = narrowed(&self.base, OBJECT).map(|mut f| {
                    f.force = Some(Force::Extra(any_json(1)));
                    f
                });
                self.push(&part.src, f);
            }
        }
    }

    /// `not: S`: S itself, folded in; left out when S cannot be generated
    /// locally.
    fn negate_nots(&mut self, d: &Flat, doc: &Doc) -> Result<(), GenError> {
        for (i, (loc, src)) in d.nots.iter().enumerate() {
            let mut f = self.base.clone();
            f.nots.remove(i);
            match f.add_schema(doc, loc, src.branch, 0) {
                Ok(()) => self.push(src, Some(f)),
                Err(e) if e.is_local() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Gen {
    pub fn invalid(&self) -> Result<Vec<(Violation, BoxedStrategy<Json>)>, GenError> {
        let root = self.doc.validator(&Loc::root())?;
        let mut found = Found::new();
        self.level(&[Loc::root()], 0, &mut found)?;
        let mut out = Vec::new();
        for (v, strategies) in found {
            let kept: Vec<BoxedStrategy<Json>> = strategies
                .into_iter()
                .map(|s| {
                    let root = root.clone();
                    budget::filter(
                        s,
                        Label::new(&v.keyword, &v.pointer),
                        "accepted by the schema",
                        move |x| !root.is_valid(x),
                    )
                })
                .filter(|s| probe(s, self.budget.probe))
                .collect();
            if !kept.is_empty() {
                out.push((v, Union::new(kept).boxed()));
            }
        }
        Ok(out)
    }

    /// Violations of the values `conj` describes, at `depth`.
    fn level(&self, conj: &[Loc], depth: usize, found: &mut Found) -> Result<(), GenError> {
        self.check_build(conj.first().map_or("", |l| l.eval.as_str()))?;
        let flat = match Flat::of(&self.doc, conj) {
            Ok(f) => f,
            // The schema `false` (a property that must be absent): any value
            // breaks it.
            Err(e) if e.kind == Kind::Unsatisfiable && e.keyword == "false" => {
                let v = Violation {
                    pointer: e.pointer,
                    keyword: "false".into(),
                };
                add(found, v, any_json(depth), self.budget.probe);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for (ci, c) in flat.choices.iter().enumerate() {
            // An `if` is broken through its arms' keywords, judged by the
            // whole schema at the end.
            if c.src.branch || c.cond.is_some() {
                continue;
            }
            let branches = self.validators_of(&c.branches)?;
            let mut rest = flat.clone();
            rest.choices.remove(ci);
            if let Ok(s) = self.gen_disjuncts(rest, depth) {
                let b = branches.clone();
                let s = budget::filter(
                    s,
                    Label::new(c.src.kw, &c.src.loc.eval),
                    "matches a branch",
                    move |v| !b.iter().any(|x| x.is_valid(v)),
                );
                add(found, violation(&c.src), s, self.budget.probe);
            }
            if c.exclusive {
                let mut both = flat.clone();
                both.choices[ci].exclusive = false;
                if let Ok(s) = self.gen_disjuncts(both, depth) {
                    let s = budget::filter(
                        s,
                        Label::new(c.src.kw, &c.src.loc.eval),
                        "matches fewer than two branches",
                        move |v| branches.iter().filter(|x| x.is_valid(v)).take(2).count() == 2,
                    );
                    add(found, violation(&c.src), s, self.budget.probe);
                }
            }
        }
        let mut ds = Vec::new();
        match expand(&self.doc, flat, &mut ds) {
            Ok(()) => {}
            Err(e) if e.is_local() => return Ok(()),
            Err(e) => return Err(e),
        }
        for d in &ds {
            for (v, f) in self.negations(d)? {
                match self.gen_flat(&f, depth) {
                    Ok(s) => add(found, v, s, self.budget.probe),
                    Err(e) if e.is_local() => {}
                    Err(e) => return Err(e),
                }
            }
            if depth < MAX_INVALID_DEPTH {
                self.children(d, depth, found)?;
            }
        }
        Ok(())
    }

    fn validators_of(&self, locs: &[Loc]) -> Result<Vec<crate::doc::Validator>, GenError> {
        locs.iter().map(|l| self.doc.validator(l)).collect()
    }

    /// The conjunction `d` with one of its own keywords negated, per keyword.
    /// At a level with `enum`/`const`, only those and `type` are negated.
    fn negations(&self, d: &Flat) -> Result<Vec<(Violation, Flat)>, GenError> {
        let mut base = d.clone();
        base.negated = true;
        let mut n = Negations {
            base,
            out: Vec::new(),
        };
        n.negate_type(d);
        if !d.enums.is_empty() {
            n.negate_enums(d);
            return Ok(n.out);
        }
        n.negate_number_keywords(d);
        n.negate_string_keywords(d)?;
        n.negate_array_keywords(d);
        n.negate_object_keywords(d, &self.doc);
        n.negate_nots(d, &self.doc)?;
        Ok(n.out)
    }

    /// Constraints of the values nested in `d` (properties, items), each
    /// broken inside an otherwise valid container.
    fn children(&self, d: &Flat, depth: usize, found: &mut Found) -> Result<(), GenError> {
        let forced = |force: Force| {
            let mut f = d.clone();
            f.negated = true;
            f.force = Some(force);
            f
        };
        let embed = |this: &Gen,
                     conj: &[Loc],
                     make: &dyn Fn(BoxedStrategy<Json>) -> Force,
                     found: &mut Found|
         -> Result<(), GenError> {
            let mut inner = Found::new();
            match this.level(conj, depth + 1, &mut inner) {
                Ok(()) => {}
                Err(e) if e.is_local() => return Ok(()),
                Err(e) => return Err(e),
            }
            for (v, ss) in inner {
                let child = Union::new(ss).boxed();
                match this.gen_flat(&forced(make(child)), depth) {
                    Ok(s) => add(found, v, s, self.budget.probe),
                    Err(e) if e.is_local() => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        };
        if d.types() & OBJECT != 0 {
            let mut patterns = Vec::new();
            for part in &d.objects {
                let mut v = Vec::new();
                for (p, l) in &part.patterns {
                    v.push(Pattern::compile(p, &l.eval)?);
                }
                patterns.push(v);
            }
            let mut names: Vec<String> = Vec::new();
            for part in &d.objects {
                for (n, _) in &part.props {
                    if !names.contains(n) && !d.forbidden.contains(n) {
                        names.push(n.clone());
                    }
                }
            }
            for name in names {
                // A property a branch declares is judged by the branches.
                let in_branch = d
                    .objects
                    .iter()
                    .any(|p| p.src.branch && p.props.iter().any(|(n, _)| *n == name));
                if in_branch {
                    continue;
                }
                let conj = Gen::prop_conj(d, &name, &patterns);
                let n = name.clone();
                embed(self, &conj, &move |s| Force::Prop(n.clone(), s), found)?;
            }
            let extra: Vec<Loc> = d
                .objects
                .iter()
                .filter(|p| !p.src.branch)
                .filter_map(|p| p.additional.clone())
                .filter(|l| self.doc.node(l) != Some(&Json::Bool(false)))
                .collect();
            if !extra.is_empty()
                && !d.no_extras
                && extra.len()
                    == d.objects
                        .iter()
                        .filter_map(|p| p.additional.as_ref())
                        .count()
            {
                embed(self, &extra, &|s| Force::Extra(s), found)?;
            }
        }
        if d.types() & ARRAY != 0 && !d.arrays.iter().any(|p| p.branch) {
            let prefix_len = d.arrays.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
            for i in 0..prefix_len {
                let conj = Gen::item_conj(d, i);
                embed(self, &conj, &move |s| Force::Item(i, s), found)?;
            }
            let tail = Gen::item_conj(d, prefix_len);
            if !tail.is_empty() {
                embed(self, &tail, &|s| Force::Tail(s), found)?;
            }
        }
        Ok(())
    }
}
