//! The level design's column of chapter 12's matrix on the port's fake clientset
//! ([`controlloop::fake`]), which stores objects as it is given them: no resourceVersion.
//!
//! The recordings' first section (`upstream/recorded/controller_runtime_vX_fault_matrix.txt`,
//! "resourceVersions as the fake stores them") runs controller-runtime's controller on
//! client-go's `fake.NewSimpleClientset`, where every update's old and new resourceVersions are
//! equal (both empty). [`run_on_fake`] runs the same six rows on the port's fake, so that section
//! is compared line by line too (`book/tests/recorded_upstream.rs`, `ch12_fault_matrix`). The
//! chapter's own matrix ([`super::run_async`]) runs on the embedded server, which stamps a
//! fresh resourceVersion on every write; the two differ in one row, the restart, where the
//! relisted keys' priority depends on it.
//!
//! ```text
//!  writer: fake.update(widget) ──► FakeClientset ──list/watch──► FakeSource ──► informer
//!          └ at write 125: the fault        (counts lists; withholds armed events)  │
//!             world ◄── reconcile (chapter 07's level design) ◄── queue ◄───────────┘
//! ```
//!
//! # Invariants
//! 1. The writer and the faults are the recorder's: each write comes after the tasks that can
//!    run have run (the recorder's `synctest.Wait`), and so does each status write, the
//!    shutdown and the kill.
//! 2. Every wait is bounded by `Setup::limit`.
//!
//! # Differences from [`super::run_async`]
//! - Quiet is the recorder's: every widget's world runs its last value, nothing is queued or
//!   running, for `Setup::quiet` (the fake's objects carry no resourceVersion to wait for).
//! - Only the six rows the recorder plays: the server's faults need the embedded server.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::{StreamExt, future::BoxFuture};
use tokio::{task::JoinHandle, time::Instant};

use super::{
    hooks::{Hooks, quiet_injected_panics},
    storm::{DROPPED, NAMESPACE, OUTAGE, STATUS_WRITES, converged, last_reconcile, widget},
    types::{Fault, Outcome, Setup, Wrong},
};
use crate::lab::rig::{Widget, WidgetStatus};
use crate::lab::{
    designs::trigger::{Backlog, Design, Downstream, Running, start_level},
    rig::let_tasks_run,
};
use controlloop::{
    cache::{
        InformerOptions, ListOptions, ListPage, ListerWatcher, LwError, SharedIndexInformer,
        WatchEvent, WatchOptions, WatchStream,
    },
    fake::{FakeClientset, FakeListerWatcher},
};

/// How often the wait for quiet looks.
const STEP: Duration = Duration::from_millis(10);

/// The rows the recorder plays on the fake, in its order.
pub const ROWS: [Fault; 6] = [
    Fault::EventsDropped,
    Fault::ReconcilerPanics,
    Fault::ReconcilerErrors,
    Fault::StatusStorm,
    Fault::ShutdownMidBurst,
    Fault::ControllerRestart,
];

/// The fake as the matrix's processes read it: it counts lists, and withholds the watch events
/// it is armed to drop (the recorder's `Dropper`: an event lost between server and informer).
#[derive(Clone)]
pub struct FakeSource {
    inner: FakeListerWatcher,
    lists: Arc<AtomicU64>,
    to_drop: Arc<AtomicU64>,
}

impl FakeSource {
    /// The widgets of [`NAMESPACE`] in `fake`.
    pub fn new(fake: &FakeClientset) -> Self {
        FakeSource {
            inner: FakeListerWatcher::new(fake.clone(), Some(NAMESPACE)),
            lists: Arc::default(),
            to_drop: Arc::default(),
        }
    }

    /// Lists made so far, by every informer on this source.
    pub fn lists(&self) -> u64 {
        self.lists.load(Ordering::SeqCst)
    }

    /// Withholds the next `n` watch events from every watch on this source.
    pub fn drop_next(&self, n: u64) {
        self.to_drop.fetch_add(n, Ordering::SeqCst);
    }
}

/// Takes one armed drop, if any is left.
fn take(to_drop: &AtomicU64) -> bool {
    let one_less = |n: u64| n.checked_sub(1);
    to_drop
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, one_less)
        .is_ok()
}

impl ListerWatcher<Widget> for FakeSource {
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<Widget>, LwError>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(options)
    }

    fn watch(
        &self,
        options: WatchOptions,
    ) -> BoxFuture<'static, Result<WatchStream<Widget>, LwError>> {
        let (watch, to_drop) = (self.inner.watch(options), self.to_drop.clone());
        Box::pin(async move {
            let events = watch.await?.filter(move |event| {
                let change = matches!(
                    event,
                    WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)
                );
                std::future::ready(!(change && take(&to_drop)))
            });
            Ok(events.boxed())
        })
    }

    fn is_watch_list_semantics_unsupported(&self) -> bool {
        true // the fake's own answer
    }
}

/// One process: an informer on the fake, the level design's controller on it, their tasks.
struct FakeProcess {
    running: Running,
    tasks: Vec<JoinHandle<()>>,
}

impl FakeProcess {
    /// Starts the controller, then its informer, as `rig::Process` does.
    fn start(source: &FakeSource, world: &Arc<Downstream>, hooks: &Arc<Hooks>, s: Setup) -> Self {
        let informer = Arc::new(SharedIndexInformer::new(
            source.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        let controller = start_level(&informer, world.clone(), hooks.clone(), s.design());
        let c = controller.clone();
        let mut tasks = vec![tokio::spawn(async move {
            let _ = c.run(futures::future::pending()).await;
        })];
        tasks.push(tokio::spawn(async move {
            informer.run(futures::future::pending()).await
        }));
        FakeProcess {
            running: Running::Level(controller),
            tasks,
        }
    }

    fn kill(self) {
        for t in &self.tasks {
            t.abort(); // a command in flight is dropped where it stands
        }
        if let Running::Level(c) = &self.running {
            c.abort();
        }
    }

    async fn shutdown(self, limit: Duration) -> Backlog {
        if let Running::Level(c) = &self.running {
            c.shutdown(); // its workers finish their reconciles
        }
        let (informer, workers) = self.tasks.split_last().expect("an informer task");
        for t in workers {
            let finished = async {
                while !t.is_finished() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            };
            crate::lab::rig::within(limit, "a worker never finished after shutdown", finished)
                .await;
        }
        informer.abort();
        self.running.backlog()
    }

    fn idle(&self) -> bool {
        self.running.backlog().total() + self.running.running() == 0
    }
}

/// Runs the level design through `fault` on the port's fake, as the recorder runs it on
/// client-go's: four widgets at 0, `setup.writes` writes, the fault at `setup.fault_point()`.
/// Panics on a row the fake cannot play (the server's faults).
pub async fn run_on_fake(fault: Fault, setup: Setup) -> Outcome {
    assert!(ROWS.contains(&fault), "{fault}: not a row the fake plays");
    quiet_injected_panics();
    let fake = FakeClientset::new();
    let names: Vec<String> = (0..setup.objects).map(|i| format!("w-{i}")).collect();
    for name in &names {
        fake.create(NAMESPACE, &widget(name, 0))
            .expect("a new widget");
    }
    let source = FakeSource::new(&fake);
    let (world, hooks) = (Downstream::new(setup.cost), Hooks::new());
    let mut starts = 1;
    let start = || FakeProcess::start(&source, &world, &hooks, setup);
    let mut process = Some(start());
    let mut last: BTreeMap<String, i32> = names.iter().map(|n| (n.clone(), 0)).collect();
    let settled = quiesce(&process, &last, &world, setup).await;
    assert!(settled, "the initial list was never reconciled");
    let (reconciles, commands, lists) = (hooks.reconciles(), world.commands(), source.lists());
    let mut left_at_shutdown = None;
    let write = |name: &str, value: i32, ready: Option<i32>| {
        let mut w = widget(name, value);
        w.status = ready.map(|r| WidgetStatus {
            ready_replicas: r,
            ..WidgetStatus::default()
        });
        fake.update(NAMESPACE, &w)
            .expect("an update of a stored widget");
    };
    for value in 1..=setup.writes {
        let name = names[setup.object_of(value)].clone();
        let v = value as i32;
        let_tasks_run().await; // the recorder's synctest.Wait before each write
        last.insert(name.clone(), v);
        if value != setup.fault_point() {
            write(&name, v, None);
        } else {
            match fault {
                Fault::EventsDropped => source.drop_next(DROPPED),
                Fault::ReconcilerPanics => hooks.panic_every(3),
                Fault::ReconcilerErrors => hooks.outage(OUTAGE),
                _ => {}
            }
            write(&name, v, None);
            match fault {
                Fault::StatusStorm => {
                    for i in 0..STATUS_WRITES {
                        let other = &names[i % names.len()];
                        write(other, last[other], Some(i as i32)); // the value stays
                        let_tasks_run().await;
                    }
                }
                Fault::ShutdownMidBurst => {
                    let_tasks_run().await; // the process hears this write first
                    let p = process.take().expect("a process runs");
                    left_at_shutdown = Some(p.shutdown(setup.limit).await);
                }
                Fault::ControllerRestart => {
                    let_tasks_run().await; // the process hears this write first
                    process.take().expect("a process runs").kill();
                    process = Some(start());
                    starts += 1;
                }
                _ => {}
            }
        }
        tokio::time::sleep(setup.gap).await;
    }
    let writes_over = Instant::now();
    if process.is_none() {
        process = Some(start()); // a process shut down mid-burst comes back now
        starts += 1;
    }
    let quiet = quiesce(&process, &last, &world, setup).await;
    let running = &process.as_ref().expect("a process runs").running;
    Outcome {
        design: Design::Level,
        wrong: Wrong::all(&last, &world),
        wrong_before_relist: None,
        quiet,
        left_in_queue: running.backlog(),
        left_at_shutdown,
        relists: source.lists() - lists,
        restarts: starts - 1,
        events: 0, // not printed: the recorder counts none
        reconciles: hooks.reconciles() - reconciles,
        max_holders_per_key: world.max_holders_per_key(),
        queue: running.queue_kind(),
        failed: hooks.failed(),
        panicked: hooks.panicked(),
        commands: world.commands() - commands,
        overlapping: world.overlapping(),
        converged: converged(&names, &world, writes_over),
        last_reconcile: last_reconcile(&hooks, &world, writes_over),
    }
}

/// Waits until every widget's world runs its value in `last` and the process has queued and
/// run nothing for `setup.quiet` in a row (the recorder's quiet), at most `setup.limit`.
async fn quiesce(
    process: &Option<FakeProcess>,
    last: &BTreeMap<String, i32>,
    world: &Downstream,
    setup: Setup,
) -> bool {
    let deadline = Instant::now() + setup.limit; // keeps I2
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        let idle = process.as_ref().is_some_and(FakeProcess::idle);
        if !idle || !Wrong::all(last, world).is_empty() {
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= setup.quiet {
            return true;
        }
        tokio::time::sleep(STEP).await;
    }
    false
}
