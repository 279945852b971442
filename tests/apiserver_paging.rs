//! List paging seeks to the continue key: a page from the middle of a long list costs what the
//! first page costs, as etcd's range read from a key does, instead of walking every key before
//! it (which makes paging through a list quadratic).
//!
//! Timed in-process (no sockets), as medians of repeated requests, and compared with the first
//! page in the same run, so the machine's speed cancels out. This file holds one test, so that
//! nothing else in the process competes for the CPU meanwhile.

use std::time::{Duration, Instant};

use controlloop::apiserver::{Cluster, ServerOptions};
use http::Request;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;
use tower::ServiceExt;

const OBJECTS: usize = 100_000;
const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn get(cluster: &Cluster, query: &str) -> Value {
    let req = Request::get(format!("{CMS}?{query}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = cluster.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

async fn median(cluster: &Cluster, query: &str) -> Duration {
    let mut times = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        let page = get(cluster, query).await;
        times.push(started.elapsed());
        assert_eq!(page["items"].as_array().unwrap().len(), 1);
    }
    times.sort();
    times[times.len() / 2]
}

#[tokio::test]
async fn a_page_from_the_middle_of_a_long_list_costs_what_the_first_page_costs() {
    let cluster = Cluster::new(ServerOptions::default());
    for i in 0..OBJECTS {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(format!("c{i:06}"));
        c.metadata.namespace = Some("default".into());
        cluster.silent_write(&c).unwrap();
    }
    let half = get(&cluster, &format!("limit={}", OBJECTS / 2)).await;
    let token = half["metadata"]["continue"].as_str().unwrap().to_string();
    let middle = get(&cluster, &format!("limit=1&continue={token}")).await;
    assert_eq!(
        middle["items"][0]["metadata"]["name"],
        format!("c{:06}", OBJECTS / 2)
    );
    let first = median(&cluster, "limit=1").await;
    let from_middle = median(&cluster, &format!("limit=1&continue={token}")).await;
    eprintln!(
        "{OBJECTS} objects: the first page takes {first:?}, a page from the middle {from_middle:?}"
    );
    // Walking the 50,000 keys before the middle would be tens of times the first page.
    assert!(
        from_middle < first * 5 + Duration::from_millis(1),
        "a page from the middle took {from_middle:?}, the first {first:?}: the read walks the keys before it"
    );
}
