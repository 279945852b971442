//! client-go's tests of leader election's `Recovery` mode (kubernetes/client-go v0.38.0-beta.0
//! `tools/leaderelection/leaderelection_recovery_test.go`), rewritten by hand against the port.
//! Upstream's harness runs an elector (identity `baz`, a 15 s lease, a 1 s renew deadline, a
//! 200 ms retry period) on a fake clientset whose Lease calls can be made to fail (503), to
//! find no Lease (404), to conflict on renewals (409), or to hang; here a lock of the same
//! behaviour ([`Harness`]) answers the elector directly. Upstream's real clock is tokio's
//! paused clock: every wait is virtual, and every await that could hang has a timeout naming
//! the deadlock. `TestCheckInRecoveryMode` is a unit test beside the core
//! (`src/leaderelection/state.rs`), where the attempt times it sets can be set.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controlloop::leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElectionError, LeaderElectionRecord,
    LeaderElector, LockError, ResourceLock,
};
use http::{Request, Response};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;
use tower::{ServiceExt, service_fn};

const HANG: Duration = Duration::from_secs(600);
const LEASE: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_millis(200);

async fn within<F: Future>(what: &str, f: F) -> F::Output {
    timeout(HANG, f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
}

/// Polls `done` every 20 ms (upstream's polls) until it holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    within(what, async {
        while !done() {
            sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

fn status(code: u16, reason: &str) -> LockError {
    LockError::Api(kube::Error::Api(
        kube::core::Status::failure(reason, reason)
            .with_code(code)
            .boxed(),
    ))
}

/// A POST through the elector's write gate: true when it passed.
type Probe = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// The fake Lease store (upstream's `recoveryHarness` reactors).
#[derive(Default)]
struct Store {
    lease: Option<LeaderElectionRecord>,
    failing: bool,
    creates: usize,
    failed_gets: usize,
    /// Renewals (any update but a release's one-second lease) answer 409.
    fail_renew_updates: bool,
    /// Whether a gated write passed at the moment the lease was released.
    release_saw_gate_open: bool,
    /// The next update hangs until it is dropped (a request to an unresponsive server).
    hang_next_update: bool,
}

struct Harness {
    store: Mutex<Store>,
    events: Mutex<Vec<String>>,
    update_hanging: Notify,
    probe: Mutex<Option<Probe>>,
}

impl Harness {
    fn new() -> Arc<Harness> {
        Arc::new(Harness {
            store: Mutex::default(),
            events: Mutex::default(),
            update_hanging: Notify::new(),
            probe: Mutex::default(),
        })
    }
}

/// The harness's lock, as the elector holds it.
#[derive(Clone)]
struct Lock(Arc<Harness>);

impl ResourceLock for Lock {
    async fn get(&self) -> Result<(LeaderElectionRecord, Vec<u8>), LockError> {
        let mut s = self.0.store.lock();
        if s.failing {
            s.failed_gets += 1;
            return Err(status(503, "ServiceUnavailable"));
        }
        let record = s.lease.clone().ok_or_else(|| status(404, "NotFound"))?;
        let raw = record.raw();
        Ok((record, raw))
    }
    async fn create(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        let mut s = self.0.store.lock();
        if s.failing {
            return Err(status(503, "ServiceUnavailable"));
        }
        s.creates += 1;
        s.lease = Some(record);
        Ok(())
    }
    async fn update(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        let hang = std::mem::take(&mut self.0.store.lock().hang_next_update);
        if hang {
            self.0.update_hanging.notify_one();
            std::future::pending::<()>().await; // until the elector drops the request
        }
        {
            let s = self.0.store.lock();
            if s.failing {
                return Err(status(503, "ServiceUnavailable"));
            }
            if s.lease.is_none() {
                return Err(status(404, "NotFound"));
            }
        }
        let release = record.lease_duration_seconds == 1;
        if release {
            let probe = self.0.probe.lock().clone().expect("the gate's probe");
            let open = probe().await;
            self.0.store.lock().release_saw_gate_open = open;
        }
        let mut s = self.0.store.lock();
        if s.fail_renew_updates && !release {
            return Err(status(409, "Conflict"));
        }
        s.lease = Some(record);
        Ok(())
    }
    fn record_event(&self, event: &str) {
        let event = format!("Normal LeaderElection baz {event}");
        self.0.events.lock().push(event);
    }
    fn identity(&self) -> &str {
        "baz"
    }
    fn describe(&self) -> String {
        "foo/bar".into()
    }
}

/// An elector running on the harness's lock, leading (upstream's `newRecoveryHarness`).
struct Running {
    h: Arc<Harness>,
    stop: CancellationToken,
    run: JoinHandle<()>,
    started: Arc<Mutex<Option<CancellationToken>>>,
    stopped: Arc<AtomicUsize>,
    /// `on_stopped_leading` calls already expected.
    seen_stopped: usize,
    new_leaders: Arc<Mutex<Vec<String>>>,
}

fn config(recovery: Recovery, release_on_cancel: bool) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: LEASE,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY,
        release_on_cancel,
        client_go_minor: 38,
        recovery,
        ..LeaderElectionConfig::default()
    }
}

impl Running {
    async fn start(recovery: Recovery, release_on_cancel: bool) -> Running {
        let h = Harness::new();
        let started = Arc::new(Mutex::new(None));
        let stopped = Arc::new(AtomicUsize::new(0));
        let new_leaders = Arc::new(Mutex::new(Vec::new()));
        let (s, n, l) = (started.clone(), stopped.clone(), new_leaders.clone());
        let callbacks = LeaderCallbacks::new(
            move |token: CancellationToken| {
                *s.lock() = Some(token);
                async {}
            },
            move || {
                n.fetch_add(1, Ordering::SeqCst);
            },
        )
        .on_new_leader(move |who| l.lock().push(who.to_owned()));
        let config = config(recovery, release_on_cancel);
        let elector = LeaderElector::new(config, Lock(h.clone()), callbacks).unwrap();
        let elector = Arc::new(elector);
        let ok = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
        let gated = elector.write_gate(ok);
        *h.probe.lock() = Some(Arc::new(move || {
            let post = Request::post("https://localhost/").body(()).unwrap();
            let call = gated.clone().oneshot(post);
            Box::pin(async move { call.await.is_ok() })
        }));
        let stop = CancellationToken::new();
        let (e, s) = (elector.clone(), stop.clone());
        let run = tokio::spawn(async move { e.run(s.cancelled_owned()).await });
        let r = Running {
            h,
            stop,
            run,
            started,
            stopped,
            seen_stopped: 0,
            new_leaders,
        };
        until("the elector leading", || r.started.lock().is_some()).await;
        assert!(r.write().await, "a write through the gate once leading");
        r.expect_new_leader("baz");
        r
    }

    async fn write(&self) -> bool {
        let probe = self.h.probe.lock().clone().unwrap();
        probe().await
    }

    fn set_failing(&self, failing: bool) {
        self.h.store.lock().failing = failing;
    }

    fn holder(&self) -> String {
        let s = self.h.store.lock();
        s.lease.as_ref().unwrap().holder_identity.clone()
    }

    /// Waits for one more `on_stopped_leading` call.
    async fn expect_stopped_leading(&mut self) {
        let (stopped, want) = (self.stopped.clone(), self.seen_stopped + 1);
        until("on_stopped_leading being called", || {
            stopped.load(Ordering::SeqCst) >= want
        })
        .await;
        self.seen_stopped = want;
    }

    fn expect_no_stopped_leading(&self) {
        let n = self.stopped.load(Ordering::SeqCst);
        assert_eq!(
            n, self.seen_stopped,
            "on_stopped_leading called unexpectedly"
        );
    }

    fn expect_new_leader(&self, who: &str) {
        let leaders = self.new_leaders.lock();
        assert_eq!(leaders.last().map(String::as_str), Some(who), "{leaders:?}");
    }

    fn leading_cancelled(&self) -> bool {
        self.started.lock().as_ref().unwrap().is_cancelled()
    }

    fn expect_running(&self) {
        assert!(!self.run.is_finished(), "run returned unexpectedly");
        assert!(
            !self.leading_cancelled(),
            "the leading token was cancelled while the run goes on"
        );
    }

    /// Waits until the recovery loop has made one more attempt that failed on the
    /// unavailable server.
    async fn wait_for_failed_recovery_attempt(&self) {
        let before = self.h.store.lock().failed_gets;
        let h = self.h.clone();
        until("a recovery attempt on the unavailable server", || {
            h.store.lock().failed_gets > before
        })
        .await;
    }

    async fn wait_for_gate_to_open(&self) {
        within("the gate reopening", async {
            while !self.write().await {
                sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    async fn wait_for_run_to_return(&mut self) {
        within("the run returning", &mut self.run).await.unwrap();
    }

    /// Hands the lease to `who` and makes the server available again; renewals conflict from
    /// now on, as they would on a Lease whose resourceVersion moved (`giveLeaseTo`).
    fn give_lease_to(&self, who: &str) {
        let mut s = self.h.store.lock();
        let lease = s.lease.as_mut().unwrap();
        lease.holder_identity = who.into();
        s.failing = false;
        s.fail_renew_updates = true;
    }

    /// The server is available again, but every renewal conflicts (`failRenewals`).
    fn fail_renewals(&self) {
        let mut s = self.h.store.lock();
        s.failing = false;
        s.fail_renew_updates = true;
    }

    /// Deletes the lease and makes the server available again (`deleteLease`).
    fn delete_lease(&self) {
        let mut s = self.h.store.lock();
        s.lease = None;
        s.failing = false;
    }

    fn events(&self) -> Vec<String> {
        self.h.events.lock().clone()
    }
}

fn events(list: &[&str]) -> Vec<String> {
    let event = |e: &&str| format!("Normal LeaderElection baz {e}");
    list.iter().map(event).collect()
}

/// `TestRecoveryReopensGateAfterTransientFailure`: an outage closes the gate after the renew
/// deadline and calls `on_stopped_leading` while the run goes on; once the server answers,
/// the lease is renewed, the gate reopens and nothing more is reported; a second outage does
/// it again; the stop calls `on_stopped_leading` once more, cancels the leading token, closes
/// the gate; the events say so.
#[tokio::test(start_paused = true)]
async fn recovery_reopens_gate_after_transient_failure() {
    let mut r = Running::start(Some(None), false).await;
    let failing_since = Instant::now();
    r.set_failing(true);
    r.expect_stopped_leading().await;
    // Upstream allows for the renew poll that saw the first failure having begun a moment
    // before the failure (50 ms).
    let elapsed = failing_since.elapsed();
    let least = RENEW_DEADLINE - Duration::from_millis(50);
    assert!(elapsed >= least, "stopped after {elapsed:?}");
    assert!(!r.write().await, "a write while recovering");
    r.expect_running();
    r.wait_for_failed_recovery_attempt().await;

    r.set_failing(false);
    r.wait_for_gate_to_open().await;
    r.expect_running();
    r.expect_no_stopped_leading();
    assert_eq!(r.holder(), "baz", "the holder after recovery");

    // A second outage closes the gate and reports again.
    r.set_failing(true);
    r.expect_stopped_leading().await;
    assert!(!r.write().await, "a write during the second outage");
    r.wait_for_failed_recovery_attempt().await;
    r.set_failing(false);
    r.wait_for_gate_to_open().await;

    r.stop.cancel();
    r.wait_for_run_to_return().await;
    r.expect_stopped_leading().await;
    r.expect_no_stopped_leading();
    assert!(r.leading_cancelled(), "the leading token after the run");
    assert!(!r.write().await, "a write after the run");
    let want = [
        "became leader",
        "stopped leading",
        "resumed leading",
        "stopped leading",
        "resumed leading",
        "stopped leading",
    ];
    assert_eq!(r.events(), events(&want));
}

/// `LeaderElectionConfig::recovery`: `None`, or `Some` of an optional deadline.
type Recovery = Option<Option<Duration>>;

/// How a `TestRecoveryEnds` case ends the outage.
#[derive(Clone, Copy)]
enum During {
    GiveToOther,
    Delete,
    FailRenewals,
    Stop,
    /// Nothing: the deadline passes, or (without recovery) the run ends by itself.
    Nothing,
}

/// `TestRecoveryEnds`, every case: the run ends when the lease changes hands or is deleted
/// (while leading: within the renew deadline, on the first renewal that sees it), when the
/// recovery deadline passes (with `release_on_cancel`, the lease, still the elector's, is
/// released), when it is stopped, and, without recovery, at the renew deadline as before.
/// Each time `on_stopped_leading` was called once, the leading token is cancelled and the gate
/// refuses.
#[tokio::test(start_paused = true)]
async fn recovery_ends() {
    let second = Duration::from_secs(1);
    #[rustfmt::skip]
    let cases = [
        // name, recovery, during, while leading, at least, less than, release on cancel
        ("another holder takes the lease while leading", Some(None), During::GiveToOther, true, Duration::ZERO, Some(RENEW_DEADLINE), false),
        ("lease is deleted while leading", Some(None), During::Delete, true, Duration::ZERO, Some(RENEW_DEADLINE), false),
        ("another holder takes over", Some(None), During::GiveToOther, false, Duration::ZERO, None, false),
        ("lease is deleted", Some(None), During::Delete, false, Duration::ZERO, None, false),
        ("recovery deadline passes", Some(Some(second)), During::Nothing, false, second, None, false),
        ("recovery deadline passes with release on cancel", Some(Some(second)), During::FailRenewals, false, second, None, true),
        ("context is cancelled", Some(None), During::Stop, false, Duration::ZERO, None, false),
        ("recovery not configured", None, During::Nothing, false, Duration::ZERO, None, false),
    ];
    for (name, recovery, during, while_leading, at_least, less_than, release) in cases {
        let mut r = Running::start(recovery, release).await;
        if !while_leading {
            r.set_failing(true);
            if recovery.is_some() {
                // Under recovery the gate closes first and the run goes on.
                r.expect_stopped_leading().await;
                r.expect_running();
            }
        }
        let started_at = Instant::now();
        match during {
            During::GiveToOther => r.give_lease_to("other"),
            During::Delete => r.delete_lease(),
            During::FailRenewals => r.fail_renewals(),
            During::Stop => r.stop.cancel(),
            During::Nothing => {}
        }
        r.wait_for_run_to_return().await;
        if matches!(during, During::GiveToOther) {
            r.expect_new_leader("other");
        }
        if recovery.is_none() || while_leading {
            // Without recovery on_stopped_leading is called as the run ends; a loss while
            // leading calls it as the gate closes.
            r.expect_stopped_leading().await;
        }
        // Upstream's tolerance (50 ms): `started_at` is taken after a 20 ms poll saw the stop.
        let elapsed = started_at.elapsed();
        let least = at_least.saturating_sub(Duration::from_millis(50));
        assert!(elapsed >= least, "{name}: ended after {elapsed:?}");
        if let Some(limit) = less_than {
            assert!(elapsed < limit, "{name}: ended after {elapsed:?}");
        }
        // once per close, not again as the run ends
        r.expect_no_stopped_leading();
        assert!(r.leading_cancelled(), "{name}: the leading token");
        assert!(!r.write().await, "{name}: a write after the run");
        match (name, during) {
            (_, During::GiveToOther) => assert_eq!(r.holder(), "other", "{name}"),
            (_, During::Delete) => assert_eq!(r.h.store.lock().creates, 1, "{name}: re-created"),
            (_, During::FailRenewals) => assert_eq!(r.holder(), "", "{name}: not released"),
            ("recovery not configured", _) => assert_eq!(
                r.events(),
                events(&["became leader", "stopped leading"]),
                "{name}"
            ),
            _ => {}
        }
    }
}

/// `TestRunReportsStoppedLeadingOnEveryRun`: an elector run twice with its stop already done
/// returns without leading each time, and each run calls `on_stopped_leading`. Upstream's
/// context is cancelled before `Run` begins, so no attempt is made; the port's `run` polls the
/// election before its stop future, so one attempt is made, which the unavailable server
/// fails.
#[tokio::test(start_paused = true)]
async fn run_reports_stopped_leading_on_every_run() {
    for recovery in [None, Some(None)] {
        let stopped = Arc::new(AtomicUsize::new(0));
        let n = stopped.clone();
        let callbacks = LeaderCallbacks::new(
            |_| async {},
            move || {
                n.fetch_add(1, Ordering::SeqCst);
            },
        );
        let h = Harness::new();
        let config = LeaderElectionConfig {
            client_go_minor: 38,
            recovery,
            ..LeaderElectionConfig::default()
        };
        h.store.lock().failing = true;
        let elector = LeaderElector::new(config, Lock(h.clone()), callbacks).unwrap();
        for _ in 0..2 {
            within("a run whose stop is done", elector.run(async {})).await;
        }
        let calls = stopped.load(Ordering::SeqCst);
        assert_eq!(calls, 2, "recovery {recovery:?}: once per run");
        assert!(h.events.lock().is_empty(), "recovery {recovery:?}: it led");
    }
}

/// `TestReleaseOnCancel`: a stop releases the lease, between renewals or during one; under
/// recovery the gate is already closed when the release is written.
#[tokio::test(start_paused = true)]
async fn release_on_cancel() {
    let cases = [
        ("idle, without recovery", None, false),
        ("idle, with recovery", Some(None), false),
        ("during a renewal, with recovery", Some(None), true),
    ];
    for (name, recovery, in_flight) in cases {
        let mut r = Running::start(recovery, true).await;
        if in_flight {
            let hanging = r.h.update_hanging.notified();
            r.h.store.lock().hang_next_update = true;
            within("a renewal request being made", hanging).await;
        } else {
            sleep(RETRY * 2).await; // a renewal or two, then stop between two
        }
        r.stop.cancel();
        r.wait_for_run_to_return().await;
        r.expect_stopped_leading().await;
        assert_eq!(r.holder(), "", "{name}: not released");
        if recovery.is_some() {
            let open = r.h.store.lock().release_saw_gate_open;
            assert!(!open, "{name}: a gated write passed during the release");
        }
    }
}

/// `TestRecoveryConfigValidation`, and the port's own check: `Recovery` needs client-go 1.38.
#[tokio::test(start_paused = true)]
async fn recovery_config_validation() {
    let secs = Duration::from_secs;
    let too_short = Duration::from_millis(999);
    let cases = [
        ("no recovery", None, false, Ok(())),
        ("no recovery with coordinated", None, true, Ok(())),
        ("recovery without deadline", Some(None), false, Ok(())),
        (
            "recovery with minimum deadline",
            Some(Some(secs(1))),
            false,
            Ok(()),
        ),
        (
            "recovery with too short deadline",
            Some(Some(too_short)),
            false,
            Err(LeaderElectionError::RecoveryDeadlineTooShort),
        ),
        (
            "recovery with coordinated",
            Some(None),
            true,
            Err(LeaderElectionError::RecoveryWithCoordinated),
        ),
    ];
    let h = Harness::new();
    let build = |config| {
        let callbacks = LeaderCallbacks::new(|_| async {}, || {});
        LeaderElector::new(config, Lock(h.clone()), callbacks).map(|_| ())
    };
    for (name, recovery, coordinated, want) in cases {
        let config = LeaderElectionConfig {
            lease_duration: secs(15),
            renew_deadline: secs(10),
            retry_period: secs(2),
            coordinated,
            client_go_minor: 38,
            recovery,
            ..LeaderElectionConfig::default()
        };
        assert_eq!(build(config), want, "{name}");
    }
    let at_37 = LeaderElectionConfig {
        recovery: Some(None),
        ..LeaderElectionConfig::default()
    };
    assert_eq!(build(at_37), Err(LeaderElectionError::RecoveryBefore38));
}
