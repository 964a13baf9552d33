//! `cetp init`: a commented starter profile written from a live Provider's
//! own descriptors. Everything here is read from `list_tools` (annotations,
//! schemas, scopes); nothing side-effecting is executed to write it.
//!
//! What a vendor must decide stays theirs: `[execute] allow` is empty (the
//! side-effecting tools are listed in a comment with their annotations), and
//! every field that only works once a side-effecting tool is allowed (setup
//! steps, roles on such tools) is written commented out, ready to enable.
//! The end of the file says what each missing field leaves unjudged, from
//! [`crate::profile_check`] run over the starter itself.

use crate::profile_check::{check, Live};
use cetp_contract::lock::ToolContract;
use cetp_vectors::args::valid_args;
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use serde_json::Value as Json;
use std::fmt::Write as _;

/// Provider strings in comments: a control character would end the
/// comment line (or break TOML), so none gets through; bounded.
fn plain(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(300)
        .collect()
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A JSON value as an inline TOML value; `None` where TOML cannot say it
/// (a null).
fn toml_inline(v: &Json) -> Option<String> {
    let t: toml::Value = toml::Value::try_from(v).ok()?;
    if contains_null(v) {
        return None;
    }
    Some(t.to_string())
}

fn contains_null(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Array(a) => a.iter().any(contains_null),
        Json::Object(o) => o.values().any(contains_null),
        _ => false,
    }
}

fn annotations(t: &ToolContract) -> String {
    let a = &t.annotations;
    plain(&format!(
        "effect={} risk={} confirmation={} execution={} destructive={} idempotent={} open_world={}{}",
        a.effect,
        a.risk,
        a.confirmation,
        a.execution,
        a.destructive,
        a.idempotent,
        a.open_world,
        if t.scopes.is_empty() {
            String::new()
        } else {
            format!(" scopes={}", t.scopes.join("|"))
        }
    ))
}

fn types(schema: &Json) -> Vec<String> {
    match schema.get("type") {
        Some(Json::String(s)) => vec![s.clone()],
        Some(Json::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// Pointers into a read tool's result to a list or a count (top level and
/// one level down), with the `counts` each can support.
fn observer_candidates(t: &ToolContract) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    let visit = |prefix: &str,
                 schema: &Json,
                 depth: usize,
                 out: &mut Vec<(String, &'static str)>| {
        let Some(props) = schema.get("properties").and_then(Json::as_object) else {
            return Vec::new();
        };
        let mut deeper = Vec::new();
        for (k, s) in props {
            let p = format!("{prefix}/{}", cetp_proto::pointer::escape(k));
            let ty = types(s);
            if ty.iter().any(|t| t == "array") {
                out.push((
                    p,
                    "objects (a list: a create adds an entry, a delete removes one) or snapshot",
                ));
            } else if ty.iter().any(|t| t == "integer") {
                out.push((p, "effects (if it counts committed changes) or objects (if it counts objects) or snapshot"));
            } else if depth == 0 && ty.iter().any(|t| t == "object") {
                deeper.push((p, s.clone()));
            }
        }
        deeper
    };
    let deeper = visit("", &t.output_schema, 0, &mut out);
    for (p, s) in deeper {
        visit(&p, &s, 1, &mut out);
    }
    out
}

/// Required top-level args of `tool` that a create's result carries under
/// the same name: (create tool, pointer).
fn id_source<'a>(
    tool: &ToolContract,
    creates: &[&'a ToolContract],
) -> Option<(&'a ToolContract, String)> {
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let props = tool.input_schema.get("properties")?.as_object()?;
    for name in required {
        let arg_types = props.get(name).map(types).unwrap_or_default();
        let mut sorted: Vec<&&ToolContract> = creates.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        for c in sorted {
            let Some(out) = c.output_schema.get("properties").and_then(|p| p.get(name)) else {
                continue;
            };
            let out_types = types(out);
            if arg_types.is_empty() || out_types.iter().any(|t| arg_types.contains(t)) {
                return Some((c, format!("/{}", cetp_proto::pointer::escape(name))));
            }
        }
    }
    None
}

/// For a read tool that takes an object's id: a read tool without
/// required args whose result lists objects carrying that id, and the
/// pointer to the first one's (the list's first entry at run time). A read
/// acting on an object that exists needs no side effect to find one.
fn list_source<'a>(
    tool: &ToolContract,
    reads: &[&'a ToolContract],
) -> Option<(&'a ToolContract, String, String)> {
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let esc = |s: &str| cetp_proto::pointer::escape(s).into_owned();
    // Only args that name an object (`note_id`, `id`): a symbol or a
    // query a list also carries is better generated, and a list that is
    // empty at run time would leave the read unjudged for nothing.
    let names_object = |n: &str| {
        let l = n.to_ascii_lowercase();
        l == "id" || l.ends_with("_id") || n.ends_with("Id")
    };
    for name in required.into_iter().filter(|n| names_object(n)) {
        for r in reads.iter().filter(|r| r.name != tool.name) {
            let no_args = r
                .input_schema
                .get("required")
                .and_then(Json::as_array)
                .is_none_or(|a| a.is_empty());
            let Some(props) = r.output_schema.get("properties").and_then(Json::as_object) else {
                continue;
            };
            if !no_args {
                continue;
            }
            for (list, s) in props {
                let carries = types(s).iter().any(|t| t == "array")
                    && s.pointer(&format!("/items/properties/{}", esc(name)))
                        .is_some();
                if carries {
                    return Some((
                        r,
                        format!("/{}", esc(name)),
                        format!("/{}/0/{}", esc(list), esc(name)),
                    ));
                }
            }
        }
    }
    None
}

/// Valid args for `schema`: the run's own generator first (the args a run
/// would make), then `fallback` (the caller's schema-driven generator,
/// `cetp-gen`, which satisfies patterns and formats the simple one
/// cannot); a value is kept only when the schema accepts it.
fn sample(schema: &Json, dialect: &str, fallback: &dyn Fn(&Json) -> Option<Json>) -> Option<Json> {
    valid_args(schema, dialect).or_else(|| {
        let v = fallback(schema)?;
        let compiled = cetp_proto::schema::CompiledSchema::compile(schema, dialect).ok()?;
        compiled.is_valid(&v).then_some(v)
    })
}

/// The starter profile's text for the Provider `live` describes;
/// `generate` draws valid args where the run's own generator cannot.
pub fn starter(
    live: &Live,
    suite: &Suite,
    target_label: &str,
    generate: &dyn Fn(&Json) -> Option<Json>,
) -> String {
    let mut tools: Vec<&ToolContract> = live
        .facts
        .tools
        .iter()
        .filter(|t| cetp_proto::descriptor::is_valid_tool_name(&t.name))
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let dialect = live.facts.dialect.as_str();
    let side: Vec<&ToolContract> = tools
        .iter()
        .copied()
        .filter(|t| t.annotations.effect != "read")
        .collect();
    let reads: Vec<&ToolContract> = tools
        .iter()
        .copied()
        .filter(|t| t.annotations.effect == "read")
        .collect();
    let creates: Vec<&ToolContract> = side
        .iter()
        .copied()
        .filter(|t| t.annotations.effect == "create")
        .collect();
    let mut o = String::new();
    head_section(&mut o, live, target_label, &side);
    tool_sections(&mut o, &tools, &reads, &creates, dialect, generate);
    observer_section(&mut o, &reads);
    role_sections(&mut o, &tools, &reads, &side);
    unjudged_section(&mut o, live, suite);
    o
}

/// The header, `[target]` and `[execute]` with the side-effecting tools.
fn head_section(o: &mut String, live: &Live, target_label: &str, side: &[&ToolContract]) {
    let _ = writeln!(
        o,
        "# Starter profile of {}, written by `cetp init` from the Provider's own",
        plain(&live.package)
    );
    let _ = writeln!(
        o,
        "# descriptors (revision {}) on {}. Nothing side-effecting was executed",
        plain(&live.revision),
        plain(target_label)
    );
    let _ = writeln!(
        o,
        "# to write it. Check it with `cetp profile check FILE --target ...`."
    );
    let _ = writeln!(o, "# Every field: profiles/README.md.\n");
    let _ = writeln!(o, "[target]\npackage = {}\n", toml_string(&live.package));

    let _ = writeln!(o, "[execute]");
    let _ = writeln!(
        o,
        "# A side-effecting tool is executed for real only when listed here. Its"
    );
    let _ = writeln!(
        o,
        "# tools (list those whose effects on this device you accept):"
    );
    for t in side {
        let _ = writeln!(o, "#   {}: {}", t.name, annotations(t));
    }
    if side.is_empty() {
        let _ = writeln!(o, "#   (none: every tool is effect=read)");
    }
    let _ = writeln!(o, "allow = []\n");
}

/// `[tools.NAME]` of every tool: its sample args and setup.
fn tool_sections(
    o: &mut String,
    tools: &[&ToolContract],
    reads: &[&ToolContract],
    creates: &[&ToolContract],
    dialect: &str,
    generate: &dyn Fn(&Json) -> Option<Json>,
) {
    for t in tools {
        let _ = writeln!(o, "[tools.{}]", t.name);
        let _ = writeln!(o, "# {}", annotations(t));
        match sample(&t.input_schema, dialect, generate)
            .as_ref()
            .and_then(toml_inline)
        {
            Some(v) => {
                let _ = writeln!(
                    o,
                    "# generated from its input_schema: write realistic values"
                );
                let _ = writeln!(o, "sample_args = {v}");
            }
            None => {
                let _ = writeln!(
                    o,
                    "# no valid args could be generated from its input_schema: write them"
                );
                let _ = writeln!(o, "# sample_args = {{ }}");
            }
        }
        if t.annotations.effect == "create" {
            let _ = writeln!(
                o,
                "# args your own policy must confirm (a runtime risk above the annotation, §3.4):"
            );
            let _ = writeln!(o, "# escalating_args = {{ }}");
        }
        let takes_args = t
            .input_schema
            .get("required")
            .and_then(Json::as_array)
            .is_some_and(|r| !r.is_empty());
        if takes_args && t.annotations.effect == "read" {
            if let Some((r, to, from)) = list_source(t, reads) {
                let _ = writeln!(
                    o,
                    "# reads an object that exists: {} lists them; the first one's id is used",
                    r.name
                );
                let _ = writeln!(
                    o,
                    "setup = [ {{ tool = {}, bind = {{ {} = {} }} }} ]",
                    toml_string(&r.name),
                    toml_string(&to),
                    toml_string(&from)
                );
            }
        }
        if takes_args && matches!(t.annotations.effect.as_str(), "delete" | "update") {
            match id_source(t, creates) {
                Some((c, p)) => {
                    let args = sample(&c.input_schema, dialect, generate)
                        .as_ref()
                        .and_then(toml_inline)
                        .unwrap_or_else(|| "{}".into());
                    let _ = writeln!(
                        o,
                        "# acts on an object that exists: {} makes one and its result carries {}.",
                        c.name,
                        plain(&p)
                    );
                    let _ = writeln!(
                        o,
                        "# Enable once {} and {} are in [execute] allow:",
                        c.name, t.name
                    );
                    let _ = writeln!(
                        o,
                        "# setup = [ {{ tool = {}, args = {args}, bind = {{ {} = {} }} }} ]",
                        toml_string(&c.name),
                        toml_string(&p),
                        toml_string(&p)
                    );
                }
                None => {
                    let _ = writeln!(
                        o,
                        "# acts on an object that exists: no create's result carries what it takes; write a setup (profiles/README.md)"
                    );
                }
            }
        }
        let _ = writeln!(o);
    }
}

/// Input properties by which a read tool caps the page it returns.
const LIMIT_ARGS: &[&str] = &["limit", "max_items", "max_results", "page_size", "per_page"];

/// The observer `cetp init` writes: `counts`, the args to pass, and what
/// the vendor must confirm or know.
struct ObserverChoice {
    counts: &'static str,
    args: Json,
    notes: Vec<String>,
}

/// The last member name of `pointer`.
fn member(pointer: &str) -> String {
    let last = pointer.rsplit('/').next().unwrap_or("");
    last.replace("~1", "/").replace("~0", "~")
}

/// An integer whose name says it counts: `count`, `total`, `*_count`,
/// `effects`. Some(counts) it supports, by its name.
fn counter_kind(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    if n.contains("effect") {
        Some("effects")
    } else if n == "count"
        || n == "total"
        || n.ends_with("_count")
        || n.starts_with("count_")
        || n.ends_with("_total")
        || n.starts_with("num_")
    {
        Some("objects")
    } else {
        None
    }
}

/// The limit arg of a list tool (its name, and its schema's maximum if
/// stated) and its output array's `maxItems`.
type ListCap = (Option<(String, Option<i64>)>, Option<u64>);

/// How the page a list tool returns is capped: the limit arg (its name
/// and the largest value its schema allows, if it states one) and the
/// output array's `maxItems`.
fn list_cap(tool: &ToolContract, pointer: &str) -> ListCap {
    let arg = tool
        .input_schema
        .get("properties")
        .and_then(Json::as_object)
        .and_then(|props| {
            LIMIT_ARGS.iter().find_map(|name| {
                let s = props.get(*name)?;
                if !types(s).iter().any(|t| t == "integer" || t == "number") {
                    return None;
                }
                let max = s.get("maximum").and_then(Json::as_i64).or_else(|| {
                    s.get("exclusiveMaximum")
                        .and_then(Json::as_i64)
                        .map(|m| m - 1)
                });
                Some(((*name).to_string(), max))
            })
        });
    let mut schema = &tool.output_schema;
    for part in pointer.split('/').skip(1) {
        let name = part.replace("~1", "/").replace("~0", "~");
        match schema.get("properties").and_then(|p| p.get(&name)) {
            Some(s) => schema = s,
            None => return (arg, None),
        }
    }
    (arg, schema.get("maxItems").and_then(Json::as_u64))
}

/// The observer among `candidates` (tool, pointer, what it supports): a
/// count first (a list may be a capped page, and then an effect past its
/// end does not show); else a list that is not capped; else the list
/// capped highest, with the largest limit its schema allows passed in the
/// args; else the first candidate, as a snapshot.
fn choose_observer(
    candidates: &[(&ToolContract, String, &'static str)],
) -> (usize, ObserverChoice) {
    let counter = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.2.starts_with("objects"))
        .filter_map(|(i, c)| counter_kind(&member(&c.1)).map(|k| (i, k)))
        .min_by_key(|(_, k)| if *k == "effects" { 0 } else { 1 });
    if let Some((i, counts)) = counter {
        let notes = vec![format!(
            "{} counts: confirm it counts {} (\"effects\": every committed change; \"objects\": the objects there are) and that only the harness's calls change it during a run",
            member(&candidates[i].1),
            if counts == "effects" { "committed changes" } else { "objects" }
        )];
        return (
            i,
            ObserverChoice {
                counts,
                args: Json::Object(Default::default()),
                notes,
            },
        );
    }
    let lists: Vec<(usize, ListCap)> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.2.starts_with("objects"))
        .map(|(i, c)| (i, list_cap(c.0, &c.1)))
        .collect();
    let uncapped = lists
        .iter()
        .find(|(_, (arg, max))| arg.is_none() && max.is_none());
    let best = uncapped.or_else(|| {
        lists.iter().max_by_key(|(_, (arg, max))| {
            let by_arg = arg.as_ref().and_then(|a| a.1).unwrap_or(0);
            by_arg.max(max.map_or(0, |m| i64::try_from(m).unwrap_or(i64::MAX)))
        })
    });
    let Some((i, (arg, max_items))) = best else {
        let notes =
            vec!["no count and no list: a snapshot shows only that something changed".to_string()];
        return (
            0,
            ObserverChoice {
                counts: "snapshot",
                args: Json::Object(Default::default()),
                notes,
            },
        );
    };
    let (tool, pointer, _) = &candidates[*i];
    let mut args = serde_json::Map::new();
    let mut notes = vec!["confirm: only the harness's calls change it during a run".to_string()];
    match arg {
        Some((name, Some(max))) => {
            args.insert(name.clone(), Json::from(*max));
            notes.push(format!(
                "{pointer} is a capped page: {} takes `{name}` (at most {max}, passed above); with more entries than that an effect past the page does not show: point the observer at a count if the Provider has one",
                tool.name
            ));
        }
        Some((name, None)) => notes.push(format!(
            "{pointer} is a capped page: {} takes `{name}` and its schema states no maximum: pass the largest it takes in args, or point the observer at a count if the Provider has one",
            tool.name
        )),
        None => {}
    }
    if let Some(m) = max_items {
        notes.push(format!(
            "{pointer} holds at most {m} entries (maxItems of the output schema): with more, an effect past them does not show"
        ));
    }
    (
        *i,
        ObserverChoice {
            counts: "objects",
            args: Json::Object(args),
            notes,
        },
    )
}

/// The observer candidates and the one chosen.
fn observer_section(o: &mut String, reads: &[&ToolContract]) {
    // The observer: a read tool whose result is a list or a count.
    let mut candidates: Vec<(&ToolContract, String, &'static str)> = Vec::new();
    for t in reads {
        let required = t
            .input_schema
            .get("required")
            .and_then(Json::as_array)
            .is_some_and(|r| !r.is_empty());
        if required {
            continue;
        }
        for (p, counts) in observer_candidates(t) {
            candidates.push((t, p, counts));
        }
    }
    let _ = writeln!(
        o,
        "# The observer: a read tool whose result shows what happened."
    );
    if candidates.is_empty() {
        let _ = writeln!(
            o,
            "# No read tool without required args returns a list or a count: cases that"
        );
        let _ = writeln!(
            o,
            "# look for effects stay unjudged (see the end of this file)."
        );
    } else {
        let _ = writeln!(o, "# Candidates, with the `counts` each could support:");
        for (t, p, counts) in &candidates {
            let _ = writeln!(o, "#   {} {}: {}", t.name, plain(p), counts);
        }
        let (i, choice) = choose_observer(&candidates);
        let (tool, pointer, _) = &candidates[i];
        let _ = writeln!(o, "[observer]");
        let _ = writeln!(o, "tool = {}", toml_string(&tool.name));
        let _ = writeln!(
            o,
            "args = {}",
            toml_inline(&choice.args).unwrap_or_else(|| "{}".into())
        );
        let _ = writeln!(o, "pointer = {}", toml_string(pointer));
        for line in &choice.notes {
            let _ = writeln!(o, "# {}", plain(line));
        }
        let _ = writeln!(o, "counts = {}", toml_string(choice.counts));
    }
    let _ = writeln!(o);
}

/// The candidates for each role, commented out.
fn role_sections(
    o: &mut String,
    tools: &[&ToolContract],
    reads: &[&ToolContract],
    side: &[&ToolContract],
) {
    // Roles annotations can suggest.
    let _ = writeln!(
        o,
        "# Roles (profiles/README.md, Roles): tools and args for what annotations cannot say."
    );
    let asyncs: Vec<&ToolContract> = tools
        .iter()
        .copied()
        .filter(|t| t.annotations.execution == "sync_or_async")
        .collect();
    for role in ["async", "failing_operation"] {
        let _ = writeln!(
            o,
            "# [roles.{role}]: {}",
            crate::profile_check::role_hint(role)
        );
        if asyncs.is_empty() {
            let _ = writeln!(o, "#   no tool declares execution=sync_or_async");
        }
        for t in &asyncs {
            let _ = writeln!(o, "#   candidate: {} ({})", t.name, annotations(t));
        }
        let _ = writeln!(o, "# [roles.{role}]\n# tool = \"...\"\n# args = {{ }}");
    }
    let _ = writeln!(
        o,
        "# [roles.large_result]: {}",
        crate::profile_check::role_hint("large_result")
    );
    for t in reads.iter().filter(|t| !observer_candidates(t).is_empty()) {
        let _ = writeln!(o, "#   candidate: {} (its result holds a list)", t.name);
    }
    let _ = writeln!(
        o,
        "# [roles.large_result]\n# tool = \"...\"\n# args = {{ }}"
    );
    let _ = writeln!(
        o,
        "# [roles.escalating]: {}",
        crate::profile_check::role_hint("escalating")
    );
    for t in side
        .iter()
        .filter(|t| t.annotations.confirmation != "always")
    {
        let _ = writeln!(o, "#   candidate: {} ({})", t.name, annotations(t));
    }
    let _ = writeln!(o, "# [roles.escalating]\n# tool = \"...\"\n# args = {{ }}");
    for role in ["scope_missing_for_b", "read_scope_missing_for_b"] {
        let _ = writeln!(
            o,
            "# [roles.{role}]: {}",
            crate::profile_check::role_hint(role)
        );
        for t in tools.iter().filter(|t| {
            !t.scopes.is_empty()
                && (role == "scope_missing_for_b" || t.annotations.effect == "read")
        }) {
            let _ = writeln!(o, "#   candidate: {} ({})", t.name, annotations(t));
        }
        let _ = writeln!(o, "# [roles.{role}]\n# tool = \"...\"\n# args = {{ }}");
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "# Selectors of your confirmation UI, for a device that plays the user's decision:"
    );
    let _ = writeln!(
        o,
        "# [ui.approve]\n# text = \"Allow\"\n# [ui.deny]\n# text = \"Deny\"\n"
    );
    let _ = writeln!(o, "# Lifetimes only you know, in milliseconds:");
    let _ = writeln!(o, "# [timing]\n# resume_token_ttl_ms = 600000\n");
}

/// What the starter leaves unjudged, from the check itself.
fn unjudged_section(o: &mut String, live: &Live, suite: &Suite) {
    // What this starter leaves unjudged, from the check itself.
    match Profile::from_toml(o) {
        Ok(p) => {
            let report = check(&p, suite, Some(&live.facts));
            if !report.missing.is_empty() {
                let _ = writeln!(
                    o,
                    "# What this profile leaves unjudged (`cetp profile check` says the same):"
                );
            }
            for m in &report.missing {
                let _ = writeln!(
                    o,
                    "# without {}{}: {} case(s), {} core ({}); requirements {}",
                    plain(&m.needs),
                    if m.conditional {
                        " (if the Provider's answers call for it)"
                    } else {
                        ""
                    },
                    m.cases.len(),
                    m.core_cases.len(),
                    m.cases.join(", "),
                    m.requirements.join(", ")
                );
                let _ = writeln!(o, "#   {}", plain(&m.hint));
            }
        }
        Err(e) => {
            let _ = writeln!(
                o,
                "# (internal: the starter does not parse: {})",
                plain(&e.message)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A read tool of a small described Provider, as a lock holds it.
    fn read_tool(name: &str, input: Json, output: Json) -> ToolContract {
        serde_json::from_value(json!({
            "name": name, "description": "d",
            "input_schema": input, "input_schema_sha256": "",
            "output_schema": output, "output_schema_sha256": "",
            "scopes": [],
            "annotations": {"effect": "read", "risk": "low", "destructive": false, "idempotent": true,
                "open_world": false, "confirmation": "never", "execution": "sync"},
            "effect_class": "read"
        }))
        .unwrap()
    }

    fn observer_of(tools: &[ToolContract]) -> String {
        let reads: Vec<&ToolContract> = tools.iter().collect();
        let mut o = String::new();
        observer_section(&mut o, &reads);
        o
    }

    fn page(with_count: bool) -> ToolContract {
        let mut props = json!({"notes": {"type": "array", "items": {"type": "string"}}});
        if with_count {
            props["count"] = json!({"type": "integer", "minimum": 0});
        }
        read_tool(
            "list_notes",
            json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100}}}),
            json!({"type": "object", "properties": props}),
        )
    }

    /// Issue 42: a Provider whose list is a page capped by `limit`, with a
    /// count beside it: the count is chosen; without the count, the page
    /// is, with the largest limit the schema allows and a word on the cap.
    #[test]
    fn the_observer_prefers_a_count_and_says_when_a_list_is_capped() {
        let o = observer_of(&[page(true)]);
        assert!(o.contains("pointer = \"/count\""), "{o}");
        assert!(o.contains("counts = \"objects\""), "{o}");
        assert!(o.contains("args = {}"), "{o}");

        let o = observer_of(&[page(false)]);
        assert!(o.contains("pointer = \"/notes\""), "{o}");
        assert!(
            o.contains("args = { limit = 100 }") || o.contains("args = {limit = 100}"),
            "{o}"
        );
        assert!(
            o.contains("capped page") && o.contains("at most 100"),
            "{o}"
        );

        // A cap of the output schema is named too; a list without one wins.
        let capped_out = read_tool(
            "recent",
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"items": {"type": "array", "maxItems": 20}}}),
        );
        let o = observer_of(std::slice::from_ref(&capped_out));
        assert!(o.contains("at most 20 entries (maxItems"), "{o}");
        let open = read_tool(
            "all",
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"rows": {"type": "array"}}}),
        );
        let o = observer_of(&[capped_out, open]);
        assert!(o.contains("tool = \"all\""), "{o}");
        assert!(!o.contains("capped"), "{o}");

        // A counter of effects comes before a count of objects.
        let both = read_tool(
            "stats",
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"count": {"type": "integer"}, "effects": {"type": "integer"}}}),
        );
        let o = observer_of(&[both]);
        assert!(
            o.contains("pointer = \"/effects\"") && o.contains("counts = \"effects\""),
            "{o}"
        );
    }
}
