//! The schema document: where a sub-schema is, what `$ref` points to, and
//! validators for sub-schemas in the context of the whole document.

use crate::error::{GenError, Kind};
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// A sub-schema: `doc` is its JSON pointer in the document (what it is),
/// `eval` the keyword path that reached it through `$ref` (how errors and
/// violations name it, as the JSON Schema output format's keywordLocation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Loc {
    pub doc: String,
    pub eval: String,
}

pub(crate) fn escape(seg: &str) -> String {
    cetp_proto::pointer::escape(seg).into_owned()
}

impl Loc {
    pub fn root() -> Loc {
        Loc {
            doc: String::new(),
            eval: String::new(),
        }
    }

    pub fn child(&self, seg: &str) -> Loc {
        let seg = escape(seg);
        Loc {
            doc: format!("{}/{seg}", self.doc),
            eval: format!("{}/{seg}", self.eval),
        }
    }

    pub fn index(&self, i: usize) -> Loc {
        self.child(&i.to_string())
    }
}

/// The URI the document is registered under when a sub-schema validator is
/// built: the sub-schema is compiled as `{"$ref": ROOT#pointer}` so that its
/// own `$ref`s resolve against the whole document.
const ROOT_URI: &str = "urn:cetp-gen:root";

pub(crate) type Validator = Arc<jsonschema::Validator>;

pub(crate) struct Doc {
    pub root: Json,
    draft: jsonschema::Draft,
    validators: RefCell<HashMap<String, Validator>>,
    formats: RefCell<HashMap<String, Validator>>,
}

impl Doc {
    pub fn new(root: &Json) -> Result<Doc, GenError> {
        if let Some(v) = cetp_proto::schema::foreign_refs(root, "").first() {
            return Err(GenError::new(
                Kind::Unsupported,
                "$ref",
                v.at.trim_end_matches("/$ref"),
                "points outside the schema document, which CETP does not allow (§3.2)",
            ));
        }
        let dialect = root
            .get("$schema")
            .and_then(Json::as_str)
            .unwrap_or(cetp_proto::schema::DEFAULT_DIALECT);
        let draft = cetp_proto::schema::draft_for(dialect).ok_or_else(|| {
            GenError::new(
                Kind::Unsupported,
                "$schema",
                "",
                format!("names a dialect this generator does not know: {dialect:?}"),
            )
        })?;
        Ok(Doc {
            root: root.clone(),
            draft,
            validators: RefCell::new(HashMap::new()),
            formats: RefCell::new(HashMap::new()),
        })
    }

    pub fn node(&self, loc: &Loc) -> Option<&Json> {
        self.root.pointer(&loc.doc)
    }

    fn options<'i>(&self) -> jsonschema::ValidationOptions<'i> {
        jsonschema::options()
            .with_draft(self.draft)
            .should_validate_formats(true)
            .offline()
    }

    /// The validator of the sub-schema at `loc`, compiled once per document.
    pub fn validator(&self, loc: &Loc) -> Result<Validator, GenError> {
        if let Some(v) = self.validators.borrow().get(&loc.doc) {
            return Ok(v.clone());
        }
        let built = if loc.doc.is_empty() {
            self.options().build(&self.root)
        } else {
            let registry = jsonschema::Registry::new()
                .draft(self.draft)
                .add(ROOT_URI, &self.root)
                .and_then(|r| r.prepare())
                .map_err(|e| {
                    GenError::new(
                        Kind::Invalid,
                        "$ref",
                        &loc.eval,
                        format!("does not resolve: {e}"),
                    )
                })?;
            let wrapper = serde_json::json!({"$ref": format!("{ROOT_URI}#{}", cetp_proto::pointer::to_fragment(&loc.doc))});
            self.options().with_registry(&registry).build(&wrapper)
        };
        let v = Arc::new(built.map_err(|e| {
            let at = e.instance_path().to_string();
            let keyword = at.rsplit('/').next().unwrap_or("").to_string();
            GenError::new(
                Kind::Invalid,
                &keyword,
                at.rsplit_once('/').map(|(p, _)| p).unwrap_or(""),
                format!("makes the schema uncompilable: {e}"),
            )
        })?);
        self.validators
            .borrow_mut()
            .insert(loc.doc.clone(), v.clone());
        Ok(v)
    }

    /// A validator for `{"type": "string", "format": name}`: the judge of
    /// "this string is not a NAME".
    pub fn format_validator(&self, name: &str) -> Result<Validator, GenError> {
        if let Some(v) = self.formats.borrow().get(name) {
            return Ok(v.clone());
        }
        let v = Arc::new(
            self.options()
                .build(&serde_json::json!({"format": name}))
                .map_err(|e| GenError::new(Kind::Invalid, "format", "", e.to_string()))?,
        );
        self.formats
            .borrow_mut()
            .insert(name.to_string(), v.clone());
        Ok(v)
    }

    /// Where the `$ref` of the schema at `from` points, as a document pointer.
    pub fn resolve_ref(&self, from: &Loc, target: &str) -> Result<String, GenError> {
        let err = |msg: String| GenError::new(Kind::Invalid, "$ref", &from.eval, msg);
        let Some(frag) = target.strip_prefix('#') else {
            return Err(GenError::new(
                Kind::Unsupported,
                "$ref",
                &from.eval,
                format!("{target:?} is not a same-document reference"),
            ));
        };
        let frag = cetp_proto::pointer::from_fragment(frag)
            .ok_or_else(|| err(format!("{target:?} is not a valid URI fragment")))?;
        if frag.is_empty() || frag.starts_with('/') {
            return match self.root.pointer(&frag) {
                Some(_) => Ok(frag),
                None => Err(err(format!("points to nowhere: {target:?}"))),
            };
        }
        // A plain-name fragment: the schema with that `$anchor`.
        let mut found = None;
        find_anchor(&self.root, &frag, &mut String::new(), &mut found);
        found.ok_or_else(|| err(format!("points to nowhere: no `$anchor` named {frag:?}")))
    }
}

fn find_anchor(node: &Json, name: &str, at: &mut String, found: &mut Option<String>) {
    if found.is_some() {
        return;
    }
    match node {
        Json::Object(map) => {
            // A `$dynamicAnchor` is also a plain anchor for `$ref`.
            if map.get("$anchor").and_then(Json::as_str) == Some(name)
                || map.get("$dynamicAnchor").and_then(Json::as_str) == Some(name)
            {
                *found = Some(at.clone());
                return;
            }
            for (k, v) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&escape(k));
                find_anchor(v, name, at, found);
                at.truncate(len);
            }
        }
        Json::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                find_anchor(v, name, at, found);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// JSON Schema equality: numbers compare by value (1 equals 1.0), objects
/// regardless of key order. serde_json's `==` tells 1 from 1.0.
pub(crate) fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}
