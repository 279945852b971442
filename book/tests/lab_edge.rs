//! The edge-triggered controller beside the level-triggered one (chapter 07): each of the four
//! losses asserted exactly. Every run is under tokio's paused clock against the embedded server
//! in-process, so the counts are the same on every run and every machine.

use controlloop_book::lab::edge::{self, Params, run};

#[test]
fn two_hundred_events_give_two_hundred_edge_reconciles_and_eleven_level_ones() {
    let r = run(&Params::essay());
    assert_eq!((r.level.events, r.edge.events), (200, 200));
    assert_eq!(r.edge.reconciles, 200);
    assert_eq!(r.level.reconciles, 11);
    // Both end right; the bill is time: one cost per event.
    assert_eq!(r.level.final_replicas, Some(200));
    assert_eq!(r.edge.final_replicas, Some(200));
    assert_eq!(r.level.converged_ms_after_last_write, Some(21));
    assert_eq!(r.edge.converged_ms_after_last_write, Some(3801));
}

#[test]
fn two_workers_hold_one_object_at_once_only_in_the_edge_design() {
    let r = run(&Params::essay().workers(2));
    assert_eq!(r.level.max_holders_per_key, 1);
    assert_eq!(r.level.overlapping_reconciles, 0);
    assert_eq!(r.edge.max_holders_per_key, 2);
    assert_eq!(r.edge.overlapping_reconciles, 199);
}

#[test]
fn a_retried_payload_applied_after_a_later_one_leaves_the_edge_design_wrong() {
    let r = run(&Params::essay().writes(3).fail_first_command());
    assert_eq!((r.level.failures, r.edge.failures), (1, 1));
    assert_eq!(r.level.final_replicas, Some(3));
    // Changes 1→2 and 2→3 ran while change 0→1 waited out its backoff; it ran last.
    assert_eq!(r.edge.final_replicas, Some(1));
    assert!(!r.edge.ends_right);
}

#[test]
fn after_a_kill_mid_burst_only_the_level_design_converges() {
    let r = run(&Params::essay().kill_after(100));
    assert_eq!(r.level.final_replicas, Some(200));
    // The restarted process's workers start at its cache-sync wait's second look, 100 ms in
    // (client-go's `WaitForCacheSync` polls every 100 ms), then one 20 ms reconcile.
    assert_eq!(r.level.converged_ms_after_last_write, Some(120));
    // The payloads queued at the kill died with the process; the relist's create of an
    // object that already exists downstream is a no-op.
    assert_eq!(r.edge.final_replicas, Some(4));
}

#[test]
fn every_storm_gives_the_same_report_ten_times() {
    let first = edge::bill();
    for i in 1..10 {
        assert_eq!(edge::bill(), first, "run {i} differs from run 0");
    }
}

#[test]
fn the_bill_check_fails_when_the_edge_design_does_not_lose() {
    let mut bill = edge::bill();
    edge::check(&bill); // the real bill passes
    for (_, r) in &mut bill {
        r.edge = r.level.clone(); // an "edge" design that behaves like the level one
    }
    let caught = std::panic::catch_unwind(|| edge::check(&bill));
    assert!(
        caught.is_err(),
        "check() accepted an edge design that lost nothing"
    );
}
