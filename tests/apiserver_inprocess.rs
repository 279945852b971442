//! The router in-process, as a tower `Service` behind `kube::Client::new`, under tokio's paused
//! clock: the path virtual-time experiments use. Every duration here is virtual and exact.

mod apiserver_support;

use std::time::Duration;

use apiserver_support::{cm, summarize};
use controlloop::apiserver::{Cluster, Failure, ServerOptions};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams, WatchParams};
use tokio::time::{Instant, timeout};

const HANG: Duration = Duration::from_secs(3600);

fn cluster() -> Cluster {
    let epoch: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    Cluster::new(ServerOptions {
        epoch: Some(epoch),
        ..Default::default()
    })
}

#[tokio::test(start_paused = true)]
async fn timestamps_follow_the_virtual_clock_from_the_configured_epoch() {
    let c = cluster();
    let api: Api<ConfigMap> = Api::namespaced(c.in_process_client(), "default");
    tokio::time::sleep(Duration::from_secs(90)).await;
    let a = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let ts = a.metadata.creation_timestamp.unwrap().0.to_string();
    assert_eq!(ts, "2026-01-01T00:01:30Z");
}

#[tokio::test(start_paused = true)]
async fn a_watch_ends_at_its_timeout_and_bookmarks_arrive_on_the_interval() {
    let c = cluster();
    let api: Api<ConfigMap> = Api::namespaced(c.in_process_client(), "default");
    let start = Instant::now();
    let mut w = api
        .watch(&WatchParams::default().timeout(150), "1")
        .await
        .unwrap()
        .boxed();
    let mut bookmarks = Vec::new();
    while let Some(ev) = timeout(HANG, w.next())
        .await
        .expect("watch never timed out")
    {
        let (ty, _, rv) = summarize(ev.unwrap());
        bookmarks.push((ty, rv, start.elapsed().as_secs()));
    }
    assert_eq!(start.elapsed(), Duration::from_secs(150));
    let expect = |s| ("BOOKMARK".to_string(), "1".to_string(), s);
    assert_eq!(bookmarks, [expect(60), expect(120)]);
}

#[tokio::test(start_paused = true)]
async fn slow_and_failing_requests_cost_exactly_their_virtual_time() {
    let c = cluster();
    let api: Api<ConfigMap> = Api::namespaced(c.in_process_client(), "default");
    c.slow_next_requests(1, Duration::from_secs(30));
    let start = Instant::now();
    api.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    c.fail_next_requests(1, Failure::TooManyRequests, 5);
    let err = api.get("a").await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 429));
    let statuses: Vec<u16> = c.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [201, 429]);
    assert_eq!(
        api.get("a")
            .await
            .unwrap()
            .metadata
            .resource_version
            .as_deref(),
        Some("2")
    );
}
