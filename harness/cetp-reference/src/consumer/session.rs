//! Discovery (§2.1), negotiation (§2.2, §8), provider info (§3.2) and tool
//! lists (§3.3).

use super::call::{Budget, Site, V2Call};
use super::error::{ConsumerError, DeviceFault, ProtocolFault, ProviderText, Refusal};
use super::{
    Connected, Consumer, ConsumerMutant, ConsumerVariant, DiscoveredProvider, DiscoveryReport,
    LocalLimits, Mode, ProviderEntry, ProviderInfo, RejectedService, ScopeInfo, Session, ToolCache,
    ToolCatalog, ToolInfo, V2State,
};
use crate::port::ConsumerPort;
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, validate_v1_tool_list,
    NegotiateContext, Severity, ToolListContext, Violation,
};
use cetp_proto::discovery::{check_same_package, parse_declared, plan, Plan};
use cetp_proto::envelope::{Capability, Method, NegotiateRequest, Response, V1Response};
use cetp_proto::provider::ServiceManifest;
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use cetp_proto::Bundle;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn protocol(provider: &str, method: &'static str, violations: Vec<Violation>) -> ConsumerError {
    ConsumerError::Protocol(ProtocolFault {
        provider: provider.to_string(),
        method,
        violations,
    })
}

/// The mutant `unknown_members_refused`: a tool descriptor member this
/// Consumer does not know is refused, although §3.2 lets it be ignored.
fn refuse_unknown_members(raw_tools: &[Json], label: &str) -> Result<(), ConsumerError> {
    const KNOWN: [&str; 7] = [
        "name",
        "title",
        "description",
        "input_schema",
        "output_schema",
        "scopes",
        "annotations",
    ];
    let unknown = raw_tools.iter().enumerate().find_map(|(i, t)| {
        t.as_object()?
            .keys()
            .find(|k| !KNOWN.contains(&k.as_str()))
            .map(|k| format!("/tools/{i}/{k}"))
    });
    match unknown {
        Some(at) => Err(ConsumerError::violation(
            label,
            Method::ListTools.as_str(),
            "descriptor.member.unknown",
            "3.2",
            format!("unknown member at {at}"),
        )),
        None => Ok(()),
    }
}

/// Each tool's compiled output schema, reused from the previous list when
/// the revision and the descriptor are the same (§3.3).
fn output_schemas(
    label: &str,
    tools: &[ToolInfo],
    reuse: Option<&ToolCache>,
    dialect: &str,
) -> Result<BTreeMap<String, Arc<CompiledSchema>>, ConsumerError> {
    let mut output_schemas = BTreeMap::new();
    for t in tools {
        let cached = reuse.and_then(|p| {
            let same = p.catalog.get(&t.name).map(|old| &old.descriptor) == Some(&t.descriptor);
            same.then(|| p.output_schemas.get(&t.name).cloned())
                .flatten()
        });
        let compiled = match cached {
            Some(c) => c,
            None => Arc::new(
                CompiledSchema::compile(&t.descriptor.output_schema, dialect).map_err(|e| {
                    ConsumerError::violation(
                        label,
                        Method::ListTools.as_str(),
                        "schema.compiles",
                        "3.3",
                        e,
                    )
                })?,
            ),
        };
        output_schemas.insert(t.name.clone(), compiled);
    }
    Ok(output_schemas)
}

fn must_only(violations: Vec<Violation>) -> (Vec<Violation>, Vec<Violation>) {
    violations
        .into_iter()
        .partition(|v| v.severity == Severity::Must)
}

impl Consumer {
    /// §2.1: finds the Provider services on the device, parses their version
    /// declarations, enforces that the service and the ContentProvider of its
    /// authority belong to one package, and decides per §8 what may be used.
    /// Providers already known keep their sessions.
    pub fn discover(
        &mut self,
        port: &mut dyn ConsumerPort,
    ) -> Result<DiscoveryReport, ConsumerError> {
        let manifests = port.discover().map_err(|e| {
            ConsumerError::Device(DeviceFault {
                provider: None,
                op: "discover".into(),
                request_id: None,
                error: e,
            })
        })?;
        let lim = self.config.limits.clone();
        let mut report = DiscoveryReport::default();
        for m in manifests {
            match self.screen_service(&m, &lim, &report.providers) {
                Ok(found) => {
                    self.remember_provider(&found);
                    report.providers.push(found);
                }
                Err(reason) => report.rejected.push(RejectedService {
                    package: ProviderText::truncated(&m.package, lim.max_name_bytes)
                        .as_str()
                        .to_string(),
                    service: ProviderText::truncated(&m.service, lim.max_name_bytes)
                        .as_str()
                        .to_string(),
                    reason,
                }),
            }
        }
        Ok(report)
    }

    /// One discovered service, checked the way `discover` promises (§2.1:
    /// local limits, version meta-data, one package, a usable plan per §8,
    /// one service per authority): the Provider it offers, or why it is
    /// turned down. Kept apart from `discover` so that each check is one
    /// early return. `accepted` are the services accepted so far.
    fn screen_service(
        &self,
        m: &ServiceManifest,
        lim: &LocalLimits,
        accepted: &[DiscoveredProvider],
    ) -> Result<DiscoveredProvider, String> {
        if accepted.len() >= lim.max_items {
            return Err(format!("more than {} Provider services", lim.max_items));
        }
        let too_long = [
            ("package", m.package.len()),
            ("service", m.service.len()),
            (
                "authority",
                m.meta
                    .get(cetp_proto::discovery::META_AUTHORITY)
                    .map_or(0, String::len),
            ),
        ]
        .into_iter()
        .find(|(_, len)| *len > lim.max_name_bytes);
        if let Some((what, len)) = too_long {
            return Err(format!(
                "{what} is {len} bytes, over the local limit {}",
                lim.max_name_bytes
            ));
        }
        let mut declared = match parse_declared(&m.meta) {
            Ok(d) => d,
            Err(e) => return Err(e.to_string()),
        };
        if let (Some(v), true) = (
            declared.legacy_version,
            self.has(ConsumerMutant::LegacyVersionMetaUsed),
        ) {
            declared.versions = BTreeSet::from([v]);
        }
        if declared.source == cetp_proto::discovery::VersionSource::Version
            && self.has(ConsumerMutant::LegacyVersionAsV2)
        {
            declared.versions.insert(2);
        }
        if let Err(e) = check_same_package(m) {
            if !self.has(ConsumerMutant::SamePackageNotChecked) {
                return Err(format!("§2.1: {e}"));
            }
        }
        let p = plan(&declared, &self.config.versions);
        if let Plan::Unusable(why) = &p {
            return Err(why.clone());
        }
        if accepted.iter().any(|d| d.authority == declared.authority) {
            return Err(format!(
                "authority {:?} is already declared by another service",
                declared.authority
            ));
        }
        Ok(DiscoveredProvider {
            package: m.package.clone(),
            service: m.service.clone(),
            authority: declared.authority.clone(),
            versions: declared.versions.clone(),
            plan: p,
        })
    }

    /// Records an accepted service among the known Providers: a Provider
    /// already known keeps its session and mode unless its declaration
    /// changed what was decided on it.
    fn remember_provider(&mut self, found: &DiscoveredProvider) {
        match self
            .providers
            .iter_mut()
            .find(|e| e.found.package == found.package && e.found.authority == found.authority)
        {
            Some(entry) => {
                // A changed declaration invalidates what was decided on
                // the old one, but never re-enables a disabled Provider.
                if entry.found.plan != found.plan && !matches!(entry.mode, Mode::Disabled(_)) {
                    entry.mode = Mode::Undecided;
                }
                entry.found = found.clone();
            }
            None => self.providers.push(ProviderEntry {
                found: found.clone(),
                mode: Mode::Undecided,
            }),
        }
    }

    /// Starts using a discovered Provider (by package, authority or
    /// provider_id): negotiates when v2 is declared (§2.2), and uses v1 only
    /// when it is not (§8). A Provider whose v2 negotiation failed stays
    /// disabled: there is no fallback to v1. Connecting again renegotiates.
    pub fn connect(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider: &str,
    ) -> Result<Connected, ConsumerError> {
        let idx = self.index_of(provider)?;
        let entry = &self.providers[idx];
        if let Mode::Disabled(reason) = &entry.mode {
            return Err(ConsumerError::refused(Refusal::Disabled {
                provider: entry.found.package.clone(),
                reason: reason.clone(),
            }));
        }
        match entry.found.plan.clone() {
            Plan::NegotiateV2 => {
                if self.has(ConsumerMutant::NoNegotiateFirst) {
                    let authority = entry.found.authority.clone();
                    let probe = cetp_proto::envelope::Common {
                        session_token: String::new(),
                        request_id: self.fresh_request_id(),
                        deadline_at_ms: port.now_ms().saturating_add(30_000),
                    }
                    .to_bundle();
                    let _ = port.call(
                        &authority,
                        Method::GetProviderInfo.as_str(),
                        None,
                        Some(&probe),
                        self.config.request_budget_ms.max(1),
                    );
                }
                self.negotiate_at(port, idx)?;
                match &self.providers[idx].mode {
                    Mode::V2(st) => Ok(Connected {
                        provider_id: st.session.provider_id.clone(),
                        version: 2,
                        capabilities: st.session.capabilities.clone(),
                    }),
                    _ => Err(ConsumerError::refused(Refusal::NotV2 {
                        provider: provider.to_string(),
                    })),
                }
            }
            Plan::UseV1 => {
                let package = entry.found.package.clone();
                self.providers[idx].mode = Mode::V1 { tools: None };
                Ok(Connected {
                    provider_id: package,
                    version: 1,
                    capabilities: BTreeSet::new(),
                })
            }
            Plan::Unusable(reason) => Err(ConsumerError::refused(Refusal::Undiscoverable {
                package: entry.found.package.clone(),
                reason,
            })),
        }
    }

    fn offered_versions(&self) -> Vec<i32> {
        let mut v = self.config.versions.clone();
        v.sort_unstable_by(|a, b| b.cmp(a));
        if self.has(ConsumerMutant::VersionsAscending) {
            v.reverse();
        }
        v.dedup();
        v
    }

    fn offered_capabilities(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.config
            .capabilities
            .iter()
            .filter(|c| seen.insert(**c))
            .map(|c| c.as_str().to_string())
            .collect()
    }

    /// Negotiates (or renegotiates) with Provider `idx`. §8: when the
    /// Provider broke the protocol or refused, it is disabled for good; a
    /// device failure leaves it as it was.
    pub(super) fn negotiate_at(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
    ) -> Result<(), ConsumerError> {
        let mut result = self.negotiate_inner(port, idx);
        if result.is_ok() && self.takes(ConsumerVariant::EagerToolList) {
            let budget = self.budget(port);
            result = self.refresh_tools(port, idx, &budget);
        }
        if let Err(e @ (ConsumerError::Protocol(_) | ConsumerError::Cetp(_))) = &result {
            self.providers[idx].mode = if self.has(ConsumerMutant::V1FallbackAfterFailedNegotiation)
                && self.providers[idx].found.versions.contains(&1)
            {
                Mode::V1 { tools: None }
            } else {
                Mode::Disabled(format!("§8: v2 negotiation failed, no fallback to v1: {e}"))
            };
        }
        result
    }

    fn negotiate_inner(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
    ) -> Result<(), ConsumerError> {
        let label = self.providers[idx].label();
        let request = NegotiateRequest {
            consumer_versions: self.offered_versions(),
            consumer_capabilities: self.offered_capabilities(),
        };
        let data = self.negotiate_exchange(port, idx, &request, &label)?;
        let previous = match &self.providers[idx].mode {
            Mode::V2(st) => Some((st.session.provider_id.clone(), st.session.generation)),
            _ => None,
        };
        let judged = self.judge_negotiation(idx, &label, &request, &data, &previous)?;
        let session = self.new_session(port.now_ms(), idx, &label, &data, judged, &previous)?;
        self.install_session(idx, session);
        Ok(())
    }

    /// Sends negotiate until it has a success, retrying as §5 allows; an
    /// `accepted` or a final error ends the negotiation.
    fn negotiate_exchange(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        request: &NegotiateRequest,
        label: &str,
    ) -> Result<Json, ConsumerError> {
        let budget = self.budget(port);
        let name = Method::Negotiate.as_str();
        let mut extras = request.to_bundle();
        if self.has(ConsumerMutant::CapabilitiesAsStringArray) {
            extras.insert(
                cetp_proto::envelope::keys::CONSUMER_CAPABILITIES,
                cetp_proto::Value::StringArray(request.consumer_capabilities.clone()),
            );
        }
        let mut tries = 0u32;
        loop {
            let b = self.call_plain(port, idx, name, &extras, &budget)?;
            match Response::from_bundle(&b).map_err(|e| {
                ConsumerError::violation(label, name, "response.envelope", "5", e.message)
            })? {
                Response::Success { data, .. } => return Ok(data),
                Response::Accepted { .. } => {
                    return Err(ConsumerError::violation(
                        label,
                        name,
                        "response.accepted.method",
                        "4.4",
                        "negotiate answered status \"accepted\"",
                    ))
                }
                Response::Error(env) => {
                    let code = self.check_error(label, name, &env)?;
                    if self.retry_after(
                        port,
                        Site {
                            provider: label,
                            method: name,
                        },
                        code,
                        &env,
                        &mut tries,
                        &budget,
                    )? {
                        continue;
                    }
                    return Err(self.cetp_error(label, name, code, &env));
                }
            }
        }
    }

    /// The negotiate answer against §2.2, §3.1 and §8: its MUST violations
    /// refuse it, its SHOULD ones are kept as warnings.
    fn judge_negotiation(
        &self,
        idx: usize,
        label: &str,
        request: &NegotiateRequest,
        data: &Json,
        previous: &Option<(String, u64)>,
    ) -> Result<(cetp_proto::descriptor::Negotiated, Vec<Violation>), ConsumerError> {
        let name = Method::Negotiate.as_str();
        let entry = &self.providers[idx];
        let (n, violations) = validate_negotiate(
            data,
            &NegotiateContext {
                consumer_versions: &request.consumer_versions,
                consumer_capabilities: &request.consumer_capabilities,
                provider_versions: Some(&entry.found.versions),
                package: Some(&entry.found.package),
            },
        );
        let (mut musts, warnings) = must_only(violations);
        if musts.is_empty() && n.selected_version != 2 {
            musts.push(Violation::must(
                "negotiate.version.v2",
                "8",
                "/selected_version".into(),
                format!(
                    "both sides declare v2 but version {} was selected",
                    n.selected_version
                ),
            ));
        }
        if let Some((old_id, _)) = previous {
            if *old_id != n.provider_id {
                musts.push(Violation::must(
                    "provider_id.stable",
                    "3.1",
                    "/provider_id".into(),
                    format!(
                        "provider_id changed from {old_id:?} to {:?}",
                        ProviderText::truncated(&n.provider_id, 64).as_str()
                    ),
                ));
            }
        }
        if !musts.is_empty() {
            return Err(protocol(label, name, musts));
        }
        Ok((n, warnings))
    }

    /// The session a valid negotiation opens: its texts bounded, its
    /// provider_id not another Provider's (§3.1).
    fn new_session(
        &self,
        now_ms: i64,
        idx: usize,
        label: &str,
        data: &Json,
        (n, warnings): (cetp_proto::descriptor::Negotiated, Vec<Violation>),
        previous: &Option<(String, u64)>,
    ) -> Result<Session, ConsumerError> {
        let lim = &self.config.limits;
        self.check_text(label, "/provider_id", &n.provider_id, lim.max_name_bytes)?;
        let provider_name = match data.get("provider_name").and_then(Json::as_str) {
            Some(s) => {
                self.check_text(label, "/provider_name", s, lim.max_name_bytes)?;
                Some(ProviderText::checked(s))
            }
            None => None,
        };
        if let Some(other) = self.providers.iter().enumerate().find(|(i, p)| {
            *i != idx && matches!(&p.mode, Mode::V2(st) if st.session.provider_id == n.provider_id)
        }) {
            return Err(ConsumerError::refused(Refusal::DuplicateProviderId {
                provider_id: n.provider_id.clone(),
                package: other.1.found.package.clone(),
            }));
        }
        Ok(Session {
            provider_id: n.provider_id.clone(),
            provider_name,
            selected_version: n.selected_version,
            capabilities: n
                .capabilities
                .iter()
                .filter_map(|c| Capability::parse(c))
                .collect(),
            limits: n.limits.clone(),
            negotiated_at_ms: now_ms,
            expires_at_ms: data
                .get("expires_at")
                .and_then(Json::as_str)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_millis()),
            generation: previous.as_ref().map_or(1, |(_, g)| g + 1),
            warnings,
            token: n.session_token.clone(),
        })
    }

    /// Puts a new session in place: info and tools survive a renegotiation;
    /// the tool list is re-checked for the new generation before it is
    /// trusted again (§3.3).
    fn install_session(&mut self, idx: usize, session: Session) {
        let stale = self.has(ConsumerMutant::StaleTokenAfterRenegotiation);
        let entry = &mut self.providers[idx];
        match &mut entry.mode {
            Mode::V2(st) => {
                let old = std::mem::replace(&mut st.session, session);
                if stale {
                    st.session.token = old.token;
                }
            }
            other => {
                *other = Mode::V2(Box::new(V2State {
                    session,
                    info: None,
                    tools: None,
                }))
            }
        }
    }

    pub(super) fn check_text(
        &self,
        provider: &str,
        at: &str,
        text: &str,
        limit: usize,
    ) -> Result<(), ConsumerError> {
        if text.len() > limit && !self.has(ConsumerMutant::TextLengthUnbounded) {
            return Err(ConsumerError::refused(Refusal::TextTooLong {
                provider: provider.to_string(),
                at: at.to_string(),
                bytes: text.len(),
                limit,
            }));
        }
        Ok(())
    }

    fn check_count(&self, provider: &str, at: &str, count: usize) -> Result<(), ConsumerError> {
        let limit = self.config.limits.max_items;
        if count > limit {
            return Err(ConsumerError::refused(Refusal::TooManyItems {
                provider: provider.to_string(),
                at: at.to_string(),
                count,
                limit,
            }));
        }
        Ok(())
    }

    /// A read-only v2 method (§4.1: a fresh request id per read, kept across
    /// its retries) whose success data is returned.
    fn read_v2(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        method: Method,
        budget: &Budget,
    ) -> Result<Json, ConsumerError> {
        let mut request_id = self.fresh_request_id();
        if self.has(ConsumerMutant::ReadReusesRequestId) {
            request_id = self.first_read_id.get_or_insert(request_id).clone();
        }
        let answer = self.call_v2(
            port,
            idx,
            &V2Call {
                method,
                request_id: &request_id,
                fields: Vec::new(),
                keep_result_fd: false,
            },
            budget,
        )?;
        let label = self.providers[idx].label();
        match answer.response {
            Response::Success { data, .. } => Ok(data),
            Response::Error(env) => {
                let code = self.check_error(&label, method.as_str(), &env)?;
                Err(self.cetp_error(&label, method.as_str(), code, &env))
            }
            Response::Accepted { .. } => Err(ConsumerError::accepted_outside_execute(
                &label,
                method.as_str(),
            )),
        }
    }

    /// `get_provider_info` (§3.2), validated: the provider_id must be the
    /// negotiated one, scopes well-formed, text within local limits.
    pub fn provider_info(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider: &str,
    ) -> Result<ProviderInfo, ConsumerError> {
        let idx = self.index_of(provider)?;
        let budget = self.budget(port);
        let data = self.read_v2(port, idx, Method::GetProviderInfo, &budget)?;
        let label = self.providers[idx].label();
        let name = Method::GetProviderInfo.as_str();
        let (summary, violations) =
            validate_provider_info(&data, Some(&self.providers[idx].found.package));
        let (mut musts, _) = must_only(violations);
        if summary.provider_id != label && !summary.provider_id.is_empty() {
            musts.push(Violation::must(
                "provider_id.stable",
                "3.1",
                "/provider_id".into(),
                format!(
                    "provider_id {:?} differs from the negotiated {label:?}",
                    ProviderText::truncated(&summary.provider_id, 64).as_str()
                ),
            ));
        }
        if !musts.is_empty() {
            return Err(protocol(&label, name, musts));
        }
        let lim = self.config.limits.clone();
        let text = |key: &str| data.get(key).and_then(Json::as_str).unwrap_or_default();
        self.check_text(
            &label,
            "/provider_name",
            text("provider_name"),
            lim.max_name_bytes,
        )?;
        self.check_text(
            &label,
            "/description",
            text("description"),
            lim.max_description_bytes,
        )?;
        let raw_scopes = data
            .get("scopes")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        self.check_count(&label, "/scopes", raw_scopes.len())?;
        let mut scopes = Vec::with_capacity(raw_scopes.len());
        for (i, s) in raw_scopes.iter().enumerate() {
            let field = |k: &str| s.get(k).and_then(Json::as_str);
            let title = field("title");
            let description = field("description");
            if let Some(t) = title {
                self.check_text(&label, &format!("/scopes/{i}/title"), t, lim.max_name_bytes)?;
            }
            if let Some(d) = description {
                self.check_text(
                    &label,
                    &format!("/scopes/{i}/description"),
                    d,
                    lim.max_description_bytes,
                )?;
            }
            scopes.push(ScopeInfo {
                name: field("name").unwrap_or_default().to_string(),
                title: title.map(ProviderText::checked),
                description: description.map(ProviderText::checked),
                access: field("access").unwrap_or_default().to_string(),
                sensitivity: field("sensitivity").unwrap_or_default().to_string(),
            });
        }
        let info = ProviderInfo {
            provider_id: summary.provider_id,
            provider_name: ProviderText::checked(text("provider_name")),
            description: ProviderText::checked(text("description")),
            schema_dialect: summary.schema_dialect,
            scopes,
        };
        if let Mode::V2(st) = &mut self.providers[idx].mode {
            st.info = Some(info.clone());
        }
        Ok(info)
    }

    /// `list_tools` (§3.3), validated against the negotiated capabilities and
    /// the scope catalog (when provider info was fetched), text bounded.
    /// Output schemas are compiled once per revision.
    pub fn list_tools(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider: &str,
    ) -> Result<ToolCatalog, ConsumerError> {
        let idx = self.index_of(provider)?;
        let budget = self.budget(port);
        self.refresh_tools(port, idx, &budget)?;
        match &self.providers[idx].mode {
            Mode::V2(st) => st.tools.as_ref().map(|t| t.catalog.clone()).ok_or_else(|| {
                ConsumerError::refused(Refusal::NotV2 {
                    provider: provider.to_string(),
                })
            }),
            _ => Err(ConsumerError::refused(Refusal::NotV2 {
                provider: provider.to_string(),
            })),
        }
    }

    /// Fetches the tool list unless it was already checked in the current
    /// negotiation generation (§3.3: at least once per new negotiation).
    pub(super) fn ensure_tools(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        budget: &Budget,
    ) -> Result<(), ConsumerError> {
        let fresh = match &self.providers[idx].mode {
            Mode::V2(st) => st.tools.as_ref().is_some_and(|t| {
                t.checked_generation == st.session.generation
                    || self.has(ConsumerMutant::ToolListNotRechecked)
            }),
            _ => false,
        };
        if fresh {
            Ok(())
        } else {
            self.refresh_tools(port, idx, budget)
        }
    }

    fn refresh_tools(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        budget: &Budget,
    ) -> Result<(), ConsumerError> {
        let data = self.read_v2(port, idx, Method::ListTools, budget)?;
        let label = self.providers[idx].label();
        let name = Method::ListTools.as_str();
        let Mode::V2(st) = &self.providers[idx].mode else {
            return Err(ConsumerError::refused(Refusal::NotV2 { provider: label }));
        };
        let negotiated: BTreeSet<String> = st
            .session
            .capabilities
            .iter()
            .map(|c| c.as_str().to_string())
            .collect();
        // The mutant takes every capability for granted, so it also lets a
        // sync_or_async tool through without async_operations.
        let negotiated = if self.has(ConsumerMutant::CapabilityNotNegotiatedUsed) {
            Capability::ALL
                .iter()
                .map(|c| c.as_str().to_string())
                .collect()
        } else {
            negotiated
        };
        let known_scopes: Option<BTreeSet<String>> = st
            .info
            .as_ref()
            .map(|i| i.scopes.iter().map(|s| s.name.clone()).collect());
        let dialect = st
            .info
            .as_ref()
            .map_or(DEFAULT_DIALECT.to_string(), |i| i.schema_dialect.clone());
        let generation = st.session.generation;
        let raw_tools = data
            .get("tools")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        // Counted before validation: validating compiles every schema.
        self.check_count(&label, "/tools", raw_tools.len())?;
        if self.has(ConsumerMutant::UnknownMembersRefused) {
            refuse_unknown_members(&raw_tools, &label)?;
        }
        let (list, violations) = validate_tool_list(
            &data,
            &ToolListContext {
                negotiated: &negotiated,
                known_scopes: known_scopes.as_ref(),
                dialect: &dialect,
            },
        );
        let (musts, _) = must_only(violations);
        if !musts.is_empty() {
            return Err(protocol(&label, name, musts));
        }
        let max_name = self.config.limits.max_name_bytes;
        self.check_text(&label, "/revision", &list.revision, max_name)?;
        let tools = self.tool_infos(&label, list.tools, &raw_tools)?;
        let previous = match &mut self.providers[idx].mode {
            Mode::V2(st) => st.tools.take(),
            _ => None,
        };
        let reuse = previous.filter(|p| p.catalog.revision == list.revision);
        let output_schemas = output_schemas(&label, &tools, reuse.as_ref(), &dialect)?;
        let cache = ToolCache {
            checked_generation: generation,
            catalog: ToolCatalog {
                provider_id: label,
                revision: list.revision,
                tools,
            },
            output_schemas,
        };
        if let Mode::V2(st) = &mut self.providers[idx].mode {
            st.tools = Some(cache);
        }
        Ok(())
    }

    /// The listed tools with their titles and descriptions bounded (§7.3);
    /// with no violation, validation kept every tool, in order.
    fn tool_infos(
        &self,
        label: &str,
        summaries: Vec<cetp_proto::descriptor::ToolSummary>,
        raw_tools: &[Json],
    ) -> Result<Vec<ToolInfo>, ConsumerError> {
        let lim = &self.config.limits;
        let mut tools = Vec::with_capacity(summaries.len());
        for (i, (summary, raw)) in summaries.into_iter().zip(raw_tools.iter()).enumerate() {
            let title = raw.get("title").and_then(Json::as_str);
            let description = raw
                .get("description")
                .and_then(Json::as_str)
                .unwrap_or_default();
            if let Some(t) = title {
                self.check_text(label, &format!("/tools/{i}/title"), t, lim.max_name_bytes)?;
            }
            self.check_text(
                label,
                &format!("/tools/{i}/description"),
                description,
                lim.max_description_bytes,
            )?;
            tools.push(ToolInfo {
                name: summary.name.clone(),
                title: title.map(ProviderText::checked),
                description: ProviderText::checked(description),
                descriptor: summary,
            });
        }
        Ok(tools)
    }

    /// The tool names of a Provider used through v1 (§8: v1 is read-only).
    pub fn list_v1_tools(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider: &str,
    ) -> Result<Vec<String>, ConsumerError> {
        let idx = self.index_of(provider)?;
        let budget = self.budget(port);
        self.v1_tools(port, idx, &budget)
    }

    pub(super) fn v1_tools(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        budget: &Budget,
    ) -> Result<Vec<String>, ConsumerError> {
        let label = self.providers[idx].label();
        match &self.providers[idx].mode {
            Mode::V1 { tools: Some(t) } => return Ok(t.clone()),
            Mode::V1 { tools: None } => {}
            Mode::Disabled(reason) => {
                return Err(ConsumerError::refused(Refusal::Disabled {
                    provider: label,
                    reason: reason.clone(),
                }))
            }
            Mode::Undecided => {
                return Err(ConsumerError::refused(Refusal::NotConnected {
                    provider: label,
                }))
            }
            Mode::V2(_) => return Err(ConsumerError::refused(Refusal::NotV2 { provider: label })),
        }
        let name = "list_tools";
        let b = self.call_plain(port, idx, name, &Bundle::new(), budget)?;
        let data = match V1Response::from_bundle(&b).map_err(|e| {
            ConsumerError::violation(&label, name, "response.envelope", "8", e.message)
        })? {
            V1Response::Success(data) => data,
            V1Response::Error { code, message } => {
                return Err(self.v1_error(&label, name, &code, &message))
            }
        };
        let (names, violations) = validate_v1_tool_list(&data);
        let (musts, _) = must_only(violations);
        if !musts.is_empty() {
            return Err(protocol(&label, name, musts));
        }
        self.check_count(&label, "/tools", names.len())?;
        for (i, n) in names.iter().enumerate() {
            self.check_text(
                &label,
                &format!("/tools/{i}/name"),
                n,
                self.config.limits.max_name_bytes,
            )?;
        }
        if let Mode::V1 { tools } = &mut self.providers[idx].mode {
            *tools = Some(names.clone());
        }
        Ok(names)
    }

    pub(super) fn v1_error(
        &self,
        provider: &str,
        method: &'static str,
        code: &str,
        message: &str,
    ) -> ConsumerError {
        let Some(known) = cetp_proto::ErrorCode::parse(code)
            .filter(|_| cetp_proto::error::V1_ERROR_CODES.contains(&code))
        else {
            return ConsumerError::violation(
                provider,
                method,
                "error.code.known",
                "8",
                format!(
                    "{:?} is not a v1 error code",
                    ProviderText::truncated(code, 64).as_str()
                ),
            );
        };
        ConsumerError::Cetp(Box::new(super::CetpError {
            provider: provider.to_string(),
            method,
            code: known,
            message: ProviderText::truncated(message, self.config.limits.max_message_bytes),
            retryable: false,
            request_id: None,
            retry_after_ms: None,
            details: None,
        }))
    }
}
