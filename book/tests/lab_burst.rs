//! The write storm's checks (chapter 06), each shown firing on a doctored run. The runs are
//! virtual-time storms (exact); the real-clock checks are fed copies of them relabelled as
//! real-clock runs, with the one number that must trip the check changed.

use std::time::Duration;

use controlloop_book::lab::burst::{
    self, Clock, Params, Report,
    sweeps::{self, Sweep},
};

fn gap_sweep() -> Vec<Report> {
    Sweep::Gap.run(Clock::Virtual, |_| {})
}

#[test]
fn reconciles_follow_the_span_and_the_check_fails_when_they_do_not() {
    let reports = gap_sweep();
    sweeps::reconciles_follow_span(&reports).expect("the faithful runs pass");
    let mut doctored = reports.clone();
    doctored[3].reconciles = doctored[2].reconciles; // a longer span, no more reconciles
    let e = sweeps::reconciles_follow_span(&doctored).unwrap_err();
    assert!(e.contains("reconciles do not grow with the span"), "{e}");
}

#[test]
fn spans_within_a_tenth_of_each_other_are_not_ordered() {
    let reports = gap_sweep();
    let mut close = reports[..2].to_vec(); // gap 0 and gap 1
    close[0].burst_span = close[1].burst_span - Duration::from_micros(100); // as on a busy machine
    close[0].reconciles = close[1].reconciles + 1;
    sweeps::reconciles_follow_span(&close).expect("spans this close are one span");
}

/// The essay's storm as if run under the real clock (over HTTP), with the span stretched to a
/// write every `per_write_ms`.
fn as_real(mut r: Report, per_write_ms: f64) -> Report {
    r.clock = Clock::Real;
    r.burst_span = Duration::from_secs_f64(per_write_ms * r.writes_issued as f64 / 1000.0);
    r
}

#[test]
fn a_real_table_checks_every_row_and_a_reconciler_behind_in_fact_is_judged_by_its_real_cost() {
    let fast = burst::run(&Params::essay().cost(Duration::ZERO)).unwrap();
    let mut collapsed = as_real(fast, 2.0);
    collapsed.reconciles = 66; // three events a reconcile, from a reconciler that kept up
    collapsed.collapse = 200.0 / 66.0;
    let caught = std::panic::catch_unwind(|| sweeps::real_table(&[collapsed.clone()]));
    let message = *caught.unwrap_err().downcast::<String>().unwrap();
    let band = burst::bands::REAL_RECONCILE_RATIO;
    let expected = format!("reconciles / expected = 0.33 is outside its band {band}");
    assert!(message.starts_with(&expected), "{message}");
    // The same run, had its median reconcile (5 ms) outlasted the writes' interval (2 ms), is
    // behind in fact: the expected count divides by what a reconcile really took, and passes.
    collapsed.median_reconcile = Duration::from_millis(5);
    assert!(collapsed.behind_in_fact());
    let table = sweeps::real_table(&[collapsed]);
    assert!(table.contains("unless behind in fact, then > 1"), "{table}");
}

#[test]
fn the_expected_count_uses_the_measured_reconcile_when_it_is_longer() {
    let mut r = burst::run(&Params::essay()).unwrap(); // 20 ms reconciles, 199 ms span
    assert_eq!(
        r.median_reconcile, r.cost,
        "virtual time: a reconcile takes its cost"
    );
    assert_eq!(
        sweeps::expected_reconciles(&r),
        r.span_over_cost_plus_one.unwrap()
    );
    r.median_reconcile = Duration::from_millis(40); // a sleep that woke 20 ms late
    let e = sweeps::expected_reconciles(&r);
    assert!((e - (199.0 / 40.0 + 1.0)).abs() < 0.01, "{e}");
}
