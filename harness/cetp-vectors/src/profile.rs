//! The vendor profile (TOML): what the harness may do to a Provider.
//!
//! The safety rule lives here: a tool is executed for real only when it is
//! read-only (`effect=read`) or the profile lists it under `execute.allow`.
//! Format documented in `profiles/README.md`.

use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt;

/// A vendor's profile (`cetp.toml`): what the harness needs to know about
/// the Provider under test that the protocol cannot tell it — which tools
/// may really be executed, sample arguments, an observer of side effects,
/// caller identities, vendor lifetimes. Unknown fields are refused.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The `[target]` table: which Provider to test.
    #[serde(default)]
    pub target: TargetSection,
    /// The `[execute]` table: which side-effecting tools may run for real.
    #[serde(default)]
    pub execute: ExecuteSection,
    /// Per-tool sample arguments.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolSection>,
    /// The `[observer]` table: the read tool that counts side effects, without
    /// which cases about effects (§6 dedupe, §4.4 cancel) are not judged.
    #[serde(default)]
    pub observer: Option<Observer>,
    /// Tools for roles that annotations cannot express.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleTool>,
    /// Selectors for the Provider's confirmation UI, passed to `resolve`.
    #[serde(default)]
    pub ui: Option<toml::Table>,
    /// The `[identities]` table: caller identities available (§7.1).
    #[serde(default)]
    pub identities: IdentitiesSection,
    /// Lifetimes only the vendor knows, in milliseconds (e.g.
    /// `resume_token_ttl_ms`), for cases that move a simulated clock.
    #[serde(default)]
    pub timing: BTreeMap<String, u64>,
}

/// The `[target]` table of a [`Profile`].
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TargetSection {
    /// Package of the Provider under test. Without it the harness takes the
    /// only discovered Provider, and refuses to guess among several.
    pub package: Option<String>,
    /// Authority; by default the one the manifest declares.
    pub authority: Option<String>,
}

/// The `[execute]` table of a [`Profile`].
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecuteSection {
    /// Side-effecting tools the harness may execute for real.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// One `[tools.NAME]` table of a [`Profile`].
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolSection {
    /// Valid arguments for an ordinary call.
    pub sample_args: Option<toml::Table>,
    /// Arguments the Provider's policy must confirm (runtime escalation).
    pub escalating_args: Option<toml::Table>,
    /// Calls made before each execution of this tool with valid or
    /// escalating args, so that it acts on an object that exists (a delete
    /// or update by id).
    #[serde(default)]
    pub setup: Vec<SetupCall>,
}

/// One setup call: `tool` with `args`, then each `bind` entry copies the
/// value at a JSON pointer of the setup call's inline result (the value) into
/// the tool's args at a JSON pointer (the key).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SetupCall {
    /// The tool called.
    pub tool: String,
    /// Its arguments.
    #[serde(default)]
    pub args: toml::Table,
    /// Target pointer in the tool's args → source pointer in the setup call's result.
    #[serde(default)]
    pub bind: BTreeMap<String, String>,
}

/// What the observer's value is, which decides what a case may conclude
/// from two snapshots of it.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Counts {
    /// A counter of committed side effects: every effect adds one.
    Effects,
    /// A number of objects (a number, or an array whose length counts):
    /// a create adds one, a delete removes one; other effects may leave it.
    Objects,
    /// Any JSON value: only "changed" and "unchanged" can be judged.
    #[default]
    Snapshot,
}

/// The `[observer]` table: a read tool whose result the harness snapshots
/// before and after a call to see whether it had an effect.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Observer {
    /// A read tool whose result counts effects.
    pub tool: String,
    /// Arguments of the observer tool.
    #[serde(default)]
    pub args: toml::Table,
    /// JSON pointer into the inline result (empty: the whole result).
    pub pointer: String,
    /// What the value at `pointer` is (default `snapshot`).
    #[serde(default)]
    pub counts: Counts,
}

/// A `[roles.NAME]` table: the tool (and args) playing a role that tool
/// annotations cannot express (e.g. `large_result`, `async`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RoleTool {
    /// The tool playing the role.
    pub tool: String,
    /// Its arguments, used as written.
    #[serde(default)]
    pub args: toml::Table,
    /// Calls made before each execution in this role (as for a tool's
    /// `setup`), e.g. to give a background archive something to archive.
    #[serde(default)]
    pub setup: Vec<SetupCall>,
}

/// The `[identities]` table of a [`Profile`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IdentitiesSection {
    /// Whether cross-caller cases may run (needs a second endpoint).
    #[serde(default = "yes")]
    pub second: bool,
}

impl Default for IdentitiesSection {
    fn default() -> Self {
        IdentitiesSection { second: true }
    }
}

fn yes() -> bool {
    true
}

/// A bad profile: a usage error (exit 2) naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// What is wrong, naming the field.
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "profile: {}", self.message)
    }
}

impl std::error::Error for ProfileError {}

/// A TOML table as JSON (for tool arguments); `Null` if it cannot be represented.
pub fn table_to_json(t: &toml::Table) -> Json {
    serde_json::to_value(t).unwrap_or(Json::Null)
}

impl Profile {
    /// Parses a profile, refusing unknown fields; the error names the field.
    pub fn from_toml(text: &str) -> Result<Profile, ProfileError> {
        let p: Profile = toml::from_str(text).map_err(|e| ProfileError {
            message: e.to_string().trim().to_string(),
        })?;
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), ProfileError> {
        if let Some(o) = &self.observer {
            if !o.pointer.is_empty() && !o.pointer.starts_with('/') {
                return Err(ProfileError {
                    message: format!(
                        "observer.pointer: {:?} is not a JSON pointer (it must start with '/')",
                        o.pointer
                    ),
                });
            }
            if o.tool.is_empty() {
                return Err(ProfileError {
                    message: "observer.tool: must name a read tool".into(),
                });
            }
        }
        for (tool, section) in &self.tools {
            for (i, s) in section.setup.iter().enumerate() {
                if s.tool == *tool {
                    return Err(ProfileError {
                        message: format!(
                            "tools.{tool}.setup[{i}].tool: a tool cannot be its own setup"
                        ),
                    });
                }
                for (to, from) in &s.bind {
                    for (what, p) in [("key", to), ("value", from)] {
                        if !p.is_empty() && !p.starts_with('/') {
                            return Err(ProfileError {
                                message: format!(
                                    "tools.{tool}.setup[{i}].bind: {what} {p:?} is not a JSON pointer (it must start with '/')"
                                ),
                            });
                        }
                    }
                }
            }
        }
        for name in &self.execute.allow {
            if !cetp_proto::descriptor::is_valid_tool_name(name) {
                return Err(ProfileError {
                    message: format!("execute.allow: {name:?} is not a valid tool name"),
                });
            }
        }
        Ok(())
    }

    /// May the harness execute this tool for real?
    pub fn may_execute(&self, tool: &str, effect: &str) -> bool {
        effect == "read" || self.execute.allow.iter().any(|t| t == tool)
    }

    /// The profile's `sample_args` of `tool`, as JSON.
    pub fn sample_args(&self, tool: &str) -> Option<Json> {
        self.tools
            .get(tool)
            .and_then(|t| t.sample_args.as_ref())
            .map(table_to_json)
    }

    /// The profile's `escalating_args` of `tool` (a call its policy must confirm, §4.3), as JSON.
    pub fn escalating_args(&self, tool: &str) -> Option<Json> {
        self.tools
            .get(tool)
            .and_then(|t| t.escalating_args.as_ref())
            .map(table_to_json)
    }

    /// The setup calls to make before executing `tool`.
    pub fn setup(&self, tool: &str) -> &[SetupCall] {
        self.tools.get(tool).map_or(&[], |t| t.setup.as_slice())
    }

    /// The setup calls to make before executing the tool of role `role`.
    pub fn role_setup(&self, role: &str) -> &[SetupCall] {
        self.roles.get(role).map_or(&[], |r| r.setup.as_slice())
    }

    /// A lifetime or bound the vendor set under `[timing]`.
    pub fn timing_ms(&self, key: &str) -> Option<u64> {
        self.timing.get(key).copied()
    }

    /// The `[ui]` selectors as JSON, for the probe's `resolve`.
    pub fn ui_json(&self) -> Option<Json> {
        self.ui.as_ref().map(table_to_json)
    }
}

/// The profiles the project's own fixture Providers' vendors wrote
/// (`profiles/`), built in: the self-test and `--target sim` use them.
pub mod builtin {
    /// The reference Provider's (`sim`).
    pub const REFERENCE: &str = include_str!("../../../profiles/reference.toml");
    /// The notes vendor's (`sim:provider=notes`).
    pub const NOTES: &str = include_str!("../../../profiles/notes.toml");
    /// The `no_effect_counter` legal variant's, whose vendor would write
    /// another one.
    pub const NO_COUNTER: &str = include_str!("../../../profiles/no-counter.toml");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_by_default() {
        let p = Profile::default();
        assert!(p.may_execute("get_quote", "read"));
        assert!(!p.may_execute("delete_alert", "delete"));
    }

    #[test]
    fn bad_profiles_name_the_field() {
        let e = Profile::from_toml("[observer]\ntool = \"x\"\npointer = \"count\"\n").unwrap_err();
        assert!(e.message.contains("observer.pointer"), "{e}");
        let e = Profile::from_toml("[execute]\nalow = []\n").unwrap_err();
        assert!(e.message.contains("alow"), "{e}");
        let e = Profile::from_toml("[execute]\nallow = \"create_alert\"\n").unwrap_err();
        assert!(e.message.contains("allow"), "{e}");
        let e = Profile::from_toml("[execute]\nallow = [\"Bad Name\"]\n").unwrap_err();
        assert!(e.message.contains("execute.allow"), "{e}");
    }

    #[test]
    fn full_profile() {
        let p = Profile::from_toml(
            r#"
[target]
package = "com.example.app"
[execute]
allow = ["create_alert"]
[tools.create_alert]
sample_args = { symbol = "ACME", price = 12.5 }
[observer]
tool = "list_alerts"
pointer = "/effects"
[roles.large_result]
tool = "export_history"
args = { rows = 20000 }
[ui.approve]
text = "Allow"
"#,
        )
        .unwrap();
        assert!(p.may_execute("create_alert", "create"));
        assert_eq!(
            p.sample_args("create_alert").unwrap(),
            serde_json::json!({"symbol": "ACME", "price": 12.5})
        );
        assert_eq!(p.roles["large_result"].tool, "export_history");
    }
}
