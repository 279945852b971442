//! The fake-clientset emulation (client-go v0.36 `NewSimpleClientset`): no resourceVersions,
//! no conflict checks, a hidden list counter, and a 100-event watch buffer that panics when
//! full.

mod apiserver_support;

use std::panic::{AssertUnwindSafe, catch_unwind};

use apiserver_support::cm;
use controlloop::{
    apiserver::EventType,
    fake::{DEFAULT_CHAN_SIZE, FakeClientset, FakeError},
};
use k8s_openapi::api::core::v1::ConfigMap;

#[test]
fn the_fake_never_sets_resource_versions_and_never_checks_them() {
    let fake = FakeClientset::new();
    let created = fake.create("default", &cm("a", &[], "1")).unwrap();
    assert_eq!(created.metadata.resource_version, None);
    assert_eq!(created.metadata.uid, None);
    let mut stale = created.clone();
    stale.metadata.resource_version = Some("999".into());
    stale.data = Some([("v".to_string(), "stale wins".to_string())].into());
    fake.update("default", &stale).unwrap();
    let got: ConfigMap = fake.get("default", "a").unwrap();
    assert_eq!(got.data.unwrap()["v"], "stale wins");
    assert_eq!(
        got.metadata.resource_version.as_deref(),
        Some("999"),
        "stored exactly as given"
    );
    assert!(matches!(
        fake.create("default", &cm("a", &[], "1")),
        Err(FakeError::AlreadyExists { .. })
    ));
    assert!(matches!(
        fake.update("default", &cm("b", &[], "1")),
        Err(FakeError::NotFound { .. })
    ));
}

#[test]
fn list_reports_a_hidden_counter_that_deletes_do_not_move() {
    let fake = FakeClientset::new();
    assert_eq!(fake.list::<ConfigMap>(None).unwrap().resource_version, "1");
    fake.create("default", &cm("a", &[], "1")).unwrap();
    fake.create("other", &cm("b", &[], "1")).unwrap();
    assert_eq!(fake.list::<ConfigMap>(None).unwrap().resource_version, "3");
    fake.delete::<ConfigMap>("default", "a").unwrap();
    let list = fake.list::<ConfigMap>(None).unwrap();
    assert_eq!((list.resource_version.as_str(), list.items.len()), ("3", 1));
}

#[tokio::test]
async fn watch_replays_objects_newer_than_its_version_then_fans_out_by_namespace() {
    let fake = FakeClientset::new();
    fake.create("default", &cm("a", &[], "1")).unwrap(); // hidden 2
    fake.create("default", &cm("b", &[], "1")).unwrap(); // hidden 3
    let from_empty = fake.watch::<ConfigMap>(Some("default"), "").unwrap();
    let mut from_two = fake.watch::<ConfigMap>(Some("default"), "2").unwrap();
    let mut all = fake.watch::<ConfigMap>(None, "3").unwrap();
    let mut other = fake.watch::<ConfigMap>(Some("other"), "").unwrap();
    assert_eq!(from_empty.buffered(), 2, "\"\" replays every object");
    let replayed = from_two.try_next().unwrap().unwrap();
    assert_eq!(
        (replayed.ty, replayed.object.metadata.name.as_deref()),
        (EventType::Added, Some("b"))
    );
    assert!(from_two.try_next().is_none());
    fake.delete::<ConfigMap>("default", "a").unwrap();
    let e = all.try_next().unwrap().unwrap();
    assert_eq!(
        (e.ty, e.object.metadata.name.as_deref()),
        (EventType::Deleted, Some("a"))
    );
    assert!(
        other.try_next().is_none(),
        "another namespace's watcher sees nothing"
    );
    assert!(matches!(
        fake.watch::<ConfigMap>(None, "abc"),
        Err(FakeError::InvalidResourceVersion(_))
    ));
}

#[test]
fn the_101st_undelivered_event_panics_with_channel_full_after_storing_the_object() {
    let fake = FakeClientset::new();
    let _watch = fake.watch::<ConfigMap>(None, "").unwrap();
    for i in 0..DEFAULT_CHAN_SIZE {
        fake.create("default", &cm(&format!("cm-{i}"), &[], "1"))
            .unwrap();
    }
    let overflow = catch_unwind(AssertUnwindSafe(|| {
        fake.create("default", &cm("one-too-many", &[], "1"))
    }));
    let msg = overflow.unwrap_err();
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"channel full"));
    // Upstream panics during fan-out, after the store: the object is there, the lock is free.
    assert!(fake.get::<ConfigMap>("default", "one-too-many").is_ok());
}

#[test]
#[should_panic(expected = "channel full")]
fn replaying_more_than_100_existing_objects_panics_inside_watch() {
    let fake = FakeClientset::new();
    for i in 0..=DEFAULT_CHAN_SIZE {
        fake.create("default", &cm(&format!("cm-{i}"), &[], "1"))
            .unwrap();
    }
    let _ = fake.watch::<ConfigMap>(None, "");
}

#[test]
fn a_stopped_watcher_ignores_sends_and_never_panics() {
    let fake = FakeClientset::new();
    let mut w = fake.watch::<ConfigMap>(None, "").unwrap();
    w.stop();
    for i in 0..(3 * DEFAULT_CHAN_SIZE) {
        fake.create("default", &cm(&format!("cm-{i}"), &[], "1"))
            .unwrap();
    }
    assert_eq!(w.buffered(), 0);
}
