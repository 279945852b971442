//! RealFIFO against a model written from client-go v0.36.3 `tools/cache/the_real_fifo.go`: one
//! list of deltas in arrival order.
//!
//! Compared after every step: what the call returned (ok or error), what a Pop or PopBatch
//! handed out with its initial-list flag and which processing function got it, every queued
//! delta in order, `len`, `has_synced` and `is_closed`.

use std::{cell::RefCell, collections::BTreeSet, sync::Arc};

use controlloop::cache::{
    DeltaType, Deltas, Fifo, KeyListerGetter, RealFifo, RealFifoOptions, RealFifoOptionsError,
};
use k8s_openapi::api::core::v1::ConfigMap;

use super::fifo::{
    BAD, D, FifoOp, KnownStore, Ob, Payload, Popped, Reached, Seen, decode_op, key_fn, popped,
    record, same,
};
use super::{Bytes, diverged};

/// How the FIFO is built: the modes upstream accepts.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `AtomicEvents` (then no known objects); otherwise known objects.
    pub atomic: bool,
    /// `EmitDeltaTypeBookmark` (atomic only).
    pub bookmarks: bool,
    /// `UnlockWhileProcessing` (atomic only).
    pub unlock: bool,
    /// The largest batch.
    pub batch_size: usize,
}

/// Decodes fuzzer bytes: the first byte picks the configuration, the rest the operations.
pub fn decode(data: &[u8]) -> (Config, Vec<FifoOp>) {
    let mut b = Bytes::new(data);
    let c = b.byte();
    let atomic = c & 1 == 1;
    let config = Config {
        atomic,
        bookmarks: atomic && c & 2 == 2,
        unlock: atomic && c & 4 == 4,
        batch_size: usize::from(c >> 3 & 3) + 1,
    };
    (config, b.ops(decode_op))
}

/// The reference.
#[derive(Debug)]
pub struct Model {
    items: Vec<D>,
    populated: bool,
    initial: usize,
    synced: bool,
    closed: bool,
    config: Config,
    known: Option<Arc<KnownStore>>,
}

/// The delta types a batch may hold together with others.
fn batchable(ty: DeltaType) -> bool {
    matches!(
        ty,
        DeltaType::Sync
            | DeltaType::Replaced
            | DeltaType::Added
            | DeltaType::Updated
            | DeltaType::Deleted
    )
}

impl Model {
    fn check_synced(&mut self) {
        if self.populated && self.initial == 0 {
            self.synced = true;
        }
    }

    fn produce(&mut self, ty: DeltaType, o: Ob) -> Result<(), ()> {
        self.populated = true;
        self.check_synced();
        if o.key == BAD {
            return Err(());
        }
        self.items.push(D::obj(ty, o));
        Ok(())
    }

    fn replace(&mut self, list: &[Ob], rv: u8) -> Result<(), ()> {
        if self.config.atomic {
            self.items.push(D {
                ty: DeltaType::ReplacedAll,
                payload: Payload::All(rv.to_string(), list.to_vec()),
            });
        } else {
            if list.iter().any(|o| o.key == BAD) {
                return Err(());
            }
            let new: BTreeSet<u8> = list.iter().map(|o| o.key).collect();
            // Queued keys in order of first appearance, with their last queued delta.
            let mut queued: Vec<(u8, D)> = Vec::new();
            for d in &self.items {
                let k = d.key().expect("a non-atomic FIFO holds keyed deltas");
                match queued.iter_mut().find(|(q, _)| *q == k) {
                    Some((_, last)) => *last = d.clone(),
                    None => queued.push((k, d.clone())),
                }
            }
            for (k, last) in &queued {
                if !new.contains(k) && last.ty != DeltaType::Deleted {
                    self.items.push(D::tomb(*k, last.last_object()));
                }
            }
            let store = self.known.clone().expect("non-atomic: known objects");
            for k in store.keys() {
                if !new.contains(&k) && !queued.iter().any(|(q, _)| *q == k) {
                    self.items.push(D::tomb(k, store.get(k).ok().flatten()));
                }
            }
            for o in list {
                self.items.push(D::obj(DeltaType::Replaced, *o));
            }
        }
        if !self.populated {
            self.populated = true;
            self.initial = self.items.len();
            self.check_synced();
        }
        Ok(())
    }

    fn resync(&mut self) {
        if self.config.atomic {
            self.items.push(D {
                ty: DeltaType::SyncAll,
                payload: Payload::SyncAll,
            });
            return;
        }
        let store = self.known.clone().expect("non-atomic: known objects");
        let queued: BTreeSet<u8> = self.items.iter().filter_map(D::key).collect();
        for k in store.keys() {
            if let Ok(Some(o)) = store.get(k)
                && !queued.contains(&k)
            {
                self.items.push(D::obj(DeltaType::Sync, o));
            }
        }
    }

    fn bookmark(&mut self, rv: u8) {
        if self.config.bookmarks {
            self.items.push(D {
                ty: DeltaType::Bookmark,
                payload: Payload::Bookmark(rv.to_string()),
            });
        }
    }

    /// How many head deltas the next batch takes.
    fn batch_len(&self) -> usize {
        let mut keys = BTreeSet::new();
        let mut n = 0;
        for (i, d) in self.items.iter().enumerate() {
            let past_initial = self.initial > 0 && i >= self.initial;
            if i == self.config.batch_size || past_initial {
                break;
            }
            if !batchable(d.ty) {
                return n.max(1);
            }
            match d.key() {
                None => return n + 1,
                Some(k) if !keys.insert(k) => break,
                Some(_) => n += 1,
            }
        }
        n
    }

    fn pop(&mut self, fail: bool, batch: bool) -> Popped {
        if self.items.is_empty() {
            return if self.closed {
                Popped::Closed
            } else {
                Popped::Nothing
            };
        }
        let initial = !self.synced;
        let n = if batch { self.batch_len() } else { 1 };
        let deltas: Vec<D> = self.items.drain(..n).collect();
        if self.initial > 0 {
            self.initial -= n;
            self.check_synced();
        }
        Popped::Deltas {
            deltas,
            initial,
            single: n == 1,
            failed: fail,
        }
    }
}

/// Everything observable about a RealFIFO between operations.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    items: Vec<D>,
    len: usize,
    is_empty: bool,
    name: String,
    synced: bool,
    closed: bool,
}

/// The options for the real FIFO in `config`'s mode, with the key function.
pub fn options(config: Config, known: Option<Arc<KnownStore>>) -> RealFifoOptions<ConfigMap> {
    RealFifoOptions {
        name: "fuzz".into(),
        key_function: Some(key_fn()),
        known_objects: known.map(|k| k as Arc<dyn KeyListerGetter<ConfigMap>>),
        atomic_events: config.atomic,
        unlock_while_processing: config.unlock,
        emit_delta_type_bookmark: config.bookmarks,
        batch_size: config.batch_size,
        batches_repeat_keys: false, // the model keeps v0.37.2's batches
    }
}

/// Runs `ops` on the FIFO `make` builds and on the model side by side, then closes both and
/// pops everything left. `Err` names the first step where they differ.
pub fn check(
    config: Config,
    ops: &[FifoOp],
    make: impl FnOnce(RealFifoOptions<ConfigMap>) -> Result<RealFifo<ConfigMap>, RealFifoOptionsError>,
) -> Result<Reached, String> {
    let store = Arc::new(KnownStore::default());
    let known = (!config.atomic).then(|| store.clone());
    let fifo = make(options(config, known.clone())).map_err(|e| format!("{config:?}: {e}"))?;
    let mut model = Model {
        items: Vec::new(),
        populated: false,
        initial: 0,
        synced: false,
        closed: false,
        config,
        known,
    };
    let mut reached = Reached::default();
    let drain =
        std::iter::once(FifoOp::Close).chain(std::iter::repeat(FifoOp::PopBatch { fail: false }));
    for (i, op) in ops.iter().cloned().chain(drain).enumerate() {
        let closing = i >= ops.len();
        let result = match &op {
            FifoOp::Add(o) => same(
                fifo.add(o.object()).is_ok(),
                model.produce(DeltaType::Added, *o).is_ok(),
                &mut reached,
            ),
            FifoOp::Update(o) => same(
                fifo.update(o.object()).is_ok(),
                model.produce(DeltaType::Updated, *o).is_ok(),
                &mut reached,
            ),
            FifoOp::Delete(o) => same(
                fifo.delete(o.object()).is_ok(),
                model.produce(DeltaType::Deleted, *o).is_ok(),
                &mut reached,
            ),
            FifoOp::Replace(list, rv) => {
                let objects = list.iter().map(|o| o.object()).collect();
                same(
                    fifo.replace(objects, &rv.to_string()).is_ok(),
                    model.replace(list, *rv).is_ok(),
                    &mut reached,
                )
            }
            FifoOp::Resync => {
                model.resync();
                same(fifo.resync().is_ok(), true, &mut reached)
            }
            FifoOp::Bookmark(rv) => {
                model.bookmark(*rv);
                same(fifo.bookmark(&rv.to_string()).is_ok(), true, &mut reached)
            }
            FifoOp::Pop { fail } | FifoOp::PopBatch { fail } => {
                let batch = matches!(op, FifoOp::PopBatch { .. });
                let seen: Seen = RefCell::new(None);
                let c = if batch {
                    let r = fifo.try_pop_batch(
                        record(&seen, *fail, false),
                        |d: &Deltas<ConfigMap>, initial| record(&seen, *fail, true)(&d.0, initial),
                    );
                    popped(r, &seen)
                } else {
                    let process = record(&seen, *fail, true);
                    let r = fifo.try_pop(|d: &Deltas<ConfigMap>, initial| process(&d.0, initial));
                    popped(r.map(|r| r.map(|d| d.0)), &seen)
                };
                let c = c.map_err(|e| format!("step {i} ({op:?}): {e}"))?;
                let m = model.pop(*fail, batch);
                reached.count(&m);
                if c != m {
                    return Err(diverged(i, &op, "pop", &c, &m));
                }
                if closing && m == Popped::Closed {
                    break;
                }
                Ok(())
            }
            FifoOp::Close => {
                fifo.close();
                model.closed = true;
                Ok(())
            }
            FifoOp::Known(k, known) => {
                store.set(*k, *known);
                Ok(())
            }
        };
        result.map_err(|(c, m)| diverged(i, &op, "result", &c, &m))?;
        let c = Observed {
            items: fifo.queued().iter().map(D::of).collect::<Vec<_>>(),
            len: fifo.len(),
            is_empty: fifo.is_empty(),
            name: fifo.name().to_owned(),
            synced: fifo.has_synced(),
            closed: fifo.is_closed(),
        };
        let m = Observed {
            items: model.items.clone(),
            len: model.items.len(),
            is_empty: model.items.is_empty(),
            name: "fuzz".to_owned(),
            synced: model.synced,
            closed: model.closed,
        };
        if c != m {
            return Err(diverged(i, &op, "state", &c, &m));
        }
    }
    Ok(reached)
}
