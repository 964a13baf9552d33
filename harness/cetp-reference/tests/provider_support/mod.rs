//! Test driver for the reference Provider: a device clock, two caller
//! identities and helpers that speak the v2 envelope.
#![allow(dead_code)]

use cetp_proto::envelope::{keys, Response};
use cetp_proto::provider::{
    Attachment, CallerIdentity, Decision, FdSource, IntentTarget, ProviderCall, Reply,
    ResolveOutcome,
};
use cetp_proto::{Bundle, Value};
use cetp_reference::app::ProviderApp;
use cetp_reference::provider::{
    FixtureSet, Mutant, ProviderConfig, ReferenceProvider, FULL_ACCESS_UID,
};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Identity "a": every scope by default.
pub const A: u32 = FULL_ACCESS_UID;
/// Identity "b": read scopes by default.
pub const B: u32 = 10124;
/// 2026-09-02T12:00:00Z.
pub const T0: i64 = 1_788_350_400_000;
pub const ALL_CAPS: &[&str] = &["async_operations", "cancellation", "large_results"];

pub fn identity(uid: u32) -> CallerIdentity {
    CallerIdentity {
        uid,
        packages: vec![format!("com.clawseed.probe.u{uid}")],
        cert_sha256: vec!["ab".repeat(32)],
    }
}

/// A deterministic request id (a UUID) for a number.
pub fn rid(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// Config in which both identities hold every scope.
pub fn both_full() -> ProviderConfig {
    let mut c = ProviderConfig::default();
    c.grants.insert(B, ProviderConfig::all_scopes());
    c
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub bundle: Bundle,
    pub attachments: Vec<(String, Attachment)>,
}

impl Outcome {
    pub fn from_reply(r: Reply) -> Outcome {
        match r {
            Reply::Result {
                bundle: Some(bundle),
                attachments,
            } => Outcome {
                bundle,
                attachments,
            },
            other => panic!("provider answered {other:?}"),
        }
    }
    pub fn status(&self) -> String {
        self.bundle.get_string(keys::STATUS).unwrap_or_default()
    }
    pub fn is_success(&self) -> bool {
        self.status() == "success"
    }
    pub fn code(&self) -> Option<String> {
        self.bundle.opt_string(keys::ERROR_CODE).ok().flatten()
    }
    pub fn message(&self) -> String {
        self.bundle
            .opt_string(keys::ERROR_MESSAGE)
            .ok()
            .flatten()
            .unwrap_or_default()
    }
    pub fn retryable(&self) -> Option<bool> {
        self.bundle.opt_bool(keys::RETRYABLE).ok().flatten()
    }
    pub fn request_id(&self) -> Option<String> {
        self.bundle.opt_string(keys::REQUEST_ID).ok().flatten()
    }
    pub fn protocol_version(&self) -> Option<&Value> {
        self.bundle.get(keys::PROTOCOL_VERSION)
    }
    pub fn data(&self) -> Json {
        self.bundle.get_json(keys::DATA).unwrap_or(Json::Null)
    }
    /// `data.value` of an inline result.
    pub fn value(&self) -> Json {
        self.data()["value"].clone()
    }
    pub fn response(&self) -> Response {
        Response::from_bundle(&self.bundle).expect("decodable v2 answer")
    }
    pub fn resume_token(&self) -> Option<String> {
        self.bundle.opt_string(keys::RESUME_TOKEN).ok().flatten()
    }
    pub fn resolution(&self) -> Option<IntentTarget> {
        let handle = match self.bundle.get(keys::RESOLUTION) {
            Some(Value::PendingIntent(pi)) => pi.handle.clone(),
            _ => return None,
        };
        self.attachments.iter().find_map(|(h, a)| match a {
            Attachment::Intent(t) if *h == handle => Some(t.clone()),
            _ => None,
        })
    }
    pub fn file(&self) -> Option<Vec<u8>> {
        let handle = match self.bundle.get(keys::RESULT_FD) {
            Some(Value::Fd(fd)) => fd.handle.clone(),
            _ => return None,
        };
        self.attachments.iter().find_map(|(h, a)| match a {
            Attachment::File(FdSource::Bytes(b)) if *h == handle => Some(b.to_vec()),
            _ => None,
        })
    }
    pub fn operation_id(&self) -> Option<String> {
        self.data()["operation_id"].as_str().map(str::to_string)
    }
    /// The answer without attachment handles, which are numbered per reply.
    pub fn comparable(&self) -> Bundle {
        let mut b = self.bundle.clone();
        if let Some(Value::PendingIntent(pi)) = b.get(keys::RESOLUTION).cloned() {
            let mut pi = pi;
            pi.handle = String::new();
            b.insert(keys::RESOLUTION, Value::PendingIntent(pi));
        }
        if b.contains(keys::RESULT_FD) {
            b.insert(keys::RESULT_FD, Value::str("fd"));
        }
        b
    }
}

/// A device hosting one Provider, with a clock and a session per identity.
pub struct World {
    pub p: Arc<ReferenceProvider>,
    pub now: i64,
    pub tokens: BTreeMap<u32, String>,
}

impl World {
    pub fn new(p: ReferenceProvider) -> World {
        World {
            p: Arc::new(p),
            now: T0,
            tokens: BTreeMap::new(),
        }
    }
    pub fn reference() -> World {
        World::new(ReferenceProvider::reference())
    }
    /// The notes app.
    pub fn notes() -> World {
        World::new(ReferenceProvider::hosting(FixtureSet::Notes))
    }
    pub fn mutant(f: Mutant) -> World {
        World::new(ReferenceProvider::with_fault(f))
    }
    pub fn with_config(c: ProviderConfig) -> World {
        World::new(ReferenceProvider::new(c))
    }

    pub fn call(&self, uid: u32, method: &str, extras: Option<Bundle>) -> Outcome {
        Outcome::from_reply(self.p.call(
            &identity(uid),
            self.now,
            &ProviderCall {
                method: method.to_string(),
                arg: None,
                extras,
            },
        ))
    }

    pub fn negotiate_raw(&self, uid: u32, versions: &[i32], caps: &[&str]) -> Outcome {
        let b = Bundle::new()
            .with(keys::CONSUMER_VERSIONS, Value::IntArray(versions.to_vec()))
            .with(
                keys::CONSUMER_CAPABILITIES,
                Value::String(json!(caps).to_string()),
            );
        self.call(uid, "negotiate", Some(b))
    }

    /// Negotiates v2 with `caps` and keeps the token for `uid`.
    pub fn connect_with(&mut self, uid: u32, caps: &[&str]) -> String {
        let o = self.negotiate_raw(uid, &[2, 1], caps);
        assert!(o.is_success(), "negotiate failed: {:?}", o.bundle);
        let token = o.data()["session_token"]
            .as_str()
            .expect("session token")
            .to_string();
        self.tokens.insert(uid, token.clone());
        token
    }

    pub fn connect(&mut self, uid: u32) -> String {
        self.connect_with(uid, ALL_CAPS)
    }

    pub fn token(&self, uid: u32) -> String {
        self.tokens.get(&uid).cloned().unwrap_or_default()
    }

    pub fn common(&self, uid: u32, request_id: &str) -> Bundle {
        Bundle::new()
            .with(keys::PROTOCOL_VERSION, Value::Int(2))
            .with(keys::SESSION_TOKEN, Value::str(self.token(uid)))
            .with(keys::REQUEST_ID, Value::str(request_id))
            .with(keys::DEADLINE_AT_MS, Value::Long(self.now + 10_000))
    }

    pub fn v2(&self, uid: u32, method: &str, request_id: &str) -> Outcome {
        self.call(uid, method, Some(self.common(uid, request_id)))
    }

    pub fn exec_bundle(&self, uid: u32, request_id: &str, tool: &str, args: &str) -> Bundle {
        self.common(uid, request_id)
            .with(keys::TOOL_NAME, Value::str(tool))
            .with(keys::ARGS, Value::str(args))
    }

    pub fn exec(&self, uid: u32, request_id: &str, tool: &str, args: &str) -> Outcome {
        self.call(
            uid,
            "execute_tool",
            Some(self.exec_bundle(uid, request_id, tool, args)),
        )
    }

    pub fn resume(
        &self,
        uid: u32,
        request_id: &str,
        tool: &str,
        args: &str,
        token: &str,
    ) -> Outcome {
        let b = self
            .exec_bundle(uid, request_id, tool, args)
            .with(keys::RESUME_TOKEN, Value::str(token));
        self.call(uid, "execute_tool", Some(b))
    }

    pub fn get_op(&self, uid: u32, request_id: &str, op: &str) -> Outcome {
        let b = self
            .common(uid, request_id)
            .with(keys::OPERATION_ID, Value::str(op));
        self.call(uid, "get_operation", Some(b))
    }

    pub fn cancel_op(&self, uid: u32, request_id: &str, op: &str) -> Outcome {
        let b = self
            .common(uid, request_id)
            .with(keys::OPERATION_ID, Value::str(op));
        self.call(uid, "cancel_operation", Some(b))
    }

    /// Plays the user's decision on the resolution of `o`.
    pub fn decide(&self, uid: u32, o: &Outcome, decision: Decision) -> ResolveOutcome {
        let target = o.resolution().expect("a resolution PendingIntent");
        self.p.resolve(&identity(uid), &target, decision, self.now)
    }

    /// Runs an execution through confirmation: asks, decides, resumes.
    pub fn exec_confirmed(
        &self,
        uid: u32,
        request_id: &str,
        tool: &str,
        args: &str,
        decision: Decision,
    ) -> Outcome {
        let first = self.exec(uid, request_id, tool, args);
        if first.code().as_deref() != Some("USER_ACTION_REQUIRED")
            && first.code().as_deref() != Some("AUTH_REQUIRED")
        {
            return first;
        }
        self.decide(uid, &first, decision);
        let token = first.resume_token().expect("resume token");
        self.resume(uid, request_id, tool, args, &token)
    }

    /// The observer's answer, read as identity a (reconnecting if a restart
    /// or the clock ended the session).
    pub fn observe(&mut self) -> Json {
        if !self.tokens.contains_key(&A) {
            self.connect(A);
        }
        let mut o = self.exec(A, &rid(0xFFFF_FFFF), "list_alerts", "{}");
        if o.code().as_deref() == Some("NEGOTIATION_REQUIRED") {
            self.connect(A);
            o = self.exec(A, &rid(0xFFFF_FFFF), "list_alerts", "{}");
        }
        assert!(o.is_success(), "observer failed: {:?}", o.bundle);
        o.value()
    }

    /// `effects` as the observer tool reports it.
    pub fn effects(&mut self) -> u64 {
        self.observe()["effects"].as_u64().expect("effects")
    }

    pub fn alert_ids(&mut self) -> BTreeSet<String> {
        self.observe()["alerts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["alert_id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `list_notes` as identity a (reconnecting when needed): the notes app
    /// has no effect counter, so its state is what an observer sees.
    pub fn notes_list(&mut self) -> Vec<Json> {
        if !self.tokens.contains_key(&A) {
            self.connect(A);
        }
        let mut o = self.exec(A, &rid(0xFFFF_FFFE), "list_notes", "{}");
        if o.code().as_deref() == Some("NEGOTIATION_REQUIRED") {
            self.connect(A);
            o = self.exec(A, &rid(0xFFFF_FFFE), "list_notes", "{}");
        }
        assert!(o.is_success(), "list_notes failed: {:?}", o.bundle);
        o.value()["notes"].as_array().cloned().unwrap_or_default()
    }

    /// How many notes the notes app holds.
    pub fn note_count(&mut self) -> usize {
        self.notes_list().len()
    }

    /// Whether the note `id` is listed as archived (`None`: not listed).
    pub fn archived(&mut self, id: &str) -> Option<bool> {
        self.notes_list()
            .iter()
            .find(|n| n["note_id"] == id)
            .and_then(|n| n["archived"].as_bool())
    }

    /// Adds a note as `uid` with `request_id`; its id.
    pub fn add_note(&self, uid: u32, request_id: &str, title: &str) -> String {
        let o = self.exec(
            uid,
            request_id,
            "add_note",
            &json!({ "title": title }).to_string(),
        );
        assert!(o.is_success(), "add_note failed: {:?}", o.bundle);
        o.value()["note_id"].as_str().expect("note_id").to_string()
    }

    pub fn restart(&mut self) {
        self.p.restart();
    }
}
