//! The reference Consumer against the reference Provider's mutants: every
//! mutant whose fault a Consumer can see must be stopped, with the rule it
//! broke, before its answer is used.

mod scripted;

use cetp_proto::envelope::Capability;
use cetp_proto::provider::Decision;
use cetp_reference::consumer::{Consumer, ConsumerConfig, ConsumerError, Fault as Blame, Outcome};
use cetp_reference::device::{DeviceClock, DeviceConnection, LocalDevice};
use cetp_reference::provider::{Mutant, ReferenceProvider, PACKAGE};
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// Where in a session the mutant shows.
#[derive(Clone, Copy, Debug)]
enum Step {
    Connect,
    Info,
    Tools,
    /// Execute a tool with these args, approving any confirmation.
    Exec(&'static str, &'static str),
    /// Delete an alert created first.
    Delete,
    /// Restart the Provider, then execute.
    AfterRestart(&'static str, &'static str),
}

struct Run {
    provider: Arc<ReferenceProvider>,
    conn: DeviceConnection,
    result: Result<(), ConsumerError>,
}

/// Runs `step` against the reference with `fault` (none: the reference).
fn run(fault: Option<Mutant>, offer: &[Capability], step: Step) -> Run {
    let provider =
        Arc::new(fault.map_or_else(ReferenceProvider::reference, ReferenceProvider::with_fault));
    let fault = fault.map_or("reference", Mutant::name);
    let device = LocalDevice::new(provider.clone(), DeviceClock::manual(scripted::T0));
    let mut conn = device.connect_as("a").unwrap();
    let mut c = Consumer::new(ConsumerConfig {
        capabilities: offer.to_vec(),
        ..ConsumerConfig::default()
    });
    let report = c.discover(&mut conn).unwrap();
    assert_eq!(report.providers.len(), 1, "{fault}: {report:?}");
    let exec = |c: &mut Consumer, conn: &mut DeviceConnection, tool: &str, args: &str| {
        let args: Json = serde_json::from_str(args).unwrap();
        c.execute(conn, PACKAGE, tool, &args, &mut Decision::Approve)
    };
    let result = (|| {
        c.connect(&mut conn, PACKAGE)?;
        match step {
            Step::Connect => {}
            Step::Info => {
                c.provider_info(&mut conn, PACKAGE)?;
            }
            Step::Tools => {
                c.list_tools(&mut conn, PACKAGE)?;
            }
            Step::Exec(tool, args) => {
                exec(&mut c, &mut conn, tool, args)?;
            }
            Step::Delete => {
                let Outcome::Succeeded(created) = exec(
                    &mut c,
                    &mut conn,
                    "create_alert",
                    r#"{"symbol":"CLAW","price":3}"#,
                )?
                else {
                    panic!("{fault}: create_alert did not succeed");
                };
                let id = created.value["alert_id"].clone();
                c.execute(
                    &mut conn,
                    PACKAGE,
                    "delete_alert",
                    &json!({ "alert_id": id }),
                    &mut Decision::Approve,
                )?;
            }
            Step::AfterRestart(tool, args) => {
                c.list_tools(&mut conn, PACKAGE)?;
                device.restart_provider(PACKAGE).unwrap();
                exec(&mut c, &mut conn, tool, args)?;
            }
        }
        Ok(())
    })();
    Run {
        provider,
        conn,
        result,
    }
}

const ALL: &[Capability] = &Capability::ALL;
const BAD_ARGS: Step = Step::Exec("get_quote", r#"{"symbol":""}"#);
const QUOTE: Step = Step::Exec("get_quote", r#"{"symbol":"CLAW"}"#);
const BIG_EXPORT: Step = Step::Exec("export_history", r#"{"rows":5000}"#);

#[test]
fn every_visible_mutant_is_stopped_with_its_rule() {
    let cases: &[(&str, &[Capability], Step, &str)] = &[
        (
            "negotiate_picks_lowest",
            ALL,
            Step::Connect,
            "negotiate.version.highest",
        ),
        (
            "negotiate_extra_capability",
            &[],
            Step::Connect,
            "negotiate.capability.subset",
        ),
        (
            "negotiate_limits_below_minimum",
            ALL,
            Step::Connect,
            "limits.minimum",
        ),
        (
            "session_token_too_long",
            ALL,
            Step::Connect,
            "session_token.length",
        ),
        (
            "provider_id_outside_namespace",
            ALL,
            Step::Connect,
            "provider_id.namespace",
        ),
        (
            "wrong_request_id_echo",
            ALL,
            Step::Info,
            "response.request_id.echo",
        ),
        (
            "no_request_id_echo",
            ALL,
            BAD_ARGS,
            "response.request_id.echo",
        ),
        (
            "no_protocol_version_echo",
            ALL,
            BAD_ARGS,
            "response.protocol_version.echo",
        ),
        (
            "error_missing_retryable",
            ALL,
            BAD_ARGS,
            "response.envelope",
        ),
        (
            "invalid_args_retryable",
            ALL,
            BAD_ARGS,
            "error.retryable.rule",
        ),
        ("unknown_error_code", ALL, BAD_ARGS, "error.code.known"),
        (
            "negotiation_required_not_retryable",
            ALL,
            Step::AfterRestart("get_quote", r#"{"symbol":"CLAW"}"#),
            "error.retryable.rule",
        ),
        ("tool_name_invalid", ALL, Step::Tools, "tool.name.pattern"),
        ("duplicate_tool_names", ALL, Step::Tools, "tool.name.unique"),
        (
            "high_risk_without_always",
            ALL,
            Step::Tools,
            "annotation.confirmation.always",
        ),
        (
            "sync_or_async_without_negotiation",
            &[],
            Step::Tools,
            "annotation.execution.async_negotiated",
        ),
        ("unknown_annotation_enum", ALL, Step::Tools, "enum.unknown"),
        (
            "remote_ref_in_schema",
            ALL,
            Step::Tools,
            "schema.ref.same_document",
        ),
        ("missing_output_schema", ALL, Step::Tools, "shape.required"),
        ("scope_name_invalid", ALL, Step::Info, "scope.name.pattern"),
        ("unknown_scope_sensitivity", ALL, Step::Info, "enum.unknown"),
        ("output_violates_schema", ALL, QUOTE, "result.output_schema"),
        (
            "mutable_pending_intent",
            ALL,
            Step::Delete,
            "resolution.immutable",
        ),
        (
            "foreign_pending_intent",
            ALL,
            Step::Delete,
            "resolution.creator",
        ),
        (
            "no_resolution_on_user_action",
            ALL,
            Step::Delete,
            "resolution.present",
        ),
        (
            "async_without_negotiation",
            &[],
            Step::Exec("sync_portfolio", "{}"),
            "capability.async_operations.negotiated",
        ),
        ("file_wrong_sha256", ALL, BIG_EXPORT, "result.file.sha256"),
        ("file_wrong_size", ALL, BIG_EXPORT, "result.file.size"),
        ("inline_over_limit", ALL, BIG_EXPORT, "result.inline.limit"),
        (
            "file_without_negotiation",
            &[],
            BIG_EXPORT,
            "capability.large_results.negotiated",
        ),
    ];
    for (name, offer, step, rule) in cases {
        let fault = Mutant::parse(name).unwrap_or_else(|| panic!("no mutant {name}"));
        let r = run(Some(fault), offer, *step);
        let err = r
            .result
            .expect_err(&format!("{name}: the Consumer did not notice"));
        assert_eq!(err.fault(), Blame::ProviderBrokeProtocol, "{name}: {err}");
        assert!(err.violated_rules().contains(rule), "{name}: {err}");
        assert!(
            r.conn.held_handles().iter().all(|h| h.starts_with("pi-")),
            "{name}: descriptors left open: {:?}",
            r.conn.held_handles()
        );
        if matches!(step, Step::Delete) {
            // The refused confirmation was never launched: only the creation
            // took effect.
            assert_eq!(r.provider.effects(), 1, "{name}");
        }
    }
}

#[test]
fn a_mismatched_authority_package_is_never_used() {
    let provider = Arc::new(ReferenceProvider::with_fault(
        Mutant::AuthorityPackageMismatch,
    ));
    let device = LocalDevice::new(provider, DeviceClock::manual(scripted::T0));
    let mut conn = device.connect_as("a").unwrap();
    let mut c = Consumer::new(ConsumerConfig::default());
    let report = c.discover(&mut conn).unwrap();
    assert!(report.providers.is_empty());
    assert_eq!(report.rejected.len(), 1);
    assert!(c.connect(&mut conn, PACKAGE).is_err());
}

#[test]
fn the_reference_itself_passes_the_same_steps() {
    for step in [
        Step::Connect,
        Step::Info,
        Step::Tools,
        QUOTE,
        Step::Delete,
        Step::AfterRestart("get_quote", r#"{"symbol":"CLAW"}"#),
        BIG_EXPORT,
    ] {
        let r = run(None, ALL, step);
        assert!(r.result.is_ok(), "{step:?}: {:?}", r.result);
    }
}
