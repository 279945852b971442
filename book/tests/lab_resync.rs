//! Chapter 04's runs are exact: under the paused clock, with the reflector's and the cache's
//! jitter seeded, a run gives the same report every time. The chapter asserts exact reconcile
//! hours and prints them; this is the property that lets it.
//!
//! The technique: run each variation of `timeline` several times in fresh runtimes and compare
//! everything a report holds that the chapter shows.

use controlloop_book::lab::resync::{HOUR, Read, Report, Setup, WatchFault, run};

/// What the chapter shows of a run.
fn shown(r: &Report) -> String {
    format!(
        "{:?} {:?} {:?} {} {} {:?} {:?}",
        r.reconciled(),
        r.updates,
        r.requests_at_resync_ticks,
        r.relists,
        r.rewatches,
        r.on_the_server,
        r.in_the_cache
    )
}

#[test]
fn every_variation_of_the_timeline_gives_the_same_report_five_times() {
    let faithful = Setup::faithful();
    let setups = [
        faithful,
        Setup {
            predicate: false,
            ..faithful
        },
        Setup {
            read: Read::Live,
            requeue_after: Some(HOUR),
            ..faithful
        },
        Setup {
            watch_fault: Some(WatchFault::Expired),
            ..faithful
        },
    ];
    for setup in setups {
        let first = shown(&run(setup));
        for i in 1..5 {
            assert_eq!(shown(&run(setup)), first, "run {i} of {setup:?} differs");
        }
    }
}

/// The comparison above can fail: two different runs do not look the same to it.
#[test]
fn the_comparison_tells_two_different_runs_apart() {
    let faithful = Setup::faithful();
    let control = Setup {
        predicate: false,
        ..faithful
    };
    assert_ne!(shown(&run(faithful)), shown(&run(control)));
}

/// controller-runtime's cache jitters each informer's resync period (its 10-hour `SyncPeriod`
/// times a factor in [0.9, 1.1)): what the chapter shows does not depend on the draw. Eight
/// seeds, eight different periods, one report, and every period in range.
#[test]
fn the_report_does_not_depend_on_the_resync_jitter() {
    let control = Setup {
        predicate: false,
        ..Setup::faithful()
    };
    let first = shown(&run(control));
    let mut periods = Vec::new();
    for seed in 0..8 {
        let r = run(Setup { seed, ..control });
        assert_eq!(
            shown(&r),
            first,
            "seed {seed}, period {:?}",
            r.resync_period
        );
        assert!(r.period_in_range(), "seed {seed}: {:?}", r.resync_period);
        periods.push(r.resync_period);
    }
    periods.sort();
    periods.dedup();
    assert_eq!(
        periods.len(),
        8,
        "the seeds drew different periods: {periods:?}"
    );
}
