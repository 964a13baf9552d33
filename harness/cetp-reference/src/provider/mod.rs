//! The reference CETP v2 Provider, and its mutants.
//!
//! [`ReferenceProvider`] implements all of v2 (§2-§6), the three optional
//! capabilities, and the read-only v1 view of a dual-stack Provider (§2.1,
//! §8). It is deterministic: every token comes from a generator seeded by
//! [`ProviderConfig::seed`] and every time from the `now_ms` a device passes
//! in; the only real time is the bounded wait of a caller whose request id is
//! already being executed by another thread.
//!
//! The engine (sessions, dedupe, confirmation, operations, durability) hosts
//! one of two apps, a [`FixtureSet`]: the reference app (quotes, alerts,
//! portfolio) or the notes app (`notes.rs`), whose tools, ids and async
//! policy have another shape, so that the suite is not tuned to one app.
//!
//! A mutant is the same Provider with one [`Mutant`] switched on
//! ([`ReferenceProvider::mutant`], [`ReferenceProvider::mutant_of`]);
//! `vectors/mutants/mutants.json` documents what each one breaks.
//!
//! State follows a real app's split: sessions and in-flight counters live in
//! memory and are lost by [`ProviderApp::restart`]; dedupe records,
//! operations, pending decisions, grants and business data are "durable"
//! and survive it. A mutation reserves its request id, then commits the
//! effect and its terminal result in one critical section (§10: reservation,
//! effect and result inside one reliable boundary).

mod args;
mod decisions;
pub mod described;
mod described_exec;
mod execute;
mod fixtures;
mod hostile;
pub mod mutant;
mod notes;
mod notes_model;
mod operations;
mod refusals;
mod respond;
mod session;
mod state;
mod tool;
mod util;
mod v1;
pub mod variant;

pub use described::{Business, BusinessAnswer, BusinessCall, Described, DescribedTool, Flavour};
pub use mutant::{Mutant, UnknownMutant};
pub use notes::{NOTES_AUTHORITY, NOTES_PACKAGE, NOTES_RESUME_TOKEN_TTL_MS, NOTES_UID};
pub use notes_model::ARCHIVE_BACKGROUND_OVER;
pub use variant::Variant;

use crate::app::ProviderApp;
use cetp_proto::discovery::{META_AUTHORITY, META_VERSION, META_VERSIONS};
use cetp_proto::envelope::{dialect_of, keys, Capability, Dialect, Method, V2Request};
use cetp_proto::provider::{
    CallerIdentity, Decision, IntentTarget, ProviderCall, Reply, ResolveOutcome, ServiceManifest,
};
use cetp_proto::{Bundle, ErrorCode, Value};
use fixtures::Catalog;
use state::{Answer, DurableState, Failure, Memory};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use util::lock;

/// Package of the reference Provider app.
pub const PACKAGE: &str = "com.clawseed.reference";
/// The authority of the reference Provider's ContentProvider (§2.1 meta-data).
pub const AUTHORITY: &str = "com.clawseed.reference.clawseed.tools";
/// The reference Provider's discoverable service component (§2.1).
pub const SERVICE: &str = "com.clawseed.reference/.cetp.ToolProviderService";
/// The normal permission guarding the service; an entry point only, never an identity (§7.1).
pub const ACCESS_PERMISSION: &str = "com.clawseed.permission.ACCESS_TOOLS";
/// Package that owns the authority in the mismatched-package manifest, and
/// that creates the PendingIntents of the foreign-PendingIntent mutant.
pub const IMPOSTOR_PACKAGE: &str = "com.clawseed.impostor";
/// UID of the reference Provider app (creator of its PendingIntents).
pub const PROVIDER_UID: u32 = 10050;
/// UID of caller identity "a" of the probe wire, which holds every scope by
/// default.
pub const FULL_ACCESS_UID: u32 = 10123;
/// The reference app's confirmation activity, target of USER_ACTION_REQUIRED resolutions (§4.3).
pub const CONFIRM_ACTIVITY: &str = "com.clawseed.reference/.ConfirmActivity";
/// The reference app's scope-grant activity, target of AUTH_REQUIRED resolutions (§4.3).
pub const GRANT_ACTIVITY: &str = "com.clawseed.reference/.GrantActivity";
/// Default session lifetime: an hour after negotiation.
pub const SESSION_TTL_MS: i64 = 3_600_000;
/// Default lifetime of a pending decision and its resume token: ten minutes.
pub const RESUME_TOKEN_TTL_MS: i64 = 600_000;
/// The `poll_after_ms` the reference app suggests for its operations (§4.4).
pub const POLL_AFTER_MS: i64 = 100;
/// `sync_portfolio` operations: queued until this age, then running.
pub const OPERATION_RUNNING_AFTER_MS: i64 = 50;
/// `sync_portfolio` operations finish at this age.
pub const OPERATION_DONE_AFTER_MS: i64 = 300;
/// Retry hint of RATE_LIMITED.
pub const RETRY_AFTER_MS: i64 = 100;
/// Retry hint of the UNAVAILABLE the unavailable_after_restart latitude
/// answers after a restart.
pub const WARM_UP_RETRY_AFTER_MS: i64 = 200;

/// The app the engine hosts: its tools, scopes, business state, and the
/// shapes of the ids and tokens it issues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FixtureSet {
    /// Quotes, price alerts, portfolio sync and trading history: an effect
    /// counter in `list_alerts`, deletes of absent alerts succeed, every
    /// `sync_portfolio` runs in the background.
    #[default]
    Reference,
    /// Notes (`notes.rs`): no effect counter, deleting an absent note is a
    /// business error, `archive_notes` runs in the background only for
    /// large inputs.
    Notes,
}

impl FixtureSet {
    /// Every fixture set, for parsing names and listing targets.
    pub const ALL: [FixtureSet; 2] = [FixtureSet::Reference, FixtureSet::Notes];

    /// The name targets and `mutants.json` use (`provider=notes`).
    pub fn name(self) -> &'static str {
        match self {
            FixtureSet::Reference => "reference",
            FixtureSet::Notes => "notes",
        }
    }

    /// The fixture set of this name (`reference`, `notes`); `None` for any other.
    pub fn parse(name: &str) -> Option<FixtureSet> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The package of the app with these fixtures.
    pub fn package(self) -> &'static str {
        match self {
            FixtureSet::Reference => PACKAGE,
            FixtureSet::Notes => NOTES_PACKAGE,
        }
    }

    /// The scopes of every tool of the set.
    pub fn all_scopes(self) -> BTreeSet<String> {
        fixtures::all_scopes(self)
    }

    /// The read scopes of the set (what unknown callers get by default).
    pub fn read_scopes(self) -> BTreeSet<String> {
        fixtures::read_scopes(self)
    }
}

impl fmt::Display for FixtureSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// [`ReferenceProvider::issued`], for code that has the latitudes but not
/// the Provider (the catalog's revision).
pub(crate) fn issued_string(latitudes: &BTreeSet<Variant>, s: String) -> String {
    if latitudes.contains(&Variant::TemplateSyntaxInIds) {
        // `${1}` is bound to nothing; `${s/data/session_token}` names a
        // session many cases bind: a harness that expanded it would send
        // another session's token in the Provider's string.
        format!("${{s/data/session_token}}${{1}}.{s}")
    } else {
        s
    }
}

/// The limits the Provider negotiates (§2.2) and enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest `args` accepted, UTF-8 bytes (§4.1).
    pub max_request_bytes: u64,
    /// Largest result sent inline; above it a file result or RESULT_TOO_LARGE (§4.5).
    pub max_inline_result_bytes: u64,
    /// How many calls may run at once.
    pub max_concurrent_requests: u64,
    /// How long dedupe records and operations are kept (§4.4, §6).
    pub idempotency_window_seconds: u64,
}

impl Limits {
    /// Exactly the §2.2 minimums, except four concurrent requests.
    pub const REFERENCE: Limits = Limits {
        max_request_bytes: 65_536,
        max_inline_result_bytes: 262_144,
        max_concurrent_requests: 4,
        idempotency_window_seconds: 86_400,
    };

    /// The notes app asks for more than the minimums: a longer window and
    /// bigger requests (a list of note ids to archive).
    pub const NOTES: Limits = Limits {
        max_request_bytes: 131_072,
        max_inline_result_bytes: 262_144,
        max_concurrent_requests: 8,
        idempotency_window_seconds: 172_800,
    };

    fn window_ms(&self) -> i64 {
        i64::try_from(self.idempotency_window_seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
    }
}

/// What the app's manifest declares (§2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ManifestVariant {
    /// `version=1`, `versions="1,2"`: v2 plus the read-only v1 view.
    #[default]
    DualStack,
    /// `version=2`, `versions="2"`.
    V2Only,
    /// `version=1` only: a v1 Provider.
    V1Only,
    /// `versions="1,2"` without the legacy `version=1` (a manifest defect:
    /// v1 Consumers cannot discover it).
    VersionsOnly,
    /// Dual-stack, but the authority's ContentProvider belongs to
    /// [`IMPOSTOR_PACKAGE`].
    MismatchedPackage,
}

impl ManifestVariant {
    /// Whether the app answers v1 calls: every manifest but v2-only.
    pub fn speaks_v1(self) -> bool {
        !matches!(self, ManifestVariant::V2Only)
    }
    /// Whether the app answers v2 calls: every manifest but v1-only.
    pub fn speaks_v2(self) -> bool {
        !matches!(self, ManifestVariant::V1Only)
    }
}

/// Performs the effect delay. The default does nothing (time is simulated);
/// a device that wants concurrent same-id calls to overlap for real passes
/// [`thread_sleeper`].
pub type Sleeper = Arc<dyn Fn(u64) + Send + Sync>;

/// A [`Sleeper`] that really sleeps the calling thread.
pub fn thread_sleeper() -> Sleeper {
    Arc::new(|ms| std::thread::sleep(std::time::Duration::from_millis(ms)))
}

/// Everything that shapes one reference Provider: the app it hosts, its identity and manifest, grants, limits, lifetimes, and the mutants or latitudes switched on.
#[derive(Clone)]
pub struct ProviderConfig {
    /// The app the engine hosts. The identity fields below are not derived
    /// from it: [`ProviderConfig::notes`] sets all of them.
    pub fixtures: FixtureSet,
    /// The app's package; `provider_id` must be it or under it (§3.1).
    pub package: String,
    /// The authority its ContentProvider answers on.
    pub authority: String,
    /// §3.1: defaults to the package name.
    pub provider_id: String,
    /// The `provider_name` of `negotiate` and `get_provider_info`.
    pub provider_name: String,
    /// The `description` of `get_provider_info` (§3.2).
    pub description: String,
    /// The app's own UID, written as creator of its PendingIntents.
    pub uid: u32,
    /// What the manifest declares (§2.1), which also decides the protocols answered.
    pub manifest: ManifestVariant,
    /// Seeds every token and id the Provider issues.
    pub seed: u64,
    /// Scopes granted per caller UID; see `default_grants` for the others.
    pub grants: BTreeMap<u32, BTreeSet<String>>,
    /// Scopes of callers not in `grants`.
    pub default_grants: BTreeSet<String>,
    /// The limits negotiated and enforced (§2.2).
    pub limits: Limits,
    /// Session lifetime (§2.2 allows expiry); shorten it to test expiry
    /// against a real clock.
    pub session_ttl_ms: i64,
    /// Lifetime of a pending decision and its resume token (§4.3).
    pub resume_token_ttl_ms: i64,
    /// Time a mutation takes between reservation and commit.
    pub effect_delay_ms: u64,
    /// Performs `effect_delay_ms`; see [`Sleeper`].
    pub sleeper: Sleeper,
    /// Publishes the next release of the tool catalog: `get_quote` accepts
    /// symbols of at most 16 characters instead of 32 (an incompatible
    /// input change) under a new revision, as §3.3 requires. A legal
    /// variant: `cetp drift` against a lock of the default catalog reports
    /// breaking drift and no violation.
    pub next_release: bool,
    /// Mutants switched on: each breaks one requirement, for the self-test (empty for the reference).
    pub faults: BTreeSet<Mutant>,
    /// Legal variants taken (`variant.rs`): each one a latitude the spec
    /// leaves, never a defect.
    pub latitudes: BTreeSet<Variant>,
    /// Host another Provider's published tools instead of the fixture set's
    /// (`described.rs`): the shadow `cetp fuzz` judges unknown Providers by.
    pub described: Option<Arc<Described>>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            fixtures: FixtureSet::Reference,
            package: PACKAGE.to_string(),
            authority: AUTHORITY.to_string(),
            provider_id: PACKAGE.to_string(),
            provider_name: "ClawSeed Reference".to_string(),
            description: "Quotes, price alerts, portfolio sync and trading history".to_string(),
            uid: PROVIDER_UID,
            manifest: ManifestVariant::DualStack,
            seed: 0,
            grants: BTreeMap::from([(
                FULL_ACCESS_UID,
                fixtures::all_scopes(FixtureSet::Reference),
            )]),
            default_grants: fixtures::read_scopes(FixtureSet::Reference),
            limits: Limits::REFERENCE,
            session_ttl_ms: SESSION_TTL_MS,
            resume_token_ttl_ms: RESUME_TOKEN_TTL_MS,
            effect_delay_ms: 0,
            sleeper: Arc::new(|_| {}),
            next_release: false,
            faults: BTreeSet::new(),
            latitudes: BTreeSet::new(),
            described: None,
        }
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("fixtures", &self.fixtures)
            .field("package", &self.package)
            .field("authority", &self.authority)
            .field("provider_id", &self.provider_id)
            .field("uid", &self.uid)
            .field("manifest", &self.manifest)
            .field("seed", &self.seed)
            .field("grants", &self.grants)
            .field("default_grants", &self.default_grants)
            .field("limits", &self.limits)
            .field("session_ttl_ms", &self.session_ttl_ms)
            .field("resume_token_ttl_ms", &self.resume_token_ttl_ms)
            .field("effect_delay_ms", &self.effect_delay_ms)
            .field("next_release", &self.next_release)
            .field("faults", &self.faults)
            .field("latitudes", &self.latitudes)
            .field("described", &self.described)
            .finish_non_exhaustive()
    }
}

impl ProviderConfig {
    /// This configuration taking `l`, with the settings the latitude implies
    /// (limits, manifest, provider id).
    pub fn with_latitude(mut self, l: Variant) -> Self {
        match l {
            Variant::GenerousLimits => {
                self.limits = Limits {
                    max_request_bytes: 1 << 20,
                    max_inline_result_bytes: 1 << 20,
                    max_concurrent_requests: 16,
                    idempotency_window_seconds: 7 * 86_400,
                }
            }
            Variant::SingleConcurrentRequest => self.limits.max_concurrent_requests = 1,
            Variant::V2OnlyManifest | Variant::V2OnlyV1CallsUnknown => {
                self.manifest = ManifestVariant::V2Only
            }
            Variant::ProviderIdCustom => self.provider_id = format!("{}.tools", self.package),
            // Room for the 1 MB trade note inline (§2.2 sets only a
            // minimum); the profile's large export still needs a file.
            Variant::HostileText => self.limits.max_inline_result_bytes = 1 << 20,
            Variant::InlineLimitFitsLargeResult | Variant::LargeResultInlineViaOperation => {
                self.limits.max_inline_result_bytes = 4 << 20
            }
            _ => {}
        }
        self.latitudes.insert(l);
        self
    }

    /// The notes app with its own identity, lifetimes and limits; identity
    /// a ([`FULL_ACCESS_UID`]) holds every notes scope.
    pub fn notes() -> ProviderConfig {
        let set = FixtureSet::Notes;
        ProviderConfig {
            fixtures: set,
            package: NOTES_PACKAGE.to_string(),
            authority: NOTES_AUTHORITY.to_string(),
            provider_id: NOTES_PACKAGE.to_string(),
            provider_name: "ClawSeed Notes".to_string(),
            description: "Your notes: write, archive and export them".to_string(),
            uid: NOTES_UID,
            grants: BTreeMap::from([(FULL_ACCESS_UID, set.all_scopes())]),
            default_grants: set.read_scopes(),
            limits: Limits::NOTES,
            session_ttl_ms: notes::NOTES_SESSION_TTL_MS,
            resume_token_ttl_ms: NOTES_RESUME_TOKEN_TTL_MS,
            ..ProviderConfig::default()
        }
    }

    /// The standard configuration of an app: [`ProviderConfig::default`] or
    /// [`ProviderConfig::notes`].
    pub fn of(set: FixtureSet) -> ProviderConfig {
        match set {
            FixtureSet::Reference => ProviderConfig::default(),
            FixtureSet::Notes => ProviderConfig::notes(),
        }
    }

    /// The scopes of every reference tool (for granting a caller everything).
    pub fn all_scopes() -> BTreeSet<String> {
        FixtureSet::Reference.all_scopes()
    }
    /// The reference read scopes (what callers get by default).
    pub fn read_scopes() -> BTreeSet<String> {
        FixtureSet::Reference.read_scopes()
    }
}

/// The app's database: survives restarts. The condition variable wakes callers
/// waiting for a request id another thread is executing.
pub(crate) struct Durable {
    pub state: Mutex<DurableState>,
    pub changed: Condvar,
}

/// The reference Provider: the oracle the harness judges against. It hosts a fixture set (or a described target), keeps durable state across restarts and memory that a restart loses, and can be configured into a mutant.
pub struct ReferenceProvider {
    cfg: ProviderConfig,
    catalog: Catalog,
    durable: Arc<Durable>,
    memory: Mutex<Memory>,
    /// Numbers the attachment handles of replies.
    handles: AtomicU64,
}

impl fmt::Debug for ReferenceProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReferenceProvider")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Default for ReferenceProvider {
    fn default() -> Self {
        ReferenceProvider::new(ProviderConfig::default())
    }
}

/// What a v2 method handler knows about its call.
pub(crate) struct Cx<'a> {
    pub uid: u32,
    pub now_ms: i64,
    pub extras: &'a Bundle,
    pub request_id: &'a str,
    pub deadline_at_ms: i64,
    pub caps: &'a BTreeSet<Capability>,
}

impl ReferenceProvider {
    /// A Provider with this configuration, fresh durable state seeded from it.
    pub fn new(cfg: ProviderConfig) -> Self {
        let catalog = match &cfg.described {
            Some(d) => Catalog::described(d),
            None => Catalog::new(cfg.fixtures, &cfg.faults, &cfg.latitudes, cfg.next_release),
        };
        let durable = DurableState::new(cfg.seed, cfg.grants.clone());
        ReferenceProvider {
            catalog,
            durable: Arc::new(Durable {
                state: Mutex::new(durable),
                changed: Condvar::new(),
            }),
            memory: Mutex::new(Memory::default()),
            handles: AtomicU64::new(0),
            cfg,
        }
    }

    /// The standard reference: [`ProviderConfig::default`].
    pub fn reference() -> Self {
        Self::default()
    }

    /// The reference with exactly one fault.
    pub fn with_fault(fault: Mutant) -> Self {
        Self::new(ProviderConfig {
            faults: BTreeSet::from([fault]),
            ..ProviderConfig::default()
        })
    }

    /// The mutant of the reference app named `name` (a [`Mutant::name`]).
    pub fn mutant(name: &str) -> Result<Self, UnknownMutant> {
        Self::mutant_of(FixtureSet::Reference, name)
    }

    /// The standard Provider of an app ([`ProviderConfig::of`]).
    pub fn hosting(set: FixtureSet) -> Self {
        Self::new(ProviderConfig::of(set))
    }

    /// The mutant `name` of an app; a fault that has no place in that app
    /// ([`Mutant::applies_to`]) is as unknown as a misspelt one.
    pub fn mutant_of(set: FixtureSet, name: &str) -> Result<Self, UnknownMutant> {
        let fault = Mutant::parse(name)
            .filter(|f| f.applies_to(set))
            .ok_or_else(|| UnknownMutant(name.to_string()))?;
        Ok(Self::new(ProviderConfig {
            faults: BTreeSet::from([fault]),
            ..ProviderConfig::of(set)
        }))
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &ProviderConfig {
        &self.cfg
    }

    /// Committed executions of tools with side effects so far (the
    /// reference app reports it in `list_alerts` as `effects`; the notes app
    /// reports it nowhere).
    pub fn effects(&self) -> u64 {
        lock(&self.durable.state).effects
    }

    pub(crate) fn has(&self, fault: Mutant) -> bool {
        self.cfg.faults.contains(&fault)
    }

    pub(crate) fn takes(&self, latitude: Variant) -> bool {
        self.cfg.latitudes.contains(&latitude)
    }

    /// Free text of the Provider as published: the app's own messages
    /// name it by its plain name, never by this (`hostile.rs`).
    pub(crate) fn vendor_text(&self, text: &str) -> String {
        hostile::vendor_text(text, &self.cfg.latitudes)
    }

    /// The reference taking one legal variant (a [`Variant::name`]).
    pub fn variant(name: &str) -> Result<Self, UnknownMutant> {
        let l = Variant::parse(name).ok_or_else(|| UnknownMutant(name.to_string()))?;
        Ok(Self::new(ProviderConfig::default().with_latitude(l)))
    }

    /// The wait the app suggests between polls.
    pub(crate) fn poll_after_ms(&self) -> i64 {
        match (self.takes(Variant::SlowOperations), self.cfg.fixtures) {
            (true, _) => 60_000,
            (false, FixtureSet::Reference) => POLL_AFTER_MS,
            (false, FixtureSet::Notes) => notes::POLL_AFTER_MS,
        }
    }

    pub(crate) fn new_operation_id(&self, d: &mut state::DurableState) -> String {
        self.issued(if self.takes(Variant::OperationIdsUuid) {
            d.rng.uuid()
        } else {
            format!("op_{}", &d.rng.hex("operation")[..24])
        })
    }

    /// An opaque string the Provider issues (session token, operation id,
    /// resume token, revision) as published: any string is the Provider's
    /// to choose, one that reads like a harness template included.
    pub(crate) fn issued(&self, s: String) -> String {
        issued_string(&self.cfg.latitudes, s)
    }

    /// The limits as advertised and enforced.
    pub(crate) fn limits(&self) -> Limits {
        let mut l = self.cfg.limits;
        if self.has(Mutant::NegotiateLimitsBelowMinimum) {
            l.max_request_bytes = 16_384;
        }
        l
    }

    pub(crate) fn window_ms(&self) -> i64 {
        self.limits().window_ms()
    }

    pub(crate) fn provider_id(&self) -> &str {
        if self.has(Mutant::ProviderIdOutsideNamespace) {
            "com.clawseed.elsewhere"
        } else {
            &self.cfg.provider_id
        }
    }

    /// Protocol versions this app can select in `negotiate`.
    pub(crate) fn versions(&self) -> BTreeSet<i32> {
        let mut v = BTreeSet::new();
        if self.cfg.manifest.speaks_v1() {
            v.insert(1);
        }
        if self.cfg.manifest.speaks_v2() {
            v.insert(2);
        }
        v
    }

    pub(crate) fn next_handle(&self, kind: &str) -> String {
        format!(
            "{kind}-{}",
            self.handles.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    fn unknown_method(&self) -> Failure {
        if self.has(Mutant::UnknownMethodWrongCode) {
            Failure::new(ErrorCode::ToolNotFound, "No such tool.")
        } else {
            Failure::new(ErrorCode::MethodNotFound, "No such method.")
        }
    }

    /// An unknown method in the v1 dialect (no `protocol_version`).
    fn unknown_v1_method(&self) -> Failure {
        if self.has(Mutant::UnknownV1MethodWrongCode) {
            Failure::new(ErrorCode::ToolNotFound, "No such tool.")
        } else {
            self.unknown_method()
        }
    }

    /// §4: `protocol_version` decides the dialect of same-named methods.
    fn dialect(&self, method: &str, extras: Option<&Bundle>) -> Dialect {
        let long_version = matches!(
            extras.and_then(|b| b.get(keys::PROTOCOL_VERSION)),
            Some(Value::Long(_))
        );
        if long_version && self.has(Mutant::LongProtocolVersionAsV1) {
            return Dialect::V1;
        }
        dialect_of(method, extras)
    }

    fn v2_call(
        &self,
        caller: &CallerIdentity,
        now_ms: i64,
        method: Method,
        extras: Option<&Bundle>,
    ) -> Reply {
        let mut reply = self.v2_answer(caller, now_ms, method, extras);
        // negotiate carries no protocol_version to echo, so its errors may
        // leave it out.
        if method == Method::Negotiate && self.takes(Variant::NegotiateErrorsWithoutVersion) {
            if let Reply::Result {
                bundle: Some(b), ..
            } = &mut reply
            {
                if b.opt_string(keys::STATUS).ok().flatten().as_deref() == Some("error") {
                    b.remove(keys::PROTOCOL_VERSION);
                }
            }
        }
        reply
    }

    fn v2_answer(
        &self,
        caller: &CallerIdentity,
        now_ms: i64,
        method: Method,
        extras: Option<&Bundle>,
    ) -> Reply {
        // §5: echo the request id whenever the request carried one we can
        // read, even if the rest of the envelope is broken.
        let raw_id = extras.and_then(|b| b.opt_string(keys::REQUEST_ID).ok().flatten());
        if let Some(f) = self.early_refusal(caller.uid, now_ms, method, extras) {
            return self.finish_v2(f.into(), raw_id.as_deref());
        }
        let req = match self.decode(method, extras) {
            Ok(r) => r,
            Err(f) => return self.finish_v2(f.into(), raw_id.as_deref()),
        };
        let request_id = req.common().map(|c| c.request_id.clone());
        if method != Method::Negotiate && self.warming_up() {
            let mut f = Failure::new(
                ErrorCode::Unavailable,
                "The app is starting; try again shortly.",
            );
            f.retry_after_ms = Some(WARM_UP_RETRY_AFTER_MS);
            return self.finish_v2(f.into(), request_id.as_deref());
        }
        let _slot = match self.admit(caller.uid) {
            Ok(slot) => slot,
            Err(f) => return self.finish_v2(f.into(), request_id.as_deref()),
        };
        let empty = Bundle::new();
        let mut answer = self.serve(caller, now_ms, extras.unwrap_or(&empty), &req);
        if self.takes(Variant::ListsShuffled) {
            self.shuffle_lists(&mut answer);
        }
        self.finish_v2(answer, request_id.as_deref())
    }

    fn serve(
        &self,
        caller: &CallerIdentity,
        now_ms: i64,
        extras: &Bundle,
        req: &V2Request,
    ) -> Answer {
        let common = match req {
            V2Request::Negotiate(n) => return self.negotiate(caller, now_ms, n),
            other => match other.common() {
                Some(c) => c,
                None => {
                    return Failure::new(ErrorCode::InternalError, "Request not understood.").into()
                }
            },
        };
        let caps = match self.session(caller.uid, now_ms, &common.session_token) {
            Ok(caps) => caps,
            Err(f) => return f.into(),
        };
        // §2.3: a Consumer must not use an optional capability it did not
        // negotiate, and the Provider refuses it.
        if let Some(cap) = req.method().capability() {
            let waived = match req.method() {
                Method::GetOperation => self.has(Mutant::GetOperationWithoutCapability),
                Method::CancelOperation => self.has(Mutant::CancelWithoutCapability),
                _ => false,
            };
            if !caps.contains(&cap) && !waived {
                return Failure::new(
                    ErrorCode::UnsupportedCapability,
                    format!("{} was not negotiated in this session.", cap.as_str()),
                )
                .into();
            }
        }
        let cx = Cx {
            uid: caller.uid,
            now_ms,
            extras,
            request_id: &common.request_id,
            deadline_at_ms: common.deadline_at_ms,
            caps: &caps,
        };
        match req {
            V2Request::GetProviderInfo(_) if self.has(Mutant::ProviderInfoMissing) => {
                Failure::new(ErrorCode::MethodNotFound, "No such method.").into()
            }
            V2Request::GetProviderInfo(_) => self.provider_info(),
            V2Request::ListTools(_) => Answer::ok(self.catalog.list_tools(
                caps.contains(&Capability::AsyncOperations),
                &self.cfg.faults,
                &self.cfg.latitudes,
                &self.hidden_tools(caller.uid),
            )),
            V2Request::ExecuteTool {
                tool_name,
                args,
                resume_token,
                ..
            } => self.execute(&cx, tool_name, args, resume_token.as_deref()),
            V2Request::GetOperation { operation_id, .. } => self.get_operation(&cx, operation_id),
            V2Request::CancelOperation { operation_id, .. } => {
                self.cancel_operation(&cx, operation_id)
            }
            V2Request::Negotiate(_) => {
                Failure::new(ErrorCode::InternalError, "Request not understood.").into()
            }
        }
    }

    /// The unavailable_after_restart latitude: true once, for the first call
    /// after a restart.
    fn warming_up(&self) -> bool {
        self.takes(Variant::UnavailableAfterRestart)
            && std::mem::take(&mut lock(&self.memory).warming_up)
    }

    /// The lists_shuffled latitude: the sets of negotiate, get_provider_info
    /// and list_tools in a new order on every answer. Execution results are
    /// left alone: their order is business data.
    fn shuffle_lists(&self, answer: &mut Answer) {
        let Answer::Success { data, file: None } = answer else {
            return;
        };
        if data.get("kind").is_some() {
            return;
        }
        let mut d = lock(&self.durable.state);
        let mut shuffle = |v: Option<&mut serde_json::Value>| {
            if let Some(serde_json::Value::Array(items)) = v {
                // Fisher-Yates over the seeded generator: reproducible runs.
                for i in (1..items.len()).rev() {
                    let draw = u64::from_str_radix(&d.rng.hex("shuffle")[..12], 16).unwrap_or(0);
                    items.swap(i, (draw % (i as u64 + 1)) as usize);
                }
            }
        };
        shuffle(data.get_mut("capabilities"));
        shuffle(data.get_mut("scopes"));
        if let Some(serde_json::Value::Array(tools)) = data.get_mut("tools") {
            for t in tools.iter_mut() {
                shuffle(t.get_mut("scopes"));
            }
        }
        shuffle(data.get_mut("tools"));
    }

    fn provider_info(&self) -> Answer {
        if let Some(a) = self.described_info() {
            return a;
        }
        let scopes =
            fixtures::scopes_json(self.cfg.fixtures, &self.cfg.faults, &self.cfg.latitudes);
        let mut info = serde_json::json!({
            "provider_id": if self.has(Mutant::ProviderIdUnstable) {
                format!("{}.tools", self.provider_id())
            } else {
                self.provider_id().to_string()
            },
            "provider_name": self.vendor_text(&self.cfg.provider_name),
            "description": self.vendor_text(&self.cfg.description),
            "schema_dialect": cetp_proto::schema::DEFAULT_DIALECT,
            "scopes": scopes,
        });
        if self.takes(Variant::DescriptorUnknownFields) {
            info["x_vendor"] =
                serde_json::json!({"support_url": "https://help.example", "tier": 3});
            info["privacy_policy"] = serde_json::json!("https://help.example/privacy");
        }
        Answer::ok(info)
    }
}

impl ProviderApp for ReferenceProvider {
    fn manifests(&self) -> Vec<ServiceManifest> {
        let mut meta = BTreeMap::new();
        meta.insert(META_AUTHORITY.to_string(), self.cfg.authority.clone());
        let (version, versions) = match self.cfg.manifest {
            ManifestVariant::DualStack | ManifestVariant::MismatchedPackage => {
                if self.has(Mutant::DualStackWithoutVersion1) {
                    (None, Some("1,2"))
                } else {
                    (Some("1"), Some("1,2"))
                }
            }
            ManifestVariant::V2Only => (Some("2"), Some("2")),
            ManifestVariant::V1Only => (Some("1"), None),
            ManifestVariant::VersionsOnly => (None, Some("1,2")),
        };
        if let Some(v) = version {
            meta.insert(META_VERSION.to_string(), v.to_string());
        }
        if let Some(v) = versions {
            meta.insert(META_VERSIONS.to_string(), v.to_string());
        }
        let foreign = self.cfg.manifest == ManifestVariant::MismatchedPackage
            || self.has(Mutant::AuthorityPackageMismatch);
        vec![ServiceManifest {
            package: self.cfg.package.clone(),
            service: format!("{}/.cetp.ToolProviderService", self.cfg.package),
            exported: true,
            permission: Some(ACCESS_PERMISSION.to_string()),
            meta,
            authority_package: Some(if foreign {
                IMPOSTOR_PACKAGE.to_string()
            } else {
                self.cfg.package.clone()
            }),
            // The simulated device's stand-in for the package's signing
            // certificate: fixed per package, like a real release key.
            signing_cert_sha256: vec![cetp_proto::canonical::sha256_hex(
                format!("cetp-sim signing certificate of {}", self.cfg.package).as_bytes(),
            )],
            meta_types: None,
        }]
    }

    fn authority(&self) -> String {
        self.cfg.authority.clone()
    }

    fn call(&self, caller: &CallerIdentity, now_ms: i64, call: &ProviderCall) -> Reply {
        // Background operations progress with device time whether or not
        // anyone polls them.
        self.tick(now_ms);
        let extras = call.extras.as_ref();
        let method = call.method.as_str();
        let known = Method::parse(method);
        let v1_method = matches!(
            known,
            Some(Method::ListTools | Method::ExecuteTool | Method::GetProviderInfo)
        );
        if !self.cfg.manifest.speaks_v2() {
            // A v1 Provider knows nothing of protocol_version and has no
            // negotiate or operations.
            return if v1_method {
                self.v1_call(caller, now_ms, method, extras)
            } else {
                self.finish_v1(Err(self.unknown_v1_method()))
            };
        }
        match (self.dialect(method, extras), known) {
            (Dialect::V2, None) => {
                let raw_id = extras.and_then(|b| b.opt_string(keys::REQUEST_ID).ok().flatten());
                self.finish_v2(self.unknown_method().into(), raw_id.as_deref())
            }
            (Dialect::V2, Some(m)) => self.v2_call(caller, now_ms, m, extras),
            (Dialect::V1, _) if self.cfg.manifest.speaks_v1() => {
                if v1_method {
                    self.v1_call(caller, now_ms, method, extras)
                } else {
                    self.finish_v1(Err(self.unknown_v1_method()))
                }
            }
            (Dialect::V1, None) => self.finish_v2(self.unknown_method().into(), None),
            (Dialect::V1, Some(_)) if self.takes(Variant::V2OnlyV1CallsUnknown) => {
                let raw_id = extras.and_then(|b| b.opt_string(keys::REQUEST_ID).ok().flatten());
                self.finish_v2(self.unknown_method().into(), raw_id.as_deref())
            }
            (Dialect::V1, Some(_)) => {
                // §4: a v2-only Provider never reads a call as v1.
                let raw_id = extras.and_then(|b| b.opt_string(keys::REQUEST_ID).ok().flatten());
                self.finish_v2(
                    Failure::new(
                        ErrorCode::InvalidRequest,
                        "protocol_version is required: this provider speaks only CETP v2.",
                    )
                    .into(),
                    raw_id.as_deref(),
                )
            }
        }
    }

    fn resolve(
        &self,
        _launcher: &CallerIdentity,
        target: &IntentTarget,
        decision: Decision,
        now_ms: i64,
    ) -> ResolveOutcome {
        self.decide(target, decision, now_ms)
    }

    fn restart(&self) {
        {
            let mut mem = lock(&self.memory);
            let epoch = mem.epoch + 1;
            // A Provider may keep sessions in durable storage (§2.2 lets it,
            // not makes it, invalidate them on restart).
            let sessions = if self.takes(Variant::SessionsSurviveRestart) {
                std::mem::take(&mut mem.sessions)
            } else {
                Default::default()
            };
            *mem = Memory {
                epoch,
                sessions,
                warming_up: self.takes(Variant::UnavailableAfterRestart),
                ..Memory::default()
            };
        }
        let mut d = lock(&self.durable.state);
        d.boot += 1;
        // The killed executors committed nothing (effect and result commit
        // together), so their reservations simply vanish.
        d.records
            .retain(|_, r| !matches!(r.state, state::RecordState::InFlight { .. }));
        if self.has(Mutant::DedupeLostOnRestart) {
            d.records.clear();
        }
        if self.has(Mutant::OperationLostOnRestart) {
            d.operations.clear();
            d.active_ops.clear();
        }
        self.replay_jobs_after_restart(&mut d);
        drop(d);
        self.durable.changed.notify_all();
    }
}
