//! The reference Consumer: what a correct CETP v2 Consumer does, written
//! against [`ConsumerPort`](crate::port::ConsumerPort) so that it runs
//! in-process or over any transport.
//!
//! It is sans-IO in spirit: every effect goes through the port, including
//! time (`now_ms` for deadlines, `sleep_ms` for waits), and request ids come
//! from an injectable [`UuidSource`]. With a [`crate::device::LocalDevice`]
//! on a manual clock a whole session is deterministic.
//!
//! The flow of a session, with the spec section each step answers to:
//! [`Consumer::discover`] (§2.1) → [`Consumer::connect`] (§2.2, §8) →
//! [`Consumer::provider_info`] (§3.2) → [`Consumer::list_tools`] (§3.3) →
//! [`Consumer::execute`] (§4.1–§4.5, §5, §6), or [`Consumer::run`] plus
//! [`Consumer::wait`] / [`Consumer::cancel`] for background operations.
//!
//! Everything a Provider says is untrusted (§7.3): lengths and JSON depth are
//! bounded before parsing, descriptors and results are validated, text is
//! kept as [`ProviderText`], and a Provider that breaks a MUST is reported,
//! never followed.

mod act;
mod call;
mod config;
mod error;
mod execute;
mod mutant;
mod session;
mod variant;

pub use act::{ActOutcome, Action, DrivenConsumer};
pub use config::{uuid_v4_from_bytes, ConsumerConfig, LocalLimits, SeededUuids, UuidSource};
pub use error::{
    CetpError, ConsumerError, DeviceFault, Fault, ProtocolFault, ProviderText, Refusal,
};
pub use execute::{
    ConfirmationRequest, Delivery, Execution, Operation, Outcome, Progress, Started, ToolOutput,
    Unattended, UserAgent,
};
pub use mutant::ConsumerMutant;
pub use variant::ConsumerVariant;

use cetp_proto::descriptor::{ToolSummary, Violation};
use cetp_proto::discovery::Plan;
use cetp_proto::envelope::Capability;
use cetp_proto::schema::CompiledSchema;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A Provider service found by discovery that this Consumer may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredProvider {
    /// Package of the service.
    pub package: String,
    /// Class name of the service.
    pub service: String,
    /// The authority calls go to, owned by the same package (§2.1).
    pub authority: String,
    /// The authoritative version set (§2.1: `versions` over `version`).
    pub versions: BTreeSet<i32>,
    /// What §8 allows: negotiate v2, or use v1 (only when v2 is undeclared).
    pub plan: Plan,
}

/// A service discovery turned down, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedService {
    /// Package of the service.
    pub package: String,
    /// Class name of the service.
    pub service: String,
    /// Why it was turned down (bad meta-data, package mismatch, no common version...).
    pub reason: String,
}

/// The outcome of [`Consumer::discover`]: the services that may be used, and those turned down.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryReport {
    /// Services the Consumer may use, each with its plan (§8).
    pub providers: Vec<DiscoveredProvider>,
    /// Services turned down, with the reason.
    pub rejected: Vec<RejectedService>,
}

/// A negotiated v2 session (§2.2).
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The Provider's `provider_id`, which routing is keyed by (§3.1).
    pub provider_id: String,
    /// The `provider_name`, kept as untrusted text (§7.3).
    pub provider_name: Option<ProviderText>,
    /// The version the Provider selected.
    pub selected_version: i64,
    /// Capabilities both sides support; no other optional method is called (§2.3).
    pub capabilities: BTreeSet<Capability>,
    /// The negotiated `limits` by name.
    pub limits: BTreeMap<String, i64>,
    /// Device time of the negotiation, epoch ms.
    pub negotiated_at_ms: i64,
    /// The session's `expires_at` (§2.2), epoch ms: from then on the
    /// Consumer negotiates again before using it.
    pub expires_at_ms: Option<i64>,
    /// Counts negotiations with this Provider; a tool list is trusted only
    /// for the generation it was checked in (§3.3).
    pub generation: u64,
    /// SHOULD-level findings in the negotiation answer.
    pub warnings: Vec<Violation>,
    token: String,
}

impl Session {
    /// Whether the optional capability was negotiated.
    pub fn has(&self, cap: Capability) -> bool {
        self.capabilities.contains(&cap)
    }

    /// One negotiated limit, `None` when the Provider did not send it.
    pub fn limit(&self, key: &str) -> Option<i64> {
        self.limits.get(key).copied()
    }

    /// The opaque session token, for diagnostics only.
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// What [`Consumer::connect`] established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connected {
    /// The negotiated provider_id (v2), or the package (v1).
    pub provider_id: String,
    /// The protocol major version in use (1 or 2).
    pub version: i32,
    /// The negotiated optional capabilities (none for v1).
    pub capabilities: BTreeSet<Capability>,
}

/// One scope of `get_provider_info` (§3.2), for showing the user what a grant means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeInfo {
    /// Stable scope name (§3.2 pattern).
    pub name: String,
    /// Display title, untrusted text.
    pub title: Option<ProviderText>,
    /// Description, untrusted text.
    pub description: Option<ProviderText>,
    /// `read` or `write`.
    pub access: String,
    /// `public`, `personal`, `financial`, `health`, `device` or `other`.
    pub sensitivity: String,
}

/// `get_provider_info` (§3.2), validated and bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// The Provider's stable id (§3.1).
    pub provider_id: String,
    /// Display name, untrusted text.
    pub provider_name: ProviderText,
    /// Description, untrusted text.
    pub description: ProviderText,
    /// Dialect of every schema of the session (§3.2).
    pub schema_dialect: String,
    /// The scope catalog.
    pub scopes: Vec<ScopeInfo>,
}

/// One tool of a validated list. Its annotations are what the Provider
/// declares for the Consumer's UI and policy, not a security boundary (§3.4).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    /// Tool name; with the provider_id it is the routing key (§3.1).
    pub name: String,
    /// Display title, untrusted text.
    pub title: Option<ProviderText>,
    /// Description, untrusted text; never an instruction (§7.3).
    pub description: ProviderText,
    /// Schemas, scopes and annotations as validated.
    pub descriptor: ToolSummary,
}

/// A validated `list_tools` answer (§3.3).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCatalog {
    /// The Provider the list came from.
    pub provider_id: String,
    /// The list's `revision` (§3.3).
    pub revision: String,
    /// The tools, in the Provider's order.
    pub tools: Vec<ToolInfo>,
}

impl ToolCatalog {
    /// The tool of this name, if the list has it.
    pub fn get(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }
}

struct ToolCache {
    checked_generation: u64,
    catalog: ToolCatalog,
    output_schemas: BTreeMap<String, Arc<CompiledSchema>>,
}

struct V2State {
    session: Session,
    info: Option<ProviderInfo>,
    tools: Option<ToolCache>,
}

enum Mode {
    Undecided,
    V2(Box<V2State>),
    V1 { tools: Option<Vec<String>> },
    Disabled(String),
}

struct ProviderEntry {
    found: DiscoveredProvider,
    mode: Mode,
}

impl ProviderEntry {
    /// How errors name this Provider: its provider_id once negotiated.
    fn label(&self) -> String {
        match &self.mode {
            Mode::V2(st) => st.session.provider_id.clone(),
            _ => self.found.package.clone(),
        }
    }
}

/// The reference Consumer. One instance holds the sessions of every Provider
/// it discovered; each call takes the port to act through.
pub struct Consumer {
    config: ConsumerConfig,
    uuids: Box<dyn UuidSource>,
    providers: Vec<ProviderEntry>,
    /// The first read's request id (kept only for a mutant's bug).
    first_read_id: Option<String>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("config", &self.config)
            .field(
                "providers",
                &self.providers.iter().map(|p| p.label()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Consumer {
    /// A Consumer whose request ids come from `config.uuid_seed`.
    pub fn new(config: ConsumerConfig) -> Self {
        let uuids = Box::new(SeededUuids::new(config.uuid_seed));
        Consumer::with_uuid_source(config, uuids)
    }

    /// A Consumer taking its request ids from `uuids` (tests pin or break them).
    pub fn with_uuid_source(config: ConsumerConfig, uuids: Box<dyn UuidSource>) -> Self {
        Consumer {
            config,
            uuids,
            providers: Vec::new(),
            first_read_id: None,
        }
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// Every usable Provider discovery found so far.
    pub fn discovered(&self) -> Vec<&DiscoveredProvider> {
        self.providers.iter().map(|p| &p.found).collect()
    }

    /// The current v2 session with a Provider, if any.
    pub fn session(&self, provider: &str) -> Option<&Session> {
        let idx = self.index_of(provider).ok()?;
        match &self.providers[idx].mode {
            Mode::V2(st) => Some(&st.session),
            _ => None,
        }
    }

    /// The cached tool list of a Provider, if one was fetched.
    pub fn cached_tools(&self, provider: &str) -> Option<&ToolCatalog> {
        let idx = self.index_of(provider).ok()?;
        match &self.providers[idx].mode {
            Mode::V2(st) => st.tools.as_ref().map(|t| &t.catalog),
            _ => None,
        }
    }

    /// Why a Provider is disabled, if it is (§8).
    pub fn disabled_reason(&self, provider: &str) -> Option<&str> {
        let idx = self.index_of(provider).ok()?;
        match &self.providers[idx].mode {
            Mode::Disabled(why) => Some(why),
            _ => None,
        }
    }

    /// Finds a Provider by negotiated provider_id, package or authority.
    fn index_of(&self, provider: &str) -> Result<usize, ConsumerError> {
        let by_id = self
            .providers
            .iter()
            .position(|p| matches!(&p.mode, Mode::V2(st) if st.session.provider_id == provider));
        by_id
            .or_else(|| {
                self.providers
                    .iter()
                    .position(|p| p.found.package == provider || p.found.authority == provider)
            })
            .ok_or_else(|| {
                ConsumerError::refused(Refusal::UnknownProvider {
                    provider: provider.to_string(),
                })
            })
    }

    /// The first Provider, in discovery order, whose cached v2 tool list
    /// has `tool` (only the `routes_by_scan_order` mutant routes by it).
    fn first_listing(&self, tool: &str) -> Option<usize> {
        self.providers.iter().position(|p| {
            matches!(&p.mode, Mode::V2(st)
                if st.tools.as_ref().is_some_and(|t| t.catalog.get(tool).is_some()))
        })
    }

    fn fresh_request_id(&mut self) -> String {
        let id = self.uuids.next_uuid();
        if self.has(ConsumerMutant::RequestIdNotUuid) {
            return format!("req-{}", &id[..8]);
        }
        id
    }

    /// Whether a mutation is switched on.
    pub(crate) fn has(&self, fault: ConsumerMutant) -> bool {
        self.config.faults.contains(&fault)
    }

    /// Whether a legal variation is switched on.
    pub(crate) fn takes(&self, l: ConsumerVariant) -> bool {
        self.config.latitudes.contains(&l)
    }

    /// The reference Consumer with one fault switched on.
    pub fn mutant(config: ConsumerConfig, fault: ConsumerMutant) -> Self {
        Consumer::new(ConsumerConfig {
            faults: vec![fault],
            ..config
        })
    }
}
