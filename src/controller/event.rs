//! The events a controller's source delivers to its predicates and handlers. Follows
//! controller-runtime's `pkg/event` and the source adapter in
//! `pkg/internal/source/event_handler.go`.
//!
//! An event is how a controller *hears* about a change. It is not what the controller acts
//! on: handlers turn it into a [`Request`](super::Request), which keeps only the name and
//! namespace, and the event is then dropped.

use std::sync::Arc;

/// One notification from the informer, as controller-runtime presents it.
#[derive(Debug)]
pub enum Event<K> {
    /// The informer's `on_add`.
    Create {
        /// The new object.
        object: Arc<K>,
        /// Whether it came from the informer's initial list.
        is_in_initial_list: bool,
    },
    /// The informer's `on_update`. Upstream allows either side to be missing (nil); the
    /// predicates' rules for that case are part of what is ported.
    Update {
        /// The object before the change (the cached one).
        old: Option<Arc<K>>,
        /// The object after the change. For a resync, the *same* `Arc` as `old`.
        new: Option<Arc<K>>,
    },
    /// The informer's `on_delete`, with a tombstone already unwrapped.
    Delete {
        /// The last known state of the object.
        object: Arc<K>,
        /// True when the object came from a tombstone: the deletion was inferred from a
        /// relist, and `object` may be stale.
        delete_state_unknown: bool,
    },
    /// An event from outside the cluster (a timer, a webhook).
    Generic {
        /// The object the event is about.
        object: Arc<K>,
    },
}

impl<K> Clone for Event<K> {
    fn clone(&self) -> Self {
        match self {
            Event::Create {
                object,
                is_in_initial_list,
            } => Event::Create {
                object: object.clone(),
                is_in_initial_list: *is_in_initial_list,
            },
            Event::Update { old, new } => Event::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Event::Delete {
                object,
                delete_state_unknown,
            } => Event::Delete {
                object: object.clone(),
                delete_state_unknown: *delete_state_unknown,
            },
            Event::Generic { object } => Event::Generic {
                object: object.clone(),
            },
        }
    }
}

impl<K> Event<K> {
    /// The event's kind, for logs and tables: `create`, `update`, `delete` or `generic`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Create { .. } => "create",
            Event::Update { .. } => "update",
            Event::Delete { .. } => "delete",
            Event::Generic { .. } => "generic",
        }
    }
}
