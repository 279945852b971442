//! Two things found by running kube-runtime 5.0.0, each as a minimal reproduction beside this
//! crate's answer to the same question.
//!
//! - **Several waiters on one store.** `Store::wait_until_ready` (`reflector/store.rs`) awaits
//!   a `DelayedInit` (`utils/delayed_init.rs`) that keeps one `futures` oneshot receiver behind
//!   a mutex. A oneshot receiver remembers the waker of its *last* poll only, so when several
//!   tasks wait at once, the store's first `InitDone` wakes one of them; the others stay
//!   parked until something else polls them. [`waiters`] counts who wakes, beside this
//!   crate's `SharedIndexInformer::wait_synced` with as many waiters.
//! - **The scheduler's millisecond.** Every reconcile request goes through the scheduler's
//!   `tokio_util` `DelayQueue` (`scheduler.rs`), even one asked for *now*, and a `DelayQueue`
//!   rounds each deadline **up** to a whole millisecond of its own clock. A write that lands
//!   0.25 ms into a millisecond therefore reconciles 0.75 ms later. [`rounding`] writes at
//!   chosen sub-millisecond offsets under the paused clock, with both controllers watching the
//!   same object on the same server; this crate's workqueue hands the key to a worker at once.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{
    Controller as KubeController,
    controller::{Action, Config},
    reflector::{self, reflector},
    watcher::{self, watcher},
};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::semantics::start;
use crate::lab::rig::{self, Backend, Fixture, OBJECT, value_of};
use controlloop::controller::{Context, Controller, ReconcileResult, Release, Request};

/// How many of `n` waiters on one store woke after it became ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Waiters {
    /// Tasks waiting.
    pub waiting: usize,
    /// kube-runtime: tasks whose `reader.wait_until_ready()` returned within a virtual minute.
    pub kube_runtime_woken: usize,
    /// This crate: tasks whose `informer.wait_synced()` returned within a virtual minute.
    pub controlloop_woken: usize,
}

impl Waiters {
    /// The check: every waiter woke, on each side. Returns the sides where one did not.
    pub fn stuck(&self) -> Vec<String> {
        [
            ("kube-runtime", self.kube_runtime_woken),
            ("controlloop", self.controlloop_woken),
        ]
        .iter()
        .filter(|(_, woken)| *woken != self.waiting)
        .map(|(side, woken)| {
            format!(
                "{side}: {} of {} waiters never woke",
                self.waiting - woken,
                self.waiting
            )
        })
        .collect()
    }
}

/// `n` tasks wait for one kube-runtime store and `n` for one informer, both on the same
/// in-process server under the paused clock; counts who woke after the initial list.
pub fn waiters(n: usize) -> Waiters {
    rig::paused(async move {
        // book: ch11_waiters
        let mut fixture = Fixture::new(&Backend::InProcess).await.expect("cluster");
        fixture.target.create(OBJECT, 0).await.expect("create");
        let kube_woken = Arc::new(AtomicUsize::new(0));
        let ours_woken = Arc::new(AtomicUsize::new(0));

        let (reader, writer) = reflector::store::<ConfigMap>();
        for _ in 0..n {
            let (reader, woken) = (reader.clone(), kube_woken.clone());
            tokio::spawn(async move {
                reader.wait_until_ready().await.expect("writer alive");
                woken.fetch_add(1, Ordering::SeqCst);
            });
            let (informer, woken) = (fixture.informer.clone(), ours_woken.clone());
            tokio::spawn(async move {
                informer.wait_synced().await;
                woken.fetch_add(1, Ordering::SeqCst);
            });
        }
        tokio::task::yield_now().await; // every waiter has polled once and parked
        let stream = reflector(
            writer,
            watcher(fixture.target.api(), watcher::Config::default()),
        );
        let reflecting = tokio::spawn(stream.for_each(|_| async {}));
        fixture.run_informer();

        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            reader.len(),
            1,
            "the kube-runtime store never listed the object"
        );
        assert!(fixture.informer.has_synced(), "the informer never synced");
        // book: end ch11_waiters
        let report = Waiters {
            waiting: n,
            kube_runtime_woken: kube_woken.load(Ordering::SeqCst),
            controlloop_woken: ours_woken.load(Ordering::SeqCst),
        };
        reflecting.abort();
        fixture.stop().await;
        report
    })
}

/// One write at a sub-millisecond offset, and how long each controller took to start the
/// reconcile it caused (virtual time: exact).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rounding {
    /// How far into a millisecond the write was sent, in µs.
    pub offset_us: u64,
    /// Write sent → this crate's reconcile started, in µs, per release raced (in the order
    /// given).
    pub controlloop_us: Vec<(Release, u64)>,
    /// Write sent → kube-runtime's reconcile started, in µs.
    pub kube_runtime_us: u64,
}

/// When one controller's reconciles started, by the value each read.
#[derive(Clone, Default)]
pub struct Starts(Arc<Mutex<Vec<(u64, Instant)>>>);

impl Starts {
    /// Notes that a reconcile reading `value` starts now.
    pub fn note(&self, value: u64) {
        self.0.lock().push((value, Instant::now()));
    }
    /// When the first reconcile that read `value` started.
    pub fn of(&self, value: u64) -> Option<Instant> {
        let starts = self.0.lock();
        starts.iter().find(|(v, _)| *v == value).map(|(_, at)| *at)
    }
}

/// This crate's controller at each of `releases` and kube-runtime's watch one object on one
/// in-process server (paused clock); for each offset, the clock is moved to that many µs past
/// a whole millisecond and one write is sent.
pub fn rounding(offsets_us: &[u64], releases: &[Release]) -> Vec<Rounding> {
    let plan: Vec<Option<u64>> = offsets_us.iter().map(|&o| Some(o)).collect();
    rig::paused(race(plan, releases, Duration::ZERO))
}

/// The two sides of a [`race`], started: this crate's controllers and what each noted, and
/// kube-runtime's.
pub struct Racers {
    /// This crate's controller, once per release raced.
    pub controllers: Vec<Controller<ConfigMap>>,
    /// When each of them started a reconcile, by the value it read.
    pub ours: Vec<Starts>,
    /// When kube-runtime's started one.
    pub kube: Starts,
    /// kube-runtime's controller, running.
    pub kube_task: tokio::task::JoinHandle<()>,
}

// book: ch11_fn_racers
/// This crate's controller at each of `releases` and kube-runtime's (with `Config::debounce`
/// set to `debounce`), started on `fixture`; each reconciler notes when it started, by the
/// value it read, and does nothing else.
pub fn racers(fixture: &mut Fixture, releases: &[Release], debounce: Duration) -> Racers {
    let ours: Vec<Starts> = releases.iter().map(|_| Starts::default()).collect();
    let mut controllers = vec![];
    for (&release, seen) in releases.iter().zip(&ours) {
        let seen = seen.clone();
        let reconcile = move |req: Request, ctx: Context<ConfigMap>| {
            if let Some(v) = ctx.get(&req).and_then(|cm| value_of(&cm)) {
                seen.note(v);
            }
            async { Ok(ReconcileResult::done()) }
        };
        let controller = Controller::builder("latency").release(release);
        controllers.push(
            controller
                .build(&fixture.informer, reconcile)
                .expect("controller"),
        );
    }
    start(fixture, &controllers);

    let kube = Starts::default();
    let seen = kube.clone();
    let kube_task = tokio::spawn(
        KubeController::new(fixture.target.api(), watcher::Config::default())
            .with_config(Config::default().debounce(debounce)) // zero unless a run asks
            .run(
                move |cm: Arc<ConfigMap>, _: Arc<()>| {
                    if let Some(v) = value_of(&cm) {
                        seen.note(v);
                    }
                    async { Ok::<_, Infallible>(Action::await_change()) }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            )
            .for_each(|_| async {}),
    );
    Racers {
        controllers,
        ours,
        kube,
        kube_task,
    }
}
// book: end ch11_fn_racers

/// One write per entry of `plan`, 2 ms apart, each timed from the moment it is sent to the
/// start of each controller's reconcile ([`racers`], kube-runtime's with `debounce`):
/// `Some(offset)` stands `offset` µs past a whole millisecond first (paused clock only); `None`
/// just writes (under the real clock, where it lands). The body chapter 11 shows; [`rounding`]
/// runs it under the paused clock, and `ch11::latency_real` under the real one.
pub async fn race(
    plan: Vec<Option<u64>>,
    releases: &[Release],
    debounce: Duration,
) -> Vec<Rounding> {
    // book: ch11_race
    let mut fixture = Fixture::new(&Backend::InProcess).await.expect("cluster");
    fixture.target.create(OBJECT, 0).await.expect("create");
    let Racers {
        controllers,
        ours,
        kube,
        kube_task,
    } = racers(&mut fixture, releases, debounce);

    let api = fixture.target.api();
    let mut rows = vec![];
    for (i, offset) in plan.iter().enumerate() {
        let value = i as u64 + 1;
        tokio::time::sleep(Duration::from_millis(2)).await; // settle; ends on a whole ms
        if let Some(offset) = offset {
            tokio::time::advance(Duration::from_micros(*offset)).await; // paused clock only
        }
        let sent = Instant::now();
        rig::set_value(&api, OBJECT, value).await.expect("write");
        rig::settle(
            Duration::from_secs(5),
            Duration::ZERO,
            "a reconcile of each controller for the write (watch or scheduler stalled?)",
            || ours.iter().chain([&kube]).all(|s| s.of(value).is_some()),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let us = |s: &Starts| (s.of(value).expect("started") - sent).as_micros() as u64;
        rows.push(Rounding {
            offset_us: offset.unwrap_or(0),
            controlloop_us: releases
                .iter()
                .zip(&ours)
                .map(|(r, s)| (*r, us(s)))
                .collect(),
            kube_runtime_us: us(&kube),
        });
    }
    for c in &controllers {
        c.shutdown();
    }
    kube_task.abort();
    fixture.stop().await;
    // book: end ch11_race
    rows
}
