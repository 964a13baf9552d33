//! Tool executions: one call with drawn args (`args`), the same call
//! several times at once, a result too large to inline.

use super::{call_step, plain, Exec, GenStep, Generator};
use crate::world::ToolInfo;
use cetp_conformance::template::literal;
use rand::Rng;
use serde_json::{json, Value as Json};

impl Generator<'_> {
    /// Move: an execution of an executable tool with drawn args, sometimes
    /// with a drawn deadline or extras claiming what only the Provider may
    /// decide, observed. Empty when no tool is executable.
    pub(super) fn execute(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let tools: Vec<ToolInfo> = self.world.executable().cloned().collect();
        let Some(tool) = self.pick(&tools) else {
            return Vec::new();
        };
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let e = self.name("e");
        let (args, mut tags) = self.args_for(&tool);
        tags.extend(["CETP2-4-04", "CETP2-4.2-02"]);
        let mut step = json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": {"name": literal(&tool.name)}, "args": args, "bind": e});
        if self.chance(0.15) {
            // Around the device's now, but never within the time a call
            // takes to arrive: a deadline a few ms away is exceeded or not
            // by the transport's whim, on the target and not in the oracle.
            let d = *[-60_000i64, -1_000, 5_000, 3_600_000]
                .get(self.rng.random_range(0..4))
                .unwrap_or(&5_000);
            step["deadline_in_ms"] = json!(d);
            tags.extend(["CETP2-4.1-09", "CETP2-5-17"]);
        }
        if self.chance(0.15) {
            // The request claims what only the Provider may decide: that
            // the user confirmed (§4.3), or who the caller is (§7.1).
            step["extras"] = self.assertion_extras(ident);
            tags.extend(["CETP2-4.3-07", "CETP2-7.1-02", "CETP2-3.4-14"]);
        }
        step["requirements"] = json!(tags);
        if tool.execution != "sync" {
            // `accepted` among the expected statuses keeps an operation
            // unsettled, so later moves can read or cancel it by its id;
            // the oracle replaces the set with what its members answered.
            step["expect"] = json!({"status": ["success", "accepted", "error"]});
        }
        let may_ask = tool.confirmation == "always" || args == json!("escalating");
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s,
            ident,
            may_ask,
        });
        // Reads are observed too: a read tool changes no business state
        // (§3.4).
        let inner = vec![call_step(step)];
        self.observed(
            inner,
            Some(e),
            &["CETP2-6-01", "CETP2-4.1-09", "CETP2-3.4-12", "CETP2-3.4-08"],
        )
    }

    /// Move: the same call two to six times at once, under one request id
    /// (one executor, §6) or several (RATE_LIMITED, §5). `None` when no
    /// tool is executable.
    pub(super) fn concurrent(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tools: Vec<ToolInfo> = self.world.executable().cloned().collect();
        let tool = self.pick(&tools)?;
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let same_rid = self.chance(0.7);
        let u = self.name("u");
        let mut out = Vec::new();
        if same_rid {
            out.push(plain(json!({"do": "uuid", "bind": u, "requirements": []})));
        }
        let first = self.name("c");
        // Up to more calls than the minimum max_concurrent_requests (4):
        // one request id (one executor, §6) or several (RATE_LIMITED, §5).
        let n = self.rng.random_range(2..=6);
        let calls: Vec<Json> = (0..n)
            .map(|i| {
                let mut c = json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
                    "tool": {"name": literal(&tool.name)}, "args": "valid",
                    "bind": if i == 0 { first.clone() } else { format!("{first}_{i}") }});
                if same_rid {
                    c["request_id"] = json!(format!("${{{u}}}"));
                }
                c
            })
            .collect();
        out.push(plain(
            json!({"do": "concurrent", "steps": calls, "requirements": ["CETP2-6-05"]}),
        ));
        // Only one request id makes the count independent of timing: one
        // executor, whatever the overlap (§6). With several, how many run
        // depends on how they overlap the Provider's limit.
        Some(if tool.effect == "read" || !same_rid {
            out
        } else {
            self.observed(out, Some(first), &["CETP2-6-05"])
        })
    }

    /// Move: a large result (§4.5) through the profile's `large_result` role:
    /// in a session with or without large_results, and when it comes as a
    /// file, the descriptor read back and held to its declared size, digest,
    /// output_schema and read-only mode. `None` when the profile names no
    /// executable tool for the role.
    pub(super) fn large(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        self.world.roles.get("large_result")?;
        let ident = self.ident();
        let mut caps = vec![];
        if self.chance(0.8) {
            caps.push("large_results");
        }
        if self.chance(0.3) {
            caps.push("async_operations");
        }
        let s = self.session_with(ident, &caps, pre);
        let big = self.name("e");
        let mut out = vec![call_step(json!({
            "do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": {"profile_role": "large_result"}, "args": "valid", "bind": big,
            "expect": {"status": ["success", "accepted", "error"]},
            "requirements": ["CETP2-4.5-01", "CETP2-4.5-02", "CETP2-2.3-05"]}))];
        let (of, settled) = if caps.contains(&"async_operations") {
            let f = self.name("f");
            out.push(call_step(json!({
                "do": "settle", "as": ident, "session": s, "of": big, "bind": f,
                "expect": {}, "requirements": ["CETP2-4.4-05"]})));
            (f, true)
        } else {
            (big.clone(), false)
        };
        if caps.contains(&"large_results") {
            let mut read = json!({"do": "read_fd", "as": ident,
                "handle": format!("${{{of}/result_fd}}"),
                "requirements": ["CETP2-4.5-03", "CETP2-4.5-04"]});
            if !settled {
                read["verify_against"] = json!(big);
                read["output_schema"] = json!(true);
                read["read_only"] = json!(true);
            }
            out.push(plain(read));
        }
        Some(out)
    }
}
