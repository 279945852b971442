//! The status escape status record (chapter 08): one action per real switch-on across restarts and
//! dropped watch events, the two in-memory designs failing where they must, and the generation
//! rules with and without the status subresource. Every run is
//! under tokio's paused clock against the embedded server in-process, so counts are exact.

use controlloop_book::lab::status_record::{self, Design, generation, run, timeline};

fn expected() -> Vec<u64> {
    timeline().iter().map(|s| s.expected).collect()
}

#[test]
fn the_status_record_acts_exactly_once_per_real_switch_on() {
    let r = run(Design::StatusRecord);
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
fn the_status_records_own_status_writes_come_back_as_events_and_act_on_nothing() {
    let r = run(Design::StatusRecord);
    assert_eq!(r.status_writes, 6);
    assert_eq!(r.own_status_events, r.status_writes);
    // Every status event cost a reconcile, and none of them an action (the per-step counts
    // above are exact).
    assert_eq!(r.reconciles, 13);
}

#[test]
fn a_status_write_bumps_the_generation_only_without_the_status_subresource() {
    let r = generation::rules();
    generation::check_rules(&r);
    // create, spec change, status write, annotation change, delete held by a finalizer
    assert_eq!(r.with_status, [Some(1), Some(2), Some(2), Some(2), Some(3)]);
    assert_eq!(
        r.without_status,
        [Some(1), Some(2), Some(3), Some(3), Some(4)]
    );
}

#[test]
fn an_observed_generation_record_never_catches_up_without_the_status_subresource() {
    let l = generation::loops();
    generation::check_loops(&l);
    assert_eq!(l[0].status_writes, 1);
    assert_eq!(
        (l[0].generation, l[0].observed_generation),
        (Some(1), Some(1))
    );
    // Every write bumped the generation it had just recorded.
    assert_eq!(l[1].generation, Some(l[1].status_writes as i64 + 1));
    assert_eq!(l[1].observed_generation, l[1].generation.map(|g| g - 1));
}

#[test]
fn the_checks_fail_when_a_broken_design_stands_in_or_the_rules_are_doctored() {
    let (_, runs) = status_record::table();
    status_record::check(&runs);
    let swapped = [runs[1].clone(), runs[1].clone(), runs[2].clone()];
    assert!(std::panic::catch_unwind(|| status_record::check(&swapped)).is_err());
    let mut rules = generation::rules();
    rules.without_status = rules.with_status.clone(); // status as if a subresource
    assert!(std::panic::catch_unwind(|| generation::check_rules(&rules)).is_err());
    let mut loops = generation::loops();
    loops[1] = loops[0]; // as if the record had caught up
    assert!(std::panic::catch_unwind(|| generation::check_loops(&loops)).is_err());
}

#[test]
fn every_design_gives_the_same_run_ten_times() {
    let (_, first) = status_record::table();
    for i in 1..10 {
        assert_eq!(
            status_record::table().1,
            first,
            "run {i} differs from run 0"
        );
    }
}
