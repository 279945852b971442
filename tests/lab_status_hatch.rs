//! The status escape hatch (chapter 08): one action per real switch-on across restarts and
//! dropped watch events, and the two in-memory designs failing where they must. Every run is
//! under tokio's paused clock against the embedded server in-process, so counts are exact.

use controlloop::lab::status_hatch::{self, Design, run, timeline};

fn expected() -> Vec<u64> {
    timeline().iter().map(|s| s.expected).collect()
}

#[test]
fn the_hatch_acts_exactly_once_per_real_switch_on() {
    let r = run(Design::StatusHatch);
    assert_eq!(r.actions_per_step, expected());
    assert_eq!(r.actions_per_step.iter().sum::<u64>(), 3);
    assert!(r.correct);
}

#[test]
fn memory_last_seen_acts_again_after_a_restart() {
    let r = run(Design::MemoryLastSeen);
    assert_eq!(r.actions_per_step, [0, 1, 1, 0, 1, 0, 1]);
    //                                    ^ "controller restarted": a second action
}

#[test]
fn event_old_new_misses_a_switch_on_dropped_before_a_restart() {
    let r = run(Design::EventOldNew);
    assert_eq!(r.actions_per_step, [0, 1, 0, 0, 1, 0, 0]);
    //                                                ^ the relist's create has no "old"
}

#[test]
fn the_hatchs_own_status_writes_come_back_as_events_and_act_on_nothing() {
    let r = run(Design::StatusHatch);
    assert_eq!(r.status_writes, 6);
    assert_eq!(r.own_status_events, r.status_writes);
    // Every status event cost a reconcile, and none of them an action (the per-step counts
    // above are exact).
    assert_eq!(r.reconciles, 13);
}

#[test]
fn observed_generation_lags_a_spec_change_until_the_reconcile() {
    let m = status_hatch::generations();
    status_hatch::check_generations(&m);
    assert_eq!(
        (m[2].generation, m[2].observed_generation),
        (Some(2), Some(1))
    );
}

#[test]
fn the_check_fails_when_a_broken_design_stands_in_for_the_hatch() {
    let (_, runs) = status_hatch::table();
    status_hatch::check(&runs);
    let swapped = [runs[1].clone(), runs[1].clone(), runs[2].clone()];
    assert!(std::panic::catch_unwind(|| status_hatch::check(&swapped)).is_err());
    let mut moments = status_hatch::generations();
    moments[3].observed_generation = moments[1].observed_generation; // never caught up
    assert!(std::panic::catch_unwind(|| status_hatch::check_generations(&moments)).is_err());
}

#[test]
fn every_design_gives_the_same_run_ten_times() {
    let (_, first) = status_hatch::table();
    for i in 1..10 {
        assert_eq!(status_hatch::table().1, first, "run {i} differs from run 0");
    }
}
