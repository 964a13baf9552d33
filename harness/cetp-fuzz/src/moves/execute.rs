//! Tool executions: one call with drawn args (`args`), the same call
//! several times at once, a result too large to inline.

use super::steps::{any_status, call_step, citing, named, plain, role, settle, Call};
use super::{Exec, GenStep, Generator};
use crate::world::ToolInfo;
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, Step};
use rand::Rng;

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
        let may_ask = tool.confirmation == "always" || matches!(args, Args::Escalating);
        let mut call = Call {
            tool: named(literal(&tool.name)),
            args: Some(args),
            ..Call::new(ident, "execute_tool", &s, &e)
        };
        if self.chance(0.15) {
            // Around the device's now, but never within the time a call
            // takes to arrive: a deadline a few ms away is exceeded or not
            // by the transport's whim, on the target and not in the oracle.
            let d = *[-60_000i64, -1_000, 5_000, 3_600_000]
                .get(self.rng.random_range(0..4))
                .unwrap_or(&5_000);
            call.deadline_in_ms = Some(d);
            tags.extend(["CETP2-4.1-09", "CETP2-5-17"]);
        }
        if self.chance(0.15) {
            // The request claims what only the Provider may decide: that
            // the user confirmed (§4.3), or who the caller is (§7.1).
            call.extras = self.assertion_extras(ident);
            tags.extend(["CETP2-4.3-07", "CETP2-7.1-02", "CETP2-3.4-14"]);
        }
        if tool.execution != "sync" {
            call.expect = any_status();
        }
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s,
            ident,
            may_ask,
        });
        // Reads are observed too: a read tool changes no business state
        // (§3.4).
        let inner = vec![call_step(call.citing(&tags))];
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
            out.push(plain(citing(Step::Uuid { bind: u.clone() }, &[])));
        }
        let first = self.name("c");
        // Up to more calls than the minimum max_concurrent_requests (4):
        // one request id (one executor, §6) or several (RATE_LIMITED, §5).
        let n = self.rng.random_range(2..=6);
        let steps: Vec<Step> = (0..n)
            .map(|i| {
                let bind = if i == 0 {
                    first.clone()
                } else {
                    format!("{first}_{i}")
                };
                let call = Call {
                    tool: named(literal(&tool.name)),
                    args: Some(Args::Valid),
                    request_id: same_rid.then(|| format!("${{{u}}}")),
                    ..Call::new(ident, "execute_tool", &s, &bind)
                };
                call.step()
            })
            .collect();
        out.push(plain(citing(Step::Concurrent { steps }, &["CETP2-6-05"])));
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
        // A quiet sequence leaves no operation to settle (`World::quiet`).
        if !self.world.quiet && self.chance(0.3) {
            caps.push("async_operations");
        }
        let s = self.session_with(ident, &caps, pre);
        let big = self.name("e");
        let call = Call {
            tool: role("large_result"),
            args: Some(Args::Valid),
            expect: any_status(),
            ..Call::new(ident, "execute_tool", &s, &big)
        };
        let mut out = vec![call_step(call.citing(&[
            "CETP2-4.5-01",
            "CETP2-4.5-02",
            "CETP2-2.3-05",
        ]))];
        let (of, settled) = if caps.contains(&"async_operations") {
            let f = self.name("f");
            out.push(settle(ident, &s, &big, &f, &["CETP2-4.4-05"]));
            (f, true)
        } else {
            (big.clone(), false)
        };
        // A target that never grants large_results answers RESULT_TOO_LARGE
        // (judged at the call): it has no file to read (`World::granted`).
        let grants = self.world.granted.iter().any(|c| c == "large_results");
        if caps.contains(&"large_results") && grants {
            // Held to the call's declared size, digest and output_schema
            // only when the call itself answered with the file.
            let read = Step::ReadFd {
                as_: ident.into(),
                handle: format!("${{{of}/result_fd}}"),
                max_bytes: None,
                verify_against: (!settled).then_some(big),
                expect_ok: None,
                output_schema: !settled,
                read_only: !settled,
            };
            out.push(plain(citing(read, &["CETP2-4.5-03", "CETP2-4.5-04"])));
        }
        Some(out)
    }
}
