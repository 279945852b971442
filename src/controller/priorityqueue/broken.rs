//! **Deliberately wrong** priority queues, for showing a detector firing: never use one for
//! work.
//!
//! No upstream file. The model check and the shuttle test need a priority queue that breaks a
//! promise, to show that they catch it. Each variant is built *around* the faithful queue, from
//! its public operations, so the faithful files ([`PriorityQueueCore`], [`PriorityQueue`])
//! carry no trace of it.

use std::{hash::Hash, ops::Deref, time::Duration};

use tokio::time::Instant;

use super::{
    AddOpts, Observer, Priority, PriorityAdd, PriorityDone, PriorityGet, PriorityQueue,
    PriorityQueueCore, Promoted,
};
use crate::workqueue::{Claim, ClaimQueue};

/// The promise a broken queue breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// `get` forgets the locked set: a key re-added while held is handed out again, so two
    /// workers hold it at once.
    HandsOutLockedKeys,
    /// A merge keeps the first priority: a key queued at a low priority stays there when an
    /// add asks for more.
    IgnoresPriorityRaise,
}

/// **Deliberately wrong**: a [`PriorityQueueCore`] with `bug`. Its queries are the faithful
/// core's ([`Deref`]); `add`, `get` and `done` carry the bug.
#[derive(Debug)]
pub struct PriorityQueueCoreWithBug<T> {
    inner: PriorityQueueCore<T>,
    bug: Bug,
}

impl<T: Eq + Hash + Clone> PriorityQueueCoreWithBug<T> {
    /// An empty queue with `bug`.
    pub fn new(bug: Bug) -> Self {
        Self {
            inner: PriorityQueueCore::new(),
            bug,
        }
    }

    /// As [`PriorityQueueCore::add`]; with [`Bug::IgnoresPriorityRaise`] a queued key keeps
    /// its priority.
    pub fn add(
        &mut self,
        key: T,
        after: Duration,
        priority: Option<Priority>,
        now: impl FnOnce() -> Instant,
        obs: &mut impl Observer<T>,
    ) -> PriorityAdd {
        let priority = match (self.bug, self.inner.entry(&key)) {
            (Bug::IgnoresPriorityRaise, Some(old)) => Some(old.priority), // the mistake
            _ => priority,
        };
        self.inner.add(key, after, priority, now, obs)
    }

    /// As [`PriorityQueueCore::get`]; with [`Bug::HandsOutLockedKeys`] the key handed out is
    /// not kept locked.
    pub fn get(&mut self, obs: &mut impl Observer<T>) -> PriorityGet<T> {
        let got = self.inner.get(obs);
        if let (Bug::HandsOutLockedKeys, PriorityGet::Item(key, _)) = (self.bug, &got) {
            self.inner.done(key); // the mistake: forget the key is held
        }
        got
    }

    /// As [`PriorityQueueCore::done`]; with [`Bug::HandsOutLockedKeys`] it reports
    /// [`PriorityDone::Released`] and changes nothing (the key was never kept locked).
    pub fn done(&mut self, key: &T) -> PriorityDone {
        match self.bug {
            Bug::HandsOutLockedKeys => PriorityDone::Released,
            Bug::IgnoresPriorityRaise => self.inner.done(key),
        }
    }

    /// As [`PriorityQueueCore::promote_due`].
    pub fn promote_due(&mut self, now: Instant, obs: &mut impl Observer<T>) -> Promoted {
        self.inner.promote_due(now, obs)
    }

    /// As [`PriorityQueueCore::shut_down`].
    pub fn shut_down(&mut self) {
        self.inner.shut_down();
    }
}

impl<T> Deref for PriorityQueueCoreWithBug<T> {
    type Target = PriorityQueueCore<T>;
    fn deref(&self) -> &PriorityQueueCore<T> {
        &self.inner
    }
}

/// **Deliberately wrong**: a [`PriorityQueue`] that hands a key out again while a worker holds
/// it ([`Bug::HandsOutLockedKeys`]).
#[derive(Debug)]
pub struct PriorityQueueHandingOutLockedKeys<T> {
    inner: PriorityQueue<T>,
}

impl<T> Clone for PriorityQueueHandingOutLockedKeys<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Default
    for PriorityQueueHandingOutLockedKeys<T>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> PriorityQueueHandingOutLockedKeys<T> {
    /// An unnamed queue with the default limiter.
    ///
    /// # Panics
    /// Outside a tokio runtime, as [`PriorityQueue::new`].
    pub fn new() -> Self {
        Self {
            inner: PriorityQueue::new(""),
        }
    }

    /// As [`PriorityQueue::add`].
    pub fn add(&self, item: T) {
        self.inner.add(item);
    }

    /// As [`PriorityQueue::add_with_opts`].
    pub fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = T>) {
        self.inner.add_with_opts(opts, items);
    }

    /// As [`PriorityQueue::get_with_priority`], except that the key is not kept locked.
    pub async fn get_with_priority(&self) -> Option<(T, Priority)> {
        let (item, priority) = self.inner.get_with_priority().await?;
        self.inner.done(&item); // the mistake: forget the key is held
        Some((item, priority))
    }

    /// As [`PriorityQueue::get`], except that the key is not kept locked.
    pub async fn get(&self) -> Option<T> {
        Some(self.get_with_priority().await?.0)
    }

    /// As [`PriorityQueue::claim_with_priority`]; the claim's release does nothing.
    pub async fn claim_with_priority(&self) -> Option<(Claim<T, Self>, Priority)> {
        let (item, priority) = self.get_with_priority().await?;
        Some((Claim::new(self.clone(), item), priority))
    }

    /// Does nothing: the key was released when it was handed out.
    pub fn done(&self, _item: &T) {}

    /// As [`PriorityQueue::len`].
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// As [`PriorityQueue::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// As [`PriorityQueue::shut_down`].
    pub fn shut_down(&self) {
        self.inner.shut_down();
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> ClaimQueue<T>
    for PriorityQueueHandingOutLockedKeys<T>
{
    fn release(&self, item: &T) {
        self.done(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broken_cores_misbehave() {
        let t = Instant::now();
        let mut q = PriorityQueueCoreWithBug::new(Bug::HandsOutLockedKeys);
        q.add("a", Duration::ZERO, None, || t, &mut ());
        assert_eq!(q.get(&mut ()), PriorityGet::Item("a", 0));
        q.add("a", Duration::ZERO, None, || t, &mut ());
        assert_eq!(
            q.get(&mut ()),
            PriorityGet::Item("a", 0),
            "handed out while held"
        );

        let mut q = PriorityQueueCoreWithBug::new(Bug::IgnoresPriorityRaise);
        q.add("a", Duration::ZERO, Some(-100), || t, &mut ());
        q.add("a", Duration::ZERO, Some(5), || t, &mut ());
        assert_eq!(q.entry(&"a").unwrap().priority, -100);
    }
}
