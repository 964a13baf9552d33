//! What the fuzzer learns about the target before generating anything: its
//! tools (names, annotations, input schemas), the negotiated limits, and
//! which tools the profile lets it execute.

use cetp_vectors::device::Target;
use cetp_vectors::interp::Env;
use cetp_vectors::profile::Profile;
use serde_json::{json, Value as Json};

/// One of the target's tools, as its `list_tools` described it.
#[derive(Clone, Debug)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// Its `annotations.effect` (`read` when missing).
    pub effect: String,
    /// Its `annotations.execution` (`sync` when missing).
    pub execution: String,
    /// Its `annotations.confirmation` (`never` when missing).
    pub confirmation: String,
    /// Its input schema (`{}` when missing): what call args are drawn from.
    pub input_schema: Json,
    /// The profile lets the fuzzer execute it: a read tool always, a tool
    /// with a side effect only when `[execute] allow` lists it.
    pub executable: bool,
    /// The profile has an escalating sample for it (a call its policy must
    /// confirm).
    pub escalating: bool,
}

/// What the fuzzer knows of the target (see the module docs).
#[derive(Clone, Debug)]
pub struct World {
    /// The target's tools, as listed.
    pub tools: Vec<ToolInfo>,
    /// A second caller identity is connected (`--target-b`).
    pub has_b: bool,
    /// The negotiated `max_request_bytes` (64 KiB when missing), kept
    /// within 1 KiB..16 MiB.
    pub max_request_bytes: usize,
    /// The profile's observer counts effects: moves are observed.
    pub observer: bool,
    /// The profile's roles (`large_result`, `failing_operation`, ...) whose
    /// tool the fuzzer may execute: role name to tool name.
    pub roles: std::collections::BTreeMap<String, String>,
    /// The manifest declares v2 alone: the clauses of dual-stack Providers
    /// (§4's v1 reading, §8) are not its rules, nor are they cited.
    pub v2_only: bool,
    /// The device's clock cannot move (a phone, `cetp sim
    /// --fixed-clock`): every wait a move asks for is real time, so moves
    /// ask for none longer than a second (set by the fuzzer, which probes
    /// the device).
    pub fixed_clock: bool,
    /// The device plays the user's decision (`resolve` in its hello): on
    /// one that cannot, no move asks for a decision.
    pub can_resolve: bool,
    /// Sequences run while another waits in real time ([`World::quiet`]):
    /// only moves that change nothing another sequence could observe.
    pub quiet: bool,
    /// The optional capabilities the target granted when the learning
    /// negotiate offered all of them (§2.3). A Provider that grants no
    /// `large_results` answers a too-large result RESULT_TOO_LARGE in every
    /// session, so no move reads a file result from it: that read could
    /// only stop the sequence unjudged.
    pub granted: Vec<String>,
}

impl World {
    /// The tools the profile lets the fuzzer execute.
    pub fn executable(&self) -> impl Iterator<Item = &ToolInfo> {
        self.tools.iter().filter(|t| t.executable)
    }

    /// The executable tools with a side effect (any `effect` but `read`).
    pub fn side_effecting(&self) -> impl Iterator<Item = &ToolInfo> {
        self.executable().filter(|t| t.effect != "read")
    }

    /// This world as sequences see it that run while another sequence
    /// waits in real time (a poll's `poll_after_ms`, a lifetime, on a
    /// device whose clock cannot move): they must leave nothing the
    /// waiting sequence could see. Only read tools that answer at once
    /// are executable (no effect for its observer to count, no operation
    /// left running), nothing is observed, and the generator draws no
    /// restart, clock move, expiry, concurrent burst, operation or user
    /// decision (`moves`).
    pub fn quiet(&self) -> World {
        let mut w = self.clone();
        for t in &mut w.tools {
            t.executable &=
                t.effect == "read" && t.execution == "sync" && t.confirmation != "always";
        }
        let tools = &w.tools;
        w.roles
            .retain(|_, tool| tools.iter().any(|t| &t.name == tool && t.executable));
        w.observer = false;
        w.can_resolve = false;
        w.quiet = true;
        w
    }
}

/// Learns the target's tools with one negotiate and one `list_tools`,
/// judged like any case (a target that cannot do this much is an error the
/// run reports, not a finding).
pub fn learn(target: &Target, profile: &Profile, env: &Env, seed: u64) -> Result<World, String> {
    let case = json!({
        "id": "FUZZ-SETUP", "title": "learn the target", "role": "provider",
        "level": "MUST", "requirements": [],
        "steps": [
            {"do": "negotiate", "bind": "s"},
            {"do": "call", "method": "list_tools", "session": "s", "bind": "l",
             "expect": {"status": ["success"]}, "requirements": []}
        ]
    });
    let case = serde_json::from_value(case).map_err(|e| e.to_string())?;
    let run = crate::exec::run_case(target, profile, env, &Default::default(), &case, seed);
    if let Some(stop) = &run.stop {
        return Err(format!(
            "could not list the target's tools: {}",
            crate::exec::describe_stop(stop)
        ));
    }
    let session = run.bindings.get("s").cloned().unwrap_or(Json::Null);
    let list = run.bindings.get("l").cloned().unwrap_or(Json::Null);
    let tools: Vec<ToolInfo> = list
        .pointer("/data/tools")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?.to_string();
            let ann = t.get("annotations").cloned().unwrap_or(Json::Null);
            let text =
                |k: &str, d: &str| ann.get(k).and_then(Json::as_str).unwrap_or(d).to_string();
            let effect = text("effect", "read");
            Some(ToolInfo {
                executable: profile.may_execute(&name, &effect),
                escalating: profile.escalating_args(&name).is_some(),
                effect,
                execution: text("execution", "sync"),
                confirmation: text("confirmation", "never"),
                input_schema: t.get("input_schema").cloned().unwrap_or(json!({})),
                name,
            })
        })
        .collect();
    let max_request_bytes = session
        .pointer("/data/limits/max_request_bytes")
        .and_then(Json::as_u64)
        .unwrap_or(65_536)
        .clamp(1024, 16 << 20) as usize;
    let granted = session
        .pointer("/data/capabilities")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let roles = profile
        .roles
        .iter()
        .filter(|(_, r)| tools.iter().any(|t| t.name == r.tool && t.executable))
        .map(|(name, r)| (name.clone(), r.tool.clone()))
        .collect();
    Ok(World {
        roles,
        tools,
        has_b: target.b.is_some(),
        max_request_bytes,
        v2_only: env.manifest_kind == "v2_only",
        fixed_clock: false,
        quiet: false,
        granted,
        can_resolve: target
            .a
            .hello()
            .map_or(true, |h| h.ops.iter().any(|o| o == "resolve")),
        // Only a counter of effects gives a count that sequences before
        // this one cannot disturb: a list of objects or a snapshot also
        // moves when an earlier sequence's background work finishes, which
        // the oracle (fresh each time) never sees.
        observer: profile
            .observer
            .as_ref()
            .is_some_and(|o| o.counts == cetp_vectors::profile::Counts::Effects),
    })
}
