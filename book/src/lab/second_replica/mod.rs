//! Chapter 15's experiments: the status record of chapter 08 run as two replicas, first without
//! leader election, then with the port of client-go's (`controlloop::leaderelection`, a Lease
//! on the embedded server), across a crash, a graceful release, and a process pause longer
//! than the lease.
//!
//! ```text
//!  replica a: elector ─ leads ─► on_started_leading: start the controller process ─┐ token cancelled
//!  replica b: elector ─ waits (reads the lease every 2..4.4 s) ─► leads ─► …   └► kill it
//!                      both on one Lease: coordination.k8s.io/v1 default/status-record
//! ```
//!
//! Everything runs under tokio's paused clock against the embedded server in-process: every
//! time and count is exact and repeats.
//!
//! # Invariants
//! 1. A replica's leadership interval is from its `on_started_leading` to the moment its
//!    leading work stops (its token cancelled, or the replica crashed); [`Log::overlap`] is the
//!    detector: the time two replicas' intervals share.
//! 2. A paused replica ([`Pause`]) runs nothing: its elector and its leading work are polled
//!    only while it is not paused, and every timer that fell due meanwhile fires when it
//!    resumes, as a stopped process's timers do.
//!
//! # Differences from upstream
//! A paused replica's elector and leading work stop (I2), but the controller process it started
//! runs its informer and workers in tasks of their own, which go on: nothing switches the
//! widget during a pause, so they have nothing to act on until it resumes, when a real
//! stopped process would act on the same switch-on after catching up on its watch.
//!
//! controller-runtime's manager does not stop its controllers when the lease is lost: it
//! exits the process. Here a lost lease kills the replica's controller process (informer, queue,
//! workers), which is what the exit amounts to for the keys in flight.

pub mod bands;
pub mod outage;
pub mod real;
pub mod recovery;

pub use outage::{ch15_release_after_outage, release_after_outage};
pub use recovery::{ch15_recovery, leader_election_recovery};

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, Waker},
    time::Duration,
};

use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lab::designs::status_record::{
    Actions, RecordCounts, Wired, set_annotation, start_record,
};
use crate::lab::rig::Widget;
use crate::lab::rig::{NAMESPACE, Process, within};
use controlloop::{
    apiserver::Cluster,
    leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock},
};

/// The Lease both replicas hold.
pub const LEASE: &str = "status-record";

/// A switch to stop and resume one replica as a whole (I2): `SIGSTOP` and `SIGCONT`, a long
/// garbage-collection pause, a frozen VM.
#[derive(Default)]
pub struct Pause {
    paused: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Pause {
    /// Stops the replica: nothing of it is polled until [`Pause::resume`].
    pub fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Resumes it: everything it was waiting for that fell due meanwhile is ready at once.
    pub fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
        for w in self.wakers.lock().drain(..) {
            w.wake();
        }
    }

    /// `fut`, polled only while the replica is not paused.
    pub fn wrap<F: Future>(self: &Arc<Self>, fut: F) -> Paused<F> {
        Paused {
            inner: Box::pin(fut),
            pause: self.clone(),
        }
    }
}

/// A future polled only while its [`Pause`] is off.
pub struct Paused<F> {
    inner: Pin<Box<F>>,
    pause: Arc<Pause>,
}

impl<F: Future> Future for Paused<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.pause.paused.load(Ordering::SeqCst) {
            self.pause.wakers.lock().push(cx.waker().clone());
            return Poll::Pending;
        }
        self.inner.as_mut().poll(cx)
    }
}

/// One event of a run, at its virtual time from the start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Milliseconds since the run began.
    pub at_ms: u64,
    /// The replica.
    pub replica: &'static str,
    /// What happened.
    pub what: &'static str,
}

/// The run's log of events and of each replica's leadership intervals (I1).
pub struct Log {
    start: Instant,
    events: Mutex<Vec<Event>>,
    led: Mutex<Vec<(&'static str, Instant, Option<Instant>)>>,
}

impl Log {
    fn new() -> Arc<Self> {
        Arc::new(Log {
            start: Instant::now(),
            events: Mutex::default(),
            led: Mutex::default(),
        })
    }

    fn note(&self, replica: &'static str, what: &'static str) {
        let at_ms = u64::try_from((Instant::now() - self.start).as_millis()).unwrap_or(u64::MAX);
        self.events.lock().push(Event {
            at_ms,
            replica,
            what,
        });
    }

    /// `replica`'s leading work starts: its interval opens.
    pub fn began(&self, replica: &'static str) {
        self.note(replica, "starts leading: controller process started");
        self.led.lock().push((replica, Instant::now(), None));
    }

    /// `replica`'s leading work stops: its interval closes.
    pub fn ended(&self, replica: &'static str) {
        self.note(replica, "stops leading: controller process killed");
        self.close(replica);
    }

    /// Closes `replica`'s open interval, if any; true if there was one.
    fn close(&self, replica: &'static str) -> bool {
        let mut led = self.led.lock();
        match led
            .iter_mut()
            .rev()
            .find(|l| l.0 == replica && l.2.is_none())
        {
            Some(open) => {
                open.2 = Some(Instant::now());
                true
            }
            None => false,
        }
    }

    /// `replica` is paused: a stopped process acts on nothing, so its interval (if it leads)
    /// is cut here and reopened by [`Log::resumed`] if it was leading.
    pub fn paused(&self, replica: &'static str) -> bool {
        self.note(replica, "paused");
        self.close(replica)
    }

    /// `replica` resumes; its interval reopens if it was leading when paused.
    pub fn resumed(&self, replica: &'static str, was_leading: bool) {
        self.note(replica, "resumed");
        if was_leading {
            self.led.lock().push((replica, Instant::now(), None));
        }
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().clone()
    }

    /// The milliseconds at which `replica` first did `what`.
    pub fn at(&self, replica: &str, what: &str) -> Option<u64> {
        let events = self.events.lock();
        events
            .iter()
            .find(|e| e.replica == replica && e.what == what)
            .map(|e| e.at_ms)
    }

    /// The detector (I1): the time during which two replicas both led, over the run so far
    /// (an interval still open ends now).
    pub fn overlap(&self) -> Duration {
        overlap(&self.led.lock())
    }
}

/// The time during which two different replicas' leading intervals (`(replica, from, to)`,
/// an open one ending now) overlap, summed over every pair.
pub(crate) fn overlap(led: &[(&'static str, Instant, Option<Instant>)]) -> Duration {
    let now = Instant::now();
    let mut total = Duration::ZERO;
    for (i, (r1, s1, e1)) in led.iter().enumerate() {
        for (r2, s2, e2) in &led[i + 1..] {
            if r1 != r2 {
                let to = e1.unwrap_or(now).min(e2.unwrap_or(now));
                total += to.saturating_duration_since((*s1).max(*s2));
            }
        }
    }
    total
}

/// The detector as an assertion on a run's [`Log::overlap`]: panics, naming the overlap, if
/// two replicas ever led at once.
pub fn assert_one_leader(overlap_ms: u64) {
    let overlap = Duration::from_millis(overlap_ms);
    assert!(
        overlap.is_zero(),
        "two replicas acted as leader at once for {overlap:?}"
    );
}

/// The status record's world and cluster, shared by the replicas.
pub struct World {
    /// The cluster.
    pub cluster: Cluster,
    /// The widgets.
    pub api: Api<Widget>,
    /// The world's log of launch notices.
    pub actions: Arc<Actions>,
    /// The run's events.
    pub log: Arc<Log>,
}

impl World {
    /// A fresh cluster holding the widget, switched off.
    pub async fn new() -> World {
        let (cluster, api, mut w) =
            crate::lab::rig::fresh_widget(crate::lab::designs::status_record::OBJECT).await;
        w.metadata.annotations = Some(
            [(
                crate::lab::designs::status_record::ENABLED.to_owned(),
                "false".to_owned(),
            )]
            .into(),
        );
        api.create(&PostParams::default(), &w)
            .await
            .expect("creating the widget");
        World {
            cluster,
            api,
            actions: Arc::new(Actions::default()),
            log: Log::new(),
        }
    }

    /// The status record controller a leading replica runs, on this world's log of actions.
    pub fn wired(&self) -> Wired {
        Wired {
            start: start_record,
            actions: self.actions.clone(),
            counts: Arc::new(RecordCounts::default()),
        }
    }

    /// Switches the widget on (or off) and waits a few seconds for every replica to act.
    pub async fn switch(&self, on: bool) {
        set_annotation(&self.api, on).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// `n` replicas of the status record with no election: each runs its own controller process; switched on
/// once. Returns the launch notices sent.
pub fn without_election(n: usize) -> u64 {
    crate::lab::rig::paused(async {
        let world = World::new().await;
        let wired = world.wired();
        let replicas: Vec<_> = (0..n).map(|_| Process::start(&wired, &world.api)).collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        world.switch(true).await;
        for r in replicas {
            r.kill();
        }
        world.actions.count()
    })
}

/// One replica: an elector on the Lease whose leading work is a controller process.
pub struct Replica {
    /// Its identity.
    pub name: &'static str,
    /// Its elector.
    pub elector: Arc<LeaderElector<LeaseLock>>,
    /// Completes `run`'s stop future: a graceful stop.
    pub stop: CancellationToken,
    /// Kills the replica where it stands: elector and leading work, no release.
    pub crash: CancellationToken,
    /// Stops and resumes it as a whole.
    pub pause: Arc<Pause>,
}

/// Starts a replica `name` on `world`'s Lease, with `config`.
// book: ch15_replica
pub fn replica(world: &World, name: &'static str, config: LeaderElectionConfig) -> Replica {
    let (pause, crash) = (Arc::new(Pause::default()), CancellationToken::new());
    let lock = LeaseLock::new(world.cluster.in_process_client(), NAMESPACE, LEASE, name);
    let (api, log, wired) = (
        world.api.clone(),
        world.log.clone(),
        Arc::new(world.wired()),
    );
    let (p, c) = (pause.clone(), crash.clone());
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            let (api, log, wired, c) = (api.clone(), log.clone(), wired.clone(), c.clone());
            p.wrap(async move {
                log.began(name);
                let process = Process::start(&*wired, &api); // this replica's controllers
                tokio::select! {
                    () = leading.cancelled() => {} // the elector gave up: stop acting
                    () = c.cancelled() => {}       // the replica crashed
                }
                process.kill(); // controller-runtime's manager exits the process here
                log.ended(name);
            })
        },
        || {},
    );
    let elector = Arc::new(LeaderElector::new(config, lock, callbacks).expect("a valid config"));
    let (e, stop) = (elector.clone(), CancellationToken::new());
    let (s, c) = (stop.clone(), crash.clone());
    tokio::spawn(pause.wrap(async move {
        tokio::select! {
            () = e.run(async move { s.cancelled().await }) => {}
            () = c.cancelled() => {} // killed: no release, no more renewals
        }
    }));
    Replica {
        name,
        elector,
        stop,
        crash,
        pause,
    }
}
// book: end ch15_replica

/// What a run with election did.
#[derive(Debug, Clone, Serialize)]
pub struct ElectionRun {
    /// How replica `a` stopped.
    pub a_stops: &'static str,
    /// Switch-ons, and the launch notices sent.
    pub switch_ons: u64,
    /// Launch notices.
    pub actions: u64,
    /// Milliseconds from `a` stopping to `b` leading.
    pub takeover_ms: u64,
    /// The time two replicas led at once (the detector), in milliseconds.
    pub overlap_ms: u64,
    /// The run's events.
    pub events: Vec<Event>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Two replicas with election: `a` leads, the widget is switched on; at 20 s `a` crashes (or,
/// with `graceful`, stops with `release_on_cancel`); `b` takes over; the widget is switched
/// off and on again.
pub fn with_election(graceful: bool) -> ElectionRun {
    crate::lab::rig::paused(async {
        let world = World::new().await;
        let config = LeaderElectionConfig {
            release_on_cancel: graceful,
            ..LeaderElectionConfig::default()
        };
        let a = replica(&world, "a", config.clone());
        tokio::time::sleep(Duration::from_millis(1)).await;
        let b = replica(&world, "b", config);
        tokio::time::sleep(Duration::from_secs(5)).await;
        world.switch(true).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let stopped = Instant::now();
        if graceful {
            a.stop.cancel();
            world
                .log
                .note("a", "stopped gracefully (releases the lease)");
        } else {
            a.crash.cancel();
            world.log.note("a", "crashed (no release)");
        }
        within(Duration::from_secs(60), "b taking over the lease", async {
            while !b.elector.is_leader() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        let b_leads = world
            .log
            .at("b", "starts leading: controller process started");
        let takeover = b_leads.unwrap_or_default() - ms(stopped - world.log.start);
        tokio::time::sleep(Duration::from_secs(1)).await;
        world.switch(false).await;
        world.switch(true).await;
        let overlap = world.log.overlap();
        world.log.note("b", "run ends: replicas killed");
        b.crash.cancel();
        tokio::time::sleep(Duration::from_millis(1)).await;
        ElectionRun {
            a_stops: if graceful { "gracefully" } else { "by a crash" },
            switch_ons: 2,
            actions: world.actions.count(),
            takeover_ms: takeover,
            overlap_ms: ms(overlap),
            events: world.log.events(),
        }
    })
}

/// What the pause run did.
#[derive(Debug, Clone, Serialize)]
pub struct PauseRun {
    /// How long `a` was paused, in seconds.
    pub paused_s: u64,
    /// Milliseconds from `a`'s resumption to its leading work stopping (`None`: it never
    /// stopped).
    pub a_leads_after_resume_ms: Option<u64>,
    /// The time both replicas led (the detector), in milliseconds.
    pub overlap_ms: u64,
    /// The renew deadline, in milliseconds.
    pub renew_deadline_ms: u64,
    /// Launch notices, for one switch-on made just after `a` resumed.
    pub actions: u64,
    /// The run's events.
    pub events: Vec<Event>,
}

/// Two replicas with election; the leader `a` is paused for `paused` (from 10 s), and the
/// widget is switched on just after it resumes.
pub fn pause_leader(paused: Duration) -> PauseRun {
    crate::lab::rig::paused(async move {
        let world = World::new().await;
        let config = LeaderElectionConfig::default();
        let renew_deadline = config.renew_deadline;
        let a = replica(&world, "a", config.clone());
        tokio::time::sleep(Duration::from_millis(1)).await;
        let b = replica(&world, "b", config);
        tokio::time::sleep(Duration::from_secs(10)).await;
        // book: ch15_pause
        a.pause.pause(); // a stops where it stands: no renewals, no timers
        let was_leading = world.log.paused("a");
        tokio::time::sleep(paused).await; // b reads an unchanged lease all this time
        a.pause.resume(); // a's renew timer fires at once; it still thinks it leads
        world.log.resumed("a", was_leading);
        let resumed = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        world.switch(true).await; // a switch-on, while both may be acting
        tokio::time::sleep(renew_deadline * 2).await;
        // book: end ch15_pause
        let stopped = world
            .log
            .events()
            .into_iter()
            .rev()
            .find(|e| e.replica == "a" && e.what == "stops leading: controller process killed");
        let resumed_ms = ms(resumed - world.log.start);
        let overlap = world.log.overlap();
        world.log.note("a", "run ends: replicas killed");
        for r in [&a, &b] {
            r.crash.cancel();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        PauseRun {
            paused_s: paused.as_secs(),
            a_leads_after_resume_ms: stopped.map(|e| e.at_ms - resumed_ms),
            overlap_ms: ms(overlap),
            renew_deadline_ms: ms(renew_deadline),
            actions: world.actions.count(),
            events: world.log.events(),
        }
    })
}

/// Chapter 15's replicas without election: one replica acts once, two act twice.
pub fn ch15_without_election() {
    let rows: Vec<(usize, u64)> = [1, 2]
        .into_iter()
        .map(|n| (n, without_election(n)))
        .collect();
    assert_eq!(
        rows,
        [(1, 1), (2, 2)],
        "one switch-on: one notice per replica"
    );
    let text: String = rows
        .iter()
        .map(|(n, a)| format!("{n} replica(s), no election, 1 switch-on: {a} launch notice(s)\n"))
        .collect();
    crate::kit::snap::text("ch15_without_election", text);
}

/// Chapter 15's runs with election: a crash and a graceful stop; one leader at a time, one
/// notice per switch-on.
pub fn ch15_with_election() {
    for (graceful, name) in [(false, "ch15_crash"), (true, "ch15_graceful")] {
        let run = with_election(graceful);
        assert_eq!(run.actions, run.switch_ons, "one notice per switch-on");
        assert_one_leader(run.overlap_ms);
        crate::kit::snap::yaml(name, &run, vec![]);
    }
}

/// Chapter 15's pause: a leader paused past its lease keeps acting for the renew deadline
/// after it resumes, while the other replica leads; a shorter pause leaves one leader.
pub fn ch15_no_fencing() {
    let long = pause_leader(Duration::from_secs(30));
    assert_eq!(long.a_leads_after_resume_ms, Some(long.renew_deadline_ms));
    assert_eq!(long.overlap_ms, long.renew_deadline_ms);
    assert_eq!(long.actions, 2, "both leaders sent the notice");
    crate::kit::snap::yaml("ch15_no_fencing", &long, vec![]);
    let short = pause_leader(Duration::from_secs(5));
    assert_eq!(short.a_leads_after_resume_ms, None, "a renewed in time");
    assert_eq!(short.overlap_ms, 0);
    assert_eq!(short.actions, 1);
    crate::kit::snap::yaml("ch15_short_pause", &short, vec![]);
}
