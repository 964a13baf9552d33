//! The catalogue: schema, annotation and Provider changes, each with the
//! classification it must get. The table states the expected worst class;
//! the insta snapshot (`tests/snapshots/`) pins every finding with its
//! pointer, rule and message.
//!
//! Every change is applied with a new `revision`, so the revision rule stays
//! out of the way; `revision_rule_*` below cover it.

use cetp_contract::drift::{diff, Class, DriftReport};
use cetp_contract::lock::Lock;
use serde_json::{json, Value as Json};

/// A Provider with two tools, in the shape of §3.3's example.
fn base() -> Lock {
    let mut lock: Lock = serde_json::from_value(json!({
        "format": "cetp-lock/1",
        "provider_id": "com.example.app",
        "schema_dialect": "https://json-schema.org/draft/2020-12/schema",
        "capabilities": ["async_operations", "cancellation"],
        "revision": "tools-1",
        "scopes": [
            {"name": "alerts.read", "access": "read", "sensitivity": "personal"},
            {"name": "alerts.write", "access": "write", "sensitivity": "financial", "title": "Manage alerts"}
        ],
        "tools": [
            {
                "name": "create_alert",
                "title": "Create price alert",
                "description": "Create a price alert for a security",
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "symbol": {"type": "string", "minLength": 1, "maxLength": 32, "pattern": "^[A-Z]+$"},
                        "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000},
                        "direction": {"enum": ["above", "below"]},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
                        "note": {"type": "string", "default": ""}
                    },
                    "required": ["symbol", "price"],
                    "additionalProperties": false
                },
                "input_schema_sha256": "",
                "output_schema": {
                    "type": "object",
                    "properties": {
                        "alert_id": {"type": "string"},
                        "state": {"enum": ["active", "paused"]},
                        "created_at": {"type": "string", "format": "date-time"}
                    },
                    "required": ["alert_id", "state"]
                },
                "output_schema_sha256": "",
                "scopes": ["alerts.write"],
                "annotations": {
                    "effect": "create", "risk": "moderate", "destructive": false,
                    "idempotent": false, "open_world": false,
                    "confirmation": "provider_policy", "execution": "sync"
                },
                "effect_class": ""
            },
            {
                "name": "list_alerts",
                "description": "Your price alerts",
                "input_schema": {"type": "object", "properties": {}, "additionalProperties": false},
                "input_schema_sha256": "",
                "output_schema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
                "output_schema_sha256": "",
                "scopes": ["alerts.read"],
                "annotations": {
                    "effect": "read", "risk": "low", "destructive": false,
                    "idempotent": true, "open_world": false,
                    "confirmation": "never", "execution": "sync"
                },
                "effect_class": ""
            }
        ]
    }))
    .expect("the base lock deserializes");
    lock.rederive();
    lock
}

/// Changes the locked contract (rarely) and the current one (always).
type Edit = fn(&mut Lock, &mut Lock);

fn alert(l: &mut Lock) -> &mut cetp_contract::lock::ToolContract {
    l.tool_mut("create_alert").expect("create_alert")
}

fn input(l: &mut Lock) -> &mut Json {
    &mut alert(l).input_schema
}

fn output(l: &mut Lock) -> &mut Json {
    &mut alert(l).output_schema
}

/// `(name, expected worst class, the change)`.
const CATALOGUE: &[(&str, Class, Edit)] = &[
    // ---- the tool set
    ("tool_removed", Class::Breaking, |_, l| {
        l.tools.retain(|t| t.name != "list_alerts")
    }),
    ("tool_added", Class::Compatible, |_, l| {
        let mut t = l.tool("list_alerts").unwrap().clone();
        t.name = "count_alerts".into();
        l.tools.push(t);
    }),
    // ---- input schema
    ("input_required_field_added", Class::Breaking, |_, l| {
        let s = input(l);
        s["properties"]["currency"] = json!({"type": "string"});
        s["required"] = json!(["symbol", "price", "currency"]);
    }),
    ("input_optional_field_added", Class::Compatible, |_, l| {
        input(l)["properties"]["currency"] = json!({"type": "string"});
    }),
    ("input_field_becomes_required", Class::Breaking, |_, l| {
        input(l)["required"] = json!(["symbol", "price", "direction"]);
    }),
    (
        "input_field_no_longer_required",
        Class::Compatible,
        |_, l| {
            input(l)["required"] = json!(["symbol"]);
        },
    ),
    ("input_field_removed", Class::Breaking, |_, l| {
        input(l)["properties"]
            .as_object_mut()
            .unwrap()
            .remove("note");
    }),
    ("input_type_narrowed", Class::Breaking, |_, l| {
        input(l)["properties"]["price"]["type"] = json!("integer");
    }),
    ("input_type_widened", Class::Compatible, |_, l| {
        input(l)["properties"]["note"]["type"] = json!(["string", "null"]);
    }),
    ("input_type_changed", Class::Breaking, |_, l| {
        input(l)["properties"]["note"]["type"] = json!("integer");
    }),
    ("input_enum_value_removed", Class::Breaking, |_, l| {
        input(l)["properties"]["direction"]["enum"] = json!(["above"]);
    }),
    ("input_enum_value_added", Class::Compatible, |_, l| {
        input(l)["properties"]["direction"]["enum"] = json!(["above", "below", "cross"]);
    }),
    ("input_lower_bound_raised", Class::Breaking, |_, l| {
        let p = &mut input(l)["properties"]["price"];
        p.as_object_mut().unwrap().remove("exclusiveMinimum");
        p["minimum"] = json!(1);
    }),
    ("input_upper_bound_removed", Class::Compatible, |_, l| {
        input(l)["properties"]["price"]
            .as_object_mut()
            .unwrap()
            .remove("maximum");
    }),
    ("input_max_length_lowered", Class::Breaking, |_, l| {
        input(l)["properties"]["symbol"]["maxLength"] = json!(16);
    }),
    ("input_max_items_raised", Class::Compatible, |_, l| {
        input(l)["properties"]["tags"]["maxItems"] = json!(16);
    }),
    ("input_min_items_added", Class::Breaking, |_, l| {
        input(l)["properties"]["tags"]["minItems"] = json!(1);
    }),
    ("input_pattern_removed", Class::Compatible, |_, l| {
        input(l)["properties"]["symbol"]
            .as_object_mut()
            .unwrap()
            .remove("pattern");
    }),
    ("input_pattern_changed", Class::Breaking, |_, l| {
        input(l)["properties"]["symbol"]["pattern"] = json!("^[A-Z]{1,8}$");
    }),
    ("input_format_added", Class::Breaking, |_, l| {
        input(l)["properties"]["note"]["format"] = json!("email");
    }),
    (
        "input_additional_properties_opened",
        Class::Compatible,
        |_, l| {
            input(l)["additionalProperties"] = json!(true);
        },
    ),
    (
        "input_additional_properties_closed",
        Class::Breaking,
        |before, l| {
            input(before)["additionalProperties"] = json!(true);
            input(l)["additionalProperties"] = json!(false);
        },
    ),
    ("input_ref_restructured", Class::Compatible, |_, l| {
        let s = input(l);
        s["$defs"] =
            json!({"price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000}});
        s["properties"]["price"] = json!({"$ref": "#/$defs/price"});
    }),
    (
        "input_ref_with_sibling_annotation",
        Class::Compatible,
        |_, l| {
            let s = input(l);
            s["$defs"] = json!({"money": {"type": "number", "maximum": 1000000}});
            s["properties"]["price"] = json!({"$ref": "#/$defs/money", "exclusiveMinimum": 0});
        },
    ),
    ("input_all_of_split", Class::Compatible, |_, l| {
        let mut first = input(l).clone();
        first.as_object_mut().unwrap().remove("required");
        *input(l) = json!({"allOf": [first, {"required": ["price", "symbol"]}]});
    }),
    ("input_enum_reordered", Class::Compatible, |_, l| {
        input(l)["properties"]["direction"]["enum"] = json!(["below", "above"]);
    }),
    (
        "input_const_written_as_enum",
        Class::Compatible,
        |before, l| {
            input(before)["properties"]["direction"] = json!({"const": "above"});
            input(l)["properties"]["direction"] = json!({"enum": ["above"]});
        },
    ),
    ("input_ref_target_narrowed", Class::Breaking, |_, l| {
        let s = input(l);
        s["$defs"] = json!({"price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000}});
        s["properties"]["price"] = json!({"$ref": "#/$defs/price"});
    }),
    ("input_all_of_adds_constraint", Class::Breaking, |_, l| {
        let s = input(l).clone();
        *input(l) = json!({"allOf": [s, {"properties": {"tags": {"minItems": 1}}}]});
    }),
    ("input_unknown_keyword_added", Class::Breaking, |_, l| {
        input(l)["properties"]["price"]["x-currency-scale"] = json!(2);
    }),
    ("input_annotation_changed", Class::Compatible, |_, l| {
        input(l)["properties"]["symbol"]["description"] = json!("Ticker, upper case");
    }),
    ("input_default_changed", Class::Breaking, |_, l| {
        input(l)["properties"]["note"]["default"] = json!("created by an agent");
    }),
    (
        "input_any_of_branch_added",
        Class::Compatible,
        |before, l| {
            input(before)["properties"]["note"] = json!({"anyOf": [{"type": "string"}]});
            input(l)["properties"]["note"] =
                json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
        },
    ),
    // ---- output schema
    ("output_field_removed", Class::Breaking, |_, l| {
        output(l)["properties"]
            .as_object_mut()
            .unwrap()
            .remove("created_at");
    }),
    ("output_field_added", Class::Compatible, |_, l| {
        output(l)["properties"]["symbol"] = json!({"type": "string"});
    }),
    ("output_field_type_changed", Class::Breaking, |_, l| {
        output(l)["properties"]["alert_id"]["type"] = json!("integer");
    }),
    ("output_enum_value_added", Class::Breaking, |_, l| {
        output(l)["properties"]["state"]["enum"] = json!(["active", "paused", "expired"]);
    }),
    ("output_enum_value_removed", Class::Compatible, |_, l| {
        output(l)["properties"]["state"]["enum"] = json!(["active"]);
    }),
    (
        "output_field_no_longer_required",
        Class::Breaking,
        |_, l| {
            output(l)["required"] = json!(["alert_id"]);
        },
    ),
    (
        "output_enum_type_implied",
        Class::Compatible,
        |before, l| {
            output(before)["properties"]["state"]["type"] = json!("string");
            output(l)["properties"]["state"]["enum"] = json!(["paused", "active"]);
        },
    ),
    ("output_format_removed", Class::Breaking, |_, l| {
        output(l)["properties"]["created_at"]
            .as_object_mut()
            .unwrap()
            .remove("format");
    }),
    (
        "output_const_branches_moved_to_defs",
        Class::Compatible,
        |before, l| {
            output(before)["properties"]["state"] =
                json!({"anyOf": [{"const": "active"}, {"const": "paused"}]});
            let s = output(l);
            s["$defs"] = json!({"active": {"const": "active"}, "paused": {"const": "paused"}});
            s["properties"]["state"] =
                json!({"anyOf": [{"$ref": "#/$defs/active"}, {"$ref": "#/$defs/paused"}]});
        },
    ),
    // ---- scopes and annotations
    ("scope_added", Class::Breaking, |_, l| {
        alert(l).scopes.push("alerts.read".into())
    }),
    ("scope_removed", Class::Compatible, |_, l| {
        alert(l).scopes.clear()
    }),
    ("effect_raised", Class::Breaking, |_, l| {
        let a = &mut alert(l).annotations;
        a.effect = "transaction".into();
        a.confirmation = "always".into();
    }),
    ("effect_changed_between_writes", Class::Breaking, |_, l| {
        alert(l).annotations.effect = "update".into()
    }),
    ("effect_lowered_to_read", Class::Compatible, |_, l| {
        alert(l).annotations.effect = "read".into()
    }),
    ("risk_raised", Class::Breaking, |_, l| {
        let a = &mut alert(l).annotations;
        a.risk = "high".into();
        a.confirmation = "always".into();
    }),
    ("risk_lowered", Class::Compatible, |_, l| {
        alert(l).annotations.risk = "low".into()
    }),
    ("destructive_turned_on", Class::Breaking, |_, l| {
        let a = &mut alert(l).annotations;
        a.destructive = true;
        a.confirmation = "always".into();
    }),
    ("confirmation_weakened", Class::Breaking, |_, l| {
        alert(l).annotations.confirmation = "never".into()
    }),
    ("confirmation_strengthened", Class::Compatible, |_, l| {
        alert(l).annotations.confirmation = "always".into()
    }),
    ("execution_became_sync_or_async", Class::Breaking, |_, l| {
        alert(l).annotations.execution = "sync_or_async".into()
    }),
    ("idempotent_turned_off", Class::Breaking, |_, l| {
        l.tool_mut("list_alerts").unwrap().annotations.idempotent = false
    }),
    ("open_world_turned_on", Class::Breaking, |_, l| {
        alert(l).annotations.open_world = true
    }),
    ("unknown_annotation_value", Class::Breaking, |_, l| {
        alert(l).annotations.risk = "negligible".into()
    }),
    ("title_changed", Class::Compatible, |_, l| {
        alert(l).title = Some("New price alert".into())
    }),
    ("description_changed", Class::Compatible, |_, l| {
        alert(l).description = "Alert me when a price crosses a level".into()
    }),
    // ---- the Provider
    ("capability_removed", Class::Breaking, |_, l| {
        l.capabilities.retain(|c| c != "cancellation")
    }),
    (
        "scope_catalog_sensitivity_changed",
        Class::Breaking,
        |_, l| l.scopes[0].sensitivity = "health".into(),
    ),
    ("scope_catalog_title_changed", Class::Compatible, |_, l| {
        l.scopes[1].title = Some("Price alerts".into())
    }),
    ("provider_id_changed", Class::Breaking, |_, l| {
        l.provider_id = "com.example.other".into()
    }),
    ("schema_dialect_changed", Class::Breaking, |_, l| {
        l.schema_dialect = "http://json-schema.org/draft-07/schema#".into()
    }),
    ("capability_added", Class::Compatible, |_, l| {
        l.capabilities.push("streaming".into())
    }),
    ("scope_catalog_scope_removed", Class::Breaking, |_, l| {
        l.scopes.remove(0);
    }),
    ("scope_catalog_scope_added", Class::Compatible, |_, l| {
        let mut s = l.scopes[0].clone();
        s.name = "alerts.export".into();
        l.scopes.push(s)
    }),
    ("scope_catalog_access_raised", Class::Breaking, |_, l| {
        l.scopes[0].access = "write".into()
    }),
    ("scope_catalog_access_lowered", Class::Compatible, |_, l| {
        l.scopes[1].access = "read".into()
    }),
    (
        "scope_catalog_sensitivity_lowered",
        Class::Compatible,
        |_, l| l.scopes[0].sensitivity = "public".into(),
    ),
    (
        "scope_catalog_description_changed",
        Class::Compatible,
        |_, l| l.scopes[0].description = Some("Read your alerts".into()),
    ),
];

fn drift(edit: Edit, keep_revision: bool) -> DriftReport {
    let (mut locked, mut current) = (base(), base());
    edit(&mut locked, &mut current);
    locked.rederive();
    current.rederive();
    if !keep_revision {
        current.revision = "tools-2".into();
    }
    diff(&locked, &current)
}

#[test]
fn catalogue_has_enough_entries() {
    assert!(CATALOGUE.len() >= 25, "{}", CATALOGUE.len());
    let mut names: Vec<&str> = CATALOGUE.iter().map(|c| c.0).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CATALOGUE.len(), "duplicate names");
}

#[test]
fn catalogue() {
    let mut wrong = Vec::new();
    for (name, expected, edit) in CATALOGUE {
        let report = drift(*edit, false);
        let worst = report.worst();
        if worst != Some(*expected) {
            wrong.push(format!(
                "{name}: expected {expected:?}, got {worst:?}: {:#?}",
                report.findings
            ));
        }
        assert_eq!(report.summary.violation, 0, "{name}");
        insta::assert_json_snapshot!(
            *name,
            json!({"expected": expected, "findings": report.findings})
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A change bound to the revision, made without a new revision: breaking
/// drift and a §3.3 violation naming the tool.
#[test]
fn revision_rule_schema_changed_revision_kept() {
    let report = drift(
        |_, l| input(l)["properties"]["symbol"]["maxLength"] = json!(16),
        true,
    );
    assert_eq!(report.worst(), Some(Class::Violation));
    insta::assert_json_snapshot!(report);
}

/// The same change with a new revision is breaking drift, never a violation.
#[test]
fn revision_rule_schema_and_revision_changed() {
    let report = drift(
        |_, l| input(l)["properties"]["symbol"]["maxLength"] = json!(16),
        false,
    );
    assert_eq!(report.worst(), Some(Class::Breaking));
    assert_eq!(report.summary.violation, 0);
}

/// §3.3 binds the revision to the tool set, schemas and safety semantics:
/// a title, a description or a schema written differently is none of them.
#[test]
fn revision_rule_ignores_what_it_does_not_bind() {
    for edit in [
        (|_, l| alert(l).title = Some("New".into())) as Edit,
        |_, l| alert(l).description = "New".into(),
        |_, l| {
            let s = input(l);
            s["$defs"] =
                json!({"p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000}});
            s["properties"]["price"] = json!({"$ref": "#/$defs/p"});
        },
        |_, l| l.scopes[1].title = None,
    ] {
        let report = drift(edit, true);
        assert_eq!(report.worst(), Some(Class::Compatible), "{report:#?}");
    }
}

#[test]
fn a_safety_change_without_a_new_revision_is_a_violation_for_each_tool() {
    let report = drift(
        |_, l| {
            alert(l).annotations.risk = "high".into();
            alert(l).annotations.confirmation = "always".into();
            l.tools.retain(|t| t.name != "list_alerts");
        },
        true,
    );
    let violations: Vec<(Option<&str>, &str)> = report
        .findings
        .iter()
        .filter(|f| f.class == Class::Violation)
        .map(|f| (f.tool.as_deref(), f.message.as_str()))
        .collect();
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert_eq!(violations[0].0, Some("create_alert"));
    assert!(
        violations[0].1.contains("2 difference(s)"),
        "{}",
        violations[0].1
    );
    assert_eq!(violations[1].0, Some("list_alerts"));
}

#[test]
fn identical_locks_do_not_drift() {
    let report = drift(|_, _| {}, true);
    assert_eq!(report.worst(), None);
    assert!(report.findings.is_empty());
}
