//! Typed steps for the moves: the vector format's own [`Step`], built with
//! the compiler checking every field name and type, then written out as
//! JSON for the oracle, the corpus and finding files (which read and edit
//! steps as JSON, and keep those the harness no longer parses).

use super::{GenStep, Meta};
use cetp_vectors::vector::{Args, CaseStep, Expect, Step, ToolRef, TypedValue};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// The fields of a `call` step ([`Step::Call`]) as a struct, so that a move
/// names only the fields it sets (`..Call::new(...)`).
#[derive(Default)]
pub(super) struct Call {
    pub(super) as_: String,
    pub(super) method: String,
    pub(super) session: Option<String>,
    pub(super) v1: bool,
    pub(super) tool: Option<ToolRef>,
    pub(super) args: Option<Args>,
    pub(super) request_id: Option<String>,
    pub(super) deadline_in_ms: Option<i64>,
    pub(super) resume_token: Option<String>,
    pub(super) operation_id: Option<String>,
    pub(super) extras: BTreeMap<String, TypedValue>,
    pub(super) omit: Vec<String>,
    pub(super) bind: Option<String>,
    pub(super) expect: Option<Expect>,
}

impl Call {
    /// `ident` calls `method` in `session`, the answer bound to `bind`.
    pub(super) fn new(ident: &str, method: &str, session: &str, bind: &str) -> Call {
        Call {
            as_: ident.into(),
            method: method.into(),
            session: Some(session.into()),
            bind: Some(bind.into()),
            ..Call::default()
        }
    }

    /// `ident` executes the tool named `tool` (a literal or a template)
    /// with `args` in `session`, the answer bound to `bind`.
    pub(super) fn execute(
        ident: &str,
        session: &str,
        tool: impl Into<String>,
        args: Args,
        bind: &str,
    ) -> Call {
        Call {
            tool: named(tool),
            args: Some(args),
            ..Call::new(ident, "execute_tool", session, bind)
        }
    }

    /// The step.
    pub(super) fn step(self) -> Step {
        Step::Call {
            as_: self.as_,
            method: self.method,
            session: self.session,
            v1: self.v1,
            tool: self.tool,
            args: self.args,
            request_id: self.request_id,
            deadline_in_ms: self.deadline_in_ms,
            resume_token: self.resume_token,
            // An operation query of an earlier execution runs only where
            // that execution started one: a Provider may answer it
            // synchronously (§4.4), and there is then nothing to ask.
            only_if: self
                .operation_id
                .as_ref()
                .filter(|o| o.starts_with("${") && o.ends_with("/data/operation_id}"))
                .cloned(),
            operation_id: self.operation_id,
            extras: self.extras,
            omit: self.omit,
            arg: None,
            bind: self.bind,
            expect: self.expect,
        }
    }

    /// The step, citing `reqs`.
    pub(super) fn citing(self, reqs: &[&str]) -> CaseStep {
        citing(self.step(), reqs)
    }
}

/// The request id the call bound to `bind` was sent with.
pub(super) fn request_id_of(bind: &str) -> String {
    format!("${{{bind}/_request/request_id}}")
}

/// The tool named `name` (a literal or a template).
pub(super) fn named(name: impl Into<String>) -> Option<ToolRef> {
    Some(tool_ref(Some(name.into()), None))
}

/// The tool the profile names for `role`.
pub(super) fn role(role: impl Into<String>) -> Option<ToolRef> {
    Some(tool_ref(None, Some(role.into())))
}

fn tool_ref(name: Option<String>, profile_role: Option<String>) -> ToolRef {
    ToolRef {
        name,
        pick: BTreeMap::new(),
        profile_role,
        require: BTreeMap::new(),
        executes: true,
        listed_in: None,
        other_than: None,
    }
}

/// An expectation of any of `success`, `accepted` and `error`: with
/// `accepted` among them an operation stays unsettled, so later moves can
/// read or cancel it by its id; the oracle replaces the set with what its
/// members answered.
pub(super) fn any_status() -> Option<Expect> {
    Some(Expect {
        status: strings(&["success", "accepted", "error"]),
        ..Expect::default()
    })
}

/// `xs` as owned strings.
pub(super) fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|x| x.to_string()).collect()
}

/// `step`, citing `reqs` (`[]` cites none).
pub(super) fn citing(step: Step, reqs: &[&str]) -> CaseStep {
    CaseStep {
        step,
        requirements: Some(strings(reqs)),
    }
}

/// `step` without `requirements`: it cites what the vector format's
/// default says (a setup step, none).
pub(super) fn bare(step: Step) -> CaseStep {
    CaseStep {
        step,
        requirements: None,
    }
}

/// `step` as the vector format writes it.
fn written(step: &CaseStep) -> Json {
    // Strings, numbers, JSON values and maps keyed by strings: plain data
    // that serde_json always writes.
    serde_json::to_value(step).expect("a step is plain data")
}

/// A step the oracle runs as written.
pub(super) fn plain(step: CaseStep) -> GenStep {
    GenStep {
        step: written(&step),
        meta: Meta::Plain,
    }
}

/// A named judgement (see [`Meta::Judgement`]).
pub(super) fn judgement(step: CaseStep) -> GenStep {
    GenStep {
        step: written(&step),
        meta: Meta::Judgement,
    }
}

/// A call whose expectation the oracle fills in: a placeholder `expect`
/// marks it.
pub(super) fn call_step(mut step: CaseStep) -> GenStep {
    match &mut step.step {
        Step::Call { expect, .. }
        | Step::Negotiate { expect, .. }
        | Step::Settle { expect, .. }
        | Step::Poll { expect, .. } => {
            expect.get_or_insert_with(Expect::default);
        }
        _ => {}
    }
    plain(step)
}

/// A judgement that `b` repeats the terminal answer `a` (§6), unless one
/// of them is an answer §5 lets a Provider give at any time.
pub(super) fn same_answer(a: &str, b: &str, reqs: &[&str]) -> GenStep {
    judgement(citing(
        Step::Same {
            a: a.into(),
            b: b.into(),
            pointers: vec![],
            different: false,
            unless_code: strings(&["RATE_LIMITED", "NEGOTIATION_REQUIRED", "UNAVAILABLE"]),
            if_status: None,
        },
        reqs,
    ))
}

/// A settle of the execution bound to `of` by `ident` in `session`, bound
/// to `bind`, its expectation for the oracle to fill in.
pub(super) fn settle(ident: &str, session: &str, of: &str, bind: &str, reqs: &[&str]) -> GenStep {
    call_step(citing(
        Step::Settle {
            as_: ident.into(),
            session: session.into(),
            of: of.into(),
            bind: Some(bind.into()),
            expect: None,
        },
        reqs,
    ))
}

/// A clock moved by `ms`.
pub(super) fn advance_by(ms: u64) -> GenStep {
    plain(citing(
        Step::AdvanceClock {
            ms: Some(ms),
            profile: None,
            until: None,
            plus_ms: 0,
        },
        &[],
    ))
}

/// An observer snapshot bound to `bind`.
pub(super) fn observe(bind: &str) -> Step {
    Step::Observe { bind: bind.into() }
}

/// Typed Bundle value `v` of type `t`.
pub(super) fn typed(t: &str, v: Json) -> TypedValue {
    TypedValue { t: t.into(), v }
}
