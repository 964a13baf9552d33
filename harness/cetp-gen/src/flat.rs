//! A conjunction of schemas applying to one instance, gathered into one
//! record of constraints: `$ref` targets and `allOf` branches are folded in
//! (bounds intersected, object and array keywords kept per schema so their
//! per-schema meaning survives), `anyOf`/`oneOf` are kept as choices and
//! expanded into disjuncts by [`expand`].
//!
//! Keywords whose effect is not generated constructively (`if`,
//! `dependentRequired`, `propertyNames`, `unevaluated*`, ...) put their
//! schema on the `inexact` list: generated values are then filtered with
//! that schema's validator.

use crate::doc::{Doc, Loc};
use crate::error::{GenError, Kind};
use proptest::strategy::BoxedStrategy;
use serde_json::Value as Json;
use std::sync::Arc;

pub(crate) const NULL: u8 = 1;
pub(crate) const BOOL: u8 = 2;
pub(crate) const INT: u8 = 4;
/// Numbers that are not integers; "number" is `INT | FLOAT`.
pub(crate) const FLOAT: u8 = 8;
pub(crate) const STRING: u8 = 16;
pub(crate) const ARRAY: u8 = 32;
pub(crate) const OBJECT: u8 = 64;
pub(crate) const ALL: u8 = 127;
pub(crate) const NUMBER: u8 = INT | FLOAT;

/// `$ref` hops allowed without descending into the instance: past this the
/// references go round in a cycle that never reaches a value.
const MAX_REF_CHAIN: usize = 32;
/// Schemas folded into one conjunction, against a schema built to explode.
const MAX_NODES: usize = 512;
/// Disjuncts an `anyOf`/`oneOf` expansion may produce; the rest are not
/// generated (the values made are still valid, only less varied).
const MAX_DISJUNCTS: usize = 64;

pub(crate) fn type_bits(name: &str) -> Option<u8> {
    Some(match name {
        "null" => NULL,
        "boolean" => BOOL,
        "integer" => INT,
        "number" => NUMBER,
        "string" => STRING,
        "array" => ARRAY,
        "object" => OBJECT,
        _ => return None,
    })
}

pub(crate) fn type_of(v: &Json) -> u8 {
    match v {
        Json::Null => NULL,
        Json::Bool(_) => BOOL,
        Json::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                INT
            } else {
                FLOAT
            }
        }
        Json::String(_) => STRING,
        Json::Array(_) => ARRAY,
        Json::Object(_) => OBJECT,
    }
}

/// Where a keyword is: the schema holding it, its name, and whether it came
/// in through an `anyOf`/`oneOf` branch (breaking such a keyword does not
/// make a value invalid when another branch accepts it).
#[derive(Clone, Debug)]
pub(crate) struct Src {
    pub loc: Loc,
    pub kw: &'static str,
    pub branch: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub v: f64,
    pub excl: bool,
    pub src: Src,
}

/// `prefixItems`/`items` of one schema: their meaning depends on each other,
/// so they are kept together rather than merged across schemas.
#[derive(Clone, Debug)]
pub(crate) struct ArrayPart {
    pub prefix: Vec<Loc>,
    pub items: Option<Loc>,
    pub branch: bool,
}

/// `properties`/`patternProperties`/`additionalProperties` of one schema.
#[derive(Clone, Debug)]
pub(crate) struct ObjPart {
    pub props: Vec<(String, Loc)>,
    pub patterns: Vec<(String, Loc)>,
    pub additional: Option<Loc>,
    /// The schema holding them: `additionalProperties` violations name it.
    pub src: Src,
}

#[derive(Clone, Debug)]
pub(crate) struct Choice {
    pub src: Src,
    pub branches: Vec<Loc>,
    pub exclusive: bool,
    /// `if`/`then`/`else`: two arms, `if` and `then`, or not `if` and
    /// `else` (`branches` is then empty).
    pub cond: Option<Cond>,
}

#[derive(Clone, Debug)]
pub(crate) struct Cond {
    pub test: Loc,
    pub then: Option<Loc>,
    pub otherwise: Option<Loc>,
}

/// Keywords that assert nothing about the instance (in the vocabularies
/// of 2020-12 the generator knows): a schema made only of these accepts
/// every value, as `true` does.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$comment",
    "$defs",
    "definitions",
    "$vocabulary",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
];

/// Whether the schema at `loc` accepts every value: `true`, `{}`, or only
/// annotations. Decided at construction, so that `not: {}`, a `oneOf` with
/// two such branches or an `if` that always holds are seen for what they are.
pub(crate) fn accepts_all(doc: &Doc, loc: &Loc) -> bool {
    match doc.node(loc) {
        Some(Json::Bool(true)) => true,
        Some(Json::Object(m)) => m.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
        _ => false,
    }
}

/// Whether the schema at `loc` is `false`.
pub(crate) fn rejects_all(doc: &Doc, loc: &Loc) -> bool {
    matches!(doc.node(loc), Some(Json::Bool(false)))
}

/// A constraint negated for an invalid value, or a value forced into a
/// slot of a container (the invalid child of an otherwise valid parent).
#[derive(Clone)]
pub(crate) enum Neg {
    NotEnum(Vec<Json>),
    NotPattern(Arc<regex::Regex>),
    NotFormat(String),
    NotMultipleOf(f64),
    Duplicate,
    NoContains(Vec<Loc>),
}

#[derive(Clone)]
pub(crate) enum Force {
    Prop(String, BoxedStrategy<Json>),
    Item(usize, BoxedStrategy<Json>),
    /// The first position past every `prefixItems`.
    Tail(BoxedStrategy<Json>),
    /// A property no schema declares or matches by pattern.
    Extra(BoxedStrategy<Json>),
}

#[derive(Clone, Default)]
pub(crate) struct Flat {
    /// Every schema folded in; in valid mode, an enum member is kept only
    /// when all of them accept it.
    pub nodes: Vec<Loc>,
    pub types: Option<(u8, Src)>,
    pub enums: Vec<(Vec<Json>, Src)>,
    pub min: Option<Bound>,
    pub max: Option<Bound>,
    pub multiple_of: Vec<(f64, Src)>,
    pub min_len: Option<(u64, Src)>,
    pub max_len: Option<(u64, Src)>,
    pub patterns: Vec<(String, Src)>,
    pub formats: Vec<(String, Src)>,
    pub min_items: Option<(u64, Src)>,
    pub max_items: Option<(u64, Src)>,
    pub unique: Option<Src>,
    pub arrays: Vec<ArrayPart>,
    /// Schemas holding a `contains` that asks for at least one match.
    pub contains: Vec<Src>,
    /// The largest `minContains` of those (1 when none says): the first
    /// this many items are made to match every `contains`.
    pub min_contains: u64,
    pub min_props: Option<(u64, Src)>,
    pub max_props: Option<(u64, Src)>,
    pub required: Vec<(String, Src)>,
    pub objects: Vec<ObjPart>,
    pub property_names: Vec<Loc>,
    /// `unevaluatedProperties: false`: no property beyond the declared ones.
    pub no_extras: bool,
    pub nots: Vec<(Loc, Src)>,
    pub choices: Vec<Choice>,
    /// `oneOf` branch lists already expanded: exactly one must match.
    pub exclusive: Vec<Vec<Loc>>,
    /// Schemas judged by their validator, with the keyword that put them
    /// there (named when no value passes).
    pub inexact: Vec<(Loc, &'static str)>,
    // Invalid mode.
    pub negs: Vec<Neg>,
    pub forbidden: Vec<String>,
    pub force: Option<Force>,
    /// Set once a constraint is negated: enum members can no longer be
    /// checked against the whole schemas.
    pub negated: bool,
}

fn count(v: &Json) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
            .map(|f| f as u64)
    })
}

fn tighter_low(a: &Bound, b: &Bound) -> bool {
    a.v > b.v || (a.v == b.v && a.excl && !b.excl)
}

fn tighter_high(a: &Bound, b: &Bound) -> bool {
    a.v < b.v || (a.v == b.v && a.excl && !b.excl)
}

impl Flat {
    pub fn of(doc: &Doc, conj: &[Loc]) -> Result<Flat, GenError> {
        let mut f = Flat::default();
        for loc in conj {
            f.add_schema(doc, loc, false, 0)?;
        }
        Ok(f)
    }

    pub fn set_min(&mut self, b: Bound) {
        if self.min.as_ref().is_none_or(|m| tighter_low(&b, m)) {
            self.min = Some(b);
        }
    }

    pub fn set_max(&mut self, b: Bound) {
        if self.max.as_ref().is_none_or(|m| tighter_high(&b, m)) {
            self.max = Some(b);
        }
    }

    /// Without `type`, the types whose keywords appear: a schema that only
    /// says `properties` is meant for objects, and any type would do.
    pub fn inferred_types(&self) -> u8 {
        let mut t = 0;
        if self.min.is_some() || self.max.is_some() || !self.multiple_of.is_empty() {
            t |= NUMBER;
        }
        if self.min_len.is_some()
            || self.max_len.is_some()
            || !self.patterns.is_empty()
            || !self.formats.is_empty()
        {
            t |= STRING;
        }
        if self.min_items.is_some()
            || self.max_items.is_some()
            || self.unique.is_some()
            || !self.arrays.is_empty()
            || !self.contains.is_empty()
        {
            t |= ARRAY;
        }
        if self.min_props.is_some()
            || self.max_props.is_some()
            || !self.required.is_empty()
            || !self.objects.is_empty()
            || !self.property_names.is_empty()
        {
            t |= OBJECT;
        }
        if t == 0 {
            ALL
        } else {
            t
        }
    }

    pub fn types(&self) -> u8 {
        self.types
            .as_ref()
            .map(|t| t.0)
            .unwrap_or_else(|| self.inferred_types())
    }

    /// Folds the schema at `loc` in. `branch`: it is (inside) an
    /// `anyOf`/`oneOf` branch.
    ///
    /// Each keyword family is folded by its own method below, in the order
    /// the schema lists its keywords (the order errors are found in).
    pub fn add_schema(
        &mut self,
        doc: &Doc,
        loc: &Loc,
        branch: bool,
        ref_chain: usize,
    ) -> Result<(), GenError> {
        let Some(map) = self.schema_object(doc, loc)? else {
            return Ok(());
        };
        self.nodes.push(loc.clone());
        let at = At {
            doc,
            loc,
            map,
            branch,
            ref_chain,
        };
        let mut array_part: Option<ArrayPart> = None;
        let mut obj_part: Option<ObjPart> = None;
        for (k, v) in map {
            match k.as_str() {
                "type" => self.add_type(&at, v)?,
                "enum" | "const" => self.add_enum(&at, k, v)?,
                "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                    self.add_bound(&at, k, v)
                }
                "multipleOf" => {
                    if let Some(m) = v.as_f64().filter(|m| *m > 0.0 && m.is_finite()) {
                        self.multiple_of.push((m, at.src("multipleOf")));
                    }
                }
                "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
                | "maxProperties" => self.add_count(&at, k, v),
                "pattern" | "format" => self.add_string_keyword(&at, k, v),
                "uniqueItems" if v.as_bool() == Some(true) => {
                    self.unique = Some(at.src("uniqueItems"));
                }
                "prefixItems" | "items" => add_items(&at, &mut array_part, k, v),
                "contains" => self.add_contains(&at)?,
                "properties" | "patternProperties" | "additionalProperties" => {
                    add_properties(&at, &mut obj_part, k, v)
                }
                "required" => {
                    for name in v.as_array().into_iter().flatten().filter_map(Json::as_str) {
                        self.required.push((name.to_string(), at.src("required")));
                    }
                }
                "propertyNames"
                | "unevaluatedProperties"
                | "dependentRequired"
                | "dependentSchemas"
                | "dependencies"
                | "unevaluatedItems"
                | "additionalItems" => self.add_filtered(&at, k, v),
                "if" => self.add_if(&at),
                "allOf" => {
                    for i in 0..v.as_array().map_or(0, Vec::len) {
                        self.add_schema(doc, &loc.child("allOf").index(i), branch, ref_chain)?;
                    }
                }
                "anyOf" | "oneOf" => self.add_choice(&at, k, v)?,
                "not" => self.add_not(&at)?,
                "$ref" => self.add_ref(&at, v)?,
                "$dynamicRef" | "$recursiveRef" => {
                    return Err(GenError::new(
                        Kind::Unsupported,
                        if k == "$dynamicRef" {
                            "$dynamicRef"
                        } else {
                            "$recursiveRef"
                        },
                        &loc.eval,
                        "is not supported: only same-document `$ref` is",
                    ))
                }
                // Annotations, `$defs`, `then`/`else` (judged with `if`),
                // `minContains`/`maxContains` (with `contains`) and unknown
                // keywords, which assert nothing.
                _ => {}
            }
        }
        if let Some(p) = array_part {
            self.arrays.push(p);
        }
        if let Some(p) = obj_part {
            self.objects.push(p);
        }
        Ok(())
    }

    /// The keywords of the schema at `loc`; None for `true`, which adds
    /// nothing. `false`, a non-schema and one schema too many are errors.
    fn schema_object<'d>(
        &self,
        doc: &'d Doc,
        loc: &Loc,
    ) -> Result<Option<&'d serde_json::Map<String, Json>>, GenError> {
        let node = doc
            .node(loc)
            .ok_or_else(|| GenError::new(Kind::Invalid, "$ref", &loc.eval, "points to nowhere"))?;
        let map = match node {
            Json::Bool(true) => return Ok(None),
            Json::Bool(false) => {
                return Err(GenError::new(
                    Kind::Unsatisfiable,
                    "false",
                    &loc.eval,
                    "is the schema that accepts no value",
                ))
            }
            Json::Object(map) => map,
            _ => {
                return Err(GenError::new(
                    Kind::Invalid,
                    "type",
                    &loc.eval,
                    "is not a schema: a schema is an object or a boolean",
                ))
            }
        };
        if self.nodes.len() >= MAX_NODES {
            return Err(GenError::new(
                Kind::Unsupported,
                "allOf",
                &loc.eval,
                format!("folds more than {MAX_NODES} schemas into one value"),
            ));
        }
        Ok(Some(map))
    }

    /// `type`: intersected with the types already allowed.
    fn add_type(&mut self, at: &At, v: &Json) -> Result<(), GenError> {
        let names: Vec<&Json> = match v {
            Json::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        let mut mask = 0;
        for n in names {
            mask |= n.as_str().and_then(type_bits).ok_or_else(|| {
                GenError::new(
                    Kind::Invalid,
                    "type",
                    &at.loc.eval,
                    format!("names no type: {n}"),
                )
            })?;
        }
        if mask == 0 {
            return Err(at.unsat("type", "lists no type, so no value has one".into()));
        }
        let before = self.types.as_ref().map_or(ALL, |t| t.0);
        if before & mask == 0 {
            return Err(at.unsat(
                "type",
                "allows no type that the schemas it is combined with allow".into(),
            ));
        }
        self.types = Some((before & mask, at.src("type")));
        Ok(())
    }

    /// `enum` and `const` (an enum of one).
    fn add_enum(&mut self, at: &At, k: &str, v: &Json) -> Result<(), GenError> {
        if k == "const" {
            self.enums.push((vec![v.clone()], at.src("const")));
            return Ok(());
        }
        let vals = v.as_array().cloned().unwrap_or_default();
        if vals.is_empty() {
            return Err(at.unsat("enum", "is empty".into()));
        }
        self.enums.push((vals, at.src("enum")));
        Ok(())
    }

    /// `minimum`, `maximum` and their exclusive forms: the tighter bound
    /// of all the schemas wins.
    fn add_bound(&mut self, at: &At, k: &str, v: &Json) {
        let Some(x) = v.as_f64() else {
            return;
        };
        let (kw, low, excl) = match k {
            "minimum" => ("minimum", true, false),
            "exclusiveMinimum" => ("exclusiveMinimum", true, true),
            "maximum" => ("maximum", false, false),
            _ => ("exclusiveMaximum", false, true),
        };
        let b = Bound {
            v: x,
            excl,
            src: at.src(kw),
        };
        if low {
            self.set_min(b)
        } else {
            self.set_max(b)
        }
    }

    /// The length, item and property counts: the largest minimum and the
    /// smallest maximum win.
    fn add_count(&mut self, at: &At, k: &str, v: &Json) {
        let Some(n) = count(v) else {
            return;
        };
        let (slot, kw, low) = match k {
            "minLength" => (&mut self.min_len, "minLength", true),
            "maxLength" => (&mut self.max_len, "maxLength", false),
            "minItems" => (&mut self.min_items, "minItems", true),
            "maxItems" => (&mut self.max_items, "maxItems", false),
            "minProperties" => (&mut self.min_props, "minProperties", true),
            _ => (&mut self.max_props, "maxProperties", false),
        };
        if slot
            .as_ref()
            .is_none_or(|m| if low { n > m.0 } else { n < m.0 })
        {
            *slot = Some((n, at.src(kw)));
        }
    }

    /// `pattern` and `format`: every one of them applies.
    fn add_string_keyword(&mut self, at: &At, k: &str, v: &Json) {
        let Some(p) = v.as_str() else {
            return;
        };
        if k == "pattern" {
            self.patterns.push((p.to_string(), at.src("pattern")));
        } else {
            self.formats.push((p.to_string(), at.src("format")));
        }
    }

    /// `contains` with `minContains`/`maxContains`.
    fn add_contains(&mut self, at: &At) -> Result<(), GenError> {
        let (map, loc) = (at.map, at.loc);
        let min_contains = map.get("minContains").and_then(count).unwrap_or(1);
        if let Some(max) = map.get("maxContains").and_then(count) {
            if max < min_contains {
                return Err(GenError::new(
                    Kind::Unsatisfiable,
                    "maxContains",
                    &loc.eval,
                    format!("({max}) is below `minContains` ({min_contains})"),
                ));
            }
        }
        if min_contains >= 1 {
            if rejects_all(at.doc, &loc.child("contains")) {
                return Err(at.unsat("contains", "is `false`, so no item can match it".into()));
            }
            self.contains.push(at.src("contains"));
            self.min_contains = self.min_contains.max(min_contains);
        }
        // At least `minContains` matches are built; the most, and matches
        // beyond the first ones, are left to the filter.
        if map.contains_key("minContains") || map.contains_key("maxContains") {
            let kw = if map.contains_key("maxContains") {
                "maxContains"
            } else {
                "minContains"
            };
            self.inexact.push((loc.clone(), kw));
        }
        Ok(())
    }

    /// Keywords judged by the schema's validator rather than built:
    /// `propertyNames`, `unevaluated*`, the `dependent*` family and
    /// `additionalItems`.
    fn add_filtered(&mut self, at: &At, k: &str, v: &Json) {
        let loc = at.loc;
        let kw = match k {
            "propertyNames" => {
                self.property_names.push(loc.child("propertyNames"));
                "propertyNames"
            }
            "unevaluatedProperties" => {
                if v == &Json::Bool(false) {
                    self.no_extras = true;
                }
                "unevaluatedProperties"
            }
            "dependentRequired" => "dependentRequired",
            "dependentSchemas" => "dependentSchemas",
            "dependencies" => "dependencies",
            "unevaluatedItems" => "unevaluatedItems",
            _ => "additionalItems",
        };
        self.inexact.push((loc.clone(), kw));
    }

    /// `if`: two arms, like an `anyOf`: `if` and `then`, or not `if` and
    /// `else`; expanded by [`expand`].
    fn add_if(&mut self, at: &At) {
        let (map, loc) = (at.map, at.loc);
        let then = map.contains_key("then").then(|| loc.child("then"));
        let otherwise = map.contains_key("else").then(|| loc.child("else"));
        if then.is_some() || otherwise.is_some() {
            self.choices.push(Choice {
                src: at.src("if"),
                branches: vec![],
                exclusive: false,
                cond: Some(Cond {
                    test: loc.child("if"),
                    then,
                    otherwise,
                }),
            });
        }
    }

    /// `anyOf` and `oneOf`: kept as a choice for [`expand`].
    fn add_choice(&mut self, at: &At, k: &str, v: &Json) -> Result<(), GenError> {
        let kw = if k == "anyOf" { "anyOf" } else { "oneOf" };
        let n = v.as_array().map_or(0, Vec::len);
        if n == 0 {
            return Err(at.unsat(kw, "has no branch".into()));
        }
        let branches: Vec<Loc> = (0..n).map(|i| at.loc.child(kw).index(i)).collect();
        if kw == "oneOf" && branches.iter().filter(|b| accepts_all(at.doc, b)).count() >= 2 {
            return Err(at.unsat(
                "oneOf",
                "has two branches that accept every value, so no value matches exactly one".into(),
            ));
        }
        self.choices.push(Choice {
            src: at.src(kw),
            branches,
            exclusive: kw == "oneOf",
            cond: None,
        });
        Ok(())
    }

    /// `not`: kept for the filter, except the forms that simplify.
    fn add_not(&mut self, at: &At) -> Result<(), GenError> {
        let target = at.loc.child("not");
        if accepts_all(at.doc, &target) {
            return Err(at.unsat(
                "not",
                "negates a schema that accepts every value, so it accepts none".into(),
            ));
        }
        // `not: false` asserts nothing; `not: {not: S}` is S.
        if rejects_all(at.doc, &target) {
            return Ok(());
        }
        let inner = at.doc.node(&target).and_then(Json::as_object);
        if inner.is_some_and(|m| m.len() == 1 && m.contains_key("not")) {
            return self.add_schema(at.doc, &target.child("not"), at.branch, at.ref_chain);
        }
        self.nots.push((target, at.src("not")));
        Ok(())
    }

    /// `$ref`: the target is folded in, one hop further down the chain.
    fn add_ref(&mut self, at: &At, v: &Json) -> Result<(), GenError> {
        let loc = at.loc;
        let target = v
            .as_str()
            .ok_or_else(|| GenError::new(Kind::Invalid, "$ref", &loc.eval, "is not a string"))?;
        let doc_ptr = at.doc.resolve_ref(loc, target)?;
        if at.ref_chain >= MAX_REF_CHAIN {
            return Err(GenError::new(
                Kind::TooDeep,
                "$ref",
                &loc.eval,
                format!(
                    "goes round a cycle of references ({MAX_REF_CHAIN} hops) that never reaches a value"
                ),
            ));
        }
        let to = Loc {
            doc: doc_ptr,
            eval: format!("{}/$ref", loc.eval),
        };
        self.add_schema(at.doc, &to, at.branch, at.ref_chain + 1)
    }
}

/// The schema [`Flat::add_schema`] is folding in, for its keyword methods.
struct At<'a> {
    doc: &'a Doc,
    loc: &'a Loc,
    map: &'a serde_json::Map<String, Json>,
    branch: bool,
    ref_chain: usize,
}

impl At<'_> {
    /// Where keyword `kw` of this schema is.
    fn src(&self, kw: &'static str) -> Src {
        Src {
            loc: self.loc.clone(),
            kw,
            branch: self.branch,
        }
    }

    fn unsat(&self, kw: &str, msg: String) -> GenError {
        GenError::new(Kind::Unsatisfiable, kw, &self.loc.eval, msg)
    }
}

/// `prefixItems` and `items` of one schema, kept together in its
/// [`ArrayPart`].
fn add_items(at: &At, array_part: &mut Option<ArrayPart>, k: &str, v: &Json) {
    let loc = at.loc;
    let part = array_part.get_or_insert(ArrayPart {
        prefix: vec![],
        items: None,
        branch: at.branch,
    });
    if k == "prefixItems" {
        let n = v.as_array().map_or(0, Vec::len);
        part.prefix = (0..n).map(|i| loc.child("prefixItems").index(i)).collect();
        return;
    }
    match v {
        // Drafts before 2020-12: `items` as a list is what `prefixItems`
        // is now, `additionalItems` the rest.
        Json::Array(a) => {
            part.prefix = (0..a.len()).map(|i| loc.child("items").index(i)).collect();
            if at.map.contains_key("additionalItems") {
                part.items = Some(loc.child("additionalItems"));
            }
        }
        _ => part.items = Some(loc.child("items")),
    }
}

/// `properties`, `patternProperties` and `additionalProperties` of one
/// schema, kept together in its [`ObjPart`].
fn add_properties(at: &At, obj_part: &mut Option<ObjPart>, k: &str, v: &Json) {
    let loc = at.loc;
    let part = obj_part.get_or_insert(ObjPart {
        props: vec![],
        patterns: vec![],
        additional: None,
        src: at.src("additionalProperties"),
    });
    match k {
        "properties" => {
            if let Some(m) = v.as_object() {
                part.props = m
                    .keys()
                    .map(|name| (name.clone(), loc.child("properties").child(name)))
                    .collect();
            }
        }
        "patternProperties" => {
            if let Some(m) = v.as_object() {
                part.patterns = m
                    .keys()
                    .map(|p| (p.clone(), loc.child("patternProperties").child(p)))
                    .collect();
            }
        }
        _ => part.additional = Some(loc.child("additionalProperties")),
    }
}

/// Expands the choices of `f` into combinator-free disjuncts (at most
/// [`MAX_DISJUNCTS`]). A branch that cannot be satisfied with its siblings
/// is dropped; a choice none of whose branches can is an error naming it.
pub(crate) fn expand(doc: &Doc, mut f: Flat, out: &mut Vec<Flat>) -> Result<(), GenError> {
    if f.choices.is_empty() {
        out.push(f);
        return Ok(());
    }
    let c = f.choices.remove(0);
    if let Some(cond) = &c.cond {
        return expand_cond(doc, f, &c.src, cond, out);
    }
    if c.exclusive {
        f.exclusive.push(c.branches.clone());
    }
    let before = out.len();
    let mut first_err: Option<GenError> = None;
    for b in &c.branches {
        if out.len() >= MAX_DISJUNCTS {
            break;
        }
        let mut g = f.clone();
        let r = g
            .add_schema(doc, b, true, 0)
            .and_then(|()| expand(doc, g, out));
        match r {
            Ok(()) => {}
            Err(e) if e.is_local() => {
                first_err.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    if out.len() == before {
        let why = first_err
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default();
        return Err(GenError::new(
            Kind::Unsatisfiable,
            c.src.kw,
            &c.src.loc.eval,
            format!("has no branch that can hold together with the schemas around it{why}"),
        ));
    }
    Ok(())
}

/// The two arms of an `if`: `if` and `then`, or not `if` and `else`; an arm
/// the schemas around it rule out is dropped, and an `if` neither arm of
/// which holds is an error naming it.
fn expand_cond(
    doc: &Doc,
    f: Flat,
    src: &Src,
    cond: &Cond,
    out: &mut Vec<Flat>,
) -> Result<(), GenError> {
    let before = out.len();
    let mut first_err: Option<GenError> = None;
    for then_arm in [true, false] {
        if out.len() >= MAX_DISJUNCTS {
            break;
        }
        let mut g = f.clone();
        let r = if then_arm {
            g.add_schema(doc, &cond.test, true, 0)
                .and_then(|()| match &cond.then {
                    Some(t) => g.add_schema(doc, t, true, 0),
                    None => Ok(()),
                })
        } else if accepts_all(doc, &cond.test) {
            Err(GenError::new(
                Kind::Unsatisfiable,
                "if",
                &src.loc.eval,
                "accepts every value, so `else` never applies",
            ))
        } else {
            if !rejects_all(doc, &cond.test) {
                g.nots.push((
                    cond.test.clone(),
                    Src {
                        loc: src.loc.clone(),
                        kw: "if",
                        branch: true,
                    },
                ));
            }
            match &cond.otherwise {
                Some(e) => g.add_schema(doc, e, true, 0),
                None => Ok(()),
            }
        };
        match r.and_then(|()| expand(doc, g, out)) {
            Ok(()) => {}
            Err(e) if e.is_local() => {
                first_err.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    if out.len() == before {
        let why = first_err
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default();
        return Err(GenError::new(
            Kind::Unsatisfiable,
            "if",
            &src.loc.eval,
            format!("has neither arm (`if` and `then`, or not `if` and `else`) holding together with the schemas around it{why}"),
        ));
    }
    Ok(())
}
