//! Run pinning: the configuration a run's verdicts depend on, as named
//! fields and their RFC 8785 hash.
//!
//! Two runs with the same pin ran the same suite, with the same profile,
//! against the same Provider build as far as the device tells (package,
//! manifest, tool catalog revision, negotiated version and capabilities).
//! A run that is continued later must have the pin of the run it continues:
//! [`Pin::differences`] names every field that moved, so a refusal can say
//! which. Seeds and case filters are not pinned: they select and name the
//! run's calls, they do not change what a verdict means.
//!
//! No secret goes in: the profile's fields are configuration (tool names,
//! args, selectors, timings) and only its digest is recorded. The Provider's
//! build is pinned by what is known of it: its manifest and catalog
//! revision (which §3.3 makes change with the tools) always, the digests of
//! its signing certificates when the device reports them (probe-wire
//! extension `signing_cert_sha256` of `discover`), and the SHA-256 of its
//! APK when the harness installs it (`install=`).

use crate::config::RunConfig;
use cetp_vectors::device::{HelloInfo, Target};
use cetp_vectors::interp::Env;
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// What negotiating with every capability offered gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Negotiated {
    /// The protocol version agreed (§2.2).
    pub version: Option<i64>,
    /// The capabilities granted (§2.3).
    pub capabilities: BTreeSet<String>,
    /// `revision` of the tool list in that session.
    pub revision: Option<String>,
}

/// The pinned fields of a run, by name.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pin {
    /// Each pinned input by name (`harness`, `vectors`, `profile`, `package`, …).
    pub fields: BTreeMap<String, Json>,
}

impl Pin {
    /// RFC 8785 SHA-256 of the fields.
    pub fn hash(&self) -> String {
        cetp_proto::canonical::canonical_hash(&json!(self.fields)).unwrap_or_default()
    }

    /// Names of the fields whose values differ, or that only one side has.
    pub fn differences(&self, other: &Pin) -> Vec<String> {
        let names: BTreeSet<&String> = self.fields.keys().chain(other.fields.keys()).collect();
        names
            .into_iter()
            .filter(|n| self.fields.get(*n) != other.fields.get(*n))
            .cloned()
            .collect()
    }
}

/// The fields of a pin that name the Provider's build (what the device
/// tells of it): two devices whose pins differ in one of them run different
/// Providers, and one run of several devices (`cetp run`, `cetp fuzz`)
/// refuses them. The others name the device (`target`, `device`) or the
/// run's own configuration, the same on every device of one run.
pub const BUILD_FIELDS: &[&str] = &[
    "package",
    "authority",
    "manifest",
    "signing_cert",
    "apk_sha256",
    "negotiated_version",
    "capabilities",
    "revision",
];

/// The build fields in which `b` differs from `a`.
pub fn build_differences(a: &Pin, b: &Pin) -> Vec<String> {
    BUILD_FIELDS
        .iter()
        .filter(|f| a.fields.get(**f) != b.fields.get(**f))
        .map(|f| f.to_string())
        .collect()
}

/// The pin of a run: harness, vectors, profile, and what the target said
/// of its build (`identified`, `negotiated`), where known.
pub fn pin(
    suite: &Suite,
    target: &Target,
    profile: &Profile,
    cfg: &RunConfig,
    identified: Option<(&Env, Option<&HelloInfo>)>,
    negotiated: Option<&Negotiated>,
) -> Pin {
    let mut f = BTreeMap::new();
    f.insert("harness".to_string(), json!(cfg.harness_version));
    f.insert("vectors".to_string(), json!(suite.fingerprint));
    // The Debug form is deterministic (the profile holds no hash maps) and
    // covers every field; the harness version pins its shape.
    f.insert(
        "profile".to_string(),
        json!(cetp_proto::canonical::sha256_hex(
            format!("{profile:?}").as_bytes()
        )),
    );
    f.insert("target".to_string(), json!(target.label));
    if let Some((env, hello)) = identified {
        f.insert("package".to_string(), json!(env.package));
        f.insert("authority".to_string(), json!(env.authority));
        f.insert(
            "manifest".to_string(),
            json!(env.manifest.as_ref().map(|m| &m.meta)),
        );
        if let Some(h) = hello {
            f.insert("device".to_string(), json!(h.fingerprint));
        }
        // Only a device that reports it (probe-wire `signing_cert_sha256`).
        if let Some(m) = env
            .manifest
            .as_ref()
            .filter(|m| !m.signing_cert_sha256.is_empty())
        {
            f.insert("signing_cert".to_string(), json!(m.signing_cert_sha256));
        }
    }
    if !cfg.provider_apks.is_empty() {
        f.insert("apk_sha256".to_string(), json!(cfg.provider_apks));
    }
    if let Some(n) = negotiated {
        f.insert("negotiated_version".to_string(), json!(n.version));
        f.insert("capabilities".to_string(), json!(n.capabilities));
        f.insert("revision".to_string(), json!(n.revision));
    }
    Pin { fields: f }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_each_moved_or_missing_field() {
        let a = Pin {
            fields: BTreeMap::from([
                ("revision".to_string(), json!("tools-1")),
                ("profile".to_string(), json!("ab")),
                ("harness".to_string(), json!("cetp 1")),
            ]),
        };
        let mut b = a.clone();
        assert!(a.differences(&b).is_empty());
        assert_eq!(a.hash(), b.hash());
        b.fields.insert("revision".into(), json!("tools-2"));
        b.fields.remove("profile");
        b.fields
            .insert("capabilities".into(), json!(["cancellation"]));
        assert_eq!(a.differences(&b), ["capabilities", "profile", "revision"]);
        assert_ne!(a.hash(), b.hash());
    }
}
