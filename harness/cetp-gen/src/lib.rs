//! Generation of JSON values from JSON Schema (2020-12 as CETP §3.2 allows
//! it: same-document `$ref`), as proptest strategies that shrink.
//!
//! [`valid`] makes values the schema accepts; [`invalid`] makes, per named
//! constraint, values that break that constraint and are valid everywhere
//! else. A schema that cannot be satisfied or generated is a [`GenError`]
//! naming the keyword and where it is.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//! use serde_json::json;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 9}},
//!     "required": ["count"],
//!     "additionalProperties": false
//! });
//! let mut runner = TestRunner::deterministic();
//! let value = cetp_gen::valid(&schema).unwrap().new_tree(&mut runner).unwrap().current();
//! assert!((1..=9).contains(&value["count"].as_i64().unwrap()));
//!
//! let broken: Vec<String> = cetp_gen::invalid(&schema)
//!     .unwrap()
//!     .into_iter()
//!     .map(|(v, _)| v.to_string())
//!     .collect();
//! assert!(broken.contains(&"/properties/count maximum".to_string()));
//! assert!(broken.contains(&"required".to_string()));
//! ```

mod budget;
mod doc;
mod error;
mod flat;
mod format;
mod invalid;
mod pattern;
mod strategy;

pub use budget::{Budget, Limits};
pub use error::{GenError, Kind, Violation};

use doc::{Doc, Loc};
use proptest::prelude::Rng;
use proptest::strategy::{BoxedStrategy, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value as Json;

/// A schema prepared for generation. Holds the validators it compiled, so
/// that [`Generator::valid`] and [`Generator::invalid`] share them.
///
/// All its work is bounded by a [`Budget`]: building the strategies, and
/// each value drawn from them, finish within it or fail with a
/// [`GenError`] of [`Kind::Exhausted`] naming the keyword that used it up.
/// The schema may come from a hostile Provider: nothing here waits on it
/// without a bound.
pub struct Generator {
    strategies: strategy::Gen,
}

impl Generator {
    /// A generator for `schema` with the default work budget; refuses a
    /// schema it cannot satisfy or support, naming the keyword.
    pub fn new(schema: &Json) -> Result<Generator, GenError> {
        Generator::with_budget(schema, Budget::default())
    }

    /// As [`Generator::new`], within `budget`.
    pub fn with_budget(schema: &Json, budget: Budget) -> Result<Generator, GenError> {
        Ok(Generator {
            strategies: strategy::Gen::new(Doc::new(schema)?, budget),
        })
    }

    /// Values the schema accepts. Each draw runs under the draw budget: a
    /// draw that uses it up fails (proptest's `new_tree` returns an error
    /// naming the keyword) instead of looping.
    pub fn valid(&self) -> Result<BoxedStrategy<Json>, GenError> {
        let s = self
            .strategies
            .building(|| self.strategies.strategy(&[Loc::root()], 0))?;
        // A schema the validator refuses has no valid values to speak of,
        // even when the parts generation looked at were fine.
        self.strategies.doc.validator(&Loc::root())?;
        Ok(self.budgeted(s))
    }

    /// Per constraint that some value can break, values that break it and
    /// nothing else the generator can tell apart; sorted by violation.
    pub fn invalid(&self) -> Result<Vec<(Violation, BoxedStrategy<Json>)>, GenError> {
        let all = self.strategies.building(|| self.strategies.invalid())?;
        Ok(all
            .into_iter()
            .map(|(v, s)| (v, self.budgeted(s)))
            .collect())
    }

    fn budgeted(&self, s: BoxedStrategy<Json>) -> BoxedStrategy<Json> {
        budget::Budgeted {
            inner: s,
            limits: self.strategies.budget.draw,
        }
        .boxed()
    }

    /// One value the schema accepts, drawn with `rng`, or the error naming
    /// why none could be (including a draw that used up its budget).
    pub fn draw_valid(&self, rng: &mut TestRng) -> Result<Json, GenError> {
        Ok(self.draw_valid_n(rng, 1)?.pop().expect("one value"))
    }

    /// `n` values the schema accepts.
    pub fn draw_valid_n(&self, rng: &mut TestRng, n: usize) -> Result<Vec<Json>, GenError> {
        let s = self.valid()?;
        let mut runner = runner(rng);
        (0..n).map(|_| draw(&s, &mut runner)).collect()
    }

    /// Per violation [`Generator::invalid`] offers, `n` values breaking it.
    pub fn draw_invalid(
        &self,
        rng: &mut TestRng,
        n: usize,
    ) -> Result<Vec<(Violation, Vec<Json>)>, GenError> {
        let mut runner = runner(rng);
        let mut out = Vec::new();
        for (v, s) in self.invalid()? {
            let xs = (0..n)
                .map(|_| draw(&s, &mut runner))
                .collect::<Result<Vec<_>, _>>()?;
            out.push((v, xs));
        }
        Ok(out)
    }
}

/// A runner seeded from `rng` whose reject count never ends a draw: the
/// draw budget does, by name.
fn runner(rng: &mut TestRng) -> TestRunner {
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    TestRunner::new_with_rng(
        Config {
            max_local_rejects: u32::MAX,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    )
}

fn draw(s: &BoxedStrategy<Json>, runner: &mut TestRunner) -> Result<Json, GenError> {
    budget::clear_last();
    s.new_tree(runner).map(|t| t.current()).map_err(|reason| {
        let (keyword, pointer) = budget::last_exhausted()
            .map_or((String::new(), String::new()), |l| (l.keyword, l.pointer));
        GenError {
            kind: Kind::Exhausted,
            keyword,
            pointer,
            message: format!("gave no value within the draw budget: {reason}"),
        }
    })
}

/// Values `schema` accepts.
pub fn valid(schema: &Json) -> Result<BoxedStrategy<Json>, GenError> {
    Generator::new(schema)?.valid()
}

/// For each constraint of `schema` that a value can break, the constraint
/// and a strategy of such values. Constraints no value can break (such as
/// `minLength: 0`) are not listed.
pub fn invalid(schema: &Json) -> Result<Vec<(Violation, BoxedStrategy<Json>)>, GenError> {
    Generator::new(schema)?.invalid()
}
