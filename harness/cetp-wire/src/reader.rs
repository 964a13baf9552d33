//! Bounded line readers: one frame per line, never more than
//! [`MAX_FRAME_BYTES`] buffered.
//!
//! A frame over the limit is refused as soon as the limit is passed, without
//! reading the rest of it; the connection is then unusable (probe wire: "a
//! peer that receives a larger one closes the connection") and every later
//! read reports the same error.

use crate::error::WireDecodeError;
use crate::frame::{decode_frame, request_id_hint, Frame, MAX_FRAME_BYTES};
use std::io::{self, BufRead};

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Reading the stream failed.
    #[error("reading frames: {0}")]
    Io(#[from] io::Error),
    /// A frame passed the limit; the connection must be closed, and every
    /// later read reports this again.
    #[error("frame is larger than {limit} bytes including its newline")]
    FrameTooLarge {
        /// The reader's limit, in bytes including the newline.
        limit: usize,
    },
    /// The stream ended in the middle of a frame.
    #[error("connection closed in the middle of a frame ({len} bytes without a newline)")]
    Truncated {
        /// Bytes of the unfinished frame.
        len: usize,
    },
    /// One bad line; the stream stays usable. `id` is the request id the line
    /// carried, when it could be found, so the device can answer it.
    #[error("undecodable frame: {error}")]
    Decode {
        /// Why the line could not be decoded.
        error: WireDecodeError,
        /// The request id the line carried, if it could be found.
        id: Option<u64>,
    },
}

impl ReadError {
    /// Whether the connection must be closed.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ReadError::Decode { .. })
    }
}

/// The line-assembly state shared by the sync and async readers.
#[derive(Debug)]
struct Lines {
    line: Vec<u8>,
    limit: usize,
    poisoned: bool,
    /// `line` holds a complete line already handed out. A partial line left
    /// by an I/O error or a cancelled future is kept and continued.
    handed_out: bool,
}

enum Step {
    /// `n` bytes consumed, line not finished.
    More(usize),
    /// `n` bytes consumed (including the newline), line complete.
    Done(usize),
}

impl Lines {
    fn new(limit: usize) -> Self {
        Lines {
            line: Vec::new(),
            limit,
            poisoned: false,
            handed_out: false,
        }
    }

    fn start(&mut self) -> Result<(), ReadError> {
        if self.poisoned {
            return Err(ReadError::FrameTooLarge { limit: self.limit });
        }
        if self.handed_out {
            self.handed_out = false;
            self.line.clear();
            // Give back the memory of a huge frame once it has been handled.
            if self.line.capacity() > 1 << 20 {
                self.line.shrink_to(64 * 1024);
            }
        }
        Ok(())
    }

    /// Takes what it can from `avail`.
    fn feed(&mut self, avail: &[u8]) -> Result<Step, ReadError> {
        let (body, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], true),
            None => (avail, false),
        };
        // With the newline still to come, the line would reach at least
        // `len + 1` bytes.
        if self.line.len() + body.len() + 1 > self.limit {
            self.poisoned = true;
            return Err(ReadError::FrameTooLarge { limit: self.limit });
        }
        self.line.extend_from_slice(body);
        self.handed_out = done;
        Ok(if done {
            Step::Done(body.len() + 1)
        } else {
            Step::More(body.len())
        })
    }

    fn eof(&self) -> Result<Option<&[u8]>, ReadError> {
        if self.line.is_empty() {
            Ok(None)
        } else {
            Err(ReadError::Truncated {
                len: self.line.len(),
            })
        }
    }
}

fn decode_line(line: &[u8]) -> Result<Frame, ReadError> {
    decode_frame(line).map_err(|error| ReadError::Decode {
        id: request_id_hint(line),
        error,
    })
}

/// Reads frames from any [`BufRead`].
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    lines: Lines,
}

impl<R: BufRead> FrameReader<R> {
    /// A reader of frames up to [`MAX_FRAME_BYTES`] from `inner`.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_FRAME_BYTES)
    }

    /// A reader with a smaller limit (tests, constrained peers).
    pub fn with_limit(inner: R, limit: usize) -> Self {
        FrameReader {
            inner,
            lines: Lines::new(limit.min(MAX_FRAME_BYTES)),
        }
    }

    /// The next line without its newline; `None` at a clean end of stream.
    /// After an I/O error such as a read timeout, the partial frame is kept
    /// and the next call continues it.
    pub fn read_line(&mut self) -> Result<Option<&[u8]>, ReadError> {
        self.lines.start()?;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if avail.is_empty() {
                return self.lines.eof();
            }
            match self.lines.feed(avail)? {
                Step::More(n) => self.inner.consume(n),
                Step::Done(n) => {
                    self.inner.consume(n);
                    return Ok(Some(&self.lines.line));
                }
            }
        }
    }

    /// The next frame; `None` at a clean end of stream.
    pub fn read_frame(&mut self) -> Result<Option<Frame>, ReadError> {
        match self.read_line()? {
            None => Ok(None),
            Some(line) => decode_line(line).map(Some),
        }
    }

    /// The stream read from.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The stream read from, giving up the reader (a partial frame is lost).
    pub fn into_inner(self) -> R {
        self.inner
    }
}

/// Reads frames from a tokio [`AsyncBufRead`](tokio::io::AsyncBufRead).
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub struct AsyncFrameReader<R> {
    inner: R,
    lines: Lines,
}

#[cfg(feature = "tokio")]
impl<R: tokio::io::AsyncBufRead + Unpin> AsyncFrameReader<R> {
    /// A reader of frames up to [`MAX_FRAME_BYTES`] from `inner`.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_FRAME_BYTES)
    }

    /// A reader with a smaller limit (tests, constrained peers).
    pub fn with_limit(inner: R, limit: usize) -> Self {
        AsyncFrameReader {
            inner,
            lines: Lines::new(limit.min(MAX_FRAME_BYTES)),
        }
    }

    /// The next line without its newline; `None` at a clean end of stream.
    /// Cancel safe: a frame partly read when the future is dropped is
    /// completed by the next call, so this can sit in `tokio::select!`.
    pub async fn read_line(&mut self) -> Result<Option<&[u8]>, ReadError> {
        use tokio::io::AsyncBufReadExt;
        self.lines.start()?;
        loop {
            let avail = self.inner.fill_buf().await?;
            if avail.is_empty() {
                return self.lines.eof();
            }
            match self.lines.feed(avail)? {
                Step::More(n) => self.inner.consume(n),
                Step::Done(n) => {
                    self.inner.consume(n);
                    return Ok(Some(&self.lines.line));
                }
            }
        }
    }

    /// The next frame; `None` at a clean end of stream. Cancel safe, as
    /// [`AsyncFrameReader::read_line`] is.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ReadError> {
        match self.read_line().await? {
            None => Ok(None),
            Some(line) => decode_line(line).map(Some),
        }
    }

    /// The stream read from.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The stream read from, giving up the reader (a partial frame is lost).
    pub fn into_inner(self) -> R {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor, Read};

    /// Counts the bytes pulled from the underlying stream.
    struct Counting<R> {
        inner: R,
        pulled: usize,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.pulled += n;
            Ok(n)
        }
    }

    #[test]
    fn reads_lines_and_frames() {
        let input = b"{\"id\":1,\"op\":\"hello\"}\n{\"id\":1,\"ok\":{}}\n".to_vec();
        let mut r = FrameReader::new(Cursor::new(input));
        assert_eq!(r.read_frame().unwrap().unwrap().id(), Some(1));
        assert!(matches!(r.read_frame().unwrap(), Some(Frame::Final(_))));
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn bad_line_is_not_fatal_and_keeps_its_id() {
        let input = b"{\"id\":5,\"op\":3}\nnot json\n{\"id\":6,\"op\":\"hello\"}\n".to_vec();
        let mut r = FrameReader::new(Cursor::new(input));
        let e = r.read_frame().unwrap_err();
        assert!(!e.is_fatal());
        assert!(matches!(e, ReadError::Decode { id: Some(5), .. }), "{e}");
        let e = r.read_frame().unwrap_err();
        assert!(matches!(e, ReadError::Decode { id: None, .. }), "{e}");
        assert_eq!(r.read_frame().unwrap().unwrap().id(), Some(6));
    }

    #[test]
    fn truncated_frame_is_reported() {
        let mut r = FrameReader::new(Cursor::new(b"{\"id\":1".to_vec()));
        assert!(matches!(
            r.read_line(),
            Err(ReadError::Truncated { len: 7 })
        ));
    }

    #[test]
    fn limit_includes_the_newline() {
        let mut r = FrameReader::with_limit(Cursor::new(b"abcd\nabcde\n".to_vec()), 5);
        assert_eq!(r.read_line().unwrap(), Some(&b"abcd"[..]));
        let e = r.read_line().unwrap_err();
        assert!(e.is_fatal());
        assert!(matches!(e, ReadError::FrameTooLarge { limit: 5 }));
        // Poisoned: the stream position is inside a frame.
        assert!(matches!(
            r.read_line(),
            Err(ReadError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn oversized_frame_is_refused_without_reading_it_all() {
        // An endless frame: the reader must stop near the limit.
        let endless = io::repeat(b'x');
        let counting = Counting {
            inner: endless,
            pulled: 0,
        };
        let mut r = FrameReader::new(BufReader::with_capacity(64 * 1024, counting));
        let e = r.read_line().unwrap_err();
        assert!(matches!(e, ReadError::FrameTooLarge { .. }));
        let pulled = r.get_ref().get_ref().pulled;
        assert!(pulled <= MAX_FRAME_BYTES + 64 * 1024, "{pulled}");
        assert!(r.lines.line.len() < MAX_FRAME_BYTES);
    }

    #[test]
    fn largest_frame_is_accepted() {
        let mut line = vec![b' '; MAX_FRAME_BYTES - 3];
        line.extend_from_slice(b"{}\n");
        let mut data = line.clone();
        data.extend_from_slice(b"{}\n");
        let mut r = FrameReader::new(Cursor::new(data));
        assert_eq!(
            r.read_line().unwrap().map(<[u8]>::len),
            Some(MAX_FRAME_BYTES - 1)
        );
        assert_eq!(r.read_line().unwrap(), Some(&b"{}"[..]));
    }

    #[cfg(feature = "tokio")]
    #[tokio::test]
    async fn async_reader() {
        let data = b"{\"id\":1,\"op\":\"hello\"}\nxx".to_vec();
        let mut r = AsyncFrameReader::new(tokio::io::BufReader::new(&data[..]));
        assert_eq!(r.read_frame().await.unwrap().unwrap().id(), Some(1));
        assert!(matches!(
            r.read_frame().await,
            Err(ReadError::Truncated { len: 2 })
        ));
        let big = [b'x'; 100];
        let mut r = AsyncFrameReader::with_limit(tokio::io::BufReader::new(&big[..]), 10);
        assert!(matches!(
            r.read_line().await,
            Err(ReadError::FrameTooLarge { limit: 10 })
        ));
    }
}
