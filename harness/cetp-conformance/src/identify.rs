//! Which Provider a run is about: the profile's package, or the only one
//! the device discovered, with its authority and manifest (§2.1, §8).

use cetp_proto::discovery::{parse_manifest, Declared};
use cetp_vectors::device::{HelloInfo, Target};
use cetp_vectors::interp::Env;
use cetp_vectors::profile::Profile;
use serde_json::json;

fn manifest_kind(d: &Declared) -> &'static str {
    match (d.versions.contains(&1), d.versions.contains(&2)) {
        (true, true) => "dual_stack",
        (false, true) => "v2_only",
        (true, false) => "v1_only",
        _ => "other",
    }
}

/// Identifies the Provider under test: the profile's package, or the only
/// discovered Provider.
pub fn identify(target: &Target, profile: &Profile) -> Result<(Option<HelloInfo>, Env), String> {
    let hello = target.a.hello().map_err(|e| format!("hello failed: {e}"))?;
    if let Some(b) = &target.b {
        b.hello()
            .map_err(|e| format!("hello on the second identity failed: {e}"))?;
    }
    let found = target
        .a
        .discover()
        .map_err(|e| format!("discover failed: {e}"))?;
    let manifest = match &profile.target.package {
        Some(p) => found.iter().find(|m| &m.package == p).cloned(),
        None if found.len() == 1 => found.first().cloned(),
        None if found.is_empty() => None,
        None => {
            let names: Vec<&str> = found.iter().map(|m| m.package.as_str()).collect();
            return Err(format!(
                "several Providers were discovered ({}); name one with [target] package in the profile",
                names.join(", ")
            ));
        }
    };
    let package = profile
        .target
        .package
        .clone()
        .or_else(|| manifest.as_ref().map(|m| m.package.clone()))
        .ok_or("no Provider was discovered and the profile names none")?;
    let declared = manifest.as_ref().and_then(|m| parse_manifest(m).ok());
    let authority = profile
        .target
        .authority
        .clone()
        .or_else(|| declared.as_ref().map(|d| d.authority.clone()))
        .ok_or("the Provider declares no authority and the profile names none")?;
    let kind = declared.as_ref().map(manifest_kind).unwrap_or("other");
    let identity_a = json!({"uid": hello.uid, "packages": hello.packages});
    Ok((
        Some(hello),
        Env {
            package,
            authority,
            manifest_kind: kind.to_string(),
            declared,
            manifest,
            identity_a,
        },
    ))
}
