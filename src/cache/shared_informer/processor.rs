//! The shared processor and its listeners: how one informer fans notifications out to many
//! handlers. Follows `sharedProcessor` and `processorListener` in client-go's
//! `tools/cache/shared_informer.go`.
//!
//! ```text
//!  informer ──distribute(n, sync)──► listener 1: unbounded buffer ──► task: handler.on_*()
//!                                 └► listener 2: unbounded buffer ──► task: handler.on_*()
//!                                    (sync notifications only to listeners due for resync)
//! ```
//!
//! # Invariants
//! 1. `distribute` never waits for a handler: each listener's buffer is unbounded, so a slow
//!    handler delays only itself (its backlog grows in memory instead).
//! 2. A listener receives its notifications in distribution order.
//! 3. A sync notification (same resourceVersion) reaches only listeners whose `syncing` flag
//!    is set. The flag starts true, and only [`SharedProcessor::should_resync`] recomputes it.
//! 4. A handler's `has_synced` is true only once the informer has synced *and* every
//!    initial-list add queued to it has been delivered. An initial add whose handler panicked
//!    was not delivered, so it never counts (as upstream, whose `Finished` follows `OnAdd`).
//! 5. A handler panic is never silent: it is logged and counted, then handled by the
//!    [`HandlerPanic`] policy. Under `Crash` the first panic is kept in [`CrashState`] for the
//!    informer's `run` to re-raise, and every registration can see it.
//!
//! # Concurrency
//! One `parking_lot::Mutex` guards the listener list and the resync schedule; it is never held
//! across an `.await` (distribution only pushes into unbounded channels). Each listener's
//! handler runs on its own tokio task, each call inside `catch_unwind` (upstream's
//! `HandleCrashWithLogger` around each notification).
//!
//! # Differences from upstream
//! - The buffer is a tokio unbounded channel instead of `RingGrowing` plus two goroutines.
//! - `HandlerPanic::Crash` (upstream's default, `utilruntime.ReallyCrash = true`) does not end
//!   the process: the listener stops, the informer stops, and its `run` re-raises the panic
//!   (`std::panic::resume_unwind`) to whoever awaits it. Registrations report the crash, so a
//!   controller waiting on one stops instead of waiting for a sync that cannot come.

use std::{
    any::Any,
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::Notify, sync::mpsc, task::AbortHandle, time::Instant};

use super::handler::{DeletedObject, ResourceEventHandler};
use crate::klog;

/// Upstream's `minimumResyncPeriod`.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// How long a listener waits before its next notification after a handler panicked under
/// [`HandlerPanic::LogAndContinue`] (upstream's `sleepAfterCrash`, one second).
pub const SLEEP_AFTER_HANDLER_PANIC: Duration = Duration::from_secs(1);

/// What happens when an event handler panics (upstream: `HandleCrashWithLogger` around each
/// notification, and the process-wide `utilruntime.ReallyCrash`). Either way the panic is
/// logged first, as upstream's `logPanic` does (`"Observed a panic" panic="…"`), and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum HandlerPanic {
    /// Upstream's default (`ReallyCrash = true`): re-raise. The handler gets nothing more, the
    /// informer stops, and its `run` resumes the panic; registrations report the crash (see
    /// the module's differences: the process does not die).
    #[default]
    Crash,
    /// `ReallyCrash = false`: skip the notification and go on after
    /// [`SLEEP_AFTER_HANDLER_PANIC`]. A skipped initial-list add never counts as delivered, so
    /// that handler's registration never syncs (as upstream).
    LogAndContinue,
}

/// The text of a panic payload (`panic!("…")` with or without arguments).
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// The first handler panic under [`HandlerPanic::Crash`], shared by the processor, the
/// informer's `run` and every registration (keeps I5).
#[derive(Default)]
pub(crate) struct CrashState {
    /// The panic's text, for registrations and the controllers waiting on them.
    message: Mutex<Option<String>>,
    /// The payload itself, taken once by the informer's `run` to re-raise it.
    payload: Mutex<Option<Box<dyn Any + Send>>>,
    changed: Notify,
}

impl CrashState {
    /// Keeps the first crash; a later one (another listener, at the same moment) is only
    /// logged and counted.
    fn record(&self, payload: Box<dyn Any + Send>) {
        let mut message = self.message.lock();
        if message.is_none() {
            *message = Some(panic_message(&*payload));
            *self.payload.lock() = Some(payload);
        }
        drop(message);
        self.changed.notify_waiters();
    }
    pub(crate) fn message(&self) -> Option<String> {
        self.message.lock().clone()
    }
    /// Resolves with the crash's text once there is one.
    pub(crate) async fn crashed(&self) -> String {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(m) = self.message() {
                return m;
            }
            notified.await;
        }
    }
    /// The payload to re-raise; `None` after the first call.
    pub(crate) fn take_payload(&self) -> Option<Box<dyn Any + Send>> {
        self.payload.lock().take()
    }
}

/// A listener's effective resync period, given what it asked for and the informer's resync
/// check period (upstream `determineResyncPeriod`).
pub fn determine_resync_period(requested: Duration, check: Duration) -> Duration {
    if requested.is_zero() {
        return Duration::ZERO;
    }
    if check.is_zero() {
        tracing::warn!(
            ?requested,
            "the informer's resyncCheckPeriod is 0: it doesn't support resyncing"
        );
        return Duration::ZERO;
    }
    requested.max(check)
}

/// One notification to a handler.
pub(crate) enum Notification<K> {
    Add { obj: Arc<K>, initial: bool },
    Update { old: Arc<K>, new: Arc<K> },
    Delete(DeletedObject<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add { obj, initial } => Notification::Add {
                obj: obj.clone(),
                initial: *initial,
            },
            Notification::Update { old, new } => Notification::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Notification::Delete(d) => Notification::Delete(d.clone()),
        }
    }
}

/// upstream `synctrack.SingleFileTracker`: counts initial-list adds queued but not yet
/// delivered, plus whether the informer itself has synced (keeps I4).
#[derive(Default)]
pub(crate) struct SyncTracker {
    pending: AtomicI64,
    upstream_synced: AtomicBool,
    changed: Notify,
}

impl SyncTracker {
    fn start(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }
    fn finished(&self) {
        let left = self.pending.fetch_sub(1, Ordering::SeqCst) - 1;
        assert!(left >= 0, "synctrack: more Finished() than Start() calls");
        self.changed.notify_waiters();
    }
    pub(crate) fn set_upstream_synced(&self) {
        self.upstream_synced.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
    pub(crate) fn has_synced(&self) -> bool {
        self.upstream_synced.load(Ordering::SeqCst) && self.pending.load(Ordering::SeqCst) == 0
    }
    pub(crate) async fn wait_synced(&self) {
        self.wait(Self::has_synced).await
    }
    async fn wait(&self, done: impl Fn(&Self) -> bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(self) {
                return;
            }
            notified.await;
        }
    }
}

/// What [`super::SharedIndexInformer::add_event_handler`] returns: the handler's own sync
/// state and its resync periods.
pub struct HandlerRegistration {
    pub(crate) id: u64,
    pub(crate) tracker: Arc<SyncTracker>,
    pub(crate) requested_resync_period: Duration,
    panics: Arc<AtomicU64>,
    crash: Arc<CrashState>,
}

impl HandlerRegistration {
    /// True once the informer has synced and every initial-list object has been delivered to
    /// *this* handler.
    pub fn has_synced(&self) -> bool {
        self.tracker.has_synced()
    }
    /// Resolves when [`HandlerRegistration::has_synced`] becomes true. It never resolves for
    /// a registration that missed an initial add (a handler panic under
    /// [`HandlerPanic::LogAndContinue`]), nor after a crash: wait on
    /// [`HandlerRegistration::crashed`] too, or under a timeout.
    pub async fn wait_synced(&self) {
        self.tracker.wait_synced().await
    }
    /// The informer's own `HasSynced` as this registration saw it: true once the informer's
    /// initial list has been processed, whether or not this handler has received it yet
    /// (upstream's `UpstreamHasSynced` signal to the handler's tracker).
    pub fn informer_has_synced(&self) -> bool {
        self.tracker.upstream_synced.load(Ordering::SeqCst)
    }
    /// Resolves when [`HandlerRegistration::informer_has_synced`] becomes true.
    pub async fn wait_informer_synced(&self) {
        self.tracker
            .wait(|t| t.upstream_synced.load(Ordering::SeqCst))
            .await
    }
    /// How many times this handler has panicked.
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::SeqCst)
    }
    /// The text of the handler panic that crashed the informer ([`HandlerPanic::Crash`]), if
    /// one did. Any handler's panic crashes it, not only this one's.
    pub fn crash(&self) -> Option<String> {
        self.crash.message()
    }
    /// Resolves with [`HandlerRegistration::crash`] once the informer has crashed.
    pub async fn crashed(&self) -> String {
        self.crash.crashed().await
    }
    /// The resync period the handler was registered with, after upstream's adjustments.
    pub fn requested_resync_period(&self) -> Duration {
        self.requested_resync_period
    }
}

struct Listener<K> {
    id: u64,
    /// The unbounded buffer (keeps I1). `None` once the processor stopped.
    tx: Option<mpsc::UnboundedSender<Notification<K>>>,
    /// Taken by [`SharedProcessor::start_listeners`] when the task starts.
    rx: Option<mpsc::UnboundedReceiver<Notification<K>>>,
    handler: Arc<dyn ResourceEventHandler<K>>,
    requested_resync_period: Duration,
    resync_period: Duration,
    next_resync: Instant,
    /// Keeps I3.
    syncing: bool,
    tracker: Arc<SyncTracker>,
    /// This handler's panics (keeps I5).
    panics: Arc<AtomicU64>,
    /// The running task, aborted when the informer crashes.
    task: Option<AbortHandle>,
}

/// The processor's state.
struct State<K> {
    listeners: Vec<Listener<K>>,
    next_id: u64,
    started: bool,
}

/// The fan-out from one informer to its handlers.
pub(crate) struct SharedProcessor<K> {
    state: Mutex<State<K>>,
    policy: HandlerPanic,
    /// Every handler panic, all listeners together (keeps I5).
    panics: Arc<AtomicU64>,
    crash: Arc<CrashState>,
}

/// What a listener's task needs besides its buffer: its handler, and where panics go.
struct Delivery<K> {
    handler: Arc<dyn ResourceEventHandler<K>>,
    tracker: Arc<SyncTracker>,
    policy: HandlerPanic,
    panics: [Arc<AtomicU64>; 2],
    crash: Arc<CrashState>,
}

impl<K: Send + Sync + 'static> SharedProcessor<K> {
    pub(crate) fn new(policy: HandlerPanic) -> Self {
        Self {
            state: Mutex::new(State {
                listeners: vec![],
                next_id: 0,
                started: false,
            }),
            policy,
            panics: Arc::default(),
            crash: Arc::default(),
        }
    }

    /// Every handler panic so far.
    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::SeqCst)
    }

    /// The crash shared by the informer and its registrations.
    pub(crate) fn crash(&self) -> &Arc<CrashState> {
        &self.crash
    }

    /// Adds a listener with the given requested and effective periods.
    pub(crate) fn add_listener(
        &self,
        handler: Arc<dyn ResourceEventHandler<K>>,
        requested: Duration,
        effective: Duration,
    ) -> HandlerRegistration {
        let (tx, rx) = mpsc::unbounded_channel();
        let tracker = Arc::new(SyncTracker::default());
        let panics = Arc::new(AtomicU64::new(0));
        let mut st = self.state.lock();
        let id = st.next_id;
        st.next_id += 1;
        let mut l = Listener {
            id,
            tx: Some(tx),
            rx: Some(rx),
            handler,
            requested_resync_period: requested,
            resync_period: effective,
            next_resync: Instant::now() + effective,
            syncing: true,
            tracker: tracker.clone(),
            panics: panics.clone(),
            task: None,
        };
        if st.started {
            self.spawn_listener(&mut l);
        }
        st.listeners.push(l);
        HandlerRegistration {
            id,
            tracker,
            requested_resync_period: requested,
            panics,
            crash: self.crash.clone(),
        }
    }

    /// Starts every listener's task (upstream `sharedProcessor.run`).
    pub(crate) fn start_listeners(&self) {
        let mut st = self.state.lock();
        st.started = true;
        for l in &mut st.listeners {
            self.spawn_listener(l);
        }
    }

    fn spawn_listener(&self, l: &mut Listener<K>) {
        let Some(rx) = l.rx.take() else { return };
        let delivery = Delivery {
            handler: l.handler.clone(),
            tracker: l.tracker.clone(),
            policy: self.policy,
            panics: [l.panics.clone(), self.panics.clone()],
            crash: self.crash.clone(),
        };
        l.task = Some(tokio::spawn(delivery.run(rx)).abort_handle());
    }

    /// Sends `n` to every listener, or, for a sync notification, to the syncing ones only
    /// (keeps I3). Never waits (keeps I1).
    pub(crate) fn distribute(&self, n: Notification<K>, sync: bool) {
        let st = self.state.lock();
        for l in st.listeners.iter().filter(|l| !sync || l.syncing) {
            send(l, n.clone());
        }
    }

    /// Every listener's handler, in registration order.
    #[cfg_attr(not(feature = "broken"), allow(dead_code))]
    pub(crate) fn handlers(&self) -> Vec<Arc<dyn ResourceEventHandler<K>>> {
        let st = self.state.lock();
        st.listeners.iter().map(|l| l.handler.clone()).collect()
    }

    /// Sends `n` to the listener `id` only (a late joiner's replay of the cache).
    pub(crate) fn send_to(&self, id: u64, n: Notification<K>) {
        let st = self.state.lock();
        if let Some(l) = st.listeners.iter().find(|l| l.id == id) {
            send(l, n);
        }
    }

    /// upstream `sharedProcessor.shouldResync`: recompute every listener's `syncing` flag at
    /// `now`, move each due listener's next resync on by its period, and say whether any is
    /// due.
    pub(crate) fn should_resync(&self, now: Instant) -> bool {
        let mut st = self.state.lock();
        let mut any = false;
        for l in &mut st.listeners {
            l.syncing = !l.resync_period.is_zero() && now >= l.next_resync;
            if l.syncing {
                any = true;
                l.next_resync = now + l.resync_period;
            }
        }
        any
    }

    /// The check period changed: recompute every listener's effective period.
    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        let mut st = self.state.lock();
        for l in &mut st.listeners {
            l.resync_period = determine_resync_period(l.requested_resync_period, check);
        }
    }

    /// Each listener's effective resync period, in registration order.
    pub(crate) fn resync_periods(&self) -> Vec<Duration> {
        self.state
            .lock()
            .listeners
            .iter()
            .map(|l| l.resync_period)
            .collect()
    }

    /// Marks every listener's tracker as upstream-synced.
    pub(crate) fn set_upstream_synced(&self) {
        for l in &self.state.lock().listeners {
            l.tracker.set_upstream_synced();
        }
    }

    /// Removes a listener; notifications already buffered are still delivered.
    pub(crate) fn remove(&self, id: u64) -> bool {
        let mut st = self.state.lock();
        let before = st.listeners.len();
        st.listeners.retain(|l| l.id != id);
        before != st.listeners.len()
    }

    /// Closes every buffer; each task ends after delivering what it holds. After a crash the
    /// tasks are aborted instead: nothing more is delivered (upstream's process is gone).
    pub(crate) fn stop(&self) {
        let crashed = self.crash.message().is_some();
        for l in &mut self.state.lock().listeners {
            l.tx = None;
            if let Some(task) = l.task.as_ref().filter(|_| crashed) {
                task.abort();
            }
        }
    }
}

fn send<K>(l: &Listener<K>, n: Notification<K>) {
    if let Notification::Add { initial: true, .. } = n {
        l.tracker.start();
    }
    if let Some(tx) = &l.tx {
        // A send fails only if the task ended: its handler crashed the informer (I5).
        let _ = tx.send(n);
    }
}

impl<K: Send + Sync + 'static> Delivery<K> {
    /// upstream `processorListener.run`: deliver in order, each call guarded (keeps I5).
    async fn run(self, mut rx: mpsc::UnboundedReceiver<Notification<K>>) {
        let mut sleep_after_panic = false;
        while let Some(n) = rx.recv().await {
            if sleep_after_panic {
                tokio::time::sleep(SLEEP_AFTER_HANDLER_PANIC).await;
            }
            let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| self.deliver(n)))
            else {
                sleep_after_panic = false;
                continue;
            };
            for counter in &self.panics {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            // upstream's logPanic line (its stack trace left out).
            let message = panic_message(&*payload);
            klog::error(
                "Observed a panic",
                None,
                &[("panic", message.as_str().into())],
            );
            match self.policy {
                HandlerPanic::Crash => return self.crash.record(payload),
                HandlerPanic::LogAndContinue => sleep_after_panic = true,
            }
        }
    }

    /// One handler call; an initial add counts as delivered only once it returned (I4).
    fn deliver(&self, n: Notification<K>) {
        match n {
            Notification::Add { obj, initial } => {
                self.handler.on_add(obj, initial);
                if initial {
                    self.tracker.finished();
                }
            }
            Notification::Update { old, new } => self.handler.on_update(old, new),
            Notification::Delete(d) => self.handler.on_delete(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn panic_messages_keep_their_text() {
        assert_eq!(panic_message(&"boom"), "boom");
        assert_eq!(panic_message(&String::from("bang")), "bang");
        assert_eq!(panic_message(&42u8), "non-string panic payload");
    }

    #[test]
    fn the_effective_period_is_zero_without_a_check_period_and_never_below_it() {
        assert_eq!(determine_resync_period(S(0), S(5)), S(0));
        assert_eq!(determine_resync_period(S(60), S(0)), S(0));
        assert_eq!(determine_resync_period(S(3), S(5)), S(5));
        assert_eq!(determine_resync_period(S(60), S(5)), S(60));
    }
}
