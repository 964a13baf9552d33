//! Discovery and v1 coexistence (§2.1, §8): what a manifest declares, and
//! which protocol a Consumer may use with it.

use crate::provider::ServiceManifest;
use std::collections::BTreeSet;
use std::fmt;

/// The intent action a CETP Provider's service is discovered by (§2.1, same as v1).
pub const ACTION_TOOL_PROVIDER: &str = "com.clawseed.action.TOOL_PROVIDER";
/// Service meta-data naming the ContentProvider authority the tools are called on (§2.1).
pub const META_AUTHORITY: &str = "com.clawseed.tools.authority";
/// Legacy single-version meta-data that v1 Consumers read (§2.1).
pub const META_VERSION: &str = "com.clawseed.tools.version";
/// Comma-separated set of supported major versions; authoritative when present (§2.1).
pub const META_VERSIONS: &str = "com.clawseed.tools.versions";

/// Where the version set came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionSource {
    /// `versions` present: it is authoritative (§2.1).
    Versions,
    /// Only `version`: read as the single supported version (§2.1).
    Version,
}

/// What a Provider's manifest declares once read and validated (§2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The ContentProvider authority CETP calls go to.
    pub authority: String,
    /// The major versions the Provider supports.
    pub versions: BTreeSet<i32>,
    /// Which meta-data field `versions` was read from.
    pub source: VersionSource,
    /// The legacy `version` field, when present.
    pub legacy_version: Option<i32>,
}

/// Why a manifest does not describe a usable CETP Provider (§2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiscoveryError {
    /// The authority meta-data is absent or empty.
    MissingAuthority,
    /// Neither `versions` nor `version` is declared.
    NoVersion,
    /// A version field whose text is not a list of positive integers.
    BadVersion {
        /// The meta-data key that is malformed.
        field: &'static str,
        /// Its text as declared.
        text: String,
    },
    /// The device reports (probe-wire `meta_types`) that Android compiled
    /// this value to a type that cannot be what the field holds: a Boolean
    /// or a Float is never a version, only a String names an authority,
    /// whatever the text Android prints back for it.
    WrongType {
        /// The meta-data key whose type is wrong.
        field: &'static str,
        /// The type Android compiled it to (`bool`, `float`, `int`, ...).
        compiled: String,
        /// Its text as Android prints it.
        text: String,
    },
    /// §2.1: the service and the ContentProvider of its authority belong to
    /// different packages (or no package owns the authority).
    PackageMismatch {
        /// Package of the discovered service.
        service_package: String,
        /// Package that owns the authority's ContentProvider, `None` when none does.
        authority_package: Option<String>,
    },
}

impl fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiscoveryError::MissingAuthority => write!(f, "meta-data {META_AUTHORITY} is missing"),
            DiscoveryError::NoVersion => {
                write!(f, "neither {META_VERSION} nor {META_VERSIONS} is declared")
            }
            DiscoveryError::BadVersion { field, text } => {
                write!(f, "meta-data {field} is not a version list: {text:?}")
            }
            DiscoveryError::WrongType {
                field,
                compiled,
                text,
            } => write!(
                f,
                "meta-data {field} was compiled to {} (printed back as {text:?}), not {}",
                article(compiled),
                if *field == META_AUTHORITY {
                    "a String"
                } else {
                    "a String or an Integer"
                }
            ),
            DiscoveryError::PackageMismatch {
                service_package,
                authority_package,
            } => write!(
                f,
                "service package {service_package:?} does not own the authority (owner: {})",
                authority_package.as_deref().unwrap_or("none")
            ),
        }
    }
}

impl std::error::Error for DiscoveryError {}

fn article(compiled: &str) -> String {
    match compiled {
        "int" => "an Integer".into(),
        "bool" => "a Boolean".into(),
        "float" => "a Float".into(),
        other => format!("a {other}"),
    }
}

/// Parses a discovered service's declarations, with the types Android
/// compiled its meta-data to when the device reports them
/// ([`ServiceManifest::meta_types`]): the authority must be a String, and
/// `version` / `versions` a String or an Integer (aapt2 compiles
/// `android:value="2"` to the Integer 2 and `"1,2"` to a String; an
/// Integer's text is Android's re-print, so its declared spelling, `"02"`
/// for instance, is not judged). Without types, as [`parse_declared`].
pub fn parse_manifest(m: &ServiceManifest) -> Result<Declared, DiscoveryError> {
    for (field, allowed) in [
        (META_AUTHORITY, &["string"][..]),
        (META_VERSION, &["string", "int"][..]),
        (META_VERSIONS, &["string", "int"][..]),
    ] {
        let (Some(text), Some(compiled)) = (m.meta.get(field), m.meta_type(field)) else {
            continue;
        };
        if !allowed.contains(&compiled) {
            return Err(DiscoveryError::WrongType {
                field,
                compiled: compiled.to_string(),
                text: text.clone(),
            });
        }
    }
    parse_declared(&m.meta)
}

fn parse_version(field: &'static str, text: &str) -> Result<i32, DiscoveryError> {
    let t = text.trim();
    match t.parse::<i32>() {
        Ok(v) if v >= 1 && !t.starts_with('+') => Ok(v),
        _ => Err(DiscoveryError::BadVersion {
            field,
            text: text.to_string(),
        }),
    }
}

/// Parses the version meta-data of one service. `versions` wins over
/// `version` when both are present.
pub fn parse_declared(
    meta: &std::collections::BTreeMap<String, String>,
) -> Result<Declared, DiscoveryError> {
    let authority = meta
        .get(META_AUTHORITY)
        .filter(|a| !a.trim().is_empty())
        .ok_or(DiscoveryError::MissingAuthority)?
        .clone();
    let legacy_version = meta
        .get(META_VERSION)
        .map(|v| parse_version(META_VERSION, v))
        .transpose()?;
    if let Some(list) = meta.get(META_VERSIONS) {
        let mut versions = BTreeSet::new();
        for part in list.split(',') {
            versions.insert(parse_version(META_VERSIONS, part)?);
        }
        return Ok(Declared {
            authority,
            versions,
            source: VersionSource::Versions,
            legacy_version,
        });
    }
    match legacy_version {
        Some(v) => Ok(Declared {
            authority,
            versions: [v].into(),
            source: VersionSource::Version,
            legacy_version,
        }),
        None => Err(DiscoveryError::NoVersion),
    }
}

/// §2.1: the discovering service and the ContentProvider must share a package.
pub fn check_same_package(m: &ServiceManifest) -> Result<(), DiscoveryError> {
    match &m.authority_package {
        Some(p) if *p == m.package => Ok(()),
        other => Err(DiscoveryError::PackageMismatch {
            service_package: m.package.clone(),
            authority_package: other.clone(),
        }),
    }
}

/// What a Consumer may do with a discovered Provider (§8 fallback rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// v2 is declared on both sides: negotiate, and never fall back to v1.
    NegotiateV2,
    /// Only v1 is declared: v1 is the only way (read-only tools).
    UseV1,
    /// Nothing usable in common.
    Unusable(String),
}

/// Which protocol a Consumer supporting `consumer_versions` must use with this Provider (§8 fallback rules: v1 only when v2 is not declared, never a downgrade).
pub fn plan(declared: &Declared, consumer_versions: &[i32]) -> Plan {
    if declared.versions.contains(&2) && consumer_versions.contains(&2) {
        Plan::NegotiateV2
    } else if declared.versions.contains(&1)
        && !declared.versions.contains(&2)
        && consumer_versions.contains(&1)
    {
        Plan::UseV1
    } else if declared.versions.contains(&2) {
        // Declared v2 but the Consumer lacks it: a v2-only Consumer cannot use
        // v1 on a Provider that declared v2 either (§8: no downgrade).
        Plan::Unusable("the Provider declares v2, which this Consumer does not support".into())
    } else {
        Plan::Unusable(format!(
            "no common version (provider {:?}, consumer {consumer_versions:?})",
            declared.versions
        ))
    }
}

/// After a v2 negotiation, authorization or security check failed: §8 forbids
/// falling back to v1, so the only outcome is to disable the Provider.
pub fn after_v2_failure(_declared: &Declared) -> Plan {
    Plan::Unusable("v2 was declared and failed; falling back to v1 is forbidden".into())
}

/// A dual-stack Provider keeps `version=1` so v1 Consumers still see it (§2.1);
/// a v2-only Provider declares `version=2` and `versions="2"`.
pub fn manifest_shape_problems(d: &Declared) -> Vec<String> {
    let mut out = Vec::new();
    if d.source == VersionSource::Versions {
        let dual = d.versions.contains(&1) && d.versions.contains(&2);
        if dual && d.legacy_version != Some(1) {
            out.push(format!(
                "dual-stack Provider must keep {META_VERSION}=1 for v1 Consumers (found {:?})",
                d.legacy_version
            ));
        }
        if d.versions == BTreeSet::from([2])
            && d.legacy_version.is_some()
            && d.legacy_version != Some(2)
        {
            out.push(format!(
                "v2-only Provider declares {META_VERSION}={:?} instead of 2",
                d.legacy_version
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn versions_is_authoritative() {
        let d = parse_declared(&meta(&[
            (META_AUTHORITY, "a"),
            (META_VERSION, "1"),
            (META_VERSIONS, "1,2"),
        ]))
        .unwrap();
        assert_eq!(d.versions, BTreeSet::from([1, 2]));
        assert_eq!(d.source, VersionSource::Versions);
        assert_eq!(plan(&d, &[2, 1]), Plan::NegotiateV2);
        assert!(manifest_shape_problems(&d).is_empty());
    }

    #[test]
    fn only_version_is_the_single_version() {
        let d = parse_declared(&meta(&[(META_AUTHORITY, "a"), (META_VERSION, "1")])).unwrap();
        assert_eq!(d.versions, BTreeSet::from([1]));
        assert_eq!(plan(&d, &[2, 1]), Plan::UseV1);
        let d2 = parse_declared(&meta(&[(META_AUTHORITY, "a"), (META_VERSION, "2")])).unwrap();
        assert_eq!(plan(&d2, &[2, 1]), Plan::NegotiateV2);
    }

    #[test]
    fn no_downgrade() {
        let d = parse_declared(&meta(&[
            (META_AUTHORITY, "a"),
            (META_VERSIONS, "1,2"),
            (META_VERSION, "1"),
        ]))
        .unwrap();
        assert!(matches!(after_v2_failure(&d), Plan::Unusable(_)));
        assert!(matches!(plan(&d, &[3]), Plan::Unusable(_)));
    }

    #[test]
    fn bad_meta() {
        assert_eq!(
            parse_declared(&meta(&[(META_VERSION, "1")])),
            Err(DiscoveryError::MissingAuthority)
        );
        assert!(matches!(
            parse_declared(&meta(&[(META_AUTHORITY, "a"), (META_VERSIONS, "1,x")])),
            Err(DiscoveryError::BadVersion { .. })
        ));
        assert_eq!(
            parse_declared(&meta(&[(META_AUTHORITY, "a")])),
            Err(DiscoveryError::NoVersion)
        );
    }

    #[test]
    fn dual_stack_must_keep_version_1() {
        let d = parse_declared(&meta(&[(META_AUTHORITY, "a"), (META_VERSIONS, "1,2")])).unwrap();
        assert_eq!(manifest_shape_problems(&d).len(), 1);
    }

    fn typed(pairs: &[(&str, &str)], types: Option<&[(&str, &str)]>) -> ServiceManifest {
        ServiceManifest {
            meta: meta(pairs),
            meta_types: types.map(|t| {
                t.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn compiled_types_of_meta_data() {
        let v2 = [
            (META_AUTHORITY, "a"),
            (META_VERSION, "2"),
            (META_VERSIONS, "2"),
        ];
        // Legal: Integers where aapt2 makes them, and a device that reports no types.
        for types in [
            None,
            Some(&[][..]),
            Some(&[(META_VERSION, "int"), (META_VERSIONS, "int")][..]),
        ] {
            let d = parse_manifest(&typed(&v2, types)).unwrap();
            assert_eq!(d.versions, [2].into());
        }
        // "true" compiled to a Boolean, "2.0" to a Float, a number as authority: never declarations.
        let bool_versions = typed(
            &[(META_AUTHORITY, "a"), (META_VERSIONS, "true")],
            Some(&[(META_VERSIONS, "bool")]),
        );
        assert!(matches!(
            parse_manifest(&bool_versions),
            Err(DiscoveryError::WrongType {
                field: META_VERSIONS,
                ..
            })
        ));
        // android:value="2.0" is a Float: the FAIL says so, not only that "2.0" is no version.
        let float_version = typed(
            &[
                (META_AUTHORITY, "a"),
                (META_VERSION, "2.0"),
                (META_VERSIONS, "2"),
            ],
            Some(&[(META_VERSION, "float")]),
        );
        let e = parse_manifest(&float_version).unwrap_err();
        assert_eq!(
            e.to_string(),
            "meta-data com.clawseed.tools.version was compiled to a Float (printed back as \"2.0\"), not a String or an Integer"
        );
        // android:value="12345" is an Integer on the phone: no authority, though its text would pass for one.
        let int_authority = typed(
            &[(META_AUTHORITY, "12345"), (META_VERSIONS, "2")],
            Some(&[(META_AUTHORITY, "int")]),
        );
        assert!(
            parse_declared(&int_authority.meta).is_ok(),
            "the text alone passes"
        );
        assert!(matches!(
            parse_manifest(&int_authority),
            Err(DiscoveryError::WrongType {
                field: META_AUTHORITY,
                ..
            })
        ));
        // Without types the same manifests are judged by their text, as before.
        assert!(parse_manifest(&typed(&v2, None)).is_ok());
    }

    #[test]
    fn same_package() {
        let mut m = ServiceManifest {
            package: "com.a".into(),
            authority_package: Some("com.a".into()),
            ..Default::default()
        };
        assert!(check_same_package(&m).is_ok());
        m.authority_package = Some("com.evil".into());
        assert!(check_same_package(&m).is_err());
        m.authority_package = None;
        assert!(check_same_package(&m).is_err());
    }
}
