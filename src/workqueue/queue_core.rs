//! The queue's state machine without locks, time or I/O: the part of client-go's `Typed[T]`
//! that decides where an item goes.
//!
//! Follows `util/workqueue/queue.go` (`Add`, `Get`, `Done`, `ShutDown`, `ShutDownWithDrain`).
//!
//! # Model
//!
//! ```text
//!   add(x) ──► dirty ∌ x ? ──yes──► dirty += x ──► processing ∋ x ? ──no──► queue.push(x)
//!                 │ no (already dirty: coalesced)          │ yes: stays only in dirty
//!                 ▼                                        ▼
//!               nothing                        done(x) pushes it back, once
//!
//!   get()   : x = queue.pop(); dirty -= x; processing += x
//!   done(x) : processing -= x; dirty ∋ x ? queue.push(x)
//! ```
//!
//! # Invariants
//!
//! These hold after every method returns, and debug builds check them after every mutation
//! while the queue holds at most [`DEBUG_CHECK_MAX_ITEMS`] items
//! ([`QueueCore::check_invariants`]; the check is linear, so a larger debug run stays linear).
//!
//! 1. **I1** Every queued item is dirty and not processing (client-go's own struct comment).
//! 2. **I2** No item is queued twice.
//! 3. **I3** Every dirty item that is not processing is queued. With I1: the queue holds
//!    exactly `dirty \ processing`, so `len() == |dirty \ processing|`.
//! 4. **I4** A draining shutdown ends at the first moment the processing set is empty: the
//!    `done` that empties it clears the drain, even when it re-queues a dirty item that a
//!    getter takes straight away ([`QueueCore::draining`] stays false from then on).
//!
//! An item that is dirty *and* processing is in no queue: it waits for `done`. That is why
//! [`len`](QueueCore::len) can read 0 while changes pile up.
//!
//! # Concurrency
//!
//! None here: the core is a plain value. [`super::Queue`] wraps it in one lock.
//!
//! # Differences from upstream
//!
//! - `done` on an item that is not processing does nothing and returns
//!   [`QueueDone::NotProcessing`]. Upstream pushes it again if it is dirty, which can queue it twice
//!   (breaking I2) and let two workers hold it. The claim API makes the misuse impossible.
//! - One hash per operation: the item's hash is computed once and reused for both sets
//!   (hashbrown's `HashTable`), and stored beside it in the queue.
//! - The queue is a ring buffer (`VecDeque`), so a steady add/get cycle does not allocate.
//!   Upstream's pluggable `Queue[T]` (with `Touch`) is not ported: order is always FIFO.
//!
//! # The hasher, and keys an attacker chooses
//!
//! The sets hash with hashbrown's default, foldhash's `fast::RandomState`: a per-process random
//! seed plus a per-table one. Keys come from the cluster: object names, which anyone allowed to
//! create objects chooses. With a fixed-seed hasher (FxHash, `rustc-hash`) such a client could
//! compute names that all collide and make every add and get walk one long probe sequence.
//! With a seeded hasher no list of names collides in every process, and this queue never shows
//! its hashes: hand-out order is the ring buffer's FIFO, the sets are only probed (iterated
//! only by the debug check), so the seed cannot be read back from what the queue does; only
//! timing could leak it, which foldhash does not claim to resist and which a client of the API
//! server sees only through many layers. That is the posture of upstream's own sets: Go's maps
//! hash with a per-map random seed (AES-based where the CPU has it). The hash is also the
//! cheapest measured on these keys: std's SipHash-1-3 costs several times as much on a
//! 19-byte name.

use std::{
    collections::VecDeque,
    hash::{BuildHasher, Hash},
};

use hashbrown::{DefaultHashBuilder, HashTable};

/// A borrowed form of a queue item `T`, for `QueueCore::add_ref` and
/// [`Queue::add_ref`](super::Queue::add_ref): a caller that holds an object's name can add it
/// without building an owned key first, and the queue builds one only when it stores it.
///
/// An implementation must hash exactly as the item it stands for (`Hash` of `self` equals
/// `Hash` of `self.to_key()`), and [`matches`](KeyRef::matches) must be the item's equality:
/// otherwise an add misses the dirty item it should coalesce with, and the item is queued
/// twice.
pub trait KeyRef<T>: Hash {
    /// Whether `item` is the item this stands for.
    fn matches(&self, item: &T) -> bool;
    /// The owned item.
    fn to_key(&self) -> T;
}

/// Every item is a borrowed form of itself: `add_ref(&item)` clones it only if it is stored.
impl<T: Eq + Hash + Clone> KeyRef<T> for T {
    fn matches(&self, item: &T) -> bool {
        self == item
    }
    fn to_key(&self) -> T {
        self.clone()
    }
}

/// A `str` stands for the `String` of the same text (they hash alike).
impl KeyRef<String> for str {
    fn matches(&self, item: &String) -> bool {
        self == item.as_str()
    }
    fn to_key(&self) -> String {
        self.to_owned()
    }
}

/// What [`QueueCore::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAdd {
    /// The item was new: it is now dirty and queued. Wake a getter.
    Queued,
    /// The item is being processed: it is now dirty only, and `done` will queue it.
    DirtyWhileProcessing,
    /// The item was already dirty: nothing changed (the add coalesced).
    Coalesced,
    /// The queue is shutting down: the item was dropped.
    ShuttingDown,
}

impl QueueAdd {
    /// Whether the item entered the dirty set (client-go records the `add` metric then).
    pub fn entered_dirty(self) -> bool {
        matches!(self, QueueAdd::Queued | QueueAdd::DirtyWhileProcessing)
    }
}

/// What [`QueueCore::get`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueGet<T> {
    /// The head of the queue, now processing.
    Item(T),
    /// Nothing queued and not shutting down: a caller must wait.
    Empty,
    /// Nothing queued and shutting down: the queue is drained.
    ShutDown,
}

/// What [`QueueCore::done`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueDone {
    /// The item was dirty: it is queued again (wake a getter); other items are still
    /// processing.
    Requeued,
    /// The item was dirty: it is queued again (wake a getter), and nothing is processing any
    /// more, so a draining shutdown is over (wake it too; keeps I4).
    RequeuedLast,
    /// The item is released and nothing is processing any more (wakes a draining shutdown).
    ReleasedLast,
    /// The item is released; other items are still processing.
    Released,
    /// The item was not processing: nothing changed (see "Differences from upstream").
    NotProcessing,
}

impl QueueDone {
    /// Whether the item went back into the queue.
    pub fn requeued(self) -> bool {
        matches!(self, QueueDone::Requeued | QueueDone::RequeuedLast)
    }

    /// Whether this `done` left the processing set empty: the moment a draining shutdown
    /// waits for (client-go signals its condition variable in both cases).
    pub fn emptied_processing(self) -> bool {
        matches!(self, QueueDone::RequeuedLast | QueueDone::ReleasedLast)
    }
}

/// Debug builds check the invariants after every mutation only up to this many dirty and
/// processing items: the check is one pass over them.
pub(crate) const DEBUG_CHECK_MAX_ITEMS: usize = 128;

/// The queue, `dirty` and `processing`, and the shutdown flags. No locks, no time.
#[derive(Debug)]
pub struct QueueCore<T> {
    /// Order: items waiting to be handed out, each with its hash.
    queue: VecDeque<(u64, T)>,
    /// Needs work: every queued item, plus items re-added while processing.
    dirty: HashTable<T>,
    /// Held by a worker: handed out by `get`, not yet returned by `done`.
    processing: HashTable<T>,
    hasher: DefaultHashBuilder,
    shutting_down: bool,
    drain: bool,
    /// client-go v0.38's `Pause`: `get` hands nothing out while set.
    paused: bool,
}

impl<T> Default for QueueCore<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> QueueCore<T> {
    /// An empty queue.
    pub fn new() -> Self {
        QueueCore {
            queue: VecDeque::new(),
            dirty: HashTable::new(),
            processing: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            shutting_down: false,
            drain: false,
            paused: false,
        }
    }

    /// Items waiting to be handed out. Not items being processed, and not items that are dirty
    /// while processing: information only, never a reason to add or get.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    #[cfg(any(test, feature = "testing"))] // the model tests and the book step the core
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The size of the dirty set (what client-go's depth metric counts).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// How many items workers hold.
    pub fn processing_len(&self) -> usize {
        self.processing.len()
    }

    /// Whether shut_down or shut_down_with_drain was called.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Whether a shut_down_with_drain is still waiting for processing items.
    pub fn draining(&self) -> bool {
        self.drain && self.shutting_down && !self.processing.is_empty()
    }

    /// Stops handing items out until [`resume`](Self::resume); adds and dones go on
    /// (client-go v0.38 `Pause`).
    pub fn pause(&mut self) {
        self.paused = true;
    }

    /// Hands items out again; whether the queue was paused (then waiting getters must be
    /// woken).
    pub fn resume(&mut self) -> bool {
        std::mem::replace(&mut self.paused, false)
    }

    /// Starts shutting down. `drain` is true for shut_down_with_drain; a later plain shut_down
    /// sets it false, which releases a waiting drain.
    pub fn shut_down(&mut self, drain: bool) {
        self.drain = drain;
        self.shutting_down = true;
    }
}

impl<T: Eq + Hash> QueueCore<T> {
    fn hash(&self, item: &T) -> u64 {
        self.hasher.hash_one(item)
    }

    /// Whether `item` is in the dirty set.
    #[cfg(any(test, feature = "testing"))] // the model tests and the book step the core
    pub fn is_dirty(&self, item: &T) -> bool {
        self.dirty.find(self.hash(item), |x| x == item).is_some()
    }

    /// Whether a worker holds `item`.
    #[cfg(any(test, feature = "testing"))] // the model tests and the book step the core
    pub fn is_processing(&self, item: &T) -> bool {
        self.processing
            .find(self.hash(item), |x| x == item)
            .is_some()
    }

    /// Marks `item` as needing work. Keeps I1–I3: an item already dirty changes nothing; a
    /// processing item becomes dirty only (it is not queued while held).
    pub fn add(&mut self, item: T) -> QueueAdd
    where
        T: Clone,
    {
        if self.shutting_down {
            return QueueAdd::ShuttingDown;
        }
        let h = self.hash(&item);
        if self.dirty.find(h, |x| *x == item).is_some() {
            return QueueAdd::Coalesced;
        }
        self.insert_new(h, item)
    }

    /// [`add`](Self::add) by a borrowed form of the item: the same outcome, and the item is
    /// made ([`KeyRef::to_key`]) only if it enters the dirty set. An add that coalesces, or
    /// one during shutdown, allocates nothing.
    pub fn add_ref<Q: KeyRef<T> + ?Sized>(&mut self, key: &Q) -> QueueAdd
    where
        T: Clone,
    {
        if self.shutting_down {
            return QueueAdd::ShuttingDown;
        }
        let h = self.hasher.hash_one(key);
        if self.dirty.find(h, |x| key.matches(x)).is_some() {
            return QueueAdd::Coalesced;
        }
        self.insert_new(h, key.to_key())
    }

    /// The rest of an add of an item that is not dirty, whose hash is `h`.
    fn insert_new(&mut self, h: u64, item: T) -> QueueAdd
    where
        T: Clone,
    {
        let hasher = &self.hasher;
        self.dirty
            .insert_unique(h, item.clone(), |x| hasher.hash_one(x));
        let outcome = if self.processing.find(h, |x| *x == item).is_some() {
            QueueAdd::DirtyWhileProcessing // keeps I1: a held item is never queued
        } else {
            self.queue.push_back((h, item));
            QueueAdd::Queued
        };
        self.debug_check();
        outcome
    }

    /// Hands out the head of the queue, moving it from dirty to processing (keeps I1).
    pub fn get(&mut self) -> QueueGet<T> {
        if self.paused {
            // v0.38: a paused queue hands nothing out, not even while shutting down.
            return match self.shutting_down {
                true => QueueGet::ShutDown,
                false => QueueGet::Empty,
            };
        }
        let Some((h, item)) = self.queue.pop_front() else {
            return if self.shutting_down {
                QueueGet::ShutDown
            } else {
                QueueGet::Empty
            };
        };
        // The dirty set's copy moves into processing: no clone on this path.
        let held = match self.dirty.find_entry(h, |x| *x == item) {
            Ok(entry) => entry.remove().0,
            Err(_) => unreachable!("I1: a queued item is dirty"),
        };
        let hasher = &self.hasher;
        self.processing
            .insert_unique(h, held, |x| hasher.hash_one(x));
        self.debug_check();
        QueueGet::Item(item)
    }

    /// Returns `item` from a worker. If it became dirty meanwhile it is queued again, once
    /// (keeps I3); that happens during shutdown too, so a drain still hands it out.
    pub fn done(&mut self, item: &T) -> QueueDone {
        let h = self.hash(item);
        let held = match self.processing.find_entry(h, |x| x == item) {
            Ok(entry) => entry.remove().0,
            Err(_) => return QueueDone::NotProcessing,
        };
        let requeued = self.dirty.find(h, |x| x == item).is_some();
        if requeued {
            self.queue.push_back((h, held));
        }
        let outcome = match (requeued, self.processing.is_empty()) {
            (true, false) => QueueDone::Requeued,
            (true, true) => QueueDone::RequeuedLast,
            (false, true) => QueueDone::ReleasedLast,
            (false, false) => QueueDone::Released,
        };
        if outcome.emptied_processing() && self.shutting_down {
            self.drain = false; // keeps I4: the drain is over, whatever is handed out next
        }
        self.debug_check();
        outcome
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions)
            && self.dirty.len() + self.processing.len() <= DEBUG_CHECK_MAX_ITEMS
            && let Err(e) = self.check_invariants()
        {
            panic!("workqueue invariant broken: {e}");
        }
    }

    /// Checks I1–I3 in full, naming the first one that fails. Cost: one pass over the queue and
    /// the dirty set, plus a temporary set of the queued items' hashes.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen = HashTable::<(u64, &T)>::new();
        for (h, item) in &self.queue {
            if self.dirty.find(*h, |x| x == item).is_none() {
                return Err("I1: a queued item is not dirty".into());
            }
            if self.processing.find(*h, |x| x == item).is_some() {
                return Err("I1: a queued item is processing".into());
            }
            if seen.find(*h, |(_, x)| *x == item).is_some() {
                return Err("I2: an item is queued twice".into());
            }
            seen.insert_unique(*h, (*h, item), |(h, _)| *h);
        }
        let waiting = self
            .dirty
            .iter()
            .filter(|x| self.processing.find(self.hash(x), |p| p == *x).is_none())
            .count();
        if waiting != self.queue.len() {
            return Err(format!(
                "I3: {waiting} dirty items are not processing but {} are queued",
                self.queue.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_add_while_processing_goes_to_dirty_only_and_done_queues_it_once() {
        let mut q = QueueCore::new();
        assert_eq!(q.add("a"), QueueAdd::Queued);
        assert_eq!(q.get(), QueueGet::Item("a"));
        assert_eq!(q.add("a"), QueueAdd::DirtyWhileProcessing);
        assert_eq!(q.add("a"), QueueAdd::Coalesced);
        assert_eq!((q.len(), q.dirty_len(), q.processing_len()), (0, 1, 1));
        assert_eq!(q.done(&"a"), QueueDone::RequeuedLast);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get(), QueueGet::Item("a"));
        assert_eq!(q.done(&"a"), QueueDone::ReleasedLast);
        assert_eq!(q.get(), QueueGet::Empty);
    }

    #[test]
    fn done_on_an_item_never_handed_out_changes_nothing() {
        let mut q = QueueCore::new();
        q.add("a");
        assert_eq!(q.done(&"a"), QueueDone::NotProcessing);
        assert_eq!(q.len(), 1);
        q.check_invariants().unwrap();
    }

    #[test]
    fn a_drain_ends_when_a_done_empties_processing_even_if_it_requeues() {
        let mut q = QueueCore::new();
        q.add("a");
        q.add("b");
        assert_eq!(q.get(), QueueGet::Item("a"));
        assert_eq!(q.get(), QueueGet::Item("b"));
        q.add("a"); // dirty while held
        q.shut_down(true);
        assert!(q.draining());
        assert_eq!(q.done(&"a"), QueueDone::Requeued, "b is still held");
        assert!(q.draining());
        assert_eq!(q.done(&"b"), QueueDone::ReleasedLast);
        assert!(!q.draining());
        // The same, with the last done re-queueing: the drain is over before `a` is taken.
        let mut q = QueueCore::new();
        q.add("a");
        assert_eq!(q.get(), QueueGet::Item("a"));
        q.add("a");
        q.shut_down(true);
        assert_eq!(q.done(&"a"), QueueDone::RequeuedLast);
        assert_eq!(q.get(), QueueGet::Item("a"));
        assert!(
            !q.draining(),
            "I4: a get after the moment does not revive the drain"
        );
    }

    #[test]
    fn shutdown_drains_the_queue_then_reports_shutdown() {
        let mut q = QueueCore::new();
        q.add(1);
        q.shut_down(false);
        assert_eq!(q.add(2), QueueAdd::ShuttingDown);
        assert_eq!(q.get(), QueueGet::Item(1));
        assert_eq!(q.get(), QueueGet::ShutDown);
    }

    /// The hash an operation computes must be the one the sets rehash with when they grow
    /// (`hash_one` in both places): a mismatch loses items once a table has grown past its first
    /// few slots, which the model's six keys rarely reach. 200 keys grow every table many times.
    #[test]
    fn every_item_is_found_again_after_the_sets_grow() {
        const N: u32 = 200;
        let mut q = QueueCore::new();
        for k in 0..N {
            assert_eq!(q.add(k), QueueAdd::Queued);
        }
        for k in 0..N {
            assert!(q.is_dirty(&k), "{k} is dirty");
            assert_eq!(q.add(k), QueueAdd::Coalesced, "{k} coalesces");
        }
        for k in 0..N {
            assert_eq!(q.get(), QueueGet::Item(k));
            assert!(q.is_processing(&k) && !q.is_dirty(&k), "{k} is held");
        }
        for k in 0..N {
            assert_eq!(q.add(k), QueueAdd::DirtyWhileProcessing, "{k} is held");
        }
        for k in 0..N {
            assert!(q.done(&k).requeued(), "{k} goes back");
        }
        let n = N as usize;
        assert_eq!((q.len(), q.dirty_len(), q.processing_len()), (n, n, 0));
    }

    /// A borrowed add has the owned add's outcome in every state, and a `str` finds the
    /// `String` it stands for: the two hash alike.
    #[test]
    fn a_borrowed_add_has_the_outcome_of_an_owned_add() {
        let mut q: QueueCore<String> = QueueCore::new();
        assert_eq!(q.add_ref("a"), QueueAdd::Queued);
        assert_eq!(q.add("a".to_owned()), QueueAdd::Coalesced);
        assert_eq!(q.add_ref("a"), QueueAdd::Coalesced);
        assert_eq!(q.get(), QueueGet::Item("a".to_owned()));
        assert_eq!(q.add_ref("a"), QueueAdd::DirtyWhileProcessing);
        assert_eq!(q.add_ref("a"), QueueAdd::Coalesced);
        assert_eq!(q.done(&"a".to_owned()), QueueDone::RequeuedLast);
        assert_eq!(q.add_ref(&"b".to_owned()), QueueAdd::Queued);
        assert_eq!((q.len(), q.dirty_len()), (2, 2));
        for k in 0..200 {
            assert_eq!(q.add_ref(format!("k{k}").as_str()), QueueAdd::Queued);
        }
        for k in 0..200 {
            assert_eq!(q.add(format!("k{k}")), QueueAdd::Coalesced, "k{k}");
        }
        q.shut_down(false);
        assert_eq!(q.add_ref("c"), QueueAdd::ShuttingDown);
        q.check_invariants().unwrap();
    }

    /// Builds a core in a state no sequence of calls reaches, for the invariant checks.
    fn corrupt(
        queued: &[&'static str],
        dirty: &[&'static str],
        processing: &[&'static str],
    ) -> QueueCore<&'static str> {
        let mut q = QueueCore::new();
        let QueueCore {
            queue,
            dirty: d,
            processing: p,
            hasher,
            ..
        } = &mut q;
        for x in queued {
            queue.push_back((hasher.hash_one(x), *x));
        }
        for (set, items) in [(d, dirty), (p, processing)] {
            for x in items {
                set.insert_unique(hasher.hash_one(x), *x, |y| hasher.hash_one(y));
            }
        }
        q
    }

    #[test]
    fn check_invariants_names_each_broken_invariant() {
        assert_eq!(corrupt(&["a"], &["a"], &[]).check_invariants(), Ok(()));
        let broken = [
            (corrupt(&["a"], &[], &[]), "I1: a queued item is not dirty"),
            (
                corrupt(&["a"], &["a"], &["a"]),
                "I1: a queued item is processing",
            ),
            (
                corrupt(&["a", "a"], &["a"], &[]),
                "I2: an item is queued twice",
            ),
            (
                corrupt(&[], &["a"], &[]),
                "I3: 1 dirty items are not processing but 0 are queued",
            ),
        ];
        for (q, expected) in broken {
            assert_eq!(q.check_invariants(), Err(expected.to_owned()));
        }
    }

    /// Debug builds check the invariants after every mutation: a corrupted core panics on the
    /// next add.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "workqueue invariant broken: I1: a queued item is not dirty")]
    fn debug_builds_panic_on_the_first_mutation_after_an_invariant_breaks() {
        corrupt(&["a"], &[], &[]).add("b");
    }
}
