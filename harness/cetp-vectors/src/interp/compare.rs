//! Judgements over bound values: answers that must agree or differ, token
//! shapes, revisions, the v1 view, and assertions.

use super::{short, CaseRunner, StepResult, Stop};
use crate::answer::describe;
use crate::template::{expand, expand_string};
use crate::vector::Assertion;
use serde_json::{json, Value as Json};

impl CaseRunner<'_> {
    pub(super) fn equal(&mut self, a: &str, b: &str) -> StepResult {
        let va = expand(&self.bindings, a).map_err(Stop::Infra)?;
        let vb = expand(&self.bindings, b).map_err(Stop::Infra)?;
        if va != vb {
            return Err(Stop::Fail(format!(
                "`{a}` is {} and `{b}` is {}; they must be equal",
                short(Some(&va)),
                short(Some(&vb))
            )));
        }
        Ok(())
    }

    pub(super) fn same(
        &mut self,
        a: &str,
        b: &str,
        pointers: &[String],
        different: bool,
        unless_code: &[String],
        if_status: Option<&str>,
    ) -> StepResult {
        let pointers: Vec<String> = if pointers.is_empty() {
            vec!["/status".into(), "/error_code".into(), "/data".into()]
        } else {
            pointers.to_vec()
        };
        let da = self.bound(a)?;
        let db = self.bound(b)?;
        let excused = |d: &Json| {
            d.get("error_code")
                .and_then(Json::as_str)
                .is_some_and(|c| unless_code.iter().any(|u| u == c))
        };
        if excused(&da) || excused(&db) {
            return Ok(());
        }
        if if_status.is_some_and(|s| db.get("status").and_then(Json::as_str) != Some(s)) {
            return Ok(());
        }
        // The lists of a descriptor answer are sets (§3.3): compared in one
        // order, whichever the Provider sent them in.
        let (sa, sb) = (as_sets(&da), as_sets(&db));
        let differing = pointers.iter().find(|p| sa.pointer(p) != sb.pointer(p));
        match (differing, different) {
            (Some(p), false) => Err(Stop::Fail(format!(
                "`{a}` ({}) and `{b}` ({}) differ at `{p}`: {} vs {}",
                describe(&da),
                describe(&db),
                short(da.pointer(p)),
                short(db.pointer(p))
            ))),
            (None, true) => Err(Stop::Fail(format!(
                "`{b}` repeats `{a}` exactly ({}), where a separate answer was due",
                describe(&db)
            ))),
            _ => Ok(()),
        }
    }

    pub(super) fn tokens_step(&mut self, tokens: &[String]) -> StepResult {
        let mut values = Vec::new();
        for t in tokens {
            values.push(expand_string(&self.bindings, t).map_err(Stop::Infra)?);
        }
        tokens_unpredictable(&values).map_err(Stop::Fail)
    }

    pub(super) fn revision_consistent(&mut self, a: &str, b: &str) -> StepResult {
        let da = self.bound(a)?;
        let db = self.bound(b)?;
        let tools = |d: &Json| {
            as_sets(d)
                .pointer("/data/tools")
                .map(|t| cetp_proto::canonical::canonical_hash(t).unwrap_or_default())
        };
        let rev = |d: &Json| d.pointer("/data/revision").cloned();
        if tools(&da) != tools(&db) && rev(&da) == rev(&db) {
            return Err(Stop::Fail(format!(
                "the tool lists of `{a}` and `{b}` differ but both carry revision {}",
                short(rev(&da).as_ref())
            )));
        }
        Ok(())
    }

    pub(super) fn v1_read_only(&mut self, v1: &str, v2: &str) -> StepResult {
        let d1 = self.bound(v1)?;
        let d2 = self.bound(v2)?;
        let names = d1
            .pointer("/data/tools")
            .and_then(Json::as_array)
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "v1 list_tools answered {} without a tools array",
                    describe(&d1)
                ))
            })?;
        let v2_tools = d2
            .pointer("/data/tools")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        for t in names {
            let name = t.get("name").and_then(Json::as_str).unwrap_or("");
            let effect = v2_tools
                .iter()
                .find(|x| x.get("name").and_then(Json::as_str) == Some(name))
                .and_then(|x| x.pointer("/annotations/effect"))
                .and_then(Json::as_str);
            match effect {
                Some("read") => {}
                Some(other) => {
                    return Err(Stop::Fail(format!(
                        "v1 list_tools lists {name:?}, whose v2 effect is {other}"
                    )))
                }
                None => {
                    return Err(Stop::Fail(format!(
                        "v1 list_tools lists {name:?}, which v2 does not describe as a read tool"
                    )))
                }
            }
        }
        Ok(())
    }

    pub(super) fn differ(&mut self, a: &str, b: &str) -> StepResult {
        let va = expand(&self.bindings, a).map_err(Stop::Infra)?;
        let vb = expand(&self.bindings, b).map_err(Stop::Infra)?;
        if va == vb {
            return Err(Stop::Fail(format!(
                "`{a}` and `{b}` are equal ({}), they must differ",
                short(Some(&va))
            )));
        }
        Ok(())
    }

    pub(super) fn assert_step(&mut self, value: &str, assertion: &Assertion) -> StepResult {
        let v = expand(&self.bindings, value).map_err(Stop::Infra)?;
        let doc = json!({ "value": v });
        let mut a = assertion.clone();
        a.pointer = format!("/value{}", assertion.pointer);
        check_assertion(&doc, &a).map_err(Stop::Fail)
    }
}

/// An answer document with the sets of its descriptor `data` in one order
/// ([`cetp_proto::descriptor::sets_in_order`]); other answers as they are.
fn as_sets(doc: &Json) -> Json {
    let mut d = doc.clone();
    if let Some(data) = d.get_mut("data") {
        if data.get("kind").is_none() {
            *data = cetp_proto::descriptor::sets_in_order(data);
        }
    }
    d
}

/// What "opaque and unpredictable" (§2.2) lets a black box see: no two
/// sessions share a token, and the part in which the tokens differ (after
/// their longest common prefix and suffix, such as a fixed header of a
/// signed token) is at least `MIN_VARYING_CHARS` characters in every
/// token and not a counter (digits that differ by one). Shapes and lengths
/// are otherwise the Provider's choice.
pub fn tokens_unpredictable(tokens: &[String]) -> Result<(), String> {
    for (i, a) in tokens.iter().enumerate() {
        if tokens[i + 1..].contains(a) {
            return Err(format!("two sessions got the same token {a:?}"));
        }
    }
    if tokens.len() < 2 {
        return Ok(());
    }
    let chars: Vec<Vec<char>> = tokens.iter().map(|t| t.chars().collect()).collect();
    let shortest = chars.iter().map(Vec::len).min().unwrap_or(0);
    let prefix = (0..shortest)
        .take_while(|&k| chars.iter().all(|c| c[k] == chars[0][k]))
        .count();
    let suffix = (0..shortest - prefix)
        .take_while(|&k| {
            chars
                .iter()
                .all(|c| c[c.len() - 1 - k] == chars[0][chars[0].len() - 1 - k])
        })
        .count();
    let middles: Vec<String> = chars
        .iter()
        .map(|c| c[prefix..c.len() - suffix].iter().collect())
        .collect();
    for (t, m) in tokens.iter().zip(&middles) {
        if m.chars().count() < MIN_VARYING_CHARS {
            return Err(format!(
                "session tokens differ only in {:?} of {t:?} ({} characters): predictable",
                m,
                m.chars().count()
            ));
        }
    }
    let numbers: Vec<Option<u128>> = middles.iter().map(|m| m.parse().ok()).collect();
    if numbers.iter().all(Option::is_some) {
        let mut n: Vec<u128> = numbers.into_iter().flatten().collect();
        n.sort_unstable();
        if n.windows(2).all(|w| w[1] - w[0] <= 1_000) {
            return Err(format!(
                "session tokens {:?} and {:?} differ by a small counter: predictable",
                tokens[0], tokens[1]
            ));
        }
    }
    Ok(())
}

/// Fewest characters in which every token must differ from the others: at
/// 4 bits a character (hex), still 48 bits.
pub const MIN_VARYING_CHARS: usize = 12;

/// Applies one assertion to a document.
pub fn check_assertion(doc: &Json, a: &Assertion) -> Result<(), String> {
    let v = doc.pointer(&a.pointer);
    if let Some(exists) = a.exists {
        if v.is_some() != exists {
            return Err(format!(
                "`{}` {} (found {})",
                a.pointer,
                if exists {
                    "must exist"
                } else {
                    "must not exist"
                },
                short(v)
            ));
        }
    }
    if let Some(eq) = &a.equals {
        if v != Some(eq) {
            return Err(format!(
                "`{}` must equal {eq}, found {}",
                a.pointer,
                short(v)
            ));
        }
    }
    if let Some(set) = &a.one_of {
        // `null` in the set also admits an absent member (a defaulted field).
        if !v.map_or(set.contains(&Json::Null), |v| set.contains(v)) {
            return Err(format!(
                "`{}` must be one of {}, found {}",
                a.pointer,
                Json::from(set.clone()),
                short(v)
            ));
        }
    }
    if let Some(ex) = &a.excludes {
        if let Some(Json::Array(items)) = v {
            if let Some(bad) = items.iter().find(|i| ex.contains(i)) {
                return Err(format!("`{}` must not contain {bad}", a.pointer));
            }
        }
    }
    let num = v.and_then(Json::as_f64);
    if let Some(min) = a.min {
        if !num.is_some_and(|n| n >= min) {
            return Err(format!(
                "`{}` must be ≥ {min}, found {}",
                a.pointer,
                short(v)
            ));
        }
    }
    if let Some(max) = a.max {
        if !num.is_some_and(|n| n <= max) {
            return Err(format!(
                "`{}` must be ≤ {max}, found {}",
                a.pointer,
                short(v)
            ));
        }
    }
    if let Some(inner) = &a.all {
        match v {
            Some(Json::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    check_assertion(item, inner)
                        .map_err(|e| format!("`{}/{i}`: {e}", a.pointer))?;
                }
            }
            _ => {
                return Err(format!(
                    "`{}` must be an array, found {}",
                    a.pointer,
                    short(v)
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn t(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    pub(super) fn tokens_of_any_opaque_shape_pass() {
        // Random hex, UUIDs and signed blobs with a shared header.
        tokens_unpredictable(&t(&[
            "9f86d081884c7d659a2feaa0c55ad015",
            "2c26b46b68ffc68ff99b453c1d304134",
        ]))
        .unwrap();
        tokens_unpredictable(&t(&[
            "123e4567-e89b-42d3-a456-426614174000",
            "f47ac10b-58cc-4372-a567-0e02b2c3d479",
        ]))
        .unwrap();
        tokens_unpredictable(&t(&[
            "eyJhbGciOiJIUzI1NiJ9.a8f5f167f44f4964e6c998dee827110c.sig1d2e3f4a5b6c",
            "eyJhbGciOiJIUzI1NiJ9.0cc175b9c0f1b6a831c399e269772661.sig9f8e7d6c5b4a",
        ]))
        .unwrap();
    }

    #[test]
    pub(super) fn counters_and_repeats_fail() {
        assert!(tokens_unpredictable(&t(&["session-1", "session-2"])).is_err());
        assert!(tokens_unpredictable(&t(&["tok-1733050000123", "tok-1733050000456"])).is_err());
        assert!(tokens_unpredictable(&t(&["abcdefabcdefabcdef", "abcdefabcdefabcdef"])).is_err());
        assert!(
            tokens_unpredictable(&t(&["sess-000000000001-end", "sess-000000000002-end"])).is_err()
        );
    }
}
