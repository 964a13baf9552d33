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

mod doc;
mod error;
mod flat;
mod format;
mod gen;
mod invalid;
mod pattern;

pub use error::{GenError, Kind, Violation};

use doc::{Doc, Loc};
use proptest::strategy::BoxedStrategy;
use serde_json::Value as Json;

/// A schema prepared for generation. Holds the validators it compiled, so
/// that [`Generator::valid`] and [`Generator::invalid`] share them.
pub struct Generator {
    gen: gen::Gen,
}

impl Generator {
    pub fn new(schema: &Json) -> Result<Generator, GenError> {
        Ok(Generator {
            gen: gen::Gen::new(Doc::new(schema)?),
        })
    }

    /// Values the schema accepts.
    pub fn valid(&self) -> Result<BoxedStrategy<Json>, GenError> {
        let s = self.gen.gen(&[Loc::root()], 0)?;
        // A schema the validator refuses has no valid values to speak of,
        // even when the parts generation looked at were fine.
        self.gen.doc.validator(&Loc::root())?;
        Ok(s)
    }

    /// Per constraint that some value can break, values that break it and
    /// nothing else the generator can tell apart; sorted by violation.
    pub fn invalid(&self) -> Result<Vec<(Violation, BoxedStrategy<Json>)>, GenError> {
        self.gen.invalid()
    }
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
