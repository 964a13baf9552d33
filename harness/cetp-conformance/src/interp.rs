//! Runs one case: turns steps into device ops, runs the checks on every
//! answer, and judges the expectations.

use crate::answer::{answer_document, bundle_to_json, describe};
use crate::args;
use crate::checks::{check_answer, AnswerContext, Finding};
use crate::device::{Device, Fault, Target};
use crate::event::Event;
use crate::profile::{table_to_json, Profile};
use crate::template::{expand, expand_string, Bindings};
use crate::vector::{Args, Assertion, Case, DiscoverExpect, Expect, Step, ToolRef, TypedValue};
use cetp_proto::bundle::Value;
use cetp_proto::canonical::sha256_hex;
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, NegotiateContext, Negotiated,
    ProviderInfoSummary, ToolList, ToolListContext, ToolSummary,
};
use cetp_proto::discovery::Declared;
use cetp_proto::envelope::{keys, Capability};
use cetp_proto::provider::{Decision, ServiceManifest};
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use cetp_proto::Bundle;
use cetp_reference::port::CallAnswer;
use rand::rngs::StdRng;
use rand::RngCore;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Default per-call timeout handed to the device.
pub const CALL_TIMEOUT_MS: u64 = 10_000;
/// Largest descriptor the harness will read in one `read_fd`.
pub const MAX_FD_READ: u64 = 64 * 1024 * 1024;

/// What is known about the target before any case runs.
#[derive(Clone, Debug)]
pub struct Env {
    pub package: String,
    pub authority: String,
    /// `dual_stack`, `v2_only`, `v1_only`, `versions_only` or `other`.
    pub manifest_kind: String,
    pub declared: Option<Declared>,
    pub manifest: Option<ServiceManifest>,
}

impl Env {
    pub fn declares_v2(&self) -> bool {
        self.declared
            .as_ref()
            .is_some_and(|d| d.versions.contains(&2))
    }
}

/// Why a case stopped before its last step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    Fail(String),
    NotApplicable(String),
    Infra(String),
}

type StepResult = Result<(), Stop>;

#[derive(Clone, Debug)]
struct Session {
    identity: String,
    token: String,
    negotiated: Negotiated,
    info: Option<ProviderInfoSummary>,
    tools: Option<ToolList>,
}

/// A call made ready to send.
struct Prepared {
    identity: String,
    method: String,
    arg: Option<String>,
    extras: Option<Bundle>,
    v1: bool,
    session: Option<String>,
    tool: Option<ToolSummary>,
    request_doc: Json,
    bind: Option<String>,
    expect: Option<Expect>,
}

/// Check findings and answers counted per check across a run.
#[derive(Default)]
pub struct CheckTally {
    pub answers: usize,
    /// First finding of each check: (case, step, finding).
    pub first: BTreeMap<&'static str, (String, usize, Finding)>,
    pub counts: BTreeMap<&'static str, usize>,
}

pub struct CaseRunner<'a> {
    pub target: &'a Target,
    pub profile: &'a Profile,
    pub env: &'a Env,
    pub emit: &'a mut dyn FnMut(Event),
    pub tally: &'a mut CheckTally,
    pub rng: StdRng,
    case_id: String,
    bindings: Bindings,
    sessions: BTreeMap<String, Session>,
    observer_session: Option<String>,
    step: usize,
}

impl<'a> CaseRunner<'a> {
    pub fn new(
        target: &'a Target,
        profile: &'a Profile,
        env: &'a Env,
        emit: &'a mut dyn FnMut(Event),
        tally: &'a mut CheckTally,
        rng: StdRng,
    ) -> Self {
        CaseRunner {
            target,
            profile,
            env,
            emit,
            tally,
            rng,
            case_id: String::new(),
            bindings: Bindings::new(),
            sessions: BTreeMap::new(),
            observer_session: None,
            step: 0,
        }
    }

    /// Runs a case to its end or its first failed expectation.
    pub fn run(&mut self, case: &Case) -> StepResult {
        self.case_id = case.id.clone();
        self.bindings.insert(
            "env".into(),
            json!({"package": self.env.package, "authority": self.env.authority, "manifest": self.env.manifest_kind}),
        );
        if !case.manifests.is_empty() {
            if !case.manifests.contains(&self.env.manifest_kind) {
                return Err(Stop::NotApplicable(format!(
                    "applies to {} manifests; the target's is {}",
                    case.manifests.join("/"),
                    self.env.manifest_kind
                )));
            }
        } else if !self.env.declares_v2() {
            return Err(Stop::NotApplicable("v2 not declared".into()));
        }
        if case.identities.iter().any(|i| i == "b") && self.target.b.is_none() {
            return Err(if self.profile.identities.second {
                Stop::Fail("cannot run: needs a second caller identity (--target-b), and the profile does not declare it unavailable".into())
            } else {
                Stop::NotApplicable("the profile declares no second caller identity".into())
            });
        }
        for step in &case.steps {
            self.step += 1;
            self.run_step(step, &case.needs)?;
        }
        Ok(())
    }

    fn device(&self, identity: &str) -> Result<&'a dyn Device, Stop> {
        self.target
            .identity(identity)
            .ok_or_else(|| Stop::Infra(format!("no device connection for identity {identity:?}")))
    }

    fn uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        self.rng.fill_bytes(&mut bytes);
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    fn run_step(&mut self, step: &Step, needs: &[String]) -> StepResult {
        match step {
            Step::Discover { bind, expect } => self.discover(bind.as_deref(), expect.as_ref()),
            Step::Negotiate {
                as_,
                versions,
                capabilities,
                extras,
                bind,
                expect,
            } => self.negotiate(
                as_,
                versions.as_deref(),
                capabilities.as_deref(),
                extras.as_ref(),
                bind.as_deref(),
                expect.as_ref(),
                needs,
            ),
            Step::Call { .. } => {
                let prepared = self.prepare_call(step)?;
                let answer = self.send(&prepared)?;
                self.finish_call(prepared, answer)
            }
            Step::Poll {
                as_,
                session,
                operation_of,
                max_ms,
                bind,
                expect,
            } => self.poll(
                as_,
                session,
                operation_of,
                *max_ms,
                bind.as_deref(),
                expect.as_ref(),
            ),
            Step::Resolve {
                as_,
                handle,
                decision,
            } => {
                let handle = expand_string(&self.bindings, handle).map_err(Stop::Fail)?;
                let decision = Decision::parse(decision).ok_or_else(|| {
                    Stop::Infra(format!("vector error: unknown decision {decision:?}"))
                })?;
                let ui = self.profile.ui_json();
                self.sent(
                    as_,
                    "resolve",
                    json!({"handle": handle, "decision": decision.as_str()}),
                );
                let started = Instant::now();
                let out = self
                    .device(as_)?
                    .resolve(&handle, decision, ui.as_ref(), 30_000)
                    .map_err(device_stop)?;
                self.answered(json!({"launched": out.launched, "decision_applied": out.decision_applied, "result_code": out.result_code}), started);
                if !out.launched {
                    return Err(Stop::Fail(format!(
                        "the Provider's resolution PendingIntent did not launch (handle {handle})"
                    )));
                }
                Ok(())
            }
            Step::ReadFd {
                as_,
                handle,
                max_bytes,
                verify_against,
                expect_ok,
            } => self.read_fd(
                as_,
                handle,
                *max_bytes,
                verify_against.as_deref(),
                expect_ok.unwrap_or(true),
            ),
            Step::Restart => {
                self.sent(
                    "a",
                    "restart_provider",
                    json!({"package": self.env.package}),
                );
                let started = Instant::now();
                self.target
                    .a
                    .restart_provider(&self.env.package)
                    .map_err(device_stop)?;
                self.answered(json!({}), started);
                Ok(())
            }
            Step::CancelConsistent { final_, since } => {
                let fin = self.bound(final_)?;
                let state = fin
                    .pointer("/data/state")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string();
                let before = self
                    .bindings
                    .get(since)
                    .and_then(Json::as_i64)
                    .ok_or_else(|| {
                        Stop::Infra(format!("vector error: no effect count bound to {since:?}"))
                    })?;
                let delta = self.observe()? - before;
                match (state.as_str(), delta) {
                    ("cancelled", 0) | ("succeeded", 1) => Ok(()),
                    ("cancelled", n) => Err(Stop::Fail(format!(
                        "the operation reports cancelled, but the observer counted {n} effect(s)"
                    ))),
                    (other, n) => Err(Stop::Fail(format!(
                        "the operation ended {other:?} with {n} effect(s) counted"
                    ))),
                }
            }
            Step::AdvanceClock {
                ms,
                profile,
                plus_ms,
            } => {
                let base = match (ms, profile) {
                    (Some(ms), _) => *ms,
                    (None, Some(key)) => *self.profile.timing.get(key).ok_or_else(|| {
                        Stop::NotApplicable(format!("needs timing.{key} in the profile"))
                    })?,
                    (None, None) => {
                        return Err(Stop::Infra(
                            "vector error: advance_clock needs ms or profile".into(),
                        ))
                    }
                };
                let ms = &base.saturating_add(*plus_ms);
                self.sent("a", "advance_clock", json!({"ms": ms}));
                let started = Instant::now();
                match self.target.a.advance_clock(*ms) {
                    Ok(now) => {
                        self.answered(json!({"now_ms": now}), started);
                        if let Some(b) = &self.target.b {
                            b.resync_clock().map_err(device_stop)?;
                        }
                        Ok(())
                    }
                    Err(e) if matches!(e.kind.as_str(), "unsupported" | "unknown_op") => Err(Stop::NotApplicable(
                        "needs a device whose clock the harness can move (the simulated device's advance_clock)".into(),
                    )),
                    Err(e) => Err(device_stop(e)),
                }
            }
            Step::Uuid { bind } => {
                let id = self.uuid();
                self.bindings.insert(bind.clone(), json!(id));
                Ok(())
            }
            Step::Sleep { ms } => {
                self.target.a.sleep_ms(*ms);
                Ok(())
            }
            Step::Observe { bind } => {
                let n = self.observe()?;
                self.bindings.insert(bind.clone(), json!(n));
                Ok(())
            }
            Step::ExpectEffects { since, delta } => {
                let before = self
                    .bindings
                    .get(since)
                    .and_then(Json::as_i64)
                    .ok_or_else(|| {
                        Stop::Infra(format!("vector error: no effect count bound to {since:?}"))
                    })?;
                let now = self.observe()?;
                if now - before != *delta {
                    return Err(Stop::Fail(format!(
                        "expected {delta} effect(s) since `{since}`, the observer counted {}",
                        now - before
                    )));
                }
                Ok(())
            }
            Step::Concurrent { steps } => {
                let mut prepared = Vec::new();
                for s in steps {
                    prepared.push(self.prepare_call(s)?);
                }
                for p in &prepared {
                    self.sent(&p.identity, &p.method, p.request_doc.clone());
                }
                let target = self.target;
                let authority = self.env.authority.clone();
                let authority = &authority;
                let started = Instant::now();
                let answers: Vec<_> = std::thread::scope(|scope| {
                    let handles: Vec<_> = prepared
                        .iter()
                        .map(|p| {
                            scope.spawn(move || {
                                let dev = target.identity(&p.identity).ok_or_else(|| {
                                    crate::device::DeviceError::new("io", "no such identity")
                                })?;
                                dev.call(
                                    authority,
                                    &p.method,
                                    p.arg.as_deref(),
                                    p.extras.as_ref(),
                                    CALL_TIMEOUT_MS,
                                )
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join().unwrap_or_else(|_| {
                                Err(crate::device::DeviceError::new(
                                    "io",
                                    "call thread panicked",
                                ))
                            })
                        })
                        .collect()
                });
                let mut first_stop = None;
                for (p, a) in prepared.into_iter().zip(answers) {
                    let answer = a.map_err(device_stop)?;
                    self.answered(answer_json(&answer), started);
                    if let Err(stop) = self.finish_call(p, answer) {
                        first_stop.get_or_insert(stop);
                    }
                }
                first_stop.map_or(Ok(()), Err)
            }
            Step::Same {
                a,
                b,
                pointers,
                different,
            } => {
                let pointers: Vec<String> = if pointers.is_empty() {
                    vec!["/status".into(), "/error_code".into(), "/data".into()]
                } else {
                    pointers.clone()
                };
                let da = self.bound(a)?;
                let db = self.bound(b)?;
                let differing = pointers.iter().find(|p| da.pointer(p) != db.pointer(p));
                match (differing, *different) {
                    (Some(p), false) => Err(Stop::Fail(format!(
                        "`{a}` ({}) and `{b}` ({}) differ at `{p}`: {} vs {}",
                        describe(&da),
                        describe(&db),
                        short(da.pointer(p)),
                        short(db.pointer(p))
                    ))),
                    (None, true) => Err(Stop::Fail(format!(
                        "`{b}` repeats `{a}` exactly ({}), where a separate answer was due",
                        describe(&db)
                    ))),
                    _ => Ok(()),
                }
            }
            Step::TokensUnpredictable { tokens } => {
                let mut values = Vec::new();
                for t in tokens {
                    values.push(expand_string(&self.bindings, t).map_err(Stop::Infra)?);
                }
                tokens_unpredictable(&values).map_err(Stop::Fail)
            }
            Step::RevisionConsistent { a, b } => {
                let da = self.bound(a)?;
                let db = self.bound(b)?;
                let tools = |d: &Json| {
                    d.pointer("/data/tools")
                        .cloned()
                        .map(|t| cetp_proto::canonical::canonical_hash(&t).unwrap_or_default())
                };
                let rev = |d: &Json| d.pointer("/data/revision").cloned();
                if tools(&da) != tools(&db) && rev(&da) == rev(&db) {
                    return Err(Stop::Fail(format!(
                        "the tool lists of `{a}` and `{b}` differ but both carry revision {}",
                        short(rev(&da).as_ref())
                    )));
                }
                Ok(())
            }
            Step::V1ReadOnly { v1, v2 } => {
                let d1 = self.bound(v1)?;
                let d2 = self.bound(v2)?;
                let names = d1
                    .pointer("/data/tools")
                    .and_then(Json::as_array)
                    .ok_or_else(|| {
                        Stop::Fail(format!(
                            "v1 list_tools answered {} without a tools array",
                            describe(&d1)
                        ))
                    })?;
                let v2_tools = d2
                    .pointer("/data/tools")
                    .and_then(Json::as_array)
                    .cloned()
                    .unwrap_or_default();
                for t in names {
                    let name = t.get("name").and_then(Json::as_str).unwrap_or("");
                    let effect = v2_tools
                        .iter()
                        .find(|x| x.get("name").and_then(Json::as_str) == Some(name))
                        .and_then(|x| x.pointer("/annotations/effect"))
                        .and_then(Json::as_str);
                    match effect {
                        Some("read") => {}
                        Some(other) => return Err(Stop::Fail(format!("v1 list_tools lists {name:?}, whose v2 effect is {other}"))),
                        None => return Err(Stop::Fail(format!("v1 list_tools lists {name:?}, which v2 does not describe as a read tool"))),
                    }
                }
                Ok(())
            }
            Step::Differ { a, b } => {
                let va = expand(&self.bindings, a).map_err(Stop::Infra)?;
                let vb = expand(&self.bindings, b).map_err(Stop::Infra)?;
                if va == vb {
                    return Err(Stop::Fail(format!(
                        "`{a}` and `{b}` are equal ({}), they must differ",
                        short(Some(&va))
                    )));
                }
                Ok(())
            }
            Step::Assert { value, assertion } => {
                let v = expand(&self.bindings, value).map_err(Stop::Infra)?;
                let doc = json!({ "value": v });
                let mut a = assertion.clone();
                a.pointer = format!("/value{}", assertion.pointer);
                check_assertion(&doc, &a).map_err(Stop::Fail)
            }
        }
    }

    fn bound(&self, name: &str) -> Result<Json, Stop> {
        self.bindings
            .get(name)
            .cloned()
            .ok_or_else(|| Stop::Infra(format!("vector error: nothing bound to {name:?}")))
    }

    fn sent(&mut self, identity: &str, op: &str, request: Json) {
        (self.emit)(Event::StepSent {
            case_id: self.case_id.clone(),
            step: self.step,
            identity: identity.to_string(),
            op: op.to_string(),
            request,
        });
    }

    fn answered(&mut self, answer: Json, started: Instant) {
        (self.emit)(Event::StepAnswered {
            case_id: self.case_id.clone(),
            step: self.step,
            answer,
            elapsed_us: started.elapsed().as_micros() as u64,
        });
    }

    fn discover(&mut self, bind: Option<&str>, expect: Option<&DiscoverExpect>) -> StepResult {
        self.sent("a", "discover", json!({}));
        let started = Instant::now();
        let found = self.target.a.discover().map_err(device_stop)?;
        let list: Vec<Json> = found.iter().map(manifest_json).collect();
        self.answered(json!({"providers": list}), started);
        let mine = found.iter().find(|m| m.package == self.env.package);
        if let Some(name) = bind {
            self.bindings.insert(
                name.into(),
                json!({"providers": list, "target": mine.map(manifest_json)}),
            );
        }
        let Some(expect) = expect else { return Ok(()) };
        let m = match mine {
            Some(m) => m,
            None if expect.found
                || expect.same_package
                || expect.legacy_version_kept
                || expect.v1_declared =>
            {
                return Err(Stop::Fail(format!(
                    "no TOOL_PROVIDER service of package {} was discovered",
                    self.env.package
                )))
            }
            None => return Ok(()),
        };
        let declared = cetp_proto::discovery::parse_declared(&m.meta);
        if expect.found {
            if let Err(e) = &declared {
                return Err(Stop::Fail(format!("manifest of {}: {e}", m.package)));
            }
        }
        if expect.same_package {
            cetp_proto::discovery::check_same_package(m).map_err(|e| Stop::Fail(e.to_string()))?;
        }
        if expect.v1_declared {
            if let Ok(d) = &declared {
                if !d.versions.contains(&1) {
                    return Err(Stop::Fail(format!(
                        "the manifest declares versions {:?} without v1",
                        d.versions
                    )));
                }
            }
        }
        if expect.legacy_version_kept {
            if let Ok(d) = &declared {
                if let Some(problem) = cetp_proto::discovery::manifest_shape_problems(d)
                    .into_iter()
                    .next()
                {
                    return Err(Stop::Fail(problem));
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn negotiate(
        &mut self,
        identity: &str,
        versions: Option<&[i32]>,
        capabilities: Option<&[String]>,
        extras: Option<&BTreeMap<String, TypedValue>>,
        bind: Option<&str>,
        expect: Option<&Expect>,
        needs: &[String],
    ) -> StepResult {
        let versions: Vec<i32> = versions.map(<[i32]>::to_vec).unwrap_or_else(|| vec![2, 1]);
        let caps: Vec<String> = capabilities.map(<[String]>::to_vec).unwrap_or_else(|| {
            Capability::ALL
                .iter()
                .map(|c| c.as_str().to_string())
                .collect()
        });
        let bundle = match extras {
            Some(raw) => {
                let mut b = Bundle::new();
                for (k, v) in raw {
                    b.insert(k, self.typed_value(v)?);
                }
                b
            }
            None => cetp_proto::envelope::NegotiateRequest {
                consumer_versions: versions.clone(),
                consumer_capabilities: caps.clone(),
            }
            .to_bundle(),
        };
        let prepared = Prepared {
            identity: identity.to_string(),
            method: "negotiate".into(),
            arg: None,
            request_doc: json!({"method": "negotiate", "extras": bundle_to_json(&bundle)}),
            extras: Some(bundle),
            v1: false,
            session: None,
            tool: None,
            bind: None,
            expect: None,
        };
        let answer = self.send(&prepared)?;
        let doc = answer_document(&answer, prepared.request_doc.clone());
        self.run_checks(&prepared, &answer, Some((&versions, &caps)));
        if let Some(name) = bind {
            self.bindings.insert(name.to_string(), doc.clone());
        }
        if let Some(e) = expect {
            return self.judge(&doc, e, None);
        }
        // Without an explicit expectation: a usable session is required.
        if doc.get("status").and_then(Json::as_str) != Some("success") {
            return Err(Stop::Fail(format!(
                "negotiate answered {} where a session was expected",
                describe(&doc)
            )));
        }
        let data = doc.get("data").cloned().unwrap_or(Json::Null);
        let pv = self.env.declared.as_ref().map(|d| &d.versions);
        let (negotiated, _) = validate_negotiate(
            &data,
            &NegotiateContext {
                consumer_versions: &versions,
                consumer_capabilities: &caps,
                provider_versions: pv,
                package: Some(&self.env.package),
            },
        );
        if negotiated.session_token.is_empty() {
            return Err(Stop::Fail(
                "negotiate succeeded without a session_token".into(),
            ));
        }
        // Only a capability that was offered and refused makes the case
        // inapplicable; sessions that deliberately omit it are part of the test.
        for need in needs {
            if caps.contains(need) && !negotiated.capabilities.contains(need) {
                return Err(Stop::NotApplicable(format!(
                    "capability {need} was not negotiated"
                )));
            }
        }
        if let Some(name) = bind {
            self.sessions.insert(
                name.to_string(),
                Session {
                    identity: identity.to_string(),
                    token: negotiated.session_token.clone(),
                    negotiated,
                    info: None,
                    tools: None,
                },
            );
        }
        Ok(())
    }

    fn typed_value(&self, tv: &TypedValue) -> Result<Value, Stop> {
        let v = match &tv.v {
            Json::String(s) => expand(&self.bindings, s).map_err(Stop::Infra)?,
            other => other.clone(),
        };
        let bad = || Stop::Infra(format!("vector error: {v} is not a valid `{}` value", tv.t));
        Ok(match tv.t.as_str() {
            "null" => Value::Null,
            "bool" => Value::Bool(v.as_bool().ok_or_else(bad)?),
            "int" => Value::Int(
                v.as_i64()
                    .and_then(|i| i32::try_from(i).ok())
                    .ok_or_else(bad)?,
            ),
            "long" => Value::Long(v.as_i64().ok_or_else(bad)?),
            "double" => Value::Double(v.as_f64().ok_or_else(bad)?),
            "float" => Value::Float(v.as_f64().ok_or_else(bad)? as f32),
            "string" => Value::String(match v {
                Json::String(s) => s,
                other => other.to_string(),
            }),
            "int[]" => Value::IntArray(
                v.as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|x| x.as_i64().and_then(|i| i32::try_from(i).ok()))
                    .collect::<Option<_>>()
                    .ok_or_else(bad)?,
            ),
            "long[]" => Value::LongArray(
                v.as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(Json::as_i64)
                    .collect::<Option<_>>()
                    .ok_or_else(bad)?,
            ),
            "string[]" | "string_list" => {
                let items: Vec<String> = v
                    .as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<_>>()
                    .ok_or_else(bad)?;
                if tv.t == "string[]" {
                    Value::StringArray(items)
                } else {
                    Value::StringList(items)
                }
            }
            "bytes" => Value::Bytes(v.as_str().ok_or_else(bad)?.as_bytes().to_vec()),
            _ => return Err(bad()),
        })
    }

    fn session(&self, name: &str) -> Result<&Session, Stop> {
        self.sessions
            .get(name)
            .ok_or_else(|| Stop::Infra(format!("vector error: no session bound to {name:?}")))
    }

    /// Fetches provider info and the tool list of a session once.
    fn ensure_tools(&mut self, session: &str) -> Result<(), Stop> {
        if self.session(session)?.tools.is_some() {
            return Ok(());
        }
        let s = self.session(session)?.clone();
        let mut info = None;
        for method in ["get_provider_info", "list_tools"] {
            let extras = cetp_proto::envelope::Common {
                session_token: s.token.clone(),
                request_id: self.uuid(),
                deadline_at_ms: self.device(&s.identity)?.now_ms() + 30_000,
            }
            .to_bundle();
            let prepared = Prepared {
                identity: s.identity.clone(),
                method: method.into(),
                arg: None,
                request_doc: json!({"method": method, "extras": bundle_to_json(&extras)}),
                extras: Some(extras),
                v1: false,
                session: Some(session.to_string()),
                tool: None,
                bind: None,
                expect: None,
            };
            let answer = self.send(&prepared)?;
            self.run_checks(&prepared, &answer, None);
            let doc = answer_document(&answer, json!({}));
            if doc.get("status").and_then(Json::as_str) != Some("success") {
                return Err(Stop::Fail(format!(
                    "{method} answered {} in a valid session",
                    describe(&doc)
                )));
            }
            let data = doc.get("data").cloned().unwrap_or(Json::Null);
            if method == "get_provider_info" {
                info = Some(validate_provider_info(&data, Some(&self.env.package)).0);
            } else {
                let dialect = info
                    .as_ref()
                    .map(|i: &ProviderInfoSummary| i.schema_dialect.clone())
                    .unwrap_or_else(|| DEFAULT_DIALECT.into());
                let (list, _) = validate_tool_list(
                    &data,
                    &ToolListContext {
                        negotiated: &s.negotiated.capabilities,
                        known_scopes: info.as_ref().map(|i| &i.scopes),
                        dialect: &dialect,
                    },
                );
                let entry = self
                    .sessions
                    .get_mut(session)
                    .expect("session checked above");
                entry.info = info.clone();
                entry.tools = Some(list);
            }
        }
        Ok(())
    }

    fn pick_tool(&mut self, session: &str, r: &ToolRef) -> Result<ToolSummary, Stop> {
        self.ensure_tools(session)?;
        let s = self.session(session)?;
        let tools = &s.tools.as_ref().expect("ensure_tools fills tools").tools;
        let wanted: Option<String> = if let Some(name) = &r.name {
            Some(expand_string(&self.bindings, name).map_err(Stop::Infra)?)
        } else if let Some(role) = &r.profile_role {
            Some(match (role.as_str(), &self.profile.observer) {
                ("observer", Some(o)) => o.tool.clone(),
                _ => self
                    .profile
                    .roles
                    .get(role)
                    .map(|t| t.tool.clone())
                    .ok_or_else(|| {
                        Stop::NotApplicable(format!("the profile names no tool for role {role:?}"))
                    })?,
            })
        } else {
            None
        };
        let tool = match wanted {
            Some(name) => tools
                .iter()
                .find(|t| t.name == name)
                .cloned()
                .ok_or_else(|| {
                    Stop::NotApplicable(format!("the Provider lists no tool {name:?}"))
                })?,
            None => {
                // Prefer a tool the profile allows executing, so a Provider
                // with several matching tools is tested where it may be.
                let matching: Vec<&ToolSummary> =
                    tools.iter().filter(|t| matches_pick(t, &r.pick)).collect();
                if matching.is_empty() {
                    return Err(Stop::NotApplicable(format!(
                        "the Provider lists no tool with {}",
                        describe_pick(&r.pick)
                    )));
                }
                matching
                    .iter()
                    .find(|t| !r.executes || self.profile.may_execute(&t.name, &t.effect))
                    .copied()
                    .unwrap_or(matching[0])
                    .clone()
            }
        };
        if r.executes && !self.profile.may_execute(&tool.name, &tool.effect) {
            return Err(Stop::NotApplicable(format!(
                "not executed: {} has effect={} and the profile does not allow executing it",
                tool.name, tool.effect
            )));
        }
        Ok(tool)
    }

    fn args_text(
        &mut self,
        spec: &Args,
        tool: &ToolSummary,
        session: Option<&str>,
        role: Option<&str>,
    ) -> Result<String, Stop> {
        let dialect = session
            .and_then(|s| self.sessions.get(s))
            .and_then(|s| s.info.as_ref())
            .map(|i| i.schema_dialect.clone())
            .unwrap_or_else(|| DEFAULT_DIALECT.into());
        let valid = |me: &Self| -> Result<Json, Stop> {
            // A tool picked for a profile role runs with that role's args.
            if let Some(r) = role
                .and_then(|r| me.profile.roles.get(r))
                .filter(|r| r.tool == tool.name)
            {
                return Ok(table_to_json(&r.args));
            }
            if let Some(o) = me.profile.observer.as_ref().filter(|o| o.tool == tool.name) {
                return Ok(table_to_json(&o.args));
            }
            if let Some(sample) = me.profile.sample_args(&tool.name) {
                return Ok(sample);
            }
            args::valid_args(&tool.input_schema, &dialect).ok_or_else(|| {
                Stop::NotApplicable(format!(
                    "cannot generate valid args for {}; give tools.{}.sample_args in the profile",
                    tool.name, tool.name
                ))
            })
        };
        Ok(match spec {
            Args::Valid => valid(self)?.to_string(),
            Args::Escalating => self
                .profile
                .escalating_args(&tool.name)
                .map(Ok)
                .unwrap_or_else(|| valid(self))?
                .to_string(),
            Args::Invalid => {
                let v = valid(self)?;
                args::invalid_args(&tool.input_schema, &dialect, &v)
                    .ok_or_else(|| {
                        Stop::NotApplicable(format!(
                            "the input_schema of {} accepts every generated variant",
                            tool.name
                        ))
                    })?
                    .to_string()
            }
            Args::Json(j) => j.to_string(),
            Args::Text(t) => t.clone(),
            Args::SameAs(name) => self.bound_args(name)?,
            Args::ReorderedFrom(name) => {
                let text = self.bound_args(name)?;
                let v: Json = serde_json::from_str(&text)
                    .map_err(|e| Stop::Infra(format!("bound args are not JSON: {e}")))?;
                args::reordered_text(&v)
            }
            Args::AlteredFrom(name) => {
                let text = self.bound_args(name)?;
                let v: Json = serde_json::from_str(&text)
                    .map_err(|e| Stop::Infra(format!("bound args are not JSON: {e}")))?;
                args::altered(&v).to_string()
            }
            Args::Oversize => {
                let limit = session
                    .and_then(|s| self.sessions.get(s))
                    .and_then(|s| s.negotiated.limit("max_request_bytes"))
                    .unwrap_or(65_536)
                    .clamp(0, 16 * 1024 * 1024) as usize;
                args::oversize(&valid(self)?, limit)
            }
        })
    }

    fn bound_args(&self, name: &str) -> Result<String, Stop> {
        self.bindings
            .get(name)
            .and_then(|d| d.pointer("/_request/args_text"))
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| Stop::Infra(format!("vector error: `{name}` carries no args")))
    }

    fn prepare_call(&mut self, step: &Step) -> Result<Prepared, Stop> {
        let Step::Call {
            as_,
            method,
            session,
            v1,
            tool,
            args: args_spec,
            request_id,
            deadline_in_ms,
            resume_token,
            operation_id,
            extras,
            omit,
            arg,
            bind,
            expect,
        } = step
        else {
            return Err(Stop::Infra(
                "vector error: only calls can run concurrently".into(),
            ));
        };
        let mut b = Bundle::new();
        let mut req = serde_json::Map::new();
        if let (Some(s), false) = (session, *v1) {
            let sess = self.session(s)?.clone();
            let rid = match request_id.as_deref() {
                None | Some("new") => self.uuid(),
                Some(t) => expand_string(&self.bindings, t).map_err(Stop::Infra)?,
            };
            let now = self.device(as_)?.now_ms();
            let common = cetp_proto::envelope::Common {
                session_token: sess.token.clone(),
                request_id: rid,
                deadline_at_ms: now.saturating_add(deadline_in_ms.unwrap_or(30_000)),
            };
            b = common.to_bundle();
        } else if let Some(t) = request_id {
            let rid = if t == "new" {
                self.uuid()
            } else {
                expand_string(&self.bindings, t).map_err(Stop::Infra)?
            };
            b.insert(keys::REQUEST_ID, Value::String(rid));
        }
        let mut picked = None;
        if let Some(r) = tool {
            let s = session.as_deref().ok_or_else(|| {
                Stop::Infra("vector error: picking a tool needs a session".into())
            })?;
            let t = self.pick_tool(s, r)?;
            b.insert(keys::TOOL_NAME, Value::String(t.name.clone()));
            req.insert("tool_name".into(), json!(t.name));
            if let Some(spec) = args_spec {
                let text = self.args_text(spec, &t, Some(s), r.profile_role.as_deref())?;
                b.insert(keys::ARGS, Value::String(text.clone()));
                req.insert("args_text".into(), json!(text));
            }
            picked = Some(t);
        }
        if let Some(t) = resume_token {
            b.insert(
                keys::RESUME_TOKEN,
                Value::String(expand_string(&self.bindings, t).map_err(Stop::Infra)?),
            );
        }
        if let Some(o) = operation_id {
            b.insert(
                keys::OPERATION_ID,
                Value::String(expand_string(&self.bindings, o).map_err(Stop::Infra)?),
            );
        }
        for (k, v) in extras {
            let value = self.typed_value(v)?;
            b.insert(k, value);
        }
        for k in omit {
            b.remove(k);
        }
        if let Ok(Some(id)) = b.opt_string(keys::REQUEST_ID) {
            req.insert("request_id".into(), json!(id));
        }
        if let Some(s) = session {
            req.insert("session".into(), json!(s));
        }
        let arg = match arg {
            Some(a) => Some(expand_string(&self.bindings, a).map_err(Stop::Infra)?),
            None => None,
        };
        let extras_json = bundle_to_json(&b);
        let mut request_doc = json!({"method": method, "extras": extras_json, "arg": arg});
        if let Some(obj) = request_doc.as_object_mut() {
            obj.extend(req);
        }
        Ok(Prepared {
            identity: as_.clone(),
            method: method.clone(),
            arg,
            extras: Some(b),
            v1: *v1,
            session: session.clone(),
            tool: picked,
            request_doc,
            bind: bind.clone(),
            expect: expect.clone(),
        })
    }

    /// Sends a prepared call and emits its events.
    fn send(&mut self, p: &Prepared) -> Result<CallAnswer, Stop> {
        self.sent(&p.identity, &p.method, p.request_doc.clone());
        let started = Instant::now();
        let dev = self.device(&p.identity)?;
        let answer = dev
            .call(
                &self.env.authority,
                &p.method,
                p.arg.as_deref(),
                p.extras.as_ref(),
                CALL_TIMEOUT_MS,
            )
            .map_err(device_stop)?;
        self.answered(answer_json(&answer), started);
        Ok(answer)
    }

    fn run_checks(
        &mut self,
        p: &Prepared,
        answer: &CallAnswer,
        offer: Option<(&[i32], &[String])>,
    ) {
        let session = p.session.as_ref().and_then(|s| self.sessions.get(s));
        let dialect = session
            .and_then(|s| s.info.as_ref())
            .map(|i| i.schema_dialect.clone())
            .unwrap_or_else(|| DEFAULT_DIALECT.into());
        let known_scopes = session
            .and_then(|s| s.info.as_ref())
            .map(|i| i.scopes.clone());
        let cx = AnswerContext {
            method: &p.method,
            v1: p.v1,
            request: p.extras.as_ref(),
            answer,
            negotiated: session.map(|s| &s.negotiated),
            tool: p.tool.as_ref(),
            package: Some(&self.env.package),
            dialect: &dialect,
            known_scopes: known_scopes.as_ref(),
            offer,
            provider_versions: self.env.declared.as_ref().map(|d| &d.versions),
        };
        let findings = check_answer(&cx);
        self.tally.answers += 1;
        for f in findings {
            *self.tally.counts.entry(f.check).or_default() += 1;
            (self.emit)(Event::CheckFinding {
                case_id: self.case_id.clone(),
                step: self.step,
                check: f.check.to_string(),
                requirements: Vec::new(),
                level: format!("{:?}", f.level).to_uppercase(),
                message: f.message.clone(),
            });
            self.tally
                .first
                .entry(f.check)
                .or_insert_with(|| (self.case_id.clone(), self.step, f.clone()));
        }
    }

    fn finish_call(&mut self, p: Prepared, answer: CallAnswer) -> StepResult {
        self.run_checks(&p, &answer, None);
        let doc = answer_document(&answer, p.request_doc.clone());
        if let Some(name) = &p.bind {
            self.bindings.insert(name.clone(), doc.clone());
        }
        match &p.expect {
            Some(e) => self.judge(&doc, e, p.tool.as_ref()),
            None => Ok(()),
        }
    }

    fn judge(&self, doc: &Json, e: &Expect, tool: Option<&ToolSummary>) -> StepResult {
        let what = describe(doc);
        if e.threw {
            return if doc.get("_threw").is_some() {
                Ok(())
            } else {
                Err(Stop::Fail(format!(
                    "expected the Provider to throw, it answered {what}"
                )))
            };
        }
        if e.null_result {
            return if doc.get("_null").is_some() {
                Ok(())
            } else {
                Err(Stop::Fail(format!(
                    "expected null, the Provider answered {what}"
                )))
            };
        }
        let status = doc.get("status").and_then(Json::as_str);
        if e.refused {
            if status == Some("success") || status == Some("accepted") {
                return Err(Stop::Fail(format!(
                    "expected the call to be refused, the Provider answered {what}"
                )));
            }
            return Ok(());
        }
        if let Some(t) = doc.get("_threw") {
            return Err(Stop::Fail(format!(
                "the Provider threw {} instead of answering",
                t.get("class").and_then(Json::as_str).unwrap_or("?")
            )));
        }
        if doc.get("_null").is_some() {
            return Err(Stop::Fail(
                "call() returned null instead of a Bundle".into(),
            ));
        }
        if !e.status.is_empty() && !status.is_some_and(|s| e.status.iter().any(|x| x == s)) {
            return Err(Stop::Fail(format!(
                "expected status {}, the Provider answered {what}",
                e.status.join("|")
            )));
        }
        // An error_code set constrains error answers only, so one step can
        // accept "success, or an error with one of these codes".
        if !e.error_code.is_empty() && status == Some("error") {
            let code = doc.get("error_code").and_then(Json::as_str);
            if !code.is_some_and(|c| e.error_code.iter().any(|x| x == c)) {
                return Err(Stop::Fail(format!(
                    "expected error_code {}, the Provider answered {what}",
                    e.error_code.join("|")
                )));
            }
        }
        if let Some(r) = e.retryable {
            if doc.get("retryable").and_then(Json::as_bool) != Some(r) {
                return Err(Stop::Fail(format!(
                    "expected retryable={r}, found {}",
                    short(doc.get("retryable"))
                )));
            }
        }
        for k in &e.has {
            if doc.get(k).is_none() {
                return Err(Stop::Fail(format!("answer ({what}) lacks `{k}`")));
            }
        }
        for k in &e.lacks {
            if doc.get(k).is_some() {
                return Err(Stop::Fail(format!(
                    "answer ({what}) carries `{k}`, which it must not"
                )));
            }
        }
        for a in &e.data {
            check_assertion(doc, a).map_err(Stop::Fail)?;
        }
        if e.output_schema {
            let tool =
                tool.ok_or_else(|| Stop::Infra("vector error: output_schema needs a tool".into()))?;
            let value = doc
                .pointer("/data/value")
                .or_else(|| doc.pointer("/data/result/value"))
                .ok_or_else(|| Stop::Fail(format!("answer ({what}) has no inline result value")))?;
            let schema = CompiledSchema::compile(&tool.output_schema, DEFAULT_DIALECT)
                .map_err(|e| Stop::Fail(format!("output_schema of {}: {e}", tool.name)))?;
            let errors = schema.errors(value);
            if !errors.is_empty() {
                return Err(Stop::Fail(format!(
                    "result does not match the output_schema of {}: {}",
                    tool.name,
                    errors.join("; ")
                )));
            }
        }
        if e.v1 && doc.get("protocol_version").is_some() {
            return Err(Stop::Fail(
                "a v1 call was answered with a v2 envelope (protocol_version present)".into(),
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn poll(
        &mut self,
        identity: &str,
        session: &str,
        operation_of: &str,
        max_ms: u64,
        bind: Option<&str>,
        expect: Option<&Expect>,
    ) -> StepResult {
        let accepted = self.bound(operation_of)?;
        let op = accepted
            .pointer("/data/operation_id")
            .and_then(Json::as_str)
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "`{operation_of}` carries no operation_id ({})",
                    describe(&accepted)
                ))
            })?
            .to_string();
        let rid = accepted
            .pointer("/_request/request_id")
            .and_then(Json::as_str)
            .ok_or_else(|| {
                Stop::Infra(format!("vector error: `{operation_of}` has no request id"))
            })?
            .to_string();
        let tool = {
            let name = accepted
                .pointer("/_request/tool_name")
                .and_then(Json::as_str)
                .map(str::to_string);
            let s = self.session(session)?;
            name.and_then(|n| {
                s.tools
                    .as_ref()
                    .and_then(|t| t.tools.iter().find(|x| x.name == n).cloned())
            })
        };
        let device = self.device(identity)?;
        let deadline = device.now_ms().saturating_add(max_ms as i64);
        loop {
            let mut step = internal_call(identity, "get_operation", session);
            if let Step::Call {
                request_id,
                operation_id,
                ..
            } = &mut step
            {
                *request_id = Some(rid.clone());
                *operation_id = Some(op.clone());
            }
            let mut p = self.prepare_call(&step)?;
            p.tool = tool.clone();
            let answer = self.send(&p)?;
            self.run_checks(&p, &answer, None);
            let doc = answer_document(&answer, p.request_doc.clone());
            let state = doc
                .pointer("/data/state")
                .and_then(Json::as_str)
                .unwrap_or("");
            if doc.get("status").and_then(Json::as_str) != Some("success")
                || matches!(state, "succeeded" | "failed" | "cancelled")
            {
                if let Some(name) = bind {
                    self.bindings.insert(name.to_string(), doc.clone());
                }
                return match expect {
                    Some(e) => self.judge(&doc, e, tool.as_ref()),
                    None => Ok(()),
                };
            }
            if device.now_ms() >= deadline {
                return Err(Stop::Fail(format!("operation {op} did not reach a terminal state within {max_ms} ms (last state {state:?})")));
            }
            // poll_after_ms is honoured, within sane bounds so a hostile
            // Provider cannot stall the run or make it spin.
            let wait = doc
                .pointer("/data/poll_after_ms")
                .and_then(Json::as_u64)
                .unwrap_or(100)
                .clamp(10, 1_000);
            device.sleep_ms(wait);
        }
    }

    fn read_fd(
        &mut self,
        identity: &str,
        handle: &str,
        max_bytes: Option<u64>,
        verify_against: Option<&str>,
        expect_ok: bool,
    ) -> StepResult {
        let handle = expand_string(&self.bindings, handle).map_err(Stop::Infra)?;
        let declared = match verify_against {
            Some(name) => Some(self.bound(name)?),
            None => None,
        };
        let size = declared
            .as_ref()
            .and_then(|d| d.pointer("/data/size_bytes"))
            .and_then(Json::as_u64);
        let digest = declared
            .as_ref()
            .and_then(|d| d.pointer("/data/sha256"))
            .and_then(Json::as_str)
            .map(str::to_string);
        // One byte more than declared reveals a descriptor longer than its
        // declaration, without reading an unbounded stream.
        let max = max_bytes
            .or(size.map(|s| s.saturating_add(1)))
            .unwrap_or(MAX_FD_READ)
            .min(MAX_FD_READ);
        self.sent(
            identity,
            "read_fd",
            json!({"handle": handle, "max_bytes": max}),
        );
        let started = Instant::now();
        let read = self
            .device(identity)?
            .read_fd(&handle, max)
            .map_err(device_stop)?;
        let got = sha256_hex(&read.bytes);
        self.answered(
            json!({"bytes": read.bytes.len(), "sha256": got, "eof": read.eof, "error": read.error}),
            started,
        );
        let mut problems = Vec::new();
        if let Some(s) = size {
            if read.bytes.len() as u64 != s || !read.eof {
                problems.push(format!(
                    "declared size_bytes {s}, the descriptor held {}{}",
                    read.bytes.len(),
                    if read.eof { "" } else { " or more" }
                ));
            }
        }
        if let Some(d) = &digest {
            if *d != got {
                problems.push(format!("declared sha256 {d}, the bytes hash to {got}"));
            }
        }
        if let Some(e) = &read.error {
            problems.push(format!("the writer reported an error: {e}"));
        }
        if problems.is_empty() && declared.is_some() {
            if let Ok(text) = std::str::from_utf8(&read.bytes) {
                if let Err(e) = cetp_proto::bundle::parse_json_text("result_fd", text) {
                    problems.push(format!("file content is not JSON: {e}"));
                }
            } else {
                problems.push("file content is not UTF-8 JSON".into());
            }
        }
        match (problems.is_empty(), expect_ok) {
            (true, true) | (false, false) => Ok(()),
            (false, true) => Err(Stop::Fail(problems.join("; "))),
            (true, false) => Err(Stop::Fail(
                "the descriptor matched its declaration where a mismatch was expected".into(),
            )),
        }
    }

    /// Counts effects with the profile's observer.
    fn observe(&mut self) -> Result<i64, Stop> {
        let observer = self.profile.observer.clone().ok_or_else(|| {
            Stop::NotApplicable(
                "needs an observer in the profile (observer.tool, observer.pointer)".into(),
            )
        })?;
        let name = match &self.observer_session {
            Some(n) => n.clone(),
            None => {
                let n = "__observer".to_string();
                self.negotiate("a", None, None, None, Some(&n), None, &[])?;
                self.observer_session = Some(n.clone());
                n
            }
        };
        let mut step = internal_call("a", "execute_tool", &name);
        if let Step::Call { tool, args, .. } = &mut step {
            *tool = Some(ToolRef {
                name: Some(observer.tool.clone()),
                pick: BTreeMap::new(),
                profile_role: None,
                executes: true,
            });
            *args = Some(Args::Json(table_to_json(&observer.args)));
        }
        let p = self.prepare_call(&step)?;
        let answer = self.send(&p)?;
        self.run_checks(&p, &answer, None);
        let doc = answer_document(&answer, json!({}));
        // A session lost to a restart is renewed once.
        if doc.get("error_code").and_then(Json::as_str) == Some("NEGOTIATION_REQUIRED") {
            self.sessions.remove(&name);
            self.observer_session = None;
            return self.observe();
        }
        let value = doc
            .pointer(&format!("/data/value{}", observer.pointer))
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "observer {} answered {} without a value at {}",
                    observer.tool,
                    describe(&doc),
                    observer.pointer
                ))
            })?;
        match value {
            Json::Number(n) => n
                .as_i64()
                .ok_or_else(|| Stop::Fail(format!("observer count {n} is not an integer"))),
            Json::Array(a) => Ok(a.len() as i64),
            other => Err(Stop::Fail(format!(
                "observer value {} is neither a number nor an array",
                short(Some(other))
            ))),
        }
    }
}

/// A call the harness makes on its own behalf (polling, observing) in a
/// session, with every optional field unset.
fn internal_call(identity: &str, method: &str, session: &str) -> Step {
    Step::Call {
        as_: identity.to_string(),
        method: method.to_string(),
        session: Some(session.to_string()),
        v1: false,
        tool: None,
        args: None,
        request_id: None,
        deadline_in_ms: None,
        resume_token: None,
        operation_id: None,
        extras: BTreeMap::new(),
        omit: Vec::new(),
        arg: None,
        bind: None,
        expect: None,
    }
}

fn device_stop(e: crate::device::DeviceError) -> Stop {
    match e.fault() {
        Fault::Infra => Stop::Infra(e.to_string()),
        Fault::Provider => Stop::Fail(format!("the Provider failed at the Binder level: {e}")),
    }
}

fn answer_json(a: &CallAnswer) -> Json {
    match a {
        CallAnswer::Result(None) => json!({"result": null}),
        CallAnswer::Result(Some(b)) => json!({"result": bundle_to_json(b)}),
        CallAnswer::Threw { class, message } => {
            json!({"threw": {"class": class, "message": message}})
        }
    }
}

fn manifest_json(m: &ServiceManifest) -> Json {
    json!({
        "package": m.package, "service": m.service, "exported": m.exported,
        "permission": m.permission, "meta": m.meta, "authority_package": m.authority_package,
    })
}

fn matches_pick(t: &ToolSummary, pick: &BTreeMap<String, Vec<Json>>) -> bool {
    pick.iter().all(|(k, allowed)| {
        let v = match k.as_str() {
            "effect" => json!(t.effect),
            "risk" => json!(t.risk),
            "confirmation" => json!(t.confirmation),
            "execution" => json!(t.execution),
            "destructive" => json!(t.destructive),
            "idempotent" => json!(t.idempotent),
            "open_world" => json!(t.open_world),
            _ => return false,
        };
        allowed.contains(&v)
    })
}

fn describe_pick(pick: &BTreeMap<String, Vec<Json>>) -> String {
    pick.iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.iter()
                    .map(|x| x.to_string().trim_matches('"').to_string())
                    .collect::<Vec<_>>()
                    .join("|")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn short(v: Option<&Json>) -> String {
    let s = v.map(Json::to_string).unwrap_or_else(|| "nothing".into());
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

/// Heuristics for "opaque and unpredictable" (§2.2): each token has at
/// least 16 characters drawn from at least 8 distinct ones, no two are equal,
/// and no two share more than half their length as a common prefix (which
/// catches counters such as `session-1`, `session-2`).
pub fn tokens_unpredictable(tokens: &[String]) -> Result<(), String> {
    for t in tokens {
        let distinct: BTreeSet<char> = t.chars().collect();
        if t.chars().count() < 16 || distinct.len() < 8 {
            return Err(format!(
                "session token {t:?} is too short or too uniform to be unpredictable"
            ));
        }
    }
    for (i, a) in tokens.iter().enumerate() {
        for b in &tokens[i + 1..] {
            if a == b {
                return Err(format!("two sessions got the same token {a:?}"));
            }
            let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
            if common * 2 > a.chars().count().min(b.chars().count()) {
                return Err(format!(
                    "session tokens {a:?} and {b:?} share a {common}-character prefix: predictable"
                ));
            }
        }
    }
    Ok(())
}

/// Applies one assertion to a document.
pub fn check_assertion(doc: &Json, a: &Assertion) -> Result<(), String> {
    let v = doc.pointer(&a.pointer);
    if let Some(exists) = a.exists {
        if v.is_some() != exists {
            return Err(format!(
                "`{}` {} (found {})",
                a.pointer,
                if exists {
                    "must exist"
                } else {
                    "must not exist"
                },
                short(v)
            ));
        }
    }
    if let Some(eq) = &a.equals {
        if v != Some(eq) {
            return Err(format!(
                "`{}` must equal {eq}, found {}",
                a.pointer,
                short(v)
            ));
        }
    }
    if let Some(set) = &a.one_of {
        // `null` in the set also admits an absent member (a defaulted field).
        if !v.map_or(set.contains(&Json::Null), |v| set.contains(v)) {
            return Err(format!(
                "`{}` must be one of {}, found {}",
                a.pointer,
                Json::from(set.clone()),
                short(v)
            ));
        }
    }
    if let Some(ex) = &a.excludes {
        if let Some(Json::Array(items)) = v {
            if let Some(bad) = items.iter().find(|i| ex.contains(i)) {
                return Err(format!("`{}` must not contain {bad}", a.pointer));
            }
        }
    }
    let num = v.and_then(Json::as_f64);
    if let Some(min) = a.min {
        if !num.is_some_and(|n| n >= min) {
            return Err(format!(
                "`{}` must be ≥ {min}, found {}",
                a.pointer,
                short(v)
            ));
        }
    }
    if let Some(max) = a.max {
        if !num.is_some_and(|n| n <= max) {
            return Err(format!(
                "`{}` must be ≤ {max}, found {}",
                a.pointer,
                short(v)
            ));
        }
    }
    if let Some(inner) = &a.all {
        match v {
            Some(Json::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    check_assertion(item, inner)
                        .map_err(|e| format!("`{}/{i}`: {e}", a.pointer))?;
                }
            }
            _ => {
                return Err(format!(
                    "`{}` must be an array, found {}",
                    a.pointer,
                    short(v)
                ))
            }
        }
    }
    Ok(())
}

/// Scopes known for BTreeSet use in checks.
pub type Scopes = BTreeSet<String>;
