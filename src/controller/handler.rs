//! Event handlers: how an event becomes a [`Request`]. Follows controller-runtime's
//! `pkg/handler/enqueue.go` (v0.22.5, v0.24.1 and v0.25.3 alike, but for priorities).
//!
//! [`EnqueueRequestForObject`] is the handler almost every controller uses, and it reads
//! exactly two fields of the event's object: its name and its namespace. Everything else the
//! event carried — what kind of change it was, the old and new contents — is discarded here, on
//! purpose. That is the rule that makes a controller level-triggered.
//!
//! With a priority queue (v0.24's and v0.25's default), the handlers also say *how urgent* a request is:
//! a create from the informer's initial list, and an update whose old and new
//! resourceVersions are equal (a resync: nothing changed), are added at [`LOW_PRIORITY`], so
//! that a controller starting over thousands of existing objects, or resyncing them, serves
//! real changes first ([`priority_when_unchanged`], upstream's `addToQueueCreate`,
//! `addToQueueUpdate` and `TypedFuncs` in `pkg/handler/eventhandler.go`, the same at v0.22.5
//! and v0.24.1). A rate-limiting queue ignores priorities.
//!
//! # Differences from upstream
//! - Upstream applies the low priority inside each built-in handler (and
//!   `WithLowPriorityWhenUnchanged` for others); a handler written against the bare interface
//!   does not get it. Here the controller's source applies it to every request any
//!   [`EventHandler`] enqueues for the event, so a custom handler gets it as the built-in
//!   ones do.

use kube::Resource;

use super::{Request, event::Event, priorityqueue::Priority};

/// The priority of requests for objects that did not change (upstream's
/// `handler.LowPriority`). A plain add is priority 0, so these wait behind every real change.
pub const LOW_PRIORITY: Priority = -100;

/// The priority a built-in handler asks for `event` on a priority queue: [`LOW_PRIORITY`]
/// for an initial-list create and for an update whose objects have the same
/// resourceVersion; otherwise none (priority 0). Delete and generic events always get none.
/// An update missing either object gets none (upstream's `TypedFuncs` adds it plainly).
pub fn priority_when_unchanged<K: Resource>(event: &Event<K>) -> Option<Priority> {
    let unchanged = match event {
        Event::Create {
            is_in_initial_list, ..
        } => *is_in_initial_list,
        Event::Update {
            old: Some(old),
            new: Some(new),
        } => old.meta().resource_version == new.meta().resource_version,
        Event::Update { .. } | Event::Delete { .. } | Event::Generic { .. } => false,
    };
    unchanged.then_some(LOW_PRIORITY)
}

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

    fn at_rv(rv: &str) -> Arc<ConfigMap> {
        let mut o = (*cm("ns", "x", "1")).clone();
        o.metadata.resource_version = Some(rv.into());
        Arc::new(o)
    }

    /// Upstream's `eventhandler_test.go` "WithLowPriorityWhenUnchanged" table: low for an
    /// initial-list create and an unchanged update; default for every other event.
    #[test]
    fn only_an_initial_list_create_and_an_unchanged_update_are_low_priority() {
        let cases: Vec<(&str, Event<ConfigMap>, Option<Priority>)> = vec![
            (
                "create, initial list",
                Event::Create {
                    object: at_rv("1"),
                    is_in_initial_list: true,
                },
                Some(LOW_PRIORITY),
            ),
            (
                "create, later",
                Event::Create {
                    object: at_rv("1"),
                    is_in_initial_list: false,
                },
                None,
            ),
            (
                "update, same rv (a resync)",
                Event::Update {
                    old: Some(at_rv("7")),
                    new: Some(at_rv("7")),
                },
                Some(LOW_PRIORITY),
            ),
            (
                "update, new rv",
                Event::Update {
                    old: Some(at_rv("7")),
                    new: Some(at_rv("8")),
                },
                None,
            ),
            (
                "update, no old object",
                Event::Update {
                    old: None,
                    new: Some(at_rv("7")),
                },
                None,
            ),
            (
                "delete",
                Event::Delete {
                    object: at_rv("7"),
                    delete_state_unknown: false,
                },
                None,
            ),
            ("generic", Event::Generic { object: at_rv("7") }, None),
        ];
        for (what, event, want) in cases {
            assert_eq!(priority_when_unchanged(&event), want, "{what}");
        }
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
