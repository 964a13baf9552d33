//! Moving a phone's wall clock over adb, where the user allowed it
//! (`clock=move` on an adb target) and the device lets root set it: an
//! emulator or a userdebug build after `adb root`, or one with `su`.
//!
//! The probe cannot move the clock (probe-wire's `advance_clock` is the
//! simulated device's), so time-bound cases wait in real time on a phone.
//! Setting the clock is an effect on the user's device, so it happens only
//! when the target says `clock=move`, and the clock is set back when the
//! target is closed. Automatic time (`settings global auto_time`) is
//! switched off while it is moved, or the network would set it back under
//! the case, and restored afterwards.
//!
//! Only the wall clock moves: `elapsedRealtime` does not, and a Provider
//! may time lifetimes by it. The runner therefore trusts a move only for a
//! PASS and judges anything else again in real time
//! (`Device::clock_moves_wall_only`).

use cetp_transport::adb::Adb;

/// Moves one device's wall clock for both identities' connections.
pub(crate) struct ClockMover {
    adb: Adb,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// How a command runs as root (`""` when adbd is root, `"su 0 "`),
    /// once known.
    root: Option<&'static str>,
    /// `auto_time` as it was before the first move (`None`: not read yet).
    auto_time: Option<String>,
    /// How far the wall clock is set ahead of where it would be, in ms.
    ahead_ms: i64,
    /// What a failed preparation said, once: later moves are refused alike.
    refused: Option<String>,
}

/// How much later than asked the clock may read after a move: `date` sets
/// whole seconds (rounded up), and the probe's clock is read over a round
/// trip.
pub(crate) const SETTLE_MS: i64 = 1_500;

impl ClockMover {
    pub(crate) fn new(adb: Adb) -> Self {
        ClockMover {
            adb,
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    /// Sets the wall clock from `now_ms` (the device's time now) to at
    /// least `now_ms + ms`. Errors are the reason the device refused, for
    /// an `unsupported` answer: the case then waits in real time.
    pub(crate) async fn advance(&self, now_ms: i64, ms: u64) -> Result<(), String> {
        let mut st = self.state.lock().await;
        if let Some(why) = &st.refused {
            return Err(why.clone());
        }
        let root = match st.root {
            Some(r) => r,
            None => match self.prepare(&mut st).await {
                Ok(r) => r,
                Err(why) => {
                    st.refused = Some(why.clone());
                    return Err(why);
                }
            },
        };
        let target_ms = now_ms.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        // Whole seconds, rounded up: the clock moves at least `ms`.
        let secs = target_ms.div_euclid(1000) + i64::from(target_ms.rem_euclid(1000) != 0);
        self.set(root, secs).await?;
        st.ahead_ms = st.ahead_ms.saturating_add(secs * 1000 - now_ms);
        Ok(())
    }

    /// Sets the wall clock back by what the moves put it ahead, and
    /// automatic time back as it was. Nothing where it was never moved.
    /// `now_ms`: the device's time now as the probe reads it (to the
    /// millisecond).
    pub(crate) async fn restore(&self, now_ms: i64) -> Result<(), String> {
        let mut st = self.state.lock().await;
        let Some(root) = st.root else {
            return Ok(());
        };
        if st.ahead_ms != 0 {
            // Whole seconds, rounded down: the clock ends at most a second
            // behind, never ahead, so a real-time wait reckoned on it is
            // never short (a Provider timing by elapsedRealtime has not
            // expired yet at a time a clock ahead would call due).
            let back = now_ms.saturating_sub(st.ahead_ms);
            self.set(root, back.div_euclid(1000)).await?;
            st.ahead_ms = 0;
        }
        match st.auto_time.take().as_deref() {
            None | Some("0") => {}
            // Never set on this device: leave it unset again.
            Some("null") => {
                self.shell_ok("settings delete global auto_time").await?;
            }
            Some(auto) => {
                self.shell_ok(&format!("settings put global auto_time {auto}"))
                    .await?;
            }
        }
        st.root = None;
        Ok(())
    }

    /// Finds how to run as root, and switches automatic time off.
    async fn prepare(&self, st: &mut State) -> Result<&'static str, String> {
        let root = if self.uid("").await.as_deref() == Some("0") {
            ""
        } else if self.uid("su 0 ").await.as_deref() == Some("0") {
            "su 0 "
        } else {
            return Err("clock=move: the device does not let the shell set its clock (`id -u` is not 0 and `su 0` is not there); `adb root` on an emulator or a userdebug build allows it".into());
        };
        let auto = self.shell_ok("settings get global auto_time").await?;
        st.auto_time = Some(auto.trim().to_string());
        if auto.trim() != "0" {
            self.shell_ok("settings put global auto_time 0").await?;
        }
        st.root = Some(root);
        Ok(root)
    }

    async fn uid(&self, prefix: &str) -> Option<String> {
        let out = self.adb.shell(&format!("{prefix}id -u")).await.ok()?;
        (out.exit_code == Some(0)).then(|| out.text().trim().to_string())
    }

    async fn set(&self, root: &str, secs: i64) -> Result<(), String> {
        self.shell_ok(&format!("{root}date @{secs}"))
            .await
            .map(drop)
    }

    async fn shell_ok(&self, command: &str) -> Result<String, String> {
        self.adb
            .shell_ok(command)
            .await
            .map(|o| o.text())
            .map_err(|e| format!("clock=move: {e}"))
    }
}
