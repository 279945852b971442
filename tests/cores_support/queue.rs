//! The workqueue core ([`QueueCore`]) against a model of client-go's `Typed[T]`
//! (`util/workqueue/queue.go`): a list for the queue and two ordered sets.
//!
//! Compared after every step: what `add`, `get` and `done` returned (the port's outcome enums,
//! which the model derives from upstream's branches), `len`, the dirty and processing sizes,
//! each key's dirty and processing membership, the shutdown and drain flags, and the core's
//! own invariant check (I1–I3). A key handed out while a worker still holds it is a
//! divergence on its own, whatever the model says.

use std::collections::{BTreeSet, VecDeque};

use controlloop::workqueue::{QueueAdd, QueueCore, QueueDone, QueueGet};

use super::{Bytes, diverged};

/// The core under test: the faithful [`QueueCore`], or a deliberately broken one built around
/// it (its queries are the faithful core's, through [`CoreUnderTest::view`]).
pub trait CoreUnderTest: std::fmt::Debug {
    /// The core's queries.
    fn view(&self) -> &QueueCore<u8>;
    /// `add`.
    fn add(&mut self, k: u8) -> QueueAdd;
    /// `get`.
    fn get(&mut self) -> QueueGet<u8>;
    /// `done`.
    fn done(&mut self, k: &u8) -> QueueDone;
    /// `shut_down(drain)`.
    fn shut_down(&mut self, drain: bool);
}

/// Odd keys are added by reference (`add_ref`), even ones by value (`add`): both paths run
/// against the model.
impl CoreUnderTest for QueueCore<u8> {
    fn view(&self) -> &QueueCore<u8> {
        self
    }
    fn add(&mut self, k: u8) -> QueueAdd {
        if k % 2 == 1 {
            QueueCore::add_ref(self, &k)
        } else {
            QueueCore::add(self, k)
        }
    }
    fn get(&mut self) -> QueueGet<u8> {
        QueueCore::get(self)
    }
    fn done(&mut self, k: &u8) -> QueueDone {
        QueueCore::done(self, k)
    }
    fn shut_down(&mut self, drain: bool) {
        QueueCore::shut_down(self, drain)
    }
}

#[cfg(feature = "broken")]
impl CoreUnderTest for controlloop::workqueue::broken::QueueCoreWithoutProcessingSet<u8> {
    fn view(&self) -> &QueueCore<u8> {
        self
    }
    fn add(&mut self, k: u8) -> QueueAdd {
        Self::add(self, k)
    }
    fn get(&mut self) -> QueueGet<u8> {
        Self::get(self)
    }
    fn done(&mut self, k: &u8) -> QueueDone {
        Self::done(self, k)
    }
    fn shut_down(&mut self, drain: bool) {
        Self::shut_down(self, drain)
    }
}

/// Keys are `0..KEYS`: few, so that adds collide with queued and held keys.
pub const KEYS: u8 = 6;

/// One operation on the queue.
#[derive(Debug, Clone)]
pub enum QueueOp {
    /// `add(key)`.
    Add(u8),
    /// `get()`; an item handed out is held until a `Done` names it.
    Get,
    /// `done` for the n-th held item (modulo how many are held); nothing if none is.
    Done(usize),
    /// `done` for a key that is not held (misuse): must change nothing.
    StrayDone(u8),
    /// `shut_down()`.
    ShutDown,
    /// `shut_down_with_drain()` (its flag; the shell is what waits).
    ShutDownWithDrain,
}

/// Decodes fuzzer bytes: one byte picks the operation, a second its key or index.
pub fn decode(data: &[u8]) -> Vec<QueueOp> {
    Bytes::new(data).ops(|b| match b.byte() % 16 {
        0..=5 => QueueOp::Add(b.byte() % KEYS),
        6..=9 => QueueOp::Get,
        10..=12 => QueueOp::Done(b.byte().into()),
        13 => QueueOp::StrayDone(b.byte() % KEYS),
        14 => QueueOp::ShutDown,
        _ => QueueOp::ShutDownWithDrain,
    })
}

/// The reference, written from `Typed[T]`'s `Add`, `Get`, `Done`, `ShutDown` and
/// `ShutDownWithDrain`, plus the port's two named differences: a `done` for an item that is not
/// processing changes nothing, and the drain is over at the first `done` that empties the
/// processing set (the core's I4).
#[derive(Debug, Default)]
pub struct Model {
    queue: VecDeque<u8>,
    dirty: BTreeSet<u8>,
    processing: BTreeSet<u8>,
    shutting_down: bool,
    drain: bool,
}

impl Model {
    fn add(&mut self, k: u8) -> QueueAdd {
        if self.shutting_down {
            return QueueAdd::ShuttingDown;
        }
        if self.dirty.contains(&k) {
            return QueueAdd::Coalesced;
        }
        self.dirty.insert(k);
        if self.processing.contains(&k) {
            return QueueAdd::DirtyWhileProcessing;
        }
        self.queue.push_back(k);
        QueueAdd::Queued
    }

    fn get(&mut self) -> QueueGet<u8> {
        match self.queue.pop_front() {
            Some(k) => {
                self.processing.insert(k);
                self.dirty.remove(&k);
                QueueGet::Item(k)
            }
            None if self.shutting_down => QueueGet::ShutDown,
            None => QueueGet::Empty,
        }
    }

    fn done(&mut self, k: u8) -> QueueDone {
        if !self.processing.remove(&k) {
            return QueueDone::NotProcessing;
        }
        let requeued = self.dirty.contains(&k);
        if requeued {
            self.queue.push_back(k);
        }
        let last = self.processing.is_empty();
        if last && self.shutting_down {
            self.drain = false;
        }
        match (requeued, last) {
            (true, false) => QueueDone::Requeued,
            (true, true) => QueueDone::RequeuedLast,
            (false, true) => QueueDone::ReleasedLast,
            (false, false) => QueueDone::Released,
        }
    }

    fn shut_down(&mut self, drain: bool) {
        self.drain = drain;
        self.shutting_down = true;
    }

    /// Whether a `ShutDownWithDrain` caller would still be waiting.
    fn draining(&self) -> bool {
        self.drain && self.shutting_down && !self.processing.is_empty()
    }
}

/// Everything observable about a queue between operations.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    len: usize,
    is_empty: bool,
    dirty: usize,
    processing: usize,
    shutting_down: bool,
    draining: bool,
    /// Per key: (dirty, processing).
    keys: Vec<(bool, bool)>,
}

fn seen_core(q: &QueueCore<u8>) -> Seen {
    Seen {
        len: q.len(),
        is_empty: q.is_empty(),
        dirty: q.dirty_len(),
        processing: q.processing_len(),
        shutting_down: q.shutting_down(),
        draining: q.draining(),
        keys: (0..KEYS)
            .map(|k| (q.is_dirty(&k), q.is_processing(&k)))
            .collect(),
    }
}

fn seen_model(m: &Model) -> Seen {
    Seen {
        len: m.queue.len(),
        is_empty: m.queue.is_empty(),
        dirty: m.dirty.len(),
        processing: m.processing.len(),
        shutting_down: m.shutting_down,
        draining: m.draining(),
        keys: (0..KEYS)
            .map(|k| (m.dirty.contains(&k), m.processing.contains(&k)))
            .collect(),
    }
}

/// What a run exercised, so a test can check that its generator reaches every branch.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reached {
    /// Adds by outcome: queued, dirty while processing, coalesced, dropped in shutdown.
    pub adds: [usize; 4],
    /// Dones by outcome: requeued, requeued last, released last, released, not processing.
    pub dones: [usize; 5],
    /// Drains that ended at a `done` (draining before, not after).
    pub drains_ended: usize,
}

impl Reached {
    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: Reached) {
        for (a, b) in self.adds.iter_mut().zip(other.adds) {
            *a += b;
        }
        for (a, b) in self.dones.iter_mut().zip(other.dones) {
            *a += b;
        }
        self.drains_ended += other.drains_ended;
    }
}

/// Runs `ops` on `core` and on the model side by side, then shuts both down and drains them.
/// `Err` names the first step where they differ.
pub fn check(ops: &[QueueOp], mut core: impl CoreUnderTest) -> Result<Reached, String> {
    let mut model = Model::default();
    let mut held: Vec<u8> = Vec::new();
    let mut reached = Reached::default();
    for i in 0.. {
        // The operations, a shutdown, then gets and dones until a get finds nothing.
        let op = match ops.get(i) {
            Some(op) => op.clone(),
            None if i == ops.len() => QueueOp::ShutDown,
            None if held.is_empty() => QueueOp::Get,
            None => QueueOp::Done(0),
        };
        let last = i > ops.len() && matches!(op, QueueOp::Get) && model.queue.is_empty();
        let was_draining = model.draining();
        step(&op, i, &mut core, &mut model, &mut held, &mut reached)?;
        if was_draining && !model.draining() && matches!(op, QueueOp::Done(_)) {
            reached.drains_ended += 1;
        }
        let (c, m) = (seen_core(core.view()), seen_model(&model));
        if c != m {
            return Err(diverged(i, &op, "state", &c, &m));
        }
        core.view()
            .check_invariants()
            .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
        if last {
            break;
        }
    }
    // Nothing lost, nothing held: the shutdown handed out everything that was dirty.
    let q = core.view();
    if q.is_empty() && q.dirty_len() == 0 && q.processing_len() == 0 {
        Ok(reached)
    } else {
        Err(format!("the drain left work behind: {core:?}"))
    }
}

fn step(
    op: &QueueOp,
    i: usize,
    core: &mut impl CoreUnderTest,
    model: &mut Model,
    held: &mut Vec<u8>,
    reached: &mut Reached,
) -> Result<(), String> {
    match *op {
        QueueOp::Add(k) => {
            let (c, m) = (core.add(k), model.add(k));
            let entered_dirty = matches!(m, QueueAdd::Queued | QueueAdd::DirtyWhileProcessing);
            if c != m || c.entered_dirty() != entered_dirty {
                return Err(diverged(i, op, "add", &c, &m));
            }
            reached.adds[match m {
                QueueAdd::Queued => 0,
                QueueAdd::DirtyWhileProcessing => 1,
                QueueAdd::Coalesced => 2,
                QueueAdd::ShuttingDown => 3,
            }] += 1;
        }
        QueueOp::Get => {
            let (c, m) = (core.get(), model.get());
            if let QueueGet::Item(k) = c
                && held.contains(&k)
            {
                return Err(format!(
                    "step {i} ({op:?}): {k} handed out while a worker holds it"
                ));
            }
            if c != m {
                return Err(diverged(i, op, "get", &c, &m));
            }
            if let QueueGet::Item(k) = c {
                held.push(k);
            }
        }
        QueueOp::Done(n) if !held.is_empty() => {
            let k = held.remove(n % held.len());
            done(op, i, k, core, model, reached)?;
        }
        QueueOp::Done(_) => {}
        QueueOp::StrayDone(k) if !held.contains(&k) => done(op, i, k, core, model, reached)?,
        QueueOp::StrayDone(_) => {}
        QueueOp::ShutDown => {
            core.shut_down(false);
            model.shut_down(false);
        }
        QueueOp::ShutDownWithDrain => {
            core.shut_down(true);
            model.shut_down(true);
        }
    }
    Ok(())
}

fn done(
    op: &QueueOp,
    i: usize,
    k: u8,
    core: &mut impl CoreUnderTest,
    model: &mut Model,
    reached: &mut Reached,
) -> Result<(), String> {
    let (c, m) = (core.done(&k), model.done(k));
    // The helpers, against the model's own reading of each outcome.
    let requeued = matches!(m, QueueDone::Requeued | QueueDone::RequeuedLast);
    let emptied = matches!(m, QueueDone::RequeuedLast | QueueDone::ReleasedLast);
    if c != m || c.requeued() != requeued || c.emptied_processing() != emptied {
        return Err(diverged(i, op, "done", &c, &m));
    }
    reached.dones[match m {
        QueueDone::Requeued => 0,
        QueueDone::RequeuedLast => 1,
        QueueDone::ReleasedLast => 2,
        QueueDone::Released => 3,
        QueueDone::NotProcessing => 4,
    }] += 1;
    Ok(())
}
