//! The parts chapter 04's blocks stand on: what a run varies ([`Setup`]), what it reports
//! ([`Report`]) and the Widgets it writes; the tasks that run an informer and a controller
//! until stopped are the rig's ([`Running`]). Nothing here carries a claim; the blocks in
//! `super` do.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Resource,
    api::{Api, ObjectMeta, PostParams},
};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::{
    task::JoinHandle,
    time::{Instant, sleep_until},
};

use crate::lab::rig;
use crate::lab::rig::{Widget, WidgetSpec};
use controlloop::apiserver::{Cluster, RequestRecord};
use controlloop::cache::{ListerWatcher, SharedIndexInformer, broken::Variant};
use controlloop::controller::{
    Event, Release, Request, SyncPeriod,
    predicate::{GenerationChanged, Predicate},
};

pub use crate::lab::rig::{HOUR, Running};

/// Where the reconciler reads the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Read {
    /// From the informer's cache, as controller-runtime's default client does.
    Cache,
    /// From the API server, as controller-runtime's uncached `APIReader` does.
    Live,
}

/// How the watch ends at hour 32.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WatchFault {
    /// The server ends every watch cleanly: its routine timeout, a restart, a load balancer.
    Closed,
    /// Closed, and the next two requests (the re-watches) get 429 TooManyRequests.
    ClosedThen429,
    /// Every watch gets a 410 Expired: the server compacted past the watch's resourceVersion.
    Expired,
}

/// What a run varies.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Setup {
    /// The informer: faithful, or one of the broken variants the detectors need.
    pub variant: Variant,
    /// Whether `GenerationChanged` sits on the controller's watch.
    pub predicate: bool,
    /// Where the reconciler reads the object.
    pub read: Read,
    /// What the reconciler returns: look again after this long, or nothing.
    pub requeue_after: Option<Duration>,
    /// How the watch ends at hour 32.5, if it does.
    pub watch_fault: Option<WatchFault>,
    /// The controller-runtime release the controller follows (the book's: v0.25).
    pub release: Release,
    /// The Kubernetes minor whose gates the informer runs at (`FeatureGates::at_minor`): 37,
    /// the informer's default, or 38 (client-go v0.38.0-beta.0's batches).
    pub minor: u32,
    /// The seed of the cache's resync jitter ([`SyncPeriod::seeded`]): the informer resyncs
    /// every P, 10 hours times a factor in [0.9, 1.1).
    pub seed: u64,
}

impl Setup {
    /// The faithful informer, `GenerationChanged`, a reconciler that reads the cache and asks
    /// for nothing: a typical controller-runtime controller.
    pub fn faithful() -> Self {
        Self {
            variant: Variant::Faithful,
            predicate: true,
            read: Read::Cache,
            requeue_after: None,
            watch_fault: None,
            release: Release::default(),
            minor: 37,
            seed: SEED,
        }
    }
}

/// The seed every chapter 04 run draws its resync period from, unless it sets another; the
/// chapter's claims hold for any (`book/tests/lab_resync.rs` runs other seeds).
pub const SEED: u64 = 4;

/// The cache's resync period for a run seeded with `seed`: controller-runtime's 10-hour
/// `SyncPeriod`, jittered per informer ([`SyncPeriod::next`]); one call per informer.
pub fn sync_period(seed: u64) -> SyncPeriod {
    SyncPeriod::seeded(10 * HOUR, seed)
}

/// `on_update` calls, counted four ways.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateCounts {
    /// Every call.
    pub total: u32,
    /// Calls whose old and new objects differ in content.
    pub payload_changed: u32,
    /// Calls whose old and new objects are equal in content.
    pub old_equals_new: u32,
    /// Calls whose old and new are the same `Arc` (`Arc::ptr_eq`).
    pub same_pointer: u32,
    /// Calls `GenerationChanged` lets through.
    pub generation_changed_passes: u32,
}

impl UpdateCounts {
    /// Counts one `on_update(old, new)`.
    pub fn count<K: Resource + Serialize + Send + Sync>(&mut self, old: &Arc<K>, new: &Arc<K>) {
        self.total += 1;
        if serde_json::to_value(&**old).ok() == serde_json::to_value(&**new).ok() {
            self.old_equals_new += 1;
        } else {
            self.payload_changed += 1;
        }
        if Arc::ptr_eq(old, new) {
            self.same_pointer += 1;
        }
        let ev = Event::Update {
            old: Some(old.clone()),
            new: Some(new.clone()),
        };
        if GenerationChanged.matches(&ev) {
            self.generation_changed_passes += 1;
        }
    }
}

/// One reconcile: when, which object, and the color it read (`-` if it found nothing).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reconcile {
    /// Virtual time since the start.
    pub at: Duration,
    /// The object's name.
    pub name: String,
    /// The color the reconciler read.
    pub color: String,
}

impl Reconcile {
    /// A reconcile of `req` `at` after the start that read `w`.
    pub fn new(at: Duration, req: &Request, w: Option<&Widget>) -> Self {
        Reconcile {
            at,
            name: req.name.clone(),
            color: w.map_or("-".into(), color),
        }
    }
}

/// What a run saw.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The FIFO the informer's gates selected (at 1.37, the same as 1.36's).
    pub fifo: String,
    /// The counting handler's `on_update` counts.
    pub updates: UpdateCounts,
    /// For each resync tick (10, 20, 30 h): requests the server logged within one second
    /// either side of it.
    pub requests_at_resync_ticks: Vec<usize>,
    /// Lists (plain or streaming) after the first.
    pub relists: usize,
    /// Watches opened that were not lists: each resumes from the last resourceVersion.
    pub rewatches: usize,
    /// Watch requests the server refused (a status other than 200, such as 429).
    pub refused_watches: usize,
    /// Every reconcile, in order.
    pub reconciles: Vec<Reconcile>,
    /// Every Widget on the server at the end, as `name color generation`.
    pub on_the_server: Vec<String>,
    /// Every Widget in the informer's cache at the end, the same way.
    pub in_the_cache: Vec<String>,
    /// The resync period the cache gave the informer (jittered, in [9 h, 11 h)).
    pub resync_period: Duration,
    /// w's color on the server at the end.
    pub server_color: String,
    /// w's color in the informer's cache at the end.
    pub cached_color: String,
}

/// Hours as the chapter prints them: `10`, `0.5`, `32.5003` (to four places, trailing zeros cut).
pub fn hours(h: f64) -> String {
    let s = format!("{h:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A time since the start as the chapter prints it: `P`, `2·P` when it is a whole number of
/// resync periods `period` (jittered, so its value differs from run to run), `P(name)` for a
/// named period; otherwise its [`hours`].
pub fn when(at: Duration, period: Duration, name: Option<&str>) -> String {
    let p = match name {
        Some(n) => format!("P({n})"),
        None => "P".to_owned(),
    };
    let (t, each) = (at.as_nanos(), period.as_nanos());
    match (each > 0 && t >= each && t % each == 0).then(|| t / each) {
        Some(1) => p,
        Some(k) => format!("{k}·{p}"),
        None => hours(at.as_secs_f64() / 3600.0),
    }
}

impl Report {
    /// The reconciles as `when name color` ([`when`]: hours, or a multiple of the resync
    /// period), with a run of hourly reconciles that read the same color written once as
    /// `from..=to name color`.
    pub fn reconciled(&self) -> Vec<String> {
        let mut out: Vec<(Duration, Duration, &Reconcile)> = vec![];
        for r in &self.reconciles {
            match out.last_mut() {
                Some((_, to, last))
                    if last.name == r.name && last.color == r.color && r.at == *to + HOUR =>
                {
                    *to = r.at
                }
                _ => out.push((r.at, r.at, r)),
            }
        }
        let at = |d: Duration| when(d, self.resync_period, None);
        out.into_iter()
            .map(|(from, to, r)| match from == to {
                true => format!("{} {} {}", at(from), r.name, r.color),
                false => format!("{}..={} {} {}", at(from), at(to), r.name, r.color),
            })
            .collect()
    }

    /// Whether the cache's period lay where controller-runtime draws it, [9 h, 11 h).
    pub fn period_in_range(&self) -> bool {
        sync_period(0).range().contains(&self.resync_period)
    }
}

impl Report {
    /// What chapter 04 snapshots as `ch04_resync_counts`.
    pub fn counts_view(&self) -> serde_json::Value {
        serde_json::json!({
            "fifo": self.fifo,
            "on_update": self.updates,
            "requests_within_1s_of_each_resync_tick": self.requests_at_resync_ticks,
            "watches_resumed_from_the_last_resource_version": self.rewatches,
            "relists": self.relists,
            "reconciled": self.reconciled(),
        })
    }
}

impl Report {
    /// What chapter 04 snapshots as `ch04_drift`.
    pub fn drift_view(&self) -> serde_json::Value {
        serde_json::json!({
            "on_the_server": self.on_the_server,
            "in_the_cache": self.in_the_cache,
            "reconciled": self.reconciled(),
        })
    }
}

/// A Widget `default/name` with one replica and `color`.
pub fn widget(name: &str, color: &str) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            replicas: 1,
            color: Some(color.into()),
        },
    )
}

fn color(w: &Widget) -> String {
    w.spec.color.clone().unwrap_or_default()
}

fn describe(w: &Widget) -> String {
    let name = w.metadata.name.clone().unwrap_or_default();
    let generation = w.metadata.generation.unwrap_or_default();
    format!("{name} {} generation {generation}", color(w))
}

/// Creates `name` and changes its spec until its generation is 7, as a long-lived object's is.
pub async fn create_at_generation_7(api: &Api<Widget>, name: &str, color: &str) -> Widget {
    let pp = PostParams::default();
    let mut w = api.create(&pp, &widget(name, color)).await.expect("create");
    for replicas in 2..=7 {
        w.spec.replicas = replicas;
        w = api.replace(name, &pp, &w).await.expect("a spec change");
    }
    assert_eq!(w.metadata.generation, Some(7));
    w
}

/// Reads `name` from the server and writes it back with `color`: a spec change.
pub async fn set_color(api: &Api<Widget>, name: &str, color: &str) -> Widget {
    let mut w = api.get(name).await.expect("get");
    w.spec.color = Some(color.into());
    api.replace(name, &PostParams::default(), &w)
        .await
        .expect("replace")
}

fn is_list(r: &RequestRecord) -> bool {
    r.method == "GET" && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
}

/// For each of the first three resync ticks of `period` after `t0`, counts the requests
/// `cluster` logs from one second before it to one second after.
pub fn requests_around(cluster: &Cluster, t0: Instant, period: Duration) -> JoinHandle<Vec<usize>> {
    let cluster = cluster.clone();
    tokio::spawn(async move {
        let mut counts = vec![];
        for tick in 1..=3 {
            sleep_until(t0 + period * tick - Duration::from_secs(1)).await;
            let before = cluster.requests().len();
            sleep_until(t0 + period * tick + Duration::from_secs(1)).await;
            counts.push(cluster.requests().len() - before);
        }
        counts
    })
}

impl Report {
    /// Collects the report at the end of a run.
    pub async fn collect<L: ListerWatcher<Widget>>(
        cluster: &Cluster,
        informer: &SharedIndexInformer<Widget, L>,
        updates: &Mutex<UpdateCounts>,
        reconciles: &Mutex<Vec<Reconcile>>,
        around_ticks: JoinHandle<Vec<usize>>,
        resync_period: Duration,
    ) -> Report {
        let requests = cluster.requests(); // before the report's own reads below
        let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
        let listed = api.list(&Default::default()).await.expect("list");
        let requests_at_resync_ticks = around_ticks.await.expect("the tick counter");
        let w = listed
            .items
            .iter()
            .find(|w| w.metadata.name.as_deref() == Some("w"));
        let mut cached: Vec<String> = informer
            .indexer()
            .list()
            .iter()
            .map(|w| describe(w))
            .collect();
        cached.sort();
        let widgets = |r: &&RequestRecord| r.path.ends_with("/widgets");
        let lists = requests.iter().filter(widgets).filter(|r| is_list(r));
        let watches = requests.iter().filter(widgets).filter(|r| r.is_watch());
        Report {
            fifo: informer.fifo_choice().describe(),
            updates: updates.lock().clone(),
            requests_at_resync_ticks,
            relists: lists.count() - 1,
            rewatches: watches.clone().filter(|r| !is_list(r)).count(),
            refused_watches: watches.filter(|r| r.status != 200).count(),
            reconciles: reconciles.lock().clone(),
            on_the_server: listed.items.iter().map(describe).collect(),
            in_the_cache: cached,
            resync_period,
            server_color: color(w.expect("w on the server")),
            cached_color: color(&informer.indexer().get_by_key("default/w").expect("w")),
        }
    }
}

/// Runs [`timeline`](super::timeline) on a fresh paused-clock runtime.
pub fn run(setup: Setup) -> Report {
    rig::paused(super::timeline(setup))
}

/// A ConfigMap `default/name` that `owner` controls (what `SetControllerReference` writes).
pub fn owned_by(owner: &Widget, name: &str) -> ConfigMap {
    let mut cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let owner_ref = owner
        .controller_owner_ref(&())
        .expect("a Widget from the server");
    cm.metadata.owner_references = Some(vec![owner_ref]);
    cm
}

/// The request for the Widget that controls `cm`, if one does (what controller-runtime's
/// `EnqueueRequestForOwner` with `OnlyControllerOwner` computes).
pub fn controller_of(cm: &ConfigMap) -> Option<Request> {
    let owner = cm
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == "Widget")?;
    Some(Request::new(
        cm.metadata.namespace.clone().unwrap_or_default(),
        owner.name.clone(),
    ))
}

/// The hours since `t0`.
pub fn hours_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() / 3600.0
}

/// The virtual time since `t0`.
pub fn since(t0: Instant) -> Duration {
    t0.elapsed()
}

/// One `on_update` as chapter 04's sync-rule run prints it: when, and how old and new relate.
pub fn update_label(hour: f64, old: &Arc<Widget>, new: &Arc<Widget>) -> String {
    let how = if Arc::ptr_eq(old, new) {
        "same object"
    } else if old.metadata.resource_version == new.metadata.resource_version {
        "same resourceVersion, another copy"
    } else {
        "new resourceVersion"
    };
    format!("{} {how}", hours(hour))
}
