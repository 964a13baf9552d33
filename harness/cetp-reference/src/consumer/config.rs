//! What a Consumer offers and what it will put up with.

use super::mutant::ConsumerMutant;
use super::variant::ConsumerVariant;
use cetp_proto::bundle::MAX_JSON_DEPTH;
use cetp_proto::envelope::Capability;

/// Local resource caps. §2.2: the negotiated limits say what the protocol
/// allows, not what a Consumer must be ready to allocate, so every read of
/// Provider data is bounded here as well.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalLimits {
    /// Names and titles: provider name, tool and scope titles, ids (bytes).
    pub max_name_bytes: usize,
    /// Provider, tool and scope descriptions (bytes). Longer descriptors are
    /// refused: §7.3 says to bound Provider text, and a description is what
    /// an Agent would read.
    pub max_description_bytes: usize,
    /// Error and progress messages (bytes). Longer ones are cut, not refused:
    /// the error code is what the Consumer acts on.
    pub max_message_bytes: usize,
    /// Nesting depth of any JSON text from a Provider. Never deeper than
    /// [`MAX_JSON_DEPTH`], whatever is configured.
    pub max_json_depth: usize,
    /// Any JSON text inline in a Bundle (`data`, `error_details`), bytes.
    pub max_inline_bytes: usize,
    /// Largest file result the Consumer will read (§4.5 local read cap).
    pub max_file_bytes: u64,
    /// Largest `args` this Consumer sends, whatever the Provider allows.
    pub max_request_bytes: usize,
    /// Largest number of tools or scopes accepted from one Provider.
    pub max_items: usize,
}

impl LocalLimits {
    /// Nesting limit for JSON from the Provider: the configured one, never above the core's [`MAX_JSON_DEPTH`].
    pub fn json_depth(&self) -> usize {
        self.max_json_depth.min(MAX_JSON_DEPTH)
    }
}

impl Default for LocalLimits {
    fn default() -> Self {
        LocalLimits {
            max_name_bytes: 256,
            max_description_bytes: 4096,
            max_message_bytes: 1024,
            max_json_depth: 32,
            max_inline_bytes: 1024 * 1024,
            max_file_bytes: 16 * 1024 * 1024,
            max_request_bytes: 65_536,
            max_items: 256,
        }
    }
}

/// How the reference Consumer behaves: what it offers in `negotiate`, how it retries, waits and polls, its local limits, and the faults or latitudes switched on for the self-test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// Major versions offered in `negotiate`, sent in descending order (§2.2).
    pub versions: Vec<i32>,
    /// Optional capabilities offered (§2.3).
    pub capabilities: Vec<Capability>,
    /// Automatic retries of one request: after a retryable error (§5), and
    /// separately after a port timeout or a dead Binder (§6).
    pub max_retries: u32,
    /// Confirmation rounds (§4.3) one execution may go through.
    pub max_resolutions: u32,
    /// Wait before retrying when the Provider gave no `retry_after_ms`, and
    /// after a port timeout.
    pub default_backoff_ms: u64,
    /// `deadline_at_ms` of each request is now + this (device time), and the
    /// port waits as long.
    pub request_budget_ms: u64,
    /// Bound on one blocking Consumer call: retries, waits and polling
    /// together.
    pub execution_budget_ms: u64,
    /// Poll interval when a Provider gives no `poll_after_ms` (§4.4).
    pub default_poll_ms: u64,
    /// Floor under `poll_after_ms`, so a Provider saying 0 cannot make the
    /// Consumer spin.
    pub min_poll_ms: u64,
    /// Local bounds on what the Consumer accepts from a Provider, whatever was negotiated (§7.3).
    pub limits: LocalLimits,
    /// Seed of the request-id generator: equal seeds give equal ids, so runs
    /// replay exactly.
    pub uuid_seed: u64,
    /// Mutations switched on (none for the reference Consumer): each breaks
    /// one consumer-side requirement, for the self-test.
    pub faults: Vec<ConsumerMutant>,
    /// Legal variations switched on (none for the reference Consumer): each
    /// takes one latitude the spec leaves a Consumer, for the self-test.
    pub latitudes: Vec<ConsumerVariant>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            versions: vec![2, 1],
            capabilities: Capability::ALL.to_vec(),
            max_retries: 3,
            max_resolutions: 3,
            default_backoff_ms: 250,
            request_budget_ms: 30_000,
            execution_budget_ms: 600_000,
            default_poll_ms: 1_000,
            min_poll_ms: 50,
            limits: LocalLimits::default(),
            uuid_seed: 0x00c3_e7b2_0000_0001,
            faults: Vec::new(),
            latitudes: Vec::new(),
        }
    }
}

impl ConsumerConfig {
    /// This configuration taking latitude `l`: its settings, and the switch
    /// for the behaviour it changes (`Consumer::takes`).
    pub fn with_latitude(mut self, l: ConsumerVariant) -> Self {
        use ConsumerVariant as L;
        let lim = &mut self.limits;
        match l {
            L::TightTextBounds => {
                lim.max_name_bytes = 128;
                lim.max_description_bytes = 1024;
                lim.max_message_bytes = 256;
            }
            L::GenerousTextBounds => {
                lim.max_name_bytes = 1024;
                lim.max_description_bytes = 1024 * 1024;
            }
            L::ShallowJson => lim.max_json_depth = 16,
            L::DeepJson => lim.max_json_depth = MAX_JSON_DEPTH,
            L::SmallInlineResults => lim.max_inline_bytes = 64 * 1024,
            L::SmallFileCap => lim.max_file_bytes = 1024 * 1024,
            L::LargeFileCap => lim.max_file_bytes = 256 * 1024 * 1024,
            L::FewItems => lim.max_items = 32,
            L::SingleRetry => self.max_retries = 1,
            L::NoAutomaticRetry => self.max_retries = 0,
            L::ExtraRetryWait => self.default_backoff_ms = 2_000,
            L::SlowPolling => {
                self.default_poll_ms = 5_000;
                self.min_poll_ms = 500;
            }
            L::NoOptionalCapabilities => self.capabilities = Vec::new(),
            L::FilesOnly => self.capabilities = vec![Capability::LargeResults],
            L::V2Only => self.versions = vec![2],
            L::OneConfirmationRound => self.max_resolutions = 1,
            L::ShortRequestBudget => self.request_budget_ms = 10_000,
            // Behaviours, switched where they act (`Consumer::takes`).
            L::EagerToolList | L::CancelsAbandoned => {}
        }
        if !self.latitudes.contains(&l) {
            self.latitudes.push(l);
        }
        self
    }
}

/// Where request ids come from. Every id must be a UUID (§4.1); the
/// reference Consumer makes version-4 ones.
pub trait UuidSource: Send {
    /// A fresh request id, a UUID (§4.1).
    fn next_uuid(&mut self) -> String;
}

/// Deterministic version-4 UUIDs from a seed (SplitMix64). Not for secrets:
/// a request id is an idempotency key, not a credential.
#[derive(Clone, Debug)]
pub struct SeededUuids {
    state: u64,
}

impl SeededUuids {
    /// A generator whose ids are fixed by `seed`, so a run replays with the same ids.
    pub fn new(seed: u64) -> Self {
        SeededUuids { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl UuidSource for SeededUuids {
    fn next_uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        uuid_v4_from_bytes(bytes)
    }
}

/// Formats 16 random bytes as a version-4, RFC 4122 variant UUID.
pub fn uuid_v4_from_bytes(b: [u8; 16]) -> String {
    uuid::Builder::from_random_bytes(b).into_uuid().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::envelope::is_uuid;

    #[test]
    fn seeded_uuids_are_v4_and_repeatable() {
        let mut a = SeededUuids::new(7);
        let mut b = SeededUuids::new(7);
        let ids: Vec<String> = (0..32).map(|_| a.next_uuid()).collect();
        for id in &ids {
            assert!(is_uuid(id), "{id}");
            assert_eq!(&id[14..15], "4");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
            assert_eq!(*id, b.next_uuid());
        }
        let unique: std::collections::BTreeSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn depth_never_exceeds_the_core_limit() {
        let l = LocalLimits {
            max_json_depth: 10_000,
            ..LocalLimits::default()
        };
        assert_eq!(l.json_depth(), MAX_JSON_DEPTH);
    }
}
