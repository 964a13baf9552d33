//! The device log `logcat -d` prints: a ring buffer of lines in logcat's
//! `threadtime` format, bounded in lines and in line length.

use crate::lock;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Lines kept; older ones are dropped, as logcat's ring buffer does.
pub(crate) const MAX_LINES: usize = 4096;
/// Longest message kept, in bytes; longer ones are cut at a char boundary.
pub(crate) const MAX_MESSAGE: usize = 1024;
/// Pid of the simulated Provider process in log lines.
const PID: u32 = 4242;
const TAG: &str = "CetpSim";

#[derive(Debug)]
pub(crate) struct SimLog {
    lines: Mutex<VecDeque<String>>,
    cap: usize,
}

impl SimLog {
    pub(crate) fn new(cap: usize) -> Self {
        SimLog {
            lines: Mutex::new(VecDeque::new()),
            cap: cap.max(1),
        }
    }

    pub(crate) fn push(&self, now_ms: i64, level: char, message: &str) {
        let message = truncate(message, MAX_MESSAGE);
        // One log line per entry: a message with newlines would forge others.
        let message = message.replace(['\n', '\r'], " ");
        let line = format!(
            "{} {PID:5} {PID:5} {level} {TAG:8}: {message}",
            threadtime(now_ms)
        );
        let mut lines = lock(&self.lines);
        while lines.len() >= self.cap {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        lock(&self.lines).iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        lock(&self.lines).clear();
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `MM-DD HH:MM:SS.mmm` (UTC) of a Unix time in milliseconds (logcat's
/// `threadtime` stamp); a time chrono cannot represent shows as the epoch.
fn threadtime(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%m-%d %H:%M:%S%.3f")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(threadtime(0), "01-01 00:00:00.000");
        assert_eq!(threadtime(-1), "12-31 23:59:59.999");
        assert_eq!(threadtime(951_782_400_000), "02-29 00:00:00.000");
        // 2026-09-02T12:00:00.123Z
        assert_eq!(threadtime(1_788_350_400_123), "09-02 12:00:00.123");
        assert_eq!(threadtime(i64::MIN).len(), 18);
        assert_eq!(threadtime(i64::MAX).len(), 18);
    }

    #[test]
    fn ring_is_bounded() {
        let log = SimLog::new(3);
        for i in 0..10 {
            log.push(0, 'I', &format!("line {i}"));
        }
        let lines = log.lines();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with("line 7"), "{lines:?}");
        assert!(lines[2].ends_with("line 9"));
        assert!(lines[0].starts_with("01-01 00:00:00.000  4242  4242 I CetpSim : "));
        log.clear();
        assert!(log.lines().is_empty());
    }

    #[test]
    fn long_and_multiline_messages_stay_one_bounded_line() {
        let log = SimLog::new(10);
        log.push(0, 'W', &"é".repeat(MAX_MESSAGE));
        log.push(0, 'W', "one\ntwo\rthree");
        let lines = log.lines();
        assert!(lines[0].len() < MAX_MESSAGE + 64);
        assert!(lines[1].ends_with("one two three"));
    }
}
