//! The raw probe-wire trace of a target, for `cetp replay` and failure
//! reports: every frame each identity's connection sent and received.

use cetp_transport::{Direction, Tap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One frame as it crossed the wire (without its newline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracedFrame {
    /// `a` or `b`.
    pub identity: String,
    /// Sent to the device or received from it.
    pub direction: Direction,
    /// Microseconds since the trace started.
    pub at_us: u64,
    /// The frame's bytes, cut to [`WireTrace::max_frame_bytes`].
    pub bytes: Vec<u8>,
    /// The frame's full length.
    pub len: usize,
}

impl TracedFrame {
    /// Whether `bytes` holds only the frame's head.
    pub fn is_truncated(&self) -> bool {
        self.bytes.len() < self.len
    }
}

struct Inner {
    frames: Vec<TracedFrame>,
    bytes: usize,
    dropped: u64,
}

/// A bounded recorder of frames: frames beyond `max_total_bytes` are counted
/// and dropped, and each frame keeps at most `max_frame_bytes` (a 16 MiB
/// chunk frame is kept as its head).
pub struct WireTrace {
    start: Instant,
    max_frame_bytes: usize,
    max_total_bytes: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for WireTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("WireTrace")
            .field("frames", &inner.frames.len())
            .field("bytes", &inner.bytes)
            .field("dropped", &inner.dropped)
            .finish()
    }
}

impl WireTrace {
    /// 64 KiB per frame, 64 MiB in all.
    pub fn new() -> Arc<WireTrace> {
        Self::with_limits(64 * 1024, 64 * 1024 * 1024)
    }

    /// A trace keeping at most `max_frame_bytes` of each frame and
    /// `max_total_bytes` in all.
    pub fn with_limits(max_frame_bytes: usize, max_total_bytes: usize) -> Arc<WireTrace> {
        Arc::new(WireTrace {
            start: Instant::now(),
            max_frame_bytes,
            max_total_bytes,
            inner: Mutex::new(Inner {
                frames: Vec::new(),
                bytes: 0,
                dropped: 0,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most kept of one frame.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// A tap recording the frames of identity `identity`'s connection.
    pub fn tap(self: &Arc<Self>, identity: &str) -> Tap {
        let trace = Arc::clone(self);
        let identity = identity.to_string();
        Arc::new(move |direction, bytes: &[u8]| trace.record(&identity, direction, bytes))
    }

    /// Records one frame of `identity`'s connection, cut to the limits; a
    /// frame over the total is counted in [`WireTrace::dropped`] instead.
    pub fn record(&self, identity: &str, direction: Direction, bytes: &[u8]) {
        let kept = &bytes[..bytes.len().min(self.max_frame_bytes)];
        let at_us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        let mut inner = self.lock();
        if inner.bytes + kept.len() > self.max_total_bytes {
            inner.dropped += 1;
            return;
        }
        inner.bytes += kept.len();
        inner.frames.push(TracedFrame {
            identity: identity.to_string(),
            direction,
            at_us,
            bytes: kept.to_vec(),
            len: bytes.len(),
        });
    }

    /// A copy of the frames recorded so far, in the order they crossed.
    pub fn frames(&self) -> Vec<TracedFrame> {
        self.lock().frames.clone()
    }

    /// Frames not recorded because the trace was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Forgets every frame and the dropped count: the trace starts over,
    /// its byte budget whole again.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.frames.clear();
        inner.bytes = 0;
        inner.dropped = 0;
    }

    /// One line per frame: `+12.345ms a -> {...}`; cut frames end with
    /// `… (N bytes)`; control characters and bidi overrides are escaped and
    /// bytes that are not
    /// UTF-8 show as U+FFFD.
    pub fn render(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        for f in &inner.frames {
            let _ = write!(
                out,
                "+{}.{:03}ms {} {} ",
                f.at_us / 1000,
                f.at_us % 1000,
                f.identity,
                f.direction.arrow()
            );
            for c in String::from_utf8_lossy(&f.bytes).chars() {
                // Bidi overrides too, as the terminal reporter does: a
                // Provider's text must not reorder the line it is shown in.
                let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}');
                if c.is_control() || bidi {
                    out.extend(c.escape_default());
                } else {
                    out.push(c);
                }
            }
            if f.is_truncated() {
                let _ = write!(out, " … ({} bytes)", f.len);
            }
            out.push('\n');
        }
        if inner.dropped > 0 {
            let _ = writeln!(
                out,
                "({} more frames not recorded: trace full)",
                inner.dropped
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_bounds_frames() {
        let t = WireTrace::with_limits(8, 20);
        let tap = t.tap("a");
        tap(Direction::Sent, br#"{"id":1,"op":"hello"}"#);
        tap(Direction::Received, b"short");
        tap(Direction::Received, b"0123456789");
        let frames = t.frames();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].bytes, br#"{"id":1,"#.to_vec());
        assert!(frames[0].is_truncated());
        assert_eq!(frames[1].direction, Direction::Received);
        assert_eq!(t.dropped(), 1);
        let text = t.render();
        assert!(text.contains(r#"a -> {"id":1, … (21 bytes)"#), "{text}");
        assert!(text.contains("a <- short"), "{text}");
        assert!(text.contains("1 more frames"), "{text}");
    }

    #[test]
    fn controls_and_bidi_overrides_are_escaped() {
        let t = WireTrace::new();
        t.record(
            "a",
            Direction::Received,
            "ok\u{1b}[2J \u{202E}gpj.exe".as_bytes(),
        );
        let text = t.render();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202E}'),
            "{text}"
        );
        assert!(text.contains("\\u{202e}"), "{text}");
    }
}
