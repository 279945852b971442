//! No request stalls the others: lists through heavy label selectors, one per core and more,
//! run while a small request (`/version`, a GET of one object) is answered promptly; a
//! selector beyond the server's caps is refused at once; a list that cannot finish within the
//! request deadline is a 504.
//!
//! Real sockets on the real clock, as a client sees the latency; every wait is bounded.

mod apiserver_support;

use std::time::{Duration, Instant};

use apiserver_support::*;
use controlloop::apiserver::{ApiServer, ServerOptions};
use k8s_openapi::api::core::v1::ConfigMap;

const OBJECTS: usize = 20_000;

/// How long a small request may take while the heavy lists run: the 99th percentile of the
/// rounds timed (a loaded machine preempts the test process now and then; a stall holds back
/// every round that meets it, which the old inline matching did for seconds).
const PROMPT: Duration = Duration::from_millis(500);

/// How long one request refused for its selector, or `/version` beside such refusals, may
/// take: a single request, so with room for a loaded machine.
const AT_ONCE: Duration = Duration::from_secs(2);

/// A selector of `n` requirements that every object passes but only after checking them all
/// (`notin` on labels the objects do not have, then one the objects do have).
fn heavy_selector(n: usize) -> String {
    let mut terms: Vec<String> = (1..n).map(|i| format!("k{i} notin (a,b,c)")).collect();
    terms.push("app=web".into());
    terms.join(",")
}

async fn seeded(options: ServerOptions, objects: usize) -> ApiServer {
    let server = server_with(options).await;
    for i in 0..objects {
        let mut c = cm(
            &format!("c{i:05}"),
            &[("app", "web"), ("n", &(i % 7).to_string())],
            "1",
        );
        c.metadata.namespace = Some("default".into());
        server.silent_write(&c).expect("a write");
    }
    server
}

async fn list_count(client: &kube::Client, selector: &str) -> (u16, usize) {
    let path = format!(
        "/api/v1/namespaces/default/configmaps?labelSelector={}",
        percent_encoding::utf8_percent_encode(selector, percent_encoding::NON_ALPHANUMERIC)
    );
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = within("a list never answered", client.send(req))
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    // Counted without parsing: the client shares the server's two worker threads, and
    // parsing megabytes of JSON there would be the stall this test looks for.
    let item = b"\"kind\":\"ConfigMap\",\"metadata\"";
    let n = bytes.windows(item.len()).filter(|w| w == item).count();
    (code, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_requests_are_answered_promptly_while_heavy_selectors_run() {
    let server = seeded(ServerOptions::default(), OBJECTS).await;
    let client = no_retry(&server);
    let selector = heavy_selector(256);
    // Two heavy lists per worker thread.
    let heavy: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            let selector = selector.clone();
            tokio::spawn(async move { list_count(&client, &selector).await })
        })
        .collect();
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "default");
    let mut rounds = Vec::new();
    while !heavy.iter().all(|h| h.is_finished()) {
        let started = Instant::now();
        within("/version never answered", client.apiserver_version())
            .await
            .expect("/version");
        within("a GET never answered", cms.get("c00042"))
            .await
            .expect("a GET");
        rounds.push(started.elapsed());
    }
    for h in heavy {
        let (code, n) = within("a heavy list never ended", h).await.unwrap();
        assert_eq!((code, n), (200, OBJECTS));
    }
    assert!(
        !rounds.is_empty(),
        "the heavy lists ended before any small request was timed"
    );
    rounds.sort();
    let p99 = rounds[(rounds.len() * 99 / 100).min(rounds.len() - 1)];
    let (median, slowest) = (rounds[rounds.len() / 2], rounds[rounds.len() - 1]);
    eprintln!(
        "{} rounds of /version and a GET while 4 heavy lists ran: median {median:?}, 99th percentile {p99:?}, slowest {slowest:?}",
        rounds.len()
    );
    assert!(
        p99 < PROMPT,
        "small requests took up to {p99:?} (99th percentile) while heavy lists ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_beyond_the_caps_is_refused_at_once() {
    let server = seeded(ServerOptions::default(), OBJECTS / 4).await;
    let client = no_retry(&server);
    // Far more requirements than any label selector needs: each object would cost them all.
    let huge = (1..5_000)
        .map(|i| format!("k{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let started = Instant::now();
    let (code, _) = list_count(&client, &huge).await;
    assert_eq!(code, 400);
    assert!(
        started.elapsed() < AT_ONCE,
        "refusing took {:?}",
        started.elapsed()
    );
    // One per core, at once: the server still answers /version promptly.
    let refused: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            let huge = huge.clone();
            tokio::spawn(async move { list_count(&client, &huge).await })
        })
        .collect();
    let started = Instant::now();
    within("/version never answered", client.apiserver_version())
        .await
        .unwrap();
    assert!(
        started.elapsed() < AT_ONCE,
        "/version took {:?}",
        started.elapsed()
    );
    for r in refused {
        assert_eq!(within("no answer", r).await.unwrap().0, 400);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_cannot_finish_within_the_request_deadline_is_504() {
    let server = seeded(
        ServerOptions {
            // Short beside the walk: on a quiet machine 5,000 objects under this selector
            // were walked within 50 ms, and the list then answered 200.
            request_timeout: Duration::from_millis(5),
            ..Default::default()
        },
        OBJECTS,
    )
    .await;
    let client = no_retry(&server);
    // Nothing matches, so no byte is sent before the whole range is walked: the deadline
    // passes first.
    let mut selector = heavy_selector(255);
    selector.push_str(",n=99");
    let started = Instant::now();
    let path = format!(
        "/api/v1/namespaces/default/configmaps?labelSelector={}",
        percent_encoding::utf8_percent_encode(&selector, percent_encoding::NON_ALPHANUMERIC)
    );
    let (code, status, _) = send(&client, "GET", &path, "application/json", vec![]).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (504, Some("Timeout")),
        "{status}"
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("the list was not completed"), "{status}"); // the walk's deadline
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The server answers afterwards.
    within("no answer", client.apiserver_version())
        .await
        .unwrap();
}
