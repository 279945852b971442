//! One run of the matrix: a write storm over a few widgets, one fault at its point, and the
//! supervisor that restarts a crashed controller process, as a kubelet would.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use kube::api::{Api, Patch, PatchParams};
use tokio::time::Instant;

use super::{
    hooks::{Hooks, quiet_injected_panics},
    types::{Fault, Outcome, Setup, Wrong},
};
use crate::lab::rig::{self, Widget, WidgetSpec};
use crate::lab::{
    designs::trigger::{Armed, Backlog, Design, Downstream},
    rig::{Process, within},
};
use controlloop::{
    apiserver::{Cluster, Failure, RequestRecord},
    controller::QueueKind,
};

pub use crate::lab::rig::NAMESPACE;

/// Writes hidden from every watch by [`Fault::EventsDropped`].
pub const DROPPED: u64 = 10;
/// Status writes in [`Fault::StatusStorm`].
pub const STATUS_WRITES: usize = 400;
/// How long the world refuses commands in [`Fault::ReconcilerErrors`].
pub const OUTAGE: Duration = Duration::from_millis(100);
/// What the slow handler of [`Fault::SlowHandler`] takes per event.
pub const HANDLER_DELAY: Duration = Duration::from_millis(5);
/// The `Retry-After` the throttled server sends, and how long the writer waits on a 5xx.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often the supervisor looks at the process.
const STEP: Duration = Duration::from_millis(10);

/// The writer: sets `spec.replicas` and remembers what it wrote last to each widget.
pub struct Writer {
    /// The widgets' API.
    pub api: Api<Widget>,
    /// The cluster's controls.
    pub cluster: Cluster,
    /// Every widget's name.
    pub names: Vec<String>,
    /// The last value written to each widget.
    pub last: BTreeMap<String, i32>,
    /// Each widget's resourceVersion after its last write that sent an event: what a cache
    /// that heard every event holds.
    pub heard: BTreeMap<String, u64>,
    /// Each silently written widget's resourceVersion: what only a relist brings in.
    pub unheard: BTreeMap<String, u64>,
    limit: Duration,
}

/// A stored widget's resourceVersion as a number (the embedded server's revisions are).
fn rv_of(w: &Widget) -> u64 {
    let rv = w.metadata.resource_version.as_deref().unwrap_or_default();
    rv.parse().unwrap_or_default()
}

impl Writer {
    /// A writer of `names`, each at 0 replicas so far; every wait bounded by `limit`.
    pub fn new(api: Api<Widget>, cluster: &Cluster, names: Vec<String>, limit: Duration) -> Self {
        Writer {
            api,
            cluster: cluster.clone(),
            last: names.iter().map(|n| (n.clone(), 0)).collect(),
            names,
            heard: BTreeMap::new(),
            unheard: BTreeMap::new(),
            limit,
        }
    }

    /// Sets `name`'s replicas with a merge patch (one write, one watch event). A request the
    /// server refuses with 429 or a 5xx is sent again after [`RETRY_AFTER`].
    pub async fn set(&mut self, name: &str, value: i32) {
        let patch = serde_json::json!({ "spec": { "replicas": value } });
        let params = PatchParams::default();
        // Bounded, like every wait of a run (keeps I2).
        let written = within(self.limit, "a write was never accepted", async {
            loop {
                match self.api.patch(name, &params, &Patch::Merge(&patch)).await {
                    Ok(w) => return w,
                    Err(kube::Error::Api(s)) if s.code == 429 || s.code >= 500 => {
                        tokio::time::sleep(RETRY_AFTER).await
                    }
                    Err(e) => panic!("writing {name}: {e}"),
                }
            }
        })
        .await;
        self.last.insert(name.to_owned(), value);
        self.heard.insert(name.to_owned(), rv_of(&written));
    }

    /// Sets `name`'s replicas behind every watch's back: stored, with a revision, no event.
    pub fn set_silently(&mut self, name: &str, value: i32) {
        let written = self.cluster.silent_write(&widget(name, value));
        let written = written.expect("a silent write of a valid widget");
        self.last.insert(name.to_owned(), value);
        self.unheard.insert(name.to_owned(), rv_of(&written));
    }

    /// Writes `name`'s status (`readyReplicas`): an event, and no spec change.
    pub async fn status(&mut self, name: &str, ready: i32) {
        let patch = Patch::Merge(serde_json::json!({ "status": { "readyReplicas": ready } }));
        let params = PatchParams::default();
        let write = self.api.patch_status(name, &params, &patch);
        let written = within(self.limit, "a status write was never answered", write)
            .await
            .expect("a status write");
        self.heard.insert(name.to_owned(), rv_of(&written));
    }

    /// Waits until the server has answered `n` more requests with `code`.
    pub async fn wait_for_status(&self, code: u16, n: usize) {
        let with = |log: &[RequestRecord]| log.iter().filter(|r| r.status == code).count();
        let target = with(&self.cluster.requests()) + n;
        let answered = self.cluster.wait_for_requests(|log| with(log) >= target);
        within(
            self.limit,
            "the informer stopped asking the server",
            answered,
        )
        .await;
    }
}

/// A widget `NAMESPACE/name` with `replicas`.
pub fn widget(name: &str, replicas: i32) -> Widget {
    let mut w = Widget::new(
        name,
        WidgetSpec {
            replicas,
            color: None,
        },
    );
    w.metadata.namespace = Some(NAMESPACE.to_owned());
    w
}

/// The controller process and its supervisor: it restarts a crashed process at once (as a
/// kubelet restarts a crashed container, here without its back-off) and counts restarts.
pub struct Node {
    design: Design,
    api: Api<Widget>,
    world: Arc<Downstream>,
    /// The faults armed in the controller's code.
    pub hooks: Arc<Hooks>,
    setup: Setup,
    process: Option<Process<Armed>>,
    /// Processes started so far.
    starts: u64,
    /// What a graceful shutdown left in its queue, if there was one.
    pub left_at_shutdown: Option<Backlog>,
}

impl Node {
    /// A supervisor for processes of `design`, none started yet.
    pub fn new(design: Design, api: &Api<Widget>, world: &Arc<Downstream>, setup: Setup) -> Self {
        Node {
            design,
            api: api.clone(),
            world: world.clone(),
            hooks: Hooks::new(),
            setup,
            process: None,
            starts: 0,
            left_at_shutdown: None,
        }
    }

    /// Starts a process if none runs.
    pub fn start(&mut self) {
        if self.process.is_none() {
            let hooks = self.hooks.clone(); // armed once, for every process of the run
            let armed = self.design.armed(&self.world, hooks, self.setup.design());
            let p = Process::start(&armed, &self.api);
            self.starts += 1;
            self.process = Some(p);
        }
    }

    /// Kills the process, as a process kill would.
    pub fn kill(&mut self) {
        if let Some(p) = self.process.take() {
            p.kill();
        }
    }

    /// Stops the process gracefully and keeps what its queue still held.
    pub async fn shutdown(&mut self) {
        if let Some(p) = self.process.take() {
            self.left_at_shutdown = Some(p.shutdown(self.setup.limit).await.backlog());
        }
    }

    /// Processes started after the first: crashes, kills and shutdowns it came back from.
    pub fn restarts(&self) -> u64 {
        self.starts.saturating_sub(1)
    }

    /// Restarts the process if an event handler panic crashed it.
    pub fn restart_if_crashed(&mut self) {
        // Keeps I3: the crashed process is gone, a new one starts from the cluster.
        if self.process.as_ref().is_some_and(Process::crashed) {
            self.kill();
            self.start();
        }
    }

    fn busy(&self) -> bool {
        self.process.as_ref().is_some_and(|p| !p.idle())
    }

    /// Whether the process's cache holds every widget at least at its resourceVersion in
    /// `heard` (cache keys and versions): it has heard every event (a relist counts).
    fn caught_up(&self, heard: &[(String, u64)]) -> bool {
        let Some(p) = &self.process else { return false };
        heard
            .iter()
            .all(|(key, rv)| p.cached(key).is_some_and(|w| rv_of(&w) >= *rv))
    }

    /// Waits until the process's cache has caught up with `heard` and the process has then
    /// held and run nothing for `setup.quiet` in a row, restarting it if it crashes
    /// meanwhile; at most `setup.limit`. Whether it got there.
    pub async fn quiesce(&mut self, heard: &BTreeMap<String, u64>) -> bool {
        let deadline = Instant::now() + self.setup.limit; // keeps I2
        let heard: Vec<(String, u64)> = heard
            .iter()
            .map(|(name, &rv)| (format!("{NAMESPACE}/{name}"), rv))
            .collect();
        let mut quiet_since = Instant::now();
        while Instant::now() < deadline {
            self.restart_if_crashed();
            if self.busy() || !self.caught_up(&heard) {
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= self.setup.quiet {
                return true;
            }
            tokio::time::sleep(STEP).await;
        }
        false
    }

    /// The queue the running process's controller built, if one runs.
    pub fn queue_kind(&self) -> Option<QueueKind> {
        self.process.as_ref().map(|p| p.started().queue_kind())
    }

    /// What the running process's queue holds (nothing if none runs).
    pub fn backlog(&self) -> Backlog {
        self.process
            .as_ref()
            .map(|p| p.started().backlog())
            .unwrap_or_default()
    }
}

// book: ch12_inject
/// The write at the fault point, with its fault.
pub async fn faulty_write(fault: Fault, w: &mut Writer, node: &mut Node, name: &str, value: i32) {
    let cluster = w.cluster.clone();
    match fault {
        Fault::WatchClosed => {
            w.set(name, value).await;
            cluster.close_watches(); // the reflector resumes from its last resourceVersion
        }
        Fault::EventsDropped => {
            cluster.drop_next_events(DROPPED); // stored, never sent to any watch
            w.set(name, value).await;
        }
        Fault::HistoryCompacted => {
            cluster.drop_next_events(1);
            w.set(name, value).await; // no watch hears of this write...
            cluster.compact(); // ...history is compacted past it...
            cluster.close_watches(); // ...and the resumed watch is answered 410
        }
        Fault::ServerRestarted => {
            w.set(name, value).await;
            cluster.restart(); // data kept; every watch cut; old revisions refused
        }
        Fault::Throttled => {
            w.set(name, value).await;
            cluster.fail_next_requests(3, Failure::TooManyRequests, RETRY_AFTER.as_secs());
            cluster.close_watches();
            w.wait_for_status(429, 3).await;
            cluster.fail_next_requests(3, Failure::InternalError, 0);
            w.wait_for_status(500, 3).await;
        }
        Fault::SilentWrite => {
            w.set(name, value).await;
            let other = w.names[0].clone(); // a widget nobody writes again
            w.set_silently(&other, value);
        }
        Fault::SlowHandler => {
            node.hooks.slow_handler(HANDLER_DELAY);
            w.set(name, value).await;
        }
        Fault::ReconcilerPanics => {
            node.hooks.panic_every(3);
            w.set(name, value).await;
        }
        Fault::ReconcilerErrors => {
            node.hooks.outage(OUTAGE);
            w.set(name, value).await;
        }
        Fault::HandlerPanics => {
            node.hooks.panic_on_next_event(); // the informer crashes; the process restarts
            w.set(name, value).await;
        }
        Fault::StatusStorm => {
            w.set(name, value).await;
            for i in 0..STATUS_WRITES {
                let other = w.names[i % w.names.len()].clone();
                w.status(&other, i as i32).await;
            }
        }
        Fault::ShutdownMidBurst => {
            w.set(name, value).await;
            node.shutdown().await; // it starts again after the burst
        }
        Fault::ControllerRestart => {
            w.set(name, value).await;
            node.kill();
            node.start();
        }
        Fault::Scale => w.set(name, value).await, // the load is the fault
    }
}
// book: end ch12_inject

/// How long after `since` any of `names`' world values last changed (zero: none after it).
pub fn converged(names: &[String], world: &Downstream, since: Instant) -> Duration {
    let changed = names.iter().filter_map(|name| {
        let at = world.last_changed(&format!("{NAMESPACE}/{name}"))?;
        Some(at.saturating_duration_since(since))
    });
    changed.max().unwrap_or_default()
}

/// How long after `since` the last reconcile ran: the later of the last one's start and the last
/// command's end (a reconcile that passes its hook ends with its command); zero if before.
pub fn last_reconcile(hooks: &Hooks, world: &Downstream, since: Instant) -> Duration {
    let last = hooks.last_reconcile().max(world.last_ended());
    last.map_or(Duration::ZERO, |at| at.saturating_duration_since(since))
}

/// Whether a request was a list of widgets: a plain LIST, or a streaming list (a watch with
/// `sendInitialEvents=true`, the default at 1.36).
pub fn is_list(r: &RequestRecord) -> bool {
    r.method == "GET"
        && r.path.ends_with("/widgets")
        && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
}

/// Runs `design` through `fault` on the current runtime: a paused clock, or the real one for
/// [`Fault::SlowHandler`] (whose handler blocks its thread).
pub async fn run_async(design: Design, fault: Fault, setup: Setup) -> Outcome {
    quiet_injected_panics();
    // book: ch12_run
    let cluster = rig::widget_cluster().await;
    let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
    let names: Vec<String> = (0..setup.objects).map(|i| format!("w-{i}")).collect();
    for name in &names {
        // Stored before anyone watches: the first list brings them.
        cluster
            .silent_write(&widget(name, 0))
            .expect("a new widget");
    }
    let world = Downstream::new(setup.cost); // what the controller drives
    let mut node = Node::new(design, &api, &world, setup);
    node.start();
    let mut w = Writer::new(api, &cluster, names, setup.limit);
    let initial = node.quiesce(&w.heard).await && Wrong::all(&w.last, &world).is_empty();
    assert!(initial, "{design:?} never reconciled the initial list");
    let (events, reconciles) = (node.hooks.events(), node.hooks.reconciles());
    let commands = world.commands();
    for value in 1..=setup.writes {
        let name = w.names[setup.object_of(value)].clone();
        if value == setup.fault_point() {
            faulty_write(fault, &mut w, &mut node, &name, value as i32).await;
        } else {
            w.set(&name, value as i32).await;
        }
        node.restart_if_crashed();
        tokio::time::sleep(setup.gap).await;
    }
    let writes_over = Instant::now(); // the last write, and its gap
    node.start(); // a process shut down mid-burst comes back now
    let quiet = node.quiesce(&w.heard).await;
    let wrong = |w: &Writer| Wrong::all(&w.last, &world);
    let mut wrong_before_relist = None;
    if fault == Fault::SilentWrite {
        wrong_before_relist = Some(wrong(&w).len()); // no event: nothing to react to
        cluster.expire_watches(); // until a relist brings the state in
        w.heard.append(&mut w.unheard);
        let relisted = node.quiesce(&w.heard).await;
        assert!(relisted, "{design:?} never went quiet after the relist");
    }
    let lists = cluster.requests().iter().filter(|r| is_list(r)).count() as u64;
    Outcome {
        design,
        wrong: wrong(&w),
        wrong_before_relist,
        quiet,
        left_in_queue: node.backlog(),
        left_at_shutdown: node.left_at_shutdown,
        relists: lists.saturating_sub(1),
        restarts: node.restarts(),
        events: node.hooks.events() - events,
        reconciles: node.hooks.reconciles() - reconciles,
        max_holders_per_key: world.max_holders_per_key(),
        queue: node.queue_kind().expect("a process runs after the storm"),
        failed: node.hooks.failed(),
        panicked: node.hooks.panicked(),
        commands: world.commands() - commands,
        overlapping: world.overlapping(),
        converged: converged(&w.names, &world, writes_over),
        last_reconcile: last_reconcile(&node.hooks, &world, writes_over),
    }
    // book: end ch12_run
}
