//! Consumer legal variants: named switches that each make the reference
//! Consumer take one latitude the spec leaves a Consumer (a bound it does
//! not fix, a retry or poll schedule within what it requires, a capability
//! or version it need not use).
//!
//! They are the dual of [`super::ConsumerMutant`]: the Consumer suite must
//! kill every Consumer mutant and must pass every Consumer legal variant,
//! which is how a false verdict of the suite is caught before a vendor's
//! Consumer meets it. A latitude is either a setting
//! ([`super::ConsumerConfig::with_latitude`]) or a behaviour checked at one
//! place of the Consumer (`self.takes(ConsumerVariant::X)`). The clause
//! that leaves each choice lives as data in
//! `vectors/variants/consumer-variants.json`, which a test keeps in step
//! with [`ConsumerVariant::ALL`].

macro_rules! consumer_variants {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// One latitude of the reference Consumer.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ConsumerVariant { $( $(#[$doc])* $variant, )* }

        impl ConsumerVariant {
            /// Every latitude, in a stable order.
            pub const ALL: &'static [ConsumerVariant] = &[ $( ConsumerVariant::$variant, )* ];

            /// Stable snake_case name (the variant's id in data and reports).
            pub fn name(self) -> &'static str {
                match self { $( ConsumerVariant::$variant => $name, )* }
            }

            /// The latitude of this name; `None` for an unknown name.
            pub fn parse(name: &str) -> Option<ConsumerVariant> {
                match name { $( $name => Some(ConsumerVariant::$variant), )* _ => None }
            }
        }
    };
}

consumer_variants! {
    // ---- bounds on Provider data (§2.2, §4.5, §7.3: required, no figure)
    /// Tighter text bounds: names 128 bytes, descriptions 1 KiB, messages 256.
    TightTextBounds => "tight_text_bounds",
    /// Looser text bounds: names 1 KiB, descriptions 1 MiB.
    GenerousTextBounds => "generous_text_bounds",
    /// Provider JSON at most 16 levels deep.
    ShallowJson => "shallow_json",
    /// Provider JSON up to the core's 64 levels.
    DeepJson => "deep_json",
    /// Inline results and details of at most 64 KiB.
    SmallInlineResults => "small_inline_results",
    /// File results read up to 1 MiB.
    SmallFileCap => "small_file_cap",
    /// File results read up to 256 MiB.
    LargeFileCap => "large_file_cap",
    /// At most 32 tools or scopes from one Provider.
    FewItems => "few_items",
    // ---- retries (§5, §6: only retryable, never before retry_after_ms)
    /// Retries a retryable error once, not three times.
    SingleRetry => "single_retry",
    /// Never retries on its own: errors reach the agent.
    NoAutomaticRetry => "no_automatic_retry",
    /// Waits `retry_after_ms` plus its own backoff (2 s) before a retry.
    ExtraRetryWait => "extra_retry_wait",
    // ---- operations (§4.4: poll_after_ms is the earliest next query)
    /// Polls at twice the Provider's `poll_after_ms`, 5 s without one.
    SlowPolling => "slow_polling",
    /// Cancels an operation it stops waiting for (its budget ran out),
    /// then polls it to a terminal state (§4.4: cancellation is a MAY).
    CancelsAbandoned => "cancels_abandoned",
    // ---- negotiation (§2.2, §2.3, §8)
    /// Offers no optional capability.
    NoOptionalCapabilities => "no_optional_capabilities",
    /// Offers large_results only.
    FilesOnly => "files_only",
    /// Speaks v2 only: never uses v1, even with a v1-only Provider.
    V2Only => "v2_only",
    /// Lists tools and checks the revision right after each negotiation,
    /// not when it first needs the list (§3.3: at least once per new
    /// negotiation, at a moment it does not fix).
    EagerToolList => "eager_tool_list",
    // ---- confirmation and budgets (§4.1, §4.3)
    /// One confirmation round per execution.
    OneConfirmationRound => "one_confirmation_round",
    /// Gives each request 10 s (`deadline_at_ms`) instead of 30 s.
    ShortRequestBudget => "short_request_budget",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for l in ConsumerVariant::ALL {
            assert_eq!(ConsumerVariant::parse(l.name()), Some(*l));
            assert!(seen.insert(l.name()), "{l:?}");
        }
        assert!(ConsumerVariant::ALL.len() >= 15);
    }
}
