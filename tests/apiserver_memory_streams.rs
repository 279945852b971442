//! What an unread list or watch costs the server, with 1 MiB objects: clients that ask for a
//! long list (or a watch, whose initial events are the whole list) and never read it, over
//! real sockets. The server holds a bounded, small number of bytes per such request (the
//! `apiserver` module docs state the bound); it never copies the objects into the response.
//!
//! Measured as the growth of this process's resident set (Linux `/proc/self/statm`) while the
//! requests are open, divided by their number. This file holds one test, so that nothing else
//! in the process allocates meanwhile.
#![cfg(target_os = "linux")]

mod apiserver_support;

use std::collections::BTreeMap;

use apiserver_support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Resident bytes of this process.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

const OBJECTS: usize = 48;
const UNREAD: usize = 64;

/// A connection that sends `path` and then never reads, with a small receive buffer.
async fn unread(server: &controlloop::apiserver::ApiServer, path: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = within("no connection", socket.connect(server.addr()))
        .await
        .unwrap();
    conn.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    // The server has answered (the head and the first body bytes are in): it is sending.
    let mut one = [0u8; 64];
    let n = within("the server never answered", conn.peek(&mut one))
        .await
        .unwrap();
    assert!(
        n > 0 && one.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&one)
    );
    conn
}

/// Reads a whole list over a raw connection into a small buffer, discarding it (so the reader
/// itself allocates nothing that could blur the measurement). Returns the bytes read.
async fn read_through(server: &controlloop::apiserver::ApiServer, path: &str) -> usize {
    use tokio::io::AsyncReadExt;
    let mut conn = within("no connection", TcpStream::connect(server.addr()))
        .await
        .unwrap();
    conn.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        let n = within("the list never ended", conn.read(&mut buf))
            .await
            .unwrap();
        if n == 0 {
            return total;
        }
        total += n;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_list_or_watch_of_1_mib_objects_holds_a_small_fixed_number_of_bytes() {
    let server = server().await;
    let api = cms(&server, "default");
    for i in 0..OBJECTS {
        let mut c = cm(&format!("big-{i:02}"), &[], "");
        c.data = Some(BTreeMap::from([("v".to_string(), "x".repeat(1_000_000))]));
        create(&api, &c).await;
    }
    let path = "/api/v1/namespaces/default/configmaps";
    // Warm up: one complete list and one watch that is read, so that whatever the server and
    // the runtime allocate once is allocated before the baseline.
    assert!(read_through(&server, path).await > OBJECTS * 1_000_000);
    drop(unread(&server, &format!("{path}?watch=true&timeoutSeconds=1")).await);
    drop(unread(&server, path).await);
    let before = rss();
    let mut held = Vec::new();
    for _ in 0..UNREAD / 2 {
        held.push(unread(&server, path).await);
        held.push(unread(&server, &format!("{path}?watch=true")).await);
    }
    // Give every connection time to fill what it will: a complete read of the same 48 MB
    // list on another connection takes far longer than filling socket buffers.
    assert!(read_through(&server, path).await > OBJECTS * 1_000_000);
    let after = rss();
    let per_request = after.saturating_sub(before) / UNREAD;
    eprintln!(
        "RSS {} KiB before, {} KiB with {UNREAD} unread requests of {OBJECTS} 1 MiB objects: {} KiB per request",
        before >> 10,
        after >> 10,
        per_request >> 10
    );
    // The bound (module docs): at most one chunk of copied framing (256 KiB) and hyper's
    // write queue (under 408 KiB) per connection, the objects themselves shared. Copying even
    // one object per request would be 1 MiB.
    assert!(
        per_request < 1024 * 1024,
        "an unread request holds {per_request} bytes"
    );
    assert_eq!(server.open_watches(), UNREAD / 2);
    drop(held);
}
