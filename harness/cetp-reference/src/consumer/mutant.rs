//! The Consumer mutants: named switches that each make the reference
//! Consumer break one consumer-side requirement of the spec.
//!
//! Every fault is checked at exactly one place of the Consumer, so reading a
//! `self.has(ConsumerMutant::X)` site shows the whole mutation. The
//! requirement each fault breaks, and a description of the broken
//! behaviour, live as data in `vectors/mutants/consumer-mutants.json`, which
//! a test keeps in step with [`ConsumerMutant::ALL`].

use std::fmt;

macro_rules! consumer_mutants {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// One mutation of the reference Consumer.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ConsumerMutant { $( $(#[$doc])* $variant, )* }

        impl ConsumerMutant {
            /// Every fault, in a stable order.
            pub const ALL: &'static [ConsumerMutant] = &[ $( ConsumerMutant::$variant, )* ];

            /// Stable snake_case name (the mutant's id in vectors and reports).
            pub fn name(self) -> &'static str {
                match self { $( ConsumerMutant::$variant => $name, )* }
            }

            /// The fault of this name; `None` for an unknown name.
            pub fn parse(name: &str) -> Option<ConsumerMutant> {
                match name { $( $name => Some(ConsumerMutant::$variant), )* _ => None }
            }
        }
    };
}

consumer_mutants! {
    // ---- discovery and negotiation (§2.1, §2.2, §8)
    /// Sends a v2 `get_provider_info` (with an empty token) before negotiating.
    NoNegotiateFirst => "no_negotiate_first",
    /// Offers `consumer_versions` in ascending order.
    VersionsAscending => "versions_ascending",
    /// Sends `consumer_capabilities` as a String[] instead of a JSON text.
    CapabilitiesAsStringArray => "capabilities_as_string_array",
    /// Keeps sending the first session token after a renegotiation.
    StaleTokenAfterRenegotiation => "stale_token_after_renegotiation",
    /// On NEGOTIATION_REQUIRED retries with the dead token instead of
    /// negotiating again.
    RetriesWithDeadToken => "retries_with_dead_token",
    /// Ignores the `service`/authority same-package check of discovery.
    SamePackageNotChecked => "same_package_not_checked",
    /// Routes a call to the first Provider, in discovery order, whose tool
    /// list has the tool's name, not to the (provider_id, tool) asked.
    RoutesByScanOrder => "routes_by_scan_order",
    /// Reads the legacy `version` meta-data over `versions`.
    LegacyVersionMetaUsed => "legacy_version_meta_used",
    /// Takes a lone legacy `version=1` for "v1 and v2", and negotiates.
    LegacyVersionAsV2 => "legacy_version_as_v2",
    /// Falls back to v1 when a declared v2 fails to negotiate.
    V1FallbackAfterFailedNegotiation => "v1_fallback_after_failed_negotiation",
    /// Repeats a call over v1 after v2 answered PERMISSION_DENIED.
    V1AfterPermissionDenied => "v1_after_permission_denied",
    /// Trusts a cached tool list across negotiations without re-checking
    /// its revision.
    ToolListNotRechecked => "tool_list_not_rechecked",
    /// Refuses tool descriptors that carry members it does not know.
    UnknownMembersRefused => "unknown_members_refused",
    /// Uses optional-capability behaviour (operations, file results) the
    /// session did not negotiate.
    CapabilityNotNegotiatedUsed => "capability_not_negotiated_used",
    // ---- request envelope (§4.1)
    /// Sends `protocol_version` as a Long.
    ProtocolVersionLong => "protocol_version_long",
    /// Makes request ids that are not UUIDs.
    RequestIdNotUuid => "request_id_not_uuid",
    /// Sends `deadline_at_ms` as a relative budget, not an epoch time.
    DeadlineRelative => "deadline_relative",
    /// Sends `execute_tool` without `deadline_at_ms`.
    DeadlineOmitted => "deadline_omitted",
    /// Sends v2 `list_tools` without its `session_token`.
    ListToolsWithoutToken => "list_tools_without_token",
    /// Reuses the request id of its first read for every later read.
    ReadReusesRequestId => "read_reuses_request_id",
    // ---- retries (§5, §6)
    /// Retries a retryable error under a fresh request id.
    NewRequestIdOnRetry => "new_request_id_on_retry",
    /// Retries after a port timeout under a fresh request id.
    NewRequestIdAfterTimeout => "new_request_id_after_timeout",
    /// Retries after a dead Binder under a fresh request id.
    NewRequestIdAfterDisconnect => "new_request_id_after_disconnect",
    /// Retries errors whose `retryable` is false.
    RetriesNotRetryable => "retries_not_retryable",
    /// Retries after its own backoff, ignoring `retry_after_ms`.
    IgnoresRetryAfter => "ignores_retry_after",
    /// Re-sends a call answered AUTH_REQUIRED / USER_ACTION_REQUIRED when no
    /// user acted.
    RetriesUserAction => "retries_user_action",
    // ---- confirmation (§4.3)
    /// Resumes after a resolution under a fresh request id.
    ResumeWithNewRequestId => "resume_with_new_request_id",
    /// Resumes with the resume token without launching the resolution.
    ResumeWithoutResolution => "resume_without_resolution",
    // ---- operations (§4.4)
    /// Takes progress `current == total` for success.
    ProgressTakenAsSuccess => "progress_taken_as_success",
    /// Reports an operation cancelled as soon as `cancel_operation` is
    /// accepted, without querying its terminal state.
    StopsPollingAfterCancel => "stops_polling_after_cancel",
    // ---- file results (§4.5)
    /// Accepts a file whose length differs from `size_bytes`.
    FileSizeNotChecked => "file_size_not_checked",
    /// Accepts a file whose SHA-256 differs from `sha256`.
    FileSha256NotChecked => "file_sha256_not_checked",
    /// Reads exactly `size_bytes`, so bytes beyond the declared size go
    /// unnoticed.
    FileTailNotRead => "file_tail_not_read",
    /// Reads as much as the Provider declares, with no local cap.
    FileReadUncapped => "file_read_uncapped",
    /// Leaves the result descriptor open.
    FileFdNotClosed => "file_fd_not_closed",
    // ---- untrusted Provider data (§4.2, §7.3)
    /// Accepts Provider text of any length.
    TextLengthUnbounded => "text_length_unbounded",
    /// Accepts Provider JSON of any nesting depth.
    JsonDepthUnbounded => "json_depth_unbounded",
    /// Hands on results without checking them against the output schema.
    OutputSchemaNotChecked => "output_schema_not_checked",
    /// Panics on an error code it does not know.
    UnknownErrorCodePanics => "unknown_error_code_panics",
    /// Crashes when a call fails because the Provider's answer was larger
    /// than one Binder transaction carries.
    OversizedAnswerCrashes => "oversized_answer_crashes",
    /// Executes a tool a Provider's result text names ("call TOOL").
    ObeysProviderText => "obeys_provider_text",
    /// Executes any other tool a successful result names, however phrased
    /// (a quoted "SYSTEM:" block, a bare tool name).
    ObeysToolNamesInResults => "obeys_tool_names_in_results",
    /// Executes a tool an error message names ("to recover, run TOOL").
    ObeysErrorText => "obeys_error_text",
    /// Executes, before a tool, the tools its description names ("always
    /// invoke TOOL first").
    ObeysDescriptionText => "obeys_description_text",
    /// Executes, before a tool, the tools its description tells it to
    /// "call" ("call TOOL", not only "invoke TOOL first").
    ObeysDescriptionCall => "obeys_description_call",
    /// Executes a tool that Provider text (a description, a result, an
    /// error) tells it in Chinese to call or run ("请先调用 TOOL",
    /// "必须执行 TOOL").
    ObeysChineseInstructions => "obeys_chinese_instructions",
}

impl fmt::Display for ConsumerMutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for f in ConsumerMutant::ALL {
            assert_eq!(ConsumerMutant::parse(f.name()), Some(*f));
            assert!(seen.insert(f.name()), "{f}");
        }
        assert!(ConsumerMutant::ALL.len() >= 20);
    }
}
