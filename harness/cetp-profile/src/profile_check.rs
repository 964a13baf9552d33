//! `cetp profile check`: a profile judged before anything runs.
//!
//! Two kinds of findings. A **wrong field** (args that break the tool's
//! input schema, a bind or observer pointer that names nothing the tool's
//! schemas allow, a role on a tool without the annotations the role needs,
//! a setup or role tool the profile does not allow executing) is a usage
//! error: the run would spend its time on cases that cannot judge, so it
//! stops first. A **missing field** only costs cases: each is listed with
//! the cases and requirements it leaves unjudged, derived from the vectors
//! (which step needs an observer, a role, a second identity, a timing
//! value), so a vendor sees the price of each before the first run.
//!
//! The `needs` strings are those a run names in its `not judged: … (needs
//! X)` reasons (`interp::Stop::Setup`), so the check and the run's claim
//! speak of the same fields.

use cetp_contract::lock::ToolContract;
use cetp_proto::schema::CompiledSchema;
pub use cetp_vectors::advice::{fix_for, role_hint, RESOLVE_NEEDS};
use cetp_vectors::args::valid_args;
use cetp_vectors::profile::{table_to_json, Counts, Profile, SetupCall};
use cetp_vectors::suite::Suite;
use cetp_vectors::vector::{Case, Role, Step, ToolRef};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// What a live Provider says of itself, for the checks a profile alone
/// cannot make.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The Provider's tools, with the contracts the checks need.
    pub tools: Vec<ToolContract>,
    /// The Provider's schema dialect (`get_provider_info`).
    pub dialect: String,
    /// Whether a second caller identity is available (`--target-b`, or a
    /// simulated device, which has one built in).
    pub second_identity: bool,
    /// Whether the harness can move the device's clock (a simulated device).
    pub movable_clock: bool,
    /// Whether the device plays the user's decision (`resolve` in its
    /// hello's ops): without it the confirmation cases are not judged
    /// whatever else is given.
    pub plays_decisions: bool,
}

/// A field that is wrong: the run would not judge what it is for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FieldError {
    /// The profile field, as written in TOML (`tools.add_note.sample_args`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// A field (or flag, or device ability) whose absence leaves cases
/// unjudged by the setup.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Missing {
    /// As a run's `needs X` names it.
    pub needs: String,
    /// What to write, or why it is needed.
    pub hint: String,
    /// The cases it leaves unjudged (core and capability cases).
    pub cases: Vec<String>,
    /// Of those, the core ones (§9: every core case must pass).
    pub core_cases: Vec<String>,
    /// Requirement ids of those cases.
    pub requirements: Vec<String>,
    /// True when the Provider's answers decide (e.g. `[roles.async]`: a
    /// Provider may answer every call synchronously, §2.3).
    pub conditional: bool,
}

/// What `cetp profile check` found: wrong fields, missing fields, and
/// what it could not check offline.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    /// Fields that are wrong.
    pub errors: Vec<FieldError>,
    /// Fields whose absence leaves cases unjudged.
    pub missing: Vec<Missing>,
    /// What could not be checked without a live Provider (`--target`).
    pub needs_target: Vec<String>,
}

impl Report {
    /// The report as text for a terminal (Provider strings escaped by the
    /// caller's `escape` function).
    pub fn render(&self, esc: &dyn Fn(&str) -> String) -> String {
        let mut out = String::new();
        if self.errors.is_empty() {
            out.push_str("profile: no wrong field\n");
        }
        for e in &self.errors {
            out.push_str(&format!("error: {}: {}\n", esc(&e.field), esc(&e.message)));
        }
        for m in &self.missing {
            out.push_str(&format!(
                "missing: {}{} leaves {} case(s) unjudged ({} core): {}; requirements {}\n  {}\n",
                esc(&m.needs),
                if m.conditional {
                    " (if the Provider's answers call for it)"
                } else {
                    ""
                },
                m.cases.len(),
                m.core_cases.len(),
                m.cases.join(", "),
                m.requirements.join(", "),
                esc(&m.hint)
            ));
        }
        for n in &self.needs_target {
            out.push_str(&format!("needs --target: {}\n", esc(n)));
        }
        out
    }
}

/// The annotations a role's tool must have, and why (the spec clause).
/// Derived from the vectors where they say it (`require` on every step of
/// the role, `pick` where annotations stand in for the role), plus what
/// the role means.
fn role_needs(role: &str, suite: &Suite) -> Vec<(String, Vec<Json>, &'static str)> {
    let mut out: Vec<(String, Vec<Json>, &'static str)> = Vec::new();
    let mut refs: Vec<&ToolRef> = Vec::new();
    for c in &suite.cases {
        walk(
            &c.steps.iter().map(|s| &s.step).collect::<Vec<_>>(),
            &mut |s| {
                if let Step::Call { tool: Some(t), .. } = s {
                    if t.profile_role.as_deref() == Some(role) {
                        refs.push(t);
                    }
                }
            },
        );
    }
    if let Some(first) = refs.first() {
        for (k, v) in &first.require {
            if refs.iter().all(|r| r.require.get(k) == Some(v)) {
                out.push((k.clone(), v.clone(), "the vectors' subject of this role"));
            }
        }
        for (k, v) in &first.pick {
            if refs.iter().all(|r| r.pick.get(k) == Some(v)) && !out.iter().any(|o| &o.0 == k) {
                out.push((k.clone(), v.clone(), "what annotations pick for this role"));
            }
        }
    }
    // A background operation is only possible with execution=sync_or_async
    // (§3.4, §4.4); a failing one too.
    if role == "failing_operation" && !out.iter().any(|o| o.0 == "execution") {
        out.push((
            "execution".into(),
            vec![json!("sync_or_async")],
            "§3.4: only sync_or_async tools may answer with an operation",
        ));
    }
    // A call the policy must confirm although the annotation does not say
    // so (§3.4 last rule): a tool that always confirms shows nothing.
    if role == "escalating" {
        out.push((
            "confirmation".into(),
            vec![json!("never"), json!("provider_policy")],
            "§3.4: an escalation is a stricter policy than the annotation declares",
        ));
    }
    out
}

fn annotation(t: &ToolContract, key: &str) -> Json {
    let a = &t.annotations;
    match key {
        "effect" => json!(a.effect),
        "risk" => json!(a.risk),
        "confirmation" => json!(a.confirmation),
        "execution" => json!(a.execution),
        "destructive" => json!(a.destructive),
        "idempotent" => json!(a.idempotent),
        "open_world" => json!(a.open_world),
        _ => Json::Null,
    }
}

fn matches(t: &ToolContract, pick: &BTreeMap<String, Vec<Json>>) -> bool {
    pick.iter().all(|(k, v)| v.contains(&annotation(t, k)))
}

fn describe(pick: &BTreeMap<String, Vec<Json>>) -> String {
    pick.iter()
        .map(|(k, v)| {
            let vals: Vec<String> = v
                .iter()
                .map(|x| x.to_string().trim_matches('"').to_string())
                .collect();
            format!("{k}={}", vals.join("|"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every step, nested ones included.
fn walk<'a>(steps: &[&'a Step], f: &mut dyn FnMut(&'a Step)) {
    for s in steps {
        f(s);
        match s {
            Step::Concurrent { steps }
            | Step::IfAnswer { steps, .. }
            | Step::EachTool { steps, .. } => walk(&steps.iter().collect::<Vec<_>>(), f),
            _ => {}
        }
    }
}

/// The sub-schema at a JSON pointer into instances of `schema`: `None`
/// when nothing the schema declares can be there (a member it does not
/// list, a member of a scalar), `Some(None)` when it cannot tell (no
/// members listed, a `$ref`, a combinator).
fn schema_at(schema: &Json, pointer: &str) -> Option<Option<Json>> {
    let mut s = schema.clone();
    for raw in pointer.split('/').skip(1) {
        let token = cetp_proto::pointer::unescape(raw).into_owned();
        let Some(obj) = s.as_object() else {
            // `true` (or a non-object) allows anything.
            return Some(None);
        };
        if obj.contains_key("$ref")
            || obj.contains_key("anyOf")
            || obj.contains_key("oneOf")
            || obj.contains_key("allOf")
        {
            return Some(None);
        }
        let ty: Vec<&str> = match obj.get("type") {
            Some(Json::String(t)) => vec![t.as_str()],
            Some(Json::Array(a)) => a.iter().filter_map(Json::as_str).collect(),
            _ => Vec::new(),
        };
        if let Some(p) = obj.get("properties").and_then(|p| p.get(&token)) {
            s = p.clone();
            continue;
        }
        if let Some(items) = obj.get("items").filter(|_| token.parse::<usize>().is_ok()) {
            s = items.clone();
            continue;
        }
        // A member the schema does not declare names nothing the tool
        // documents: an open object may carry it, but a profile that
        // points there is a typo far more often than a reliance on an
        // undocumented member. A schema that declares no members at all
        // says nothing either way.
        let declares = obj
            .get("properties")
            .and_then(Json::as_object)
            .is_some_and(|p| !p.is_empty());
        let open_schema = obj.get("patternProperties").is_some()
            || obj.get("additionalProperties").is_some_and(Json::is_object);
        let scalar = !ty.is_empty() && ty.iter().all(|t| !matches!(*t, "object" | "array"));
        if scalar || (declares && !open_schema && token.parse::<usize>().is_err()) {
            return None;
        }
        if ty == ["array"] && token.parse::<usize>().is_err() {
            return None;
        }
        if let Some(ap) = obj.get("additionalProperties").filter(|a| a.is_object()) {
            s = ap.clone();
            continue;
        }
        return Some(None);
    }
    Some(Some(s))
}

/// Sets `value` at `pointer`, creating members on the way (as a setup's
/// bind does).
fn set_at(doc: &mut Json, pointer: &str, value: Json) {
    if pointer.is_empty() {
        *doc = value;
        return;
    }
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| cetp_proto::pointer::unescape(t).into_owned())
        .collect();
    let mut cur = doc;
    for (i, t) in tokens.iter().enumerate() {
        let last = i + 1 == tokens.len();
        match cur {
            Json::Array(a) => {
                let Ok(n) = t.parse::<usize>() else { return };
                while a.len() <= n {
                    a.push(Json::Null);
                }
                if last {
                    a[n] = value;
                    return;
                }
                cur = &mut a[n];
            }
            Json::Object(o) => {
                if last {
                    o.insert(t.clone(), value);
                    return;
                }
                cur = o.entry(t.clone()).or_insert(json!({}));
            }
            other => {
                *other = json!({});
                if let Json::Object(o) = other {
                    if last {
                        o.insert(t.clone(), value);
                        return;
                    }
                    cur = o.entry(t.clone()).or_insert(json!({}));
                } else {
                    return;
                }
            }
        }
    }
}

struct Checker<'a> {
    profile: &'a Profile,
    suite: &'a Suite,
    facts: Option<&'a Facts>,
    /// Roles the whole vector set uses, where `suite` holds only some of
    /// its cases (a replayed finding): the profile is the vendor's for the
    /// whole suite, and a role no replayed case uses is not a typo.
    known_roles: BTreeSet<String>,
    report: Report,
}

impl Checker<'_> {
    fn err(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.report.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    /// The tool exists (with a target); its name otherwise.
    fn known(&mut self, field: &str, name: &str) -> Option<ToolContract> {
        let facts = self.facts?;
        match facts.tools.iter().find(|t| t.name == name) {
            Some(t) => Some(t.clone()),
            None => {
                let listed: Vec<&str> = facts.tools.iter().map(|t| t.name.as_str()).collect();
                self.err(
                    field,
                    format!(
                        "the Provider lists no tool {name:?} (it lists {})",
                        listed.join(", ")
                    ),
                );
                None
            }
        }
    }

    /// `args` against the tool's input schema, once every bound pointer is
    /// filled with a valid value of what the schema allows there.
    fn args(&mut self, field: &str, tool: &ToolContract, args: &Json, bound: &[&String]) {
        let dialect = self.facts.map_or("", |f| f.dialect.as_str()).to_string();
        let compiled = match CompiledSchema::compile(&tool.input_schema, &dialect) {
            Ok(c) => c,
            // The descriptor checks of a run report a schema that does
            // not compile; nothing to judge args against here.
            Err(_) => return,
        };
        let mut filled = args.clone();
        for to in bound {
            match schema_at(&tool.input_schema, to) {
                Some(Some(sub)) => match valid_args(&sub, &dialect) {
                    Some(v) => set_at(&mut filled, to, v),
                    None => return,
                },
                Some(None) => return,
                None => {} // reported by the bind check
            }
        }
        let errors = compiled.errors(&filled);
        if !errors.is_empty() {
            self.err(
                field,
                format!(
                    "breaks the input_schema of {}: {}",
                    tool.name,
                    errors.join("; ")
                ),
            );
        }
    }

    fn may_execute(&mut self, field: &str, t: &ToolContract) {
        if !self.profile.may_execute(&t.name, &t.annotations.effect) {
            self.err(
                field,
                format!(
                    "{} has effect={} and [execute] allow does not list it: the harness will not execute it",
                    t.name, t.annotations.effect
                ),
            );
        }
    }

    fn setup_calls(
        &mut self,
        owner_field: &str,
        owner: Option<&ToolContract>,
        calls: &[SetupCall],
    ) {
        for (i, s) in calls.iter().enumerate() {
            let field = format!("{owner_field}.setup[{i}]");
            if self.facts.is_none() {
                if !self.profile.execute.allow.contains(&s.tool) {
                    self.report.needs_target.push(format!(
                        "{field}.tool: whether {} is a read tool (it is not in [execute] allow)",
                        s.tool
                    ));
                }
                continue;
            }
            let Some(st) = self.known(&format!("{field}.tool"), &s.tool) else {
                continue;
            };
            self.may_execute(&format!("{field}.tool"), &st);
            self.args(&format!("{field}.args"), &st, &table_to_json(&s.args), &[]);
            for (to, from) in &s.bind {
                if schema_at(&st.output_schema, from).is_none() {
                    self.err(
                        format!("{field}.bind"),
                        format!(
                            "value {from:?} names nothing in the output_schema of {}",
                            st.name
                        ),
                    );
                }
                if let Some(o) = owner {
                    if schema_at(&o.input_schema, to).is_none() {
                        self.err(
                            format!("{field}.bind"),
                            format!("key {to:?} names nothing in the input_schema of {}", o.name),
                        );
                    }
                }
            }
        }
    }

    fn tools_section(&mut self) {
        for name in &self.profile.execute.allow.clone() {
            self.known("execute.allow", name);
        }
        for (name, section) in self.profile.tools.clone() {
            let field = format!("tools.{name}");
            let tool = self.known(&field, &name);
            self.setup_calls(&field, tool.as_ref(), &section.setup);
            let Some(tool) = tool else { continue };
            let bound: Vec<&String> = section.setup.iter().flat_map(|s| s.bind.keys()).collect();
            for (what, args) in [
                ("sample_args", &section.sample_args),
                ("escalating_args", &section.escalating_args),
            ] {
                if let Some(a) = args {
                    self.args(&format!("{field}.{what}"), &tool, &table_to_json(a), &bound);
                }
            }
        }
    }

    fn observer(&mut self) {
        let Some(o) = self.profile.observer.clone() else {
            return;
        };
        if self.facts.is_none() {
            self.report
                .needs_target
                .push("observer: whether its tool is a read tool and its pointer can exist".into());
            return;
        }
        let Some(t) = self.known("observer.tool", &o.tool) else {
            return;
        };
        if t.annotations.effect != "read" {
            self.err(
                "observer.tool",
                format!(
                    "{} has effect={}: the observer must be a read tool, called before and after steps without an effect of its own (§3.4)",
                    t.name, t.annotations.effect
                ),
            );
        }
        self.args("observer.args", &t, &table_to_json(&o.args), &[]);
        match schema_at(&t.output_schema, &o.pointer) {
            None => self.err(
                "observer.pointer",
                format!(
                    "{:?} names nothing the output_schema of {} allows",
                    o.pointer, t.name
                ),
            ),
            Some(Some(sub)) if o.counts != Counts::Snapshot => {
                let ty: Vec<&str> = match sub.get("type") {
                    Some(Json::String(s)) => vec![s.as_str()],
                    Some(Json::Array(a)) => a.iter().filter_map(Json::as_str).collect(),
                    _ => Vec::new(),
                };
                if !ty.is_empty()
                    && !ty
                        .iter()
                        .any(|t| matches!(*t, "integer" | "number" | "array"))
                {
                    self.err(
                        "observer.counts",
                        format!(
                            "counts = {:?} needs a number or an array at {:?}; the output_schema of {} says {}",
                            format!("{:?}", o.counts).to_lowercase(),
                            o.pointer,
                            t.name,
                            ty.join("|")
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    fn roles(&mut self) {
        let used = roles_used(self.suite);
        for (role, r) in self.profile.roles.clone() {
            let field = format!("roles.{role}");
            if !used.contains(&role) && self.known_roles.contains(&role) {
                continue;
            }
            if !used.contains(&role) {
                self.err(
                    &field,
                    format!(
                        "no case uses a role {role:?} (roles: {})",
                        used.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                );
                continue;
            }
            let tool = if self.facts.is_some() {
                self.known(&format!("{field}.tool"), &r.tool)
            } else {
                None
            };
            self.setup_calls(&field, tool.as_ref(), &r.setup);
            let Some(t) = tool else { continue };
            self.may_execute(&format!("{field}.tool"), &t);
            let bound: Vec<&String> = r.setup.iter().flat_map(|s| s.bind.keys()).collect();
            self.args(
                &format!("{field}.args"),
                &t,
                &table_to_json(&r.args),
                &bound,
            );
            for (key, allowed, why) in role_needs(&role, self.suite) {
                let has = annotation(&t, &key);
                if !allowed.contains(&has) {
                    let want: Vec<String> = allowed
                        .iter()
                        .map(|v| v.to_string().trim_matches('"').to_string())
                        .collect();
                    self.err(
                        format!("{field}.tool"),
                        format!(
                            "role {role} needs a tool with {key}={} ({why}); {} has {key}={}",
                            want.join("|"),
                            t.name,
                            has.to_string().trim_matches('"')
                        ),
                    );
                }
            }
            if role.ends_with("scope_missing_for_b") && t.scopes.is_empty() {
                self.err(
                    format!("{field}.tool"),
                    format!(
                        "role {role} needs a tool that declares a scope identity b lacks (§3.4 scopes, §7.2); {} declares none",
                        t.name
                    ),
                );
            }
        }
    }

    /// What each case needs that the profile (and the target) does not
    /// give, step by step, grouped by field.
    fn missing(&mut self) {
        let mut groups: BTreeMap<String, Missing> = BTreeMap::new();
        let p = self.profile;
        let facts = self.facts;
        for case in self.suite.cases.iter().filter(|c| c.role == Role::Provider) {
            let mut found: Found = Vec::new();
            if case.identities.iter().any(|i| i == "b") && !facts.is_some_and(|f| f.second_identity)
            {
                found.push((
                    cetp_vectors::advice::TARGET_B.flag.into(),
                    "a second caller identity (another UID, package and certificate): give --target-b (tcp targets; sim and adb targets bring both), or set [identities] second = false to have these cases reported unjudged instead of failed".into(),
                    // Without a target, which kind it will be is unknown.
                    facts.is_none(),
                ));
            }
            let steps: Vec<&Step> = case.steps.iter().map(|s| &s.step).collect();
            // The tool each bound call would execute (with a target).
            let mut bound: BTreeMap<String, Option<ToolContract>> = BTreeMap::new();
            walk(&steps, &mut |s| {
                step_needs(s, p, facts, &mut bound, &mut found)
            });
            for (needs, hint, conditional) in only_what_judges(found) {
                add_missing(&mut groups, &needs, hint, case, conditional);
            }
        }
        // One hint for every case the allow list keeps from running: the
        // side-effecting tools it does not list yet.
        if let (Some(m), Some(f)) = (groups.get_mut("[execute] allow"), facts) {
            let names: Vec<&str> = f
                .tools
                .iter()
                .filter(|t| !p.may_execute(&t.name, &t.annotations.effect))
                .map(|t| t.name.as_str())
                .collect();
            if !names.is_empty() {
                m.hint = format!(
                    "list in [execute] allow the side-effecting tools whose effects on this device you accept (not listed yet: {})",
                    names.join(", ")
                );
            }
        }
        self.report.missing = groups.into_values().collect();
        if facts.is_none() {
            self.report.needs_target.push(
                "args against input schemas, bind and observer pointers against output schemas, role annotations, and which allowed tools the cases would pick".into(),
            );
        }
    }
}

/// What one step needs: (needs, hint, conditional).
type Found = Vec<(String, String, bool)>;

/// What a case needs, each once, without the `--max-wait` it might need
/// where something else leaves it unjudged anyway (CONF-010 on a device
/// that plays no decision): a larger --max-wait would not judge it, and the
/// start-up line would count it under both.
fn only_what_judges(found: Found) -> Found {
    let blocked = found.iter().any(|(needs, _, conditional)| {
        !conditional && needs != cetp_vectors::advice::MAX_WAIT.flag
    });
    let mut out: Found = Vec::new();
    for f in found {
        if (blocked && f.0 == cetp_vectors::advice::MAX_WAIT.flag) || out.iter().any(|o| o.0 == f.0)
        {
            continue;
        }
        out.push(f);
    }
    out
}

/// Adds `case` to the group of `needs`.
fn add_missing(
    groups: &mut BTreeMap<String, Missing>,
    needs: &str,
    hint: String,
    case: &Case,
    conditional: bool,
) {
    let m = groups.entry(needs.to_string()).or_insert_with(|| Missing {
        needs: needs.to_string(),
        hint,
        cases: Vec::new(),
        core_cases: Vec::new(),
        requirements: Vec::new(),
        conditional,
    });
    m.conditional &= conditional;
    if !m.cases.contains(&case.id) {
        m.cases.push(case.id.clone());
        if case.needs.is_empty() {
            m.core_cases.push(case.id.clone());
        }
        for r in &case.requirements {
            if !m.requirements.contains(r) {
                m.requirements.push(r.clone());
            }
        }
    }
}

fn step_needs(
    s: &Step,
    p: &Profile,
    facts: Option<&Facts>,
    bound: &mut BTreeMap<String, Option<ToolContract>>,
    found: &mut Found,
) {
    match s {
        Step::Call {
            tool: Some(t),
            bind,
            ..
        } => {
            let chosen = choose(t, p, facts);
            if let Some(b) = bind {
                bound.insert(b.clone(), chosen.clone());
            }
            call_needs(t, chosen.as_ref(), p, facts, found);
        }
        Step::Observe { .. } if p.observer.is_none() => found.push((
            "[observer]".into(),
            "a read tool whose result shows what happened (profiles/README.md, the observer)"
                .into(),
            false,
        )),
        Step::ExpectEffects { delta, tool_of, .. } => {
            let effect = tool_of
                .as_ref()
                .and_then(|b| bound.get(b).cloned().flatten())
                .map(|t| t.annotations.effect);
            effects_needs(*delta, effect.as_deref(), p, found);
        }
        Step::AdvanceClock { profile: key, .. } => {
            if let Some(k) = key {
                if p.timing_ms(k).is_none() {
                    found.push((
                        format!("[timing] {k}"),
                        format!(
                            "the Provider's {k}, in milliseconds (profiles/README.md, [timing])"
                        ),
                        false,
                    ));
                }
            }
            // A clock that cannot move is waited for in real time, up to
            // --max-wait: only a lifetime beyond it leaves the case unjudged.
            // The shortest path first: a build with shorter lifetimes, a
            // clock the harness can move, and an hour of waiting last.
            if facts.is_some_and(|f| !f.movable_clock) {
                found.push((
                    cetp_vectors::advice::MAX_WAIT.flag.into(),
                    "the device's clock cannot be moved: the harness waits each lifetime in real time, up to cetp run --max-wait; a lifetime beyond it is judged soonest by a debug build with shorter lifetimes, then by a device whose clock the harness moves (clock=move on an emulator or userdebug phone after `adb root`), and only then by a larger --max-wait".into(),
                    true,
                ));
            }
        }
        Step::Resolve { .. } if facts.is_some_and(|f| !f.plays_decisions) => found.push((
            RESOLVE_NEEDS.into(),
            "the device's hello leaves resolve out of its ops: nothing plays the user's decision on the confirmation UI".into(),
            false,
        )),
        _ => {}
    }
}

/// A call's role, the allowed tool its `pick` needs, and args the runner
/// cannot generate for the tool it would choose.
fn call_needs(
    t: &ToolRef,
    chosen: Option<&ToolContract>,
    p: &Profile,
    facts: Option<&Facts>,
    found: &mut Found,
) {
    if let Some(role) = &t.profile_role {
        if role != "observer" && !p.roles.contains_key(role) {
            // With a `pick`, annotations may still find a tool that works.
            found.push((
                format!("[roles.{role}]"),
                role_hint(role),
                !t.pick.is_empty(),
            ));
        }
    }
    if t.profile_role.is_none() && !t.pick.is_empty() && t.executes {
        let reads = t
            .pick
            .get("effect")
            .is_none_or(|e| e.contains(&json!("read")));
        match facts {
            Some(f) => {
                let matching: Vec<&ToolContract> =
                    f.tools.iter().filter(|x| matches(x, &t.pick)).collect();
                if !matching.is_empty()
                    && !matching
                        .iter()
                        .any(|x| p.may_execute(&x.name, &x.annotations.effect))
                {
                    let names: Vec<&str> = matching.iter().map(|x| x.name.as_str()).collect();
                    found.push((
                        "[execute] allow".into(),
                        format!(
                            "list a tool with {} the harness may execute for real: {}",
                            describe(&t.pick),
                            names.join(", ")
                        ),
                        false,
                    ));
                }
            }
            None if !reads && p.execute.allow.is_empty() => found.push((
                "[execute] allow".into(),
                format!(
                    "list a tool with {} the harness may execute for real",
                    describe(&t.pick)
                ),
                false,
            )),
            None => {}
        }
    }
    if let Some(c) = chosen {
        let dialect = facts.map_or(String::new(), |f| f.dialect.clone());
        if p.tools.get(&c.name).is_none_or(|s| s.sample_args.is_none())
            && t.profile_role
                .as_ref()
                .is_none_or(|r| !p.roles.contains_key(r))
            && valid_args(&c.input_schema, &dialect).is_none()
        {
            found.push((
                format!("[tools.{}] sample_args", c.name),
                format!(
                    "the harness cannot generate valid args from the input_schema of {}: write them",
                    c.name
                ),
                false,
            ));
        }
    }
}

/// What the observer must count for `delta` effects of a tool with
/// `effect` (unknown without a target) to be judged.
fn effects_needs(delta: i64, effect: Option<&str>, p: &Profile, found: &mut Found) {
    let Some(o) = &p.observer else { return };
    if delta == 0 {
        return;
    }
    match o.counts {
        Counts::Snapshot if effect != Some("read") => found.push((
            "[observer] counts".into(),
            "set observer.counts to \"effects\" (a counter of committed effects) or \"objects\" (a number or list of objects)".into(),
            false,
        )),
        Counts::Objects => match effect {
            Some("create" | "delete" | "read") => {}
            Some(_) => found.push((
                "[observer] counts = \"effects\"".into(),
                "a count of objects does not show an update or a transaction: point the observer at a counter of committed effects".into(),
                false,
            )),
            None => found.push((
                "[observer] counts = \"effects\"".into(),
                "if the tool this case executes is an update or a transaction, a count of objects cannot show its effect".into(),
                true,
            )),
        },
        _ => {}
    }
}

/// The tool a call step would execute, as the run chooses it (a role's
/// tool, a literal name, or among the tools matching `pick` by name,
/// preferring one the profile allows).
fn choose(t: &ToolRef, p: &Profile, facts: Option<&Facts>) -> Option<ToolContract> {
    let f = facts?;
    if let Some(role) = &t.profile_role {
        let name = match role.as_str() {
            "observer" => p.observer.as_ref().map(|o| o.tool.clone()),
            _ => p.roles.get(role).map(|r| r.tool.clone()),
        };
        if let Some(n) = name {
            return f.tools.iter().find(|x| x.name == n).cloned();
        }
    }
    if let Some(n) = &t.name {
        return f.tools.iter().find(|x| &x.name == n).cloned();
    }
    if t.pick.is_empty() {
        return None;
    }
    let mut m: Vec<&ToolContract> = f.tools.iter().filter(|x| matches(x, &t.pick)).collect();
    m.sort_by(|a, b| a.name.cmp(&b.name));
    m.iter()
        .find(|x| !t.executes || p.may_execute(&x.name, &x.annotations.effect))
        .or(m.first())
        .map(|x| (*x).clone())
}

/// Judges `profile` against the vectors and, when given, the live
/// Provider's tools.
pub fn check(profile: &Profile, suite: &Suite, facts: Option<&Facts>) -> Report {
    check_part(profile, suite, &BTreeSet::new(), facts)
}

/// The roles the cases of `suite` name (`tool.profile_role`).
pub fn roles_used(suite: &Suite) -> BTreeSet<String> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    for c in &suite.cases {
        walk(
            &c.steps.iter().map(|s| &s.step).collect::<Vec<_>>(),
            &mut |s| {
                if let Step::Call { tool: Some(t), .. } = s {
                    if let Some(r) = &t.profile_role {
                        used.insert(r.clone());
                    }
                }
            },
        );
    }
    used
}

/// As [`check`], for a profile written for the whole vector set and run
/// with some of its cases (`suite`, a replayed case file): a role in
/// `known_roles` (the whole set's, [`roles_used`]) that no case of `suite`
/// uses is left alone rather than called a typo; the roles `suite` does use
/// are checked as [`check`] checks them.
pub fn check_part(
    profile: &Profile,
    suite: &Suite,
    known_roles: &BTreeSet<String>,
    facts: Option<&Facts>,
) -> Report {
    let mut c = Checker {
        profile,
        suite,
        facts,
        known_roles: known_roles.clone(),
        report: Report::default(),
    };
    c.tools_section();
    c.observer();
    c.roles();
    c.missing();
    c.report
}

/// A live Provider read for a check or a starter profile: read-only calls
/// only (hello, discover, negotiate, `get_provider_info`, `list_tools`).
#[derive(Clone, Debug)]
pub struct Live {
    /// What the Provider said of itself.
    pub facts: Facts,
    /// Places where the descriptors break the spec (a run judges them).
    pub problems: usize,
    /// The Provider's package.
    pub package: String,
    /// Its `provider_id` (§3.1).
    pub provider_id: String,
    /// Its tool list's `revision` (§3.3).
    pub revision: String,
}

/// Reads what a check needs from `target`, identified as a run would.
pub fn read_live(
    target: &cetp_vectors::device::Target,
    profile: &Profile,
) -> Result<Live, cetp_conformance::lock_target::FetchError> {
    let (hello, env) = cetp_conformance::identify::identify(target, profile)
        .map_err(cetp_conformance::lock_target::FetchError::Infra)?;
    let answers = cetp_conformance::lock_target::fetch(target.a.as_ref(), &env.authority, true)?;
    let built = cetp_contract::lock::build(
        &answers,
        &cetp_conformance::lock_target::offered(),
        Some(&env.package),
    );
    let has_op = |op: &str| {
        hello
            .as_ref()
            .is_some_and(|h| h.ops.iter().any(|o| o == op))
    };
    let movable_clock = has_op("advance_clock");
    let plays_decisions = has_op("resolve");
    Ok(Live {
        facts: Facts {
            tools: built.lock.tools,
            dialect: built.lock.schema_dialect,
            second_identity: target.b.is_some(),
            movable_clock,
            plays_decisions,
        },
        problems: built.problems.len(),
        package: env.package,
        provider_id: built.lock.provider_id,
        revision: built.lock.revision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_names_what_the_schema_declares_or_cannot_tell() {
        let s = json!({"type": "object", "properties": {
            "notes": {"type": "array", "items": {"type": "object", "properties": {"note_id": {"type": "string"}}}},
            "count": {"type": "integer"},
            "extra": {"type": "object"}
        }});
        assert!(matches!(schema_at(&s, "/notes/0/note_id"), Some(Some(_))));
        assert!(matches!(schema_at(&s, "/count"), Some(Some(_))));
        assert!(schema_at(&s, "/counts").is_none(), "not declared");
        assert!(schema_at(&s, "/count/x").is_none(), "inside a number");
        assert!(
            schema_at(&s, "/notes/x").is_none(),
            "an array has no members"
        );
        assert_eq!(
            schema_at(&s, "/extra/anything"),
            Some(None),
            "declares none"
        );
        assert_eq!(schema_at(&json!({}), "/x"), Some(None));
        assert_eq!(schema_at(&json!({"$ref": "#/x"}), "/x"), Some(None));
        // A bound pointer is filled like a setup's bind fills it.
        let mut args = json!({"note_ids": ["placeholder"]});
        set_at(&mut args, "/note_ids/0", json!("n_1"));
        set_at(&mut args, "/a/b", json!(1));
        assert_eq!(args, json!({"note_ids": ["n_1"], "a": {"b": 1}}));
    }

    /// Issue 42: on a device whose clock cannot move and that plays no
    /// decision, the start-up count puts CONF-010 under what it lacks for
    /// good (resolve), not also under --max-wait, which could not judge it;
    /// BIND-005, which needs only time, stays under --max-wait; no case is
    /// counted twice in one group.
    #[test]
    fn a_case_the_device_cannot_judge_is_not_counted_under_max_wait() {
        let suite = Suite::load(&cetp_vectors::suite::default_vectors_dir()).unwrap();
        let text = std::fs::read_to_string(
            cetp_vectors::suite::default_vectors_dir().join("../profiles/reference.toml"),
        )
        .unwrap();
        let profile = Profile::from_toml(&text).unwrap();
        let facts = |plays_decisions| Facts {
            tools: Vec::new(),
            dialect: String::new(),
            second_identity: true,
            movable_clock: false,
            plays_decisions,
        };
        let group = |r: &Report, needs: &str| -> Vec<String> {
            r.missing
                .iter()
                .find(|m| m.needs == needs)
                .map(|m| m.cases.clone())
                .unwrap_or_default()
        };
        let with = check(&profile, &suite, Some(&facts(true)));
        let waits = group(&with, "--max-wait");
        assert!(waits.iter().any(|c| c == "CONF-010"), "{waits:?}");
        assert!(waits.iter().any(|c| c == "BIND-005"), "{waits:?}");
        let without = check(&profile, &suite, Some(&facts(false)));
        let waits = group(&without, "--max-wait");
        let decisions = group(&without, RESOLVE_NEEDS);
        assert!(decisions.iter().any(|c| c == "CONF-010"), "{decisions:?}");
        assert!(!waits.iter().any(|c| c == "CONF-010"), "{waits:?}");
        assert!(waits.iter().any(|c| c == "BIND-005"), "{waits:?}");
        for m in &without.missing {
            let mut seen = BTreeSet::new();
            assert!(m.cases.iter().all(|c| seen.insert(c)), "{m:?}");
        }
    }

    /// The fix for a lifetime beyond --max-wait names the shortest path
    /// first: a build with shorter lifetimes, then a clock that moves, and
    /// the hour of real time last.
    #[test]
    fn the_max_wait_fix_puts_the_shortest_path_first() {
        let f = fix_for("--max-wait 3660s");
        let build = f.find("shorter").unwrap();
        let clock = f.find("clock=move").unwrap();
        let wait = f.find("give --max-wait 3660s").unwrap();
        assert!(build < clock && clock < wait, "{f}");
    }

    #[test]
    fn every_fix_names_a_change() {
        for needs in [
            "[observer]",
            "[observer] counts",
            "[execute] allow",
            "--target-b",
            "[roles.async]",
            "[timing] resume_token_ttl_ms",
            "[tools.get_note] setup",
            "--max-wait 4m",
        ] {
            let f = fix_for(needs);
            assert!(!f.is_empty() && f != needs, "{needs}: {f}");
        }
        assert_eq!(
            fix_for("[timing] resume_token_ttl_ms"),
            "set [timing] resume_token_ttl_ms in milliseconds"
        );
    }
}
