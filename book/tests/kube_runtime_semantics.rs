//! Requeue, error, deletion and resync semantics of both controllers on one server
//! (`lab::kube_runtime::{semantics, drift}`), paused clock.

use std::time::Duration;

use controlloop::controller::Release;
use controlloop_book::lab::kube_runtime::{
    Log, Runtime,
    drift::{self, Remedy},
    semantics::{self, retry_delays},
};

const SEC: Duration = Duration::from_secs(1);

const V0_22: Runtime = Runtime::Controlloop(Release::V0_22);
const V0_24: Runtime = Runtime::Controlloop(Release::V0_24);

/// On client-go's delaying queue (v0.22) `RequeueAfter` is a timer of its own; kube-runtime's
/// scheduler keeps one slot per object and the earlier request wins, and so does
/// controller-runtime v0.24's priority queue.
#[test]
fn a_trigger_replaces_a_pending_requeue_on_kube_runtime_and_v0_24_not_on_v0_22() {
    let once = semantics::requeue_pending(false);
    assert_eq!(once.times(V0_22, SEC), [0, 1, 10]);
    assert_eq!(once.times(Runtime::KubeRuntime, SEC), [0, 1]);
    assert_eq!(once.times(V0_24, SEC), [0, 1]);
    let always = semantics::requeue_pending(true);
    assert_eq!(always.times(V0_22, SEC), [0, 1, 10, 20]);
    assert_eq!(always.times(Runtime::KubeRuntime, SEC), [0, 1, 11, 21]);
    assert_eq!(always.times(V0_24, SEC), [0, 1, 11, 21]);
}

#[test]
fn errors_double_per_key_on_ours_and_repeat_a_fixed_delay_on_kube_runtime() {
    let log = semantics::error_backoff(4);
    for ours in [V0_22, V0_24] {
        assert_eq!(retry_delays(&log, ours, "run"), [5, 10, 20, 40], "{ours:?}");
    }
    assert_eq!(
        retry_delays(&log, Runtime::KubeRuntime, "run"),
        [5, 5, 5, 5]
    );
    assert_eq!(
        retry_delays(&log, Runtime::KubeRuntime, "built: run"),
        [5, 10, 20, 40]
    );
}

#[test]
fn a_deleted_object_is_reconciled_by_ours_and_ends_as_object_not_found_on_kube_runtime() {
    let log = semantics::deleted();
    // client-go's queue: the Delete's add now, and the waiting requeue at 5 s.
    assert_eq!(
        log.notes(V0_22),
        [
            "controlloop-burst = 0",
            "controlloop-burst gone",
            "controlloop-burst gone"
        ]
    );
    // v0.24's priority queue: the Delete's add makes the waiting requeue ready now, once.
    assert_eq!(
        log.notes(V0_24),
        ["controlloop-burst = 0", "controlloop-burst gone"]
    );
    let kube = log.notes(Runtime::KubeRuntime);
    assert_eq!(kube.len(), 2, "{kube:?}");
    assert!(kube[1].contains("not found in local store"), "{kube:?}");
}

#[test]
fn a_delete_in_a_relist_gap_is_a_tombstone_on_ours_and_silence_on_kube_runtime() {
    let gap = semantics::relist_gap();
    assert_eq!(gap.relists, 2);
    let after = |rt| -> Vec<String> {
        gap.log
            .entries(rt)
            .into_iter()
            .filter(|(t, _)| *t >= SEC)
            .map(|(_, n)| n)
            .collect()
    };
    assert!(after(Runtime::ours()).contains(&"controlloop-burst gone".to_owned()));
    let kube = after(Runtime::KubeRuntime);
    assert!(kube.contains(&"survivor = 0".to_owned()), "{kube:?}");
    assert!(
        !kube.iter().any(|n| n.contains("controlloop-burst =")),
        "{kube:?}"
    );
}

/// The resync look-alike replays the store; only a requeue that reads the live object sees a
/// change the watch never carried.
#[test]
fn only_a_requeue_with_a_live_read_sees_the_silent_write() {
    let bulk = drift::kube_runtime(Remedy::ReconcileAllOn10h);
    assert_eq!(bulk.colors_read, ["red", "green"]);
    assert_eq!(bulk.requests_at_10_20_30h, [0, 0, 0]);
    assert_eq!(bulk.reconciles, 5);
    let store = drift::kube_runtime(Remedy::Requeue1hStore);
    assert_eq!(store.first_hour_blue_read, None);
    let live = drift::kube_runtime(Remedy::Requeue1hLive);
    assert!(
        live.first_hour_blue_read
            .is_some_and(|h| (21.0..=22.0).contains(&h))
    );
}

#[test]
fn both_generation_predicates_drop_status_writes() {
    let s = drift::status_storm(5);
    for rt in Runtime::both() {
        assert_eq!(s.count(rt, "generation"), 2, "{rt:?}");
        assert_eq!(s.count(rt, "no predicate"), 12, "{rt:?}");
    }
}

#[test]
fn a_log_counts_each_runtimes_notes_separately() {
    let log = Log::new();
    assert_eq!(log.record(V0_24, "a"), 1);
    assert_eq!(log.record(Runtime::KubeRuntime, "a"), 1);
    assert_eq!(log.record(V0_24, "b"), 1);
    assert_eq!(log.record(V0_24, "a"), 2);
    assert_eq!(log.record(V0_22, "a"), 1);
    assert_eq!(log.notes(V0_24), ["a", "b", "a"]);
    assert_eq!(log.runtimes(), [V0_22, V0_24, Runtime::KubeRuntime]);
}
