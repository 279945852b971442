//! Chapter 07's storm: both designs side by side under one writer, with a transient failure
//! or a kill mid-burst when asked; and the claims the chapter makes about the four storms.

use std::{sync::Arc, time::Duration};

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;
use tokio::time::Instant;

use super::{Armed, Config, Design, Downstream, NAMESPACE, OBJECT, Process};
use crate::lab::rig::{self, ESSAY, Storm, let_tasks_run};
use crate::lab::rig::{Widget, WidgetSpec};
use controlloop::{apiserver::Cluster, controller::Release};

/// One storm's setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Writes (`spec.replicas` = 1..=writes), their gap, and the cost of one reconcile (one
    /// downstream command).
    pub storm: Storm,
    /// Workers per controller.
    pub workers: usize,
    /// Arm one transient downstream failure, for each design, just before the first write.
    pub fail_first_command: bool,
    /// Kill both controllers once they have heard this write; restart them after the last
    /// write.
    pub kill_after_write: Option<u64>,
    /// The controller-runtime release the level design follows (the book's: v0.25).
    pub release: Release,
}

impl Params {
    /// The essay's storm ([`ESSAY`]), one worker each.
    pub fn essay() -> Self {
        Params {
            storm: ESSAY,
            workers: 1,
            fail_first_command: false,
            kill_after_write: None,
            release: Release::default(),
        }
    }
    /// With `n` writes.
    pub fn writes(mut self, n: u64) -> Self {
        self.storm.writes = n;
        self
    }
    /// With `n` workers per controller.
    pub fn workers(self, n: usize) -> Self {
        Params { workers: n, ..self }
    }
    /// With one transient failure of the first command after the burst starts.
    pub fn fail_first_command(self) -> Self {
        Params {
            fail_first_command: true,
            ..self
        }
    }
    /// Killing both controllers after write `k`, restarting them after the burst.
    pub fn kill_after(self, k: u64) -> Self {
        Params {
            kill_after_write: Some(k),
            ..self
        }
    }
    /// With the level design on `release`.
    pub fn release(self, release: Release) -> Self {
        Params { release, ..self }
    }
    /// Each design's setup: controller-runtime's defaults on the storm's release, with its
    /// workers.
    pub fn config(&self) -> Config {
        Config {
            release: self.release,
            ..Config::workers(self.workers)
        }
    }
}

/// What one design did in one storm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// Informer callbacks heard from the first write on, over all its processes.
    pub events: u64,
    /// Reconciles (downstream commands) from the first write on.
    pub reconciles: u64,
    /// Commands that failed transiently (and were retried).
    pub failures: u64,
    /// The same-key detector: most reconciles of one object running at once (1 is correct).
    pub max_holders_per_key: u32,
    /// Reconciles that started while another one for the same object ran.
    pub overlapping_reconciles: u64,
    /// Replicas the downstream runs at the end.
    pub final_replicas: Option<i32>,
    /// Whether that equals the last value written.
    pub ends_right: bool,
    /// Virtual milliseconds from the last write to the downstream's last change, if it ends
    /// right.
    pub converged_ms_after_last_write: Option<u64>,
}

/// One storm, both designs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The storm.
    pub writes: u64,
    /// Gap between writes, ms.
    pub gap_ms: u64,
    /// Cost of a reconcile, ms.
    pub cost_ms: u64,
    /// Workers per controller.
    pub workers: usize,
    /// Both controllers were killed right after this write and restarted after the last.
    pub killed_after_write: Option<u64>,
    /// The last value written.
    pub last_written: i32,
    /// GETs of the widget the server logged during the whole run: reconciles read the
    /// informer's cache, not the server.
    pub widget_gets: usize,
    /// The level-triggered controller.
    pub level: Outcome,
    /// The edge-triggered controller.
    pub edge: Outcome,
}

/// Runs one storm on a fresh paused-clock runtime.
pub fn run(params: &Params) -> Report {
    crate::lab::rig::paused(run_async(params))
}

/// Runs one storm on the current runtime, whose clock must be paused. Chapter 07 shows this
/// body; every storm of the chapter runs it.
pub async fn run_async(params: &Params) -> Report {
    // book: ch07_storm
    let Storm { writes, gap, cost } = params.storm;
    assert!(writes >= 1, "a storm needs at least one write");
    let cluster = rig::widget_cluster().await;
    let client = cluster.in_process_client();
    let api: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    let widget = Widget::new(
        OBJECT,
        WidgetSpec {
            replicas: 0,
            color: None,
        },
    );
    let created = api.create(&PostParams::default(), &widget).await;
    created.expect("creating the widget on a fresh cluster");
    let designs = [Design::Level, Design::Edge];
    let worlds = designs.map(|_| Downstream::new(cost)); // the world each design drives
    let start = |d: usize| Process::start(&designs[d].unarmed(&worlds[d], params.config()), &api);
    let mut procs: Vec<Option<Process<Armed>>> = vec![Some(start(0)), Some(start(1))];
    let settle = Duration::from_secs(1) + cost * 4;
    tokio::time::sleep(settle).await;
    let before = Before::take(&procs, &worlds);
    if params.fail_first_command {
        worlds.iter().for_each(|w| w.fail_next(1)); // one transient outage, in each world
    }
    let mut killed = [0u64; 2]; // events each design heard before it was killed
    for value in 1..=writes {
        let patch = serde_json::json!({ "spec": { "replicas": value } });
        let patched = api
            .patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        patched.expect("a merge patch of spec.replicas");
        if params.kill_after_write == Some(value) {
            let_tasks_run().await; // each process hears this write first
            for (d, p) in procs.iter_mut().enumerate() {
                let p = p.take().expect("killed once");
                killed[d] = p.events();
                p.kill(); // informer, cache, queue and workers: gone
            }
        }
        if value < writes {
            tokio::time::sleep(gap).await;
        }
    }
    let last_write = Instant::now();
    for (d, p) in procs.iter_mut().enumerate() {
        if p.is_none() {
            *p = Some(start(d)); // a restarted process: a fresh informer lists
        }
    }
    // Long enough for the slowest design to work off one reconcile per write, and retries.
    let drain = settle + cost * (writes as u32 + 10);
    tokio::time::sleep(drain).await;
    let report = before.report(params, &cluster, procs, &worlds, killed, last_write, drain);
    // book: end ch07_storm
    report
}

/// Each design's events heard and commands run before the storm: subtracted at the end.
pub struct Before {
    counts: Vec<(u64, u64)>,
}

impl Before {
    /// Checks that both designs reconciled the initial widget, and counts what they did so far.
    pub fn take(procs: &[Option<Process<Armed>>], worlds: &[Arc<Downstream>; 2]) -> Before {
        let key = format!("{NAMESPACE}/{OBJECT}");
        for (d, world) in worlds.iter().enumerate() {
            assert_eq!(
                world.replicas(&key),
                Some(0),
                "design {d} never reconciled the initial widget: informer not synced?"
            );
        }
        let counts = procs
            .iter()
            .zip(worlds)
            .map(|(p, w)| (p.as_ref().map_or(0, Process::events), w.commands()))
            .collect();
        Before { counts }
    }

    /// What each design did since [`Before::take`]; kills the processes.
    #[allow(clippy::too_many_arguments)]
    pub fn report(
        self,
        params: &Params,
        cluster: &Cluster,
        procs: Vec<Option<Process<Armed>>>,
        worlds: &[Arc<Downstream>; 2],
        killed: [u64; 2],
        last_write: Instant,
        drain: Duration,
    ) -> Report {
        let key = format!("{NAMESPACE}/{OBJECT}");
        let last_written = params.storm.writes as i32;
        let outcomes: Vec<Outcome> = procs
            .iter()
            .enumerate()
            .map(|(d, p)| {
                let p = p.as_ref().expect("running");
                assert!(
                    p.idle(),
                    "design {d} still busy {drain:?} after the burst: a key never released?"
                );
                let world = &worlds[d];
                let final_replicas = world.replicas(&key);
                let ends_right = final_replicas == Some(last_written);
                let (events_before, commands_before) = self.counts[d];
                let events = if params.kill_after_write.is_some() {
                    killed[d] - events_before + p.events()
                } else {
                    p.events() - events_before
                };
                Outcome {
                    events,
                    reconciles: world.commands() - commands_before,
                    failures: world.failures(),
                    max_holders_per_key: world.max_holders_per_key(),
                    overlapping_reconciles: world.overlapping(),
                    final_replicas,
                    ends_right,
                    converged_ms_after_last_write: world
                        .last_change()
                        .filter(|_| ends_right)
                        .map(|(t, _)| t.saturating_duration_since(last_write).as_millis() as u64),
                }
            })
            .collect();
        for p in procs.into_iter().flatten() {
            p.kill();
        }
        let widget_gets = cluster
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(&format!("/widgets/{OBJECT}")))
            .count();
        let [level, edge]: [Outcome; 2] = outcomes.try_into().expect("two designs");
        Report {
            writes: params.storm.writes,
            gap_ms: params.storm.gap.as_millis() as u64,
            cost_ms: params.storm.cost.as_millis() as u64,
            workers: params.workers,
            killed_after_write: params.kill_after_write,
            last_written,
            widget_gets,
            level,
            edge,
        }
    }
}

/// The four storms chapter 07 shows, each under the name of its snapshot.
// book: ch07_storms
pub fn storms() -> [(&'static str, Params); 4] {
    [
        ("ch07_dedup", Params::essay()),
        ("ch07_single_writer", Params::essay().workers(2)),
        ("ch07_order", Params::essay().writes(3).fail_first_command()),
        ("ch07_restart", Params::essay().kill_after(100)),
    ]
}

/// Runs the four [`storms`].
pub fn bill() -> Vec<(&'static str, Report)> {
    storms().iter().map(|(name, p)| (*name, run(p))).collect()
}
// book: end ch07_storms

/// Runs the chapter's four storms, checks the durable claims and records the snapshots the
/// chapter shows.
pub fn edge() {
    crate::kit::snap::text("ch07_queue_items", super::queue_items());
    let bill = bill();
    check(&bill);
    for (name, report) in &bill {
        crate::kit::snap::yaml(name, report, vec![]);
    }
}

/// The claims chapter 07 makes about [`bill`]'s storms. Panics on the first that fails.
// book: ch07_check
pub fn check(bill: &[(&'static str, Report)]) {
    let get = |name: &str| &bill.iter().find(|(n, _)| *n == name).expect(name).1;
    let dedup = get("ch07_dedup");
    assert_eq!(
        dedup.edge.reconciles, dedup.writes,
        "edge: one reconcile per event"
    );
    assert!(dedup.level.reconciles < dedup.writes / 4, "level collapses");
    assert!(dedup.level.ends_right && dedup.edge.ends_right);
    let sw = get("ch07_single_writer");
    assert_eq!(sw.level.max_holders_per_key, 1, "level: one writer per key");
    assert!(sw.edge.max_holders_per_key > 1, "edge: the detector fires");
    let order = get("ch07_order");
    assert!(
        order.level.ends_right,
        "level recovers from a transient failure"
    );
    assert!(
        !order.edge.ends_right,
        "edge applies the retried change last"
    );
    let restart = get("ch07_restart");
    assert!(restart.level.ends_right, "level relists and converges");
    assert!(!restart.edge.ends_right, "edge loses its queued payloads");
    for (name, r) in bill {
        assert_eq!(
            r.widget_gets, 0,
            "{name}: a reconcile read the server, not the cache"
        );
    }
}
// book: end ch07_check
