//! Consumer scenarios (`vectors/consumer/*.json`, `format_version` 1): the
//! harness plays a scripted hostile Provider, makes the Consumer under test
//! act, and judges what it did. Format in `vectors/consumer/README.md`.

use super::record::CallRecord;
use cetp_proto::envelope::keys;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use std::path::Path;

/// One file of Consumer scenarios (`vectors/consumer/*.json`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Format of the file; must be 1.
    pub format_version: u32,
    /// Name of the group.
    pub group: String,
    /// What the group covers, for a human.
    #[serde(default)]
    pub description: String,
    /// The scenarios, in file order.
    pub scenarios: Vec<Scenario>,
}

/// One Consumer scenario: the hostile Provider's shape and script, the acts
/// the Consumer is made to perform, and what its behaviour must show.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Stable id of the scenario.
    pub id: String,
    /// Human title, shown in reports.
    pub title: String,
    /// Always `consumer`: the harness is the Provider.
    pub role: String,
    /// `MUST` (a broken expectation FAILs) or `SHOULD` (it WARNs).
    pub level: String,
    /// Requirement ids the scenario enforces.
    pub requirements: Vec<String>,
    /// The Consumer bound this scenario tests, when the spec fixes no figure
    /// for it (§7.3): judged against the figure the Consumer declares.
    #[serde(default)]
    pub bound: Option<BoundUse>,
    /// Optional capabilities (§2.3) the scenario needs the Consumer to
    /// offer: offering them is the Consumer's choice, so a Consumer whose
    /// negotiate offered none of one is not judged by the scenario.
    #[serde(default)]
    pub needs: Vec<String>,
    /// What the device must do for the scenario's premise to hold (one of
    /// [`PREMISES`]): a device that does not say it does leaves the
    /// scenario not judged, naming why.
    #[serde(default)]
    pub premise: Vec<String>,
    /// The hostile Provider the Consumer talks to.
    #[serde(default)]
    pub provider: ProviderSpec,
    /// How the Provider answers matching calls; unmatched calls get its
    /// well-behaved default answer.
    #[serde(default)]
    pub script: Vec<Rule>,
    /// The acts the Consumer performs, in order (`consumer_act` shape).
    pub acts: Vec<Json>,
    /// The judgements made on what was observed.
    pub expect: Vec<Expect>,
}

/// Device behaviours a scenario's premise may rest on.
/// `binder_transaction_limit`: an answer larger than one Binder transaction
/// (about 1 MB, [`cetp_proto::binder`]) never reaches the Consumer, as on
/// Android; a TCP rig carries any size.
pub const PREMISES: &[&str] = &["binder_transaction_limit"];

/// `bound`: which declared bound (`limit`, one of
/// [`super::DeclaredBounds::NAMES`]) the scenario tests and the size it
/// sends. A Consumer declaring `limit >= size` is not judged by it; one
/// declaring nothing is judged at SHOULD level at most.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BoundUse {
    /// The bound's name, one of [`super::DeclaredBounds::NAMES`].
    pub limit: String,
    /// The size the scenario sends.
    pub size: u64,
}

/// The hostile Provider's shape.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSpec {
    /// `dual_stack` (default: `version=1`, `versions=1,2`), `v2_only`, `v1_only`.
    #[serde(default = "dual_stack")]
    pub manifest: String,
    /// The package owning the ContentProvider behind the authority, when it
    /// is not the service's (§2.1 same-package check).
    #[serde(default)]
    pub authority_package: Option<String>,
    /// Capabilities it grants when offered (default: all three).
    #[serde(default)]
    pub caps: Option<Vec<String>>,
    /// Its tool descriptors (default: `hostile::default_tools`).
    #[serde(default)]
    pub tools: Option<Json>,
    /// The `revision` of its tool list (§3.3).
    #[serde(default)]
    pub revision: Option<String>,
    /// A second, well-behaved Provider of another package (`org.cetp.decoy`,
    /// authority `org.cetp.decoy.clawseed.tools`, acts name it `$decoy`),
    /// discovered before this one, with the same tools and the same
    /// provider_name: routing must follow (provider_id, tool name), never
    /// scan order or a label (§3.1).
    #[serde(default)]
    pub decoy: bool,
}

fn dual_stack() -> String {
    "dual_stack".into()
}

impl Default for ProviderSpec {
    fn default() -> Self {
        ProviderSpec {
            manifest: dual_stack(),
            authority_package: None,
            caps: None,
            tools: None,
            revision: None,
            decoy: false,
        }
    }
}

/// One scripted answer: the first rule whose `when` matches a call answers it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Which calls the rule answers.
    pub when: When,
    /// The answer, in the probe's `reply` shape.
    pub reply: Json,
}

/// Which calls a [`Rule`] answers; every set field must match.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The method called.
    pub method: String,
    /// Only calls of this tool.
    #[serde(default)]
    pub tool: Option<String>,
    /// Only the n-th matching call (1-based).
    #[serde(default)]
    pub nth: Option<u32>,
    /// Only the first n matching calls.
    #[serde(default)]
    pub upto: Option<u32>,
    /// Only calls that carry (true) or lack (false) a `resume_token`.
    #[serde(default)]
    pub resume: Option<bool>,
    /// Only v1 calls (true) or v2 calls (false).
    #[serde(default)]
    pub v1: Option<bool>,
    /// Only calls made after a call of this method (e.g. `get_operation`
    /// once `cancel_operation` came: a Provider that honours a cancel).
    #[serde(default)]
    pub after: Option<String>,
}

impl When {
    /// Whether the call matches the method, tool, resume and v1 conditions
    /// (`nth`, `upto` and `after` count calls, so the caller applies them).
    pub fn matches(&self, r: &CallRecord) -> bool {
        r.method == self.method
            && self
                .tool
                .as_ref()
                .is_none_or(|t| r.tool().as_ref() == Some(t))
            && self
                .resume
                .is_none_or(|want| r.extras.contains(keys::RESUME_TOKEN) == want)
            && self.v1.is_none_or(|want| r.is_v1() == want)
    }
}

/// One judgement of the run: a check with its parameters, and the
/// requirements its finding cites.
#[derive(Clone, Debug)]
pub struct Expect {
    /// The check and its parameters.
    pub check: ConsumerCheck,
    /// What a finding cites; default: the scenario's requirements.
    pub requirements: Option<Vec<String>>,
    /// `MUST`: a finding of this check FAILs the scenario whatever the
    /// scenario's level, for one check of a SHOULD scenario whose own
    /// clause holds a 必须 (a resume's request id under §4.1, in a
    /// confirmation scenario whose other clauses hold none).
    pub must: bool,
}

/// Every check a scenario may name, with its parameters (what each judges:
/// [`super::judge::CHECKS`]). A misspelt check or parameter is refused when
/// the scenario loads, not found when the run reaches it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConsumerCheck {
    /// No v2 call but negotiate before a negotiation (§2.2).
    NegotiateFirst {},
    /// The negotiate request is well formed (§2.2).
    NegotiateRequest {},
    /// Every v2 call but negotiate carries `protocol_version` as Int 2 (§4.1).
    ProtocolVersionInt {},
    /// Every v2 call carries a session token the Provider holds valid.
    CurrentToken(CallFilter),
    /// Every v2 call but negotiate carries a UUID `request_id` (§4.1).
    RequestIdUuid {},
    /// A new read carries a new `request_id` (§6).
    FreshReadIds(CallFilter),
    /// `deadline_at_ms` is an absolute epoch time (§4.1).
    DeadlineAbsolute {},
    /// All selected calls carry one `request_id` (a retry, §6).
    SameRequestId(CallFilter),
    /// The number of selected calls.
    Calls(CallCount),
    /// Retries are spaced by at least some device time (§6).
    RetryWaited(CallGap),
    /// No v1 call reaches the Provider (§8).
    NoV1 {},
    /// The Consumer makes no call at all.
    NoCalls {},
    /// A renegotiation is followed by `list_tools` before success (§3.3).
    ListAfterNegotiate {},
    /// How an act ends.
    Outcome(OutcomeIs),
    /// No act ends in `crashed` (§7.3).
    NoCrash {},
    /// `execute_tool` only for tools an act asked for (§7.2).
    OnlyAskedTools {},
    /// No call reaches the decoy Provider unless an act named it (§7.1).
    NoDecoyCalls(DecoyCalls),
    /// Every descriptor handed over is read or closed (§4.5; in-process only).
    FdsClosed {},
    /// No descriptor read asks for too many bytes (§7.3; in-process only).
    ReadBounded(ReadCap),
    /// A `resume_token` is sent only after its resolution was launched (§4.3).
    ResolvedBeforeResume {},
    /// No operation method unless its capability was granted (§2.3).
    NoUnnegotiated {},
    /// An answered cancel is followed by a `get_operation` (§4.4).
    PolledAfterCancel {},
}

/// Which calls a check looks at: all of them, or those of a method, a
/// tool, an act, or one protocol generation.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CallFilter {
    /// Only calls of this method.
    pub method: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls made during this act (its index in `acts`).
    pub act: Option<u64>,
    /// Only v1 (true) or v2 (false) calls.
    pub v1: Option<bool>,
}

/// `calls`: how many calls the filter selects, exactly (`count`) or
/// within `min`..`max`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CallCount {
    /// Only calls of this method.
    pub method: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls made during this act (its index in `acts`).
    pub act: Option<u64>,
    /// Only v1 (true) or v2 (false) calls.
    pub v1: Option<bool>,
    /// Exactly this many calls.
    pub count: Option<u64>,
    /// At least this many calls.
    pub min: Option<u64>,
    /// At most this many calls.
    pub max: Option<u64>,
}

/// `retry_waited`: the device time consecutive selected calls keep apart.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CallGap {
    /// Only calls of this method.
    pub method: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls made during this act (its index in `acts`).
    pub act: Option<u64>,
    /// Only v1 (true) or v2 (false) calls.
    pub v1: Option<bool>,
    /// Least device time between consecutive calls, in milliseconds.
    #[serde(default)]
    pub ms: u64,
}

/// `outcome`: the outcome kinds act `act` may end in, and the error code
/// an `error` outcome must surface.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutcomeIs {
    /// Index of the act in `acts`.
    pub act: usize,
    /// Outcome kinds it may end in (see [`super::OUTCOMES`]).
    pub is: Vec<String>,
    /// Error code an `error` outcome must surface.
    pub code: Option<String>,
}

/// `no_decoy_calls`: the method looked at (default: any).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DecoyCalls {
    /// The method looked at; default: any.
    pub method: Option<String>,
}

/// `read_bounded`: the most bytes one descriptor read may ask for.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReadCap {
    /// Most bytes one read may ask for.
    pub max_bytes: Option<u64>,
}

impl CallCount {
    /// The calls it counts.
    pub fn on(&self) -> CallFilter {
        CallFilter::of(&self.method, &self.tool, self.act, self.v1)
    }
}

impl CallGap {
    /// The calls whose gaps it measures.
    pub fn on(&self) -> CallFilter {
        CallFilter::of(&self.method, &self.tool, self.act, self.v1)
    }
}

impl CallFilter {
    // The checks with more parameters repeat the filter's four fields
    // rather than flatten it: serde's flatten would lose
    // deny_unknown_fields, and a misspelt parameter must be refused.
    fn of(
        method: &Option<String>,
        tool: &Option<String>,
        act: Option<u64>,
        v1: Option<bool>,
    ) -> Self {
        CallFilter {
            method: method.clone(),
            tool: tool.clone(),
            act,
            v1,
        }
    }
}

impl ConsumerCheck {
    /// The name scenarios give it (`check`), which findings carry.
    pub fn name(&self) -> &'static str {
        match self {
            ConsumerCheck::NegotiateFirst {} => "negotiate_first",
            ConsumerCheck::NegotiateRequest {} => "negotiate_request",
            ConsumerCheck::ProtocolVersionInt {} => "protocol_version_int",
            ConsumerCheck::CurrentToken(_) => "current_token",
            ConsumerCheck::RequestIdUuid {} => "request_id_uuid",
            ConsumerCheck::FreshReadIds(_) => "fresh_read_ids",
            ConsumerCheck::DeadlineAbsolute {} => "deadline_absolute",
            ConsumerCheck::SameRequestId(_) => "same_request_id",
            ConsumerCheck::Calls(_) => "calls",
            ConsumerCheck::RetryWaited(_) => "retry_waited",
            ConsumerCheck::NoV1 {} => "no_v1",
            ConsumerCheck::NoCalls {} => "no_calls",
            ConsumerCheck::ListAfterNegotiate {} => "list_after_negotiate",
            ConsumerCheck::Outcome(_) => "outcome",
            ConsumerCheck::NoCrash {} => "no_crash",
            ConsumerCheck::OnlyAskedTools {} => "only_asked_tools",
            ConsumerCheck::NoDecoyCalls(_) => "no_decoy_calls",
            ConsumerCheck::FdsClosed {} => "fds_closed",
            ConsumerCheck::ReadBounded(_) => "read_bounded",
            ConsumerCheck::ResolvedBeforeResume {} => "resolved_before_resume",
            ConsumerCheck::NoUnnegotiated {} => "no_unnegotiated",
            ConsumerCheck::PolledAfterCancel {} => "polled_after_cancel",
        }
    }
}

impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // `requirements` belongs to every check; the rest is the check's.
        let mut map = Map::<String, Json>::deserialize(d)?;
        let requirements = match map.remove("requirements") {
            None => None,
            Some(r) => Some(serde_json::from_value(r).map_err(D::Error::custom)?),
        };
        // `level` too; only `MUST` raises a check above its scenario.
        let must = match map.remove("level") {
            None => false,
            Some(Json::String(l)) if l == "MUST" => true,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "`level` of a check is \"MUST\" or absent, not {other}"
                )))
            }
        };
        let check = ConsumerCheck::deserialize(Json::Object(map)).map_err(D::Error::custom)?;
        Ok(Expect {
            check,
            requirements,
            must,
        })
    }
}

/// Expands `${repeat:N:TEXT}` string values (TEXT N times), so that
/// oversized Provider text can be written down.
pub fn expand(v: &mut Json) {
    match v {
        Json::String(s) => {
            if let Some(inner) = s
                .strip_prefix("${repeat:")
                .and_then(|r| r.strip_suffix('}'))
            {
                if let Some((n, text)) = inner.split_once(':') {
                    if let Ok(n) = n.parse::<usize>() {
                        *s = text.repeat(n.min(16 * 1024 * 1024));
                    }
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(expand),
        Json::Object(o) => o.values_mut().for_each(expand),
        _ => {}
    }
}

/// Every scenario of a folder, in file-name order, ids unique.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut texts = Vec::new();
    for f in files {
        let t = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        texts.push((f.display().to_string(), t));
    }
    load_texts(&texts)
}

/// Parses scenario files given as (name, text).
pub fn load_texts(texts: &[(String, String)]) -> Result<Vec<Scenario>, String> {
    let mut out: Vec<Scenario> = Vec::new();
    for (name, text) in texts {
        let mut v: Json = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        expand(&mut v);
        let f: ScenarioFile = serde_json::from_value(v).map_err(|e| format!("{name}: {e}"))?;
        if f.format_version != 1 {
            return Err(format!("{name}: format_version {}", f.format_version));
        }
        for s in f.scenarios {
            if s.role != "consumer" {
                return Err(format!("{name}: {} has role {:?}", s.id, s.role));
            }
            if let Some(n) = s
                .needs
                .iter()
                .find(|n| cetp_proto::envelope::Capability::parse(n).is_none())
            {
                return Err(format!(
                    "{name}: {} needs an unknown capability {n:?}",
                    s.id
                ));
            }
            if let Some(p) = s.premise.iter().find(|p| !PREMISES.contains(&p.as_str())) {
                return Err(format!(
                    "{name}: {} rests on an unknown premise {p:?}",
                    s.id
                ));
            }
            if let Some(b) = &s.bound {
                if !super::DeclaredBounds::NAMES.contains(&b.limit.as_str()) {
                    return Err(format!(
                        "{name}: {} tests an unknown bound {:?}",
                        s.id, b.limit
                    ));
                }
            }
            if out.iter().any(|o| o.id == s.id) {
                return Err(format!("{name}: duplicate scenario id {}", s.id));
            }
            out.push(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(v: Json) -> Result<Expect, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn checks_load_typed_with_their_parameters() {
        let e = expect(
            json!({"check": "calls", "method": "execute_tool", "count": 2,
                              "requirements": ["CETP2-5-24"]}),
        )
        .unwrap();
        assert_eq!(e.requirements, Some(vec!["CETP2-5-24".to_string()]));
        assert_eq!(
            e.check,
            ConsumerCheck::Calls(CallCount {
                method: Some("execute_tool".into()),
                count: Some(2),
                ..CallCount::default()
            })
        );
        assert_eq!(e.check.name(), "calls");
        let e = expect(json!({"check": "no_crash"})).unwrap();
        assert!(!e.must);
        assert_eq!((e.check, e.requirements), (ConsumerCheck::NoCrash {}, None));
        let e = expect(json!({"check": "same_request_id", "level": "MUST"})).unwrap();
        assert!(e.must);
        assert!(expect(json!({"check": "no_crash", "level": "SHOULD"})).is_err());
        assert!(expect(json!({"check": "no_crash", "level": true})).is_err());
    }

    #[test]
    fn a_misspelt_check_or_parameter_is_refused_when_the_scenario_loads() {
        let unknown = expect(json!({"check": "no_crahs"})).unwrap_err();
        assert!(unknown.contains("no_crahs"), "{unknown}");
        let param = expect(json!({"check": "calls", "metod": "execute_tool"})).unwrap_err();
        assert!(param.contains("metod"), "{param}");
        let on_unit = expect(json!({"check": "no_crash", "act": 1})).unwrap_err();
        assert!(on_unit.contains("act"), "{on_unit}");
        let missing = expect(json!({"check": "outcome", "is": ["success"]})).unwrap_err();
        assert!(missing.contains("act"), "{missing}");
        assert!(expect(json!({"check": "calls", "requirements": "CETP2-5-24"})).is_err());
        assert!(expect(json!({"method": "execute_tool"})).is_err());
    }

    #[test]
    fn every_listed_check_loads_and_names_itself() {
        for (name, _) in super::super::judge::CHECKS {
            let mut v = json!({"check": name});
            if *name == "outcome" {
                v["act"] = json!(0);
                v["is"] = json!(["success"]);
            }
            let e = expect(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(e.check.name(), *name);
            v["bogus"] = json!(1);
            assert!(
                expect(v).is_err(),
                "{name} took a parameter it does not have"
            );
        }
    }
}
