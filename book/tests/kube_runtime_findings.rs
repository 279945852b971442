//! What running kube-runtime turned up (`lab::kube_runtime::findings`), and the chapter's
//! table machinery (`lab::kube_runtime::claims`).

use controlloop::controller::Release;
use controlloop_book::lab::kube_runtime::{
    ch11::percentile_ms,
    claims::{Row, markdown},
    findings::{self, Waiters},
};

/// A oneshot receiver keeps the waker of its last poll only: one of three waiters wakes.
#[test]
fn wait_until_ready_wakes_one_of_three_waiters_and_wait_synced_wakes_all() {
    let w = findings::waiters(3);
    assert_eq!((w.kube_runtime_woken, w.controlloop_woken), (1, 3));
    assert_eq!(w.stuck(), ["kube-runtime: 2 of 3 waiters never woke"]);
}

/// The check names whichever side left a waiter behind, and is silent when none did.
#[test]
fn the_waiter_check_fires_on_either_side() {
    let all = Waiters {
        waiting: 2,
        kube_runtime_woken: 2,
        controlloop_woken: 2,
    };
    assert!(all.stuck().is_empty());
    let ours_broken = Waiters {
        controlloop_woken: 1,
        ..all
    };
    assert_eq!(
        ours_broken.stuck(),
        ["controlloop: 1 of 2 waiters never woke"]
    );
}

/// Off a whole millisecond, kube-runtime's reconcile starts a whole tick after the write; this
/// crate's starts at once at either release (both queues wake a waiting worker on `add`).
#[test]
fn the_scheduler_waits_a_whole_millisecond_unless_the_write_is_on_one() {
    let rows = findings::rounding(&[0, 1, 400], &Release::ALL);
    let kube: Vec<u64> = rows.iter().map(|r| r.kube_runtime_us).collect();
    assert_eq!(kube, [0, 1000, 1000]);
    for r in &rows {
        let at_once: Vec<(Release, u64)> = Release::ALL.iter().map(|&r| (r, 0)).collect();
        assert_eq!(r.controlloop_us, at_once);
    }
}

#[test]
fn percentiles_are_nearest_rank() {
    let v: Vec<u64> = (1..=100).map(|x| x * 1000).collect();
    assert_eq!(percentile_ms(&v, 0.5), 50.0);
    assert_eq!(percentile_ms(&v, 0.99), 99.0);
    assert_eq!(percentile_ms(&[7000], 0.99), 7.0);
}

#[test]
fn a_row_that_does_not_carry_over_is_marked() {
    let row = |carries_over| Row {
        claim: "c",
        controlloop: "a".into(),
        kube_runtime: "b".into(),
        carries_over,
        evidence: "ch11_x",
    };
    let table = markdown(&[row(true), row(false)]);
    assert!(table.contains("| c | a | b | yes | `ch11_x` |"));
    assert!(table.contains("| c | a | b | **no** | `ch11_x` |"));
}
