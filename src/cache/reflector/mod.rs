//! The reflector: keeps a store in step with a cluster by listing, then watching. Follows
//! client-go's `tools/cache/reflector.go` (v0.37.2; v0.36.3 behaves the same).
//!
//! ```text
//!            ┌──────── success ─────────┐        event ─┐
//!   List ────┤                          ▼               ▼
//!    ▲  │    └ 410/too large: List at ""  OpenWatch ──► Watching ── normal close ──► OpenWatch
//!    │  └ other error ─┐                 │   │             │  429 ───► Backoff ► OpenWatch
//!    │                 ▼                 │   └ 429 ─► Backoff ► OpenWatch
//!    └──────────── Backoff ◄── other ────┘         │  410, other error ─► Backoff ► List
//! ```
//!
//! The reflector is a state machine ([`ReflectorPhase`] names the states); [`Reflector::step`] performs
//! one transition and reports it as a [`ReflectorStep`]. [`Reflector::run`] steps until shut down. The
//! store it drives is anything implementing [`ReflectorStore`]: in an informer, the FIFO the
//! feature gates select; in a test, a [`RecordingStore`].
//!
//! # Invariants
//! 1. Every list (and every streaming list) ends in exactly one `store.replace(items, rv)`,
//!    and `last_sync_resource_version` becomes that list's `rv`.
//! 2. Any relist is preceded by one backoff step, except the immediate `""` retry after a
//!    list fails with 410 or "too large resource version".
//! 3. A watch that closes normally is re-opened at the last resourceVersion without a relist.
//! 4. The resync timer runs only between a successful list and the end of that list's watch
//!    cycle; each successful list restarts it (so frequent relists push resyncs back).
//! 5. A watch opened at `""` or `"0"` does not move the resourceVersion on ADDED events (they
//!    come in no particular order) until a non-ADDED event arrives.
//!
//! # Concurrency
//! A reflector is owned by one task; it holds no locks. The store synchronises itself.
//!
//! # Differences from upstream
//! - Upstream's `ListAndWatch` is a function with nested loops; here each loop position is a
//!   state, so a test can drive it one transition at a time.
//! - The resync timer is part of the watching states (a `select!` with the deadline), not a
//!   separate goroutine. A resync error ends the watch, as upstream's `resyncerrc` does, and
//!   the reflector relists after its backoff.
//! - The backoff's jitter and the watch timeout come from a seeded RNG
//!   ([`ReflectorOptions::seed`]), so virtual-time runs are deterministic.

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use futures::StreamExt;
use rand::{RngExt, SeedableRng, rngs::StdRng};
use tokio::time::{Instant, sleep, sleep_until};

use super::lister_watcher::{
    ListOptions, ListerWatcher, LwError, WatchEvent, WatchOptions, WatchStream,
};

mod backoff;
#[cfg(any(test, feature = "testing"))]
mod recording;
#[cfg(test)]
pub(crate) mod tests;

pub use backoff::BackoffConfig;
use backoff::RelistBackoff;
#[cfg(any(test, feature = "testing"))]
pub use recording::{RecordingStore, StoreCall};

use super::fifo::sealed::Queued;
use super::store::{copy_resource_version, resource_version};
use super::{Fifo, FifoError, Object};

/// The store side of a reflector: what it calls for each list and watch event. client-go's
/// `Store` interface as far as a reflector uses it, plus the optional `Bookmark`.
pub trait ReflectorStore<K>: Send + Sync {
    /// A watch ADDED.
    fn add(&self, obj: K) -> Result<(), ReflectorStoreError>;
    /// A watch MODIFIED.
    fn update(&self, obj: K) -> Result<(), ReflectorStoreError>;
    /// A watch DELETED.
    fn delete(&self, obj: K) -> Result<(), ReflectorStoreError>;
    /// A complete list at `resource_version` (keeps I1).
    fn replace(&self, list: Vec<K>, resource_version: String) -> Result<(), ReflectorStoreError>;
    /// The periodic resync tick, when the informer says some listener is due.
    fn resync(&self) -> Result<(), ReflectorStoreError>;
    /// A BOOKMARK. RealFIFO forwards it; most stores ignore it.
    fn bookmark(&self, _resource_version: &str) {}
}

/// A boxed store is a store (the informer hands its reflector one).
impl<K> ReflectorStore<K> for Box<dyn ReflectorStore<K>> {
    fn add(&self, obj: K) -> Result<(), ReflectorStoreError> {
        (**self).add(obj)
    }
    fn update(&self, obj: K) -> Result<(), ReflectorStoreError> {
        (**self).update(obj)
    }
    fn delete(&self, obj: K) -> Result<(), ReflectorStoreError> {
        (**self).delete(obj)
    }
    fn replace(&self, list: Vec<K>, resource_version: String) -> Result<(), ReflectorStoreError> {
        (**self).replace(list, resource_version)
    }
    fn resync(&self) -> Result<(), ReflectorStoreError> {
        (**self).resync()
    }
    fn bookmark(&self, resource_version: &str) {
        (**self).bookmark(resource_version)
    }
}

/// A store refused an object (upstream only logs these).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReflectorStoreError {
    /// A FIFO refused it.
    #[error("the FIFO refused the object: {0}")]
    Fifo(#[from] FifoError),
    /// Its key could not be computed.
    #[error("the store refused the object: {0}")]
    Key(#[from] super::KeyError),
    /// The store refused it for a reason of its own.
    #[error("store error: {0}")]
    Refused(String),
}

/// A reflector's settings.
#[derive(Clone)]
pub struct ReflectorOptions {
    /// How often the resync tick fires (the informer's resync check period). Zero: never.
    pub resync_period: Duration,
    /// Asked on each resync tick; the store is resynced only if it answers true. `None`:
    /// always resync.
    pub should_resync: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
    /// Lower bound of the random watch timeout; values under 5 min are ignored.
    pub min_watch_timeout: Duration,
    /// An explicit list page size (upstream's `WatchListPageSize`).
    pub page_size: Option<u32>,
    /// How long internal-error (500) watches are re-opened in place; 0: never (relist).
    pub max_internal_error_retry_duration: Duration,
    /// Use the streaming-list mode (the `WatchListClient` gate). Ignored when the source
    /// declares it unsupported.
    pub use_watch_list: bool,
    /// The backoff.
    pub backoff: BackoffConfig,
    /// Seed for the backoff jitter and the watch timeouts.
    pub seed: u64,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        Self {
            resync_period: Duration::ZERO,
            should_resync: None,
            min_watch_timeout: MIN_WATCH_TIMEOUT,
            page_size: None,
            max_internal_error_retry_duration: Duration::ZERO,
            use_watch_list: false,
            backoff: BackoffConfig::default(),
            seed: 0,
        }
    }
}

impl fmt::Debug for ReflectorOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorOptions")
            .field("resync_period", &self.resync_period)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .field("page_size", &self.page_size)
            .field("use_watch_list", &self.use_watch_list)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

/// The smallest watch timeout upstream honours: 5 minutes.
pub(crate) const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);
/// The pager's default page size.
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// A watch that closes sooner than this with no events is an error, not a normal close.
pub(crate) const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

/// The reflector's states, as a plain name (see [`Reflector::phase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReflectorPhase {
    /// About to list (or stream-list).
    List,
    /// About to open a watch at the last resourceVersion.
    OpenWatch,
    /// Watching.
    Watching,
    /// Waiting one backoff step, then [`ReflectorPhase::List`].
    BackoffThenList,
    /// Waiting one backoff step, then [`ReflectorPhase::OpenWatch`].
    BackoffThenWatch,
}

/// What one [`Reflector::step`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum ReflectorStep {
    /// A list succeeded and the store was replaced.
    Listed {
        /// The list's resourceVersion.
        resource_version: String,
        /// How many objects.
        items: usize,
        /// Whether it came from the streaming-list mode.
        streamed: bool,
    },
    /// A list failed.
    ListFailed(LwError),
    /// A watch was opened.
    WatchStarted {
        /// At this resourceVersion.
        resource_version: String,
    },
    /// Opening a watch failed.
    WatchStartFailed(LwError),
    /// A watch event was applied to the store.
    Event(&'static str),
    /// The watch closed normally; it will be re-opened without a relist.
    WatchClosed,
    /// The watch ended with this error.
    WatchEnded(LwError),
    /// One backoff step was waited.
    BackedOff(Duration),
    /// The resync timer fired; `resynced` says whether the store was resynced.
    ResyncTick {
        /// Whether `should_resync` allowed it.
        resynced: bool,
    },
}

/// After a backoff, what comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    List,
    OpenWatch,
}

/// An open watch.
struct Watch<K> {
    stream: WatchStream<K>,
    opened_at: Instant,
    events: u64,
    /// Keeps I5: false while only ADDED events of a `""`/`"0"` watch have arrived.
    propagate_rv: bool,
}

/// The reflector's state machine. Each variant says what comes next.
enum State<K> {
    /// List (streaming list if enabled, falling back to a plain list).
    /// - success: `store.replace`, restart the resync timer → `OpenWatch` (streaming list:
    ///   → `Watching` on the same stream);
    /// - 410 or too-large RV: mark the RV unavailable and list again at `""` at once;
    /// - any other error: → `Backoff(List)`.
    List,
    /// Open a watch at the last RV, with a random timeout and bookmarks.
    /// - success: → `Watching`;
    /// - 429 or connection refused: → `Backoff(OpenWatch)` (no relist);
    /// - anything else (a dropped connection, 410): → `Backoff(List)`.
    OpenWatch,
    /// Apply events to the store; fire the resync timer when due.
    /// - normal close: → `OpenWatch` (keeps I3); a close within 1 s with no events:
    ///   → `Backoff(List)`;
    /// - 410: → `Backoff(List)`, relisting at the last RV (not `""`);
    /// - 429: → `Backoff(OpenWatch)`;
    /// - 500 while the internal-error retry window is open: → `OpenWatch`;
    /// - any other error: → `Backoff(List)`.
    Watching(Watch<K>),
    /// Wait one backoff step (drawn on entry), then `then` (keeps I2). A running resync
    /// timer still fires meanwhile.
    Backoff {
        then: Then,
        until: Instant,
        delay: Duration,
    },
}

/// The reflector. See the module docs.
pub struct Reflector<K, L, S> {
    lw: L,
    store: S,
    options: ReflectorOptions,
    state: State<K>,
    /// The RV of the last list or watch event applied (upstream `lastSyncResourceVersion`).
    last_sync_rv: String,
    /// Scratch: the current watch event's RV, swapped into `last_sync_rv` once applied.
    next_rv: String,
    /// Set after a list fails with 410/too-large: the next list asks for `""`.
    rv_unavailable: bool,
    /// An RV="0" list once came back paginated: keep paging relists.
    paginated_result: bool,
    backoff: RelistBackoff,
    rng: StdRng,
    /// The resync deadline while the timer runs (keeps I4).
    next_resync: Option<Instant>,
    /// When the current run of internal errors began (for the in-place retry window).
    internal_errors_since: Option<Instant>,
}

impl<K, L, S> Reflector<K, L, S>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: ReflectorStore<K>,
{
    /// A reflector that will list `lw` into `store`.
    pub fn new(lw: L, store: S, options: ReflectorOptions) -> Self {
        Self {
            backoff: RelistBackoff::new(options.backoff),
            rng: StdRng::seed_from_u64(options.seed),
            lw,
            store,
            options,
            state: State::List,
            last_sync_rv: String::new(),
            next_rv: String::new(),
            rv_unavailable: false,
            paginated_result: false,
            next_resync: None,
            internal_errors_since: None,
        }
    }

    /// The current state.
    pub fn phase(&self) -> ReflectorPhase {
        match &self.state {
            State::List => ReflectorPhase::List,
            State::OpenWatch => ReflectorPhase::OpenWatch,
            State::Watching(_) => ReflectorPhase::Watching,
            State::Backoff {
                then: Then::List, ..
            } => ReflectorPhase::BackoffThenList,
            State::Backoff {
                then: Then::OpenWatch,
                ..
            } => ReflectorPhase::BackoffThenWatch,
        }
    }

    /// Upstream's `LastSyncResourceVersion`.
    pub fn last_sync_resource_version(&self) -> &str {
        &self.last_sync_rv
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Steps until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                step = self.step() => tracing::trace!(?step, "reflector step"),
            }
        }
    }

    /// Performs one transition.
    pub async fn step(&mut self) -> ReflectorStep {
        let state = std::mem::replace(&mut self.state, State::List);
        let (step, next) = match state {
            State::List => self.list_step().await,
            State::OpenWatch => self.open_watch().await,
            State::Watching(w) => self.watching(w).await,
            State::Backoff { then, until, delay } => {
                // A watch retry keeps the resync timer running; a relist has stopped it.
                if let Some(at) = self.next_resync
                    && at < until
                {
                    sleep_until(at).await;
                    match self.resync_tick() {
                        Ok(step) => {
                            self.state = State::Backoff { then, until, delay };
                            return step;
                        }
                        Err(e) => {
                            self.state = self.relist_after_backoff();
                            return ReflectorStep::WatchEnded(e);
                        }
                    }
                }
                sleep_until(until).await;
                let next = match then {
                    Then::List => State::List,
                    Then::OpenWatch => State::OpenWatch,
                };
                (ReflectorStep::BackedOff(delay), next)
            }
        };
        self.state = next;
        step
    }

    fn relist_after_backoff(&mut self) -> State<K> {
        self.next_resync = None; // keeps I4: the timer belongs to the list that ended
        self.backoff_then(Then::List)
    }

    fn backoff_then(&mut self, then: Then) -> State<K> {
        let now = Instant::now();
        let delay = self.backoff.next_delay(now, &mut self.rng);
        State::Backoff {
            then,
            until: now + delay,
            delay,
        }
    }

    fn watch_timeout_seconds(&mut self) -> u32 {
        let min = self
            .options
            .min_watch_timeout
            .max(MIN_WATCH_TIMEOUT)
            .as_secs();
        (min + self.rng.random_range(0..min)) as u32
    }

    fn relist_resource_version(&self) -> String {
        if self.rv_unavailable {
            String::new()
        } else if self.last_sync_rv.is_empty() {
            "0".into()
        } else {
            self.last_sync_rv.clone()
        }
    }

    async fn list_step(&mut self) -> (ReflectorStep, State<K>) {
        if self.options.use_watch_list && !self.lw.is_watch_list_semantics_unsupported() {
            match self.watch_list().await {
                Ok((w, rv, items)) => {
                    return (
                        ReflectorStep::Listed {
                            resource_version: rv,
                            items,
                            streamed: true,
                        },
                        State::Watching(w),
                    );
                }
                Err(e) => tracing::warn!(error = %e, "streaming list failed; falling back to list"),
            }
        }
        match self.list().await {
            Ok((rv, n)) => (
                ReflectorStep::Listed {
                    resource_version: rv,
                    items: n,
                    streamed: false,
                },
                State::OpenWatch,
            ),
            Err(e) => {
                let next = self.relist_after_backoff();
                (ReflectorStep::ListFailed(e), next)
            }
        }
    }

    /// A paged list with upstream's RV and paging rules; on 410/too-large, one immediate retry
    /// at `""`.
    async fn list(&mut self) -> Result<(String, usize), LwError> {
        let rv = self.relist_resource_version();
        let result = match self.list_pages(rv.clone()).await {
            Err(e) if e.is_expired_or_too_large() => {
                self.rv_unavailable = true;
                self.list_pages(String::new()).await
            }
            other => other,
        };
        let (items, list_rv, paginated) = result?;
        if rv == "0" && paginated {
            self.paginated_result = true;
        }
        self.rv_unavailable = false;
        let n = items.len();
        if let Err(e) = self.store.replace(items, list_rv.clone()) {
            return Err(LwError::Other(format!("unable to sync list result: {e}")));
        }
        self.listed(list_rv.clone());
        Ok((list_rv, n))
    }

    fn listed(&mut self, rv: String) {
        self.last_sync_rv = rv; // keeps I1
        self.next_resync = (!self.options.resync_period.is_zero())
            .then(|| Instant::now() + self.options.resync_period); // keeps I4
    }

    /// client-go's pager: follow continue tokens (at RV `""`); if a continuation expires,
    /// fall back to one unpaged list at the original RV.
    async fn list_pages(&mut self, rv: String) -> Result<(Vec<K>, String, bool), LwError> {
        let limit = match self.options.page_size {
            Some(n) => Some(n),
            None if self.paginated_result => Some(DEFAULT_PAGE_SIZE),
            None if rv.is_empty() || rv == "0" => Some(DEFAULT_PAGE_SIZE),
            None => None,
        };
        let mut options = ListOptions {
            resource_version: rv.clone(),
            limit,
            continue_token: None,
        };
        let mut items = vec![];
        let mut paginated = false;
        loop {
            match self.lw.list(options.clone()).await {
                Ok(page) => {
                    items.extend(page.items);
                    match page.continue_token {
                        Some(c) => {
                            options.continue_token = Some(c);
                            options.resource_version = String::new();
                            paginated = true;
                        }
                        None => return Ok((items, page.resource_version, paginated)),
                    }
                }
                Err(LwError::Expired(_)) if options.continue_token.is_some() => {
                    let full = ListOptions {
                        resource_version: rv,
                        limit: None,
                        continue_token: None,
                    };
                    let page = self.lw.list(full).await?;
                    return Ok((page.items, page.resource_version, paginated));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The streaming list: a watch with `sendInitialEvents`, collected into a temporary map
    /// until the initial-events-end bookmark; then one `replace`, and the same watch goes on.
    async fn watch_list(&mut self) -> Result<(Watch<K>, String, usize), LwError> {
        loop {
            let rv = if self.rv_unavailable {
                String::new()
            } else {
                self.last_sync_rv.clone()
            };
            let options = WatchOptions {
                resource_version: rv.clone(),
                timeout_seconds: self.watch_timeout_seconds(),
                allow_bookmarks: true,
                send_initial_events: true,
            };
            let opened_at = Instant::now();
            let err = match self.lw.watch(options).await {
                Ok(mut stream) => {
                    let mut temp: BTreeMap<String, K> = BTreeMap::new();
                    let mut last_rv = rv;
                    let mut events = 0;
                    let end = loop {
                        let Some(ev) = stream.next().await else {
                            break Err(LwError::Other(
                                "watch closed before the initial events ended".into(),
                            ));
                        };
                        events += 1;
                        match ev {
                            WatchEvent::Added(o) => {
                                temp.insert(object_key(&o), o);
                            }
                            WatchEvent::Modified(o) => {
                                last_rv = resource_version(&o);
                                temp.insert(object_key(&o), o);
                            }
                            WatchEvent::Deleted(o) => {
                                last_rv = resource_version(&o);
                                temp.remove(&object_key(&o));
                            }
                            WatchEvent::Bookmark {
                                resource_version,
                                initial_events_end,
                            } => {
                                last_rv = resource_version;
                                if initial_events_end {
                                    break Ok(());
                                }
                            }
                            WatchEvent::Error(e) => break Err(e),
                        }
                    };
                    match end {
                        Ok(()) => {
                            let items: Vec<K> = temp.into_values().collect();
                            let n = items.len();
                            self.store
                                .replace(items, last_rv.clone())
                                .map_err(|e| LwError::Other(e.to_string()))?;
                            self.rv_unavailable = false;
                            self.listed(last_rv.clone());
                            let w = Watch {
                                stream,
                                opened_at,
                                events,
                                propagate_rv: true,
                            };
                            return Ok((w, last_rv, n));
                        }
                        Err(e) => e,
                    }
                }
                Err(e) => e,
            };
            match err {
                LwError::TooManyRequests(_) | LwError::ConnectionRefused(_) => {}
                e if e.is_expired_or_too_large() => self.rv_unavailable = true,
                e => return Err(e),
            }
            let d = self.backoff.next_delay(Instant::now(), &mut self.rng);
            sleep(d).await;
        }
    }

    async fn open_watch(&mut self) -> (ReflectorStep, State<K>) {
        let rv = self.last_sync_rv.clone();
        let options = WatchOptions {
            resource_version: rv.clone(),
            timeout_seconds: self.watch_timeout_seconds(),
            allow_bookmarks: true,
            send_initial_events: false,
        };
        match self.lw.watch(options).await {
            Ok(stream) => (
                ReflectorStep::WatchStarted {
                    resource_version: rv.clone(),
                },
                State::Watching(Watch {
                    stream,
                    opened_at: Instant::now(),
                    events: 0,
                    propagate_rv: !(rv.is_empty() || rv == "0"),
                }),
            ),
            Err(e @ (LwError::TooManyRequests(_) | LwError::ConnectionRefused(_))) => {
                let next = self.backoff_then(Then::OpenWatch);
                (ReflectorStep::WatchStartFailed(e), next)
            }
            Err(e) => {
                let next = self.relist_after_backoff();
                (ReflectorStep::WatchStartFailed(e), next)
            }
        }
    }

    fn resync_tick(&mut self) -> Result<ReflectorStep, LwError> {
        self.next_resync = Some(Instant::now() + self.options.resync_period);
        let due = self.options.should_resync.as_ref().is_none_or(|f| f());
        if due && let Err(e) = self.store.resync() {
            return Err(LwError::Other(format!("resync: {e}")));
        }
        Ok(ReflectorStep::ResyncTick { resynced: due })
    }

    async fn watching(&mut self, mut w: Watch<K>) -> (ReflectorStep, State<K>) {
        let event = match self.next_resync {
            Some(at) => tokio::select! {
                ev = w.stream.next() => Some(ev),
                _ = sleep_until(at) => None,
            },
            None => Some(w.stream.next().await),
        };
        let Some(event) = event else {
            return match self.resync_tick() {
                Ok(step) => (step, State::Watching(w)),
                // Upstream: the resync error ends the watch, and ListAndWatch returns it.
                Err(e) => (ReflectorStep::WatchEnded(e), self.relist_after_backoff()),
            };
        };
        let Some(event) = event else {
            if w.events == 0 && w.opened_at.elapsed() < VERY_SHORT_WATCH {
                let e = LwError::Other("very short watch: closed with no events".into());
                let next = self.relist_after_backoff();
                return (ReflectorStep::WatchEnded(e), next);
            }
            return (ReflectorStep::WatchClosed, State::OpenWatch); // keeps I3
        };
        w.events += 1;
        // The event's resourceVersion is copied into `next_rv`, a buffer kept between events,
        // and swapped into `last_sync_rv` after the store call: no allocation per event.
        let (kind, result) = match event {
            WatchEvent::Added(o) => {
                if w.propagate_rv {
                    copy_resource_version(&mut self.next_rv, &o);
                }
                ("added", self.store.add(o))
            }
            WatchEvent::Modified(o) => {
                w.propagate_rv = true;
                copy_resource_version(&mut self.next_rv, &o);
                ("modified", self.store.update(o))
            }
            WatchEvent::Deleted(o) => {
                w.propagate_rv = true;
                copy_resource_version(&mut self.next_rv, &o);
                ("deleted", self.store.delete(o))
            }
            WatchEvent::Bookmark {
                resource_version, ..
            } => {
                w.propagate_rv = true;
                self.store.bookmark(&resource_version);
                self.next_rv = resource_version;
                ("bookmark", Ok(()))
            }
            WatchEvent::Error(e) => return self.watch_error(e),
        };
        if let Err(e) = result {
            tracing::error!(error = %e, kind, "unable to apply watch event to store");
        }
        if w.propagate_rv {
            std::mem::swap(&mut self.last_sync_rv, &mut self.next_rv); // keeps I5
        }
        (ReflectorStep::Event(kind), State::Watching(w))
    }

    fn watch_error(&mut self, e: LwError) -> (ReflectorStep, State<K>) {
        let next = match &e {
            LwError::TooManyRequests(_) => self.backoff_then(Then::OpenWatch),
            LwError::Internal(_) if self.should_retry_internal_error() => State::OpenWatch,
            _ => self.relist_after_backoff(),
        };
        (ReflectorStep::WatchEnded(e), next)
    }

    /// upstream `retryWithDeadline`: internal errors are retried in place while the first one
    /// of the current run is younger than `max_internal_error_retry_duration`.
    fn should_retry_internal_error(&mut self) -> bool {
        let max = self.options.max_internal_error_retry_duration;
        if max.is_zero() {
            return false;
        }
        let now = Instant::now();
        let since = *self.internal_errors_since.get_or_insert(now);
        now.duration_since(since) <= max
    }
}

use super::meta_namespace_key as object_key;

/// Every FIFO is a reflector store: each object is wrapped in the `Arc` the informer's cache
/// will hold, so a later resync can hand back that very pointer.
impl<F> ReflectorStore<F::Item> for F
where
    F: Fifo<F::Item> + Queued,
    F::Item: Object,
{
    fn add(&self, obj: F::Item) -> Result<(), ReflectorStoreError> {
        Ok(Fifo::add(self, Arc::new(obj))?)
    }
    fn update(&self, obj: F::Item) -> Result<(), ReflectorStoreError> {
        Ok(Fifo::update(self, Arc::new(obj))?)
    }
    fn delete(&self, obj: F::Item) -> Result<(), ReflectorStoreError> {
        Ok(Fifo::delete(self, Arc::new(obj))?)
    }
    fn replace(
        &self,
        list: Vec<F::Item>,
        resource_version: String,
    ) -> Result<(), ReflectorStoreError> {
        let list = list.into_iter().map(Arc::new).collect();
        Ok(Fifo::replace(self, list, &resource_version)?)
    }
    fn resync(&self) -> Result<(), ReflectorStoreError> {
        Ok(Fifo::resync(self)?)
    }
    fn bookmark(&self, resource_version: &str) {
        if let Err(e) = Fifo::bookmark(self, resource_version) {
            tracing::warn!(error = %e, "bookmark not recorded");
        }
    }
}
