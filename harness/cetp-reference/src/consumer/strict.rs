//! The stricter JSON reading of the `strict_json` legal variant. RFC 8259
//! §4 says the member names of an object SHOULD be unique and leaves a
//! parser free to refuse an object that repeats one; serde_json keeps the
//! last. CETP v2 names no parser (§7.3 asks only that Provider data be
//! bounded and validated), so a Consumer that refuses such text takes a
//! latitude, and the Consumer suite must not charge it for that.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeSet;
use std::fmt;

/// The first member name repeated within one object of `text`, if any.
/// Text that is not JSON gives `None`: whether it parses is judged where
/// it is read. Depth and size are bounded before this runs (the screen's
/// depth check, and serde_json's own recursion limit).
pub(super) fn repeated_member(text: &str) -> Option<String> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_str(text);
    // An error here is either the repeat found (which stops the walk) or
    // text that is not JSON; `found` tells which.
    let _ = Probe { found: &mut found }.deserialize(&mut de);
    found
}

struct Probe<'f> {
    found: &'f mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(Probe {
                found: &mut *self.found,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = BTreeSet::new();
        while let Some(name) = map.next_key::<String>()? {
            if seen.contains(&name) {
                *self.found = Some(name);
                return Err(de::Error::custom("a member name repeated"));
            }
            map.next_value_seed(Probe {
                found: &mut *self.found,
            })?;
            seen.insert(name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::repeated_member;

    #[test]
    fn finds_a_repeat_at_any_depth_and_nothing_else() {
        assert_eq!(repeated_member(r#"{"a":1,"a":2}"#).as_deref(), Some("a"));
        assert_eq!(
            repeated_member(r#"{"x":[{"b":1},{"c":{"d":1,"d":null}}]}"#).as_deref(),
            Some("d")
        );
        // The same name in sibling objects is not a repeat.
        assert_eq!(repeated_member(r#"[{"a":1},{"a":2}]"#), None);
        assert_eq!(
            repeated_member(r#"{"a":"\u0061","b":[1,2.5,true,null]}"#),
            None
        );
        // Escapes are decoded before names are compared.
        assert_eq!(
            repeated_member(r#"{"a":1,"\u0061":2}"#).as_deref(),
            Some("a")
        );
        assert_eq!(repeated_member("not json"), None);
    }
}
