//! Objects: required and declared properties, properties no schema names
//! (under `additionalProperties`), one per `patternProperties` pattern,
//! `propertyNames` and the property counts.

use super::*;

impl Gen {
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
    pub(super) fn gen_object(
        &self,
        f: &Flat,
        depth: usize,
    ) -> Result<BoxedStrategy<Json>, GenError> {
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
                _ => self.strategy(&Self::prop_conj(f, name, &plan.patterns), depth + 1)?,
            };
            req.push((name.clone(), s));
        }
        let mut opt: Vec<(String, BoxedStrategy<Json>)> = Vec::new();
        for name in plan.declared.iter().filter(|n| !plan.required.contains(n)) {
            self.check_build(plan.at)?;
            match self.strategy(&Self::prop_conj(f, name, &plan.patterns), depth + 1) {
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
            match self.strategy(&extra_conj, depth + 1) {
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
                let Ok(value) = self.strategy(&conj, depth + 1) else {
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
