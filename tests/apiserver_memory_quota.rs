//! The storage quota counts what storage holds: objects with many small keys (the case where a
//! parsed JSON tree is many times its text) are stored up to the quota, and this process's
//! resident set grows by the quota times a small allocator factor, not by the parsed tree's.
//!
//! Measured on Linux (`/proc/self/statm`). This file holds one test, so that nothing else in
//! the process allocates meanwhile.
#![cfg(target_os = "linux")]

mod apiserver_support;

use apiserver_support::*;
use controlloop::apiserver::ServerOptions;
use serde_json::json;

fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

const QUOTA: usize = 32 * 1024 * 1024;

/// Resident bytes per byte of quota used allowed: the stored JSON is one allocation per
/// object (allocator overhead under 1 %); what comes on top is the decoder's transient tree of
/// the request being served (about 13 times its 260 KB body, freed, but kept by the allocator
/// for reuse) and the request log. Measured: 1.08 to 1.14 (x86_64, glibc, 2 cores).
const FACTOR: f64 = 1.5;

/// Allowed on top, for the runtime, the client and the allocator's arenas.
const SLACK: usize = 24 * 1024 * 1024;

#[tokio::test]
async fn objects_of_many_small_keys_stored_up_to_the_quota_take_about_the_quota() {
    let server = server_with(ServerOptions {
        max_storage_bytes: QUOTA,
        ..Default::default()
    })
    .await;
    let client = no_retry(&server);
    let path = "/api/v1/namespaces/default/configmaps";
    // 20,000 keys of 6 bytes with 1-byte values: about 260 KB of JSON each.
    let data: serde_json::Map<String, serde_json::Value> = (0..20_000)
        .map(|i| (format!("k{i:05}"), json!("v")))
        .collect();
    let body = |i: usize| {
        serde_json::to_vec(&json!({"metadata": {"name": format!("many-{i:04}")}, "data": data}))
            .unwrap()
    };
    let json_bytes = body(0).len();
    // One write first: the runtime, the client's pool and the decoder's buffers exist.
    let (code, status, _) = send(&client, "POST", path, "application/json", body(0)).await;
    assert_eq!(code, 201, "{status}");
    let before = rss();
    let mut stored = 1;
    loop {
        let (code, status, _) = send(&client, "POST", path, "application/json", body(stored)).await;
        if code == 500 {
            assert!(
                status["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("database space exceeded"),
                "{status}"
            );
            break;
        }
        assert_eq!(code, 201, "{status}");
        stored += 1;
        assert!(stored < 10_000, "the quota never refused a write");
    }
    let after = rss();
    let grown = after.saturating_sub(before);
    let used = (stored - 1) * json_bytes;
    eprintln!(
        "{stored} objects of {json_bytes} JSON bytes up to a quota of {} MiB: RSS grew {} MiB ({:.2} per byte stored)",
        QUOTA >> 20,
        grown >> 20,
        grown as f64 / used as f64
    );
    assert!(
        used as f64 > 0.9 * QUOTA as f64,
        "only {used} bytes were stored before the quota refused"
    );
    let bound = (FACTOR * QUOTA as f64) as usize + SLACK;
    assert!(
        grown <= bound,
        "storing {used} bytes grew the process by {grown} bytes, over {bound}: storage holds more than it charges"
    );
}
