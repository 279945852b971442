//! The speed targets: what each benchmark must achieve against its peer, what the appendix
//! sets beside a target the run missed, and the kind of key a workqueue row runs with.

use std::time::Duration;

use super::estimate::Estimate;

/// What a benchmark is expected to achieve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// The median is at most this long.
    AtMost(Duration),
    /// The median is at most `1 / ratio` of the peer benchmark's median, in the same run.
    FasterThan {
        /// The peer's criterion id.
        peer: &'static str,
        /// How many times faster.
        ratio: f64,
    },
}

/// A target: which benchmark, what it must achieve, and why the target is what it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The benchmark's criterion id.
    pub id: &'static str,
    /// The goal.
    pub goal: Goal,
    /// Where the goal comes from.
    pub why: &'static str,
    /// What the appendix sets beside the target when the run misses it.
    pub reason: Option<&'static Reason>,
}

/// What stands beside a missed target in the appendix: rows of the same run whose times, added
/// up, say how far the goal was in reach, and what was tried.
///
/// The rows are measured in the same sitting as the target; their sum is set against the
/// target's peer as the target's own row is (`peer / sum`), so the appendix can say, for
/// instance, that a floor alone would be only 1.9× client-go where the goal is 2×.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reason {
    /// What the rows' sum is, in a few words (the verdict column's note).
    pub short: &'static str,
    /// What the rows measure, and how to read their sum.
    pub what: &'static str,
    /// Benchmark ids; `{kind}` is replaced by the target's key kind ([`key_kind`]).
    pub rows: &'static [&'static str],
    /// What was tried, and what it gave.
    pub tried: &'static str,
}

impl Reason {
    /// The rows for `target` (the `{kind}` placeholder filled in).
    pub fn rows_for(&self, target: &str) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| r.replace("{kind}", key_kind(target)))
            .collect()
    }

    /// The rows' summed median and the peer's median over it: `None` when a row, or the
    /// target's peer, has no estimate in this run, or the goal has no peer.
    pub fn reading(&self, target: &Target, estimates: &[Estimate]) -> Option<(Duration, f64)> {
        let find = |id: &str| estimates.iter().find(|e| e.id == id);
        let Goal::FasterThan { peer, .. } = target.goal else {
            return None;
        };
        let peer = find(peer)?;
        let mut sum = Duration::ZERO;
        for row in self.rows_for(target.id) {
            sum += find(&row)?.median;
        }
        (!sum.is_zero()).then(|| (sum, peer.median.as_secs_f64() / sum.as_secs_f64()))
    }
}

/// The kind of key a workqueue row runs with, from its name: `String`, `Request`, or `str` for
/// the main rows (`&'static str`).
pub fn key_kind(row: &str) -> &'static str {
    if row.ends_with("/String") {
        "String"
    } else if row.ends_with("/Request") {
        "Request"
    } else {
        "str"
    }
}

/// A ratio target per key kind: the row `$row` itself (`&'static str` keys), `$row/String` and
/// `$row/Request`, each against the upstream row of the same name (`$upstream` is its prefix).
/// `$str` is the reason beside the `&'static str` row, `$owned` beside the `String` and
/// `Request` rows.
macro_rules! targets {
    (
        kinds: [$((
            $row:literal, $upstream:literal, $ratio:literal, $why:expr, $str:expr, $owned:expr
        )),* $(,)?],
        single: [$(($id:literal, $peer:literal, $r:literal, $w:expr, $reason:expr)),* $(,)?] $(,)?
    ) => {
        &[
            $(
                faster_than($row, concat!($upstream, $row), $ratio, $why, $str),
                faster_than(
                    concat!($row, "/String"),
                    concat!($upstream, $row, "/String"),
                    $ratio,
                    $why,
                    $owned,
                ),
                faster_than(
                    concat!($row, "/Request"),
                    concat!($upstream, $row, "/Request"),
                    $ratio,
                    $why,
                    $owned,
                ),
            )*
            $(faster_than($id, $peer, $r, $w, $reason),)*
        ]
    };
}

const fn faster_than(
    id: &'static str,
    peer: &'static str,
    ratio: f64,
    why: &'static str,
    reason: Option<&'static Reason>,
) -> Target {
    Target {
        id,
        goal: Goal::FasterThan { peer, ratio },
        why,
        reason,
    }
}

const HALF_CLIENT_GO: &str = "half of client-go's cost on the same row and keys, same sitting";
const HALF_PRIORITY_QUEUE: &str =
    "half of controller-runtime's priority queue on the same row and keys, same sitting";

/// The project's speed targets, all as ratios against a peer in the same sitting:
///
/// - every workqueue row, for each kind of key, at half of client-go's cost;
/// - chapter 01's contention harness through the queue no slower than client-go's;
/// - the priority queue at half of controller-runtime's priority queue's cost;
/// - the reflector draining a watch 1.5× as fast as kube-runtime's, with 1 and 10 watchers;
///   the whole informer at least as fast as kube-runtime's reflector and store;
/// - a cold start to 10,000 reconciled objects twice as fast as kube-runtime's controller.
pub const TARGETS: &[Target] = targets! {
    kinds: [
        ("workqueue/add_get_done/1_task", "client-go:", 2.0, HALF_CLIENT_GO, Some(&CYCLE), Some(&CYCLE_OWNED)),
        ("workqueue/add_get_done/2_tasks", "client-go:", 2.0, HALF_CLIENT_GO, Some(&CYCLE), Some(&CYCLE_OWNED)),
        ("workqueue/add_get_done/16_tasks", "client-go:", 2.0, HALF_CLIENT_GO, Some(&CYCLE), Some(&CYCLE_OWNED)),
        ("workqueue/add_duplicate/1_task", "client-go:", 2.0, HALF_CLIENT_GO, Some(&DUPLICATE), Some(&DUPLICATE_OWNED)),
        ("workqueue/add_duplicate/2_tasks", "client-go:", 2.0, HALF_CLIENT_GO, Some(&DUPLICATE), Some(&DUPLICATE_OWNED)),
        ("workqueue/add_duplicate/16_tasks", "client-go:", 2.0, HALF_CLIENT_GO, Some(&DUPLICATE), Some(&DUPLICATE_OWNED)),
        (
            "workqueue/contention_16x64x320k/Queue",
            "client-go:",
            1.0,
            "no slower than client-go's queue in chapter 01's harness, same sitting",
            None,
            Some(&CONTENTION_OWNED)
        ),
        (
            "priorityqueue/add_get_done_1000/priority_queue",
            "controller-runtime:",
            2.0,
            HALF_PRIORITY_QUEUE,
            None,
            None
        ),
        (
            "priorityqueue/add_duplicate/priority_queue",
            "controller-runtime:",
            2.0,
            HALF_PRIORITY_QUEUE,
            None,
            None
        ),
    ],
    single: [
        (
            "reflector_drain_20000_events/controlloop_reflector/1_watchers",
            "reflector_drain_20000_events/kube_runtime_reflector/1_watchers",
            1.5,
            "1.5× kube-runtime's reflector draining one watch, same run",
            Some(&DRAIN_1)
        ),
        (
            "reflector_drain_20000_events/controlloop_reflector/10_watchers",
            "reflector_drain_20000_events/kube_runtime_reflector/10_watchers",
            1.5,
            "1.5× kube-runtime's reflector draining ten watches at once, same run",
            Some(&DRAIN_10)
        ),
        (
            "reflector_drain_20000_events/controlloop_informer/1_watchers",
            "reflector_drain_20000_events/kube_runtime_reflector/1_watchers",
            1.0,
            "the whole informer (reflector, RealFIFO, indexer, a handler) no slower than \
             kube-runtime's reflector and store, one watch, same run",
            Some(&DRAIN_1)
        ),
        (
            "reflector_drain_20000_events/controlloop_informer/10_watchers",
            "reflector_drain_20000_events/kube_runtime_reflector/10_watchers",
            1.0,
            "the whole informer no slower than kube-runtime's reflector and store, ten \
             watches, same run",
            Some(&DRAIN_10)
        ),
        (
            "controller_10000_objects_cold_start/controlloop_16_workers",
            "controller_10000_objects_cold_start/kube_runtime_concurrency_16",
            2.0,
            "twice as fast as kube-runtime's controller from start to 10,000 reconciled, \
             same run",
            Some(&COLD_START)
        ),
    ],
};

/// Beside an add+get+done row with `&'static str` keys.
const CYCLE: Reason = Reason {
    short: "the floor alone",
    what: "the floor of the key kind: one lock, one hash-set insert and remove, one ring-buffer \
           push and pop, on one thread. The queue's cycle does more (three locks, seven set \
           operations).",
    rows: &["floor/{kind}"],
    tried: "",
};

/// Beside an add+get+done row with owned keys.
const CYCLE_OWNED: Reason = Reason {
    short: "the floor and the caller's clone alone",
    what: "the floor of the key kind (one lock, one hash-set insert and remove, one ring-buffer \
           push and pop, and one clone of the key) plus one more clone and free of the key, \
           the fresh key the row's caller builds: the two allocations every cycle of an owned \
           key makes in the port, where a Go string is shared. On one task the row cannot go \
           below this sum; on two threads the clones can overlap.",
    rows: &["floor/{kind}", "workqueue/key_clone/{kind}"],
    tried: "A borrowing add (`Queue::add_ref`) saves no allocation on these rows: a new key is \
            stored, and the queue holds two copies of a key while it is queued (the dirty set's \
            and the ring's) or held (the processing set's and the one handed out), so each \
            cycle clones once inside the queue and once in the caller. The lock (one \
            compare-and-swap) and the hasher (foldhash, seeded per process) are cheaper than \
            parking_lot with SipHash (`floor/{kind}/parking_lot_siphash`, in the table below).",
};

const COALESCING_FLOOR: &str = "one hash of the key the caller holds, one lock, and one \
    probe that finds the key: the least any add of a queued key does (on one thread).";

/// Beside an add of a `&'static str` key that is already queued.
const DUPLICATE: Reason = Reason {
    short: "the floor of a coalescing add alone",
    what: COALESCING_FLOOR,
    rows: &["floor/duplicate/{kind}"],
    tried: "The lock alone is `floor/lock` (one compare-and-swap and one store).",
};

/// Beside an add of an owned key that is already queued.
const DUPLICATE_OWNED: Reason = Reason {
    short: "the floor of a coalescing add alone",
    what: COALESCING_FLOOR,
    rows: &["floor/duplicate/{kind}"],
    tried: "These rows add by reference (`Queue::add_ref`, with a `&str` or a `RequestRef`), so \
            a coalescing add builds nothing; an add that clones the key first pays \
            `workqueue/key_clone/{kind}` more. The lock alone is `floor/lock` (one \
            compare-and-swap and one store).",
};

/// Beside chapter 01's harness with owned keys.
const CONTENTION_OWNED: Reason = Reason {
    short: "with integer keys",
    what: "the same harness through the same queue with `usize` keys, which hash and compare \
           in a word and are never cloned: the difference is what owned keys cost.",
    rows: &["workqueue/contention_16x64x320k/Queue"],
    tried: "Every add is by reference (`Queue::add_ref`): an add that coalesces builds \
            nothing, one that stores the key clones it once.",
};

const SHARED_PATH: &str = "kube's `Api::watch` with every event decoded and dropped, no \
    store: the transport and decoding both reflectors run (the port's `ListerWatcher` for \
    `Api` calls `Api::watch`). A drainer that cost nothing beyond it would be this fast.";

const DRAIN_TRIED: &str = "Profiled (callgrind and perf): beyond the shared path, the \
    reflector's time went to computing each object's key, storing it and freeing the object it \
    replaced, and the informer's also to its FIFO's batches and its handler. Keys are now built \
    without `format!`, the reflector copies each event's resourceVersion into a reused buffer, \
    a store without indexers skips the index bookkeeping and frees replaced objects after its \
    lock, and RealFIFO's batch split hashes with foldhash. Left: the informer still computes an \
    event's key four times (the FIFO's push, the batch split, the indexer's read and write).";

/// Beside the reflector or the informer draining one watch.
const DRAIN_1: Reason = Reason {
    short: "the shared path alone",
    what: SHARED_PATH,
    rows: &["reflector_drain_20000_events/bare_watch/1_watchers"],
    tried: DRAIN_TRIED,
};

/// Beside the reflector or the informer draining ten watches.
const DRAIN_10: Reason = Reason {
    short: "the shared path alone",
    what: SHARED_PATH,
    rows: &["reflector_drain_20000_events/bare_watch/10_watchers"],
    tried: DRAIN_TRIED,
};

/// Beside the cold start.
const COLD_START: Reason = Reason {
    short: "without the 100 ms poll",
    what: "the same controller waiting for its cache with `SyncWait::DoneChecker` (client-go \
           v0.37's `WaitFor`, which ends at the sync) instead of controller-runtime v0.25's \
           `WaitForCacheSync`, which looks at once and then every 100 ms: a cache that syncs \
           after the first look is waited for until the second, 100 ms in.",
    rows: &["controller_10000_objects_cold_start/controlloop_16_workers_done_checker"],
    tried: "The default stays controller-runtime's poll, which the port follows \
            (controller-runtime v0.25.3 `pkg/internal/source/kind.go`); the event-driven wait \
            is an opt-in difference, `Builder::sync_wait`.",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::press::costs::{
        fixtures::REAL_GO_OUTPUT, parse_go_bench, split_upstream, upstream_of,
    };

    #[test]
    fn every_targets_peer_is_measured_in_the_same_sitting() {
        let go: Vec<String> = parse_go_bench(REAL_GO_OUTPUT)
            .into_iter()
            .map(|e| e.id)
            .collect();
        let kube_runtime = include_str!("../../../benches/kube_runtime.rs");
        let mut ratio_targets = 0;
        for t in TARGETS {
            assert!(!t.why.is_empty(), "{}: no why", t.id);
            let Goal::FasterThan { peer, ratio } = t.goal else {
                continue;
            };
            ratio_targets += 1;
            assert!(ratio >= 1.0, "{}: a peer we may be slower than", t.id);
            match split_upstream(peer) {
                // An upstream row: the port's own row name, from the right library, and a row
                // the Go benchmark prints.
                Some((prefix, row)) => {
                    assert_eq!(row, t.id, "{peer}");
                    assert_eq!(prefix, upstream_of(row), "{peer}");
                    assert!(go.iter().any(|id| id == peer), "{peer} not in Go's output");
                }
                // Otherwise a kube-runtime row of the target's own criterion group, which
                // `book/benches/kube_runtime.rs` runs in the same sitting.
                None => {
                    let (group, function) = peer.split_once('/').expect("group/function");
                    assert_eq!(t.id.split_once('/').map(|(g, _)| g), Some(group), "{peer}");
                    assert!(function.starts_with("kube_runtime"), "{peer}");
                    assert!(
                        kube_runtime.contains(&format!("benchmark_group(\"{group}\")")),
                        "{group}"
                    );
                    let name = function.split('/').next().expect("a name");
                    assert!(kube_runtime.contains(&format!("\"{name}\"")), "{name}");
                }
            }
        }
        assert_eq!(ratio_targets, TARGETS.len(), "every target is a ratio");
        // Every reason's rows are benchmarks this crate runs: named in a bench file (the
        // floor's and the workqueue's ids are built with the kind last).
        let benches = [
            include_str!("../../../benches/floor.rs"),
            include_str!("../../../benches/workqueue.rs"),
            kube_runtime,
        ];
        for t in TARGETS {
            for row in t.reason.map(|r| r.rows_for(t.id)).unwrap_or_default() {
                let kind = key_kind(t.id);
                let stem = row.strip_suffix(&format!("/{kind}")).unwrap_or(&row);
                let named = |b: &&str| {
                    b.contains(&format!("\"{stem}"))
                        || stem
                            .split('/')
                            .skip(1)
                            .any(|name| b.contains(&format!("(\"{name}\"")))
                };
                assert!(
                    benches.iter().any(named),
                    "{}: {row} is run by no bench",
                    t.id
                );
            }
        }
        // The list: 9 rows in three key kinds, and five against kube-runtime.
        assert_eq!(TARGETS.len(), 9 * 3 + 5);
    }
}
