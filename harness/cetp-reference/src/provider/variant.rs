//! Legal variants: named switches that each make the reference Provider take
//! one latitude the spec leaves a Provider (a MAY, an "either", a shape or an
//! order it does not fix).
//!
//! They are the dual of [`super::Mutant`]: the suite must kill every mutant
//! and must pass every legal variant, which is how a false FAIL is caught
//! before a vendor meets it. Every latitude is checked at one place (or one
//! tight cluster) of the Provider, so a `self.takes(Variant::X)` site shows
//! the whole variation. The clause that allows each one, and the profile a
//! vendor of such a Provider would write, live as data in
//! `vectors/variants/variants.json`, which a test keeps in step with
//! [`Variant::ALL`].

macro_rules! latitudes {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// One latitude of the reference Provider.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Variant { $( $(#[$doc])* $variant, )* }

        impl Variant {
            /// Every latitude, in a stable order.
            pub const ALL: &'static [Variant] = &[ $( Variant::$variant, )* ];

            /// Stable snake_case name (the variant's id in data and reports).
            pub fn name(self) -> &'static str {
                match self { $( Variant::$variant => $name, )* }
            }

            /// The latitude of this name; `None` for an unknown name.
            pub fn parse(name: &str) -> Option<Variant> {
                match name { $( $name => Some(Variant::$variant), )* _ => None }
            }
        }
    };
}

latitudes! {
    // ---- asynchronous work (§2.3, §4.4, §4.5)
    /// A `sync_or_async` tool always answers synchronously.
    SyncForAsyncTool => "sync_for_async_tool",
    /// A result over the inline limit is delivered through an operation whose
    /// terminal state carries the file.
    LargeResultViaOperation => "large_result_via_operation",
    /// The read tool `get_quote` is `sync_or_async` and answers with an
    /// operation when async is negotiated.
    AsyncReadTool => "async_read_tool",
    /// Operations take twenty minutes of device time and ask to be polled
    /// once a minute.
    SlowOperations => "slow_operations",
    /// Operation ids are UUIDs.
    OperationIdsUuid => "operation_ids_uuid",
    /// `get_operation` never reports progress (it is optional display data).
    ProgressOmitted => "progress_omitted",
    /// Cancelling a finished operation acknowledges the request
    /// (`cancellation_requested`) and the operation stays `succeeded`.
    CancelFinishedAcknowledged => "cancel_finished_acknowledged",
    /// Cancelling an operation not yet finished answers CONFLICT: its
    /// transaction is committed once accepted, so it runs to its end (§4.4: a committed
    /// transaction may answer CONFLICT; cancellation is only a request).
    CancelRefusedCommitted => "cancel_refused_committed",
    /// Re-sending the execution of a finished operation answers its terminal
    /// result instead of the operation.
    ReplayReturnsTerminal => "replay_returns_terminal",
    // ---- de-duplication and validation (§6)
    /// A dedupe record binds the digest of the raw args bytes, so a retry
    /// with its keys in another order is other content.
    DedupeRawArgs => "dedupe_raw_args",
    /// Args are validated before the dedupe lookup.
    ValidateBeforeDedupe => "validate_before_dedupe",
    // ---- confirmation and authorization (§3.4, §4.3, §7.2)
    /// Tools that always confirm ask with AUTH_REQUIRED.
    ConfirmWithAuthRequired => "confirm_with_auth_required",
    /// A call whose runtime risk exceeds its annotation is refused outright
    /// (PERMISSION_DENIED) instead of confirmed.
    EscalationRefused => "escalation_refused",
    /// Backing out of the confirmation (dismiss) is taken as the user's
    /// refusal: the resumed call is answered USER_CANCELLED, instead of
    /// asking again.
    DismissCancels => "dismiss_cancels",
    /// Resume tokens are 200 characters long.
    ResumeTokensLong => "resume_tokens_long",
    /// `list_tools` hides the tools a caller lacks a scope for.
    HideToolsWithoutScope => "hide_tools_without_scope",
    // ---- sessions and envelopes (§2.2, §3.2, §4, §5)
    /// Session tokens are signed blobs sharing a long fixed header.
    SessionTokensSigned => "session_tokens_signed",
    /// Session tokens are UUIDs.
    SessionTokensUuid => "session_tokens_uuid",
    /// Sessions survive a Provider restart.
    SessionsSurviveRestart => "sessions_survive_restart",
    /// Unknown extras make a request INVALID_REQUEST.
    UnknownExtrasRejected => "unknown_extras_rejected",
    /// Error answers to `negotiate` carry no `protocol_version` (the request
    /// carried none to echo).
    NegotiateErrorsWithoutVersion => "negotiate_errors_without_version",
    /// Every error answer carries `error_details`.
    ErrorDetailsEverywhere => "error_details_everywhere",
    /// Descriptors carry fields this harness does not know.
    DescriptorUnknownFields => "descriptor_unknown_fields",
    /// `provider_id` is a custom value under the package namespace.
    ProviderIdCustom => "provider_id_custom",
    // ---- limits (§2.2)
    /// Limits well above the minimums.
    GenerousLimits => "generous_limits",
    /// One request at a time; more are RATE_LIMITED.
    SingleConcurrentRequest => "single_concurrent_request",
    // ---- observation and shape
    /// No effect counter anywhere: `list_alerts` reports only the alerts.
    NoEffectCounter => "no_effect_counter",
    /// A v2-only manifest (no v1 view).
    V2OnlyManifest => "v2_only_manifest",
    /// The device cannot report whether a PendingIntent is immutable
    /// (Android before 12): the resolution's `immutable` is unknown.
    PendingIntentMutabilityUnknown => "pending_intent_mutability_unknown",
    // ---- free text (§3.2, §3.3, §4.4, §5, §7.3)
    /// Every free text the spec leaves to the vendor carries script and
    /// event-handler markup, ANSI/OSC escapes, a bidi override, XML and
    /// Markdown breakers and instruction-like text (`hostile.rs`); a trade
    /// note of the history is 1 MB, inline under a 1 MiB inline limit; error
    /// messages get only what a safe user-facing description can hold.
    HostileText => "hostile_text",
    // ---- order, issued strings, limits and availability (§2.2, §3.3, §4.4, §4.5, §5)
    /// The tools of `list_tools`, each tool's scopes, the scopes of
    /// `get_provider_info` and the granted capabilities come in another
    /// order on every answer (no clause fixes one).
    ListsShuffled => "lists_shuffled",
    /// Every opaque string the Provider issues (session tokens, operation
    /// ids, resume tokens, the revision) contains template-like `${…}` text.
    TemplateSyntaxInIds => "template_syntax_in_ids",
    /// A 4 MiB inline limit: the profile's large result (about 1.2 MB) fits
    /// inline, where it must go.
    InlineLimitFitsLargeResult => "inline_limit_fits_large_result",
    /// The first v2 call after a restart, other than `negotiate`, answers
    /// UNAVAILABLE (retryable, with `retry_after_ms`) while the app warms up.
    UnavailableAfterRestart => "unavailable_after_restart",
    /// With large_results negotiated, a succeeded operation hands its
    /// result over as a file, whatever its size.
    OperationResultsAsFiles => "operation_results_as_files",
    // ---- the order of refusals (§2.2, §2.3, §4.1, §4.4, §5: no clause orders the checks)
    /// A passed `deadline_at_ms` is refused (DEADLINE_EXCEEDED) before the
    /// session, the capability and the rest of the envelope are checked;
    /// a retry of an execution already recorded still gets its recorded
    /// result (§6).
    DeadlineCheckedFirst => "deadline_checked_first",
    /// The session token and the capability the method needs are checked
    /// before the rest of the envelope: a request naming no live session of
    /// the caller is NEGOTIATION_REQUIRED whatever else is wrong with it.
    SessionCheckedFirst => "session_checked_first",
    /// A v2-only Provider answers a call without `protocol_version`
    /// METHOD_NOT_FOUND (it knows no v1 method of that name) instead of
    /// INVALID_REQUEST.
    V2OnlyV1CallsUnknown => "v2_only_v1_calls_unknown",
    /// Another caller's operation (asked for under its own request id) is
    /// answered RESULT_EXPIRED, as a forgotten one would be, instead of
    /// INVALID_REQUEST.
    ForeignOperationsExpired => "foreign_operations_expired",
    // ---- the args text (§4.1; RFC 8259 §8.1, §8.2)
    /// The args text is parsed as a lenient JSON parser does: a leading
    /// byte order mark is ignored, an unpaired surrogate escape is read as
    /// U+FFFD.
    LenientArgsText => "lenient_args_text",
    /// A 4 MiB inline limit and the large export run in the background: its
    /// result (about 1.2 MB) comes inline in the operation's succeeded
    /// state, within the limit, as §4.5 asks.
    LargeResultInlineViaOperation => "large_result_inline_via_operation",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for l in Variant::ALL {
            assert_eq!(Variant::parse(l.name()), Some(*l));
            assert!(seen.insert(l.name()), "duplicate {}", l.name());
        }
        assert_eq!(Variant::parse("no_such_latitude"), None);
    }
}
