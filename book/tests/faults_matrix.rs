//! The fault matrix of chapter 12, one test per fault, each named after it. Every test runs the
//! level-triggered controller and chapter 07's edge-triggered one through the same write storm
//! with the same fault (`controlloop_book::lab::faults`), checks that the level-triggered one
//! survived (`Row::check`: every widget ends on its last written value, its queue holds
//! nothing, its relists stay within the fault's bound, one reconcile per widget at a time),
//! says where the edge-triggered one ends, and records the row the chapter's table shows.
//!
//! Every row but the slow handler's runs under tokio's paused clock against the embedded API
//! server in-process, so it is exact and repeats exactly; every wait in a run is bounded by its
//! setup's limit and names what it waited for. The slow handler blocks its thread, which only
//! the real clock shows; its level reconcile count is a band.

use controlloop_book::{
    kit::snap,
    lab::faults::{Fault, Row},
};

/// Runs `fault`, checks the level design survived it, and records the table row.
fn row(fault: Fault) -> Row {
    let row = Row::run(fault);
    row.check();
    snap::text(&format!("ch12_row_{}", fault.name()), row.line());
    row
}

/// The names of the widgets a design ends wrong on.
fn wrong(outcome: &controlloop_book::lab::faults::Outcome) -> Vec<&str> {
    outcome.wrong.iter().map(|w| w.widget.as_str()).collect()
}

#[test]
fn watch_closed_mid_burst() {
    let r = row(Fault::WatchClosed);
    // The reflector re-watches from its last resourceVersion and the server replays what
    // the closed watch had not sent: nothing is lost, nothing is listed again.
    assert_eq!((r.level.relists, r.edge.relists), (0, 0));
    assert_eq!((r.level.events, r.edge.events), (200, 200));
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn events_dropped() {
    let r = row(Fault::EventsDropped);
    // Ten writes in the middle of one widget's block are never sent; its later writes carry
    // the state, and both designs only need the last.
    assert_eq!((r.level.events, r.edge.events), (190, 190));
    assert_eq!((r.level.relists, r.edge.relists), (0, 0));
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn history_compacted() {
    let r = row(Fault::HistoryCompacted);
    // The resumed watch is answered 410; one relist each, and the events the writes made
    // during the relist's backoff are never delivered: the list brings their result.
    assert_eq!((r.level.relists, r.edge.relists), (1, 1));
    assert!(r.edge.events < 200, "{}", r.edge.events);
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn server_restarted() {
    let r = row(Fault::ServerRestarted);
    // Data kept, every watch cut, every old revision refused: one relist each.
    assert_eq!((r.level.relists, r.edge.relists), (1, 1));
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn throttled_then_failing() {
    let r = row(Fault::Throttled);
    // 429s only delay the re-watch; a 500 sends the reflector to a relist, and two more 500s
    // answer that relist before one succeeds.
    assert_eq!((r.level.relists, r.edge.relists), (3, 3));
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn silent_write() {
    let r = row(Fault::SilentWrite);
    // No event, so no design can react to it: both are wrong on that widget until a relist.
    assert_eq!(r.level.wrong_before_relist, Some(1));
    assert_eq!(r.edge.wrong_before_relist, Some(1));
    assert_eq!((r.level.relists, r.edge.relists), (1, 1));
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn slow_event_handler() {
    let r = row(Fault::SlowHandler);
    // The handler is behind, the cache is not: each level reconcile reads the newest state.
    assert!(r.level.reconciles < r.edge.reconciles);
    assert_eq!(r.edge.reconciles, 200, "one edge reconcile per event");
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn reconciler_panics() {
    let r = row(Fault::ReconcilerPanics);
    // Each design retries a panic rate-limited. A key's retry re-reads the cache; a payload's
    // retry re-applies an old change, after later ones.
    assert_eq!(wrong(&r.edge), ["w-0", "w-1", "w-2", "w-3"]);
    assert_eq!((r.level.relists, r.edge.relists), (0, 0));
}

#[test]
fn reconciler_errors_then_recovers() {
    let r = row(Fault::ReconcilerErrors);
    // Every payload fails the same way in the same order, and the default limiter's bucket
    // hands the retries back in that order: the edge design ends right, after many more
    // attempts than the level design.
    assert!(r.edge.wrong.is_empty());
    assert!(r.edge.reconciles > 4 * r.level.reconciles);
}

/// The same row with controller-runtime v0.24's default backoff (no shared bucket): the
/// payloads come back in the order their own backoffs end, and the edge design ends wrong.
#[test]
fn reconciler_errors_with_per_item_backoff_only() {
    let r = controlloop_book::lab::faults::errors_with_per_item_backoff();
    snap::text("ch12_errors_per_item_backoff", r.line());
    assert_eq!(wrong(&r.edge), ["w-2", "w-3"], "{:?}", r.edge.wrong);
}

#[test]
fn event_handler_panics() {
    let r = row(Fault::HandlerPanics);
    // The informer crashes and the process restarts (upstream: the process exits and the
    // kubelet starts it again). The relist brings the level; the edge design reads each
    // relisted widget as a creation of something that already exists.
    assert_eq!((r.level.restarts, r.edge.restarts), (1, 1));
    assert_eq!((r.level.relists, r.edge.relists), (1, 1));
    assert_eq!(wrong(&r.edge), ["w-0", "w-1"]);
}

#[test]
fn status_write_storm() {
    let r = row(Fault::StatusStorm);
    // 400 status writes are 400 events: keys collapse, payloads do not.
    assert_eq!(r.edge.reconciles, 600);
    assert!(r.level.reconciles < 20, "{}", r.level.reconciles);
    assert!(r.edge.wrong.is_empty());
}

#[test]
fn shutdown_mid_burst() {
    let r = row(Fault::ShutdownMidBurst);
    // A graceful stop leaves no key held; the process that starts after the burst relists.
    let left = r
        .level
        .left_at_shutdown
        .expect("the level process was shut down");
    assert_eq!(left.processing, 0);
    assert_eq!((r.level.restarts, r.edge.restarts), (1, 1));
    assert_eq!(wrong(&r.edge), ["w-2", "w-3"]);
}

#[test]
fn controller_restart_mid_burst() {
    let r = row(Fault::ControllerRestart);
    // Killed with payloads queued: the edge design's queue was all it had.
    assert_eq!((r.level.relists, r.edge.relists), (1, 1));
    assert_eq!(wrong(&r.edge), ["w-0", "w-1"]);
}

#[test]
fn ten_thousand_objects() {
    let r = row(Fault::Scale);
    // Sixteen workers: the queue never hands one key to two of them; two payloads of one
    // widget are different items, and two workers take them at once.
    assert_eq!(r.level.max_holders_per_key, 1);
    assert_eq!(r.edge.max_holders_per_key, 2, "the same-key detector fires");
    assert_eq!(r.edge.reconciles, 20_000, "one per event");
    assert!(r.level.reconciles < r.edge.reconciles);
}

/// The survival check fires on each thing it checks, with a message that names the fault and
/// what broke: a real row judged against another fault's bound, and one real row with each
/// checked field broken in turn.
#[test]
fn the_survival_check_fires_on_each_broken_condition() {
    let restart = Row::run(Fault::ControllerRestart);
    restart.check();
    let fires = |row: Row, expected: &str| {
        let err = std::panic::catch_unwind(|| row.check()).expect_err(expected);
        let message = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    };
    let broken = |f: &dyn Fn(&mut Row)| {
        let mut r = restart.clone();
        f(&mut r);
        r
    };
    fires(
        broken(&|r| r.level = r.edge.clone()),
        "controller restart mid-burst: level ends wrong: 2 widgets",
    );
    fires(broken(&|r| r.level.quiet = false), "never got quiet");
    fires(
        broken(&|r| r.level.left_in_queue.dirty = 1),
        "level left Backlog { queued: 0, delayed: 0, dirty: 1, processing: 0 } in its queue",
    );
    fires(
        broken(&|r| {
            r.level.left_at_shutdown = Some(controlloop_book::lab::faults::Backlog {
                processing: 1,
                ..Default::default()
            })
        }),
        "1 key(s) still held after shutdown",
    );
    fires(
        broken(&|r| r.fault = Fault::WatchClosed),
        "watch closed mid-burst: level relisted 1 times, bound 0",
    );
    fires(
        broken(&|r| r.level.max_holders_per_key = 2),
        "2 level reconciles of one widget at once",
    );
}

/// Every fault has its test here, named after it, and its row in chapter 12's table, in the
/// order of `Fault::ALL`.
#[test]
fn every_fault_has_a_test_and_a_row_in_the_chapter() {
    let root = env!("CARGO_MANIFEST_DIR");
    let tests = std::fs::read_to_string(format!("{root}/tests/faults_matrix.rs")).unwrap();
    let chapter = std::fs::read_to_string(format!(
        "{root}/../chapters/12-watches-are-the-optimisation.md"
    ))
    .unwrap();
    let rows: Vec<&str> = chapter
        .lines()
        .filter_map(|l| l.strip_prefix("{{#include ../snapshots/ch12_row_"))
        .filter_map(|l| l.strip_suffix(".snap:4:}}"))
        .collect();
    let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(rows, names, "the chapter's table rows");
    for name in names {
        assert!(
            tests.contains(&format!("\nfn {name}() {{")),
            "no test named {name}"
        );
    }
}
