//! Calls: preparing the envelope, picking the tool and its args, sending,
//! running the checks on the answer, and judging one answer against a
//! step's expectation.

use super::{
    answer_json, check_assertion, device_stop, short, CaseRunner, Prepared, StepResult, Stop,
    CALL_TIMEOUT_MS,
};
use crate::answer::{answer_document, bundle_to_json, describe};
use crate::args;
use crate::checks::{check_answer, AnswerContext};
use crate::event::Event;
use crate::profile::table_to_json;
use crate::template::expand_string;
use crate::vector::{Args, Expect, Step, ToolRef};
use cetp_proto::bundle::Value;
use cetp_proto::descriptor::ToolSummary;
use cetp_proto::device::{CallAnswer, ErrorKind};
use cetp_proto::envelope::keys;
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use cetp_proto::Bundle;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::time::Instant;

impl CaseRunner<'_> {
    /// A `call` step: prepare, send, check, judge.
    pub(super) fn call_step(&mut self, step: &Step) -> StepResult {
        if let Step::Call {
            only_if: Some(needed),
            ..
        } = step
        {
            match crate::template::expand(&self.bindings, needed) {
                Ok(v) if !v.is_null() => {}
                // Nothing to ask about: the step is the Provider's choice
                // not taken, and is skipped (its `bind` stays unbound).
                Ok(_) => return Ok(()),
                Err(e) if e.contains("has nothing at") => return Ok(()),
                Err(e) => return Err(Stop::Infra(e)),
            }
        }
        let prepared = self.prepare_call(step)?;
        let answer = self.send(&prepared)?;
        self.finish_call(prepared, answer)
    }

    /// The steps once per executable tool matching `pick`.
    pub(super) fn each_tool(
        &mut self,
        session: &str,
        pick: &BTreeMap<String, Vec<Json>>,
        bind: &str,
        steps: &[Step],
        needs: &[String],
    ) -> StepResult {
        self.ensure_tools(session)?;
        let mut names: Vec<String> = self
            .session(session)?
            .tools
            .as_ref()
            .map(|t| {
                t.tools
                    .iter()
                    .filter(|t| matches_pick(t, pick))
                    .filter(|t| self.profile.may_execute(&t.name, &t.effect))
                    .map(|t| t.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        if names.is_empty() {
            return Err(Stop::setup(
                "[execute] allow",
                format!(
                    "the Provider lists no tool with {} that the profile lets the harness execute",
                    describe_pick(pick)
                ),
            ));
        }
        for name in names {
            self.bindings.insert(bind.to_string(), json!(name));
            for s in steps {
                self.run_step(s, needs)?;
            }
        }
        Ok(())
    }

    /// Calls sent at the same time (single-executor and limit cases).
    pub(super) fn concurrent(&mut self, steps: &[Step]) -> StepResult {
        let mut prepared = Vec::new();
        for s in steps {
            prepared.push(self.prepare_call(s)?);
        }
        for p in &prepared {
            self.stalled(&p.stall_key())?;
        }
        for p in &prepared {
            self.sent(&p.identity, &p.method, p.request_doc.clone());
            self.dispatched(p);
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
                            crate::device::DeviceError::new(ErrorKind::Io, "no such identity")
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
                            ErrorKind::Io,
                            "call thread panicked",
                        ))
                    })
                })
                .collect()
        });
        let mut first_stop = None;
        for (p, a) in prepared.iter().zip(&answers) {
            self.record_call(&p.stall_key(), a);
        }
        for (p, a) in prepared.into_iter().zip(answers) {
            let mut answer = a.map_err(device_stop)?;
            self.answered(answer_json(&answer), started);
            // A Consumer retries what asks to be retried ("still running,
            // ask again"), here one at a time once all were answered.
            if let Some((_, hint)) = retry_due(&p, &answer) {
                self.run_checks(&p, &answer, None);
                self.retry_wait(
                    &p.identity,
                    hint.unwrap_or(RETRY_BASE_MS).clamp(1, MAX_RETRY_WAIT_MS),
                )?;
                answer = self.send(&p)?;
            }
            if let Err(stop) = self.finish_call(p, answer) {
                first_stop.get_or_insert(stop);
            }
        }
        first_stop.map_or(Ok(()), Err)
    }

    pub(super) fn pick_tool(&mut self, session: &str, r: &ToolRef) -> Result<ToolSummary, Stop> {
        let session = r.listed_in.as_deref().unwrap_or(session);
        self.ensure_tools(session)?;
        let s = self.session(session)?;
        let tools = &s.tools.as_ref().expect("ensure_tools fills tools").tools;
        let wanted: Option<String> = if let Some(name) = &r.name {
            Some(expand_string(&self.bindings, name).map_err(Stop::Infra)?)
        } else if let Some(role) = &r.profile_role {
            match (role.as_str(), &self.profile.observer) {
                ("observer", Some(o)) => Some(o.tool.clone()),
                _ => match self.profile.roles.get(role) {
                    Some(t) => Some(t.tool.clone()),
                    // Annotations can still find a tool for the role.
                    None if !r.pick.is_empty() => None,
                    None => {
                        return Err(Stop::setup(
                            &format!("[roles.{role}]"),
                            format!("the profile names no tool for role {role:?}"),
                        ))
                    }
                },
            }
        } else {
            None
        };
        let tool = match wanted {
            Some(name) => tools
                .iter()
                .find(|t| t.name == name)
                .cloned()
                .ok_or_else(|| {
                    Stop::setup(
                        "[tools] / [roles]",
                        format!("the Provider lists no tool {name:?} for this caller"),
                    )
                })?,
            None => {
                let other_than = match &r.other_than {
                    Some(n) => Some(expand_string(&self.bindings, n).map_err(Stop::Infra)?),
                    None => None,
                };
                // Prefer a tool the profile allows executing, so a Provider
                // with several matching tools is tested where it may be.
                // By name, not by the Provider's order, which means nothing
                // (§3.3): the same Provider gets the same tool in every
                // session and every run.
                let listed: Vec<&str> = tools
                    .iter()
                    .filter(|t| matches_pick(t, &r.pick))
                    .map(|t| t.name.as_str())
                    .collect();
                let mut matching: Vec<&ToolSummary> = tools
                    .iter()
                    .filter(|t| matches_pick(t, &r.pick))
                    .filter(|t| other_than.as_deref() != Some(t.name.as_str()))
                    .collect();
                matching.sort_by(|a, b| a.name.cmp(&b.name));
                if matching.is_empty() {
                    let taken: Vec<&str> = other_than.as_deref().into_iter().collect();
                    return Err(Stop::NotApplicable(too_few_tools(
                        &describe_pick(&r.pick),
                        &listed,
                        &taken,
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
        if !matches_pick(&tool, &r.require) {
            return Err(Stop::NotApplicable(format!(
                "the case is about a tool with {}; {} has effect={}, execution={}",
                describe_pick(&r.require),
                tool.name,
                tool.effect,
                tool.execution
            )));
        }
        if r.executes && !self.profile.may_execute(&tool.name, &tool.effect) {
            return Err(Stop::setup(
                "[execute] allow",
                format!(
                    "not executed: {} has effect={} and the profile does not allow executing it",
                    tool.name, tool.effect
                ),
            ));
        }
        Ok(tool)
    }

    /// The args the vendor wrote for `tool` in its `role` or as the
    /// observer's: complete as written (no setup calls are added).
    fn given_args(&self, tool: &ToolSummary, role: Option<&str>) -> Option<Json> {
        if let Some(r) = role
            .and_then(|r| self.profile.roles.get(r))
            .filter(|r| r.tool == tool.name)
        {
            return Some(table_to_json(&r.args));
        }
        self.profile
            .observer
            .as_ref()
            .filter(|o| o.tool == tool.name)
            .map(|o| table_to_json(&o.args))
    }

    /// Valid args for `tool`: the vendor's own, its sample, or generated
    /// from the input schema.
    fn valid_args_for(
        &self,
        tool: &ToolSummary,
        role: Option<&str>,
        dialect: &str,
    ) -> Result<Json, Stop> {
        if let Some(v) = self.given_args(tool, role) {
            return Ok(v);
        }
        if let Some(sample) = self.profile.sample_args(&tool.name) {
            return Ok(sample);
        }
        args::valid_args(&tool.input_schema, dialect).ok_or_else(|| {
            Stop::setup(
                &format!("[tools.{}] sample_args", tool.name),
                format!("cannot generate valid args for {}", tool.name),
            )
        })
    }

    pub(super) fn args_text(
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
        // The role's or the observer's args are complete as the vendor wrote
        // them; sample or generated args get the tool's setup calls.
        let role_args = role
            .and_then(|r| self.profile.roles.get(r))
            .is_some_and(|r| r.tool == tool.name);
        let complete = self.given_args(tool, role).is_some();
        Ok(match spec {
            Args::Valid => {
                let v = self.valid_args_for(tool, role, &dialect)?;
                if role_args {
                    let calls = self.profile.role_setup(role.unwrap_or_default()).to_vec();
                    self.run_setup(&calls, &tool.name, session, v)?.to_string()
                } else if complete {
                    v.to_string()
                } else {
                    self.with_setup(tool, session, v)?.to_string()
                }
            }
            Args::Escalating => {
                let v = match self.profile.escalating_args(&tool.name) {
                    Some(v) => v,
                    None => self.valid_args_for(tool, role, &dialect)?,
                };
                self.with_setup(tool, session, v)?.to_string()
            }
            Args::Invalid => {
                let v = self.valid_args_for(tool, role, &dialect)?;
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
            Args::Oversize => {
                let limit = session
                    .and_then(|s| self.sessions.get(s))
                    .and_then(|s| s.negotiated.limit("max_request_bytes"))
                    .unwrap_or(65_536)
                    .clamp(0, 16 * 1024 * 1024) as usize;
                args::oversize(&self.valid_args_for(tool, role, &dialect)?, limit)
            }
            Args::SameAs(_)
            | Args::ReorderedFrom(_)
            | Args::AlteredOrSameFrom(_)
            | Args::AlteredFrom(_) => self.args_from_bound(spec, tool, &dialect)?,
        })
    }

    /// Args drawn from an earlier call's: the same text, reordered, or
    /// altered to other valid args.
    fn args_from_bound(
        &self,
        spec: &Args,
        tool: &ToolSummary,
        dialect: &str,
    ) -> Result<String, Stop> {
        let parsed = |text: &str| -> Result<Json, Stop> {
            serde_json::from_str(text)
                .map_err(|e| Stop::Infra(format!("bound args are not JSON: {e}")))
        };
        Ok(match spec {
            Args::ReorderedFrom(name) => args::reordered_text(&parsed(&self.bound_args(name)?)?),
            Args::AlteredOrSameFrom(name) => {
                let text = self.bound_args(name)?;
                args::altered_valid(&tool.input_schema, dialect, &parsed(&text)?)
                    .map_or(text, |a| a.to_string())
            }
            Args::AlteredFrom(name) => {
                let text = self.bound_args(name)?;
                args::altered_valid(&tool.input_schema, dialect, &parsed(&text)?)
                    .ok_or_else(|| {
                        Stop::NotApplicable(format!(
                            "no other valid args exist for {}: every value its input_schema allows is fixed",
                            tool.name
                        ))
                    })?
                    .to_string()
            }
            Args::SameAs(name) => self.bound_args(name)?,
            _ => {
                return Err(Stop::Infra(
                    "vector error: args not drawn from a binding".into(),
                ))
            }
        })
    }

    pub(super) fn bound_args(&self, name: &str) -> Result<String, Stop> {
        self.bindings
            .get(name)
            .and_then(|d| d.pointer("/_request/args_text"))
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| Stop::Infra(format!("vector error: `{name}` carries no args")))
    }

    /// The common fields of a v2 call in `session` (its token, a request
    /// id, a deadline from the device's clock), or only the request id a
    /// v1 or sessionless step names; with the device time the call left at.
    fn common_fields(
        &mut self,
        as_: &str,
        session: Option<&str>,
        v1: bool,
        request_id: Option<&str>,
        deadline_in_ms: Option<i64>,
    ) -> Result<(Bundle, Option<i64>), Stop> {
        let mut b = Bundle::new();
        if let (Some(s), false) = (session, v1) {
            let sess = self.session(s)?.clone();
            let rid = match request_id {
                None | Some("new") => self.uuid(),
                Some(t) => expand_string(&self.bindings, t).map_err(Stop::Infra)?,
            };
            let now = self.device(as_)?.now_ms();
            let common = cetp_proto::envelope::Common {
                session_token: sess.token.clone(),
                request_id: rid,
                deadline_at_ms: now.saturating_add(deadline_in_ms.unwrap_or(30_000)),
            };
            return Ok((common.to_bundle(), Some(now)));
        }
        if let Some(t) = request_id {
            let rid = if t == "new" {
                self.uuid()
            } else {
                expand_string(&self.bindings, t).map_err(Stop::Infra)?
            };
            b.insert(keys::REQUEST_ID, Value::String(rid));
        }
        Ok((b, None))
    }

    pub(super) fn prepare_call(&mut self, step: &Step) -> Result<Prepared, Stop> {
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
            only_if: _,
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
        let mut req = serde_json::Map::new();
        let (mut b, at_ms) = self.common_fields(
            as_,
            session.as_deref(),
            *v1,
            request_id.as_deref(),
            *deadline_in_ms,
        )?;
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
        let request_doc = request_doc(method, &b, arg.as_deref(), req);
        Ok(Prepared {
            identity: as_.clone(),
            method: method.clone(),
            arg,
            // §4: a call without protocol_version is a v1 call, whatever the
            // step meant; its answer is judged as one (`cetp fuzz` found the
            // checks holding a legal v1 answer to v2's echo rules).
            v1: *v1 || (method != "negotiate" && !b.contains(keys::PROTOCOL_VERSION)),
            extras: Some(b),
            session: session.clone(),
            tool: picked,
            request_doc,
            bind: bind.clone(),
            expect: expect.clone(),
            at_ms,
        })
    }

    /// Sends a prepared call, as a Consumer would: an answer that says
    /// "retry" (§5: `retryable` true, and nothing that needs a user, a new
    /// session or a query first) is sent again unchanged, same request_id,
    /// after its `retry_after_ms`, before anything judges it, unless the
    /// step is about that very error. The retried answers are checked like
    /// any other. The retries are bounded ([`MAX_RETRIES`], and no wait
    /// past [`MAX_RETRY_WAIT_MS`]): then the answer the harness got is the
    /// one judged, as a Consumer that gave up would report it.
    pub(super) fn send(&mut self, p: &Prepared) -> Result<CallAnswer, Stop> {
        let mut answer = self.send_once(p)?;
        for attempt in 0..MAX_RETRIES {
            let Some((_, hint)) = retry_due(p, &answer) else {
                break;
            };
            let wait = hint.unwrap_or(RETRY_BASE_MS << attempt).max(1);
            if wait > MAX_RETRY_WAIT_MS {
                break;
            }
            self.run_checks(p, &answer, None);
            self.retry_wait(&p.identity, wait)?;
            answer = self.send_once(p)?;
        }
        Ok(answer)
    }

    /// Lets `ms` pass before a retry: device time where the harness can move
    /// the clock, real time otherwise (never shortened: §5 makes the
    /// Consumer wait at least `retry_after_ms`).
    fn retry_wait(&mut self, identity: &str, ms: u64) -> StepResult {
        if self.move_clock(ms)?.is_none() {
            let device = self.device(identity)?;
            self.pass_real_time(device, ms);
        }
        Ok(())
    }

    /// Sends a prepared call once and emits its events.
    fn send_once(&mut self, p: &Prepared) -> Result<CallAnswer, Stop> {
        self.sent(&p.identity, &p.method, p.request_doc.clone());
        let started = Instant::now();
        let key = p.stall_key();
        self.stalled(&key)?;
        self.dispatched(p);
        let dev = self.device(&p.identity)?;
        let answer = dev.call(
            &self.env.authority,
            &p.method,
            p.arg.as_deref(),
            p.extras.as_ref(),
            CALL_TIMEOUT_MS,
        );
        self.record_call(&key, &answer);
        let answer = answer.map_err(device_stop)?;
        self.answered(answer_json(&answer), started);
        Ok(answer)
    }

    pub(super) fn run_checks(
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
            let cited = self.tally.cite(&f.rule);
            self.tally
                .cited
                .entry(f.check)
                .or_default()
                .extend(cited.iter().cloned());
            (self.emit)(Event::CheckFinding {
                case_id: self.case_id.clone(),
                step: self.step,
                check: f.check.to_string(),
                requirements: cited,
                level: format!("{:?}", f.level).to_uppercase(),
                message: f.message.clone(),
            });
            self.tally
                .first
                .entry(f.check)
                .or_insert_with(|| (self.case_id.clone(), self.step, f.clone()));
        }
    }

    pub(super) fn finish_call(&mut self, p: Prepared, answer: CallAnswer) -> StepResult {
        self.run_checks(&p, &answer, None);
        if p.expect.as_ref().is_some_and(|e| e.large) {
            self.large_result_fits(&p, &answer)?;
        }
        let mut doc = answer_document(&answer, p.request_doc.clone());
        // The Provider may answer any execution with an operation (§2.3,
        // §4.4): unless the step is about the operation itself, follow it to
        // its outcome and judge that, in the shape of a synchronous answer.
        let about_operation = p
            .expect
            .as_ref()
            .is_some_and(|e| e.operation || e.status.iter().any(|s| s == "accepted"));
        let async_session = p
            .session
            .as_ref()
            .and_then(|s| self.sessions.get(s))
            .is_some_and(|s| {
                s.negotiated
                    .capabilities
                    .iter()
                    .any(|c| c == "async_operations")
            });
        // Without async_operations an operation is a violation (§2.3), judged
        // as it came.
        if p.method == "execute_tool"
            && super::status(&doc) == Some("accepted")
            && !about_operation
            && async_session
        {
            if let Some(session) = p.session.clone() {
                self.bindings.insert("__accepted".into(), doc);
                doc = self.settle(&p.identity, &session, "__accepted")?;
                // §4.5 holds wherever the result arrives: inline in the
                // operation's terminal state within the limit is as legal
                // as inline in the execute answer.
                if p.expect.as_ref().is_some_and(|e| e.large) {
                    self.settled_result_fits(&p, &doc)?;
                }
            }
        }
        if p.expect.as_ref().is_some_and(|e| e.output_schema) {
            self.judge_file_result(&p.identity, &mut doc, None)?;
        }
        if let Some(name) = &p.bind {
            self.bindings.insert(name.clone(), doc.clone());
            if let Some(at) = p.at_ms {
                self.sent_at.insert(name.clone(), at);
            }
        }
        match &p.expect {
            Some(e) => self.judge(&doc, e, p.tool.as_ref()),
            None => Ok(()),
        }
    }

    /// A case about a result too large to inline, whose result came inline
    /// within the session's negotiated limit: the Provider did what §4.5
    /// asks, and the profile's role is not large for it.
    fn large_result_fits(&self, p: &Prepared, answer: &CallAnswer) -> StepResult {
        let CallAnswer::Result(Some(b)) = answer else {
            return Ok(());
        };
        let (Ok(Some(status)), Ok(Some(data))) =
            (b.opt_string(keys::STATUS), b.opt_string(keys::DATA))
        else {
            return Ok(());
        };
        let inline = serde_json::from_str::<Json>(&data)
            .ok()
            .is_some_and(|d| d.get("kind").and_then(Json::as_str) == Some("inline"));
        let limit = p
            .session
            .as_ref()
            .and_then(|s| self.sessions.get(s))
            .and_then(|s| s.negotiated.limit("max_inline_result_bytes"));
        match limit {
            Some(limit) if status == "success" && inline && data.len() as i64 <= limit => {
                Err(Stop::setup(
                    "[roles.large_result]",
                    format!(
                        "the result of {} came inline ({} bytes), within the negotiated max_inline_result_bytes of {limit}, as §4.5 asks; name args under [roles.large_result] whose result exceeds {limit} bytes to judge this case",
                        p.tool.as_ref().map_or("the large_result role", |t| t.name.as_str()),
                        data.len()
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// As [`Self::large_result_fits`], for a result that came in an
    /// operation's succeeded state (`settle`'s document): inline, and no
    /// larger than the session's negotiated `max_inline_result_bytes` as
    /// compact JSON, the Provider did what §4.5 asks.
    fn settled_result_fits(&self, p: &Prepared, doc: &Json) -> StepResult {
        let data = doc.get("data").unwrap_or(&Json::Null);
        if super::status(doc) != Some("success")
            || data.get("kind").and_then(Json::as_str) != Some("inline")
        {
            return Ok(());
        }
        let bytes = data.to_string().len();
        let limit = p
            .session
            .as_ref()
            .and_then(|s| self.sessions.get(s))
            .and_then(|s| s.negotiated.limit("max_inline_result_bytes"));
        match limit {
            Some(limit) if i64::try_from(bytes).is_ok_and(|b| b <= limit) => Err(Stop::setup(
                "[roles.large_result]",
                format!(
                    "the result of {} came inline in its operation's succeeded state ({bytes} bytes as JSON), within the negotiated max_inline_result_bytes of {limit}, as §4.5 asks wherever a result arrives; name args under [roles.large_result] whose result exceeds {limit} bytes to judge this case",
                    p.tool.as_ref().map_or("the large_result role", |t| t.name.as_str()),
                ),
            )),
            _ => Ok(()),
        }
    }

    pub(super) fn judge(&self, doc: &Json, e: &Expect, tool: Option<&ToolSummary>) -> StepResult {
        let what = describe(doc);
        if let Some(done) = judge_form(doc, e, &what) {
            return done;
        }
        judge_status(doc, e, &what)?;
        judge_members(doc, e, &what)?;
        judge_output(doc, e, tool, &what)?;
        if e.v1 && doc.get("protocol_version").is_some() {
            return Err(Stop::Fail(
                "a v1 call was answered with a v2 envelope (protocol_version present)".into(),
            ));
        }
        Ok(())
    }
}

/// What the answer is at all: a throw, a null or a refusal when one is
/// expected (the judgement ends there, either way), and otherwise a Bundle.
fn judge_form(doc: &Json, e: &Expect, what: &str) -> Option<StepResult> {
    if e.threw {
        return Some(if doc.get("_threw").is_some() {
            Ok(())
        } else {
            Err(Stop::Fail(format!(
                "expected the Provider to throw, it answered {what}"
            )))
        });
    }
    if e.null_result {
        return Some(if doc.get("_null").is_some() {
            Ok(())
        } else {
            Err(Stop::Fail(format!(
                "expected null, the Provider answered {what}"
            )))
        });
    }
    let status = doc.get("status").and_then(Json::as_str);
    if e.refused {
        // A refusal is an error envelope: an exception or null is a
        // broken answer, not a "no".
        if let Some(t) = doc.get("_threw") {
            return Some(Err(Stop::Fail(format!(
                "expected an error envelope refusing the call, the Provider threw {}",
                t.get("class").and_then(Json::as_str).unwrap_or("?")
            ))));
        }
        if status != Some("error") {
            return Some(Err(Stop::Fail(format!(
                "expected the call to be refused with an error envelope, the Provider answered {what}"
            ))));
        }
        return Some(Ok(()));
    }
    if let Some(t) = doc.get("_threw") {
        return Some(Err(Stop::Fail(format!(
            "the Provider threw {} instead of answering",
            t.get("class").and_then(Json::as_str).unwrap_or("?")
        ))));
    }
    if doc.get("_null").is_some() {
        return Some(Err(Stop::Fail(
            "call() returned null instead of a Bundle".into(),
        )));
    }
    None
}

/// The answer's status against the expectation: a confirmation asked for,
/// work in the background, the statuses, error codes and retryable flag
/// allowed.
fn judge_status(doc: &Json, e: &Expect, what: &str) -> StepResult {
    let status = doc.get("status").and_then(Json::as_str);
    let code = doc.get("error_code").and_then(Json::as_str);
    if e.asks
        && status == Some("error")
        && !matches!(code, Some("USER_ACTION_REQUIRED" | "AUTH_REQUIRED"))
    {
        return Err(Stop::NotApplicable(format!(
            "the Provider refused the call ({what}) instead of asking for confirmation, a stricter policy §3.4 allows"
        )));
    }
    if e.operation && (status == Some("success") || (e.sync_failure_ok && status == Some("error")))
    {
        return Err(Stop::setup(
            "[roles.async]",
            format!(
                "the Provider answered synchronously ({what}), as it may (§2.3); name args that make it work in the background under [roles.async] to judge this case"
            ),
        ));
    }
    if e.operation && e.status.is_empty() && status != Some("accepted") {
        return Err(Stop::Fail(format!(
            "expected status accepted or a synchronous success, the Provider answered {what}"
        )));
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
    Ok(())
}

/// Members the answer must have or lack, and assertions on its data.
fn judge_members(doc: &Json, e: &Expect, what: &str) -> StepResult {
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
    Ok(())
}

/// An inline result against the tool's output_schema.
fn judge_output(doc: &Json, e: &Expect, tool: Option<&ToolSummary>, what: &str) -> StepResult {
    // An error answer has no result to judge: `output_schema` speaks of
    // the success an expectation may allow beside its errors.
    let errored = doc.pointer("/status").and_then(Json::as_str) == Some("error");
    // A file result's content was read and judged against the
    // output_schema before this expectation (judge_file_result).
    if e.output_schema && !errored && doc.get("_file_judged").is_none() {
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
    Ok(())
}

/// Retries of one call at most, after the first answer.
const MAX_RETRIES: u32 = 5;
/// The first wait when the Provider gives no `retry_after_ms`; doubled on
/// every further retry.
const RETRY_BASE_MS: u64 = 100;
/// The longest single wait for a retry: an answer asking for a longer one
/// is judged as it came, rather than the run stalled.
const MAX_RETRY_WAIT_MS: u64 = 30_000;

/// The error code and `retry_after_ms` of an answer the harness, as a
/// Consumer, retries before judging it: `retryable` true (§5, CETP2-5-23),
/// and a code whose next step is the same request again. Not retried:
/// NEGOTIATION_REQUIRED (the next step is a new session), AUTH_REQUIRED and
/// USER_ACTION_REQUIRED (a user acts first, §5), DEADLINE_EXCEEDED (a query
/// first, §5), and a code the step's expectation names or a `retryable`
/// it asserts (the step is about that answer).
fn retry_due(p: &Prepared, answer: &CallAnswer) -> Option<(String, Option<u64>)> {
    let CallAnswer::Result(Some(b)) = answer else {
        return None;
    };
    if b.opt_string(keys::STATUS).ok().flatten().as_deref() != Some("error") {
        return None;
    }
    if !matches!(b.get(keys::RETRYABLE), Some(Value::Bool(true))) {
        return None;
    }
    let code = b.opt_string(keys::ERROR_CODE).ok().flatten()?;
    if matches!(
        code.as_str(),
        "NEGOTIATION_REQUIRED" | "AUTH_REQUIRED" | "USER_ACTION_REQUIRED" | "DEADLINE_EXCEEDED"
    ) {
        return None;
    }
    if let Some(e) = &p.expect {
        if e.error_code.contains(&code) || e.retryable.is_some() {
            return None;
        }
    }
    let hint = match b.get(keys::RETRY_AFTER_MS) {
        Some(Value::Long(ms)) => u64::try_from(*ms).ok(),
        Some(Value::Int(ms)) => u64::try_from(*ms).ok(),
        _ => None,
    };
    Some((code, hint))
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

/// Why no tool is left for a call that needs one with `what` besides the
/// tools the case already uses (`taken`), given the tools the Provider
/// lists with it (`listed`): what is missing, counted, rather than "none"
/// when the Provider lists one the case already used (BIND-001 needs a
/// second tool with the same annotations).
pub(crate) fn too_few_tools(what: &str, listed: &[&str], taken: &[&str]) -> String {
    let needed = taken.len() + 1;
    if listed.is_empty() {
        return format!("the Provider lists no tool with {what}");
    }
    let mut names: Vec<&str> = listed.to_vec();
    names.sort_unstable();
    names.dedup();
    let ordinal = match needed {
        2 => "a second".to_string(),
        3 => "a third".to_string(),
        n => format!("a {n}th"),
    };
    format!(
        "the case needs {needed} distinct tools with {what} ({ordinal} besides {}); the Provider lists {} such tool{}: {}",
        taken.join(", "),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// What the interpreter binds of a call it sent: method, extras (as JSON
/// and with their Bundle types), arg, and the request fields a later
/// template names (`_request/...`).
fn request_doc(
    method: &str,
    b: &Bundle,
    arg: Option<&str>,
    req: serde_json::Map<String, Json>,
) -> Json {
    let mut doc = json!({"method": method, "extras": bundle_to_json(b), "arg": arg,
                         "_types": crate::answer::bundle_types(b)});
    if let Some(obj) = doc.as_object_mut() {
        obj.extend(req);
    }
    doc
}

#[cfg(test)]
mod too_few_tools_tests {
    use super::too_few_tools;

    #[test]
    fn one_such_tool_names_the_second_that_is_missing() {
        let what = "confirmation=never|provider_policy, effect=create|update|delete|transaction";
        let r = too_few_tools(what, &["add_alert"], &["add_alert"]);
        assert_eq!(
            r,
            format!("the case needs 2 distinct tools with {what} (a second besides add_alert); the Provider lists 1 such tool: add_alert")
        );
        assert!(!r.contains("lists no tool"));
        assert_eq!(
            too_few_tools(what, &[], &["x"]),
            format!("the Provider lists no tool with {what}")
        );
    }
}
