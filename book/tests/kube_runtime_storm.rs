//! The write storm on kube-runtime's `Controller` (`lab::kube_runtime::storm`), against the same
//! server, writer and reconciler cost as this crate's controller. Paused clock throughout.

use std::time::Duration;

use controlloop_book::lab::{
    burst::{
        self, BurstError, Params,
        sweeps::{ClaimFailed, check_claims},
    },
    kube_runtime::storm::{self, Design, Knobs},
    rig::Backend,
};

/// The essay's storm reads the very same values on both runtimes: one request waits behind
/// the running reconcile on each, and it carries no payload.
#[test]
fn kube_runtime_reads_the_same_values_as_ours_in_the_essay_storm() {
    let ours = burst::run(&Params::essay()).unwrap();
    let kube = storm::run(&Params::essay(), Knobs::default()).unwrap();
    check_claims(&kube).unwrap();
    assert_eq!(kube.events_delivered, 200);
    assert_eq!(kube.observed, ours.observed);
    assert_eq!(kube.final_in_cache, Some(200));
}

/// Paused time makes a kube-runtime run exact: three runs, one report.
#[test]
fn a_virtual_kube_runtime_storm_repeats_exactly() {
    let p = Params::essay().writes(50);
    let first = storm::run(&p, Knobs::default()).unwrap();
    for _ in 0..2 {
        assert_eq!(storm::run(&p, Knobs::default()).unwrap(), first);
    }
}

/// The runner keeps one object to one reconcile with four slots; a reconciler that detaches
/// its work escapes it, and both detectors fire.
#[test]
fn detached_work_escapes_the_runner_and_the_detectors_fire() {
    let p = Params::essay().workers(4).writes(60);
    let faithful = storm::run(&p, Knobs::default()).unwrap();
    assert_eq!(faithful.max_concurrent_reconciles_of_one_key, 1);
    let broken = storm::run(
        &p,
        Knobs {
            design: Design::DetachedWork,
            ..Knobs::default()
        },
    )
    .unwrap();
    assert!(
        broken.max_concurrent_reconciles_of_one_key > 1,
        "{broken:?}"
    );
    assert!(matches!(
        check_claims(&broken),
        Err(ClaimFailed::NoCollapseWhenBehind { .. })
    ));
}

/// A debounce longer than the gap holds the request until the writes stop.
#[test]
fn a_debounce_longer_than_the_gap_reconciles_once_after_the_storm() {
    let r = storm::run(
        &Params::essay().writes(50),
        Knobs {
            debounce: Duration::from_millis(5),
            ..Knobs::default()
        },
    )
    .unwrap();
    assert_eq!(r.observed, [Some(50)]);
    assert_eq!(r.converge, Duration::from_millis(25)); // 5 ms quiet, then 20 ms of work
}

#[test]
fn a_storm_needs_writes_and_virtual_time_needs_the_in_process_server() {
    assert!(matches!(
        storm::run(&Params::essay().writes(0), Knobs::default()),
        Err(BurstError::NoWrites)
    ));
    assert!(matches!(
        storm::run(&Params::essay().backend(Backend::Http), Knobs::default()),
        Err(BurstError::VirtualNeedsInProcess(Backend::Http))
    ));
}
