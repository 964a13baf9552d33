//! The mutants: named switches that each make the reference Provider break
//! one requirement (or a tight cluster of them) of the spec.
//!
//! Every fault is checked at exactly one place of the Provider, so reading a
//! `self.has(Mutant::X)` site shows the whole mutation. The spec sections each
//! fault breaks, and a description of the broken behaviour, live as data in
//! `vectors/mutants/mutants.json`, which a test keeps in step with [`Mutant::ALL`].
//!
//! A fault belongs to the apps ([`FixtureSet`]) where it has a place and a
//! scenario showing it: most to the reference app only, the engine faults
//! listed in [`SHARED_WITH_NOTES`] to both, those of the last group to the
//! notes app only.

use super::FixtureSet;
use std::fmt;

macro_rules! faults {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// One mutation of the reference Provider.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Mutant { $( $(#[$doc])* $variant, )* }

        impl Mutant {
            /// Every fault, in a stable order.
            pub const ALL: &'static [Mutant] = &[ $( Mutant::$variant, )* ];

            /// Stable snake_case name (the mutant's id in vectors and reports).
            pub fn name(self) -> &'static str {
                match self { $( Mutant::$variant => $name, )* }
            }

            /// The fault of this name; `None` for an unknown name.
            pub fn parse(name: &str) -> Option<Mutant> {
                match name { $( $name => Some(Mutant::$variant), )* _ => None }
            }
        }
    };
}

faults! {
    // ---- negotiation and sessions (§2.2, §2.3)
    /// Selects the lowest common version instead of the highest.
    NegotiatePicksLowest => "negotiate_picks_lowest",
    /// Answers success with version 2 when no version is common.
    NegotiateIgnoresNoCommon => "negotiate_ignores_no_common",
    /// Returns every capability it supports, offered or not.
    NegotiateExtraCapability => "negotiate_extra_capability",
    /// Advertises (and enforces) a `max_request_bytes` below the minimum.
    NegotiateLimitsBelowMinimum => "negotiate_limits_below_minimum",
    /// Issues session tokens longer than 256 bytes.
    SessionTokenTooLong => "session_token_too_long",
    /// Issues sequential session tokens (`session-1`, `session-2`).
    SessionTokenPredictable => "session_token_predictable",
    /// Accepts a session token issued to another UID.
    SessionNotBoundToCaller => "session_not_bound_to_caller",
    /// Accepts a missing or unknown session token.
    SessionNotChecked => "session_not_checked",
    /// Answers NEGOTIATION_REQUIRED with retryable=false.
    NegotiationRequiredNotRetryable => "negotiation_required_not_retryable",
    /// A session stays valid after its `expires_at`.
    SessionNeverExpires => "session_never_expires",
    /// get_provider_info reports another provider_id than negotiate (both in
    /// the package namespace): the identity is not stable.
    ProviderIdUnstable => "provider_id_unstable",
    /// A session follows the capabilities of the caller's latest negotiation,
    /// so tool semantics change under a token that stays valid.
    CapabilitiesChangedInSession => "capabilities_changed_in_session",
    // ---- request envelope (§4, §4.1)
    /// get_provider_info, a core method, is answered METHOD_NOT_FOUND.
    ProviderInfoMissing => "provider_info_missing",
    /// Reads a `protocol_version` sent as a Long as a v1 call.
    LongProtocolVersionAsV1 => "long_protocol_version_as_v1",
    /// Answers DEADLINE_EXCEEDED instead of INVALID_REQUEST when
    /// `deadline_at_ms` is missing.
    MissingDeadlineAnswersDeadlineExceeded => "missing_deadline_answers_deadline_exceeded",
    /// Accepts a `request_id` that is not a UUID.
    LenientRequestId => "lenient_request_id",
    /// Serves `protocol_version` 3 as if it were 2.
    UnsupportedVersionAccepted => "unsupported_version_accepted",
    /// Answers TOOL_NOT_FOUND for an unknown method.
    UnknownMethodWrongCode => "unknown_method_wrong_code",
    /// Answers an unknown method called without `protocol_version` (the v1
    /// dialect) with TOOL_NOT_FOUND.
    UnknownV1MethodWrongCode => "unknown_v1_method_wrong_code",
    // ---- error model (§5)
    /// Error answers do not echo `request_id`.
    NoRequestIdEcho => "no_request_id_echo",
    /// Error answers do not echo `protocol_version`.
    NoProtocolVersionEcho => "no_protocol_version_echo",
    /// Answers echo a `request_id` other than the one sent.
    WrongRequestIdEcho => "wrong_request_id_echo",
    /// INVALID_ARGS carries retryable=true.
    InvalidArgsRetryable => "invalid_args_retryable",
    /// Uses the code `BAD_ARGS`, which §5 does not define.
    UnknownErrorCode => "unknown_error_code",
    /// The INVALID_ARGS message carries a Java stack trace.
    StackTraceInMessage => "stack_trace_in_message",
    /// Error answers have no `retryable` key.
    ErrorMissingRetryable => "error_missing_retryable",
    /// Refusals are thrown (SecurityException) instead of answered as error
    /// envelopes.
    RefusalsThrown => "refusals_thrown",
    /// Schema violations are answered INVALID_REQUEST.
    InvalidArgsWrongCode => "invalid_args_wrong_code",
    /// RATE_LIMITED carries retryable=false.
    RateLimitedNotRetryable => "rate_limited_not_retryable",
    // ---- descriptors (§3)
    /// The boolean annotations are published as strings (`"false"`).
    AnnotationBooleansAsStrings => "annotation_booleans_as_strings",
    /// `get_quote` is published (and routed) as `getQuote`.
    ToolNameInvalid => "tool_name_invalid",
    /// `list_tools` lists `get_quote` twice.
    DuplicateToolNames => "duplicate_tool_names",
    /// `delete_alert` (delete, high risk, destructive) is declared
    /// `provider_policy` and runs without confirmation.
    HighRiskWithoutAlways => "high_risk_without_always",
    /// `sync_portfolio` is listed `sync_or_async` without async_operations.
    SyncOrAsyncWithoutNegotiation => "sync_or_async_without_negotiation",
    /// An annotation carries a risk value outside the enum.
    UnknownAnnotationEnum => "unknown_annotation_enum",
    /// An input schema references a network resource.
    RemoteRefInSchema => "remote_ref_in_schema",
    /// A scope is published under a name that breaks the pattern.
    ScopeNameInvalid => "scope_name_invalid",
    /// A scope carries a sensitivity outside the enum.
    UnknownScopeSensitivity => "unknown_scope_sensitivity",
    /// `provider_id` lies outside the package namespace.
    ProviderIdOutsideNamespace => "provider_id_outside_namespace",
    /// `revision` never changes, whatever the tool list.
    StaticRevision => "static_revision",
    /// Ships the next release's `get_quote` schema (shorter symbols) under
    /// the revision of the release it replaced.
    SchemaChangedRevisionKept => "schema_changed_revision_kept",
    /// `get_quote` answers a price as a string and skips output validation.
    OutputViolatesSchema => "output_violates_schema",
    /// `get_quote` is listed without an `output_schema`.
    MissingOutputSchema => "missing_output_schema",
    // ---- v1 coexistence and manifest (§2.1, §8)
    /// The v1 tool list includes tools with side effects.
    V1ListsWriteTools => "v1_lists_write_tools",
    /// v1 `execute_tool` runs tools with side effects.
    V1ExecutesWriteTool => "v1_executes_write_tool",
    /// v1 `execute_tool` skips the scope check that v2 applies, so a read
    /// refused over v2 is served over v1.
    V1SkipsScopeCheck => "v1_skips_scope_check",
    /// A dual-stack manifest drops the legacy `version=1`.
    DualStackWithoutVersion1 => "dual_stack_without_version_1",
    /// The declared authority belongs to another package.
    AuthorityPackageMismatch => "authority_package_mismatch",
    // ---- idempotency and concurrency (§6, §4.4)
    /// No request-id deduplication at all.
    NoDedupe => "no_dedupe",
    /// A dedupe hit ignores tool and args: other content gets the old result.
    DedupeIgnoresArgs => "dedupe_ignores_args",
    /// Dedupe keys omit the caller UID.
    DedupeNotCallerBound => "dedupe_not_caller_bound",
    /// Dedupe records are lost when the process restarts.
    DedupeLostOnRestart => "dedupe_lost_on_restart",
    /// Concurrent calls with one request id all execute.
    ConcurrentDoubleExecution => "concurrent_double_execution",
    /// Dedupe records are kept per tool: a request id reused with another
    /// tool runs that tool.
    DedupePerTool => "dedupe_per_tool",
    // ---- deadlines (§4.1)
    /// The deadline is checked only after the effect is committed.
    DeadlineCheckedAfterEffect => "deadline_checked_after_effect",
    /// The deadline is never checked.
    DeadlineIgnored => "deadline_ignored",
    // ---- tool execution (§3.4, §4.1, §7.3)
    /// `get_quote` (effect=read) changes business state.
    ReadToolHasEffect => "read_tool_has_effect",
    /// Args are not validated against the input schema.
    SchemaNotValidated => "schema_not_validated",
    /// Args longer than `max_request_bytes` are accepted.
    ArgsLimitNotEnforced => "args_limit_not_enforced",
    /// Missing scopes are ignored.
    ScopeNotEnforced => "scope_not_enforced",
    /// Missing scopes yield success with empty or placeholder data.
    ScopeDegradedData => "scope_degraded_data",
    // ---- authorization and confirmation (§4.3, §7.2)
    /// The effect is committed when confirmation is requested.
    EffectBeforeConfirmation => "effect_before_confirmation",
    /// An extras key `confirmed`=true skips the Provider's confirmation.
    ConsumerConfirmedFlagTrusted => "consumer_confirmed_flag_trusted",
    /// An extras key `calling_uid` (the caller the request says it is)
    /// replaces the Binder UID in the scope check.
    ClaimedCallerTrusted => "claimed_caller_trusted",
    /// A resume token is accepted with another request id.
    ResumeTokenNotBoundToRequest => "resume_token_not_bound_to_request",
    /// A resume token is accepted from another caller.
    ResumeTokenOtherCaller => "resume_token_other_caller",
    /// A resume token is accepted with other args bytes.
    ResumeTokenArgsUnbound => "resume_token_args_unbound",
    /// A resume token can be redeemed more than once.
    ResumeTokenReusable => "resume_token_reusable",
    /// An expired resume token is still accepted.
    ResumeTokenNeverExpires => "resume_token_never_expires",
    /// The provider_policy tool never escalates: a call whose runtime risk is
    /// above its annotation runs without confirmation.
    NoEscalation => "no_escalation",
    /// A denied confirmation executes anyway.
    DenialExecutes => "denial_executes",
    /// A denial is answered PERMISSION_DENIED instead of USER_CANCELLED.
    DenialWrongCode => "denial_wrong_code",
    /// The resolution PendingIntent is mutable.
    MutablePendingIntent => "mutable_pending_intent",
    /// The resolution PendingIntent is implicit and created by another package.
    ForeignPendingIntent => "foreign_pending_intent",
    /// The resolution PendingIntent is the Provider's own and immutable, but
    /// wraps an implicit intent (a web login page to view), so another app
    /// handles it.
    ResolutionImplicitIntent => "resolution_implicit_intent",
    /// USER_ACTION_REQUIRED carries no `resolution`.
    NoResolutionOnUserAction => "no_resolution_on_user_action",
    // ---- background operations (§4.4)
    /// Another caller can read an operation.
    OperationOtherCaller => "operation_other_caller",
    /// `get_operation` accepts any request id.
    OperationRequestIdUnbound => "operation_request_id_unbound",
    /// `cancel_operation` from another caller cancels the operation.
    CancelOtherCaller => "cancel_other_caller",
    /// `cancel_operation` accepts any request id.
    CancelRequestIdUnbound => "cancel_request_id_unbound",
    /// A cancelled operation still commits its effect and reports cancelled.
    CancelReportsCancelledAfterEffect => "cancel_reports_cancelled_after_effect",
    /// cancel_operation answers state `cancelled` at once instead of
    /// `cancellation_requested`.
    CancelReportsWrongState => "cancel_reports_wrong_state",
    /// An accepted operation comes without `poll_after_ms`.
    PollAfterMsMissing => "poll_after_ms_missing",
    /// A succeeded operation carries its bare value as `result` instead of
    /// the result envelope of a synchronous success.
    OperationResultUnwrapped => "operation_result_unwrapped",
    /// A failed operation reports no `error` object.
    FailedOperationWithoutError => "failed_operation_without_error",
    /// `execute_tool` returns an operation without async_operations.
    AsyncWithoutNegotiation => "async_without_negotiation",
    /// `get_operation` is served without async_operations.
    GetOperationWithoutCapability => "get_operation_without_capability",
    /// `cancel_operation` is served without cancellation.
    CancelWithoutCapability => "cancel_without_capability",
    /// Operations are lost when the process restarts.
    OperationLostOnRestart => "operation_lost_on_restart",
    /// Operations expire after a minute, well inside the idempotency window.
    OperationExpiredEarly => "operation_expired_early",
    // ---- large results (§4.5)
    /// The file result declares a wrong SHA-256.
    FileWrongSha256 => "file_wrong_sha256",
    /// The file result declares a wrong size.
    FileWrongSize => "file_wrong_size",
    /// Results over `max_inline_result_bytes` are still sent inline.
    InlineOverLimit => "inline_over_limit",
    /// File results are sent without large_results.
    FileWithoutNegotiation => "file_without_negotiation",
    /// The file form carries a placeholder string instead of the validated
    /// result, against the output_schema.
    FileContentViolatesSchema => "file_content_violates_schema",
    /// The result descriptor is opened read-write.
    WritableResultFd => "writable_result_fd",
    // ---- found against Providers shaped further from the reference
    /// A request id reused with another tool is answered from the first
    /// tool's record: the args digest is compared only within one tool.
    DedupeToolNotBound => "dedupe_tool_not_bound",
    /// negotiate selects the highest version the Provider speaks whenever
    /// any version is common, offered or not (offered `[1]`, it answers 2).
    NegotiateIgnoresOffer => "negotiate_ignores_offer",
    /// A denial is not recorded as the request's terminal result: the same
    /// request id sent again opens a new confirmation, and can execute.
    DenialNotRecorded => "denial_not_recorded",
    /// A cancelled operation's job keeps running: the operation reports
    /// `cancelled`, then `succeeded`, with its effect.
    CancelledThenSucceeds => "cancelled_then_succeeds",
    /// De-duplication records are forgotten a minute after they were
    /// written, far inside the idempotency window.
    DedupeForgottenEarly => "dedupe_forgotten_early",
    // ---- the notes app only
    /// `delete_note` (declared confirmation=always) deletes without asking.
    DeleteNoteUnconfirmed => "delete_note_unconfirmed",
    /// `get_note` (effect=read) creates the note it is asked for when no
    /// such note exists.
    GetNoteCreatesMissing => "get_note_creates_missing",
    /// The background path of `archive_notes` skips the scope check.
    BackgroundArchiveSkipsScope => "background_archive_skips_scope",
    /// After a restart, the job queue runs succeeded background archives
    /// again.
    ArchiveReplayedAfterRestart => "archive_replayed_after_restart",
    /// A background archive succeeds with `{"archived_ids": [...]}`, not the
    /// output_schema shape of the synchronous path, unchecked.
    BackgroundArchiveResultShape => "background_archive_result_shape",
    /// Only background archives are de-duplicated: a synchronous
    /// `archive_notes` retried with its request id runs again.
    SyncArchiveNotDeduped => "sync_archive_not_deduped",
}

/// Engine faults that break the notes app as well, each with a notes
/// scenario of its own.
pub const SHARED_WITH_NOTES: &[Mutant] = &[
    Mutant::NoDedupe,
    Mutant::DedupeLostOnRestart,
    Mutant::EffectBeforeConfirmation,
    Mutant::DenialExecutes,
    Mutant::NoEscalation,
    Mutant::ResumeTokenArgsUnbound,
    Mutant::ScopeNotEnforced,
    Mutant::OperationLostOnRestart,
    Mutant::CancelReportsCancelledAfterEffect,
    Mutant::InlineOverLimit,
    Mutant::V1SkipsScopeCheck,
];

const NOTES_ONLY: &[Mutant] = &[
    Mutant::DeleteNoteUnconfirmed,
    Mutant::GetNoteCreatesMissing,
    Mutant::BackgroundArchiveSkipsScope,
    Mutant::ArchiveReplayedAfterRestart,
    Mutant::BackgroundArchiveResultShape,
    Mutant::SyncArchiveNotDeduped,
];

impl Mutant {
    /// Whether the fault has a place in the app `set` (the `providers` of
    /// its `mutants.json` entry).
    pub fn applies_to(self, set: FixtureSet) -> bool {
        match set {
            FixtureSet::Reference => !NOTES_ONLY.contains(&self),
            FixtureSet::Notes => NOTES_ONLY.contains(&self) || SHARED_WITH_NOTES.contains(&self),
        }
    }

    /// The apps the fault has a place in, in [`FixtureSet::ALL`] order.
    pub fn providers(self) -> Vec<FixtureSet> {
        FixtureSet::ALL
            .into_iter()
            .filter(|s| self.applies_to(*s))
            .collect()
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mutant name that is not in [`Mutant::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownMutant(pub String);

impl fmt::Display for UnknownMutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown mutant {:?}", self.0)
    }
}

impl std::error::Error for UnknownMutant {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for f in Mutant::ALL {
            assert_eq!(Mutant::parse(f.name()), Some(*f));
            assert!(seen.insert(f.name()), "duplicate {}", f.name());
            assert!(f
                .name()
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'));
        }
        assert_eq!(Mutant::parse("nope"), None);
    }

    #[test]
    fn every_fault_has_an_app() {
        for f in Mutant::ALL {
            assert!(!f.providers().is_empty(), "{f}");
        }
        let notes = Mutant::ALL
            .iter()
            .filter(|f| f.applies_to(FixtureSet::Notes))
            .count();
        assert!(notes >= 12, "{notes}");
    }
}
