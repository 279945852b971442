//! No lockout: with 2,000 idle sockets and 1,000 watches open against the server, `/version`,
//! `/readyz` and a small GET are still answered, each within [`PROMPT`]. Idle connections cost
//! a file descriptor and nothing else; watches are long-running requests, which do not count
//! against the limit on requests in flight.
//!
//! Real sockets on 127.0.0.1, bounded in number and time. The server raises this process's
//! file descriptor limit at start (the test needs about 6,100: both ends of every socket).

mod apiserver_support;

use std::time::{Duration, Instant};

use apiserver_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE: usize = 2_000;
const WATCHES: usize = 1_000;

/// How long `/version`, `/readyz` and a small GET may take meanwhile.
const PROMPT: Duration = Duration::from_secs(1);

/// The soft limit on open files of this process (Linux), if it can be read.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// One request on a fresh connection, answered and closed; returns the response and how long
/// it took.
async fn fresh(addr: std::net::SocketAddr, path: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut c = within("no connection", TcpStream::connect(addr))
        .await
        .unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    within("no answer", c.read_to_end(&mut got)).await.unwrap();
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_readyz_and_a_small_get_are_answered_beside_2000_idle_sockets_and_1000_watches() {
    let server = server().await;
    create(&cms(&server, "default"), &cm("a", &[], "1")).await;
    if let Some(limit) = open_files_limit() {
        eprintln!("open files limit: {limit}");
        assert!(
            limit > 2 * (IDLE + WATCHES) as u64 + 100,
            "the file descriptor limit ({limit}) is too low for this test, even after the server raised it"
        );
    }
    let addr = server.addr();
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(
            within("no connection", TcpStream::connect(addr))
                .await
                .unwrap(),
        );
    }
    let path = "/api/v1/namespaces/default/configmaps?watch=true";
    let mut watches = Vec::with_capacity(WATCHES);
    for _ in 0..WATCHES {
        let mut c = within("no connection", TcpStream::connect(addr))
            .await
            .unwrap();
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        watches.push(c);
    }
    within(
        "the watches never all opened",
        server.wait_for_open_watches(|n| n == WATCHES),
    )
    .await;
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        for (path, says) in [
            ("/version", "gitVersion"),
            ("/readyz", "ok"),
            ("/api/v1/namespaces/default/configmaps/a", "\"name\":\"a\""),
        ] {
            let (got, took) = fresh(addr, path).await;
            assert!(
                got.starts_with("HTTP/1.1 200") && got.contains(says),
                "{path}: {got}"
            );
            slowest = slowest.max(took);
        }
    }
    eprintln!(
        "beside {IDLE} idle sockets and {WATCHES} watches: the slowest of /version, /readyz and a GET took {slowest:?}"
    );
    assert!(slowest < PROMPT, "a small request took {slowest:?}");
    assert_eq!(server.open_watches(), WATCHES);
    drop(idle);
    drop(watches);
}
