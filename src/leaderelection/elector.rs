//! The elector's async shell (kubernetes/client-go v0.37.2 `tools/leaderelection/leaderelection.go`):
//! the acquire loop, the renew loop, the release, and the callbacks; v0.38.0-beta.0's renew
//! loop under `Recovery` is in `recovery`. Every decision is made by the core in `state`; this
//! file only makes requests and waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;
use rand::{RngExt, SeedableRng, rngs::StdRng};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::lock::ResourceLock;
use super::record::LeaderElectionRecord;
use super::state::{Decision, Observed, Renewal};
use super::write_gate::Gate;
use tower_service::Service;

/// The acquire loop's jitter: each wait is `retry_period × (1 + r × 1.2)`, `r` in `[0, 1)`
/// (`JitterFactor`).
pub const JITTER_FACTOR: f64 = 1.2;

/// Why an elector could not be built, or why [`LeaderElector::check`] reports it unhealthy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderElectionError {
    /// `lease_duration` is not above `renew_deadline`.
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseNotAboveRenewDeadline,
    /// `renew_deadline` is not above `retry_period × JITTER_FACTOR`.
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    RenewDeadlineNotAboveJitteredRetry,
    /// One of the three durations is zero (its name, as upstream spells it).
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
    /// The lock's identity is empty.
    #[error("Lock identity is empty")]
    EmptyIdentity,
    /// [`LeaderElector::check`]: the leader has not renewed for longer than its lease and the
    /// tolerance; it should have stopped leading.
    #[error("failed election to renew leadership on lease {0}")]
    NotRenewed(String),
    /// A write through [`LeaderElector::write_gate`] while this elector did not lead, or in
    /// flight when it stopped leading (upstream's `ErrWriteGateClosed`). A `kube::Client`
    /// returns it inside `kube::Error::Service`.
    #[error("not leading: the write gate refuses writes")]
    WriteGateClosed,
    /// [`LeaderElectionConfig::recovery`]'s deadline is under one second.
    #[error("recoveryDeadline must be at least one second")]
    RecoveryDeadlineTooShort,
    /// [`LeaderElectionConfig::recovery`] with `coordinated`, which upstream refuses.
    #[error("recovery is not supported with coordinated leader election")]
    RecoveryWithCoordinated,
    /// [`LeaderElectionConfig::recovery`] at a `client_go_minor` before 38, which has no
    /// `Recovery` (this port's check; upstream's v0.37 config has no such field).
    #[error("recovery needs client-go 1.38 (client_go_minor 38)")]
    RecoveryBefore38,
    /// [`LeaderElector::check`] under `Recovery`: the leader has made no attempt to renew for
    /// longer than its lease and the tolerance; its election loop has stopped.
    #[error("stopped attempting to renew leadership on lease {0}")]
    StoppedAttempting(String),
}

/// How long a lease lasts, how long its holder keeps trying to renew it, how often everyone
/// retries (upstream's `LeaderElectionConfig`, less the lock and callbacks, which
/// [`LeaderElector::new`] takes).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElectionConfig {
    /// How long a candidate waits, on its own clock, without observing a change of the record
    /// before it takes the lease. Written into the record in whole seconds.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before it gives up leading.
    pub renew_deadline: Duration,
    /// How long every elector waits between attempts (jittered while acquiring).
    pub retry_period: Duration,
    /// Release the lease (empty holder, one second) when `run`'s stop future completes. Only
    /// safe if everything the lease guards has finished by then.
    pub release_on_cancel: bool,
    /// The lock's name, for logs and [`LeaderElector::check`].
    pub name: String,
    /// Coordinated leader election (alpha upstream): renew only, never acquire; the API
    /// server's election controller picks the holder.
    pub coordinated: bool,
    /// The seed of the acquire loop's jitter. `None`: a hash of the lock's identity, so that
    /// two replicas jitter differently and every run of one replica the same way.
    pub seed: Option<u64>,
    /// What this elector's wall clock reads when it is built (the times it writes into the
    /// record); `None`: the system's wall clock then. Set it to skew one replica's clock.
    pub wall_clock: Option<Timestamp>,
    /// The client-go minor whose elector this one follows: 37 (default, client-go v0.37.2)
    /// or 38 (v0.38.0-beta.0), chosen as the informer's is ([`FeatureGates::at_minor`]).
    /// From 38, a release also checks the holder it has just read, and leaves a Lease that
    /// another elector holds (on 37 it checks only the record it last observed, so after an
    /// outage it can empty the new holder's Lease). v0.38's write gate is
    /// [`LeaderElector::write_gate`], on every minor; its `Recovery` is `recovery`, from 38.
    ///
    /// [`FeatureGates::at_minor`]: crate::features::FeatureGates::at_minor
    pub client_go_minor: u32,
    /// `Recovery` (client-go v0.38.0-beta.0, alpha): what a leader does when a renewal has
    /// failed for `renew_deadline`. `None` (default): its run ends, as on every release.
    /// `Some(deadline)`: it closes its write gate and calls `on_stopped_leading`, but its run
    /// goes on, renewing at every retry period the lease it held (never acquiring it again),
    /// and it leads again, gate open, if a renewal succeeds; the run ends when it sees another
    /// holder or no Lease, or when `deadline` (`Some`, at least one second) has passed since
    /// the recovery began. The leading token is cancelled only when the run ends. Needs
    /// `client_go_minor` 38 and not `coordinated`.
    pub recovery: Option<Option<Duration>>,
}

impl Default for LeaderElectionConfig {
    /// The core clients' defaults, which controller-runtime's manager uses too: a 15 s lease,
    /// a 10 s renew deadline, a 2 s retry period.
    fn default() -> Self {
        LeaderElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
            name: String::new(),
            coordinated: false,
            seed: None,
            wall_clock: None,
            client_go_minor: 37,
            recovery: None,
        }
    }
}

type Started =
    Arc<dyn Fn(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// `on_new_leader`: called with the holder's identity.
type NewLeader = Arc<dyn Fn(&str) + Send + Sync>;

/// What the elector calls as its leadership begins and ends (upstream's `LeaderCallbacks`).
#[derive(Clone)]
pub struct LeaderCallbacks {
    on_started_leading: Started,
    on_stopped_leading: Arc<dyn Fn() + Send + Sync>,
    on_new_leader: Option<NewLeader>,
}

impl std::fmt::Debug for LeaderCallbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderCallbacks")
            .field("on_new_leader", &self.on_new_leader.is_some())
            .finish_non_exhaustive()
    }
}

impl LeaderCallbacks {
    /// `on_started_leading` runs in a task of its own once the lease is acquired; its token
    /// is cancelled when the run ends, before `on_stopped_leading` is called.
    /// `on_stopped_leading` is called once when `run` ends, whether or not it ever led; under
    /// [`LeaderElectionConfig::recovery`], each time the elector stops leading instead, and
    /// not again when the run ends if it already was for the loss that ended it.
    pub fn new<F, Fut>(
        on_started_leading: F,
        on_stopped_leading: impl Fn() + Send + Sync + 'static,
    ) -> Self
    where
        F: Fn(CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        LeaderCallbacks {
            on_started_leading: Arc::new(move |token| Box::pin(on_started_leading(token))),
            on_stopped_leading: Arc::new(on_stopped_leading),
            on_new_leader: None,
        }
    }

    /// Called with the holder's identity whenever the elector observes a holder other than
    /// the one it last reported (the first one included; an empty one after a release).
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_new_leader = Some(Arc::new(f));
        self
    }
}

/// A wall clock that reads `start` when built and moves with tokio's clock after that.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    wall: Timestamp,
    mono: Instant,
}

impl Clock {
    pub(super) fn now(&self) -> (Instant, Timestamp) {
        let now = Instant::now();
        let elapsed = SignedDuration::try_from(now - self.mono).unwrap_or(SignedDuration::ZERO);
        (now, self.wall.checked_add(elapsed).unwrap_or(self.wall))
    }
}

/// One candidate for a lease (upstream's `LeaderElector`): [`LeaderElector::run`] acquires
/// the lease, calls the callbacks, renews it until it cannot, and returns.
pub struct LeaderElector<L: ResourceLock> {
    pub(super) config: LeaderElectionConfig,
    pub(super) lock: L,
    callbacks: LeaderCallbacks,
    pub(super) observed: Mutex<Observed>,
    rng: Mutex<StdRng>,
    pub(super) clock: Clock,
    /// Open while this elector leads ([`LeaderElector::write_gate`]).
    pub(super) gate: Gate,
    /// `on_stopped_leading` was called for the current loss of leadership
    /// (`stoppedLeadingNotified`): `run` does not call it again as it ends (keeps I4). Only
    /// the task running `run` touches it; an atomic because `run` takes `&self`.
    stopped_notified: AtomicBool,
}

impl<L: ResourceLock> std::fmt::Debug for LeaderElector<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lock", &self.lock.describe())
            .field("identity", &self.lock.identity())
            .field("leader", &self.get_leader())
            .finish()
    }
}

/// FNV-1a: a stable seed from an identity.
fn seed_of(identity: &str) -> u64 {
    identity.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

impl<L: ResourceLock> LeaderElector<L> {
    /// An elector for `lock` (`NewLeaderElector`): the config is checked as upstream checks it.
    /// Call it inside a tokio runtime (its clock starts now).
    pub fn new(
        config: LeaderElectionConfig,
        lock: L,
        callbacks: LeaderCallbacks,
    ) -> Result<Self, LeaderElectionError> {
        if config.lease_duration <= config.renew_deadline {
            return Err(LeaderElectionError::LeaseNotAboveRenewDeadline);
        }
        if config.renew_deadline <= config.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(LeaderElectionError::RenewDeadlineNotAboveJitteredRetry);
        }
        for (name, d) in [
            ("leaseDuration", config.lease_duration),
            ("renewDeadline", config.renew_deadline),
            ("retryPeriod", config.retry_period),
        ] {
            if d.is_zero() {
                return Err(LeaderElectionError::Zero(name));
            }
        }
        if let Some(deadline) = config.recovery {
            if deadline.is_some_and(|d| d < Duration::from_secs(1)) {
                return Err(LeaderElectionError::RecoveryDeadlineTooShort);
            }
            if config.coordinated {
                return Err(LeaderElectionError::RecoveryWithCoordinated);
            }
            if config.client_go_minor < 38 {
                return Err(LeaderElectionError::RecoveryBefore38);
            }
        }
        if lock.identity().is_empty() {
            return Err(LeaderElectionError::EmptyIdentity);
        }
        let seed = config.seed.unwrap_or_else(|| seed_of(lock.identity()));
        let clock = Clock {
            wall: config.wall_clock.unwrap_or_else(Timestamp::now),
            mono: Instant::now(),
        };
        Ok(LeaderElector {
            observed: Mutex::new(Observed::new(
                lock.identity().to_owned(),
                config.lease_duration,
            )),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            clock,
            config,
            lock,
            callbacks,
            gate: Gate::default(),
            stopped_notified: AtomicBool::new(false),
        })
    }

    /// The lock.
    pub fn lock(&self) -> &L {
        &self.lock
    }

    /// The holder this elector last observed (empty before its first observation).
    pub fn get_leader(&self) -> String {
        self.observed.lock().record().holder_identity.clone()
    }

    /// Whether the holder this elector last observed is itself.
    pub fn is_leader(&self) -> bool {
        self.observed.lock().is_leader()
    }

    /// The record this elector last observed or wrote, and when (on tokio's clock; `None`:
    /// never).
    pub fn observed(&self) -> (LeaderElectionRecord, Option<Instant>) {
        let o = self.observed.lock();
        (o.record().clone(), o.at())
    }

    /// Sets what the elector has observed, as if it had read `record` at `at` (`None`: never):
    /// to resume from an earlier observation, or to start a test from a given state.
    pub fn observe(&self, record: LeaderElectionRecord, at: Option<Instant>) {
        self.observed.lock().set_with_raw(record, at);
    }

    /// `WriteGate` (client-go v0.38.0-beta.0): `inner`, the service under a `kube::Client`,
    /// with every request but a read (GET, HEAD, OPTIONS, TRACE) refused with
    /// [`LeaderElectionError::WriteGateClosed`] while this elector does not lead, and a write
    /// still in flight when it stops leading abandoned with that error. The gate opens when the
    /// lease is acquired and closes when [`LeaderElector::run`] ends its leadership (after the
    /// release, before the leading token is cancelled). Under
    /// [`LeaderElectionConfig::recovery`] it closes as soon as a renewal has failed for
    /// `renew_deadline` or the lease is seen to have changed hands, before any release, while
    /// the run goes on, and opens again if the lease is recovered. The lock's own client must
    /// not be gated (or a recovering elector could not renew).
    ///
    /// ```
    /// # use controlloop::apiserver::{Cluster, ServerOptions};
    /// # use controlloop::leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
    /// #     .build().unwrap().block_on(async {
    /// let cluster = Cluster::new(ServerOptions::default());
    /// let lock = LeaseLock::new(cluster.in_process_client(), "default", "my-controller", "a");
    /// let callbacks = LeaderCallbacks::new(|token| async move { token.cancelled().await }, || {});
    /// let elector = LeaderElector::new(LeaderElectionConfig::default(), lock, callbacks).unwrap();
    /// // The controllers' client: its writes pass only while `elector` leads.
    /// let client = kube::Client::new(elector.write_gate(cluster.router()), "default");
    /// # let _ = client;
    /// # });
    /// ```
    pub fn write_gate<S, B>(
        &self,
        inner: S,
    ) -> impl Service<
        http::Request<B>,
        Response = S::Response,
        Error = Box<dyn std::error::Error + Send + Sync>,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
    where
        S: Service<http::Request<B>> + Clone + Send + 'static,
        S::Response: 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        S::Future: Send + 'static,
    {
        self.gate
            .wrap(inner, || LeaderElectionError::WriteGateClosed.into())
    }

    /// `Check`, for a health probe: an error when this elector thinks it leads but has not
    /// observed its own record for longer than the lease duration plus `tolerance` (it should
    /// have stopped leading by then; something is stuck). Under
    /// [`LeaderElectionConfig::recovery`], where a leader stays alive on purpose while it
    /// cannot observe the lease, only when it has made no attempt for that long.
    pub fn check(&self, tolerance: Duration) -> Result<(), LeaderElectionError> {
        let recovering = self.config.recovery.is_some();
        if !self
            .observed
            .lock()
            .unhealthy(recovering, Instant::now(), tolerance)
        {
            return Ok(());
        }
        let name = self.config.name.clone();
        Err(if recovering {
            LeaderElectionError::StoppedAttempting(name)
        } else {
            LeaderElectionError::NotRenewed(name)
        })
    }

    /// Runs the election until `stop` completes or leadership is lost (`Run`): acquire (with
    /// jitter), then `on_started_leading` in its own task, then renew until a renewal fails for
    /// `renew_deadline` or `stop` completes, then release if `release_on_cancel`, then cancel
    /// the leading token and call `on_stopped_leading` (keeps I4). Under
    /// [`LeaderElectionConfig::recovery`], a failed renewal does not end the run: see there.
    pub async fn run(&self, stop: impl Future<Output = ()>) {
        // An elector may run more than once; each run reports its own loss.
        self.stopped_notified.store(false, Ordering::SeqCst);
        let ctx = CancellationToken::new();
        let election = self.elect(&ctx);
        tokio::pin!(election, stop);
        let mut stopped = false;
        loop {
            tokio::select! {
                biased;
                () = &mut election => break,
                () = &mut stop, if !stopped => {
                    stopped = true;
                    ctx.cancel();
                }
            }
        }
        self.notify_stopped_leading();
    }

    /// Calls `on_stopped_leading` unless it was called since this elector last began leading
    /// (`notifyStoppedLeading`).
    pub(super) fn notify_stopped_leading(&self) {
        if !self.stopped_notified.swap(true, Ordering::SeqCst) {
            (self.callbacks.on_stopped_leading)();
        }
    }

    /// A recovered lease: the next loss is reported again.
    pub(super) fn leading_again(&self) {
        self.stopped_notified.store(false, Ordering::SeqCst);
    }

    async fn elect(&self, ctx: &CancellationToken) {
        if !self.acquire(ctx).await {
            return; // stopped before acquiring
        }
        let leading = ctx.child_token();
        tokio::spawn((self.callbacks.on_started_leading)(leading.clone()));
        if self.config.recovery.is_some() {
            self.renew_with_recovery(ctx).await;
        } else {
            self.renew(ctx).await;
        }
        self.gate.close(); // writes stop with the run, after any release (write gate I1)
        leading.cancel();
    }

    fn jittered(&self) -> Duration {
        let r: f64 = self.rng.lock().random();
        crate::wait::jitter(self.config.retry_period, JITTER_FACTOR, r)
    }

    async fn attempt(&self) -> bool {
        if self.config.coordinated {
            self.try_coordinated_renew().await
        } else {
            self.try_acquire_or_renew().await
        }
    }

    /// The acquire loop (`acquire`: `JitterUntil` with the retry period and
    /// [`JITTER_FACTOR`], sliding): attempts until one succeeds (true) or `ctx` is cancelled
    /// (false). Attempts have no deadline of their own.
    async fn acquire(&self, ctx: &CancellationToken) -> bool {
        tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "attempting to acquire leader lease");
        loop {
            if ctx.is_cancelled() {
                return false;
            }
            let succeeded = tokio::select! {
                biased;
                () = ctx.cancelled() => false,
                ok = self.attempt() => ok,
            };
            self.maybe_report_transition();
            if succeeded {
                self.lock.record_event("became leader");
                self.gate.open(); // write gate I1
                tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "successfully acquired lease");
                return true;
            }
            let wait = self.jittered();
            tokio::select! {
                biased;
                () = ctx.cancelled() => return false,
                () = sleep(wait) => {}
            }
        }
    }

    /// The renew loop (`renew`: `Until` the retry period, sliding, around a poll that retries
    /// every retry period until `renew_deadline`): returns when a poll gives up or `ctx` is
    /// cancelled, after the release if `release_on_cancel`.
    async fn renew(&self, ctx: &CancellationToken) {
        let renewing = ctx.child_token();
        loop {
            if renewing.is_cancelled() {
                break;
            }
            let renewed = self.poll_renew(&renewing, false).await == Renewal::Renewed;
            self.maybe_report_transition();
            if !renewed {
                tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "failed to renew lease");
                renewing.cancel();
                break;
            }
            tokio::select! {
                biased;
                () = renewing.cancelled() => break,
                () = sleep(self.config.retry_period) => {}
            }
        }
        if self.config.release_on_cancel {
            self.release().await;
        }
        self.lock.record_event("stopped leading");
    }

    /// One poll of the renew loop (`PollUntilContextTimeout`, immediate, not sliding): an
    /// attempt now, then one every retry period after the previous one began, until one
    /// succeeds (`Renewed`) or `renew_deadline` passes or `ctx` is cancelled (`Failed`). An
    /// attempt in flight at the deadline is dropped with its request; one due at the deadline
    /// is not made. `recovering`: each attempt is `tryRecover`'s, and the poll ends at once
    /// when one sees the lease lost (`Lost`, v0.38's `errLeaseLost`).
    pub(super) async fn poll_renew(&self, ctx: &CancellationToken, recovering: bool) -> Renewal {
        let deadline = Instant::now() + self.config.renew_deadline;
        let mut next = Instant::now() + self.config.retry_period;
        loop {
            if ctx.is_cancelled() || Instant::now() >= deadline {
                return Renewal::Failed;
            }
            let attempt = async {
                if recovering {
                    self.try_recover().await
                } else if self.attempt().await {
                    Renewal::Renewed
                } else {
                    Renewal::Failed
                }
            };
            let outcome = tokio::select! {
                biased;
                () = ctx.cancelled() => Renewal::Failed,
                () = sleep_until(deadline) => Renewal::Failed,
                outcome = attempt => outcome,
            };
            if outcome != Renewal::Failed {
                return outcome;
            }
            tokio::select! {
                biased;
                () = ctx.cancelled() => return Renewal::Failed,
                () = sleep_until(deadline) => return Renewal::Failed,
                () = sleep_until(next) => {}
            }
            next = Instant::now() + self.config.retry_period;
        }
    }

    /// One attempt to acquire or renew (`tryAcquireOrRenew`): the fast path for a leader
    /// whose lease is valid (an update without a read), else a read, then create, respect
    /// another holder, or write. True when this elector holds the lease after it. The acquire
    /// and renew loops call it every retry period; it is public to drive an elector step by
    /// step.
    pub async fn try_acquire_or_renew(&self) -> bool {
        let (now, wall) = self.clock.now();
        self.observed.lock().record_attempt(now);
        let desired = self.observed.lock().candidate(wall);
        // 1. The fast path: assume the record observed last is the current one.
        let fast = self.observed.lock().fast_path(now, wall);
        if let Some(record) = fast {
            match self.lock.update(record.clone()).await {
                Ok(()) => {
                    self.observed.lock().set(record, Instant::now());
                    return true;
                }
                Err(e) => {
                    tracing::debug!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "failed to update lease optimistically, falling back to slow path");
                }
            }
        }
        // 2. Read the record, or create it.
        let (old, raw) = match self.lock.get().await {
            Ok(read) => read,
            Err(e) if e.is_not_found() => {
                if let Err(e) = self.lock.create(desired.clone()).await {
                    tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "error initially creating lease lock");
                    return false;
                }
                self.observed.lock().set(desired, Instant::now());
                return true;
            }
            Err(e) => {
                tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "error retrieving lease lock");
                return false;
            }
        };
        // 3. and 4. Observe it; respect a valid lease of another; else write.
        let decision = {
            let mut o = self.observed.lock();
            o.observe_read(old.clone(), raw, Instant::now());
            o.decide(&old, now, wall)
        };
        let Decision::Write { record, .. } = decision else {
            return false;
        };
        self.write(record).await
    }

    /// One attempt of coordinated leader election (`tryCoordinatedRenew`): a read, then a
    /// renewal only if this elector holds a lease that has not expired and is not marked for
    /// another holder.
    pub async fn try_coordinated_renew(&self) -> bool {
        let (now, wall) = self.clock.now();
        let (old, raw) = match self.lock.get().await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "error retrieving lease lock");
                return false;
            }
        };
        let renewal = {
            let mut o = self.observed.lock();
            o.observe_read(old.clone(), raw, Instant::now());
            o.decide_coordinated(&old, now, wall)
        };
        match renewal {
            Some(record) => self.write(record).await,
            None => false,
        }
    }

    pub(super) async fn write(&self, record: LeaderElectionRecord) -> bool {
        if let Err(e) = self.lock.update(record.clone()).await {
            tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "failed to update lease");
            return false;
        }
        self.observed.lock().set(record, Instant::now());
        true
    }

    /// Gives the lease up if this elector holds it (`release`): within `renew_deadline`, reads
    /// the record and, if it still observes itself as the holder (from client-go 1.38,
    /// [`LeaderElectionConfig::client_go_minor`], and the record read names it too), writes an
    /// empty holder with a one-second lease, retrying on a conflict (keeps I5). True when it no
    /// longer holds it.
    pub async fn release(&self) -> bool {
        tokio::time::timeout(self.config.renew_deadline, self.try_release())
            .await
            .unwrap_or(false)
    }

    async fn try_release(&self) -> bool {
        loop {
            let old = match self.lock.get().await {
                Ok((old, _)) => old,
                Err(e) => {
                    tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "could not read the lease to release it");
                    return false;
                }
            };
            if !self.is_leader() {
                return true;
            }
            if self.config.client_go_minor >= 38 && old.holder_identity != self.lock.identity() {
                return true; // v0.38: the Lease changed hands while this elector could not see
            }
            let record = self.observed.lock().released(&old, self.clock.now().1);
            match self.lock.update(record.clone()).await {
                Ok(()) => {
                    self.observed.lock().set(record, Instant::now());
                    return true;
                }
                Err(e) if e.is_conflict() => continue,
                Err(e) => {
                    tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "failed to release lease");
                    return false;
                }
            }
        }
    }

    /// Reports the observed holder to `on_new_leader` if it changed since the last report
    /// (`maybeReportTransition`). The loops call it after every attempt.
    pub fn maybe_report_transition(&self) {
        let changed = self.observed.lock().take_transition();
        if let (Some(leader), Some(f)) = (changed, &self.callbacks.on_new_leader) {
            f(&leader);
        }
    }
}
