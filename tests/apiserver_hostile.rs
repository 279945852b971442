//! A hostile client against the embedded API server, over real HTTP: requests built to crash
//! it, hang it, exhaust its memory, or store what kube-apiserver would refuse. Every case
//! checks the `Status` it is answered with, that storage is unchanged, and that the server
//! still answers afterwards.
//!
//! The connection cases speak raw HTTP/1.1 over a `TcpStream` (a client that misbehaves below
//! what `kube::Client` can express). They wait for the server's own timeouts, set short, on
//! the real clock: each waits for an event (the connection closing, a watch ending), bounded
//! by `within`, never for a fixed time.

mod apiserver_support;

use apiserver_support::*;
use controlloop::apiserver::{ApiServer, ServerOptions};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchParams};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON_PATCH: &str = "application/json-patch+json";

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Sends a rejected request and checks the `Status`, that storage did not change, and (by
/// the second fingerprint) that the server still answers.
async fn refused(
    server: &ApiServer,
    method: &str,
    path: &str,
    ct: &str,
    body: Vec<u8>,
    want: (u16, &str),
) -> Value {
    let client = no_retry(server);
    let before = fingerprint(server, &client).await;
    let (code, status, _) = send(&client, method, path, ct, body).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (want.0, Some(want.1)),
        "{status}"
    );
    assert_eq!(
        (status["kind"].as_str(), &status["code"]),
        (Some("Status"), &json!(want.0))
    );
    assert_eq!(
        fingerprint(server, &client).await,
        before,
        "storage changed"
    );
    status
}

/// A JSON patch of `ops` refused with `want`, whose `Status` message says `says`.
async fn patch_refused(server: &ApiServer, path: &str, ops: Value, want: (u16, &str), says: &str) {
    let body = bytes(&ops);
    assert!(body.len() < 2 * 1024 * 1024, "{}", body.len());
    let status = refused(server, "PATCH", path, JSON_PATCH, body, want).await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains(says), "{message}");
}

/// Fails unless the server still answers a request.
async fn answers(server: &ApiServer) {
    let version = within("no answer", server.client().apiserver_version()).await;
    version.expect("the server answers");
}

/// A create of `c` refused with `want`.
async fn create_refused(server: &ApiServer, c: &ConfigMap, want: (u16, &str)) {
    let body = bytes(&serde_json::to_value(c).unwrap());
    refused(server, "POST", CMS, "application/json", body, want).await;
}

/// `n` operations `op(i)`, as a JSON patch.
fn ops(n: usize, op: impl Fn(usize) -> Value) -> Value {
    Value::Array((0..n).map(op).collect())
}

#[tokio::test]
async fn a_json_patch_nesting_deeper_with_each_operation_is_422_and_the_server_lives() {
    let server = server().await;
    create(&cms(&server, "default"), &cm("a", &[], "1")).await;
    // Each operation adds a value 100 levels deep at the bottom of the previous one: under
    // 2 MB of patch, nearly 14,000 levels if applied (enough to overflow a thread's stack
    // when the result is serialised, compared or dropped).
    let mut value = json!({});
    for _ in 0..100 {
        value = json!({ "a": value });
    }
    let nest = ops(
        138,
        |k| json!({"op": "add", "path": format!("/x{}", "/a".repeat(100 * k)), "value": value}),
    );
    let says = "operation 1: the result would be nested 202 levels";
    patch_refused(&server, &format!("{CMS}/a"), nest, (422, "Invalid"), says).await;
}

#[tokio::test]
async fn copies_stop_at_the_copy_budget_and_results_at_the_object_limits() {
    let server = server().await;
    let mut a = cm("a", &[], "1");
    a.data = Some([("a".to_string(), "x".repeat(150_000))].into());
    create(&cms(&server, "default"), &a).await;
    let path = format!("{CMS}/a");
    let copy =
        |from: &str, i: usize| json!({"op": "copy", "from": from, "path": format!("/data/c{i}")});
    let invalid = (422, "Invalid");
    // Thirty flat copies of 150 kB: 4.5 MB, over the 3 MiB copy budget.
    let flat = ops(30, |i| copy("/data/a", i));
    patch_refused(&server, &path, flat, invalid, "copies more than").await;
    // A value copied into itself doubles with every operation.
    let doubling = ops(30, |i| copy("/data", i));
    patch_refused(
        &server,
        &path,
        doubling,
        invalid,
        "operation 4: the patch copies",
    )
    .await;
    // Eight copies fit the budget, but 1.35 MB of data is over the ConfigMap's 1 MiB.
    let eight = ops(8, |i| copy("/data/a", i));
    patch_refused(&server, &path, eight, invalid, "Too long").await;
    // A Widget has no such rule: its object limit (1.5 MiB stored) answers 413.
    install_widgets(&server.client()).await;
    let ws: Api<Widget> = Api::namespaced(server.client(), "default");
    let mut w = widget("w", 1);
    w.spec.color = Some("c".repeat(900_000));
    ws.create(&PostParams::default(), &w).await.unwrap();
    let both = json!([
        {"op": "add", "path": "/status", "value": {}},
        {"op": "copy", "from": "/spec/color", "path": "/status/message"}
    ]);
    let status = "/apis/lab.controlloop.dev/v1/namespaces/default/widgets/w/status";
    let too_large = (413, "RequestEntityTooLarge");
    patch_refused(&server, status, both, too_large, "more than the limit").await;
    // Over 10,000 operations is 413 before any is applied.
    let many = ops(
        10_001,
        |_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}),
    );
    patch_refused(&server, &path, many, too_large, "at most 10000 operations").await;
}

#[tokio::test]
async fn annotations_over_256_kib_and_config_map_data_over_1_mib_are_422() {
    let server = server().await;
    let mut c = cm("big", &[], "1");
    c.metadata.annotations = Some([("a".to_string(), "v".repeat(256 * 1024))].into());
    create_refused(&server, &c, (422, "Invalid")).await;
    let mut c = cm("big", &[], "1");
    c.data = Some([("a".to_string(), "v".repeat(1024 * 1024 + 1))].into());
    create_refused(&server, &c, (422, "Invalid")).await;
    // Just under both limits is stored.
    let mut c = cm("fits", &[], "");
    c.metadata.annotations = Some([("a".to_string(), "v".repeat(256 * 1024 - 1))].into());
    c.data = Some([("a".to_string(), "v".repeat(1024 * 1024))].into());
    create(&cms(&server, "default"), &c).await;
}

#[tokio::test]
async fn an_extreme_timeout_seconds_opens_a_watch_that_still_delivers() {
    let server = server().await;
    let client = no_retry(&server);
    let req = http::Request::get(format!("{CMS}?watch=true&timeoutSeconds={}", u64::MAX))
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = within("the watch never opened", client.send(req))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    create(&cms(&server, "default"), &cm("a", &[], "1")).await;
    let frame = within("no event on the watch", body.frame())
        .await
        .expect("the watch ended")
        .expect("the watch failed");
    let ev: Value = serde_json::from_slice(frame.data_ref().unwrap()).unwrap();
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("a"))
    );
    drop(body);
    cms(&server, "default")
        .get("a")
        .await
        .expect("the server answers");
}

#[tokio::test]
async fn every_generated_name_can_be_read_and_deleted() {
    let server = server().await;
    let api = cms(&server, "default");
    for prefix in ["web-".to_string(), "a".repeat(250)] {
        let mut c = cm("", &[], "1");
        c.metadata.name = None;
        c.metadata.generate_name = Some(prefix.clone());
        let made = create(&api, &c).await;
        let name = made.metadata.name.unwrap();
        assert!(
            name.len() <= 63 && name.starts_with(&prefix[..prefix.len().min(58)]),
            "{name}"
        );
        api.get(&name).await.expect("a generated name can be read");
        api.delete(&name, &Default::default())
            .await
            .expect("and deleted");
    }
    let mut c = cm("", &[], "1");
    c.metadata.name = None;
    c.metadata.generate_name = Some("a/".into());
    create_refused(&server, &c, (422, "Invalid")).await;
}

#[tokio::test]
async fn history_is_bounded_in_bytes_and_a_watch_from_before_it_is_410() {
    let server = server_with(ServerOptions {
        history_bytes: 256 * 1024,
        ..Default::default()
    })
    .await;
    let api = cms(&server, "default");
    let first = server.resource_version();
    for i in 0..10 {
        let mut c = cm(&format!("c{i}"), &[], "");
        c.data = Some([("v".to_string(), "x".repeat(100_000))].into());
        create(&api, &c).await;
    }
    let mut old = open_watch(&api, &WatchParams::default(), &first.to_string()).await;
    assert_eq!(
        next_event(&mut old, "no 410 for a watch from before the history").await,
        ("ERROR".into(), "Expired".into(), "410".into())
    );
    let head = server.resource_version().to_string();
    let mut recent = open_watch(&api, &WatchParams::default(), &head).await;
    create(&api, &cm("new", &[], "1")).await;
    assert_eq!(
        next_event(&mut recent, "no event after the head").await.1,
        "new"
    );
}

#[tokio::test]
async fn the_request_log_keeps_only_its_byte_bound() {
    let server = server_with(ServerOptions {
        request_log_bytes: 8 * 1024,
        ..Default::default()
    })
    .await;
    let api = cms(&server, "default");
    for i in 0..500 {
        let _ = api.get_opt(&format!("missing-{i}")).await.unwrap();
    }
    let log = server.requests();
    assert!(log.len() < 100, "{}", log.len());
    assert!(
        server.requests_dropped() >= 400,
        "{}",
        server.requests_dropped()
    );
    assert_eq!(log.last().unwrap().path, format!("{CMS}/missing-499"));
}

#[tokio::test]
async fn watches_beyond_the_cap_are_429_and_an_ended_watch_frees_its_slot() {
    let server = server_with(ServerOptions {
        max_watches: 2,
        ..Default::default()
    })
    .await;
    let api = cms(&server, "default");
    let wp = WatchParams::default().timeout(1);
    let first = open_watch(&api, &wp, "0").await;
    let _second = open_watch(&api, &WatchParams::default(), "0").await;
    let (code, status, headers) = send(
        &no_retry(&server),
        "GET",
        &format!("{CMS}?watch=true"),
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (429, Some("TooManyRequests"))
    );
    assert_eq!(headers["retry-after"], "1");
    drop(first);
    // The first watch's own timeout (1 s) ends it on the server.
    within(
        "an ended watch kept its slot",
        server.wait_for_open_watches(|n| n < 2),
    )
    .await;
    let _third = open_watch(&api, &WatchParams::default(), "0").await;
}

/// A raw connection to `server`.
async fn connect(server: &ApiServer) -> TcpStream {
    within("no connection", TcpStream::connect(server.addr()))
        .await
        .unwrap()
}

/// Reads until the peer closes the connection, returning everything it sent.
async fn until_closed(conn: &mut TcpStream, hang: &str) -> String {
    let mut out = Vec::new();
    let _ = within(hang, conn.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_request_head_is_closed() {
    let server = server_with(ServerOptions {
        header_read_timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let mut conn = connect(&server).await;
    conn.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    until_closed(&mut conn, "a half-sent request head kept its connection").await;
    // An idle keep-alive connection is closed by the same timer.
    let mut idle = connect(&server).await;
    idle.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let got = until_closed(&mut idle, "an idle connection stayed open").await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    answers(&server).await;
}

#[tokio::test]
async fn a_request_body_that_never_arrives_is_504() {
    let server = server_with(ServerOptions {
        request_timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let mut conn = connect(&server).await;
    let head = format!(
        "POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"metadata\""
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"Timeout\"") {
        let n = within("no answer to a stalled body", conn.read(&mut buf))
            .await
            .unwrap();
        assert!(
            n > 0,
            "closed without an answer: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 504"), "{got}");
    assert_eq!(server.object_count::<ConfigMap>(), 0);
    answers(&server).await;
}

/// A raw connection holding a watch open (its connection is busy, never idle).
async fn watching(server: &ApiServer) -> TcpStream {
    let mut conn = connect(server).await;
    conn.write_all(format!("GET {CMS}?watch=true HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    conn
}

#[tokio::test]
async fn connections_over_the_cap_of_busy_ones_are_answered_429_and_a_closed_one_frees_its_slot() {
    let server = server_with(ServerOptions {
        max_connections: 2,
        ..Default::default()
    })
    .await;
    let held_a = watching(&server).await;
    let _held_b = watching(&server).await;
    within(
        "the watches never opened",
        server.wait_for_open_watches(|n| n == 2),
    )
    .await;
    let mut third = connect(&server).await;
    third
        .write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let got = until_closed(&mut third, "the connection over the cap stayed open").await;
    assert!(got.starts_with("HTTP/1.1 429"), "{got}");
    assert!(
        got.contains("\"reason\":\"TooManyRequests\"") && got.contains("retry-after: 1"),
        "{got}"
    );
    drop(held_a);
    // The server sees the close at once; a new connection may still race it, so retry.
    let answered = within("a closed connection kept its slot", async {
        loop {
            let mut c = connect(&server).await;
            c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let got = until_closed(&mut c, "no answer").await;
            if got.starts_with("HTTP/1.1 200") {
                return got;
            }
        }
    })
    .await;
    assert!(answered.contains("gitVersion"), "{answered}");
}

#[tokio::test]
async fn idle_and_header_slow_connections_make_room_for_a_new_client() {
    let server = server_with(ServerOptions {
        max_connections: 8,
        ..Default::default()
    })
    .await;
    // Every slot taken by a connection that sends nothing, or half a request head.
    let mut idle = Vec::new();
    for i in 0..8 {
        let mut c = connect(&server).await;
        if i % 2 == 0 {
            c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n")
                .await
                .unwrap();
        }
        idle.push(c);
    }
    // A new client still gets its answer: the connection idle longest is closed for it.
    for _ in 0..3 {
        let mut c = connect(&server).await;
        c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let got = until_closed(&mut c, "a new client was never answered").await;
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    }
    // The oldest idle ones were the ones closed.
    let first = until_closed(&mut idle[0], "the oldest idle connection stayed open").await;
    assert!(first.is_empty(), "{first}");
    answers(&server).await;
}

#[tokio::test]
async fn watches_do_not_count_against_the_limit_on_requests_in_flight() {
    let server = server_with(ServerOptions {
        max_requests_inflight: 2,
        ..Default::default()
    })
    .await;
    // Two slow reads hold both read-only slots...
    server.slow_next_requests(2, Duration::from_secs(3));
    let client = no_retry(&server);
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                send(&client, "GET", CMS, "application/json", vec![])
                    .await
                    .0
            })
        })
        .collect();
    // ...so one more read is 429, as upstream's max-in-flight filter answers, once they are in.
    let over = within("no read was ever refused", async {
        loop {
            let (code, status, headers) =
                send(&client, "GET", CMS, "application/json", vec![]).await;
            if code == 429 {
                break (status, headers);
            }
        }
    })
    .await;
    assert_eq!(over.0["reason"], "TooManyRequests");
    assert_eq!(over.1["retry-after"], "1");
    // ...while watches, long-running requests, are not counted, and mutating requests have
    // their own slots.
    let mut watches = Vec::new();
    for _ in 0..20 {
        watches.push(watching(&server).await);
    }
    within(
        "the watches were refused",
        server.wait_for_open_watches(|n| n == 20),
    )
    .await;
    create(&cms(&server, "default"), &cm("a", &[], "1")).await;
    for s in slow {
        assert_eq!(within("a slow read never ended", s).await.unwrap(), 200);
    }
}

#[tokio::test]
async fn a_watcher_that_stops_reading_is_dropped_after_the_write_timeout() {
    let server = server_with(ServerOptions {
        write_timeout: Duration::from_millis(300),
        ..Default::default()
    })
    .await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = within("no connection", socket.connect(server.addr()))
        .await
        .unwrap();
    stalled
        .write_all(format!("GET {CMS}?watch=true HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    within(
        "the watch never opened",
        server.wait_for_open_watches(|n| n == 1),
    )
    .await;
    // Megabytes of events the watcher never reads fill every buffer on the way.
    let api = cms(&server, "default");
    for i in 0..30 {
        let mut c = cm(&format!("c{i}"), &[], "");
        c.data = Some([("v".to_string(), "x".repeat(900_000))].into());
        create(&api, &c).await;
    }
    within(
        "the stalled watcher was never dropped",
        server.wait_for_open_watches(|n| n == 0),
    )
    .await;
    let list = api
        .list(&ListParams::default())
        .await
        .expect("the server answers");
    assert_eq!(list.items.len(), 30);
}

#[tokio::test]
async fn a_restarted_server_answers_410_for_the_revisions_an_earlier_run_served() {
    // Run one: a client lists, pages and watches up to `seen`.
    let one = within("no server", ApiServer::start()).await.unwrap();
    let api = cms(&one, "default");
    for n in ["a", "b", "c"] {
        create(&api, &cm(n, &[], "1")).await;
    }
    let token = api
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .continue_
        .unwrap();
    let seen = one.resource_version();
    one.shutdown().await;
    // Run two knows nothing of run one, and starts above every revision it served.
    let two = within("no server", ApiServer::start()).await.unwrap();
    assert!(two.resource_version() > seen);
    let api = cms(&two, "default");
    for n in ["x", "y", "z", "w"] {
        create(&api, &cm(n, &[], "1")).await;
    }
    let mut w = open_watch(&api, &WatchParams::default(), &seen.to_string()).await;
    assert_eq!(
        next_event(&mut w, "a watch resumed across the restart").await,
        ("ERROR".into(), "Expired".into(), "410".into())
    );
    let exact = ListParams::default()
        .at(&seen.to_string())
        .matching(kube::api::VersionMatch::Exact);
    let err = api.list(&exact).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 410),
        "{err}"
    );
    let err = api
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 410),
        "{err}"
    );
    two.shutdown().await;
}

#[tokio::test]
async fn with_fresh_etcd_numbering_a_restart_lets_a_client_resume_silently() {
    // The broken variant the default start avoids: both runs count from 1.
    let fresh = || ServerOptions {
        first_revision: Some(1),
        ..Default::default()
    };
    let one = within("no server", ApiServer::start_with(fresh()))
        .await
        .unwrap();
    let api = cms(&one, "default");
    for n in ["a", "b", "c"] {
        create(&api, &cm(n, &[], "1")).await;
    }
    let seen = one.resource_version();
    one.shutdown().await;
    let two = within("no server", ApiServer::start_with(fresh()))
        .await
        .unwrap();
    let api = cms(&two, "default");
    for n in ["x", "y", "z", "w"] {
        create(&api, &cm(n, &[], "1")).await;
    }
    let mut w = open_watch(&api, &WatchParams::default(), &seen.to_string()).await;
    // No 410: the client silently missed x, y and z, and never learns a, b, c are gone.
    let (ty, name, _) = next_event(&mut w, "no event").await;
    assert_eq!((ty.as_str(), name.as_str()), ("ADDED", "w"));
    two.shutdown().await;
}

#[tokio::test]
async fn the_storage_quota_refuses_growth_but_allows_deletes() {
    let server = server_with(ServerOptions {
        max_storage_bytes: 64 * 1024,
        ..Default::default()
    })
    .await;
    let api = cms(&server, "default");
    let big = |n: &str| {
        let mut c = cm(n, &[], "");
        c.data = Some([("v".to_string(), "x".repeat(5_000))].into());
        c
    };
    let mut stored = 0;
    loop {
        let body = bytes(&serde_json::to_value(big(&format!("c{stored}"))).unwrap());
        let (code, status, _) =
            send(&no_retry(&server), "POST", CMS, "application/json", body).await;
        if code == 500 {
            assert_eq!(status["reason"], "InternalError", "{status}");
            break;
        }
        assert_eq!(code, 201, "{status}");
        stored += 1;
        assert!(stored < 100, "the quota never refused a write");
    }
    create_refused(&server, &big("over"), (500, "InternalError")).await;
    api.delete("c0", &Default::default())
        .await
        .expect("a delete is always allowed");
    create(&api, &big("again")).await;
    let n = api.list(&ListParams::default()).await.unwrap().items.len();
    assert_eq!(n, stored);
}
