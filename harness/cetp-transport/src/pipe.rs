//! The in-process transport: an in-memory byte pipe to a device served in
//! the same process, so the wire codec is exercised without sockets.

use std::future::Future;
use tokio::io::DuplexStream;
use tokio::runtime::Handle;

/// Bytes buffered in each direction of the pipe. A chunk frame of 1 MiB of
/// data is about 1.4 MB of base64; a pipe of that order keeps a large
/// `read_fd` from ping-ponging between the tasks on every few KiB.
pub const PIPE_BYTES: usize = 1024 * 1024;

/// Returns the host end of a pipe whose device end is handed to `serve`,
/// spawned on `handle`. The device sees EOF when the host end is dropped.
pub fn connect<F, Fut>(handle: &Handle, serve: F) -> DuplexStream
where
    F: FnOnce(DuplexStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (host, device) = tokio::io::duplex(PIPE_BYTES);
    handle.spawn(serve(device));
    host
}
