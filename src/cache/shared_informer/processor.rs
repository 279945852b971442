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
//!    initial-list add queued to it has been delivered.
//!
//! # Concurrency
//! One `parking_lot::Mutex` guards the listener list and the resync schedule; it is never held
//! across an `.await` (distribution only pushes into unbounded channels). Each listener's
//! handler runs on its own tokio task.
//!
//! # Differences from upstream
//! - The buffer is a tokio unbounded channel instead of `RingGrowing` plus two goroutines.
//! - A handler panic ends that listener's task (upstream re-raises it and crashes the process
//!   by default); other listeners are unaffected.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::Notify, sync::mpsc, time::Instant};

use super::{DeletedObject, ResourceEventHandler};

/// Upstream's `minimumResyncPeriod`.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

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
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_synced() {
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
}

impl HandlerRegistration {
    /// True once the informer has synced and every initial-list object has been delivered to
    /// *this* handler.
    pub fn has_synced(&self) -> bool {
        self.tracker.has_synced()
    }
    /// Resolves when [`HandlerRegistration::has_synced`] becomes true.
    pub async fn wait_synced(&self) {
        self.tracker.wait_synced().await
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
}

impl<K: Send + Sync + 'static> SharedProcessor<K> {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                listeners: vec![],
                next_id: 0,
                started: false,
            }),
        }
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
        };
        if st.started {
            spawn_listener(&mut l);
        }
        st.listeners.push(l);
        HandlerRegistration {
            id,
            tracker,
            requested_resync_period: requested,
        }
    }

    /// Starts every listener's task (upstream `sharedProcessor.run`).
    pub(crate) fn start_listeners(&self) {
        let mut st = self.state.lock();
        st.started = true;
        for l in &mut st.listeners {
            spawn_listener(l);
        }
    }

    /// Sends `n` to every listener, or, for a sync notification, to the syncing ones only
    /// (keeps I3). Never waits (keeps I1).
    pub(crate) fn distribute(&self, n: Notification<K>, sync: bool) {
        let st = self.state.lock();
        for l in st.listeners.iter().filter(|l| !sync || l.syncing) {
            send(l, n.clone());
        }
    }

    /// Calls every listener's handler synchronously, bypassing the buffers. Used only by the
    /// broken [`super::Variant::HandlersBeforeCache`].
    pub(crate) fn deliver_now(&self, n: Notification<K>) {
        let handlers: Vec<_> = self
            .state
            .lock()
            .listeners
            .iter()
            .map(|l| l.handler.clone())
            .collect();
        for h in handlers {
            match n.clone() {
                Notification::Add { obj, initial } => h.on_add(obj, initial),
                Notification::Update { old, new } => h.on_update(old, new),
                Notification::Delete(d) => h.on_delete(d),
            }
        }
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

    /// Closes every buffer; each task ends after delivering what it holds.
    pub(crate) fn stop(&self) {
        for l in &mut self.state.lock().listeners {
            l.tx = None;
        }
    }
}

fn send<K>(l: &Listener<K>, n: Notification<K>) {
    if let Notification::Add { initial: true, .. } = n {
        l.tracker.start();
    }
    if let Some(tx) = &l.tx {
        // A send fails only if the task ended (a handler panicked); upstream would have
        // crashed the process by then.
        let _ = tx.send(n);
    }
}

fn spawn_listener<K: Send + Sync + 'static>(l: &mut Listener<K>) {
    let Some(mut rx) = l.rx.take() else { return };
    let handler = l.handler.clone();
    let tracker = l.tracker.clone();
    tokio::spawn(async move {
        while let Some(n) = rx.recv().await {
            match n {
                Notification::Add { obj, initial } => {
                    handler.on_add(obj, initial);
                    if initial {
                        tracker.finished();
                    }
                }
                Notification::Update { old, new } => handler.on_update(old, new),
                Notification::Delete(d) => handler.on_delete(d),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn the_effective_period_is_zero_without_a_check_period_and_never_below_it() {
        assert_eq!(determine_resync_period(S(0), S(5)), S(0));
        assert_eq!(determine_resync_period(S(60), S(0)), S(0));
        assert_eq!(determine_resync_period(S(3), S(5)), S(5));
        assert_eq!(determine_resync_period(S(60), S(5)), S(60));
    }
}
