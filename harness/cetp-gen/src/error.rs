use std::fmt;

/// Why no value could be generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The keywords admit no value (`minimum` above `maximum`, `type: []`,
    /// the schema `false`, an `enum` none of whose members fits).
    Unsatisfiable,
    /// Values exist but this generator cannot build them (a look-around in
    /// `pattern`, `$dynamicRef`, a bound past the generator's limits).
    Unsupported,
    /// Every value nests deeper than the generator's depth bound (a `$ref`
    /// cycle with no way out).
    TooDeep,
    /// No value was found within the generator's budget (see
    /// [`crate::Budget`]): the filter named rejected every value drawn, as
    /// happens when keywords contradict each other in a way construction
    /// does not see, or construction itself took too long.
    Exhausted,
    /// The schema itself is broken (a `$ref` to nowhere, a keyword the
    /// validator refuses).
    Invalid,
}

/// A schema that cannot be satisfied or generated, naming the keyword and
/// the schema location (a JSON pointer, through `$ref` as the JSON Schema
/// output format's keywordLocation does) that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenError {
    /// Why: unsatisfiable, unsupported, too deep, or over the work budget.
    pub kind: Kind,
    /// The keyword that cannot be met (`pattern`, `$ref`, …).
    pub keyword: String,
    /// Where the keyword is, as a JSON pointer into the schema.
    pub pointer: String,
    /// What is wrong with it, for a person.
    pub message: String,
}

impl GenError {
    pub(crate) fn new(
        kind: Kind,
        keyword: &str,
        pointer: &str,
        message: impl Into<String>,
    ) -> GenError {
        GenError {
            kind,
            keyword: keyword.to_string(),
            pointer: pointer.to_string(),
            message: message.into(),
        }
    }

    /// An error that only rules out one alternative (an optional property, an
    /// `anyOf` branch, an array longer than some index) rather than the
    /// whole value.
    pub(crate) fn is_local(&self) -> bool {
        matches!(
            self.kind,
            Kind::Unsatisfiable | Kind::TooDeep | Kind::Exhausted
        )
    }
}

fn root_or(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the schema root"
    } else {
        pointer
    }
}

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot generate a value for {}: `{}` {}",
            root_or(&self.pointer),
            self.keyword,
            self.message
        )
    }
}

impl std::error::Error for GenError {}

/// The one constraint an invalid value breaks: the schema location holding
/// the keyword, and the keyword (`/properties/count maximum`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Violation {
    /// The schema location holding the keyword (a JSON pointer).
    pub pointer: String,
    /// The keyword the value breaks.
    pub keyword: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The root's own keywords print bare ("type"), as in "/properties/x type".
        if self.pointer.is_empty() {
            f.write_str(&self.keyword)
        } else {
            write!(f, "{} {}", self.pointer, self.keyword)
        }
    }
}
