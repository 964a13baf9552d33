//! The `sync:` service, protocol v1 (what `adb push`/`pull` speak when the
//! device does not advertise `stat_v2`/`ls_v2`/`sendrecv_v2`).
//!
//! Requests are an 8-byte header (4-byte id, little-endian u32 length) and,
//! for path requests and `DATA`, that many bytes. Requests may straddle
//! `WRTE` packets, so the input is buffered; the buffer is bounded because we
//! process everything complete before acknowledging the next `WRTE`.

use std::ops::ControlFlow;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::stream::Outbound;
use crate::{AdbdConfig, DeviceServices};

const ID_STAT: &[u8; 4] = b"STAT";
const ID_LIST: &[u8; 4] = b"LIST";
const ID_SEND: &[u8; 4] = b"SEND";
const ID_RECV: &[u8; 4] = b"RECV";
const ID_DONE: &[u8; 4] = b"DONE";
const ID_DATA: &[u8; 4] = b"DATA";
const ID_OKAY: &[u8; 4] = b"OKAY";
const ID_FAIL: &[u8; 4] = b"FAIL";
const ID_QUIT: &[u8; 4] = b"QUIT";

/// Longest path accepted in a request (adbd uses 1024).
pub(crate) const SYNC_PATH_MAX: usize = 1024;
/// Largest `DATA` chunk (adbd's SYNC_DATA_MAX).
pub(crate) const SYNC_DATA_MAX: usize = 64 * 1024;

/// A parsed sync request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    Stat(Vec<u8>),
    List(Vec<u8>),
    Send(Vec<u8>),
    Recv(Vec<u8>),
    Data(Vec<u8>),
    Done(u32),
    Quit,
}

/// A malformed request: answered with `FAIL` and the stream is closed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub String);

/// Take one complete request off the front of `buf`; `Ok(None)` if more
/// bytes are needed.
pub(crate) fn parse_request(buf: &mut Vec<u8>) -> Result<Option<Request>, Malformed> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let id: [u8; 4] = [buf[0], buf[1], buf[2], buf[3]];
    let len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let body_len = match &id {
        ID_STAT | ID_LIST | ID_SEND | ID_RECV => {
            if len as usize > SYNC_PATH_MAX {
                return Err(Malformed(format!("path too long ({len} bytes)")));
            }
            len as usize
        }
        ID_DATA => {
            if len as usize > SYNC_DATA_MAX {
                return Err(Malformed(format!("data chunk too large ({len} bytes)")));
            }
            len as usize
        }
        ID_DONE | ID_QUIT => 0,
        other => {
            return Err(Malformed(format!(
                "unknown sync request {:?}",
                String::from_utf8_lossy(other)
            )))
        }
    };
    if buf.len() < 8 + body_len {
        return Ok(None);
    }
    let body = buf[8..8 + body_len].to_vec();
    buf.drain(..8 + body_len);
    Ok(Some(match &id {
        ID_STAT => Request::Stat(body),
        ID_LIST => Request::List(body),
        ID_SEND => Request::Send(body),
        ID_RECV => Request::Recv(body),
        ID_DATA => Request::Data(body),
        ID_DONE => Request::Done(len),
        _ => Request::Quit,
    }))
}

fn msg(id: &[u8; 4], words: &[u32], tail: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + 4 * words.len() + tail.len());
    v.extend_from_slice(id);
    for w in words {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v.extend_from_slice(tail);
    v
}

fn fail(text: &str) -> Vec<u8> {
    msg(ID_FAIL, &[text.len() as u32], text.as_bytes())
}

/// Parse `SEND`'s `path,mode` (mode in decimal, as the host prints it).
pub(crate) fn parse_send_target(spec: &[u8]) -> Result<(String, u32), String> {
    let spec = std::str::from_utf8(spec).map_err(|_| "path is not UTF-8".to_string())?;
    let (path, mode) = match spec.rsplit_once(',') {
        Some((p, m)) => (p, m.parse::<u32>().map_err(|_| format!("bad mode {m:?}"))?),
        None => (spec, crate::S_IFREG | 0o644),
    };
    if !path.starts_with('/') {
        return Err(format!("path {path:?} is not absolute"));
    }
    Ok((path.to_owned(), mode))
}

/// An in-progress `SEND`.
struct Upload {
    path: String,
    mode: u32,
    data: Vec<u8>,
    error: Option<String>,
}

/// What one request leads to: a reply (or none) and the next request, or
/// the end of the stream (`Break`).
type Next = ControlFlow<(), Option<Vec<u8>>>;

pub(crate) async fn run_sync(
    outb: &Outbound,
    mut inbound: mpsc::Receiver<Vec<u8>>,
    services: Arc<dyn DeviceServices>,
    config: Arc<AdbdConfig>,
) {
    if outb.ready().await.is_err() {
        return;
    }
    let mut buf: Vec<u8> = Vec::new();
    let mut upload: Option<Upload> = None;
    while let Some(chunk) = inbound.recv().await {
        buf.extend_from_slice(&chunk);
        loop {
            let req = match parse_request(&mut buf) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(Malformed(why)) => {
                    let _ = outb.write(&fail(&why)).await;
                    return;
                }
            };
            let ControlFlow::Continue(reply) =
                answer(req, &mut upload, outb, &*services, &config).await
            else {
                return;
            };
            if let Some(r) = reply {
                if outb.write(&r).await.is_err() {
                    return;
                }
            }
        }
        // Acknowledge only after consuming: the buffer never holds more than
        // one partial request plus one WRTE.
        if outb.ack().await.is_err() {
            return;
        }
    }
}

/// One request: during a `SEND` only its `DATA` and `DONE` are allowed;
/// outside one, `STAT`, `LIST`, `RECV`, `SEND` and `QUIT`.
async fn answer(
    req: Request,
    upload: &mut Option<Upload>,
    outb: &Outbound,
    services: &dyn DeviceServices,
    config: &AdbdConfig,
) -> Next {
    match (req, upload.as_mut()) {
        (Request::Data(d), Some(up)) => {
            up.add(&d, config.max_push_bytes);
            ControlFlow::Continue(None)
        }
        (Request::Done(_mtime), Some(_)) => {
            let Some(up) = upload.take() else {
                return ControlFlow::Break(());
            };
            finish_upload(up, outb, services).await
        }
        (_, Some(_)) => {
            let _ = outb.write(&fail("unexpected request during SEND")).await;
            ControlFlow::Break(())
        }
        (Request::Data(_) | Request::Done(_), None) => {
            let _ = outb.write(&fail("DATA/DONE outside SEND")).await;
            ControlFlow::Break(())
        }
        (Request::Quit, None) => ControlFlow::Break(()),
        (Request::Stat(path), None) => {
            let path = String::from_utf8_lossy(&path);
            ControlFlow::Continue(Some(match services.stat(&path) {
                Some(st) => msg(
                    ID_STAT,
                    &[
                        st.mode,
                        u32::try_from(st.size).unwrap_or(u32::MAX),
                        st.mtime,
                    ],
                    &[],
                ),
                None => msg(ID_STAT, &[0, 0, 0], &[]),
            }))
        }
        (Request::List(_path), None) => {
            // We keep no directory listings: every directory looks empty.
            ControlFlow::Continue(Some(msg(ID_DONE, &[0, 0, 0, 0], &[])))
        }
        (Request::Recv(path), None) => send_file(&path, outb, services).await,
        (Request::Send(spec), None) => {
            *upload = Some(Upload::start(&spec));
            ControlFlow::Continue(None)
        }
    }
}

/// `RECV`: the file in `DATA` chunks, then `DONE`; or `FAIL`.
async fn send_file(path: &[u8], outb: &Outbound, services: &dyn DeviceServices) -> Next {
    let path = String::from_utf8_lossy(path).into_owned();
    let result = tokio::select! {
        r = services.read_file(&path) => r,
        _ = outb.closed() => return ControlFlow::Break(()),
    };
    match result {
        Ok(data) => {
            for chunk in data.chunks(SYNC_DATA_MAX) {
                if outb
                    .write(&msg(ID_DATA, &[chunk.len() as u32], chunk))
                    .await
                    .is_err()
                {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(Some(msg(ID_DONE, &[0], &[])))
        }
        Err(e) => ControlFlow::Continue(Some(fail(&e))),
    }
}

/// `DONE` of a `SEND`: the file is pushed (unless the upload already
/// failed), answered with `OKAY` or `FAIL`.
async fn finish_upload(up: Upload, outb: &Outbound, services: &dyn DeviceServices) -> Next {
    let result = match up.error {
        Some(e) => Err(e),
        None => {
            tokio::select! {
                r = services.push_file(&up.path, up.mode, up.data) => r,
                _ = outb.closed() => return ControlFlow::Break(()),
            }
        }
    };
    ControlFlow::Continue(Some(match result {
        Ok(()) => msg(ID_OKAY, &[0], &[]),
        Err(e) => fail(&e),
    }))
}

impl Upload {
    /// A `SEND` of `spec` (`path,mode`); a bad spec is kept as the upload's
    /// error so that its `DATA`/`DONE` are consumed and it fails at `DONE`.
    fn start(spec: &[u8]) -> Upload {
        match parse_send_target(spec) {
            Ok((path, mode)) => Upload {
                path,
                mode,
                data: Vec::new(),
                error: None,
            },
            Err(e) => Upload {
                path: String::new(),
                mode: 0,
                data: Vec::new(),
                error: Some(e),
            },
        }
    }

    /// A `DATA` chunk; past `max` bytes the upload fails and keeps nothing.
    fn add(&mut self, d: &[u8], max: usize) {
        if self.error.is_some() {
            return;
        }
        if self.data.len() + d.len() > max {
            self.error = Some(format!("file too large (limit {max} bytes)"));
            self.data = Vec::new();
        } else {
            self.data.extend_from_slice(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &[u8; 4], len: u32, body: &[u8]) -> Vec<u8> {
        msg(id, &[len], body)
    }

    #[test]
    fn parses_across_chunk_boundaries() {
        let mut stream = req(ID_SEND, 23, b"/data/local/tmp/x,33188");
        stream.extend(req(ID_DATA, 3, b"abc"));
        stream.extend(req(ID_DONE, 1234, b""));
        stream.extend(req(ID_QUIT, 0, b""));
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for b in stream {
            buf.push(b);
            while let Some(r) = parse_request(&mut buf).unwrap() {
                got.push(r);
            }
        }
        assert_eq!(
            got,
            vec![
                Request::Send(b"/data/local/tmp/x,33188".to_vec()),
                Request::Data(b"abc".to_vec()),
                Request::Done(1234),
                Request::Quit
            ]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_malformed() {
        let mut b = req(ID_DATA, (SYNC_DATA_MAX + 1) as u32, b"");
        assert!(parse_request(&mut b).is_err());
        let mut b = req(ID_STAT, u32::MAX, b"");
        assert!(parse_request(&mut b).is_err());
        let mut b = req(b"STA2", 4, b"/foo");
        assert!(parse_request(&mut b).is_err());
        let mut b = b"DAT".to_vec();
        assert_eq!(parse_request(&mut b), Ok(None));
    }

    #[test]
    fn send_target() {
        assert_eq!(
            parse_send_target(b"/data/local/tmp/a,b.apk,33188").unwrap(),
            ("/data/local/tmp/a,b.apk".to_string(), 33188)
        );
        assert_eq!(
            parse_send_target(b"/x").unwrap(),
            ("/x".to_string(), 0o100644)
        );
        assert!(parse_send_target(b"/x,notanumber").is_err());
        assert!(parse_send_target(b"relative,0").is_err());
        assert!(parse_send_target(&[b'/', 0xff, b',', b'1']).is_err());
    }
}
