//! resourceVersions on a real server: chapter 05's check, which is vacuous on the fake, held
//! to kube-apiserver's versions; and what compaction does to an old version on real etcd,
//! with and without the watch cache in front of it.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, VersionMatch};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::conformance::{Session, Until};
use crate::lab::rig::{self, Backend, OBJECT, RigError, Running, Target, set_value, value_of};
use controlloop::cache::{
    HandlerFuncs, InformerOptions,
    broken::{self, Variant},
};

/// What chapter 05's handler counted on one informer.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Checked {
    /// Updates the handler received.
    pub updates: u64,
    /// Updates whose old and new resourceVersions were equal (nothing to compare).
    pub rv_indistinguishable: u64,
    /// Updates where the cache held an older resourceVersion than the event's object.
    pub rv_check_violations: u64,
    /// Updates where the cache held an older counter (`data.value`) than the event's object.
    pub payload_check_violations: u64,
}

/// A ConfigMap's resourceVersion as a number (`""` is 0, as chapter 05 parses it).
pub fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Updates made in one check.
pub const UPDATES: u64 = 20;

/// Chapter 05's two checks in an `on_update` handler of a `variant` informer on `backend`
/// (real clock), across [`UPDATES`] writes 20 ms apart.
// book: ch14_fn_rv_check
pub async fn rv_check(backend: &Backend, variant: Variant) -> Result<Checked, RigError> {
    let target = Target::start(backend).await?;
    target.create(OBJECT, 0).await?;
    let informer = Arc::new(broken::informer(
        target.api(),
        InformerOptions::new(Duration::ZERO),
        variant,
    ));
    let row = Arc::new(Mutex::new(Checked::default()));
    let (inf, r) = (informer.clone(), row.clone());
    let on_update = move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
        if new.metadata.name.as_deref() != Some(OBJECT) {
            return;
        }
        let cached = inf.indexer().get(&new).unwrap().unwrap();
        let mut r = r.lock();
        r.updates += 1;
        if rv(&old) == rv(&new) {
            r.rv_indistinguishable += 1;
        }
        if rv(&cached) < rv(&new) {
            r.rv_check_violations += 1; // the essay's check, by resourceVersion
        }
        if value_of(&cached) < value_of(&new) {
            r.payload_check_violations += 1; // the same check on the written counter
        }
    };
    informer
        .add_event_handler(HandlerFuncs::new().on_update(on_update))
        .expect("a handler is added before the informer runs");
    let running = Running::informer(&informer);
    rig::within(
        Duration::from_secs(60),
        "the informer's first list",
        informer.wait_synced(),
    )
    .await;
    let api = target.api();
    for v in 1..=UPDATES {
        set_value(&api, OBJECT, v).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig::settle(
        Duration::from_secs(30),
        Duration::from_millis(50),
        "every update heard",
        || row.lock().updates >= UPDATES,
    )
    .await?;
    running.stop().await;
    target.stop().await;
    let out = row.lock().clone();
    Ok(out)
}
// book: end ch14_fn_rv_check

/// How long an exact list may wait for etcd to compact a version.
pub const COMPACTION_LIMIT: Duration = Duration::from_secs(60);

/// Waits until an exact list at `rv` answers 410 Expired: etcd has compacted it (polling every
/// 250 ms, for at most [`COMPACTION_LIMIT`]).
pub async fn wait_compacted(api: &Api<ConfigMap>, rv: &str, server: &str) -> Result<(), RigError> {
    let exact = ListParams {
        resource_version: Some(rv.to_owned()),
        version_match: Some(VersionMatch::Exact),
        ..Default::default()
    };
    let t = Instant::now();
    loop {
        match api.list(&exact).await {
            Err(kube::Error::Api(s)) if s.code == 410 => return Ok(()),
            _ if t.elapsed() > COMPACTION_LIMIT => {
                return Err(RigError::Stalled {
                    what: format!(
                        "{server}: etcd compacting resourceVersion {rv} (start the control plane \
                         with `cargo run -- cluster up --compaction-interval 5s`)"
                    ),
                    limit: COMPACTION_LIMIT,
                });
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// What compaction did to one old resourceVersion on one server.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Compacted {
    /// Which server.
    pub server: String,
    /// ms from the write until an exact list at its version answered 410 Expired.
    pub compacted_after_ms: f64,
    /// What a watch from that version then answered: its first event's type, and the
    /// Status reason of an ERROR.
    pub watch_from_it: String,
    /// Events the watch replayed before it ended or was dropped (the writes after it).
    pub replayed: usize,
}

/// Writes [`OBJECT`] once (version V) and three times more, waits until an exact list at V is
/// 410 (etcd compacted it), then watches from V.
pub async fn compaction(backend: &Backend, server: &str) -> Result<Compacted, RigError> {
    // book: ch14_compaction
    let target = Target::start(backend).await?;
    let api: Api<ConfigMap> = target.api();
    let first = target.create(OBJECT, 0).await?;
    let v = first.metadata.resource_version.clone().unwrap_or_default();
    let t = Instant::now();
    for i in 1..=3 {
        set_value(&api, OBJECT, i).await?;
    }
    wait_compacted(&api, &v, server).await?;
    let compacted_after_ms = (t.elapsed().as_secs_f64() * 10_000.0).round() / 10.0;
    let mut session = Session::new(target.client(), rig::NAMESPACE, "compaction");
    let path = format!(
        "/api/v1/namespaces/{{ns}}/configmaps?watch=true&resourceVersion={v}\
         &fieldSelector=metadata.name%3D{OBJECT}"
    );
    let events = session
        .watch(
            "watch from it",
            &path,
            Until::Events(3),
            Duration::from_secs(3),
        )
        .await
        .map_err(|e| RigError::Stalled {
            what: e.to_string(),
            limit: Duration::from_secs(3),
        })?;
    target.stop().await;
    // book: end ch14_compaction
    let watch_from_it = match events.first() {
        None => "no event".to_owned(),
        Some(e) if e["type"] == "ERROR" => format!(
            "ERROR {} {}",
            e["object"]["code"],
            e["object"]["reason"].as_str().unwrap_or_default()
        ),
        Some(e) => e["type"].as_str().unwrap_or("?").to_owned(),
    };
    let replayed = events.iter().filter(|e| e["type"] == "MODIFIED").count();
    Ok(Compacted {
        server: server.to_owned(),
        compacted_after_ms,
        watch_from_it,
        replayed,
    })
}
