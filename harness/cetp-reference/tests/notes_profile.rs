//! `profiles/notes.toml` against the notes app: every tool, role and
//! lifetime the vendor wrote down does what the profile says, so a suite
//! that follows the profile meets the app as its vendor describes it.

mod provider_support;

use cetp_proto::provider::Decision;
use cetp_reference::provider::{
    FixtureSet, ProviderConfig, ReferenceProvider, NOTES_PACKAGE, NOTES_RESUME_TOKEN_TTL_MS,
};
use provider_support::*;
use serde_json::{json, Value as Json};

fn profile() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/notes.toml");
    let text = std::fs::read_to_string(path).expect("profiles/notes.toml");
    toml::from_str(&text).expect("valid TOML")
}

/// Identity b as the simulated device sets it up: every notes scope but
/// `notes.archive`.
fn world() -> World {
    let mut cfg = ProviderConfig::notes();
    let mut b = FixtureSet::Notes.all_scopes();
    b.remove("notes.archive");
    cfg.grants.insert(B, b);
    World::new(ReferenceProvider::new(cfg))
}

/// Writes `value` at the JSON pointer `at`, creating objects on the way.
fn set(doc: &mut Json, at: &str, value: Json) {
    let mut node = doc;
    let tokens: Vec<String> = at
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (i, t) in tokens.iter().enumerate() {
        let last = i + 1 == tokens.len();
        node = match node {
            Json::Array(items) => {
                let n: usize = t.parse().expect("an array index");
                &mut items[n]
            }
            other => {
                if !other.is_object() {
                    *other = json!({});
                }
                other
                    .as_object_mut()
                    .unwrap()
                    .entry(t.clone())
                    .or_insert(Json::Null)
            }
        };
        if last {
            *node = value;
            return;
        }
    }
}

/// Runs the setup steps of `tool`, binding their results into its args.
fn args_for(w: &World, p: &Json, tool: &str, first_rid: u64) -> Json {
    let t = &p["tools"][tool];
    let mut args = t.get("sample_args").cloned().unwrap_or_else(|| json!({}));
    for (i, step) in t["setup"].as_array().into_iter().flatten().enumerate() {
        let out = w.exec(
            A,
            &rid(first_rid + i as u64),
            step["tool"].as_str().unwrap(),
            &step["args"].to_string(),
        );
        assert!(out.is_success(), "{tool} setup: {:?}", out.bundle);
        let value = out.value();
        for (into, from) in step["bind"].as_object().unwrap() {
            let bound = value.pointer(from.as_str().unwrap()).expect("bound value");
            set(&mut args, into, bound.clone());
        }
    }
    args
}

fn observed(w: &mut World, p: &Json) -> usize {
    let o = &p["observer"];
    assert_eq!(o["counts"], "objects");
    let out = w.exec(A, &rid(0xABC), o["tool"].as_str().unwrap(), "{}");
    out.value()
        .pointer(o["pointer"].as_str().unwrap())
        .and_then(Json::as_array)
        .expect("an array of objects")
        .len()
}

#[test]
fn the_profile_describes_the_notes_app() {
    let p = profile();
    let mut w = world();
    w.connect(A);
    w.connect(B);
    assert_eq!(p["target"]["package"], NOTES_PACKAGE);
    assert_eq!(
        p["timing"]["resume_token_ttl_ms"],
        json!(NOTES_RESUME_TOKEN_TTL_MS)
    );
    let tools = w.v2(A, "list_tools", &rid(1)).data()["tools"].clone();
    let effect = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["annotations"]["effect"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no tool {name}"))
    };
    for t in p["execute"]["allow"].as_array().unwrap() {
        assert_ne!(effect(t.as_str().unwrap()), "read", "{t}");
    }

    // Every tool's sample runs, through its confirmation when it has one,
    // and the observer counts objects.
    for (n, tool) in (10..).zip(p["tools"].as_object().unwrap().keys()) {
        let before = observed(&mut w, &p);
        let args = args_for(&w, &p, tool, 1000 + n * 10).to_string();
        let setups = p["tools"][tool]["setup"].as_array().map_or(0, Vec::len);
        let out = w.exec_confirmed(A, &rid(n), tool, &args, Decision::Approve);
        assert!(out.is_success(), "{tool} {args}: {:?}", out.bundle);
        let change = match effect(tool).as_str() {
            "create" => 1,
            "delete" => -1,
            _ => 0,
        };
        let after = observed(&mut w, &p) as i64;
        assert_eq!(after, before as i64 + setups as i64 + change, "{tool}");
    }
    let esc = &p["tools"]["add_note"]["escalating_args"];
    let o = w.exec(A, &rid(50), "add_note", &esc.to_string());
    assert_eq!(o.code().as_deref(), Some("USER_ACTION_REQUIRED"));
    assert_eq!(&p["roles"]["escalating"]["args"], esc);

    let role = |name: &str| {
        let r = &p["roles"][name];
        (
            r["tool"].as_str().unwrap().to_string(),
            r["args"].to_string(),
        )
    };
    let (tool, args) = role("async");
    assert_eq!(w.exec(A, &rid(60), &tool, &args).status(), "accepted");
    let (tool, args) = role("large_result");
    let big = w.exec(A, &rid(61), &tool, &args);
    assert_eq!(big.data()["kind"], "file", "{:?}", big.bundle);
    let (tool, args) = role("failing_operation");
    let op = w
        .exec(A, &rid(62), &tool, &args)
        .operation_id()
        .expect("a background operation");
    w.now += 1_000;
    let failed = w.get_op(A, &rid(62), &op);
    assert_eq!(failed.data()["state"], "failed");
    assert_eq!(failed.data()["error"]["error_code"], "CONFLICT");
    let (tool, args) = role("scope_missing_for_b");
    let b = w.exec(B, &rid(63), &tool, &args);
    assert_eq!(b.code().as_deref(), Some("AUTH_REQUIRED"));
    let a = w.exec(A, &rid(63), &tool, &args);
    assert_ne!(a.code().as_deref(), Some("AUTH_REQUIRED"));
}
