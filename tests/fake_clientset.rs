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

// client-go v0.38.0-beta.0's fake (`testing/fixture_test.go` at that tag): a delete moves the
// counter, and a watch replays the deletions after its resourceVersion or ends expired.

fn v038() -> FakeClientset {
    FakeClientset::at_minor(38).expect("v0.38 is modelled")
}

fn list_rv(fake: &FakeClientset) -> String {
    fake.list::<ConfigMap>(None).unwrap().resource_version
}

/// What has been sent to the watch so far, as `<type> <namespace>/<name>`, or `ERROR <message>`.
fn drain(w: &mut controlloop::fake::FakeWatch<ConfigMap>) -> Vec<String> {
    std::iter::from_fn(|| w.try_next())
        .map(|e| match e {
            Ok(e) => format!(
                "{} {}/{}",
                e.ty.as_str(),
                e.object.metadata.namespace.unwrap_or_default(),
                e.object.metadata.name.unwrap_or_default()
            ),
            Err(e) => format!("ERROR {e}"),
        })
        .collect()
}

/// Upstream's `TestDeleteBumpsResourceVersion`, with v0.37's fake beside it.
#[test]
fn at_v0_38_a_delete_moves_the_counter_and_a_failed_one_does_not() {
    let fake = v038();
    fake.create("ns", &cm("one", &[], "1")).unwrap();
    let before = list_rv(&fake);
    fake.delete::<ConfigMap>("ns", "one").unwrap();
    let after = list_rv(&fake);
    assert_eq!((before.as_str(), after.as_str()), ("2", "3"));
    assert!(matches!(
        fake.delete::<ConfigMap>("ns", "one"),
        Err(FakeError::NotFound { .. })
    ));
    assert_eq!(list_rv(&fake), after, "deleting nothing is not a change");

    let v037 = FakeClientset::at_minor(37).unwrap();
    v037.create("ns", &cm("one", &[], "1")).unwrap();
    v037.delete::<ConfigMap>("ns", "one").unwrap();
    assert_eq!(list_rv(&v037), "2", "v0.37: deletes do not move it");
}

/// Upstream's `TestWatchReplaysDeletions`: every case, on three ConfigMaps listed at "4".
#[test]
fn at_v0_38_a_watch_replays_the_deletions_after_its_version_first() {
    type Mutate = fn(&FakeClientset);
    /// A case's name, its change after the list, the watch's namespace and resourceVersion,
    /// and the events it must replay.
    type Case<'a> = (&'a str, Mutate, Option<&'a str>, &'a str, &'a [&'a str]);
    let delete_three_then_one: Mutate = |f| {
        f.delete::<ConfigMap>("b", "three").unwrap();
        f.delete::<ConfigMap>("a", "one").unwrap();
    };
    let delete_one: Mutate = |f| f.delete::<ConfigMap>("a", "one").unwrap();
    let delete_and_create_one: Mutate = |f| {
        f.delete::<ConfigMap>("a", "one").unwrap();
        f.create("a", &cm("one", &[], "1")).unwrap();
    };
    let cases: [Case; 6] = [
        (
            "deleted-in-all-namespaces",
            delete_three_then_one,
            None,
            "4",
            &["DELETED b/three", "DELETED a/one"],
        ),
        (
            "deleted-in-one-namespace",
            delete_three_then_one,
            Some("a"),
            "4",
            &["DELETED a/one"],
        ),
        (
            "deleted-and-created-again",
            delete_and_create_one,
            None,
            "4",
            &["DELETED a/one", "ADDED a/one"],
        ),
        (
            "deleted-before-resource-version",
            delete_one,
            None,
            "5",
            &[],
        ),
        (
            "most-recent-with-unset-resource-version",
            delete_one,
            None,
            "",
            &["ADDED a/two", "ADDED b/three"],
        ),
        (
            "most-recent-with-zero-resource-version",
            delete_one,
            None,
            "0",
            &["ADDED a/two", "ADDED b/three"],
        ),
    ];
    // Upstream's eighth case, a watch without list options, replays nothing at all: the
    // generated clientset always passes options, and so does this fake, so it has no such call.
    for (name, mutate, ns, from, expected) in cases {
        let fake = v038();
        fake.create("a", &cm("one", &[], "1")).unwrap();
        fake.create("a", &cm("two", &[], "1")).unwrap();
        fake.create("b", &cm("three", &[], "1")).unwrap();
        assert_eq!(list_rv(&fake), "4");
        mutate(&fake);
        let mut w = fake.watch::<ConfigMap>(ns, from).unwrap();
        assert_eq!(drain(&mut w), expected, "{name}");
    }
}

/// Upstream's `TestWatchExpired`: 101 deletions, the first one dropped; a watch from before
/// it ends with one expired error, a watch from after it replays the 100 kept ones.
#[test]
fn at_v0_38_a_watch_from_before_a_dropped_deletion_ends_expired() {
    let fake = v038();
    for i in 0..=DEFAULT_CHAN_SIZE {
        fake.create("ns", &cm(&format!("cm{i}"), &[], "1")).unwrap();
    }
    let listed: u64 = list_rv(&fake).parse().unwrap();
    for i in 0..=DEFAULT_CHAN_SIZE {
        fake.delete::<ConfigMap>("ns", &format!("cm{i}")).unwrap();
    }
    let mut w = fake.watch::<ConfigMap>(None, &listed.to_string()).unwrap();
    assert!(matches!(w.try_next(), Some(Err(FakeError::Expired(rv))) if rv == listed));
    assert!(w.try_next().is_none(), "the watch ends after its error");

    let mut w = fake
        .watch::<ConfigMap>(None, &(listed + 1).to_string())
        .unwrap();
    assert_eq!(drain(&mut w).len(), DEFAULT_CHAN_SIZE);
    let mut w = fake.watch::<ConfigMap>(None, "").unwrap();
    assert_eq!(drain(&mut w), Vec::<String>::new(), "no history asked for");
}

/// Upstream's `TestWatchTooManyChanges`: 100 kept deletions and one new object are one event
/// too many for a new watch's buffer: expired, where v0.37's fake panics.
#[test]
fn at_v0_38_a_replay_larger_than_the_buffer_ends_expired_instead_of_panicking() {
    let fake = v038();
    for i in 0..DEFAULT_CHAN_SIZE {
        fake.create("ns", &cm(&format!("cm{i}"), &[], "1")).unwrap();
    }
    let listed: u64 = list_rv(&fake).parse().unwrap();
    for i in 0..DEFAULT_CHAN_SIZE {
        fake.delete::<ConfigMap>("ns", &format!("cm{i}")).unwrap();
    }
    fake.create("ns", &cm("another", &[], "1")).unwrap();
    let mut w = fake.watch::<ConfigMap>(None, &listed.to_string()).unwrap();
    assert_eq!(
        drain(&mut w),
        [format!("ERROR too old resource version: {listed}")]
    );
    let mut w = fake
        .watch::<ConfigMap>(None, &(listed + 1).to_string())
        .unwrap();
    let events = drain(&mut w);
    assert_eq!(events.len(), DEFAULT_CHAN_SIZE);
    assert_eq!(events.last().unwrap(), "ADDED ns/another");
}
