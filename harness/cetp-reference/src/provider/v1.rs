//! The v1 view of a dual-stack (or v1-only) Provider (§2.1, §8): read-only
//! tools, v1 answer shapes, v1 error codes.

use super::args::ToolArgs;
use super::state::Failure;
use super::{Mutant, ReferenceProvider};
use cetp_proto::bundle::parse_json_text;
use cetp_proto::envelope::keys;
use cetp_proto::provider::{CallerIdentity, Reply};
use cetp_proto::{Bundle, ErrorCode};
use serde_json::{json, Value as Json};

impl ReferenceProvider {
    pub(crate) fn v1_call(
        &self,
        caller: &CallerIdentity,
        now_ms: i64,
        method: &str,
        extras: Option<&Bundle>,
    ) -> Reply {
        let result = match method {
            "list_tools" => Ok(self.catalog.list_tools_v1(&self.cfg.faults)),
            "get_provider_info" => Ok(json!({
                "provider_name": self.vendor_text(&self.cfg.provider_name),
                "description": self.vendor_text(&self.cfg.description),
                "scopes": super::fixtures::scope_defs(self.cfg.fixtures)
                    .iter()
                    .map(|s| {
                        json!({
                            "name": s.name,
                            "description": self.vendor_text(s.description),
                        })
                    })
                    .collect::<Vec<_>>(),
            })),
            "execute_tool" => self.v1_execute(caller, now_ms, extras),
            _ => Err(Failure::new(ErrorCode::MethodNotFound, "No such method.")),
        };
        self.finish_v1(result)
    }

    /// v1 `execute_tool`: only tools without side effects exist here (§8: a
    /// v1 Consumer only ever sees the read-only subset).
    fn v1_execute(
        &self,
        caller: &CallerIdentity,
        now_ms: i64,
        extras: Option<&Bundle>,
    ) -> Result<Json, Failure> {
        let empty = Bundle::new();
        let b = extras.unwrap_or(&empty);
        let bad = |m: &str| Failure::new(ErrorCode::InvalidArgs, m);
        let name = b
            .get_string(keys::TOOL_NAME)
            .map_err(|_| bad("tool_name is required."))?;
        let args = b
            .opt_string(keys::ARGS)
            .map_err(|_| bad("args must be a JSON string."))?
            .unwrap_or_else(|| "{}".to_string());
        let tool = self
            .catalog
            .find(&name)
            .filter(|t| t.is_read() || self.has(Mutant::V1ExecutesWriteTool))
            .ok_or_else(|| Failure::new(ErrorCode::ToolNotFound, "No such tool."))?;
        if args.len() as u64 > self.limits().max_request_bytes {
            return Err(bad("args is too large."));
        }
        let value = parse_json_text("args", &args).map_err(|_| bad("args is not valid JSON."))?;
        if !tool.input.is_valid(&value) {
            return Err(bad("The arguments do not match the tool's parameters."));
        }
        let targs = ToolArgs::parse(tool.kind, &value).map_err(|why| bad(&why))?;
        let held = {
            let d = super::util::lock(&self.durable.state);
            d.grants
                .get(&caller.uid)
                .unwrap_or(&self.cfg.default_grants)
                .clone()
        };
        // A described app's scope policy is its business's (`described.rs`).
        if !self.has(Mutant::V1SkipsScopeCheck)
            && self.described().is_none()
            && tool.scopes.iter().any(|s| !held.contains(*s))
        {
            return Err(Failure::new(ErrorCode::PermissionDenied, "Not allowed."));
        }
        let out = if let ToolArgs::Described { index, args, .. } = &targs {
            // The business decides, for this caller (its scopes).
            self.described_v1_value(*index, args, caller.uid)?
        } else if tool.is_read() {
            self.read_value(&targs)?
        } else {
            self.effect_now(now_ms, caller.uid, &targs)?
        };
        if !self.output_valid(tool, &out) {
            return Err(Failure::new(ErrorCode::InternalError, "Internal error."));
        }
        // v1 has no file results: a result too large to inline is refused as
        // an argument problem (RESULT_TOO_LARGE is not a v1 code).
        if out.to_string().len() as u64 > self.limits().max_inline_result_bytes {
            return Err(bad("Too many rows for one answer; ask for fewer."));
        }
        Ok(out)
    }
}
