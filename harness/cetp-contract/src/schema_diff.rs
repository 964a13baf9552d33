//! Comparison of a tool's locked JSON Schema with its live one.
//!
//! A schema is read as the set of instances it accepts. An input schema may
//! only grow (every argument a Consumer built against the lock must still be
//! accepted); an output schema may only shrink (every answer must still be
//! one the Consumer was told to expect). So each difference is first judged
//! as *widened* or *narrowed*, and its position decides the class:
//!
//! | | input | output |
//! |---|---|---|
//! | widened | compatible | breaking |
//! | narrowed | breaking | compatible |
//! | cannot tell | breaking | breaking |
//!
//! An output `enum` that gains a value is therefore breaking: a Consumer
//! that switches over the locked values meets one it does not know.
//!
//! Properties are judged as fields, on the reading that a Consumer sends and
//! reads the properties a schema declares: a new optional input property and
//! a new output property are compatible, a removed property is breaking in
//! either position (the Provider silently stops reading it, or the Consumer
//! loses it).
//!
//! Same-document `$ref`s (§3.2) are followed and `allOf` is flattened
//! before anything is compared, so a schema that only moved a definition
//! into `$defs` or split itself into `allOf` parts compares equal; such a
//! change is reported once, as compatible "restructured". `enum` and `const`
//! are value sets, compared without regard to order. Anything this module
//! cannot judge with confidence is breaking with the reason "unclassified
//! change", never ignored.
//!
//! Pointers follow the schema's structure with `$ref` and `allOf` inlined:
//! `/input_schema/properties/price/minimum` names the field whatever
//! definition it came from.

use crate::class::Class;
use cetp_proto::canonical::canonicalize;
use cetp_proto::schema::CompiledSchema;
use serde_json::{json, Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// Where a schema sits in a tool's contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// `input_schema`: may only widen.
    Input,
    /// `output_schema`: may only narrow.
    Output,
}

/// One difference between two schemas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// JSON pointer in the tool's lock entry, `$ref` and `allOf` inlined.
    pub pointer: String,
    /// What the difference means here, given its [`Position`].
    pub class: Class,
    /// Stable key of the rule that judged it (`schema.required.narrowed`).
    pub rule: String,
    /// What changed, for a reader.
    pub message: String,
}

/// Deeper than this (through properties, items and `$ref`s) the comparison
/// stops and falls back to textual equality.
const MAX_DEPTH: usize = 48;

/// Keywords that describe but never validate (JSON Schema 2020-12
/// meta-data vocabulary): changing one is compatible.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$comment",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Keywords that constrain only the value itself; with a scalar `enum` on
/// both sides they are judged through the effective value set instead.
const VALUE_KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords that are one more conjunct of the schema on their own: adding
/// one narrows, removing one widens; a change of value is unclassified.
const CONJUNCTS: &[&str] = &[
    "not",
    "dependentRequired",
    "dependentSchemas",
    "propertyNames",
];

const INT_BOUNDS: &[(&str, bool)] = &[
    ("minLength", true),
    ("maxLength", false),
    ("minItems", true),
    ("maxItems", false),
    ("minProperties", true),
    ("maxProperties", false),
];

/// Keywords compared by a dedicated rule below; every other keyword that
/// differs is a conjunct or unclassified.
const HANDLED: &[&str] = &[
    "type",
    "enum",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "format",
    "contentEncoding",
    "contentMediaType",
    "uniqueItems",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "anyOf",
    "oneOf",
    "default",
];

/// Compares a locked schema with a live one. `base` prefixes every pointer
/// (`/input_schema`); `dialect` is the `schema_dialect` of the Provider
/// (§3.2), which decides whether keywords beside a `$ref` apply.
pub fn compare(old: &Json, new: &Json, pos: Position, base: &str, dialect: &str) -> Vec<Change> {
    let mut c = Cmp {
        old_root: old,
        new_root: new,
        pos,
        dialect,
        ref_siblings: ref_siblings_apply(dialect),
        out: Vec::new(),
        active: Vec::new(),
    };
    c.node(old, new, base, 0);
    if c.out.is_empty() && text(old) != text(new) {
        c.out.push(Change {
            pointer: base.to_string(),
            class: Class::Compatible,
            rule: "schema.restructured".into(),
            message: "the schema text changed but not what it accepts ($ref, allOf or enum order)"
                .into(),
        });
    }
    c.out
}

/// Before 2019-09, keywords beside a `$ref` are ignored.
fn ref_siblings_apply(dialect: &str) -> bool {
    let d = dialect.trim_end_matches('#');
    !["draft-04/schema", "draft-06/schema", "draft-07/schema"]
        .iter()
        .any(|old| d.ends_with(old))
}

/// RFC 8785 text: `1` and `1.0`, or two key orders, are one value.
fn text(v: &Json) -> String {
    canonicalize(v).unwrap_or_else(|_| v.to_string())
}

fn escape_token(s: &str) -> String {
    cetp_proto::pointer::escape(s).into_owned()
}

/// Shows a few values of a set, for messages.
fn show(values: &[String]) -> String {
    const SHOWN: usize = 6;
    let mut s: Vec<&str> = values.iter().take(SHOWN).map(String::as_str).collect();
    if values.len() > SHOWN {
        s.push("…");
    }
    s.join(", ")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Widened,
    Narrowed,
}

type Flat = Map<String, Json>;

struct Cmp<'a> {
    old_root: &'a Json,
    new_root: &'a Json,
    pos: Position,
    dialect: &'a str,
    ref_siblings: bool,
    out: Vec<Change>,
    /// Pairs of nodes being compared further up: meeting one again means a
    /// recursive schema, and the pair is assumed equal (what is not equal is
    /// found on the way down).
    active: Vec<(String, String)>,
}

impl Cmp<'_> {
    fn push(&mut self, pointer: String, class: Class, rule: String, message: String) {
        self.out.push(Change {
            pointer,
            class,
            rule,
            message,
        });
    }

    fn directed(&mut self, pointer: String, dir: Dir, keyword: &str, message: String) {
        let (class, side, word) = match (self.pos, dir) {
            (Position::Input, Dir::Widened) => (Class::Compatible, "input widened", "widened"),
            (Position::Input, Dir::Narrowed) => (Class::Breaking, "input narrowed", "narrowed"),
            (Position::Output, Dir::Widened) => (
                Class::Breaking,
                "output widened: answers the lock did not allow",
                "widened",
            ),
            (Position::Output, Dir::Narrowed) => (Class::Compatible, "output narrowed", "narrowed"),
        };
        self.push(
            pointer,
            class,
            format!("schema.{keyword}.{word}"),
            format!("{message} ({side})"),
        );
    }

    fn unclassified(&mut self, pointer: String, detail: String) {
        self.push(
            pointer,
            Class::Breaking,
            "schema.unclassified".into(),
            format!("unclassified change: {detail}"),
        );
    }

    fn node(&mut self, old: &Json, new: &Json, ptr: &str, depth: usize) {
        if depth > MAX_DEPTH {
            if !self.same_text(old, new) {
                self.unclassified(ptr.to_string(), "nested too deeply to compare".into());
            }
            return;
        }
        let key = (node_key(old), node_key(new));
        if self.active.contains(&key) {
            return;
        }
        self.active.push(key);
        let flat_old = flatten(self.old_root, old, 0, self.ref_siblings);
        let flat_new = flatten(self.new_root, new, 0, self.ref_siblings);
        match (flat_old, flat_new) {
            (Ok(o), Ok(n)) => self.maps(&o, &n, ptr, depth),
            (Err(why), _) | (_, Err(why)) => {
                if !self.same_text(old, new) {
                    self.unclassified(ptr.to_string(), why);
                }
            }
        }
        self.active.pop();
    }

    /// Equal text, and every `$ref` inside resolves to equal text in both
    /// documents: the same meaning without flattening.
    fn same_text(&self, old: &Json, new: &Json) -> bool {
        if text(old) != text(new) {
            return false;
        }
        let mut todo = Vec::new();
        collect_refs(old, &mut todo);
        let mut seen = BTreeSet::new();
        while let Some(r) = todo.pop() {
            if !seen.insert(r.clone()) {
                continue;
            }
            match (
                resolve_ref(self.old_root, &r),
                resolve_ref(self.new_root, &r),
            ) {
                (Some(a), Some(b)) if text(a) == text(b) => collect_refs(a, &mut todo),
                _ => return false,
            }
        }
        true
    }

    fn maps(&mut self, o: &Flat, n: &Flat, ptr: &str, depth: usize) {
        let values_done = match (
            effective_enum(o, self.dialect),
            effective_enum(n, self.dialect),
        ) {
            (Some(a), Some(b)) => {
                self.value_sets(&a, &b, &format!("{ptr}/enum"));
                true
            }
            _ => false,
        };
        if !values_done {
            self.value_keywords(o, n, ptr);
        }
        for (kw, lower) in INT_BOUNDS {
            if !VALUE_KEYWORDS.contains(kw) {
                self.int_bound(o, n, ptr, kw, *lower);
            }
        }
        self.unique_items(o, n, ptr);
        self.object(o, n, ptr, depth);
        self.items(o, n, ptr, depth);
        for kw in ["anyOf", "oneOf"] {
            self.branches(o, n, ptr, depth, kw);
        }
        self.annotations(o, n, ptr);
        self.other_keywords(o, n, ptr);
    }

    /// The keywords on the values themselves (types, enum, numeric bounds,
    /// string form), compared when neither side is a closed set of values.
    fn value_keywords(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        self.types(o, n, ptr);
        match (o.get("enum"), n.get("enum")) {
            (None, None) => {}
            (None, Some(_)) => self.directed(
                format!("{ptr}/enum"),
                Dir::Narrowed,
                "enum",
                "an enum was added".into(),
            ),
            (Some(_), None) => self.directed(
                format!("{ptr}/enum"),
                Dir::Widened,
                "enum",
                "the enum was removed".into(),
            ),
            (Some(a), Some(b)) => {
                let (a, b) = (values(a), values(b));
                self.value_sets(&a, &b, &format!("{ptr}/enum"));
            }
        }
        self.number_bounds(o, n, ptr);
        for (kw, lower) in INT_BOUNDS {
            if VALUE_KEYWORDS.contains(kw) {
                self.int_bound(o, n, ptr, kw, *lower);
            }
        }
        self.multiple_of(o, n, ptr);
        for kw in ["pattern", "format", "contentEncoding", "contentMediaType"] {
            self.exact(o, n, ptr, kw);
        }
    }

    /// Annotations validate nothing; `default` does change what an input
    /// that omits the field means.
    fn annotations(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        for kw in ANNOTATIONS {
            if o.get(*kw).map(text) != n.get(*kw).map(text) {
                self.push(
                    format!("{ptr}/{kw}"),
                    Class::Compatible,
                    "schema.annotation.changed".into(),
                    format!("`{kw}` changed (an annotation: it validates nothing)"),
                );
            }
        }
        if o.get("default").map(text) != n.get("default").map(text) {
            let (class, why) = match self.pos {
                Position::Input => (
                    Class::Breaking,
                    "a call that omits the field now means something else",
                ),
                Position::Output => (Class::Compatible, "an annotation of the answer"),
            };
            self.push(
                format!("{ptr}/default"),
                class,
                "schema.default.changed".into(),
                format!("`default` changed: {why}"),
            );
        }
    }

    /// Keywords no comparison above handles: a conjunct added or removed
    /// narrows or widens, anything else changed is unclassified.
    fn other_keywords(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
        for k in keys {
            if HANDLED.contains(&k.as_str()) || ANNOTATIONS.contains(&k.as_str()) {
                continue;
            }
            let (a, b) = (o.get(k), n.get(k));
            if a.map(text) == b.map(text) {
                continue;
            }
            let p = format!("{ptr}/{}", escape_token(k));
            if CONJUNCTS.contains(&k.as_str()) {
                match (a, b) {
                    (None, Some(_)) => {
                        self.directed(p, Dir::Narrowed, k, format!("`{k}` was added"))
                    }
                    (Some(_), None) => {
                        self.directed(p, Dir::Widened, k, format!("`{k}` was removed"))
                    }
                    _ => self.unclassified(p, format!("`{k}` changed")),
                }
            } else {
                self.unclassified(p, format!("`{k}` changed"));
            }
        }
    }

    fn value_sets(&mut self, old: &[String], new: &[String], ptr: &str) {
        let (a, b): (BTreeSet<&String>, BTreeSet<&String>) =
            (old.iter().collect(), new.iter().collect());
        let gained: Vec<String> = b.difference(&a).map(|s| s.to_string()).collect();
        let lost: Vec<String> = a.difference(&b).map(|s| s.to_string()).collect();
        match (gained.is_empty(), lost.is_empty()) {
            (true, true) => {}
            (false, true) => self.directed(
                ptr.into(),
                Dir::Widened,
                "enum",
                format!("the allowed values gained {}", show(&gained)),
            ),
            (true, false) => self.directed(
                ptr.into(),
                Dir::Narrowed,
                "enum",
                format!("the allowed values lost {}", show(&lost)),
            ),
            (false, false) => self.push(
                ptr.into(),
                Class::Breaking,
                "schema.enum.changed".into(),
                format!(
                    "the allowed values gained {} and lost {}",
                    show(&gained),
                    show(&lost)
                ),
            ),
        }
    }

    fn types(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        let (a, b) = match (types_of(o.get("type")), types_of(n.get("type"))) {
            (Ok(a), Ok(b)) => (a, b),
            _ => {
                if o.get("type").map(text) != n.get("type").map(text) {
                    self.unclassified(format!("{ptr}/type"), "`type` is malformed".into());
                }
                return;
            }
        };
        let sub = |x: &Option<BTreeSet<String>>, y: &Option<BTreeSet<String>>| {
            ALL_TYPES.iter().all(|t| !accepts(x, t) || accepts(y, t))
        };
        let (narrower, wider) = (sub(&b, &a), sub(&a, &b));
        let shown = |x: &Option<BTreeSet<String>>| match x {
            None => "any".to_string(),
            Some(s) => s.iter().cloned().collect::<Vec<_>>().join("|"),
        };
        let msg = format!("type {} → {}", shown(&a), shown(&b));
        let p = format!("{ptr}/type");
        match (wider, narrower) {
            (true, true) => {}
            (true, false) => self.directed(p, Dir::Widened, "type", msg),
            (false, true) => self.directed(p, Dir::Narrowed, "type", msg),
            (false, false) => self.push(p, Class::Breaking, "schema.type.changed".into(), msg),
        }
    }

    fn number_bounds(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        for lower in [true, false] {
            let (a, b) = (bound(o, lower), bound(n, lower));
            let (a, b) = match (a, b) {
                (Ok(a), Ok(b)) => (a, b),
                _ => {
                    self.unclassified(ptr.to_string(), "a numeric bound is malformed".into());
                    continue;
                }
            };
            if a == b {
                continue;
            }
            let key = |m: &Flat| {
                let (x, i) = if lower {
                    ("exclusiveMinimum", "minimum")
                } else {
                    ("exclusiveMaximum", "maximum")
                };
                if m.get(x).is_some_and(Json::is_number) {
                    Some(x)
                } else if m.contains_key(i) {
                    Some(i)
                } else {
                    None
                }
            };
            let kw = key(n).or_else(|| key(o)).unwrap_or("minimum");
            let show = |x: &Option<Bound>| match x {
                None => "none".to_string(),
                Some(b) => {
                    let op = match (lower, b.exclusive) {
                        (true, true) => ">",
                        (true, false) => "≥",
                        (false, true) => "<",
                        (false, false) => "≤",
                    };
                    format!("{op} {}", b.value)
                }
            };
            let what = if lower { "lower" } else { "upper" };
            let msg = format!("{what} bound {} → {}", show(&a), show(&b));
            // Integer-only schemas compare after `> 0` became `≥ 1`.
            let (ia, ib) = (
                a.map(|x| x.normalized(lower, integer_only(o))),
                b.map(|x| x.normalized(lower, integer_only(n))),
            );
            if ia == ib {
                continue;
            }
            let looser = match (ia, ib) {
                (None, _) => false,
                (_, None) => true,
                (Some(x), Some(y)) => y.looser_than(&x, lower),
            };
            let dir = if looser { Dir::Widened } else { Dir::Narrowed };
            self.directed(format!("{ptr}/{kw}"), dir, kw, msg);
        }
    }

    fn int_bound(&mut self, o: &Flat, n: &Flat, ptr: &str, kw: &str, lower: bool) {
        let get = |m: &Flat| match m.get(kw) {
            None => Ok(if lower { Some(0.0) } else { None }),
            Some(v) => v.as_f64().map(Some).ok_or(()),
        };
        let (a, b) = match (get(o), get(n)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => {
                if o.get(kw).map(text) != n.get(kw).map(text) {
                    self.unclassified(format!("{ptr}/{kw}"), format!("`{kw}` is malformed"));
                }
                return;
            }
        };
        if a == b {
            return;
        }
        let shown = |x: Option<f64>| x.map_or("none".to_string(), |v| v.to_string());
        let msg = format!("`{kw}` {} → {}", shown(a), shown(b));
        // `None` is "no upper bound" (lower bounds default to 0).
        let widened = match (a, b) {
            (_, None) => true,
            (None, _) => false,
            (Some(x), Some(y)) => {
                if lower {
                    y < x
                } else {
                    y > x
                }
            }
        };
        let dir = if widened { Dir::Widened } else { Dir::Narrowed };
        self.directed(format!("{ptr}/{kw}"), dir, kw, msg);
    }

    fn multiple_of(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        let p = format!("{ptr}/multipleOf");
        match (o.get("multipleOf"), n.get("multipleOf")) {
            (None, None) => {}
            (None, Some(_)) => self.directed(
                p,
                Dir::Narrowed,
                "multipleOf",
                "`multipleOf` was added".into(),
            ),
            (Some(_), None) => self.directed(
                p,
                Dir::Widened,
                "multipleOf",
                "`multipleOf` was removed".into(),
            ),
            (Some(a), Some(b)) => {
                let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) else {
                    if text(a) != text(b) {
                        self.unclassified(p, "`multipleOf` is malformed".into());
                    }
                    return;
                };
                if x == y {
                    return;
                }
                let divides = |big: f64, small: f64| {
                    let r = big / small;
                    small != 0.0 && (r - r.round()).abs() < 1e-9
                };
                let msg = format!("`multipleOf` {x} → {y}");
                if divides(x, y) {
                    self.directed(p, Dir::Widened, "multipleOf", msg);
                } else if divides(y, x) {
                    self.directed(p, Dir::Narrowed, "multipleOf", msg);
                } else {
                    self.push(p, Class::Breaking, "schema.multipleOf.changed".into(), msg);
                }
            }
        }
    }

    /// Keywords that are either present or not, and whose values cannot be
    /// ordered (a regular expression, a format name).
    fn exact(&mut self, o: &Flat, n: &Flat, ptr: &str, kw: &str) {
        let p = format!("{ptr}/{kw}");
        match (o.get(kw), n.get(kw)) {
            (None, None) => {}
            (None, Some(_)) => self.directed(p, Dir::Narrowed, kw, format!("`{kw}` was added")),
            (Some(_), None) => self.directed(p, Dir::Widened, kw, format!("`{kw}` was removed")),
            (Some(a), Some(b)) => {
                if text(a) != text(b) {
                    self.push(
                        p,
                        Class::Breaking,
                        format!("schema.{kw}.changed"),
                        format!("`{kw}` {} → {}", text(a), text(b)),
                    );
                }
            }
        }
    }

    fn unique_items(&mut self, o: &Flat, n: &Flat, ptr: &str) {
        let get = |m: &Flat| {
            m.get("uniqueItems")
                .and_then(Json::as_bool)
                .unwrap_or(false)
        };
        let (a, b) = (get(o), get(n));
        if a != b {
            let dir = if b { Dir::Narrowed } else { Dir::Widened };
            self.directed(
                format!("{ptr}/uniqueItems"),
                dir,
                "uniqueItems",
                format!("`uniqueItems` {a} → {b}"),
            );
        }
    }

    fn object(&mut self, o: &Flat, n: &Flat, ptr: &str, depth: usize) {
        let (op, np) = match (properties(o), properties(n)) {
            (Some(a), Some(b)) => (a, b),
            _ => {
                if o.get("properties").map(text) != n.get("properties").map(text) {
                    self.unclassified(
                        format!("{ptr}/properties"),
                        "`properties` is not an object".into(),
                    );
                }
                return;
            }
        };
        let (oreq, nreq) = (required(o), required(n));
        let names: BTreeSet<&String> = op.keys().chain(np.keys()).collect();
        for name in &names {
            let p = format!("{ptr}/properties/{}", escape_token(name));
            match (op.get(*name), np.get(*name)) {
                (Some(a), Some(b)) => {
                    self.node(a, b, &p, depth + 1);
                    self.required_change(&p, name, oreq.contains(*name), nreq.contains(*name));
                }
                (Some(_), None) => {
                    let msg = match self.pos {
                        Position::Input => format!(
                            "input property `{name}` was removed: the Provider no longer reads what Consumers send"
                        ),
                        Position::Output => format!(
                            "output property `{name}` was removed: Consumers that read it lose it"
                        ),
                    };
                    self.push(p, Class::Breaking, "schema.property.removed".into(), msg);
                }
                (None, Some(_)) => {
                    let req = nreq.contains(*name);
                    let (class, rule, msg) = match (self.pos, req) {
                        (Position::Input, true) => (
                            Class::Breaking,
                            "schema.property.added_required",
                            format!("new required input property `{name}`: calls built against the lock lack it"),
                        ),
                        (Position::Input, false) => (
                            Class::Compatible,
                            "schema.property.added",
                            format!("new optional input property `{name}`"),
                        ),
                        (Position::Output, _) => (
                            Class::Compatible,
                            "schema.property.added",
                            format!("new output property `{name}`"),
                        ),
                    };
                    self.push(p, class, rule.into(), msg);
                }
                (None, None) => {}
            }
        }
        // `required` may name properties no `properties` declares.
        for name in oreq.union(&nreq) {
            if !names.contains(name) {
                let p = format!("{ptr}/properties/{}", escape_token(name));
                self.required_change(&p, name, oreq.contains(name), nreq.contains(name));
            }
        }
        let p = format!("{ptr}/additionalProperties");
        let (a, b) = (
            extra(o.get("additionalProperties")),
            extra(n.get("additionalProperties")),
        );
        match (a, b) {
            (Extra::Schema(x), Extra::Schema(y)) => self.node(x, y, &p, depth + 1),
            (x, y) if x.rank() == y.rank() => {}
            (x, y) => {
                let dir = if y.rank() > x.rank() {
                    Dir::Widened
                } else {
                    Dir::Narrowed
                };
                self.directed(
                    p,
                    dir,
                    "additionalProperties",
                    format!("undeclared properties: {} → {}", x.describe(), y.describe()),
                );
            }
        }
    }

    fn required_change(&mut self, p: &str, name: &str, was: bool, is: bool) {
        match (was, is) {
            (true, false) => self.directed(
                p.to_string(),
                Dir::Widened,
                "required",
                format!("`{name}` is no longer required"),
            ),
            (false, true) => self.directed(
                p.to_string(),
                Dir::Narrowed,
                "required",
                format!("`{name}` is now required"),
            ),
            _ => {}
        }
    }

    fn items(&mut self, o: &Flat, n: &Flat, ptr: &str, depth: usize) {
        let p = format!("{ptr}/items");
        let (a, b) = (o.get("items"), n.get("items"));
        if a.is_some_and(Json::is_array) || b.is_some_and(Json::is_array) {
            // Tuple form of drafts before 2020-12.
            if a.map(text) != b.map(text) {
                self.unclassified(p, "tuple `items` changed".into());
            }
        } else {
            match (extra(a), extra(b)) {
                (Extra::Schema(x), Extra::Schema(y)) => self.node(x, y, &p, depth + 1),
                (x, y) if x.rank() == y.rank() => {}
                (x, y) => {
                    let dir = if y.rank() > x.rank() {
                        Dir::Widened
                    } else {
                        Dir::Narrowed
                    };
                    self.directed(
                        p,
                        dir,
                        "items",
                        format!("items: {} → {}", x.describe(), y.describe()),
                    );
                }
            }
        }
        let p = format!("{ptr}/prefixItems");
        match (o.get("prefixItems"), n.get("prefixItems")) {
            (Some(Json::Array(x)), Some(Json::Array(y))) if x.len() == y.len() => {
                for (i, (a, b)) in x.iter().zip(y).enumerate() {
                    self.node(a, b, &format!("{p}/{i}"), depth + 1);
                }
            }
            (a, b) => {
                if a.map(text) != b.map(text) {
                    self.unclassified(p, "`prefixItems` changed length or shape".into());
                }
            }
        }
    }

    fn branches(&mut self, o: &Flat, n: &Flat, ptr: &str, depth: usize, kw: &str) {
        let p = format!("{ptr}/{kw}");
        match (o.get(kw), n.get(kw)) {
            (None, None) => {}
            (None, Some(_)) => self.directed(p, Dir::Narrowed, kw, format!("`{kw}` was added")),
            (Some(_), None) => self.directed(p, Dir::Widened, kw, format!("`{kw}` was removed")),
            (Some(Json::Array(x)), Some(Json::Array(y))) if x.len() == y.len() => {
                for (i, (a, b)) in x.iter().zip(y).enumerate() {
                    self.node(a, b, &format!("{p}/{i}"), depth + 1);
                }
            }
            (Some(Json::Array(x)), Some(Json::Array(y))) if kw == "anyOf" => {
                // Branches matched by text: a branch more accepts more, a
                // branch less accepts less; anything else is unclassified.
                let all_same = x.iter().chain(y.iter()).all(|b| self.refs_resolve_alike(b));
                let (a, b): (BTreeSet<String>, BTreeSet<String>) =
                    (x.iter().map(text).collect(), y.iter().map(text).collect());
                if all_same && a.is_subset(&b) {
                    self.directed(p, Dir::Widened, kw, "an `anyOf` branch was added".into());
                } else if all_same && b.is_subset(&a) {
                    self.directed(p, Dir::Narrowed, kw, "an `anyOf` branch was removed".into());
                } else {
                    self.unclassified(p, "`anyOf` branches changed".into());
                }
            }
            (Some(a), Some(b)) => {
                if text(a) != text(b) {
                    self.unclassified(p, format!("`{kw}` branches changed"));
                }
            }
        }
    }

    /// Every `$ref` inside `node` resolves to the same text in both documents.
    fn refs_resolve_alike(&self, node: &Json) -> bool {
        let mut refs = Vec::new();
        collect_refs(node, &mut refs);
        refs.iter().all(
            |r| match (resolve_ref(self.old_root, r), resolve_ref(self.new_root, r)) {
                (Some(a), Some(b)) => self.same_text(a, b),
                _ => false,
            },
        )
    }
}

/// Identity of a node for the recursion guard: a bare `$ref` is its target,
/// so a recursive definition reached from the root and from inside itself
/// is recognised as the same node; anything else is its text.
fn node_key(node: &Json) -> String {
    const BESIDE_A_BARE_REF: &[&str] = &["$ref", "$defs", "definitions", "$schema", "$comment"];
    if let Some(m) = node.as_object() {
        if let Some(r) = m.get("$ref").and_then(Json::as_str) {
            if m.keys().all(|k| BESIDE_A_BARE_REF.contains(&k.as_str())) {
                return format!("$ref {r}");
            }
        }
    }
    text(node)
}

/// What a schema-valued keyword allows beyond what is declared.
enum Extra<'a> {
    Nothing,
    Schema(&'a Json),
    Any,
}

impl Extra<'_> {
    fn rank(&self) -> u8 {
        match self {
            Extra::Nothing => 0,
            Extra::Schema(_) => 1,
            Extra::Any => 2,
        }
    }
    fn describe(&self) -> &'static str {
        match self {
            Extra::Nothing => "none allowed",
            Extra::Schema(_) => "allowed if they match a schema",
            Extra::Any => "any allowed",
        }
    }
}

fn extra(v: Option<&Json>) -> Extra<'_> {
    match v {
        None | Some(Json::Bool(true)) => Extra::Any,
        Some(Json::Object(m)) if m.is_empty() => Extra::Any,
        Some(Json::Bool(false)) => Extra::Nothing,
        Some(s) => Extra::Schema(s),
    }
}

fn properties(m: &Flat) -> Option<BTreeMap<String, &Json>> {
    match m.get("properties") {
        None => Some(BTreeMap::new()),
        Some(Json::Object(p)) => Some(p.iter().map(|(k, v)| (k.clone(), v)).collect()),
        Some(_) => None,
    }
}

fn required(m: &Flat) -> BTreeSet<String> {
    m.get("required")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

const ALL_TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// `None`: no `type`, every type.
fn types_of(v: Option<&Json>) -> Result<Option<BTreeSet<String>>, ()> {
    match v {
        None => Ok(None),
        Some(Json::String(s)) => Ok(Some(BTreeSet::from([s.clone()]))),
        Some(Json::Array(a)) => a
            .iter()
            .map(|t| t.as_str().map(str::to_string).ok_or(()))
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Some),
        Some(_) => Err(()),
    }
}

/// Whether a `type` set accepts instances of type `t` (`number` includes
/// the integers).
fn accepts(set: &Option<BTreeSet<String>>, t: &str) -> bool {
    match set {
        None => true,
        Some(s) => s.contains(t) || (t == "integer" && s.contains("number")),
    }
}

fn integer_only(m: &Flat) -> bool {
    matches!(types_of(m.get("type")), Ok(Some(s)) if s.len() == 1 && s.contains("integer"))
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Bound {
    value: f64,
    exclusive: bool,
}

impl Bound {
    /// For integers, `> x` is `≥ floor(x) + 1` and `≥ x` is `≥ ceil(x)`.
    fn normalized(self, lower: bool, integer: bool) -> Bound {
        if !integer {
            return self;
        }
        let value = match (lower, self.exclusive) {
            (true, true) => self.value.floor() + 1.0,
            (true, false) => self.value.ceil(),
            (false, true) => self.value.ceil() - 1.0,
            (false, false) => self.value.floor(),
        };
        Bound {
            value,
            exclusive: false,
        }
    }

    fn looser_than(&self, other: &Bound, lower: bool) -> bool {
        if self.value == other.value {
            return !self.exclusive && other.exclusive;
        }
        if lower {
            self.value < other.value
        } else {
            self.value > other.value
        }
    }
}

/// The effective lower (or upper) numeric bound of a schema, with draft-04
/// boolean `exclusiveMinimum` / `exclusiveMaximum` understood.
fn bound(m: &Flat, lower: bool) -> Result<Option<Bound>, ()> {
    let (inc, exc) = if lower {
        ("minimum", "exclusiveMinimum")
    } else {
        ("maximum", "exclusiveMaximum")
    };
    let num = |k: &str| match m.get(k) {
        None => Ok(None),
        Some(Json::Number(n)) => n.as_f64().map(Some).ok_or(()),
        Some(_) => Err(()),
    };
    let draft4_exclusive = matches!(m.get(exc), Some(Json::Bool(true)));
    let inclusive = num(inc)?.map(|value| Bound {
        value,
        exclusive: draft4_exclusive,
    });
    let exclusive = match m.get(exc) {
        Some(Json::Bool(_)) => None,
        _ => num(exc)?.map(|value| Bound {
            value,
            exclusive: true,
        }),
    };
    Ok(match (inclusive, exclusive) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => {
            // Both apply: the stricter wins.
            Some(if a.looser_than(&b, lower) { b } else { a })
        }
    })
}

fn values(v: &Json) -> Vec<String> {
    match v {
        Json::Array(a) => a.iter().map(text).collect(),
        other => vec![text(other)],
    }
}

/// The canonical texts of the values a scalar `enum` really allows, once
/// the schema's other value keywords are applied; `None` when there is no
/// enum, a value is not a scalar, or the keywords do not compile.
fn effective_enum(m: &Flat, dialect: &str) -> Option<Vec<String>> {
    let items = m.get("enum")?.as_array()?;
    if items.iter().any(|v| v.is_array() || v.is_object()) {
        return None;
    }
    let checker: Map<String, Json> = m
        .iter()
        .filter(|(k, _)| VALUE_KEYWORDS.contains(&k.as_str()) && *k != "enum")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let compiled = CompiledSchema::compile(&Json::Object(checker), dialect).ok()?;
    Some(
        items
            .iter()
            .filter(|v| compiled.is_valid(v))
            .map(text)
            .collect(),
    )
}

fn collect_refs(node: &Json, out: &mut Vec<String>) {
    match node {
        Json::Object(m) => {
            for (k, v) in m {
                if k == "$ref" {
                    if let Some(r) = v.as_str() {
                        out.push(r.to_string());
                    }
                }
                collect_refs(v, out);
            }
        }
        Json::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// Resolves a same-document reference (`#` or `#/json/pointer`, RFC 6901,
/// percent-decoded as a URI fragment). Anchors (`#name`) are not resolved:
/// a schema that uses them is compared by text.
fn resolve_ref<'a>(root: &'a Json, r: &str) -> Option<&'a Json> {
    let fragment = r.strip_prefix('#')?;
    let pointer = cetp_proto::pointer::from_fragment(fragment)?;
    if pointer.is_empty() {
        return Some(root);
    }
    if !pointer.starts_with('/') {
        return None;
    }
    root.pointer(&pointer)
}

/// A schema node as one keyword map: `$ref` targets and `allOf` parts are
/// merged in (their conjunction), `const` becomes a one-value `enum`,
/// `true` is `{}` and `false` is `{"enum": []}`. Fails when a merge would
/// change the meaning (for instance `additionalProperties` of one part
/// seeing properties declared by another), and the node is then compared by
/// text.
fn flatten(root: &Json, node: &Json, depth: usize, ref_siblings: bool) -> Result<Flat, String> {
    if depth > MAX_DEPTH {
        return Err("`$ref` / `allOf` chain too deep (a cycle?)".into());
    }
    let m = match node {
        Json::Bool(true) => return Ok(Flat::new()),
        Json::Bool(false) => return Ok(Flat::from_iter([("enum".to_string(), json!([]))])),
        Json::Object(m) => m,
        other => {
            return Err(format!(
                "a schema must be an object or a boolean, found {}",
                cetp_proto::envelope::json_type(other)
            ))
        }
    };
    let mut out = Flat::new();
    let has_ref = m.contains_key("$ref");
    if !has_ref || ref_siblings {
        for (k, v) in m {
            match k.as_str() {
                "$ref" | "allOf" | "$defs" | "definitions" => {}
                "const" => merge_keyword(&mut out, "enum", Json::Array(vec![v.clone()]))?,
                _ => merge_keyword(&mut out, k, v.clone())?,
            }
        }
    }
    if let Some(r) = m.get("$ref") {
        let r = r.as_str().ok_or("`$ref` is not a string")?;
        let target =
            resolve_ref(root, r).ok_or_else(|| format!("`$ref` {r:?} does not resolve here"))?;
        let part = flatten(root, target, depth + 1, ref_siblings)?;
        merge(&mut out, part)?;
    }
    if (!has_ref || ref_siblings) && m.contains_key("allOf") {
        let parts = m
            .get("allOf")
            .and_then(Json::as_array)
            .ok_or("`allOf` is not an array")?;
        for p in parts {
            let part = flatten(root, p, depth + 1, ref_siblings)?;
            merge(&mut out, part)?;
        }
    }
    Ok(out)
}

fn is_true_schema(v: &Json) -> bool {
    matches!(v, Json::Bool(true)) || v.as_object().is_some_and(Map::is_empty)
}

fn names(m: &Flat) -> BTreeSet<&str> {
    m.get("properties")
        .and_then(Json::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// `x` limits undeclared properties, and `y` declares some `x` does not:
/// `x`'s limit would see them, the merged map would not.
fn closes_over(x: &Flat, y: &Flat) -> bool {
    let closes = x
        .get("additionalProperties")
        .is_some_and(|v| !is_true_schema(v));
    closes
        && (!names(y).is_subset(&names(x))
            || (y.contains_key("patternProperties")
                && x.get("patternProperties") != y.get("patternProperties")))
}

fn merge(a: &mut Flat, b: Flat) -> Result<(), String> {
    if a.is_empty() {
        *a = b;
        return Ok(());
    }
    if closes_over(a, &b) || closes_over(&b, a) {
        return Err("allOf parts limit undeclared properties over different declarations".into());
    }
    for kw in ["unevaluatedProperties", "unevaluatedItems"] {
        if a.contains_key(kw) || b.contains_key(kw) {
            return Err(format!("`{kw}` across allOf parts"));
        }
    }
    let prefix_clash = (a.contains_key("prefixItems") || b.contains_key("prefixItems"))
        && a.get("prefixItems") != b.get("prefixItems")
        && (a.contains_key("items") || b.contains_key("items") || a.contains_key("prefixItems"));
    if prefix_clash {
        return Err("allOf parts disagree on tuple items".into());
    }
    let draft4 = |m: &Flat| {
        m.get("exclusiveMinimum").is_some_and(Json::is_boolean)
            || m.get("exclusiveMaximum").is_some_and(Json::is_boolean)
    };
    if (draft4(a) || draft4(&b))
        && (a.get("minimum") != b.get("minimum") || a.get("maximum") != b.get("maximum"))
    {
        return Err("allOf parts mix draft-04 exclusive bounds".into());
    }
    for (k, v) in b {
        merge_keyword(a, &k, v)?;
    }
    Ok(())
}

fn merge_keyword(a: &mut Flat, k: &str, v: Json) -> Result<(), String> {
    let Some(existing) = a.get(k) else {
        a.insert(k.to_string(), v);
        return Ok(());
    };
    if text(existing) == text(&v) {
        return Ok(());
    }
    let merged = match k {
        "type" => {
            let (Ok(Some(x)), Ok(Some(y))) = (types_of(Some(existing)), types_of(Some(&v))) else {
                return Err("`type` is malformed".into());
            };
            let (x, y) = (Some(x), Some(y));
            let mut both: BTreeSet<&str> = ALL_TYPES
                .iter()
                .copied()
                .filter(|t| accepts(&x, t) && accepts(&y, t))
                .collect();
            if both.contains("number") {
                both.remove("integer");
            }
            Json::Array(both.into_iter().map(Json::from).collect())
        }
        "enum" => {
            let keep: BTreeSet<String> = values(&v).into_iter().collect();
            let Json::Array(items) = existing else {
                return Err("`enum` is not an array".into());
            };
            Json::Array(
                items
                    .iter()
                    .filter(|i| keep.contains(&text(i)))
                    .cloned()
                    .collect(),
            )
        }
        "required" => {
            let mut all: BTreeSet<String> = BTreeSet::new();
            for r in [existing, &v] {
                let arr = r.as_array().ok_or("`required` is not an array")?;
                all.extend(arr.iter().filter_map(Json::as_str).map(str::to_string));
            }
            Json::Array(all.into_iter().map(Json::from).collect())
        }
        "properties" => {
            let (Some(x), Some(y)) = (existing.as_object(), v.as_object()) else {
                return Err("`properties` is not an object".into());
            };
            let mut p = x.clone();
            for (name, s) in y {
                let joined = match p.get(name) {
                    Some(old) if text(old) != text(s) => json!({"allOf": [old, s]}),
                    Some(old) => old.clone(),
                    None => s.clone(),
                };
                p.insert(name.clone(), joined);
            }
            Json::Object(p)
        }
        "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
            match (existing.as_f64(), v.as_f64()) {
                (Some(x), Some(y)) => {
                    if y > x {
                        v
                    } else {
                        existing.clone()
                    }
                }
                _ => return Err(format!("`{k}` differs between allOf parts")),
            }
        }
        "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
            match (existing.as_f64(), v.as_f64()) {
                (Some(x), Some(y)) => {
                    if y < x {
                        v
                    } else {
                        existing.clone()
                    }
                }
                _ => return Err(format!("`{k}` differs between allOf parts")),
            }
        }
        "uniqueItems" => Json::Bool(existing.as_bool() == Some(true) || v.as_bool() == Some(true)),
        "items" | "additionalProperties" if !existing.is_array() && !v.is_array() => {
            json!({"allOf": [existing, v]})
        }
        // Annotations validate nothing: the first one stands.
        k if ANNOTATIONS.contains(&k) => return Ok(()),
        _ => return Err(format!("allOf parts disagree on `{k}`")),
    };
    a.insert(k.to_string(), merged);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::schema::DEFAULT_DIALECT;

    fn classes(old: Json, new: Json, pos: Position) -> Vec<(String, Class, String)> {
        compare(&old, &new, pos, "", DEFAULT_DIALECT)
            .into_iter()
            .map(|c| (c.pointer, c.class, c.rule))
            .collect()
    }

    #[test]
    fn identical_schemas_have_no_changes() {
        let s = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(classes(s.clone(), s, Position::Input).is_empty());
    }

    #[test]
    fn recursive_schemas_terminate() {
        let tree = |leaf: &str| {
            json!({"$defs": {"node": {"type": "object", "properties": {
                "v": {"type": leaf},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
                "$ref": "#/$defs/node"})
        };
        assert!(classes(tree("string"), tree("string"), Position::Input).is_empty());
        let c = classes(tree("string"), tree("integer"), Position::Input);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].0, "/properties/v/type");
        assert_eq!(c[0].1, Class::Breaking);
    }

    #[test]
    fn self_reference_without_structure_is_unclassified_not_a_hang() {
        let a = json!({"$ref": "#"});
        let b = json!({"$ref": "#", "type": "string"});
        let c = classes(a, b, Position::Input);
        assert_eq!(c[0].2, "schema.unclassified");
    }

    #[test]
    fn integer_exclusive_bounds_are_normalized() {
        let a = json!({"type": "integer", "exclusiveMinimum": 0});
        let b = json!({"type": "integer", "minimum": 1});
        assert_eq!(
            classes(a, b, Position::Input),
            vec![(
                "".into(),
                Class::Compatible,
                "schema.restructured".to_string()
            )]
        );
    }

    #[test]
    fn percent_encoded_refs_resolve() {
        let root = json!({"$defs": {"a b": {"type": "string"}}});
        assert_eq!(
            resolve_ref(&root, "#/$defs/a%20b"),
            Some(&json!({"type": "string"}))
        );
        assert_eq!(resolve_ref(&root, "#anchor"), None);
        assert_eq!(resolve_ref(&root, "https://x/y"), None);
    }
}
