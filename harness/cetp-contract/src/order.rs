//! How the §3.4 annotation values compare: which change raises what a
//! Consumer must expect (breaking) and which lowers it (compatible).
//!
//! The spec names the values but orders only some of them implicitly
//! (§3.4: `delete`, `transaction`, `destructive` and `risk=high` each demand
//! `confirmation=always`). The orders below are our reading, kept as data so
//! that a reviewer can check them in one place. A value outside a table is
//! never guessed at: the change is breaking ("unclassified").

/// `risk`, lowest first (§3.4: the impact of a failed or mistaken call).
pub const RISK: &[&str] = &["low", "moderate", "high"];

/// `confirmation`, weakest first (§3.4, §4.3): moving left weakens it.
pub const CONFIRMATION: &[&str] = &["never", "provider_policy", "always"];

/// `execution`, narrowest first (§3.4): `sync_or_async` obliges a Consumer
/// to handle background operations (§4.4).
pub const EXECUTION: &[&str] = &["sync", "sync_or_async"];

/// `effect` ranks (§3.4). Only a move to `read` lowers an effect: `read`
/// tools change no business state. `create` and `update` share a rank, as
/// do `delete` and `transaction` (both demand `confirmation=always`): a move
/// between equal ranks changes the kind of effect, and a move between two
/// side effects is never a safe substitution for a Consumer that planned
/// around the old one, so every change but one to `read` is breaking.
pub const EFFECT_RANK: &[(&str, u8)] = &[
    ("read", 0),
    ("create", 1),
    ("update", 1),
    ("delete", 2),
    ("transaction", 2),
];

/// `sensitivity` of a scope (§3.2). Only `public` is below the others; the
/// rest are different kinds of data, not levels.
pub const SENSITIVITY_PUBLIC: &str = "public";

/// Effect classes of the tool-contract paper
/// (`background-tool-contracts.zh.md`), derived from the §3.4 annotations,
/// safest first. Raising the class is what "effect raised" means for a
/// Consumer's retry and reconciliation policy.
///
/// - `PURE`: `effect=read`; no business state changes (§3.4).
/// - `IDEMPOTENT`: a side effect that repeats to the same state
///   (`idempotent=true`).
/// - `REPLAYABLE`: a side effect the Provider de-duplicates by request id
///   (§6): safe to retry with the same `request_id` only (§4.1).
/// - `NON_RETRYABLE`: a non-idempotent `transaction`: an external
///   transaction may already be committed (§4.4 `CONFLICT`), so a Consumer
///   reconciles by querying, never by a new attempt.
/// - `UNKNOWN`: the annotations do not say (an unknown `effect`).
pub const EFFECT_CLASSES: &[&str] = &[
    "PURE",
    "IDEMPOTENT",
    "REPLAYABLE",
    "NON_RETRYABLE",
    "UNKNOWN",
];

/// The effect class of a tool from its `effect` and `idempotent` annotations.
pub fn effect_class(effect: &str, idempotent: bool) -> &'static str {
    match (effect, idempotent) {
        ("read", _) => "PURE",
        ("create" | "update" | "delete" | "transaction", true) => "IDEMPOTENT",
        ("transaction", false) => "NON_RETRYABLE",
        ("create" | "update" | "delete", false) => "REPLAYABLE",
        _ => "UNKNOWN",
    }
}

/// Position of `value` in `order`, `None` when the value is not in it.
pub fn rank(order: &[&str], value: &str) -> Option<usize> {
    order.iter().position(|v| *v == value)
}

/// The rank of `effect` in [`EFFECT_RANK`], `None` for a value not in it.
pub fn effect_rank(effect: &str) -> Option<u8> {
    EFFECT_RANK
        .iter()
        .find(|(e, _)| *e == effect)
        .map(|(_, r)| *r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::descriptor::{CONFIRMATIONS, EFFECTS, EXECUTIONS, RISKS, SENSITIVITIES};

    #[test]
    fn tables_cover_exactly_the_spec_enums() {
        let mut effects: Vec<&str> = EFFECT_RANK.iter().map(|(e, _)| *e).collect();
        effects.sort_unstable();
        let mut spec = EFFECTS.to_vec();
        spec.sort_unstable();
        assert_eq!(effects, spec);
        for (ours, theirs) in [
            (RISK, RISKS),
            (CONFIRMATION, CONFIRMATIONS),
            (EXECUTION, EXECUTIONS),
        ] {
            let (mut a, mut b) = (ours.to_vec(), theirs.to_vec());
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        }
        assert!(SENSITIVITIES.contains(&SENSITIVITY_PUBLIC));
    }

    #[test]
    fn every_spec_effect_has_a_known_class() {
        for e in EFFECTS {
            for idem in [false, true] {
                let c = effect_class(e, idem);
                assert_ne!(c, "UNKNOWN", "{e} {idem}");
                assert!(EFFECT_CLASSES.contains(&c));
            }
        }
        assert_eq!(effect_class("teleport", true), "UNKNOWN");
    }
}
