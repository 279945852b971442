//! Event handlers: how an event becomes a [`Request`]. Follows controller-runtime's
//! `pkg/handler/enqueue.go` (v0.22.5 and v0.24.1 alike, but for priorities).
//!
//! [`EnqueueRequestForObject`] is the handler almost every controller uses, and it reads
//! exactly two fields of the event's object: its name and its namespace. Everything else the
//! event carried — what kind of change it was, the old and new contents — is discarded here, on
//! purpose. That is the rule that makes a controller level-triggered.
//!
//! # Differences from upstream
//! - With the priority queue (v0.24's default), upstream enqueues an initial-list create and
//!   an unchanged-resourceVersion update at `LowPriority`. Priorities are not modelled yet
//!   (see [`Release`](super::Release)); every request is a plain add.

use kube::Resource;

use super::{Request, event::Event};

/// Turns events into requests. `enqueue` is called once per request to add.
pub trait EventHandler<K>: Send + Sync {
    /// Handles one event, enqueueing zero or more requests.
    fn handle(&self, event: &Event<K>, enqueue: &mut dyn FnMut(Request));
}

/// Enqueues a request for the object the event is about, and nothing else.
///
/// - create, delete, generic: the event's object;
/// - update: the new object if present, else the old one; one request even if the name
///   changed; nothing (and an error log) if both are missing.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnqueueRequestForObject;

impl EnqueueRequestForObject {
    /// The one request this handler makes for `event`, if any.
    pub fn request_for<K: Resource>(event: &Event<K>) -> Option<Request> {
        let object: &K = match event {
            Event::Create { object, .. }
            | Event::Delete { object, .. }
            | Event::Generic { object } => object,
            Event::Update { new: Some(new), .. } => new,
            Event::Update {
                old: Some(old),
                new: None,
            } => old,
            Event::Update {
                old: None,
                new: None,
            } => {
                tracing::error!("UpdateEvent received with no metadata");
                return None;
            }
        };
        // The only two fields read from the event.
        let meta = object.meta();
        Some(Request::new(
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        ))
    }
}

impl<K: Resource> EventHandler<K> for EnqueueRequestForObject {
    fn handle(&self, event: &Event<K>, enqueue: &mut dyn FnMut(Request)) {
        if let Some(r) = Self::request_for(event) {
            enqueue(r);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Follows `pkg/handler/eventhandler_test.go`.
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::{collections::BTreeMap, sync::Arc};

    fn cm(ns: &str, name: &str, data: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("v".to_owned(), data.to_owned())])),
            ..Default::default()
        })
    }

    fn requests(ev: Event<ConfigMap>) -> Vec<Request> {
        let mut out = vec![];
        EnqueueRequestForObject.handle(&ev, &mut |r| out.push(r));
        out
    }

    #[test]
    fn an_update_enqueues_one_request_with_the_new_objects_name() {
        let ev = Event::Update {
            old: Some(cm("ns", "old", "1")),
            new: Some(cm("ns", "new", "2")),
        };
        assert_eq!(requests(ev), vec![Request::new("ns", "new")]);
    }

    #[test]
    fn an_update_missing_its_new_object_falls_back_to_the_old() {
        let ev = Event::Update {
            old: Some(cm("ns", "old", "1")),
            new: None,
        };
        assert_eq!(requests(ev), vec![Request::new("ns", "old")]);
    }

    #[test]
    fn an_update_with_no_objects_enqueues_nothing() {
        assert!(
            requests(Event::Update {
                old: None,
                new: None
            })
            .is_empty()
        );
    }

    #[test]
    fn the_request_is_the_same_whatever_the_payload() {
        let a = requests(Event::Create {
            object: cm("ns", "x", "1"),
            is_in_initial_list: false,
        });
        let b = requests(Event::Delete {
            object: cm("ns", "x", "99"),
            delete_state_unknown: true,
        });
        assert_eq!(a, b);
    }
}
