//! Predicates: filters that decide which events reach a controller's handler. Follows
//! controller-runtime's `pkg/predicate/predicate.go` (v0.22.5; unchanged in v0.24.1 and v0.25.3).
//!
//! The four built-in predicates override only updates; creates, deletes and generic events
//! pass. Each compares one thing between the old and the new object:
//!
//! | predicate | an update passes when |
//! |---|---|
//! | [`GenerationChanged`] | `metadata.generation` differs |
//! | [`ResourceVersionChanged`] | `metadata.resourceVersion` differs |
//! | [`AnnotationChanged`] | the annotation maps differ (a missing map equals an empty one) |
//! | [`LabelChanged`] | the label maps differ (likewise) |
//!
//! An update with a missing old or new object is logged as an error and filtered out, as
//! upstream does. A resync delivers the *same* object as old and new, so every one of these
//! predicates filters it out: that is how a lowered `SyncPeriod` ends up doing nothing.
//!
//! Combinators: [`And`] of nothing is true, [`Or`] of nothing is false, both short-circuit in
//! order; [`Not`] inverts.

use std::{collections::BTreeMap, sync::Arc};

use kube::Resource;

use super::event::Event;

/// A filter on events. Implementations override the kinds they care about; the defaults let
/// everything through, as upstream's `predicate.Funcs` does for a nil func.
pub trait Predicate<K>: Send + Sync {
    /// Whether a create event passes.
    fn create(&self, _object: &K, _is_in_initial_list: bool) -> bool {
        true
    }
    /// Whether an update event passes. Either side may be missing.
    fn update(&self, _old: Option<&K>, _new: Option<&K>) -> bool {
        true
    }
    /// Whether a delete event passes.
    fn delete(&self, _object: &K, _delete_state_unknown: bool) -> bool {
        true
    }
    /// Whether a generic event passes.
    fn generic(&self, _object: &K) -> bool {
        true
    }

    /// Dispatches `event` to the method for its kind.
    fn matches(&self, event: &Event<K>) -> bool {
        match event {
            Event::Create {
                object,
                is_in_initial_list,
            } => self.create(object, *is_in_initial_list),
            Event::Update { old, new } => self.update(old.as_deref(), new.as_deref()),
            Event::Delete {
                object,
                delete_state_unknown,
            } => self.delete(object, *delete_state_unknown),
            Event::Generic { object } => self.generic(object),
        }
    }
}

/// Logs the missing side of an update and reports whether both sides are there.
fn both<'a, K>(predicate: &str, old: Option<&'a K>, new: Option<&'a K>) -> Option<(&'a K, &'a K)> {
    match (old, new) {
        (Some(o), Some(n)) => Some((o, n)),
        (None, _) => {
            tracing::error!(predicate, "Update event has no old object to update");
            None
        }
        (_, None) => {
            tracing::error!(predicate, "Update event has no new object to update");
            None
        }
    }
}

/// Passes an update only when `metadata.generation` changed. Status-only writes do not bump
/// the generation, so they are filtered out too.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationChanged;

impl<K: Resource + Send + Sync> Predicate<K> for GenerationChanged {
    fn update(&self, old: Option<&K>, new: Option<&K>) -> bool {
        both("GenerationChanged", old, new)
            .is_some_and(|(o, n)| o.meta().generation != n.meta().generation)
    }
}

/// Passes an update only when `metadata.resourceVersion` changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceVersionChanged;

impl<K: Resource + Send + Sync> Predicate<K> for ResourceVersionChanged {
    fn update(&self, old: Option<&K>, new: Option<&K>) -> bool {
        both("ResourceVersionChanged", old, new)
            .is_some_and(|(o, n)| o.meta().resource_version != n.meta().resource_version)
    }
}

/// Go's `maps.Equal` on two possibly-nil maps: nil equals empty.
fn maps_equal(a: Option<&BTreeMap<String, String>>, b: Option<&BTreeMap<String, String>>) -> bool {
    let empty = BTreeMap::new();
    a.unwrap_or(&empty) == b.unwrap_or(&empty)
}

/// Passes an update only when the annotations changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnnotationChanged;

impl<K: Resource + Send + Sync> Predicate<K> for AnnotationChanged {
    fn update(&self, old: Option<&K>, new: Option<&K>) -> bool {
        both("AnnotationChanged", old, new).is_some_and(|(o, n)| {
            !maps_equal(o.meta().annotations.as_ref(), n.meta().annotations.as_ref())
        })
    }
}

/// Passes an update only when the labels changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelChanged;

impl<K: Resource + Send + Sync> Predicate<K> for LabelChanged {
    fn update(&self, old: Option<&K>, new: Option<&K>) -> bool {
        both("LabelChanged", old, new)
            .is_some_and(|(o, n)| !maps_equal(o.meta().labels.as_ref(), n.meta().labels.as_ref()))
    }
}

/// A shareable predicate.
pub type BoxPredicate<K> = Arc<dyn Predicate<K>>;

/// True when every predicate is true (true for none). Short-circuits in order.
pub struct And<K>(pub Vec<BoxPredicate<K>>);

/// True when any predicate is true (false for none). Short-circuits in order.
pub struct Or<K>(pub Vec<BoxPredicate<K>>);

/// Inverts a predicate.
pub struct Not<K>(pub BoxPredicate<K>);

impl<K: Send + Sync> Predicate<K> for And<K> {
    fn matches(&self, event: &Event<K>) -> bool {
        self.0.iter().all(|p| p.matches(event))
    }
}

impl<K: Send + Sync> Predicate<K> for Or<K> {
    fn matches(&self, event: &Event<K>) -> bool {
        self.0.iter().any(|p| p.matches(event))
    }
}

impl<K: Send + Sync> Predicate<K> for Not<K> {
    fn matches(&self, event: &Event<K>) -> bool {
        !self.0.matches(event)
    }
}

/// A predicate from a closure over the whole event.
pub struct Funcs<F>(pub F);

impl<K, F: Fn(&Event<K>) -> bool + Send + Sync> Predicate<K> for Funcs<F> {
    fn matches(&self, event: &Event<K>) -> bool {
        (self.0)(event)
    }
}

#[cfg(test)]
mod tests {
    //! Follows `pkg/predicate/predicate_test.go`.
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(rv: &str, generation: Option<i64>, labels: Option<&[(&str, &str)]>) -> Arc<ConfigMap> {
        let labels = labels.map(|l| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        });
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("default".into()),
                resource_version: Some(rv.into()),
                generation,
                labels,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn update(old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) -> Event<ConfigMap> {
        Event::Update {
            old: Some(old.clone()),
            new: Some(new.clone()),
        }
    }

    #[test]
    fn generation_changed_passes_only_a_changed_generation() {
        let (a, b) = (cm("1", Some(7), None), cm("2", Some(8), None));
        assert!(GenerationChanged.matches(&update(&a, &b)));
        assert!(!GenerationChanged.matches(&update(&a, &cm("2", Some(7), None))));
    }

    #[test]
    fn every_builtin_predicate_filters_a_resync_of_the_same_object() {
        let a = cm("5", Some(3), Some(&[("app", "x")]));
        let resync = update(&a, &a);
        let preds: [BoxPredicate<ConfigMap>; 4] = [
            Arc::new(GenerationChanged),
            Arc::new(ResourceVersionChanged),
            Arc::new(AnnotationChanged),
            Arc::new(LabelChanged),
        ];
        for p in &preds {
            assert!(!p.matches(&resync));
        }
    }

    #[test]
    fn a_missing_old_or_new_object_is_filtered() {
        let a = cm("1", Some(1), None);
        for ev in [
            Event::Update {
                old: None,
                new: Some(a.clone()),
            },
            Event::Update {
                old: Some(a.clone()),
                new: None,
            },
        ] {
            assert!(!GenerationChanged.matches(&ev));
            assert!(!ResourceVersionChanged.matches(&ev));
            assert!(!AnnotationChanged.matches(&ev));
            assert!(!LabelChanged.matches(&ev));
        }
    }

    #[test]
    fn creates_deletes_and_generic_events_pass() {
        let a = cm("1", Some(1), None);
        for ev in [
            Event::Create {
                object: a.clone(),
                is_in_initial_list: true,
            },
            Event::Delete {
                object: a.clone(),
                delete_state_unknown: false,
            },
            Event::Generic { object: a.clone() },
        ] {
            assert!(GenerationChanged.matches(&ev), "{}", ev.kind());
            assert!(LabelChanged.matches(&ev), "{}", ev.kind());
        }
    }

    #[test]
    fn a_missing_label_map_equals_an_empty_one() {
        let (none, empty) = (cm("1", None, None), cm("2", None, Some(&[])));
        assert!(!LabelChanged.matches(&update(&none, &empty)));
        assert!(LabelChanged.matches(&update(&none, &cm("2", None, Some(&[("a", "b")])))));
        assert!(ResourceVersionChanged.matches(&update(&none, &empty)));
    }

    #[test]
    fn and_or_not_follow_their_truth_tables() {
        let ev = update(&cm("1", Some(1), None), &cm("2", Some(1), None));
        let t: BoxPredicate<ConfigMap> = Arc::new(ResourceVersionChanged);
        let f: BoxPredicate<ConfigMap> = Arc::new(GenerationChanged);
        assert!(And::<ConfigMap>(vec![]).matches(&ev));
        assert!(!Or::<ConfigMap>(vec![]).matches(&ev));
        assert!(And(vec![t.clone(), t.clone()]).matches(&ev));
        assert!(!And(vec![t.clone(), f.clone()]).matches(&ev));
        assert!(Or(vec![f.clone(), t.clone()]).matches(&ev));
        assert!(!Or(vec![f.clone(), f.clone()]).matches(&ev));
        assert!(Not(f).matches(&ev) && !Not(t).matches(&ev));
    }
}
