//! The controller's source: informer callbacks turned into events, filtered by predicates and
//! handed to the event handler, which enqueues requests. Follows controller-runtime's
//! `pkg/internal/source/event_handler.go` (v0.22.5, v0.24.1 and v0.25.3 alike).
//!
//! ```text
//!  on_add(obj, initial) ──► Event::Create ─┐
//!  on_update(old, new)  ──► Event::Update ─┼─► every predicate ─► EventHandler ─► queue
//!  on_delete(obj | tombstone) ► Event::Delete (tombstone unwrapped) ─┘   add_with_opts{priority}
//! ```
//!
//! Each request is added at [`priority_when_unchanged`] for its event: `LOW_PRIORITY` for an
//! initial-list create or a resync, none otherwise (a rate-limiting queue ignores it).
//!
//! # Invariants
//! 1. `events` counts every callback that reaches the source; `enqueued` every request the
//!    handler adds (before the queue coalesces them).
//!
//! # Differences from upstream
//! - Upstream also drops a tombstone whose object is of the wrong type; here the type system
//!   rules that out, so only a tombstone without an object is dropped (with the same error).
//! - The low priority is applied here, for any handler, rather than inside each built-in
//!   handler (see [`handler`](super::handler)'s differences).

use std::sync::{Arc, atomic::Ordering};

use super::{
    Event,
    handler::{EventHandler, priority_when_unchanged},
    metrics::ControllerMetrics,
    predicate::Predicate,
    priorityqueue::AddOpts,
    queue::RequestQueue,
};
use crate::cache::{DeletedObject, Object, ResourceEventHandler};

/// The informer handler: callbacks → [`Event`] → predicates → handler → queue (upstream's
/// `EventHandler` adapter in `pkg/internal/source`).
pub(crate) struct Source<K> {
    pub(crate) predicates: Vec<Box<dyn Predicate<K>>>,
    pub(crate) handler: Box<dyn EventHandler<K>>,
    pub(crate) queue: RequestQueue,
    pub(crate) metrics: Arc<ControllerMetrics>,
}

impl<K: Object> Source<K> {
    fn deliver(&self, event: Event<K>) {
        self.metrics.events.fetch_add(1, Ordering::SeqCst); // keeps I1
        if !self.predicates.iter().all(|p| p.matches(&event)) {
            return;
        }
        let opts = AddOpts {
            priority: priority_when_unchanged(&event),
            ..AddOpts::default()
        };
        self.handler.handle(&event, &mut |request| {
            self.metrics.enqueued.fetch_add(1, Ordering::SeqCst);
            self.queue.add_with_opts(opts, [request]);
        });
    }
}

impl<K: Object> ResourceEventHandler<K> for Source<K> {
    fn on_add(&self, object: Arc<K>, is_in_initial_list: bool) {
        self.deliver(Event::Create {
            object,
            is_in_initial_list,
        });
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        self.deliver(Event::Update {
            old: Some(old),
            new: Some(new),
        });
    }
    fn on_delete(&self, deleted: DeletedObject<K>) {
        let delete_state_unknown = deleted.is_tombstone();
        match deleted.object() {
            Some(object) => self.deliver(Event::Delete {
                object: object.clone(),
                delete_state_unknown,
            }),
            // Upstream drops a tombstone without an object, with an error log.
            None => tracing::error!("DeletedFinalStateUnknown without an object; dropped"),
        }
    }
}
