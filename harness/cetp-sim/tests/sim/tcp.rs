//! Both identities over TCP, as `cetp sim` serves them.

use crate::support::*;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn both_identities_over_tcp() {
    let sim = reference();
    let mut addrs = Vec::new();
    for identity in ["a", "b"] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(listener.local_addr().unwrap());
        tokio::spawn(Arc::clone(&sim).serve_tcp(identity, listener));
    }
    let mut uids = Vec::new();
    for (addr, name) in addrs.iter().zip(["a", "b"]) {
        let mut c = Client::new(TcpStream::connect(addr).await.unwrap());
        let h = c.hello().await;
        assert_eq!(h.identity.name, name);
        uids.push(h.identity.uid);
        let token = c.negotiate(&["async_operations"]).await;
        assert_eq!(token.len(), 64);
    }
    assert_eq!(uids, [10123, 10200]);
    // A second connection to the same port works alongside.
    let mut again = Client::new(TcpStream::connect(addrs[0]).await.unwrap());
    assert_eq!(again.hello().await.identity.uid, 10123);
}
