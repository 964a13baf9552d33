//! Any JSON a hostile Provider may return as negotiate, provider-info or
//! tool-list data: validation never panics and never accepts an answer
//! whose tool names break the §3.1 pattern.
#![no_main]

use cetp_proto::descriptor::{
    is_valid_tool_name, validate_negotiate, validate_provider_info, validate_tool_list,
    NegotiateContext, ToolListContext,
};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeSet;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(json) = cetp_proto::bundle::parse_json_text("data", text) else {
        return;
    };
    let offered = vec!["async_operations".to_string()];
    let versions: BTreeSet<i32> = [1, 2].into();
    let _ = validate_negotiate(
        &json,
        &NegotiateContext {
            consumer_versions: &[2, 1],
            consumer_capabilities: &offered,
            provider_versions: Some(&versions),
            package: Some("com.example"),
        },
    );
    let _ = validate_provider_info(&json, Some("com.example"));
    let negotiated = BTreeSet::new();
    let (list, violations) = validate_tool_list(
        &json,
        &ToolListContext {
            negotiated: &negotiated,
            known_scopes: None,
            dialect: cetp_proto::schema::DEFAULT_DIALECT,
        },
    );
    if violations.is_empty() {
        assert!(list.tools.iter().all(|t| is_valid_tool_name(&t.name)));
    }
});
