//! The observer (snapshots of a read tool's result, judged as far as the
//! profile says they can be) and the setup calls that give a tool an object
//! to act on.

use super::{describe_short, internal_call, status, CaseRunner, StepResult, Stop};
use crate::profile::{table_to_json, Counts};
use crate::vector::{Args, Step, ToolRef};
use cetp_proto::descriptor::ToolSummary;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;

/// Direction of an effect on a count of objects: create adds one, delete
/// removes one; other effects need not change the count.
fn direction(effect: &str) -> Option<i64> {
    match effect {
        "create" => Some(1),
        "delete" => Some(-1),
        _ => None,
    }
}

fn count(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        Json::Array(a) => i64::try_from(a.len()).ok(),
        _ => None,
    }
}

impl CaseRunner<'_> {
    /// The observer's value now (the JSON value at its pointer).
    pub(super) fn snapshot(&mut self) -> Result<Json, Stop> {
        // Its request ids (the observer call, a renewed session, the polls
        // of an observer that answers in the background) come from the
        // snapshot stream, never from the one of the case's own calls.
        std::mem::swap(&mut self.rng, &mut self.snapshot_rng);
        let r = self.snapshot_once(true);
        std::mem::swap(&mut self.rng, &mut self.snapshot_rng);
        r
    }

    pub(super) fn snapshot_once(&mut self, renew: bool) -> Result<Json, Stop> {
        let observer = self.profile.observer.clone().ok_or_else(|| {
            Stop::setup(
                "[observer]",
                "needs an observer in the profile (a read tool and a JSON pointer into its result) to see whether an effect happened",
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
                listed_in: None,
                require: BTreeMap::new(),
                other_than: None,
            });
            *args = Some(Args::Json(table_to_json(&observer.args)));
        }
        let p = self.prepare_call(&step)?;
        let answer = self.send(&p)?;
        self.run_checks(&p, &answer, None);
        let mut doc = super::document(&answer, p.request_doc.clone());
        // A session lost to a restart or to moved time is renewed once.
        if renew && doc.get("error_code").and_then(Json::as_str) == Some("NEGOTIATION_REQUIRED") {
            self.sessions.remove(&name);
            self.observer_session = None;
            return self.snapshot_once(false);
        }
        if status(&doc) == Some("accepted") {
            // An observer that works in the background: follow it.
            self.bindings.insert("__observed".into(), doc);
            doc = self.settle("a", &name, "__observed")?;
        }
        let pointer = format!("/data/value{}", observer.pointer);
        doc.pointer(&pointer).cloned().ok_or_else(|| {
            Stop::Fail(format!(
                "observer {} answered {} without a value at {}",
                observer.tool,
                describe_short(&doc),
                observer.pointer
            ))
        })
    }

    pub(super) fn expect_effects(
        &mut self,
        since: &str,
        delta: i64,
        tool_of: Option<&str>,
    ) -> StepResult {
        let tool = match tool_of {
            Some(name) => {
                let doc = self.bound(name)?;
                Some(self.tool_of(&doc).ok_or_else(|| {
                    Stop::Infra(format!("vector error: `{name}` names no listed tool"))
                })?)
            }
            None => None,
        };
        self.judge_effects(since, delta, tool.as_ref())
    }

    /// `delta` effects of `tool` since the snapshot `since`, as far as the
    /// observer can tell: a mismatch is [`Stop::Fail`], a judgement the
    /// observer cannot make is [`Stop::Setup`].
    pub(super) fn judge_effects(
        &mut self,
        since: &str,
        delta: i64,
        tool: Option<&ToolSummary>,
    ) -> StepResult {
        self.effects_verdict(since, delta, tool)?
            .map_err(Stop::Fail)
    }

    pub(super) fn effects_verdict(
        &mut self,
        since: &str,
        delta: i64,
        tool: Option<&ToolSummary>,
    ) -> Result<Result<(), String>, Stop> {
        let before = self.bound(since)?;
        let now = self.snapshot()?;
        // A read tool changes no business state (§3.4), so whatever the case
        // expected of the call, it made no effect.
        let delta = if tool.is_some_and(|t| t.effect == "read") {
            0
        } else {
            delta
        };
        let counts = self
            .profile
            .observer
            .as_ref()
            .map(|o| o.counts)
            .unwrap_or_default();
        if delta == 0 {
            return Ok(if before == now {
                Ok(())
            } else {
                Err(format!(
                    "no effect was due since `{since}`, and the observer's value changed from {} to {}",
                    super::short(Some(&before)),
                    super::short(Some(&now))
                ))
            });
        }
        let numbers = |what: &str| -> Result<(i64, i64), Stop> {
            match (count(&before), count(&now)) {
                (Some(a), Some(b)) => Ok((a, b)),
                _ => Err(Stop::Setup {
                    needs: "[observer] pointer".into(),
                    reason: format!(
                        "observer.counts = {what} needs a number or an array at the pointer, found {}",
                        super::short(Some(&now))
                    ),
                }),
            }
        };
        match counts {
            Counts::Effects => {
                let (a, b) = numbers("\"effects\"")?;
                Ok(if b - a == delta {
                    Ok(())
                } else {
                    Err(format!(
                        "expected {delta} effect(s) since `{since}`, the observer counted {}",
                        b - a
                    ))
                })
            }
            Counts::Objects => {
                let Some(dir) = tool.and_then(|t| direction(&t.effect)) else {
                    return Err(Stop::setup(
                        "[observer] counts = \"effects\"",
                        format!(
                            "a count of objects does not show an effect of {} (effect={}); an observer counting effects would",
                            tool.map_or("this tool", |t| t.name.as_str()),
                            tool.map_or("?", |t| t.effect.as_str())
                        ),
                    ));
                };
                let (a, b) = numbers("\"objects\"")?;
                let due = delta * dir;
                Ok(if b - a == due {
                    Ok(())
                } else {
                    Err(format!(
                        "expected the count of objects to move by {due:+} ({delta} {} effect(s)) since `{since}`, it moved by {:+}",
                        tool.map_or("?", |t| t.effect.as_str()),
                        b - a
                    ))
                })
            }
            Counts::Snapshot => Err(Stop::setup(
                "[observer] counts",
                "the observer's snapshot shows that something changed, not how many effects happened; set observer.counts to \"effects\" or \"objects\"",
            )),
        }
    }

    /// Runs the profile's setup calls of `tool` and binds their results into
    /// `args`. Snapshots taken earlier in the case are taken again after the
    /// setup, so that the setup's own effects are never counted against the
    /// step that follows.
    pub(super) fn with_setup(
        &mut self,
        tool: &ToolSummary,
        session: Option<&str>,
        args: Json,
    ) -> Result<Json, Stop> {
        let calls = self.profile.setup(&tool.name).to_vec();
        self.run_setup(&calls, &tool.name, session, args)
    }

    /// Runs `calls` and binds their results into `args` (of `tool`).
    pub(super) fn run_setup(
        &mut self,
        calls: &[crate::profile::SetupCall],
        tool: &str,
        session: Option<&str>,
        mut args: Json,
    ) -> Result<Json, Stop> {
        if calls.is_empty() {
            return Ok(args);
        }
        if self.guest {
            // Whether anything moved the observer in its window so far: if
            // nothing did, the windows it ran in saw none of its steps.
            let mut clean = true;
            for since in self.snapshots.clone() {
                clean &= matches!(self.effects_verdict(&since, 0, None), Ok(Ok(())));
            }
            return Err(Stop::Withdraw {
                reason: format!(
                    "{tool} needs setup calls, whose effects would land in the observer window this case was running in"
                ),
                clean,
            });
        }
        let session = session
            .ok_or_else(|| Stop::Infra("vector error: a setup call needs a session".into()))?;
        let identity = self.session(session)?.identity.clone();
        for (i, setup) in calls.iter().enumerate() {
            let needs = format!("[tools.{tool}] setup");
            let mut step = internal_call(&identity, "execute_tool", session);
            if let Step::Call {
                tool: t, args: a, ..
            } = &mut step
            {
                *t = Some(ToolRef {
                    name: Some(setup.tool.clone()),
                    pick: BTreeMap::new(),
                    profile_role: None,
                    executes: true,
                    listed_in: None,
                    require: BTreeMap::new(),
                    other_than: None,
                });
                *a = Some(Args::Json(table_to_json(&setup.args)));
            }
            let p = self.prepare_call(&step)?;
            let answer = self.send(&p)?;
            self.run_checks(&p, &answer, None);
            let mut doc = super::document(&answer, p.request_doc.clone());
            if status(&doc) == Some("accepted") {
                self.bindings.insert("__setup".into(), doc);
                doc = self.settle(&identity, session, "__setup")?;
            }
            if status(&doc) != Some("success") {
                return Err(Stop::setup(
                    &needs,
                    format!(
                        "setup call {} of {} answered {}",
                        i + 1,
                        setup.tool,
                        describe_short(&doc)
                    ),
                ));
            }
            let value = doc.pointer("/data/value").cloned().unwrap_or(Json::Null);
            for (to, from) in &setup.bind {
                let v = value.pointer(from).cloned().ok_or_else(|| {
                    Stop::setup(
                        &needs,
                        format!("setup result of {} has nothing at {from}", setup.tool),
                    )
                })?;
                set_pointer(&mut args, to, v).map_err(|e| Stop::setup(&needs, e))?;
            }
        }
        let snapshots: Vec<String> = self.snapshots.iter().cloned().collect();
        for name in snapshots {
            let now = self.snapshot()?;
            self.bindings.insert(name, now);
        }
        Ok(args)
    }
}

/// Sets `value` at `pointer` in `doc`, creating object members on the way.
fn set_pointer(doc: &mut Json, pointer: &str, value: Json) -> Result<(), String> {
    if pointer.is_empty() {
        *doc = value;
        return Ok(());
    }
    if !pointer.starts_with('/') {
        return Err(format!("{pointer}: a JSON pointer starts with /"));
    }
    let mut cur = doc;
    let parts = cetp_proto::pointer::tokens(pointer);
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        cur = match cur {
            Json::Object(m) => {
                if last {
                    m.insert(part.clone(), value);
                    return Ok(());
                }
                m.entry(part.clone()).or_insert_with(|| json!({}))
            }
            Json::Array(a) => {
                let idx: usize = part
                    .parse()
                    .map_err(|_| format!("{pointer}: {part:?} is not an array index"))?;
                let slot = a
                    .get_mut(idx)
                    .ok_or_else(|| format!("{pointer}: index {idx} is out of range"))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => return Err(format!("{pointer}: cannot set a member of a non-container")),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn pointers_set_nested_members() {
        let mut v = json!({"a": 1});
        set_pointer(&mut v, "/note_id", json!("n1")).unwrap();
        set_pointer(&mut v, "/x/y", json!(2)).unwrap();
        assert_eq!(v, json!({"a": 1, "note_id": "n1", "x": {"y": 2}}));
        let mut v = json!({"ids": ["a", "b"]});
        set_pointer(&mut v, "/ids/1", json!("c")).unwrap();
        assert_eq!(v, json!({"ids": ["a", "c"]}));
        assert!(set_pointer(&mut json!(3), "/a", json!(1)).is_err());
    }

    #[test]
    pub(super) fn directions_follow_the_effect() {
        assert_eq!(direction("create"), Some(1));
        assert_eq!(direction("delete"), Some(-1));
        assert_eq!(direction("update"), None);
        assert_eq!(count(&json!([1, 2])), Some(2));
        assert_eq!(count(&json!(7)), Some(7));
        assert_eq!(count(&json!("x")), None);
    }
}
