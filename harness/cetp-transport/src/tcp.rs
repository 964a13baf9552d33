//! The TCP transport: a probe-wire endpoint at `HOST:PORT` (a simulated
//! device, a vendor rig, or the host end of an `adb forward`).

use crate::error::TransportError;
use std::time::Duration;
use tokio::net::TcpStream;

/// Connects to `addr` (`HOST:PORT`), trying every address it resolves to,
/// within `timeout` in all (name resolution included).
pub async fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, TransportError> {
    let attempt = async {
        let addrs: Vec<_> = tokio::net::lookup_host(addr)
            .await
            .map_err(|e| TransportError::io(format!("resolving {addr}"), &e))?
            .collect();
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect(a).await {
                Ok(s) => {
                    // Frames are small and latency-bound; Nagle only delays them.
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = Some(TransportError::io(format!("connecting to {a}"), &e)),
            }
        }
        Err(last.unwrap_or_else(|| TransportError::Io {
            context: format!("resolving {addr}"),
            message: "no addresses".into(),
        }))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(TransportError::timeout(
            format!("connect to {addr}"),
            timeout,
        )),
    }
}
