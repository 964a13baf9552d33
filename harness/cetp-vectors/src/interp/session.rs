//! Discovery, negotiation and the descriptors of a session.

use super::{device_stop, CaseRunner, Prepared, Session, StepResult, Stop};
use crate::answer::{answer_document, bundle_to_json, describe};
use crate::template::expand;
use crate::vector::{DiscoverExpect, Expect, TypedValue};
use cetp_proto::bundle::Value;
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, NegotiateContext,
    ProviderInfoSummary, ToolListContext,
};
use cetp_proto::envelope::Capability;
use cetp_proto::provider::ServiceManifest;
use cetp_proto::schema::DEFAULT_DIALECT;
use cetp_proto::Bundle;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::time::Instant;

impl CaseRunner<'_> {
    pub(super) fn discover(
        &mut self,
        bind: Option<&str>,
        expect: Option<&DiscoverExpect>,
    ) -> StepResult {
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
        let declared = cetp_proto::discovery::parse_manifest(m);
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
    pub(super) fn negotiate(
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
            request_doc: json!({"method": "negotiate", "extras": bundle_to_json(&bundle), "_types": crate::answer::bundle_types(&bundle)}),
            extras: Some(bundle),
            v1: false,
            session: None,
            tool: None,
            bind: None,
            expect: None,
            at_ms: None,
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

    pub(super) fn typed_value(&self, tv: &TypedValue) -> Result<Value, Stop> {
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
            // A nested Bundle of typed values: type confusion where the
            // Provider expects a scalar (`cetp fuzz`).
            "bundle" => {
                let members = v.as_object().ok_or_else(bad)?;
                let mut nested = Bundle::new();
                for (k, m) in members {
                    let tv: TypedValue = serde_json::from_value(m.clone()).map_err(|_| bad())?;
                    nested.insert(k, self.typed_value(&tv)?);
                }
                Value::Bundle(nested)
            }
            _ => return Err(bad()),
        })
    }

    pub(super) fn session(&self, name: &str) -> Result<&Session, Stop> {
        self.sessions
            .get(name)
            .ok_or_else(|| Stop::Infra(format!("vector error: no session bound to {name:?}")))
    }

    /// Fetches provider info and the tool list of a session once.
    pub(super) fn ensure_tools(&mut self, session: &str) -> Result<(), Stop> {
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
                request_doc: json!({"method": method, "extras": bundle_to_json(&extras), "_types": crate::answer::bundle_types(&extras)}),
                extras: Some(extras),
                v1: false,
                session: Some(session.to_string()),
                tool: None,
                bind: None,
                expect: None,
                at_ms: None,
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
}

fn manifest_json(m: &ServiceManifest) -> Json {
    json!({
        "package": m.package, "service": m.service, "exported": m.exported,
        "permission": m.permission, "meta": m.meta, "authority_package": m.authority_package,
    })
}
