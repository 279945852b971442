//! The shared index informer: one reflector, one FIFO and one indexed cache, shared by many
//! event handlers. Follows client-go's `tools/cache/shared_informer.go` and the delta
//! processing in `tools/cache/controller.go` (v0.37.2; v0.36.3 behaves the same).
//!
//! ```text
//!  ListerWatcher ─► Reflector ─► FIFO (select_fifo) ─pop─► handle_deltas ─┬─► indexer (Store)
//!                                   ▲  resync tick                       └─► processor ─► handlers
//!                                   └── only if some handler is due ◄──────── should_resync
//! ```
//!
//! A controller reads objects from [`SharedIndexInformer::indexer`] and hears about changes
//! through a [`ResourceEventHandler`]: `on_add(obj, is_in_initial_list)`,
//! `on_update(old, new)` and `on_delete(obj or tombstone)`, all with `Arc<K>`.
//!
//! # Invariants
//! 1. The indexer is written *before* the handlers are notified of that write. In batch mode
//!    the whole batch is written before the first of its notifications.
//! 2. A resync delivers `on_update(x, x)`: the very `Arc` the indexer holds, twice
//!    (`Arc::ptr_eq(old, new)`). The server is not contacted.
//! 3. An update whose old and new resourceVersions are equal (a resync, or an unchanged object
//!    in a relist) reaches only the handlers due for resync (processor I3).
//! 4. Deltas are never processed while a handler is being added after start (`block_deltas`),
//!    so a late handler sees every object exactly once: in its replay or as a later event.
//!
//! # Concurrency
//! `block_deltas` (a `parking_lot::Mutex<()>`) is taken by delta processing and by a late
//! handler registration; both are synchronous. Lock order: FIFO lock (held by Pop around
//! processing) → `block_deltas` → indexer lock / processor lock, never the reverse.
//!
//! # Differences from upstream
//! - Batch pops (`InOrderInformersBatchProcess`, [`FifoChoice::batch_process`]) follow
//!   upstream: the RealFIFO's `pop_batch` hands a batch to `handle_batch`
//!   (`processDeltasInBatch`), which writes the whole batch under one store lock
//!   ([`Store::apply_batch`], upstream's `Transaction`) and then notifies in order. Notification
//!   order is the same as one delta per Pop; only the cache a handler may read is newer.
//!   The store always supports batches, so upstream's one-by-one fallback for stores without
//!   transactions is not ported.
//! - A handler panic under [`HandlerPanic::Crash`] (upstream's default) stops the informer and
//!   is re-raised from [`SharedIndexInformer::run`] instead of ending the process; every
//!   [`HandlerRegistration::crash`] reports it. [`HandlerPanic::LogAndContinue`] is upstream's
//!   `ReallyCrash = false`, ported as is.
//! - One seam (`Seam`, the points upstream's `Config` leaves open: the process funcs and the
//!   queue) lets the deliberately wrong informers of `cache::broken` (feature `broken`) swap
//!   the delivery of a change; the faithful informer never branches on them.

use std::{sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, Deltas, FifoChoice, InformerFifo,
    Object, PopError, Store, StoreWrite, lister_watcher::ListerWatcher, reflector::Reflector,
    reflector::ReflectorOptions, reflector::ReflectorStore, select_fifo,
};
use crate::features::{DEFAULT_EMULATED, Feature, FeatureGates};

mod handler;
mod processor;
#[cfg(test)]
pub(crate) mod tests;

pub use handler::{DeletedObject, HandlerFuncs, ResourceEventHandler};
use processor::SyncTracker;
pub(crate) use processor::panic_message;
pub use processor::{
    HandlerPanic, HandlerRegistration, MINIMUM_RESYNC_PERIOD, SLEEP_AFTER_HANDLER_PANIC,
    determine_resync_period,
};
pub(crate) use processor::{Notification, SharedProcessor};

/// The informer's one seam: how a change reaches the indexer and the handlers, and what the
/// reflector writes into.
///
/// Upstream builds the informer's controller from a `Config` whose `Process` and
/// `ProcessBatch` funcs are the informer's `HandleDeltas` and `HandleBatchDeltas`, and whose
/// queue is the FIFO (`shared_informer.go`, `Run`). The port keeps those points open through
/// this trait. Its provided methods are the faithful behaviour ([`Faithful`] overrides none);
/// the deliberately wrong informers of `cache::broken` (feature `broken`) override one each.
pub(crate) trait Seam<K: Object>: Send + Sync + 'static {
    /// One change: `write` goes to the indexer, then the handlers hear `n` (keeps I1).
    fn write_then_notify(
        &self,
        indexer: &Store<K>,
        processor: &SharedProcessor<K>,
        write: StoreWrite<K>,
        n: Notification<K>,
    ) -> Result<(), super::KeyError> {
        indexer.apply(write)?;
        self.notify(processor, n);
        Ok(())
    }

    /// A batch: every write under one store lock ([`Store::apply_batch`]), then the
    /// notifications of the writes that succeeded, in order; the first error is returned.
    fn write_batch_then_notify(
        &self,
        indexer: &Store<K>,
        processor: &SharedProcessor<K>,
        writes: Vec<StoreWrite<K>>,
        notes: Vec<Notification<K>>,
    ) -> Result<(), super::KeyError> {
        let results = indexer.apply_batch(writes);
        let mut first_error = None;
        for (r, n) in results.into_iter().zip(notes) {
            match r {
                Ok(()) => self.notify(processor, n),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// upstream's informer `OnAdd`/`OnUpdate`/`OnDelete`: an update with an unchanged
    /// resourceVersion is a sync, for due handlers only (keeps I3).
    fn notify(&self, processor: &SharedProcessor<K>, n: Notification<K>) {
        let sync = match &n {
            Notification::Update { old, new } => {
                old.meta().resource_version == new.meta().resource_version
            }
            _ => false,
        };
        processor.distribute(n, sync);
    }

    /// The store the reflector writes into: the FIFO itself.
    fn reflector_store(&self, fifo: InformerFifo<K>) -> Box<dyn ReflectorStore<K>> {
        Box::new(fifo)
    }
}

/// The port of upstream: every provided method of [`Seam`].
pub(crate) struct Faithful;

impl<K: Object> Seam<K> for Faithful {}

/// How often [`wait_for_cache_sync`] looks again (client-go's `syncedPollPeriod`).
pub(crate) const SYNCED_POLL_PERIOD: Duration = Duration::from_millis(100);

/// Waits until `synced` is true: it looks at once, then every 100 ms (upstream's `syncedPollPeriod`)
/// (client-go v0.37.2 `tools/cache/shared_informer.go`, `WaitForCacheSync`, a
/// `wait.PollImmediateUntil`). So a wait that finds the cache unsynced at its first look ends
/// at the next tick after the sync, not at the sync: 100 ms after it began, for an informer
/// that lists in no time. Bound it with a timeout; it never ends on its own otherwise.
pub async fn wait_for_cache_sync(synced: impl Fn() -> bool) {
    if synced() {
        return;
    }
    let mut ticks =
        tokio::time::interval_at(Instant::now() + SYNCED_POLL_PERIOD, SYNCED_POLL_PERIOD);
    loop {
        ticks.tick().await;
        if synced() {
            return;
        }
    }
}

/// How to build an informer.
#[derive(Debug, Clone)]
pub struct InformerOptions {
    /// The default resync period for handlers, and the initial resync check period. Zero:
    /// never resync, whatever the handlers ask.
    pub resync_period: Duration,
    /// The feature gates: they choose the FIFO and the streaming-list mode.
    pub gates: FeatureGates,
    /// The object type's name, for the FIFO's name (`"*v1.ConfigMap"`).
    pub type_name: String,
    /// Reflector knobs (seed, page size, timeouts). The informer sets the resync fields and
    /// the streaming-list flag itself.
    pub reflector: ReflectorOptions,
    /// What a handler panic does: upstream's default re-raises it ([`HandlerPanic::Crash`]).
    pub handler_panic: HandlerPanic,
}

impl InformerOptions {
    /// Default options at the pinned version (Kubernetes 1.37, client-go v0.37.2: its gates,
    /// the same as v0.36's, and its batches). 1.38 is chosen through `gates`
    /// ([`FeatureGates::at_minor`]`(38)`).
    pub fn new(resync_period: Duration) -> Self {
        Self {
            resync_period,
            gates: FeatureGates::new(DEFAULT_EMULATED)
                .expect("the default emulated minor is supported"),
            type_name: "object".into(),
            reflector: ReflectorOptions::default(),
            handler_panic: HandlerPanic::Crash,
        }
    }
}

/// Why processing a Pop failed. Logged by the process loop, never retried (as upstream).
#[derive(Debug, thiserror::Error)]
enum ProcessError {
    /// An object's key could not be computed.
    #[error(transparent)]
    Key(#[from] super::KeyError),
    /// A delta type batch processing refuses (upstream: "Delta type %s is not supported in
    /// batch processing").
    #[error("Delta type {0} is not supported in batch processing")]
    NotBatchable(DeltaType),
    /// client-go v0.38's batch: the key errors of the deltas it skipped, joined, in front of
    /// the store's error if there was one.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Joined(Vec<String>),
}

/// Errors from handler registration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InformerError {
    /// Upstream: "handler … was not added to shared informer because it has stopped already".
    #[error("handler was not added to shared informer because it has stopped already")]
    Stopped,
}

struct Lifecycle {
    started: bool,
    stopped: bool,
    resync_check_period: Duration,
    default_handler_resync_period: Duration,
}

/// The shared index informer. Build it, add handlers, then `run` it (typically in a spawned
/// task holding an `Arc`).
pub struct SharedIndexInformer<K, L> {
    lw: Arc<L>,
    indexer: Store<K>,
    processor: Arc<SharedProcessor<K>>,
    choice: FifoChoice,
    options: InformerOptions,
    lifecycle: Mutex<Lifecycle>,
    /// Keeps I4.
    block_deltas: Mutex<()>,
    synced: SyncTracker,
    /// How changes reach the indexer and the handlers: [`Faithful`], or a broken informer's.
    seam: Arc<dyn Seam<K>>,
}

impl<K, L> SharedIndexInformer<K, L>
where
    K: Object + Clone,
    L: ListerWatcher<K>,
{
    /// An informer over `lw`.
    pub fn new(lw: L, options: InformerOptions) -> Self {
        Self::with_seam(lw, options, Arc::new(Faithful))
    }

    /// An informer over `lw` whose changes go through `seam`.
    pub(crate) fn with_seam(lw: L, options: InformerOptions, seam: Arc<dyn Seam<K>>) -> Self {
        let choice = select_fifo(&options.gates);
        Self {
            lw: Arc::new(lw),
            indexer: Store::new()
                .tracking_resource_version(choice.store_tracks_resource_version)
                .last_write_per_key(choice.batches_repeat_keys),
            processor: Arc::new(SharedProcessor::new(options.handler_panic)),
            choice,
            lifecycle: Mutex::new(Lifecycle {
                started: false,
                stopped: false,
                resync_check_period: options.resync_period,
                default_handler_resync_period: options.resync_period,
            }),
            options,
            block_deltas: Mutex::new(()),
            synced: SyncTracker::default(),
            seam,
        }
    }

    /// The cache. Its objects are the very `Arc`s handlers receive; never mutate them.
    pub fn indexer(&self) -> &Store<K> {
        &self.indexer
    }

    /// The FIFO the feature gates selected.
    pub fn fifo_choice(&self) -> FifoChoice {
        self.choice
    }

    /// How often the reflector's resync timer ticks.
    pub fn resync_check_period(&self) -> Duration {
        self.lifecycle.lock().resync_check_period
    }

    /// Every handler's effective resync period, in registration order.
    pub fn handler_resync_periods(&self) -> Vec<Duration> {
        self.processor.resync_periods()
    }

    /// True once the initial list has been processed.
    pub fn has_synced(&self) -> bool {
        self.synced.has_synced()
    }

    /// Resolves once [`SharedIndexInformer::has_synced`] is true.
    pub async fn wait_synced(&self) {
        self.synced.wait_synced().await
    }

    /// How many times its handlers have panicked, all handlers together.
    pub fn handler_panics(&self) -> u64 {
        self.processor.panics()
    }

    /// The text of the handler panic that crashed the informer ([`HandlerPanic::Crash`]).
    pub fn crash(&self) -> Option<String> {
        self.processor.crash().message()
    }

    /// Adds a handler with the informer's default resync period.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<HandlerRegistration, InformerError> {
        self.add_event_handler_with_resync(handler, None)
    }

    /// Adds a handler with its own resync period (upstream `AddEventHandlerWithOptions`):
    /// below 1 s it is raised to 1 s; below the check period it lowers the check period
    /// before start, and is raised to it after start.
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration, InformerError> {
        let mut lc = self.lifecycle.lock();
        if lc.stopped {
            return Err(InformerError::Stopped);
        }
        let mut period = resync.unwrap_or(lc.default_handler_resync_period);
        if !period.is_zero() {
            if period < MINIMUM_RESYNC_PERIOD {
                tracing::warn!(?period, "resyncPeriod is too small; raised to 1s");
                period = MINIMUM_RESYNC_PERIOD;
            }
            if period < lc.resync_check_period {
                if lc.started {
                    tracing::warn!(
                        ?period,
                        "resyncPeriod is smaller than resyncCheckPeriod and the informer has already started; raised"
                    );
                    period = lc.resync_check_period;
                } else {
                    lc.resync_check_period = period;
                    self.processor.resync_check_period_changed(period);
                }
            }
        }
        let effective = determine_resync_period(period, lc.resync_check_period);
        let handler: Arc<dyn ResourceEventHandler<K>> = Arc::new(handler);
        if !lc.started {
            return Ok(self.processor.add_listener(handler, period, effective));
        }
        // A late joiner: pause delta processing, replay the cache to it alone (keeps I4).
        let _blocked = self.block_deltas.lock();
        let reg = self.processor.add_listener(handler, period, effective);
        for obj in self.indexer.list() {
            self.processor
                .send_to(reg.id, Notification::Add { obj, initial: true });
        }
        if self.synced.has_synced() {
            reg.tracker.set_upstream_synced();
        }
        Ok(reg)
    }

    /// Removes a handler. Asynchronous, as upstream: notifications already buffered for it may
    /// still be delivered.
    pub fn remove_event_handler(&self, registration: &HandlerRegistration) -> bool {
        let _blocked = self.block_deltas.lock();
        self.processor.remove(registration.id)
    }

    /// Runs the informer until `shutdown` completes: the reflector, the delta processing and
    /// the handlers' tasks. A second call returns at once.
    ///
    /// # Panics
    /// Under [`HandlerPanic::Crash`] (the default), a handler's panic stops the informer and is
    /// resumed here, with its own payload (upstream's `HandleCrash` re-raising it).
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let check_period = {
            let mut lc = self.lifecycle.lock();
            if lc.started {
                tracing::warn!("the informer has already started");
                return;
            }
            lc.started = true;
            lc.resync_check_period
        };
        let fifo = self.choice.build(&self.options.type_name, &self.indexer);
        self.processor.start_listeners();
        let processor = self.processor.clone();
        let mut ropts = self.options.reflector.clone();
        ropts.resync_period = check_period;
        ropts.should_resync = Some(Arc::new(move || processor.should_resync(Instant::now())));
        ropts.use_watch_list = self.options.gates.enabled(Feature::WATCH_LIST_CLIENT);
        let store = self.seam.reflector_store(fifo.clone());
        let reflector = Reflector::new(self.lw.clone(), store, ropts);
        let process = async {
            loop {
                match self.process_next(&fifo).await {
                    Err(PopError::Closed) => return,
                    Err(PopError::Process(e)) => tracing::error!(error = %e, "processing deltas"),
                    Ok(()) => {}
                }
                if fifo.has_synced() {
                    self.mark_synced();
                }
            }
        };
        let synced = async {
            fifo.wait_synced().await;
            self.mark_synced();
            futures::future::pending::<()>().await
        };
        let crashed = self.processor.crash().clone();
        tokio::select! {
            _ = shutdown => {}
            _ = reflector.run(futures::future::pending()) => {}
            _ = process => {}
            _ = synced => {}
            message = crashed.crashed() => {
                tracing::error!(panic = %message, "an event handler panicked: the informer stops");
            }
        }
        fifo.close();
        self.processor.stop();
        self.lifecycle.lock().stopped = true;
        if let Some(payload) = crashed.take_payload() {
            std::panic::resume_unwind(payload);
        }
    }

    /// One Pop (upstream `processLoop`'s body): the informer asks for a batch when the gates
    /// select batch processing, and the FIFO decides (upstream's `QueueWithBatch` check). A
    /// batch of one goes to [`Self::handle_deltas`], as upstream's `PopBatch` does.
    async fn process_next(&self, fifo: &InformerFifo<K>) -> Result<(), PopError<ProcessError>> {
        fifo.pop_next(
            self.choice.batch_process,
            |batch, initial| self.handle_batch(batch, initial),
            |d, initial| Ok(self.handle_deltas(d, initial)?),
        )
        .await
    }

    /// [`Self::process_next`] without waiting: `None` if nothing is queued. For tests that
    /// step the informer one Pop at a time.
    #[cfg(test)]
    fn try_process_next(
        &self,
        fifo: &InformerFifo<K>,
    ) -> Option<Result<(), PopError<ProcessError>>> {
        fifo.try_pop_next(
            self.choice.batch_process,
            |batch, initial| self.handle_batch(batch, initial),
            |d, initial| Ok(self.handle_deltas(d, initial)?),
        )
    }

    fn mark_synced(&self) {
        if !self.synced.has_synced() {
            self.synced.set_upstream_synced();
            self.processor.set_upstream_synced();
        }
    }

    /// upstream `processDeltas`: write the indexer, then notify (keeps I1).
    fn handle_deltas(&self, deltas: &Deltas<K>, initial: bool) -> Result<(), super::KeyError> {
        let _blocked = self.block_deltas.lock();
        for d in deltas.iter() {
            match (d.delta_type, &d.object) {
                (
                    DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated,
                    DeltaObject::Object(obj),
                ) => self.upsert(obj.clone(), initial)?,
                (DeltaType::Deleted, obj) => {
                    let deleted = match obj {
                        DeltaObject::Tombstone(t) => DeletedObject::Tombstone(t.clone()),
                        DeltaObject::Object(o) => DeletedObject::Object(o.clone()),
                        _ => continue,
                    };
                    let write = match &deleted {
                        DeletedObject::Object(o) => StoreWrite::Delete(o.clone()),
                        DeletedObject::Tombstone(t) => StoreWrite::DeleteKey(t.key.clone()),
                    };
                    let n = Notification::Delete(deleted);
                    self.seam
                        .write_then_notify(&self.indexer, &self.processor, write, n)?;
                }
                (DeltaType::ReplacedAll, DeltaObject::ReplacedAll(info)) => {
                    let mut keep = std::collections::BTreeSet::new();
                    let mut pairs = Vec::with_capacity(info.objects.len());
                    for o in &info.objects {
                        keep.insert(self.indexer.key_of(o)?);
                        pairs.push((self.indexer.get(o)?, o.clone()));
                    }
                    let deletions: Vec<_> = self
                        .indexer
                        .list_keys()
                        .into_iter()
                        .filter(|k| !keep.contains(k))
                        .map(|key| DeletedFinalStateUnknown {
                            obj: self.indexer.get_by_key(&key),
                            key,
                        })
                        .collect();
                    self.indexer
                        .replace(info.objects.clone(), &info.resource_version)?;
                    for t in deletions {
                        self.notify(Notification::Delete(DeletedObject::Tombstone(t)));
                    }
                    for (old, new) in pairs {
                        match old {
                            Some(old) => self.notify(Notification::Update { old, new }),
                            None => self.notify(Notification::Add { obj: new, initial }),
                        }
                    }
                }
                (DeltaType::SyncAll, _) => {
                    for obj in self.indexer.list() {
                        self.notify(Notification::Update {
                            old: obj.clone(),
                            new: obj,
                        });
                    }
                    break;
                }
                (DeltaType::Bookmark, DeltaObject::Bookmark(b)) => {
                    self.indexer.bookmark(&b.resource_version)
                }
                (t, _) => tracing::error!(delta_type = %t, "unexpected delta object"),
            }
        }
        Ok(())
    }

    /// upstream `processDeltasInBatch`: every write of the batch under one store lock
    /// ([`Store::apply_batch`]), and only *then* the notifications, in order. So while the
    /// first object's notification is distributed, the cache already holds the batch's last
    /// states (I1 still holds). Only Added, Updated, Deleted, Replaced and Sync are accepted;
    /// the FIFO never batches the others (see [`DeltaType::is_batchable`]). After a failed
    /// write only the successful writes are notified, and the first error is returned.
    fn handle_batch(&self, batch: &[Delta<K>], initial: bool) -> Result<(), ProcessError> {
        if self.choice.batches_repeat_keys {
            return self.handle_batch_v038(batch, initial);
        }
        let _blocked = self.block_deltas.lock();
        let mut writes = Vec::with_capacity(batch.len());
        let mut notes = Vec::with_capacity(batch.len());
        for d in batch {
            match (d.delta_type, &d.object) {
                (
                    DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated,
                    DeltaObject::Object(obj),
                ) => {
                    // A key error here fails the write below too, so it is never notified.
                    let old = self.indexer.get(obj).ok().flatten();
                    notes.push(upsert_notification(old, obj, initial));
                    writes.push(StoreWrite::Update(obj.clone()));
                }
                (DeltaType::Deleted, o @ (DeltaObject::Object(_) | DeltaObject::Tombstone(_))) => {
                    let (write, note) = deletion(o);
                    writes.push(write);
                    notes.push(note);
                }
                (t @ (DeltaType::ReplacedAll | DeltaType::SyncAll | DeltaType::Bookmark), _) => {
                    return Err(ProcessError::NotBatchable(t));
                }
                (t, _) => tracing::error!(delta_type = %t, "unexpected delta object"),
            }
        }
        Ok(self
            .seam
            .write_batch_then_notify(&self.indexer, &self.processor, writes, notes)?)
    }

    /// client-go v0.38's `processDeltasInBatch`: a batch may hold a key more than once, so a
    /// delta's old object is the object of the key's previous delta in the batch (the
    /// store's only for its first; a key deleted earlier in the batch is absent, and its next
    /// delta an add). A delta whose key fails is skipped, no write and no notification, and
    /// the rest go on; the key errors are returned joined. The writes still all go under one
    /// store lock before the first notification, so a handler may find a later state of its
    /// own object in the cache.
    fn handle_batch_v038(&self, batch: &[Delta<K>], initial: bool) -> Result<(), ProcessError> {
        let _blocked = self.block_deltas.lock();
        let mut in_batch: std::collections::HashMap<String, Option<Arc<K>>> =
            std::collections::HashMap::with_capacity(batch.len());
        let mut key_errors = Vec::new();
        let mut writes = Vec::with_capacity(batch.len());
        let mut notes = Vec::with_capacity(batch.len());
        for d in batch {
            let key = match &d.object {
                DeltaObject::Object(o) => self.indexer.key_of(o),
                DeltaObject::Tombstone(t) => Ok(t.key.clone()),
                _ => return Err(ProcessError::NotBatchable(d.delta_type)),
            };
            let key = match key {
                Ok(key) => key,
                Err(e) => {
                    key_errors.push(e.to_string());
                    continue;
                }
            };
            match (d.delta_type, &d.object) {
                (
                    DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated,
                    DeltaObject::Object(obj),
                ) => {
                    let old = match in_batch.insert(key.clone(), Some(obj.clone())) {
                        Some(previous) => previous,
                        None => self.indexer.get_by_key(&key),
                    };
                    notes.push(upsert_notification(old, obj, initial));
                    writes.push(StoreWrite::Update(obj.clone()));
                }
                (DeltaType::Deleted, o @ (DeltaObject::Object(_) | DeltaObject::Tombstone(_))) => {
                    in_batch.insert(key, None);
                    let (write, note) = deletion(o);
                    writes.push(write);
                    notes.push(note);
                }
                (t, _) => return Err(ProcessError::NotBatchable(t)),
            }
        }
        let stored =
            self.seam
                .write_batch_then_notify(&self.indexer, &self.processor, writes, notes);
        if let Err(e) = stored {
            key_errors.push(e.to_string());
        }
        match key_errors.is_empty() {
            true => Ok(()),
            false => Err(ProcessError::Joined(key_errors)),
        }
    }

    fn upsert(&self, obj: Arc<K>, initial: bool) -> Result<(), super::KeyError> {
        let n = upsert_notification(self.indexer.get(&obj)?, &obj, initial);
        self.seam
            .write_then_notify(&self.indexer, &self.processor, StoreWrite::Update(obj), n)
    }

    /// A notification of a write already made (through the seam).
    fn notify(&self, n: Notification<K>) {
        self.seam.notify(&self.processor, n);
    }
}

/// The notification of writing `obj` over `old`: an update, or an add when there was none.
fn upsert_notification<K>(old: Option<Arc<K>>, obj: &Arc<K>, initial: bool) -> Notification<K> {
    match old {
        Some(old) => Notification::Update {
            old,
            new: obj.clone(),
        },
        None => Notification::Add {
            obj: obj.clone(),
            initial,
        },
    }
}

/// The store write and notification of a Deleted delta's object or tombstone.
fn deletion<K>(o: &DeltaObject<K>) -> (StoreWrite<K>, Notification<K>) {
    match o {
        DeltaObject::Tombstone(t) => (
            StoreWrite::DeleteKey(t.key.clone()),
            Notification::Delete(DeletedObject::Tombstone(t.clone())),
        ),
        DeltaObject::Object(o) => (
            StoreWrite::Delete(o.clone()),
            Notification::Delete(DeletedObject::Object(o.clone())),
        ),
        _ => unreachable!("only a Deleted delta's object or tombstone is deleted"),
    }
}
