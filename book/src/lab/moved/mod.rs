//! Chapter 13's experiments ("When upstream moves"): the book's snapshots that move when the
//! controller follows controller-runtime v0.24 instead of v0.22, each run on both releases and
//! diffed; the move from v0.24 to v0.25, where every claim is run on both and found
//! unmoved, beside the recordings of both tags; and client-go 1.37 → 1.38, where each scenario
//! whose recorded body moved is run on this crate at both minors and compared with both
//! recordings ([`v038`]). Each function's body is a chapter block, verbatim.

pub mod v038;

use std::time::Duration;

use crate::kit::moved::{ClientGo, Moved, flat_yaml, ported_part};
use crate::kit::recorded::Recording;
use crate::kit::snap;
use crate::lab::burst::{
    self, Params,
    priority::{Objects, storm_and_initial_list},
};
use crate::lab::edge;
use crate::lab::fifo::interleave_popped;
use crate::lab::resync::{HOUR, Read, Setup, timeline};
use crate::lab::rig;
use crate::lab::second_replica::release_after_outage;
use crate::lab::workqueue::backoff::{bucket, default_limiter, forget_without_done};
use crate::lab::workqueue::coalescing::controller_queue;
use controlloop::controller::Release::{V0_22, V0_24, V0_25};
use v038::{batch_boundaries, fake_resource_versions, feature_gates, same_object, transaction};

/// Chapter 01's walk on the controller's queue.
pub fn ch13_walk() -> Moved {
    // book: ch13_walk
    let walk = |release| rig::paused(controller_queue(release));
    let moved = Moved::between("ch01_controller_queue", V0_22, V0_24, walk);
    moved.assert_moved(
        &["200 adds while the worker holds it     0"],
        &["200 adds while the worker holds it     1"],
    );
    snap::text("ch13_walk", moved.diff());
    // book: end ch13_walk
    moved
}

/// Chapter 02's `forget` without `done`.
pub fn ch13_stranded() -> Moved {
    // book: ch13_stranded
    let stranded = |release| flat_yaml(&rig::paused(forget_without_done(release)));
    let moved = Moved::between("ch02_forget_without_done", V0_22, V0_24, stranded);
    moved.assert_moved(
        &[
            "queue: RateLimiting",
            "num_requeues_after_forget: 0",
            "len_after_100_adds: 0",
        ],
        &[
            "queue: Priority",
            "num_requeues_after_forget: 1",
            "len_after_100_adds: 1",
        ],
    );
    snap::text("ch13_stranded", moved.diff());
    // book: end ch13_stranded
    moved
}

/// Chapter 02's bucket: 120 fresh keys' first failures.
pub fn ch13_bucket() -> Moved {
    // book: ch13_bucket
    let table = |release| rig::paused(async move { bucket(release).0 }); // the limiter's clock
    let moved = Moved::between("ch02_bucket", V0_22, V0_24, table);
    moved.assert_moved(
        &["101  100ms", "102  200ms", "120  2s"],
        &["101  5ms", "102  5ms", "120  5ms"],
    );
    snap::text("ch13_bucket", moved.diff());
    // book: end ch13_bucket
    moved
}

/// Chapter 04's remedy: `RequeueAfter` with a change arriving while the requeue waits.
pub fn ch13_remedy() -> Moved {
    // book: ch13_remedy
    let remedy = |release| {
        let hourly = Setup {
            requeue_after: Some(HOUR),
            release,
            ..Setup::faithful()
        };
        let live = Setup {
            read: Read::Live,
            ..hourly
        };
        let live_only = Setup {
            requeue_after: None,
            ..live
        };
        let rows = [
            ("cache, RequeueAfter 1h", hourly),
            ("server, RequeueAfter 1h", live),
            ("server, no requeue", live_only),
        ];
        let row = |(how, setup): &(&str, Setup)| {
            let reconciled = rig::paused(timeline(*setup)).reconciled().join(", ");
            format!("{how:<24} {reconciled}\n")
        };
        rows.iter().map(row).collect()
    };
    let moved = Moved::between("ch04_remedy", V0_22, V0_24, remedy);
    moved.assert_moved(
        &[
            "cache, RequeueAfter 1h   0 w red, 0.5 w green, 1..=35 w green",
            "server, RequeueAfter 1h  0 w red, 0.5 w green, 1..=21 w green, 22..=35 w blue",
        ],
        &[
            "cache, RequeueAfter 1h   0 w red, 0.5..=34.5 w green",
            "server, RequeueAfter 1h  0 w red, 0.5..=21.5 w green, 22.5..=34.5 w blue",
        ],
    );
    snap::text("ch13_remedy", moved.diff());
    // book: end ch13_remedy
    moved
}

/// Chapter 02's per-key table, which does not move.
pub fn ch13_unmoved() -> Moved {
    let table = |release| rig::paused(async move { default_limiter(release).0 });
    let moved = Moved::between("ch02_default_limiter", V0_22, V0_24, table);
    moved.assert_unchanged();
    moved
}

/// Whether `a`'s and `b`'s recorded bodies are equal.
fn same_body(a: &str, b: &str) -> bool {
    Recording::read(a).body == Recording::read(b).body
}

/// Chapter 13, v0.24 to v0.25: each recorded scenario's bodies on both tags, then each claim
/// the book shows re-run on both releases of the port. Returns the table.
pub fn ch13_v025() -> String {
    // book: ch13_v025_recorded
    // Upstream: every scenario recorded on both pairs of tags, body against body.
    let mut table = format!("{:<56} v0.24 → v0.25\n", "claim");
    let names = Recording::names();
    for new in names
        .iter()
        .filter(|n| n.starts_with("controller_runtime_v0.25_"))
    {
        let name = &new["controller_runtime_v0.25_".len()..];
        let old = format!("controller_runtime_v0.24_{name}");
        assert!(
            same_body(&old, new),
            "{name} moved between v0.24.1 and v0.25.3"
        );
        table += &format!("{:<56} unchanged\n", format!("recorded: {name}"));
    }
    for new in names.iter().filter(|n| n.starts_with("client_go_v0.37_")) {
        let name = &new["client_go_v0.37_".len()..];
        let v036 = format!("client_go_v0.36_{name}"); // or the unversioned file, for v0.36
        let old = if Recording::exists(&v036) {
            v036
        } else if Recording::exists(name) {
            name.to_owned()
        } else {
            continue; // recorded from v0.37 on only: nothing to compare it with
        };
        assert!(
            same_body(&old, new),
            "{name} moved between v0.36.3 and v0.37.2"
        );
        table += &format!("{:<56} unchanged\n", format!("recorded: client-go {name}"));
    }
    // book: end ch13_v025_recorded
    // book: ch13_v025_port
    // This crate: every claim the book shows that depends on the release, run on both.
    let unmoved = |claim: &str, moved: Moved| {
        moved.assert_unchanged(); // no diff to review: the claim holds as it stood
        format!("{:<56} unchanged\n", format!("this crate: {claim}"))
    };
    let walk = |r| rig::paused(controller_queue(r));
    table += &unmoved(
        "ch01 walk",
        Moved::between("ch01_controller_queue", V0_24, V0_25, walk),
    );
    let stranded = |r| flat_yaml(&rig::paused(forget_without_done(r)));
    let name = "ch02_forget_without_done";
    table += &unmoved("ch02 forget", Moved::between(name, V0_24, V0_25, stranded));
    let limits = |r| rig::paused(async move { bucket(r).0 + &default_limiter(r).0 });
    table += &unmoved(
        "ch02 limiters",
        Moved::between("ch02_bucket", V0_24, V0_25, limits),
    );
    let remedy = |r| {
        let hourly = Setup {
            requeue_after: Some(HOUR),
            release: r,
            ..Setup::faithful()
        };
        let runs = [
            Setup {
                release: r,
                ..Setup::faithful()
            },
            hourly,
        ];
        let run = |s: &Setup| rig::paused(timeline(*s)).reconciled().join(", ") + "\n";
        runs.iter().map(run).collect()
    };
    table += &unmoved(
        "ch04 timeline",
        Moved::between("ch04_remedy", V0_24, V0_25, remedy),
    );
    let storm = |r| burst::run(&Params::essay().release(r)).unwrap().summary();
    table += &unmoved(
        "ch06 storm",
        Moved::between("ch06_essay_virtual", V0_24, V0_25, storm),
    );
    let list = |r| {
        let run = storm_and_initial_list(r, Objects::Server, Duration::ZERO);
        rig::paused(run).unwrap().summary()
    };
    let name = "ch06_storm_and_initial_list";
    table += &unmoved(
        "ch06 storm and list",
        Moved::between(name, V0_24, V0_25, list),
    );
    let bill = |r| {
        let storms = edge::storms().map(|(name, p)| (name, edge::run(&p.release(r))));
        let level = |(name, r): &(_, edge::Report)| format!("{name}: {:?}\n", r.level);
        storms.iter().map(level).collect()
    };
    table += &unmoved(
        "ch07 storms",
        Moved::between("ch07_restart", V0_24, V0_25, bill),
    );
    snap::text("ch13_v025", &table);
    // book: end ch13_v025_port
    table
}

/// Chapter 13, 1.37 → 1.38: RealFIFO's batches.
pub fn ch13_v038_batches() -> Moved<ClientGo> {
    // book: ch13_v038_batches
    let run = |ClientGo(minor)| batch_boundaries(minor);
    let moved = Moved::between("fifo_batch_boundaries", ClientGo(37), ClientGo(38), run);
    moved.assert_moved(
        &[
            "a repeats: updates a v2, b v2, a v3, c v2: 2 pops",
            "  pop 1: batch [Updated a v2, Updated b v2]",
            "  pop 2: batch [Updated a v3, Updated c v2]",
            "no key for broken: updates a v2, broken v2, c v2: 2 pops",
            "  pop 1: batch [Updated a v2, Updated broken v2]",
            "  pop 2: single [Updated c v2]",
        ],
        &[
            "a repeats: updates a v2, b v2, a v3, c v2: 1 pops",
            "  pop 1: batch [Updated a v2, Updated b v2, Updated a v3, Updated c v2]",
            "no key for broken: updates a v2, broken v2, c v2: 1 pops",
            "  pop 1: batch [Updated a v2, Updated broken v2, Updated c v2]",
        ],
    );
    snap::text("ch13_v038_batches", moved.diff());
    // book: end ch13_v038_batches
    moved
}

/// Chapter 13, 1.37 → 1.38: a store transaction that writes one key twice.
pub fn ch13_v038_transaction() -> Moved<ClientGo> {
    // book: ch13_v038_transaction
    let run = |ClientGo(minor)| transaction(minor);
    let name = "store_transaction_repeated_key";
    let moved = Moved::between(name, ClientGo(37), ClientGo(38), run);
    moved.assert_moved(
        &["the index function saw: x v1, x v2, x v2, x v3, y v1"],
        &["the index function saw: x v1, x v3, y v1"],
    );
    snap::text("ch13_v038_transaction", moved.diff());
    // book: end ch13_v038_transaction
    moved
}

/// Chapter 13, 1.37 → 1.38: a shared informer whose processing finds one object updated
/// twice.
pub fn ch13_v038_same_object() -> Moved<ClientGo> {
    // book: ch13_v038_same_object
    let run = |ClientGo(minor)| same_object(minor);
    let name = "informer_batch_same_object";
    let moved = Moved::between(name, ClientGo(37), ClientGo(38), run);
    let saw = "  the store's index function saw (each write: the old object, then the new):";
    moved.assert_moved(
        &[&format!("{saw} x v1, x v2, x v2, x v3")],
        &[&format!("{saw} x v1, x v3")],
    );
    snap::text("ch13_v038_same_object", moved.diff());
    // book: end ch13_v038_same_object
    moved
}

/// Chapter 13, 1.37 → 1.38: chapter 15's release after an outage.
pub fn ch13_v038_release() -> Moved<ClientGo> {
    // book: ch13_v038_release
    let run = |ClientGo(minor)| release_after_outage(minor);
    let name = "leader_election_release_after_outage";
    let moved = Moved::between(name, ClientGo(37), ClientGo(38), run);
    let after = "17s: after a's release: holder";
    moved.assert_moved(
        &[&format!(r#"{after} "", leaseDurationSeconds 1, leaseTransitions 1; a leads false, b leads true"#)],
        &[&format!(r#"{after} "b", leaseDurationSeconds 11, leaseTransitions 1; a leads true, b leads true"#)],
    );
    snap::text("ch13_v038_release", moved.diff());
    // book: end ch13_v038_release
    moved
}

// book: ch13_fn_v038_row
/// A scenario, run on this crate at one client-go minor, printed as its recording is.
pub type Run = fn(u32) -> String;

/// The scenarios the port runs at both minors, each printed as its recording is.
pub const PORTED: [(&str, Run); 7] = [
    ("fifo_batch_boundaries", batch_boundaries),
    ("fifo_interleave", interleave_popped),
    ("store_transaction_repeated_key", transaction),
    ("informer_batch_same_object", same_object),
    ("leader_election_release_after_outage", release_after_outage),
    ("fake_clientset_resource_versions", fake_resource_versions),
    ("feature_gates", feature_gates),
];

/// The recorded scenarios whose bodies differ between the tags while this crate at 1.38 does
/// not move, each with the reason.
pub const PORT_UNMOVED: [(&str, &str); 2] = [
    (
        "informer_batch_key_error",
        "only in NewInformerWithOptions' part, which this crate lacks",
    ),
    (
        "method",
        "no controller-runtime on v0.38: no predicate column",
    ),
];

/// One recorded scenario's row: its v0.37.2 body against its v0.38.0-beta.0 body, and where
/// they differ, this crate at 1.37 and at 1.38 against each tag's recording.
pub fn v038_row(name: &str, v037: Option<&str>, v038: &str) -> Result<String, String> {
    let row = |what: &str| Ok(format!("{name:<40} {what}\n"));
    let Some(v037) = v037 else {
        return row("recorded on v0.38 only");
    };
    if v037 == v038 {
        return row("unchanged");
    }
    if let Some((_, run)) = PORTED.iter().find(|(n, _)| *n == name) {
        let port = Moved::between(name, ClientGo(37), ClientGo(38), |ClientGo(m)| run(m));
        for ((side, text), body) in [(&port.old, v037), (&port.new, v038)] {
            if *text != ported_part(body) {
                return Err(format!("{name}: this crate at {side} is not the recording"));
            }
        }
        let (removed, added) = port.changes();
        return row(&format!(
            "moved, as recorded: -{} +{} lines",
            removed.len(),
            added.len()
        ));
    }
    match PORT_UNMOVED.iter().find(|(n, _)| *n == name) {
        Some((_, why)) => row(&format!("differs, this crate does not move: {why}")),
        None => Err(format!(
            "{name} moved between v0.37.2 and v0.38.0-beta.0, and no block shows it"
        )),
    }
}
// book: end ch13_fn_v038_row

/// Chapter 13, 1.37 → 1.38: every scenario recorded on v0.38.0-beta.0, with its row.
pub fn ch13_v038() -> String {
    // book: ch13_v038
    let mut table = format!("{:<40} v0.37.2 → v0.38.0-beta.0\n", "recorded scenario");
    for new in Recording::names()
        .iter()
        .filter(|n| n.starts_with("client_go_v0.38_"))
    {
        let name = &new["client_go_v0.38_".len()..];
        let (v037, v038) = (ClientGo(37).recorded(name), ClientGo(38).recorded(name));
        table += &v038_row(name, v037.as_deref(), &v038.unwrap()).unwrap();
    }
    snap::text("ch13_v038", &table);
    // book: end ch13_v038
    table
}

/// Everything chapter 13 shows (the `cargo run` experiment).
pub fn ch13_moved() {
    ch13_walk();
    ch13_stranded();
    ch13_bucket();
    ch13_remedy();
    ch13_unmoved();
    ch13_v025();
    ch13_v038_batches();
    ch13_v038_transaction();
    ch13_v038_same_object();
    ch13_v038_release();
    ch13_v038();
}
