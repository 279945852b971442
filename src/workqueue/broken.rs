//! **Deliberately wrong** workqueues, for showing a detector firing: never use one for work.
//!
//! No upstream file. The book, the model checks and the shuttle test need a queue that breaks
//! the one promise that matters, "one worker per key", to show that their checks catch it.
//! Each variant here is built *around* the faithful queue, from its public operations, so the
//! faithful files ([`super::Queue`], [`super::QueueCore`]) carry no trace of it.
//!
//! - [`QueueWithoutProcessingSet`]: the async queue that forgets which keys are held.
//! - [`QueueCoreWithoutProcessingSet`]: the same mistake in the pure core, for the model check.
//!
//! Both hand a key out and at once give it back to the faithful queue underneath (`done`), so
//! nothing remembers that a worker holds it: an add while it is held queues it again, and a
//! second worker can take it.

use std::{hash::Hash, ops::Deref};

use super::{Claim, ClaimQueue, Queue, QueueAdd, QueueCore, QueueDone, QueueGet};

/// **Deliberately wrong**: a [`Queue`] without its processing set. Two workers can hold one
/// key at once.
///
/// ```
/// use controlloop::workqueue::broken::QueueWithoutProcessingSet;
/// use futures::FutureExt;
///
/// let broken = QueueWithoutProcessingSet::new();
/// broken.add("default/web");
/// let first = broken.get().now_or_never().flatten(); // worker 1 takes it
/// broken.add("default/web"); // it changes while held
/// let second = broken.get().now_or_never().flatten(); // worker 2 takes it too
/// assert_eq!((first, second), (Some("default/web"), Some("default/web")));
/// ```
#[derive(Debug)]
pub struct QueueWithoutProcessingSet<T> {
    inner: Queue<T>,
}

impl<T> Clone for QueueWithoutProcessingSet<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Eq + Hash + Clone> Default for QueueWithoutProcessingSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Eq + Hash + Clone> QueueWithoutProcessingSet<T> {
    /// An unnamed queue without metrics.
    pub fn new() -> Self {
        Self {
            inner: Queue::new(),
        }
    }

    /// As [`Queue::add`].
    pub fn add(&self, item: T) {
        self.inner.add(item);
    }

    /// As [`Queue::get`], except that the key is released at once: nothing records that the
    /// caller holds it.
    pub async fn get(&self) -> Option<T> {
        let item = self.inner.get().await?;
        self.inner.done(&item); // the mistake: forget the key is held
        Some(item)
    }

    /// As [`Queue::claim`]; the claim's release does nothing (the key was never held).
    pub async fn claim(&self) -> Option<Claim<T, Self>> {
        let item = self.get().await?;
        Some(Claim::new(self.clone(), item))
    }

    /// Does nothing: the key was released when it was handed out.
    pub fn done(&self, _item: &T) {}

    /// As [`Queue::len`].
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// As [`Queue::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// As [`Queue::shut_down`].
    pub fn shut_down(&self) {
        self.inner.shut_down();
    }

    /// As [`Queue::shutting_down`].
    pub fn shutting_down(&self) -> bool {
        self.inner.shutting_down()
    }
}

impl<T: Eq + Hash + Clone> ClaimQueue<T> for QueueWithoutProcessingSet<T> {
    fn release(&self, item: &T) {
        self.done(item);
    }
}

/// **Deliberately wrong**: a [`QueueCore`] that forgets which items are held. Its queries are
/// the faithful core's ([`Deref`]); `get` and `done` are the broken pair.
#[derive(Debug, Default)]
pub struct QueueCoreWithoutProcessingSet<T> {
    inner: QueueCore<T>,
}

impl<T> QueueCoreWithoutProcessingSet<T> {
    /// An empty queue.
    pub fn new() -> Self {
        Self {
            inner: QueueCore::new(),
        }
    }

    /// As [`QueueCore::shut_down`].
    pub fn shut_down(&mut self, drain: bool) {
        self.inner.shut_down(drain);
    }
}

impl<T: Eq + Hash + Clone> QueueCoreWithoutProcessingSet<T> {
    /// As [`QueueCore::add`].
    pub fn add(&mut self, item: T) -> QueueAdd {
        self.inner.add(item)
    }

    /// As [`QueueCore::get`], except that the item is released at once (it is never processing).
    pub fn get(&mut self) -> QueueGet<T> {
        let got = self.inner.get();
        if let QueueGet::Item(item) = &got {
            self.inner.done(item); // the mistake: forget the item is held
        }
        got
    }

    /// Reports [`QueueDone::Released`] and changes nothing: the item was released when it was
    /// handed out.
    pub fn done(&mut self, _item: &T) -> QueueDone {
        QueueDone::Released
    }
}

impl<T> Deref for QueueCoreWithoutProcessingSet<T> {
    type Target = QueueCore<T>;
    fn deref(&self) -> &QueueCore<T> {
        &self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broken_core_hands_a_held_item_out_again() {
        let mut q = QueueCoreWithoutProcessingSet::new();
        q.add("a");
        assert_eq!(q.get(), QueueGet::Item("a"));
        assert_eq!(
            q.add("a"),
            QueueAdd::Queued,
            "nothing remembers that `a` is held"
        );
        assert_eq!(q.get(), QueueGet::Item("a"));
        assert_eq!(q.processing_len(), 0);
    }
}
