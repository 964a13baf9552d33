//! The stream table and a stream task's handle on it: what the connection's
//! reader and each service task (shell, socket, sync) share. Whoever removes
//! a handle from the table sends our `CLSE`, so exactly one is sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch, Notify};

use crate::packet::{Packet, A_CLSE, A_OKAY, A_WRTE};

/// The reader's view of one open stream.
pub(crate) struct StreamHandle {
    pub(crate) remote: u32,
    pub(crate) inbound: mpsc::Sender<Vec<u8>>,
    pub(crate) okay: Arc<Notify>,
    /// Never sent on; dropped with the handle to tell the task the stream closed.
    pub(crate) _alive: watch::Sender<()>,
}

pub(crate) type Streams = Arc<Mutex<HashMap<u32, StreamHandle>>>;

pub(crate) fn lock(streams: &Streams) -> std::sync::MutexGuard<'_, HashMap<u32, StreamHandle>> {
    // A poisoned lock only means a panic elsewhere; the map is still usable.
    streams.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stream task's handle for sending to the host.
pub(crate) struct Outbound {
    pub(crate) local: u32,
    pub(crate) remote: u32,
    pub(crate) out: mpsc::Sender<Packet>,
    pub(crate) okay: Arc<Notify>,
    pub(crate) alive: watch::Receiver<()>,
    pub(crate) max_payload: usize,
    pub(crate) streams: Streams,
}

/// The host closed the stream (or the connection ended).
#[derive(Debug)]
pub(crate) struct Closed;

impl Outbound {
    /// Resolves when the stream has been closed by the host or the connection.
    pub(crate) async fn closed(&self) {
        let mut rx = self.alive.clone();
        while rx.changed().await.is_ok() {}
    }

    async fn send(&self, p: Packet) -> Result<(), Closed> {
        self.out.send(p).await.map_err(|_| Closed)
    }

    /// Accept the `OPEN`.
    pub(crate) async fn ready(&self) -> Result<(), Closed> {
        self.send(Packet::new(A_OKAY, self.local, self.remote, vec![]))
            .await
    }

    /// Acknowledge one `WRTE` from the host.
    pub(crate) async fn ack(&self) -> Result<(), Closed> {
        self.send(Packet::new(A_OKAY, self.local, self.remote, vec![]))
            .await
    }

    /// Send `data` as `WRTE`s of at most the negotiated payload, waiting for
    /// the host's `OKAY` after each.
    pub(crate) async fn write(&self, data: &[u8]) -> Result<(), Closed> {
        for chunk in data.chunks(self.max_payload.max(1)) {
            self.send(Packet::new(A_WRTE, self.local, self.remote, chunk.to_vec()))
                .await?;
            tokio::select! {
                _ = self.okay.notified() => {}
                _ = self.closed() => return Err(Closed),
            }
        }
        Ok(())
    }

    /// Refuse the `OPEN` (`CLSE` with our id 0, as adbd does).
    pub(crate) async fn refuse(&self) {
        if self.take_handle() {
            let _ = self.send(Packet::new(A_CLSE, 0, self.remote, vec![])).await;
        }
    }

    /// Close the stream from our side, unless it is already closed.
    pub(crate) async fn close(&self) {
        if self.take_handle() {
            let _ = self
                .send(Packet::new(A_CLSE, self.local, self.remote, vec![]))
                .await;
        }
    }

    /// Remove our own handle from the table; true if we removed it (and so
    /// must send the `CLSE`).
    fn take_handle(&self) -> bool {
        let mut map = lock(&self.streams);
        match map.get(&self.local) {
            Some(h) if Arc::ptr_eq(&h.okay, &self.okay) => map.remove(&self.local).is_some(),
            _ => false,
        }
    }
}
