//! The priority queue's state machine without locks, tasks or a clock of its own: the part of
//! controller-runtime's `priorityqueue[T]` that decides where a key goes and which key is
//! handed out next.
//!
//! Follows controller-runtime v0.25.3 (the same at v0.24.1), `pkg/controller/priorityqueue/priorityqueue.go`
//! (`lockedAddWithOpts`, `handleWaitingItems`, `handleReadyItems`, `Done`, `Len`, `lessReady`,
//! `lessWaiting`).
//!
//! # Model
//!
//! ```text
//!   items:   key ─► Entry { added_counter, priority, ready_at }       one entry per key
//!   ready:   (priority desc, added_counter asc) ─► key's hash          entries without ready_at
//!   waiting: (ready_at asc, priority desc, added_counter asc) ─► hash  entries with a ready_at
//!   locked:  keys handed out by get and not yet returned by done
//!
//!   add(k, after, p)   new k      : entry with a fresh counter ─► waiting if after > 0, else ready
//!                      k queued   : ready stays ready; otherwise the earlier ready_at wins and
//!                                   no delay makes it ready; priority = max(old, p), and only
//!                                   a *raise* takes a fresh counter (back of the new level)
//!   promote_due(now)   every waiting entry with ready_at <= now moves to ready, fresh counter
//!   get()              first ready entry (in order) whose key is not locked: its key leaves
//!                      items and ready and enters locked
//!   done(k)            locked -= k (an entry re-added meanwhile may now be handed out)
//! ```
//!
//! A key being processed is *not* in `items`: adding it again while it is held creates a new
//! entry, from that add's options alone, which `get` skips until `done`. That entry counts in
//! [`len`](PriorityQueueCore::len) and in the depth metric (upstream's test "enqueues a locked
//! item"), unlike client-go's queue, where such a key is dirty but not queued.
//!
//! An absent priority is priority 0 in every comparison, so a plain add raises a key waiting at
//! `LowPriority` (-100) to 0.
//!
//! # Invariants
//!
//! These hold after every method returns. Debug builds check P1 for the key a method touched
//! and, while the queue is small, P1–P3 in full; [`PriorityQueueCore::check_invariants`] checks
//! them in full.
//!
//! 1. **P1** Every entry in `items` has exactly one tree entry, under the tree key its fields
//!    give, holding the entry's key hash: in `ready` if it has no `ready_at`, in `waiting` if
//!    it has one. (Upstream's tests wrap both trees in a validator that panics on any insert or
//!    delete breaking this.)
//! 2. **P2** The trees hold nothing else: `|ready| + |waiting| == |items|`.
//! 3. **P3** Counters are unique and below `added_counter`, so no two tree keys collide and
//!    order within a priority is exactly the order of the counters.
//!
//! # Concurrency
//!
//! None here: the core is a plain value. [`super::PriorityQueue`] wraps it in one lock.
//!
//! # Differences from upstream
//!
//! - Time is a parameter (`now`), so a test or the shell decides what the clock reads (and an
//!   add without a delay never reads it).
//! - A delay too large for the clock saturates to about thirty years (upstream adds it to a
//!   `time.Time`, which cannot overflow in practice).
//! - Everything else, including which key `get` picks and which metric calls an add makes, is
//!   upstream's; the metric calls go to an [`Observer`].
//!
//! # Cost
//!
//! Upstream keeps `items` as a Go map and the locked set as another; here both are hashbrown
//! `HashTable`s with one hasher, so each operation hashes its key once and reuses the hash for
//! both (an add: the lookup and the insert; a get: the locked check, the removal from `items`
//! and the insert into `locked`; a done: the release and the look for a re-added entry). The
//! trees hold each entry's key *hash*, not the key: the hash and the tree key's counter find the
//! entry in `items` (counters are unique, P3) without comparing keys, and a tree node moves
//! 8 bytes per entry whatever the key's size. So a queued key has one copy (its entry's), and a
//! key is cloned once per hand-out (the caller's copy beside the locked set's), never by an
//! add, a merge or a done. A get takes the first ready key straight from the tree unless a
//! worker holds it, and only then walks on. The hasher and why it is safe with names a client
//! chooses: [`crate::workqueue::QueueCore`]'s docs.

use std::{
    cmp::Reverse,
    collections::BTreeMap,
    hash::{BuildHasher, Hash},
    time::Duration,
};

use hashbrown::{DefaultHashBuilder, HashSet, HashTable};
use tokio::time::Instant;

/// A key's priority. Higher is handed out first; absent means 0 (Go's `int`, so 64 bits).
pub type Priority = i64;

/// A queued key's state (upstream's `item[T]` without its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Order within a priority: lower first. Fresh on insert, on a priority raise and on
    /// becoming ready by time.
    pub added_counter: u64,
    /// The highest priority any add asked for since the key was last handed out.
    pub priority: Priority,
    /// When the key becomes ready; `None` once it is ready.
    pub ready_at: Option<Instant>,
}

type ReadyKey = (Reverse<Priority>, u64);
type WaitingKey = (Instant, Reverse<Priority>, u64);

/// The calls the queue makes to its metrics (upstream's `queueMetrics[T]`, less `done` and
/// the 500 ms loop, which the shell makes). Every method defaults to doing nothing.
pub trait Observer<T> {
    /// A key entered `ready` (upstream: "add is called for ready items only").
    fn add(&mut self, _key: &T, _priority: Priority) {}
    /// A key was handed out at `priority`.
    fn get(&mut self, _key: &T, _priority: Priority) {}
    /// A key already in `ready` moved from one priority to a higher one.
    fn update_depth(&mut self, _old: Priority, _new: Priority) {}
    /// An add asked for a non-zero delay.
    fn retry(&mut self) {}
}

impl<T> Observer<T> for () {}

/// What [`PriorityQueueCore::add`] did with one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityAdd {
    /// A new key, ready now. Wake a getter.
    NewReady,
    /// A new key, waiting for its ready time. Wake the timer.
    NewWaiting,
    /// A waiting key became ready (added again without a delay). Wake a getter.
    MadeReady,
    /// The key was already ready and stays ready; its priority may have risen.
    MergedReady,
    /// The key is still waiting; its ready time and priority merged. Wake the timer.
    MergedWaiting,
    /// The queue is shutting down: nothing changed.
    ShuttingDown,
}

impl PriorityAdd {
    /// Whether a getter may now find a key it could not before (upstream's `readyItemAdded`).
    pub fn readied(self) -> bool {
        matches!(self, PriorityAdd::NewReady | PriorityAdd::MadeReady)
    }

    /// Whether the earliest ready time may have changed (`waitingItemAddedOrUpdated`).
    pub fn waiting_changed(self) -> bool {
        matches!(self, PriorityAdd::NewWaiting | PriorityAdd::MergedWaiting)
    }
}

/// What [`PriorityQueueCore::get`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorityGet<T> {
    /// The first ready key not locked, and its priority; it is now locked.
    Item(T, Priority),
    /// Nothing that can be handed out now (nothing ready, or every ready key is locked).
    Empty,
    /// Shut down: upstream returns at once, without handing out what is still queued.
    ShutDown,
}

/// What [`PriorityQueueCore::done`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityDone {
    /// Released, and the key was re-added while held and is ready: a getter can take it.
    ReleasedReady,
    /// Released; the key is not ready in the queue.
    Released,
    /// The key was not locked: nothing changed (upstream's `Done` is equally harmless here).
    NotLocked,
}

/// What [`PriorityQueueCore::promote_due`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promoted {
    /// How many waiting keys became ready.
    pub moved: usize,
    /// The earliest ready time still waiting, strictly after `now`.
    pub next: Option<Instant>,
}

/// Far enough for any delay a controller means: tokio's own timer uses about thirty years.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Above this many entries, debug builds check only the touched key (P1), not P1–P3 in full.
const FULL_CHECK_MAX: usize = 64;

/// The delay an add asks for: `after`, or the limiter's delay if the add is rate-limited and
/// that delay is shorter or `after` is zero (upstream: "the min of possible durations").
pub(crate) fn effective_after(after: Duration, rate_limited: Option<Duration>) -> Duration {
    match rate_limited {
        // `<=` for `<` is an equivalent mutant: with equal delays either arm gives the same.
        Some(limiter) if after.is_zero() || limiter < after => limiter,
        _ => after,
    }
}

/// The entries, the two trees and the locked set. No locks, no clock.
#[derive(Debug)]
pub struct PriorityQueueCore<T> {
    /// One entry per queued key, found by the key's hash. The only copy of a queued key.
    items: HashTable<(T, Entry)>,
    /// Ready entries in hand-out order, each as its key's hash: the hash and the tree key's
    /// counter find the entry in `items` (counters are unique, P3) without comparing keys.
    ready: BTreeMap<ReadyKey, u64>,
    /// Waiting entries by ready time, each as its key's hash, as in `ready`.
    waiting: BTreeMap<WaitingKey, u64>,
    /// Keys handed out and not yet done, found by the same hash as `items`.
    locked: HashTable<T>,
    /// The hasher of `items` and `locked`: one hash per operation serves both.
    hasher: DefaultHashBuilder,
    /// The next counter to give out (keeps P3).
    added_counter: u64,
    shutting_down: bool,
}

impl<T> Default for PriorityQueueCore<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PriorityQueueCore<T> {
    /// An empty queue.
    pub fn new() -> Self {
        PriorityQueueCore {
            items: HashTable::new(),
            ready: BTreeMap::new(),
            waiting: BTreeMap::new(),
            locked: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            added_counter: 0,
            shutting_down: false,
        }
    }

    /// Ready keys, locked ones included (upstream's `Len`). Waiting keys are not counted.
    pub fn len(&self) -> usize {
        self.ready.len()
    }

    /// Whether no key is ready.
    #[cfg(any(test, feature = "testing"))] // the model tests and the book step the core
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Keys waiting for their ready time.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// Keys handed out and not yet done.
    pub fn locked_len(&self) -> usize {
        self.locked.len()
    }

    /// Whether shut_down was called.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Stops the queue: adds are dropped, `get` reports [`PriorityGet::ShutDown`] at once, and nothing
    /// is promoted any more. What is queued stays where it is.
    pub fn shut_down(&mut self) {
        self.shutting_down = true;
    }

    /// The earliest ready time of a waiting key.
    pub fn next_ready_at(&self) -> Option<Instant> {
        self.waiting.first_key_value().map(|((at, _, _), _)| *at)
    }

    fn next_counter(&mut self) -> u64 {
        let c = self.added_counter;
        self.added_counter += 1; // keeps P3
        c
    }
}

impl<T: Eq + Hash + Clone> PriorityQueueCore<T> {
    fn hash(&self, key: &T) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The key of the entry whose key hashes to `h` and which holds `counter` (P3: one).
    fn key_of(&self, h: u64, counter: u64) -> Option<&T> {
        self.items
            .find(h, |(_, e)| e.added_counter == counter)
            .map(|(k, _)| k)
    }

    /// Ready keys in hand-out order, with their priorities (locked ones included).
    #[cfg(any(test, feature = "testing"))] // the model tests and the book step the core
    pub fn ready_in_order(&self) -> impl Iterator<Item = (&T, Priority)> {
        self.ready.iter().map(|((Reverse(p), c), h)| {
            let key = self
                .key_of(*h, *c)
                .expect("P1: a ready tree entry has an item");
            (key, *p)
        })
    }

    /// The entry queued for `key`, if any (not the key's state while locked).
    pub fn entry(&self, key: &T) -> Option<Entry> {
        self.items
            .find(self.hash(key), |(k, _)| k == key)
            .map(|(_, e)| *e)
    }

    /// Whether `key` is handed out and not yet done.
    #[cfg(any(test, feature = "testing"))] // the model tests and the book step the core
    pub fn is_locked(&self, key: &T) -> bool {
        self.locked.find(self.hash(key), |k| k == key).is_some()
    }

    /// `key`'s entry, to corrupt it in tests.
    #[cfg(test)]
    fn entry_mut(&mut self, key: &T) -> Option<&mut Entry> {
        let h = self.hash(key);
        self.items.find_mut(h, |(k, _)| k == key).map(|(_, e)| e)
    }

    /// Queues `key` after `after` (zero: ready now) at `priority` (`None`: 0), merging with an
    /// entry already queued for it (see the model). `now` is read only for a delay. Keeps
    /// P1–P3.
    pub fn add(
        &mut self,
        key: T,
        after: Duration,
        priority: Option<Priority>,
        now: impl FnOnce() -> Instant,
        obs: &mut impl Observer<T>,
    ) -> PriorityAdd {
        if self.shutting_down {
            return PriorityAdd::ShuttingDown;
        }
        let mut ready_at = if after.is_zero() {
            None
        } else {
            obs.retry();
            let now = now();
            Some(now.checked_add(after).unwrap_or_else(|| now + FAR_FUTURE))
        };
        let asked = priority.unwrap_or(0);
        // One hash for the whole add: the lookup, and the insert of a new key.
        let h = self.hash(&key);
        let Some(old) = self.items.find(h, |(k, _)| *k == key).map(|(_, e)| *e) else {
            let entry = Entry {
                added_counter: self.next_counter(),
                priority: asked,
                ready_at,
            };
            let outcome = match ready_at {
                Some(_) => PriorityAdd::NewWaiting,
                None => {
                    obs.add(&key, asked);
                    PriorityAdd::NewReady
                }
            };
            // No clone: the entry keeps the key that was passed in, the tree its hash.
            self.insert_tree(h, entry);
            #[cfg(debug_assertions)]
            let check = key.clone();
            let hasher = &self.hasher;
            self.items
                .insert_unique(h, (key, entry), |(k, _)| hasher.hash_one(k));
            #[cfg(debug_assertions)]
            self.debug_check(&check);
            return outcome;
        };

        // A ready key stays ready; otherwise the earlier ready time wins (`<=` for `<` is an
        // equivalent mutant: on a tie both times are the same instant).
        match (old.ready_at, ready_at) {
            (None, _) => ready_at = None,
            (Some(o), Some(n)) if o < n => ready_at = Some(o),
            _ => {}
        }
        let mut merged = Entry { ready_at, ..old };
        if asked > old.priority {
            if old.ready_at.is_none() {
                obs.update_depth(old.priority, asked);
            }
            merged.priority = asked;
            merged.added_counter = self.next_counter(); // the back of the new level
        }
        let outcome = match (old.ready_at, ready_at) {
            (None, _) => PriorityAdd::MergedReady,
            (Some(_), None) => {
                obs.add(&key, merged.priority);
                PriorityAdd::MadeReady
            }
            (Some(_), Some(_)) => PriorityAdd::MergedWaiting,
        };
        if merged == old {
            return outcome; // nothing moved: upstream's delete and re-insert of the same item
        }
        // The entry changes in place and its tree entry moves.
        if let Some((_, e)) = self.items.find_mut(h, |(k, _)| *k == key) {
            *e = merged;
        }
        let stored = self.remove_tree(&old);
        self.insert_tree(stored, merged);
        self.debug_check(&key);
        outcome
    }

    /// Hands out the first ready key that is not locked, and locks it (upstream's
    /// `handleReadyItems` for one waiter). After shutdown: [`PriorityGet::ShutDown`], whatever is queued.
    pub fn get(&mut self, obs: &mut impl Observer<T>) -> PriorityGet<T> {
        if self.shutting_down {
            return PriorityGet::ShutDown;
        }
        // The first ready key no worker holds: usually the first ready key, taken without
        // comparing tree keys. No key is hashed: the tree holds each key's hash.
        let unlocked = |items: &HashTable<(T, Entry)>, locked: &HashTable<T>, h: u64, c: u64| {
            locked.is_empty() || {
                let (key, _) = items
                    .find(h, |(_, e)| e.added_counter == c)
                    .expect("P1: a ready tree entry has an item");
                locked.find(h, |k| k == key).is_none()
            }
        };
        let first_free = match self.ready.first_key_value() {
            None => return PriorityGet::Empty,
            Some((&(_, c), &h)) => unlocked(&self.items, &self.locked, h, c),
        };
        let (rk, h) = if first_free {
            self.ready.pop_first().expect("seen just now")
        } else {
            let found = self
                .ready
                .iter()
                .find(|((_, c), h)| unlocked(&self.items, &self.locked, **h, *c));
            let Some((&rk, &h)) = found else {
                return PriorityGet::Empty;
            };
            self.ready.remove(&rk);
            (rk, h)
        };
        let (key, entry) = match self.items.find_entry(h, |(_, e)| e.added_counter == rk.1) {
            Ok(found) => found.remove().0,
            Err(_) => panic!("P1: a ready tree entry has an item"),
        };
        obs.get(&key, entry.priority);
        // The one clone of a hand-out: the caller's key, and the locked set's.
        let hasher = &self.hasher;
        self.locked
            .insert_unique(h, key.clone(), |k| hasher.hash_one(k));
        PriorityGet::Item(key, entry.priority)
    }

    /// Returns `key` from a worker. A ready entry added for it meanwhile can now be handed out.
    pub fn done(&mut self, key: &T) -> PriorityDone {
        let h = self.hash(key);
        match self.locked.find_entry(h, |k| k == key) {
            Ok(found) => drop(found.remove()),
            Err(_) => return PriorityDone::NotLocked,
        }
        match self.items.find(h, |(k, _)| k == key) {
            Some((_, e)) if e.ready_at.is_none() => PriorityDone::ReleasedReady,
            _ => PriorityDone::Released,
        }
    }

    /// Moves every waiting key whose ready time is at or before `now` into `ready`, in waiting
    /// order, each with a fresh counter, so keys sort by when they became ready (upstream's
    /// `handleWaitingItems`). Does nothing once shut down.
    pub fn promote_due(&mut self, now: Instant, obs: &mut impl Observer<T>) -> Promoted {
        let mut moved = 0;
        if self.shutting_down {
            return Promoted { moved, next: None };
        }
        while let Some(((at, _, _), _)) = self.waiting.first_key_value() {
            if *at > now {
                break;
            }
            let ((_, _, old_counter), h) = self.waiting.pop_first().expect("peeked");
            let counter = self.next_counter();
            let (key, entry) = self
                .items
                .find_mut(h, |(_, e)| e.added_counter == old_counter)
                .expect("P1: a waiting tree entry has an item");
            entry.ready_at = None;
            entry.added_counter = counter;
            let priority = entry.priority;
            obs.add(key, priority);
            self.ready.insert((Reverse(priority), counter), h);
            moved += 1;
            if cfg!(debug_assertions) {
                let key = self.key_of(h, counter).expect("just moved");
                self.debug_check(key);
            }
        }
        let next = self.next_ready_at();
        debug_assert!(next.is_none_or(|n| n > now), "a due key is still waiting");
        Promoted { moved, next }
    }

    /// Files the entry of the key that hashes to `h` under the tree key its fields give.
    fn insert_tree(&mut self, h: u64, e: Entry) {
        let clash = match e.ready_at {
            None => self.ready.insert((Reverse(e.priority), e.added_counter), h),
            Some(at) => self
                .waiting
                .insert((at, Reverse(e.priority), e.added_counter), h),
        };
        assert!(clash.is_none(), "P3: two entries share a tree key");
    }

    /// Removes `e`'s tree entry; returns the hash it held.
    fn remove_tree(&mut self, e: &Entry) -> u64 {
        let removed = match e.ready_at {
            None => self.ready.remove(&(Reverse(e.priority), e.added_counter)),
            Some(at) => self
                .waiting
                .remove(&(at, Reverse(e.priority), e.added_counter)),
        };
        removed.expect("P1: every item has its tree entry")
    }

    fn debug_check(&self, key: &T) {
        if !cfg!(debug_assertions) {
            return;
        }
        let result = if self.items.len() <= FULL_CHECK_MAX {
            self.check_invariants()
        } else {
            self.check_key(key)
        };
        if let Err(e) = result {
            panic!("priority queue invariant broken: {e}");
        }
    }

    /// P1 for one key.
    fn check_key(&self, key: &T) -> Result<(), String> {
        let Some(e) = self.entry(key) else {
            return Ok(());
        };
        let in_tree = match e.ready_at {
            None => self.ready.get(&(Reverse(e.priority), e.added_counter)),
            Some(at) => self
                .waiting
                .get(&(at, Reverse(e.priority), e.added_counter)),
        };
        match in_tree {
            Some(h) if *h == self.hash(key) => Ok(()),
            Some(_) => Err("P1: an entry's tree key holds another key".into()),
            None => Err("P1: an entry has no tree entry under its fields".into()),
        }
    }

    /// Checks P1–P3 in full, naming the first that fails.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut counters = HashSet::with_capacity(self.items.len());
        for (key, e) in self.items.iter() {
            self.check_key(key)?;
            if e.added_counter >= self.added_counter || !counters.insert(e.added_counter) {
                return Err(format!(
                    "P3: counter {} is reused or not yet given out",
                    e.added_counter
                ));
            }
        }
        if self.ready.len() + self.waiting.len() != self.items.len() {
            return Err(format!(
                "P2: {} ready + {} waiting tree entries for {} items",
                self.ready.len(),
                self.waiting.len(),
                self.items.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn keys<T: Eq + Hash + Clone>(q: &PriorityQueueCore<T>) -> Vec<(T, Priority)> {
        q.ready_in_order().map(|(k, p)| (k.clone(), p)).collect()
    }

    #[test]
    fn a_priority_raise_moves_the_key_to_the_back_of_its_new_level() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("foo", Duration::ZERO, Some(0), || t, &mut ());
        q.add("bar", Duration::ZERO, Some(1), || t, &mut ());
        assert_eq!(
            q.add("foo", Duration::ZERO, Some(1), || t, &mut ()),
            PriorityAdd::MergedReady
        );
        assert_eq!(keys(&q), [("bar", 1), ("foo", 1)]);
    }

    #[test]
    fn a_lower_or_equal_priority_keeps_the_place() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("a", Duration::ZERO, Some(2), || t, &mut ());
        q.add("b", Duration::ZERO, Some(2), || t, &mut ());
        q.add("a", Duration::ZERO, Some(2), || t, &mut ());
        q.add("a", Duration::ZERO, None, || t, &mut ());
        assert_eq!(keys(&q), [("a", 2), ("b", 2)]);
    }

    #[test]
    fn a_plain_add_raises_a_low_priority_key_to_zero() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("x", Duration::ZERO, Some(-100), || t, &mut ());
        q.add("x", Duration::ZERO, None, || t, &mut ());
        assert_eq!(q.entry(&"x").map(|e| e.priority), Some(0));
    }

    /// An upstream quirk, kept: a waiting key made ready by a plain add keeps the counter it
    /// got when first added, so it goes *before* keys that were ready earlier.
    #[test]
    fn a_waiting_key_made_ready_by_an_add_keeps_its_first_counter() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("late", S, None, || t, &mut ());
        q.add("early", Duration::ZERO, None, || t, &mut ());
        assert_eq!(
            q.add("late", Duration::ZERO, None, || t, &mut ()),
            PriorityAdd::MadeReady
        );
        assert_eq!(keys(&q), [("late", 0), ("early", 0)]);
    }

    #[test]
    fn a_key_promoted_by_time_goes_behind_keys_already_ready() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("late", S, None, || t, &mut ());
        q.add("early", Duration::ZERO, None, || t, &mut ());
        let p = q.promote_due(t + S, &mut ());
        assert_eq!(
            p,
            Promoted {
                moved: 1,
                next: None
            }
        );
        assert_eq!(keys(&q), [("early", 0), ("late", 0)]);
    }

    #[test]
    fn the_earlier_ready_time_wins_and_ready_stays_ready() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("w", 10 * S, None, || t, &mut ());
        q.add("w", 3 * S, None, || t, &mut ());
        q.add("w", 5 * S, None, || t, &mut ());
        assert_eq!(q.next_ready_at(), Some(t + 3 * S));
        q.add("r", Duration::ZERO, None, || t, &mut ());
        assert_eq!(q.add("r", S, None, || t, &mut ()), PriorityAdd::MergedReady);
        assert_eq!(q.entry(&"r").unwrap().ready_at, None);
    }

    /// Which outcomes wake a getter and which wake the timer: only a key that became ready
    /// (new, or made ready by an add) can be handed out where nothing could before, and only a
    /// new or merged waiting key can move the earliest ready time.
    #[test]
    fn only_a_newly_ready_key_wakes_a_getter_and_only_a_waiting_one_the_timer() {
        use PriorityAdd::*;
        let all = [
            NewReady,
            NewWaiting,
            MadeReady,
            MergedReady,
            MergedWaiting,
            ShuttingDown,
        ];
        let readied: Vec<_> = all.into_iter().filter(|a| a.readied()).collect();
        assert_eq!(readied, [NewReady, MadeReady]);
        let waiting: Vec<_> = all.into_iter().filter(|a| a.waiting_changed()).collect();
        assert_eq!(waiting, [NewWaiting, MergedWaiting]);
    }

    #[test]
    fn rate_limiting_takes_the_shorter_delay_unless_after_is_zero() {
        let ms = Duration::from_millis;
        assert_eq!(effective_after(ms(0), Some(ms(5))), ms(5));
        assert_eq!(effective_after(ms(3), Some(ms(5))), ms(3));
        assert_eq!(effective_after(ms(9), Some(ms(5))), ms(5));
        assert_eq!(effective_after(ms(9), None), ms(9));
    }

    #[test]
    fn a_key_added_while_locked_is_queued_and_counted_but_not_handed_out() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("a", Duration::ZERO, None, || t, &mut ());
        assert_eq!(q.get(&mut ()), PriorityGet::Item("a", 0));
        q.add("a", Duration::ZERO, Some(3), || t, &mut ());
        assert_eq!((q.len(), q.locked_len()), (1, 1));
        assert_eq!(q.get(&mut ()), PriorityGet::Empty);
        assert_eq!(q.done(&"a"), PriorityDone::ReleasedReady);
        assert_eq!(q.get(&mut ()), PriorityGet::Item("a", 3));
        assert_eq!(q.done(&"a"), PriorityDone::Released);
        assert_eq!(q.done(&"a"), PriorityDone::NotLocked);
    }

    #[test]
    fn shutdown_hands_out_nothing_more_and_drops_adds() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add(1, Duration::ZERO, None, || t, &mut ());
        q.shut_down();
        assert_eq!(
            q.add(2, Duration::ZERO, None, || t, &mut ()),
            PriorityAdd::ShuttingDown
        );
        assert_eq!(q.get(&mut ()), PriorityGet::ShutDown);
        assert_eq!(q.len(), 1, "the queued key stays, unreachable");
    }

    #[test]
    fn the_invariant_check_names_a_broken_tree() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        q.add("a", Duration::ZERO, None, || t, &mut ());
        q.ready.clear();
        assert_eq!(
            q.check_invariants(),
            Err("P1: an entry has no tree entry under its fields".into())
        );
        let mut q = PriorityQueueCore::<&str>::new();
        q.ready.insert((Reverse(0), 0), 0x5742a7);
        assert!(q.check_invariants().unwrap_err().starts_with("P2"));
    }

    /// `n` ready keys `0..n` and one waiting key, `n`, all consistent.
    fn queued(n: u32) -> (PriorityQueueCore<u32>, Instant) {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        for k in 0..n {
            q.add(k, Duration::ZERO, None, || t, &mut ());
        }
        q.add(n, S, Some(2), || t, &mut ());
        assert_eq!(q.check_invariants(), Ok(()));
        (q, t)
    }

    /// P1 for one key: an entry with no tree entry under its fields, and one whose tree key
    /// holds another key, are both reported; a key with no entry, or a consistent one, is not.
    #[test]
    fn check_key_reports_each_way_an_entry_can_lose_its_tree_entry() {
        let (mut q, t) = queued(2);
        assert_eq!(q.check_key(&0), Ok(()));
        assert_eq!(q.check_key(&2), Ok(()), "the waiting key");
        assert_eq!(q.check_key(&7), Ok(()), "no entry, nothing to check");

        // Key 0's tree entry holds key 1 instead.
        let e0 = q.entry(&0).unwrap();
        q.ready.insert((Reverse(e0.priority), e0.added_counter), 1);
        assert_eq!(
            q.check_key(&0),
            Err("P1: an entry's tree key holds another key".into())
        );

        // The waiting key's entry moved in time but its tree entry did not.
        let (mut q, _) = queued(2);
        q.entry_mut(&2).unwrap().ready_at = Some(t + 2 * S);
        assert_eq!(
            q.check_key(&2),
            Err("P1: an entry has no tree entry under its fields".into())
        );
        assert_eq!(q.check_invariants(), q.check_key(&2), "the full check too");

        // A ready entry whose priority changed without its tree entry.
        let (mut q, _) = queued(2);
        q.entry_mut(&1).unwrap().priority = 5;
        assert!(q.check_key(&1).unwrap_err().starts_with("P1"));
    }

    /// P3 both ways: a counter two entries share, and a counter not yet given out, each alone.
    #[test]
    fn check_invariants_reports_a_reused_or_future_counter() {
        let (mut q, _) = queued(2);
        // Key 1 takes key 0's counter (its tree entry moves with it, so P1 still holds).
        let e0 = q.entry(&0).unwrap();
        let e1 = q.entry(&1).unwrap();
        let key1 = q.ready.remove(&(Reverse(e1.priority), e1.added_counter));
        let reused = Entry {
            priority: 1,
            added_counter: e0.added_counter,
            ..e1
        };
        q.ready
            .insert((Reverse(1), e0.added_counter), key1.unwrap());
        *q.entry_mut(&1).unwrap() = reused;
        assert_eq!(
            q.check_invariants(),
            Err(format!(
                "P3: counter {} is reused or not yet given out",
                e0.added_counter
            ))
        );

        // The next counter to give out, and one beyond it, are both in the future.
        for ahead in [0, 1] {
            let (mut q, _) = queued(2);
            let future = q.added_counter + ahead;
            let e = q.entry(&1).unwrap();
            let key = q
                .ready
                .remove(&(Reverse(e.priority), e.added_counter))
                .unwrap();
            q.ready.insert((Reverse(e.priority), future), key);
            q.entry_mut(&1).unwrap().added_counter = future;
            assert_eq!(
                q.check_invariants(),
                Err(format!(
                    "P3: counter {future} is reused or not yet given out"
                ))
            );
        }
    }

    /// P2: a stray entry in either tree, with every item's own entry in place.
    #[test]
    fn check_invariants_reports_a_stray_tree_entry_in_either_tree() {
        let (mut q, t) = queued(2);
        q.waiting.insert((t + 9 * S, Reverse(0), 99), 9);
        assert_eq!(
            q.check_invariants(),
            Err("P2: 2 ready + 2 waiting tree entries for 3 items".into())
        );
        let (mut q, _) = queued(2);
        q.ready.insert((Reverse(0), 99), 9);
        assert_eq!(
            q.check_invariants(),
            Err("P2: 3 ready + 1 waiting tree entries for 3 items".into())
        );
    }

    /// Catches the panic `f` must raise and returns its message.
    #[cfg(debug_assertions)]
    fn panic_message(f: impl FnOnce()) -> String {
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .expect_err("an invariant check must panic");
        err.downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default()
    }

    /// Debug builds check after every mutation: a corrupted core panics at the next add, the
    /// next promotion, naming the invariant.
    #[cfg(debug_assertions)]
    #[test]
    fn debug_builds_panic_on_the_first_mutation_after_an_invariant_breaks() {
        let (mut q, t) = queued(2);
        q.ready.insert((Reverse(0), 99), 9);
        let message = panic_message(|| {
            q.add(5, Duration::ZERO, None, || t, &mut ());
        });
        assert!(
            message.starts_with("priority queue invariant broken: P2:"),
            "{message}"
        );

        let (mut q, t) = queued(2);
        q.entry_mut(&0).unwrap().priority = 5;
        let message = panic_message(|| {
            q.promote_due(t + S, &mut ());
        });
        assert!(
            message.starts_with("priority queue invariant broken: P1:"),
            "{message}"
        );
    }

    /// Up to 64 entries a debug build checks P1–P3 in full, so a stray tree entry (P2) is
    /// caught whichever key the mutation touched; above, it checks P1 for the touched key only.
    #[cfg(debug_assertions)]
    #[test]
    fn debug_builds_check_in_full_up_to_64_entries_then_the_touched_key() {
        assert_eq!(FULL_CHECK_MAX, 64);
        // 64 entries: the full check.
        let (mut q, _) = queued(63);
        assert_eq!(q.items.len(), 64);
        q.waiting
            .insert((Instant::now() + 9 * S, Reverse(0), 999), 999);
        let message = panic_message(|| q.debug_check(&0));
        assert!(message.contains("P2:"), "{message}");

        // 65 entries: only the touched key; a consistent one passes despite the stray entry.
        let (mut q, _) = queued(64);
        assert_eq!(q.items.len(), 65);
        q.waiting
            .insert((Instant::now() + 9 * S, Reverse(0), 999), 999);
        q.debug_check(&0);
        assert!(q.check_invariants().unwrap_err().starts_with("P2"));
        // ... and a touched key without its tree entry does not.
        let e = q.entry(&3).unwrap();
        q.ready.remove(&(Reverse(e.priority), e.added_counter));
        let message = panic_message(|| q.debug_check(&3));
        assert!(message.contains("P1:"), "{message}");
    }

    /// A delay too large for the clock saturates to `FAR_FUTURE` after now: the key waits,
    /// never comes due within a lifetime, and an add without a delay still readies it.
    #[test]
    fn a_delay_past_the_clock_saturates_to_the_far_future() {
        let (mut q, t) = (PriorityQueueCore::new(), Instant::now());
        assert_eq!(
            q.add("never", Duration::MAX, None, || t, &mut ()),
            PriorityAdd::NewWaiting
        );
        assert_eq!(q.entry(&"never").unwrap().ready_at, Some(t + FAR_FUTURE));
        assert_eq!(q.next_ready_at(), Some(t + FAR_FUTURE));
        let year = Duration::from_secs(86_400 * 365);
        let p = q.promote_due(t + 29 * year, &mut ());
        assert_eq!(p.moved, 0);
        assert_eq!(q.promote_due(t + FAR_FUTURE, &mut ()).moved, 1);
        assert_eq!(q.get(&mut ()), PriorityGet::Item("never", 0));
    }
}
