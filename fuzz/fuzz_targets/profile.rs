//! Any text given as a vendor profile (`--profile FILE`, TOML) or as a
//! baseline of known failures (`--baseline FILE`, TOML): parsing never
//! panics, and a profile that parses keeps the promises of its validation
//! (the execute allow-list holds only valid tool names, pointers are JSON
//! pointers), whatever the accessors the runner uses then read from it.
#![no_main]

use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Baseline;
use cetp_proto::descriptor::is_valid_tool_name;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(b) = Baseline::from_toml(text) {
        assert!(b.entries.iter().all(|e| !e.reason.trim().is_empty()));
        for e in &b.entries {
            assert!(b.reason_for(&e.id).is_some());
        }
    }
    let Ok(p) = Profile::from_toml(text) else {
        return;
    };
    // The safety rule: nothing outside the allow-list executes but a read.
    assert!(p.execute.allow.iter().all(|t| is_valid_tool_name(t)));
    assert!(!p.may_execute("cetp_fuzz_not_allowed!", "delete"));
    if let Some(o) = &p.observer {
        assert!(o.pointer.is_empty() || o.pointer.starts_with('/'));
        assert!(!o.tool.is_empty());
    }
    // What the runner reads from a profile: every TOML table it holds becomes
    // JSON args, and each setup call's bind keys are pointers.
    for (tool, section) in &p.tools {
        let _ = p.sample_args(tool);
        let _ = p.escalating_args(tool);
        for s in p.setup(tool) {
            assert_ne!(&s.tool, tool);
            let _ = cetp_vectors::profile::table_to_json(&s.args);
            for (to, from) in &s.bind {
                assert!(to.is_empty() || to.starts_with('/'));
                assert!(from.is_empty() || from.starts_with('/'));
            }
        }
        assert_eq!(p.setup(tool).len(), section.setup.len());
    }
    for (role, r) in &p.roles {
        let _ = cetp_vectors::profile::table_to_json(&r.args);
        assert_eq!(p.role_setup(role).len(), r.setup.len());
    }
    for key in p.timing.keys() {
        assert!(p.timing_ms(key).is_some());
    }
    let _ = p.ui_json();
});
