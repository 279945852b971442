//! DeltaFIFO against a model written from client-go v0.36.3 `tools/cache/delta_fifo.go`: one
//! list of (key, deltas) in queue order, searched from the front.
//!
//! Compared after every step: what the call returned (ok or error), what a Pop handed out with
//! its initial-list flag, the queued keys in order, `len`, `has_synced` and `is_closed`. The
//! order of Replace's deletions of queued keys is the port's (queue order; upstream iterates a
//! Go map), the one named difference the model follows.

use std::{cell::RefCell, collections::BTreeSet, sync::Arc};

use controlloop::cache::{DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, Fifo, KeyListerGetter};
use k8s_openapi::api::core::v1::ConfigMap;

use super::fifo::{
    BAD, D, FifoOp, KnownStore, NAMES, Ob, Payload, Popped, Reached, Seen, decode_op, key_fn,
    popped, record, same,
};
use super::{Bytes, diverged};

/// How the FIFO is built.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Whether it consults known objects (the informer's indexer).
    pub known: bool,
    /// Whether relist items are `Replaced` (as the informer sets it) rather than `Sync`.
    pub emit_replaced: bool,
}

/// Decodes fuzzer bytes: the first byte picks the configuration, the rest the operations.
pub fn decode(data: &[u8]) -> (Config, Vec<FifoOp>) {
    let mut b = Bytes::new(data);
    let c = b.byte();
    let config = Config {
        known: c & 1 == 1,
        emit_replaced: c & 2 == 2,
    };
    (config, b.ops(decode_op))
}

/// The reference.
#[derive(Debug)]
pub struct Model {
    /// Keys in Pop order, each with its deltas, oldest first.
    queue: Vec<(u8, Vec<D>)>,
    populated: bool,
    initial: usize,
    synced: bool,
    closed: bool,
    emit_replaced: bool,
    known: Option<Arc<KnownStore>>,
}

impl Model {
    fn new(config: Config, known: Option<Arc<KnownStore>>) -> Model {
        Model {
            queue: Vec::new(),
            populated: false,
            initial: 0,
            synced: false,
            closed: false,
            emit_replaced: config.emit_replaced,
            known,
        }
    }

    fn check_synced(&mut self) {
        if self.populated && self.initial == 0 {
            self.synced = true;
        }
    }

    fn queued(&self, key: u8) -> bool {
        self.queue.iter().any(|(k, _)| *k == key)
    }

    /// Appends to the key's list (a new key goes to the back), then dedups the last two.
    fn queue_action(&mut self, key: u8, d: D) {
        match self.queue.iter_mut().find(|(k, _)| *k == key) {
            None => self.queue.push((key, vec![d])),
            Some((_, list)) => {
                list.push(d);
                let n = list.len();
                if list[n - 2].ty == DeltaType::Deleted && list[n - 1].ty == DeltaType::Deleted {
                    // Keep the newer if the older is a tombstone, else the older.
                    if matches!(list[n - 2].payload, Payload::Tomb(..)) {
                        list.remove(n - 2);
                    } else {
                        list.pop();
                    }
                }
            }
        }
    }

    fn produce(&mut self, ty: DeltaType, o: Ob) -> Result<(), ()> {
        self.populated = true;
        self.check_synced();
        if o.key == BAD {
            return Err(());
        }
        self.queue_action(o.key, D::obj(ty, o));
        Ok(())
    }

    /// Returns whether the delete was queued.
    fn delete(&mut self, o: Ob) -> Result<bool, ()> {
        if o.key == BAD {
            return Err(());
        }
        self.populated = true;
        self.check_synced();
        let queued = self.queued(o.key);
        let known = match &self.known {
            None => false,
            Some(store) => store.get(o.key) != Ok(None),
        };
        if !queued && !known {
            return Ok(false);
        }
        self.queue_action(o.key, D::obj(DeltaType::Deleted, o));
        Ok(true)
    }

    fn replace(&mut self, list: &[Ob]) -> Result<(), ()> {
        let ty = if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut keys = BTreeSet::new();
        for o in list {
            if o.key == BAD {
                return Err(());
            }
            keys.insert(o.key);
            self.queue_action(o.key, D::obj(ty, *o));
        }
        let mut deletions = 0;
        let missing: Vec<(u8, Option<Ob>)> = self
            .queue
            .iter()
            .filter(|(k, _)| !keys.contains(k))
            .map(|(k, list)| (*k, list.last().and_then(D::last_object)))
            .collect();
        for (k, last) in missing {
            self.queue_action(k, D::tomb(k, last));
            deletions += 1;
        }
        if let Some(store) = self.known.clone() {
            for k in store.keys() {
                if !keys.contains(&k) && !self.queued(k) {
                    self.queue_action(k, D::tomb(k, store.get(k).ok().flatten()));
                    deletions += 1;
                }
            }
        }
        if !self.populated {
            self.populated = true;
            self.initial = keys.len() + deletions;
            self.check_synced();
        }
        Ok(())
    }

    fn resync(&mut self) {
        let Some(store) = self.known.clone() else {
            return;
        };
        for k in store.keys() {
            if let Ok(Some(o)) = store.get(k)
                && !self.queued(k)
            {
                self.queue_action(k, D::obj(DeltaType::Sync, o));
            }
        }
    }

    fn pop(&mut self, fail: bool) -> Popped {
        if self.queue.is_empty() {
            return if self.closed {
                Popped::Closed
            } else {
                Popped::Nothing
            };
        }
        let initial = !self.synced;
        let (_, deltas) = self.queue.remove(0);
        if self.initial > 0 {
            self.initial -= 1;
            self.check_synced();
        }
        Popped::Deltas {
            deltas,
            initial,
            single: true,
            failed: fail,
        }
    }
}

/// Everything observable about a DeltaFIFO between operations.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    keys: Vec<String>,
    len: usize,
    is_empty: bool,
    name: String,
    synced: bool,
    closed: bool,
}

fn observe_core(f: &DeltaFifo<ConfigMap>) -> Observed {
    Observed {
        keys: f.queued_keys(),
        len: f.len(),
        is_empty: f.is_empty(),
        name: f.name().to_owned(),
        synced: f.has_synced(),
        closed: f.is_closed(),
    }
}

fn observe_model(m: &Model) -> Observed {
    Observed {
        keys: m
            .queue
            .iter()
            .map(|(k, _)| NAMES[usize::from(*k)].to_owned())
            .collect(),
        len: m.queue.len(),
        is_empty: m.queue.is_empty(),
        name: "fuzz".to_owned(),
        synced: m.synced,
        closed: m.closed,
    }
}

/// The options for the real FIFO: the key function and, if configured, `known`.
pub fn options(config: Config, known: Option<Arc<KnownStore>>) -> DeltaFifoOptions<ConfigMap> {
    DeltaFifoOptions {
        name: "fuzz".into(),
        key_function: Some(key_fn()),
        known_objects: known.map(|k| k as Arc<dyn KeyListerGetter<ConfigMap>>),
        emit_delta_type_replaced: config.emit_replaced,
    }
}

/// Runs `ops` on the FIFO `make` builds and on the model side by side, then closes both and
/// pops everything left. `Err` names the first step where they differ.
pub fn check(
    config: Config,
    ops: &[FifoOp],
    make: impl FnOnce(DeltaFifoOptions<ConfigMap>) -> DeltaFifo<ConfigMap>,
) -> Result<Reached, String> {
    let store = Arc::new(KnownStore::default());
    let known = config.known.then(|| store.clone());
    let fifo = make(options(config, known.clone()));
    let mut model = Model::new(config, known);
    let mut reached = Reached::default();
    let drain =
        std::iter::once(FifoOp::Close).chain(std::iter::repeat(FifoOp::Pop { fail: false }));
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
            FifoOp::Delete(o) => {
                let (c, m) = (fifo.delete(o.object()), model.delete(*o));
                reached.suppressed += usize::from(m == Ok(false));
                same(c.is_ok(), m.is_ok(), &mut reached)
            }
            FifoOp::Replace(list, rv) => {
                let objects = list.iter().map(|o| o.object()).collect();
                same(
                    fifo.replace(objects, &rv.to_string()).is_ok(),
                    model.replace(list).is_ok(),
                    &mut reached,
                )
            }
            FifoOp::Resync => {
                model.resync();
                same(fifo.resync().is_ok(), true, &mut reached)
            }
            FifoOp::Bookmark(rv) => {
                same(fifo.bookmark(&rv.to_string()).is_ok(), true, &mut reached)
            }
            FifoOp::Pop { fail } | FifoOp::PopBatch { fail } => {
                let seen: Seen = RefCell::new(None);
                let process = record(&seen, *fail, true);
                let r = fifo.try_pop(|d: &Deltas<ConfigMap>, initial| process(&d.0, initial));
                let c = popped(r.map(|r| r.map(|d| d.0)), &seen)
                    .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
                let m = model.pop(*fail);
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
        let (c, m) = (observe_core(&fifo), observe_model(&model));
        if c != m {
            return Err(diverged(i, &op, "state", &c, &m));
        }
    }
    Ok(reached)
}
