//! CI partitions (`cetp run --partition slice:M/N`, as cargo-nextest's
//! `--partition`): a deterministic part of the selected Provider cases, so
//! that N CI jobs each run one part and `cetp merge` ([`crate::merge`])
//! joins their reports into one.
//!
//! A partition is taken after `--only`/`--skip`, from the case ids alone,
//! so every machine computes the same parts:
//! - `slice:M/N`: the selected ids sorted, every Nth from the Mth. Stable
//!   for one suite (one vectors fingerprint, which the pin names); the
//!   parts stay within one case of each other in size, and each family
//!   (`NEG-*`, `IDEM-*`) is spread over all of them.
//! - `hash:M/N`: by the SHA-256 of the id. A case keeps its partition when
//!   other cases are added or removed (across releases of the suite), at
//!   the price of uneven parts.
//!
//! `LOCK-001` (`--lock`) runs in partition 1 only. The checks are judged by
//! each partition over the answers it saw; the merge combines them. A
//! partition judges the baseline entries of its own cases only
//! ([`judges_stale`]): whether an entry of another part's case, or of a
//! check, still fails is for the merge to say.
//!
//! A partition is not pinned ([`crate::pin`]): like a filter, it selects the
//! run's calls and does not change what a verdict means. It never
//! establishes the §9 claim alone: only a complete merge can.

use cetp_vectors::event::{Claim, Event};
pub use cetp_vectors::event::{MergedPart, Scheme};
use cetp_vectors::suite::Suite;
use cetp_vectors::suite::LOCK_CASE_ID;
use cetp_vectors::vector::Case;
use serde::{Deserialize, Serialize};

/// The largest N accepted: far beyond any CI matrix, small enough that
/// every count fits anywhere.
pub const MAX_COUNT: u32 = 10_000;

/// Partition `index` (1-based) of `count`, by `scheme`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition {
    /// How the cases are split.
    pub scheme: Scheme,
    /// Which part (1-based).
    pub index: u32,
    /// How many parts.
    pub count: u32,
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}/{}", self.scheme.as_str(), self.index, self.count)
    }
}

impl std::str::FromStr for Partition {
    type Err = String;

    /// `slice:M/N` or `hash:M/N`, M in 1..=N.
    fn from_str(s: &str) -> Result<Partition, String> {
        let expected = "expected slice:M/N or hash:M/N with M in 1..=N (e.g. slice:2/4)";
        let (scheme, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("partition {s:?}: {expected}"))?;
        let scheme = match scheme {
            "slice" => Scheme::Slice,
            "hash" => Scheme::Hash,
            other => {
                return Err(format!(
                    "partition {s:?}: unknown scheme {other:?}; {expected}"
                ))
            }
        };
        let (m, n) = rest
            .split_once('/')
            .ok_or_else(|| format!("partition {s:?}: {expected}"))?;
        let number = |what: &str, t: &str| {
            // Digits only: no sign, no space, no `0x`.
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "partition {s:?}: {what} {t:?} is not a whole number; {expected}"
                ));
            }
            t.parse::<u32>()
                .ok()
                .filter(|v| *v <= MAX_COUNT)
                .ok_or_else(|| format!("partition {s:?}: {what} is over {MAX_COUNT}"))
        };
        let (index, count) = (number("M", m)?, number("N", n)?);
        if count == 0 {
            return Err(format!("partition {s:?}: N must be at least 1"));
        }
        if index == 0 || index > count {
            return Err(format!(
                "partition {s:?}: M must be in 1..={count} (partitions are numbered from 1)"
            ));
        }
        Ok(Partition {
            scheme,
            index,
            count,
        })
    }
}

/// Which of `count` partitions (0-based) an id falls in by its hash: the
/// first 8 bytes of its SHA-256, so every machine and release agree.
fn hash_bucket(id: &str, count: u32) -> u32 {
    let hex = cetp_proto::canonical::sha256_hex(id.as_bytes());
    let h = u64::from_str_radix(&hex[..16], 16).unwrap_or(0);
    (h % u64::from(count)) as u32
}

impl Partition {
    /// Whether the `k`th of `ids` belongs to this partition.
    fn keeps(&self, ids: &[&str]) -> Vec<bool> {
        let slot = self.index - 1;
        match self.scheme {
            Scheme::Hash => ids
                .iter()
                .map(|id| hash_bucket(id, self.count) == slot)
                .collect(),
            Scheme::Slice => {
                let mut order: Vec<usize> = (0..ids.len()).collect();
                order.sort_by(|&a, &b| ids[a].cmp(ids[b]).then(a.cmp(&b)));
                let mut keep = vec![false; ids.len()];
                for (rank, &k) in order.iter().enumerate() {
                    keep[k] = rank as u64 % u64::from(self.count) == u64::from(slot);
                }
                keep
            }
        }
    }

    /// This partition's part of `items` (the selection after
    /// `--only`/`--skip`), in their order.
    pub fn apply<T>(&self, items: Vec<T>, id: impl Fn(&T) -> &str) -> Vec<T> {
        let keep = {
            let ids: Vec<&str> = items.iter().map(&id).collect();
            self.keeps(&ids)
        };
        items
            .into_iter()
            .zip(keep)
            .filter_map(|(item, k)| k.then_some(item))
            .collect()
    }

    /// `LOCK-001` runs once, in partition 1.
    pub fn runs_lock_case(&self) -> bool {
        self.index == 1
    }

    /// The event that records the partition, right after `RunStarted`.
    pub fn event(&self) -> Event {
        Event::RunPartition {
            scheme: self.scheme,
            count: self.count,
            index: Some(self.index),
            merged: Vec::new(),
        }
    }
}

/// Whether a partitioned run judges baseline entry `id` stale: only for a
/// case of its own part (`cases`, and `LOCK-001` in partition 1), or an id
/// that names nothing. A case of another part, or a check (judged over
/// every part's answers), is left to `cetp merge`. An unpartitioned run
/// judges every entry.
pub fn judges_stale(
    partition: Option<Partition>,
    cases: &[&Case],
    suite: &Suite,
    id: &str,
) -> bool {
    let Some(p) = partition else {
        return true;
    };
    if id == LOCK_CASE_ID {
        return p.runs_lock_case();
    }
    if cases.iter().any(|c| c.id == id) {
        return true;
    }
    !suite.cases.iter().any(|c| c.id == id) && !suite.checks.iter().any(|c| c.id == id)
}

/// The claim of a partitioned run: none (the statement says why and how to
/// get one). `claim` was made with `filtered` set; `filtered_too`: the run
/// was also filtered with `--only`/`--skip`; `identified`: the target was.
pub fn partial_claim(
    mut claim: Claim,
    partition: Option<Partition>,
    filtered_too: bool,
    identified: bool,
) -> Claim {
    let Some(p) = partition else { return claim };
    if !identified {
        return claim;
    }
    claim.statement = format!(
        "No claim: partition {p} runs a part of the cases{}; `cetp merge` of all {} partitions can establish it (§9).",
        if filtered_too {
            ", of a run filtered with --only/--skip"
        } else {
            ""
        },
        p.count
    );
    if !claim.fixes.is_empty() {
        claim.fixes.clear();
        if filtered_too {
            claim
                .fixes
                .push("run every core case: drop --only/--skip (§9)".into());
        }
        claim.fixes.push(format!(
            "merge the reports of all {} partitions: cetp merge DIR… --report-dir OUT (§9)",
            p.count
        ));
    }
    claim
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Partition {
        s.parse().unwrap()
    }

    #[test]
    fn bad_partitions_say_what_is_wrong() {
        for (bad, says) in [
            ("slice:0/4", "M must be in 1..=4"),
            ("slice:5/4", "M must be in 1..=4"),
            ("slice:1/0", "N must be at least 1"),
            ("count:1/4", "unknown scheme \"count\""),
            ("slice:1-4", "expected slice:M/N"),
            ("2/4", "expected slice:M/N"),
            ("slice:+1/4", "\"+1\" is not a whole number"),
            ("slice:a/4", "is not a whole number"),
            ("slice:1/", "\"\" is not a whole number"),
            ("hash:1/99999999999", "N is over 10000"),
            ("", "expected slice:M/N"),
        ] {
            let e = bad.parse::<Partition>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(
            p("hash:3/7"),
            Partition {
                scheme: Scheme::Hash,
                index: 3,
                count: 7
            }
        );
        assert_eq!(p("slice:1/1").to_string(), "slice:1/1");
    }

    #[test]
    fn the_partitions_of_a_selection_are_disjoint_and_cover_it() {
        let ids: Vec<String> = (0..53)
            .map(|i| format!("{}-{:03}", ["NEG", "EXE", "IDEM"][i % 3], i))
            .collect();
        for scheme in ["slice", "hash"] {
            for n in [1u32, 2, 3, 4, 7, 60] {
                let mut seen: Vec<&String> = Vec::new();
                let mut sizes = Vec::new();
                for m in 1..=n {
                    let part = p(&format!("{scheme}:{m}/{n}")).apply(ids.iter().collect(), |s| s);
                    // Kept in the selection's order.
                    let mut sorted_by_pos = part.clone();
                    sorted_by_pos.sort_by_key(|s| ids.iter().position(|i| i == *s));
                    assert_eq!(part, sorted_by_pos);
                    sizes.push(part.len());
                    seen.extend(part);
                }
                seen.sort();
                let mut all: Vec<&String> = ids.iter().collect();
                all.sort();
                assert_eq!(seen, all, "{scheme} N={n}");
                if scheme == "slice" {
                    let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                    assert!(hi.unwrap() - lo.unwrap() <= 1, "{sizes:?}");
                }
            }
        }
    }

    #[test]
    fn a_slice_depends_on_the_sorted_ids_and_a_hash_on_the_id_alone() {
        let ids = ["C", "A", "D", "B"];
        // Sorted A B C D: slice 1/2 holds A and C, in the selection's order.
        assert_eq!(p("slice:1/2").apply(ids.to_vec(), |s| s), ["C", "A"]);
        assert_eq!(p("slice:2/2").apply(ids.to_vec(), |s| s), ["D", "B"]);
        // A hash partition keeps its cases when others come and go.
        let before = p("hash:2/3").apply(ids.to_vec(), |s| s);
        let more = ["C", "A", "E", "D", "B", "F"];
        let after = p("hash:2/3").apply(more.to_vec(), |s| s);
        assert!(before.iter().all(|id| after.contains(id)));
        // Fixed across machines and releases: the first 8 bytes of SHA-256.
        assert_eq!(hash_bucket("NEG-001", 4), hash_bucket("NEG-001", 4));
        let spread: std::collections::BTreeSet<u32> =
            (0..40).map(|i| hash_bucket(&format!("X-{i}"), 4)).collect();
        assert_eq!(spread.len(), 4);
    }

    #[test]
    fn a_partition_claims_nothing_and_says_how_to_claim() {
        let claim = Claim {
            v2_declared: true,
            filtered: true,
            statement: "No claim: a run filtered".into(),
            fixes: vec!["run every core case: drop --only/--skip (§9)".into()],
            ..Claim::default()
        };
        let c = partial_claim(claim.clone(), Some(p("slice:2/4")), false, true);
        assert!(!c.cetp_v2 && c.filtered);
        assert!(
            c.statement.contains("partition slice:2/4"),
            "{}",
            c.statement
        );
        assert_eq!(c.fixes.len(), 1);
        assert!(c.fixes[0].contains("all 4 partitions"), "{:?}", c.fixes);
        let c = partial_claim(claim.clone(), Some(p("slice:2/4")), true, true);
        assert_eq!(c.fixes.len(), 2);
        assert!(c.statement.contains("--only/--skip"));
        // No partition, or no target: unchanged.
        assert_eq!(partial_claim(claim.clone(), None, false, true), claim);
        assert_eq!(
            partial_claim(claim.clone(), Some(p("hash:1/2")), false, false),
            claim
        );
    }
}
