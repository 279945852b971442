//! The appendix "What it costs", generated from criterion's saved estimates.
//!
//! No upstream file. Every speed figure in the book comes from a criterion benchmark in
//! `book/benches/`; none is typed. `cargo run --release -- costs --run` runs every benchmark
//! (`cargo bench`), then [`collect`] reads the estimates criterion saved under
//! `target/criterion/`, and [`render`] writes them, with the machine, the load and the date of
//! the run, to `chapters/costs/reference-run.md`, which the appendix includes. Without `--run`
//! the command only re-renders whatever estimates are already saved (after a
//! `cargo bench --bench NAME` of your own, say).
//!
//! The upstream queues are measured in the same sitting: `costs --run` also runs the Go
//! benchmark in `upstream/bench` (the same row names, on client-go v0.37.2 and
//! controller-runtime v0.25.3) when a Go toolchain is on `PATH` (see `upstream/README.md` for
//! the module setup), saves its output beside criterion's, and [`parse_go_bench`] reads it back
//! as estimates named after whose code ran: `client-go:ROW` for client-go's workqueue and
//! rate-limiting queue, `controller-runtime:ROW` for controller-runtime's priority queue
//! ([`upstream_of`]).
//!
//! Targets are stated two ways: an absolute ceiling ([`Goal::AtMost`]), and a ratio against a
//! peer measured in the same sitting ([`Goal::FasterThan`]) — the upstream queue on the same
//! row, or kube-runtime's machinery in the same criterion group — which is the only comparison
//! that survives a loaded machine.
//!
//! Beside the peers, the workqueue rows are set against their floor (`book/benches/floor.rs`):
//! one lock, one hash-set insert and remove and one ring-buffer push and pop for the row's kind
//! of key (for an add of a queued key: one hash, one lock, one probe), measured in the same
//! run. The floor is an estimate of what the single-thread path cannot go below, not a target.
//!
//! A missed target is shown with its [`Reason`]: rows of the same run whose summed time, set
//! against the target's peer, says how far the goal was in reach (a floor, a cost upstream's
//! behaviour imposes, the path every drainer shares), and what was tried.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

/// Where the generated table goes, inside the book's source folder.
pub const REFERENCE_RUN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../chapters/costs/reference-run.md"
);

/// One benchmark's result, as criterion saved it.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// criterion's id: `group/function[/value]`.
    pub id: String,
    /// The median time of one iteration.
    pub median: Duration,
    /// criterion's 95 % confidence interval of the median.
    pub interval: (Duration, Duration),
    /// Elements per iteration, when the benchmark declared a throughput.
    pub elements: Option<u64>,
}

impl Estimate {
    /// Elements per second at the median, when the benchmark declared a throughput.
    pub fn per_second(&self) -> Option<f64> {
        Some(self.elements? as f64 / self.median.as_secs_f64())
    }
}

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

/// How the estimates of client-go's queues in the Go benchmark (`upstream/bench`) are named:
/// this prefix, then the row name the port's benchmark uses.
pub const UPSTREAM: &str = "client-go:";

/// How the estimates of controller-runtime's priority queue in the Go benchmark are named.
pub const CONTROLLER_RUNTIME: &str = "controller-runtime:";

/// Every prefix [`parse_go_bench`] gives a row, one per upstream library.
pub const UPSTREAMS: &[&str] = &[UPSTREAM, CONTROLLER_RUNTIME];

/// Whose code a Go benchmark row ran, as its prefix: the `priority_queue` rows of the
/// `priorityqueue/` group are controller-runtime's priority queue; every other row, the
/// `rate_limiting_queue` rows of that group included (client-go's rate-limiting queue with
/// controller-runtime's default limiter), is client-go's.
pub fn upstream_of(row: &str) -> &'static str {
    let mut parts = row.split('/');
    if parts.next() == Some("priorityqueue") && parts.any(|p| p == "priority_queue") {
        CONTROLLER_RUNTIME
    } else {
        UPSTREAM
    }
}

/// Splits an upstream estimate's id into its prefix and the port's row name.
pub fn split_upstream(id: &str) -> Option<(&'static str, &str)> {
    UPSTREAMS
        .iter()
        .find_map(|p| id.strip_prefix(p).map(|row| (*p, row)))
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

/// The project's speed targets (issue 25), all as ratios against a peer in the same sitting:
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

/// Where `costs --run` saves the Go benchmark's output, under the target directory.
pub const UPSTREAM_OUTPUT: &str = "criterion/client-go-bench.txt";

/// Reads `go test -bench` output into estimates named `PREFIX` `ROW`, the prefix saying whose
/// code ran ([`upstream_of`]): the median of a row's `ns/op` over its repetitions (`-count`),
/// with the lowest and highest as the interval. A benchmark's name maps to the port's row by
/// lowering it and splitting its first part at capitals
/// (`BenchmarkWorkqueueContention_16x64x320k/Queue/Request-2` →
/// `client-go:workqueue/contention_16x64x320k/Queue/Request`,
/// `BenchmarkPriorityqueue/add_duplicate/priority_queue-2` →
/// `controller-runtime:priorityqueue/add_duplicate/priority_queue`); the `-N` suffix
/// (GOMAXPROCS) is dropped.
pub fn parse_go_bench(output: &str) -> Vec<Estimate> {
    let mut rows: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for line in output.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next().and_then(|n| n.strip_prefix("Benchmark")) else {
            continue;
        };
        let fields: Vec<&str> = fields.collect();
        let Some(ns) = fields
            .windows(2)
            .find(|w| w[1] == "ns/op")
            .and_then(|w| w[0].parse::<f64>().ok())
        else {
            continue;
        };
        let name = match name.rsplit_once('-') {
            Some((n, procs)) if procs.chars().all(|c| c.is_ascii_digit()) => n,
            _ => name,
        };
        let (first, rest) = name
            .split_once('/')
            .map_or((name, None), |(a, b)| (a, Some(b)));
        let mut id = String::new();
        for (i, c) in first.char_indices() {
            if c.is_ascii_uppercase() && i > 0 {
                id.push('/');
            }
            id.push(c.to_ascii_lowercase());
        }
        if let Some(rest) = rest {
            id.push('/');
            id.push_str(rest);
        }
        rows.entry(format!("{}{id}", upstream_of(&id)))
            .or_default()
            .push(ns);
    }
    let ns = |x: f64| Duration::from_nanos(x.max(0.0).round() as u64);
    rows.into_iter()
        .map(|(id, mut v)| {
            v.sort_by(f64::total_cmp);
            let mid = v.len() / 2;
            let median = if v.len() % 2 == 1 {
                v[mid]
            } else {
                (v[mid - 1] + v[mid]) / 2.0
            };
            Estimate {
                id,
                median: ns(median),
                interval: (ns(v[0]), ns(v[v.len() - 1])),
                elements: None,
            }
        })
        .collect()
}

/// How a target fared in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Met, with the measured figure (a time, or how many times faster than the peer).
    Met(String),
    /// Missed, with the measured figure.
    Missed(String),
    /// The benchmark (or its peer) has no saved estimate.
    NotRun,
}

/// The goal in words: `≤ 70.0 ns`, or `≥ 2.00× `peer``.
pub fn goal_text(goal: &Goal) -> String {
    match *goal {
        Goal::AtMost(limit) => format!("≤ {}", time(limit)),
        Goal::FasterThan { peer, ratio } => format!("≥ {ratio:.2}× `{peer}`"),
    }
}

/// Judges `target` against the estimates of one run.
pub fn judge(target: &Target, estimates: &[Estimate]) -> Verdict {
    let find = |id: &str| estimates.iter().find(|e| e.id == id);
    let Some(e) = find(target.id) else {
        return Verdict::NotRun;
    };
    let (met, text) = match target.goal {
        Goal::AtMost(limit) => (e.median <= limit, time(e.median)),
        Goal::FasterThan { peer, ratio } => {
            let Some(p) = find(peer) else {
                return Verdict::NotRun;
            };
            let measured = p.median.as_secs_f64() / e.median.as_secs_f64();
            (measured >= ratio, format!("{measured:.2}×"))
        }
    };
    if met {
        Verdict::Met(text)
    } else {
        Verdict::Missed(text)
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

/// The floor row (`book/benches/floor.rs`) a workqueue row is set against: `floor/KIND`, and
/// for an add of a key that is already queued `floor/duplicate/KIND`.
pub fn floor_of(row: &str) -> String {
    if row.starts_with("workqueue/add_duplicate/") {
        format!("floor/duplicate/{}", key_kind(row))
    } else {
        format!("floor/{}", key_kind(row))
    }
}

#[derive(Deserialize)]
struct BenchmarkJson {
    full_id: String,
    /// `{"Elements": n}`, `{"Bytes": n}`, … or null.
    throughput: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct EstimatesJson {
    median: PointJson,
}

#[derive(Deserialize)]
struct PointJson {
    point_estimate: f64,
    confidence_interval: IntervalJson,
}

#[derive(Deserialize)]
struct IntervalJson {
    lower_bound: f64,
    upper_bound: f64,
}

/// Why the saved estimates could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CostsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The upstream benchmark did not build or run; Go's output.
    #[error("upstream/bench (go test -bench) failed:\n{0}")]
    Upstream(String),
    /// A criterion file is not what criterion writes.
    #[error("{path}: not a criterion estimate: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, CostsError> {
    let text = fs::read_to_string(path).map_err(|source| CostsError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| CostsError::Format {
        path: path.to_owned(),
        source,
    })
}

/// Reads every estimate criterion saved under `criterion_dir` (its latest run of each
/// benchmark: the `new/` folder), sorted by id.
pub fn collect(criterion_dir: &Path) -> Result<Vec<Estimate>, CostsError> {
    collect_since(criterion_dir, std::time::SystemTime::UNIX_EPOCH)
}

/// [`collect`], keeping only estimates criterion wrote at or after `since`: a run's own, not
/// those of benchmarks an earlier run left behind.
pub fn collect_since(
    criterion_dir: &Path,
    since: std::time::SystemTime,
) -> Result<Vec<Estimate>, CostsError> {
    let mut out = Vec::new();
    if !criterion_dir.exists() {
        return Ok(out);
    }
    for entry in walkdir::WalkDir::new(criterion_dir) {
        let entry = entry.map_err(|e| CostsError::Io {
            path: criterion_dir.to_owned(),
            source: e.into(),
        })?;
        let p = entry.path();
        if p.file_name().is_none_or(|n| n != "benchmark.json")
            || p.parent()
                .and_then(Path::file_name)
                .is_none_or(|n| n != "new")
        {
            continue;
        }
        let estimates = p.with_file_name("estimates.json");
        let written = fs::metadata(&estimates)
            .and_then(|m| m.modified())
            .map_err(|source| CostsError::Io {
                path: estimates.clone(),
                source,
            })?;
        if written < since {
            continue;
        }
        let bench: BenchmarkJson = read_json(p)?;
        let est: EstimatesJson = read_json(&estimates)?;
        let ns = |x: f64| Duration::from_nanos(x.max(0.0).round() as u64);
        // Only element counts make a rate this appendix shows; byte throughputs are left out.
        let elements = bench.throughput.as_ref().and_then(|t| {
            t.get("Elements")
                .or_else(|| t.get("ElementsAndBytes")?.get("elements"))
                .and_then(serde_json::Value::as_u64)
        });
        out.push(Estimate {
            id: bench.full_id,
            median: ns(est.median.point_estimate),
            interval: (
                ns(est.median.confidence_interval.lower_bound),
                ns(est.median.confidence_interval.upper_bound),
            ),
            elements,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// A duration in the unit that keeps three significant figures readable.
pub fn time(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if v < 10.0 {
        2
    } else if v < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.digits$} {unit}")
}

fn rate(per_second: f64) -> String {
    if per_second >= 1e6 {
        format!("{:.2} M/s", per_second / 1e6)
    } else if per_second >= 1e3 {
        format!("{:.1} k/s", per_second / 1e3)
    } else {
        format!("{per_second:.0} /s")
    }
}

/// Where and when a run happened.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The day of the run (UTC).
    pub date: String,
    /// The CPU model, from `/proc/cpuinfo`.
    pub cpu: String,
    /// Cores available to the run.
    pub cores: usize,
    /// The 1-minute load average when the run started, from `/proc/loadavg`.
    pub load_at_start: String,
    /// `rustc --version`.
    pub rustc: String,
    /// The criterion options the run used.
    pub criterion_args: String,
}

/// The 1-minute load average now, from `/proc/loadavg` ("unknown" where there is none).
pub fn load_average() -> String {
    crate::kit::basis::load_average().map_or_else(|| "unknown".to_owned(), |l| l.to_string())
}

impl RunInfo {
    /// Reads this machine's description; `criterion_args` are the options passed to criterion.
    pub fn here(criterion_args: &str) -> RunInfo {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let load_at_start = load_average();
        let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "unknown rustc".to_owned());
        RunInfo {
            date: jiff::Timestamp::now().strftime("%Y-%m-%d").to_string(),
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_at_start,
            rustc,
            criterion_args: criterion_args.to_owned(),
        }
    }
}

/// Renders one run as the appendix's Markdown: the run, the targets, then every benchmark.
pub fn render(run: &RunInfo, estimates: &[Estimate], targets: &[Target]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "*Run on {date}: {cpu}, {cores} cores, load average {load} at the start; {rustc}; \
         release build; criterion `{args}`. Written by `cargo run --release -- costs --run`.*\n",
        date = run.date,
        cpu = run.cpu,
        cores = run.cores,
        load = run.load_at_start,
        rustc = run.rustc,
        args = run.criterion_args,
    );
    let _ = writeln!(s, "| target | goal | goal's basis | verdict, measured |");
    let _ = writeln!(s, "|---|---|---|---|");
    // The missed targets with a reason, grouped by reason and key kind, each with its figure.
    type Missed<'a> = Vec<(&'a Target, String)>;
    let mut why: Vec<((&Reason, &str), Missed)> = vec![];
    for t in targets {
        let verdict = match judge(t, estimates) {
            Verdict::Met(f) => format!("met, {f}"),
            Verdict::Missed(f) => {
                let reading = t.reason.and_then(|r| Some((r, r.reading(t, estimates)?)));
                match reading {
                    Some((r, (_, at))) => {
                        let group = (r, key_kind(t.id));
                        match why.iter_mut().find(|(g, _)| *g == group) {
                            Some((_, ts)) => ts.push((t, f.clone())),
                            None => why.push((group, vec![(t, f.clone())])),
                        }
                        format!("**missed**, {f}; {}: {at:.2}×", r.short)
                    }
                    None => format!("**missed**, {f}"),
                }
            }
            Verdict::NotRun => "not run".to_owned(),
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {verdict} |",
            t.id,
            goal_text(&t.goal),
            t.why
        );
    }
    let _ = writeln!(s);
    if !why.is_empty() {
        let _ = writeln!(
            s,
            "Beside each missed target, rows of this run whose times add up to what the note \
             after its verdict names, set against the target's peer as the target is:\n"
        );
        for ((reason, kind), missed) in &why {
            let fill = |text: &str| text.replace("{kind}", kind);
            let (first, _) = missed[0];
            let rows = reason.rows_for(first.id);
            let parts: Vec<String> = rows
                .iter()
                .map(|row| {
                    let t = estimates
                        .iter()
                        .find(|e| &e.id == row)
                        .map_or_else(|| "not run".to_owned(), |e| time(e.median));
                    format!("`{row}` {t}")
                })
                .collect();
            let _ = write!(s, "- **{}** ({}):", reason.short, parts.join(" + "));
            for (i, (t, measured)) in missed.iter().enumerate() {
                let sep = if i == 0 { " " } else { "; " };
                if let Some((sum, at)) = reason.reading(t, estimates) {
                    let sum = if rows.len() > 1 {
                        format!("{} = ", time(sum))
                    } else {
                        String::new()
                    };
                    let _ = write!(s, "{sep}`{}` {measured}, {sum}{at:.2}×", t.id);
                }
            }
            let _ = write!(s, ". {}", fill(reason.what));
            if !reason.tried.is_empty() {
                let _ = write!(s, " Tried: {}", fill(reason.tried));
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
    }
    let find = |id: &str| estimates.iter().find(|e| e.id == id);
    let upstream: Vec<(&str, &str, &Estimate)> = estimates
        .iter()
        .filter_map(|e| split_upstream(&e.id).map(|(p, row)| (p, row, e)))
        .collect();
    if upstream.is_empty() {
        let _ = writeln!(
            s,
            "The upstream benchmark (`upstream/bench`) was not run in this sitting.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "The upstream queues on the same rows, run by `upstream/bench` in this sitting \
             (`go test -bench`, GOMAXPROCS=2; median of the repetitions, lowest to highest): \
             `client-go` is client-go v0.37.2's workqueue and, in the `priorityqueue` rows, its \
             rate-limiting queue with controller-runtime's default limiter; \
             `controller-runtime` is controller-runtime v0.25.3's priority queue.\n"
        );
        let _ = writeln!(
            s,
            "| row | upstream | this crate | upstream's median | upstream's range | this crate / upstream |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for &(prefix, row, g) in &upstream {
            let ours = find(row);
            let _ = writeln!(
                s,
                "| `{row}` | {} | {} | {} | {} – {} | {} |",
                prefix.trim_end_matches(':'),
                ours.map(|e| time(e.median))
                    .unwrap_or_else(|| "not run".into()),
                time(g.median),
                time(g.interval.0),
                time(g.interval.1),
                ours.map(|e| format!("{:.2}", e.median.as_secs_f64() / g.median.as_secs_f64()))
                    .unwrap_or_default(),
            );
        }
        let _ = writeln!(s);
    }
    // The workqueue's add rows against the floor of their key kind, ours and client-go's.
    let mut rows: Vec<&str> = estimates
        .iter()
        .map(|e| split_upstream(&e.id).map_or(e.id.as_str(), |(_, row)| row))
        .filter(|row| row.starts_with("workqueue/add_"))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    if rows.iter().any(|row| find(&floor_of(row)).is_some()) {
        let _ = writeln!(
            s,
            "The workqueue's rows against the floor of their kind of key, this run: for an \
             add+get+done, `floor/KIND` (one lock, one hash-set insert and remove, one \
             ring-buffer push and pop, one clone of an owned key); for an add of a queued key, \
             `floor/duplicate/KIND` (one hash, one lock, one probe that finds the key). A \
             lower-bound estimate of the single-thread path, not a target.\n"
        );
        let _ = writeln!(
            s,
            "| row | floor | this crate | × floor | client-go | client-go × floor |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        let times = |e: Option<&Estimate>, floor: Option<&Estimate>| match (e, floor) {
            (Some(e), Some(f)) => (
                time(e.median),
                format!("{:.1}", e.median.as_secs_f64() / f.median.as_secs_f64()),
            ),
            (Some(e), None) => (time(e.median), String::new()),
            (None, _) => ("not run".to_owned(), String::new()),
        };
        for row in rows {
            let floor_id = floor_of(row);
            let floor = find(&floor_id);
            let (ours, ours_x) = times(find(row), floor);
            let (go, go_x) = times(find(&format!("{UPSTREAM}{row}")), floor);
            let _ = writeln!(
                s,
                "| `{row}` | {} | {ours} | {ours_x} | {go} | {go_x} |",
                floor.map_or_else(|| "not run".to_owned(), |f| time(f.median)),
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "| benchmark | median | 95 % interval of the median | throughput |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    for e in estimates.iter().filter(|e| split_upstream(&e.id).is_none()) {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} – {} | {} |",
            e.id,
            time(e.median),
            time(e.interval.0),
            time(e.interval.1),
            e.per_second().map(rate).unwrap_or_default(),
        );
    }
    s
}

/// Runs the upstream benchmark (`upstream/bench`: client-go's queues and controller-runtime's
/// priority queue; 5 repetitions, GOMAXPROCS=2) and saves its output to [`UPSTREAM_OUTPUT`] under `target_dir`. `Ok(false)` when no Go toolchain is on
/// `PATH`; an error, with Go's own words, when the module cannot build (see
/// `upstream/README.md` for an offline module setup).
pub fn run_upstream_bench(target_dir: &Path) -> Result<bool, CostsError> {
    let upstream = crate::repo().join("upstream");
    let io = |source| CostsError::Io {
        path: upstream.clone(),
        source,
    };
    let path = target_dir.join(UPSTREAM_OUTPUT);
    // A failed run leaves no earlier run's figures behind to be read as this sitting's.
    let _ = fs::remove_file(&path);
    let go_found = std::process::Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go_found {
        return Ok(false);
    }
    let out = std::process::Command::new("go")
        .args([
            "test", "-run", "^$", "-bench", ".", "-cpu", "2", "-count", "5",
        ])
        .arg("./bench")
        .current_dir(&upstream)
        .output()
        .map_err(io)?;
    if !out.status.success() {
        return Err(CostsError::Upstream(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    fs::create_dir_all(path.parent().expect("a parent folder")).map_err(io)?;
    fs::write(&path, &out.stdout).map_err(|source| CostsError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(true)
}

/// Reads the Go benchmark's saved output under `target_dir`, if a run saved one.
pub fn collect_upstream(target_dir: &Path) -> Result<Vec<Estimate>, CostsError> {
    let path = target_dir.join(UPSTREAM_OUTPUT);
    match fs::read_to_string(&path) {
        Ok(text) => Ok(parse_go_bench(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(CostsError::Io { path, source }),
    }
}

/// Writes `text` to [`REFERENCE_RUN`].
pub fn write_reference_run(text: &str) -> Result<PathBuf, CostsError> {
    let path = PathBuf::from(REFERENCE_RUN);
    let io = |source| CostsError::Io {
        path: path.clone(),
        source,
    };
    fs::create_dir_all(path.parent().expect("a parent folder")).map_err(io)?;
    fs::write(&path, text).map_err(io)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(id: &str, ns: u64) -> Estimate {
        Estimate {
            id: id.to_owned(),
            median: Duration::from_nanos(ns),
            interval: (Duration::from_nanos(ns - 1), Duration::from_nanos(ns + 1)),
            elements: Some(1),
        }
    }

    const GO_OUTPUT: &str = "goos: linux
pkg: controlloop/upstream/bench
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       137.0 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       140.2 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       136.4 ns/op
BenchmarkWorkqueueContention_16x64x320k/Queue-2 \t 57\t  17500000 ns/op\t 17.00 ms/run\t 320000 reconciles\t 0 violations
PASS
ok  \tcontrolloop/upstream/bench\t12.3s
";

    /// Real output of `go test -run '^$' -bench . -cpu 2 -benchtime 2000x ./bench` (a short run
    /// on the loaded 2-core machine, 2026-12-04; only the names matter here).
    const REAL_GO_OUTPUT: &str = "goos: linux
goarch: amd64
pkg: controlloop/upstream/bench
cpu: AMD EPYC
BenchmarkPriorityqueue/add_get_done_1000/rate_limiting_queue-2         \t    2000\t    304234 ns/op
BenchmarkPriorityqueue/add_get_done_1000/rate_limiting_queue/String-2  \t    2000\t    243305 ns/op
BenchmarkPriorityqueue/add_get_done_1000/rate_limiting_queue/Request-2 \t    2000\t    314777 ns/op
BenchmarkPriorityqueue/add_get_done_1000/priority_queue-2              \t    2000\t   2101942 ns/op
BenchmarkPriorityqueue/add_get_done_1000/priority_queue/String-2       \t    2000\t   2120222 ns/op
BenchmarkPriorityqueue/add_get_done_1000/priority_queue/Request-2      \t    2000\t   3075128 ns/op
BenchmarkPriorityqueue/add_duplicate/rate_limiting_queue-2             \t    2000\t        28.81 ns/op
BenchmarkPriorityqueue/add_duplicate/rate_limiting_queue/String-2      \t    2000\t        28.93 ns/op
BenchmarkPriorityqueue/add_duplicate/rate_limiting_queue/Request-2     \t    2000\t        45.67 ns/op
BenchmarkPriorityqueue/add_duplicate/priority_queue-2                  \t    2000\t       299.0 ns/op
BenchmarkPriorityqueue/add_duplicate/priority_queue/String-2           \t    2000\t       185.4 ns/op
BenchmarkPriorityqueue/add_duplicate/priority_queue/Request-2          \t    2000\t        74.38 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2                               \t    2000\t       193.2 ns/op
BenchmarkWorkqueue/add_get_done/1_task/String-2                        \t    2000\t       194.7 ns/op
BenchmarkWorkqueue/add_get_done/1_task/Request-2                       \t    2000\t      1797 ns/op
BenchmarkWorkqueue/add_duplicate/1_task-2                              \t    2000\t        37.22 ns/op
BenchmarkWorkqueue/add_duplicate/1_task/String-2                       \t    2000\t        38.37 ns/op
BenchmarkWorkqueue/add_duplicate/1_task/Request-2                      \t    2000\t        54.06 ns/op
BenchmarkWorkqueue/add_get_done/2_tasks-2                              \t    2000\t       848.0 ns/op
BenchmarkWorkqueue/add_get_done/2_tasks/String-2                       \t    2000\t       439.8 ns/op
BenchmarkWorkqueue/add_get_done/2_tasks/Request-2                      \t    2000\t       409.6 ns/op
BenchmarkWorkqueue/add_duplicate/2_tasks-2                             \t    2000\t        50.94 ns/op
BenchmarkWorkqueue/add_duplicate/2_tasks/String-2                      \t    2000\t        59.26 ns/op
BenchmarkWorkqueue/add_duplicate/2_tasks/Request-2                     \t    2000\t        83.88 ns/op
BenchmarkWorkqueue/add_get_done/16_tasks-2                             \t    2000\t       273.9 ns/op
BenchmarkWorkqueue/add_get_done/16_tasks/String-2                      \t    2000\t       240.7 ns/op
BenchmarkWorkqueue/add_get_done/16_tasks/Request-2                     \t    2000\t       780.3 ns/op
BenchmarkWorkqueue/add_duplicate/16_tasks-2                            \t    2000\t       123.4 ns/op
BenchmarkWorkqueue/add_duplicate/16_tasks/String-2                     \t    2000\t        76.29 ns/op
BenchmarkWorkqueue/add_duplicate/16_tasks/Request-2                    \t    2000\t       142.0 ns/op
BenchmarkWorkqueueContention_16x64x320k/Queue-2                        \t    2000\t  17950407 ns/op\t        17.95 ms/run\t      3825 reconciles\t         0 violations
BenchmarkWorkqueueContention_16x64x320k/Queue/String-2                 \t    2000\t  16476312 ns/op\t        16.48 ms/run\t       384.0 reconciles\t         0 violations
BenchmarkWorkqueueContention_16x64x320k/Queue/Request-2                \t    2000\t  25944057 ns/op\t        25.94 ms/run\t      1969 reconciles\t         0 violations
BenchmarkWorkqueueContention_16x64x320k/Channel-2                      \t    2000\t  94012913 ns/op\t        94.01 ms/run\t    320000 reconciles\t     14445 violations
PASS
ok  \tcontrolloop/upstream/bench\t325.680s
";

    #[test]
    fn go_bench_output_is_read_as_the_ports_rows() {
        let got = parse_go_bench(GO_OUTPUT);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].id, "client-go:workqueue/add_get_done/1_task");
        assert_eq!(got[0].median, Duration::from_nanos(137));
        assert_eq!(
            got[0].interval,
            (Duration::from_nanos(136), Duration::from_nanos(140))
        );
        assert_eq!(got[1].id, "client-go:workqueue/contention_16x64x320k/Queue");
        assert_eq!(
            got[1].median,
            Duration::from_millis(17) + Duration::from_micros(500)
        );
    }

    /// The ids both sides agreed on (issue 25): every row in its three key kinds, prefixed by
    /// whose code ran.
    fn contract_ids() -> std::collections::BTreeSet<String> {
        let mut rows: Vec<(&str, String)> = Vec::new();
        for op in ["add_get_done", "add_duplicate"] {
            for tasks in ["1_task", "2_tasks", "16_tasks"] {
                rows.push((UPSTREAM, format!("workqueue/{op}/{tasks}")));
            }
        }
        rows.push((UPSTREAM, "workqueue/contention_16x64x320k/Queue".into()));
        for group in ["add_get_done_1000", "add_duplicate"] {
            rows.push((
                UPSTREAM,
                format!("priorityqueue/{group}/rate_limiting_queue"),
            ));
            rows.push((
                CONTROLLER_RUNTIME,
                format!("priorityqueue/{group}/priority_queue"),
            ));
        }
        let mut ids: std::collections::BTreeSet<String> = rows
            .iter()
            .flat_map(|(prefix, row)| {
                ["", "/String", "/Request"].map(|kind| format!("{prefix}{row}{kind}"))
            })
            .collect();
        ids.insert(format!("{UPSTREAM}workqueue/contention_16x64x320k/Channel"));
        ids
    }

    #[test]
    fn real_go_output_yields_exactly_the_contracts_ids() {
        let got: std::collections::BTreeSet<String> = parse_go_bench(REAL_GO_OUTPUT)
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(got, contract_ids());
        assert!(
            got.contains(
                "controller-runtime:priorityqueue/add_get_done_1000/priority_queue/Request"
            )
        );
        assert!(got.contains("client-go:priorityqueue/add_duplicate/rate_limiting_queue/String"));
        assert!(got.contains("client-go:workqueue/contention_16x64x320k/Queue/Request"));
    }

    #[test]
    fn a_go_row_is_named_after_whose_code_ran() {
        assert_eq!(
            upstream_of("priorityqueue/add_duplicate/priority_queue/Request"),
            CONTROLLER_RUNTIME
        );
        assert_eq!(
            upstream_of("priorityqueue/add_duplicate/rate_limiting_queue"),
            UPSTREAM
        );
        assert_eq!(upstream_of("workqueue/add_duplicate/1_task"), UPSTREAM);
        // A workqueue row never is controller-runtime's, whatever its last part says.
        assert_eq!(upstream_of("workqueue/priority_queue"), UPSTREAM);
        assert_eq!(
            split_upstream("controller-runtime:priorityqueue/add_duplicate/priority_queue"),
            Some((
                CONTROLLER_RUNTIME,
                "priorityqueue/add_duplicate/priority_queue"
            ))
        );
        assert_eq!(split_upstream("workqueue/add_duplicate/1_task"), None);
    }

    #[test]
    fn every_targets_peer_is_measured_in_the_same_sitting() {
        let go: Vec<String> = parse_go_bench(REAL_GO_OUTPUT)
            .into_iter()
            .map(|e| e.id)
            .collect();
        let kube_runtime = include_str!("../../benches/kube_runtime.rs");
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
            include_str!("../../benches/floor.rs"),
            include_str!("../../benches/workqueue.rs"),
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
        // Issue 25's list: 9 rows in three key kinds, and five against kube-runtime.
        assert_eq!(TARGETS.len(), 9 * 3 + 5);
    }

    #[test]
    fn a_ceiling_is_met_at_or_below_and_missed_above() {
        let t = Target {
            id: "q/a",
            goal: Goal::AtMost(Duration::from_nanos(70)),
            why: "",
            reason: None,
        };
        assert!(matches!(judge(&t, &[est("q/a", 70)]), Verdict::Met(_)));
        assert_eq!(
            judge(&t, &[est("q/a", 82)]),
            Verdict::Missed("82.0 ns".to_owned())
        );
        assert_eq!(judge(&t, &[est("q/b", 1)]), Verdict::NotRun);
    }

    #[test]
    fn a_ratio_is_judged_against_the_peer_in_the_same_run() {
        let t = Target {
            id: "ours",
            goal: Goal::FasterThan {
                peer: "theirs",
                ratio: 1.5,
            },
            why: "",
            reason: None,
        };
        assert!(matches!(
            judge(&t, &[est("ours", 100), est("theirs", 150)]),
            Verdict::Met(_)
        ));
        assert!(matches!(
            judge(&t, &[est("ours", 100), est("theirs", 149)]),
            Verdict::Missed(_)
        ));
        assert_eq!(judge(&t, &[est("ours", 100)]), Verdict::NotRun);
    }

    #[test]
    fn collect_reads_what_criterion_saves() {
        let dir = std::env::temp_dir().join(format!("costs-{}", std::process::id()));
        let new = dir.join("workqueue/add_get_done/1_task/new");
        fs::create_dir_all(&new).unwrap();
        fs::write(
            new.join("benchmark.json"),
            r#"{"group_id":"workqueue","function_id":"add_get_done","value_str":"1_task",
               "throughput":{"Elements":1},"full_id":"workqueue/add_get_done/1_task",
               "directory_name":"workqueue/add_get_done/1_task","title":"t"}"#,
        )
        .unwrap();
        fs::write(
            new.join("estimates.json"),
            r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":80.0,
               "upper_bound":90.0},"point_estimate":85.0,"standard_error":1.0},
               "median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":81.0,
               "upper_bound":83.7},"point_estimate":82.2,"standard_error":1.0}}"#,
        )
        .unwrap();
        // criterion's `base/` copy of an earlier run is not read.
        fs::create_dir_all(dir.join("workqueue/add_get_done/1_task/base")).unwrap();
        let got = collect(&dir).unwrap();
        assert_eq!(got.len(), 1);
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        assert!(
            collect_since(&dir, later).unwrap().is_empty(),
            "an earlier run's estimate"
        );
        assert_eq!(got[0].id, "workqueue/add_get_done/1_task");
        assert_eq!(got[0].median, Duration::from_nanos(82));
        let text = render(&RunInfo::here("--quick"), &got, &TARGETS[..1]);
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | 82.0 ns | 81.0 ns – 84.0 ns | 12.20 M/s |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | ≥ 2.00× `client-go:workqueue/add_get_done/1_task` \
                 | half of client-go's cost on the same row and keys, same sitting | not run |"
            ),
            "{text}"
        );
        assert!(text.contains("was not run in this sitting"), "{text}");
        // With client-go's rows from the same sitting, the ratio target is judged.
        let mut both = got.clone();
        both.extend(parse_go_bench(GO_OUTPUT));
        both.sort_by(|a, b| a.id.cmp(&b.id));
        let text = render(&RunInfo::here("--quick"), &both, &TARGETS[..1]);
        assert!(text.contains("| **missed**, 1.67× |"), "{text}");
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | client-go | 82.0 ns | 137 ns | 136 ns – 140 ns \
                 | 0.60 |"
            ),
            "{text}"
        );
        assert!(
            !text.contains("| `client-go:"),
            "client-go rows stay out of the port's table: {text}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn every_target_has_a_verdict_row_with_the_measured_ratio() {
        let run = RunInfo::here("--quick");
        let text = render(&run, &[], TARGETS);
        for t in TARGETS {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` | ≥", t.id)))
                .unwrap_or_else(|| panic!("no target row for {}: {text}", t.id));
            assert!(line.ends_with("| not run |"), "{line}");
        }
        // With every target and peer measured, each row says met or missed, with the ratio.
        let mut all = Vec::new();
        for (n, t) in TARGETS.iter().enumerate() {
            let Goal::FasterThan { peer, .. } = t.goal else {
                continue;
            };
            all.push(est(t.id, 100));
            // Peers shared by two targets get the first time; a target at 100 ns against a
            // peer at 100 + 50·n ns is faster by 1 + n/2.
            if !all.iter().any(|e| e.id == peer) {
                all.push(est(peer, 100 + 50 * n as u64));
            }
        }
        let text = render(&run, &all, TARGETS);
        let first = &TARGETS[0];
        assert!(
            text.contains(&format!("| `{}` | ≥ 2.00×", first.id))
                && text.contains("| **missed**, 1.00× |"),
            "{text}"
        );
        let verdicts = text
            .lines()
            .filter(|l| {
                l.ends_with("× |") && (l.contains("| met, ") || l.contains("| **missed**, "))
            })
            .count();
        assert_eq!(verdicts, TARGETS.len(), "{text}");
    }

    #[test]
    fn the_workqueue_rows_are_set_against_the_floor_of_their_key_kind() {
        assert_eq!(key_kind("workqueue/add_get_done/16_tasks"), "str");
        assert_eq!(key_kind("workqueue/add_duplicate/1_task/String"), "String");
        assert_eq!(
            floor_of("workqueue/add_duplicate/2_tasks/Request"),
            "floor/duplicate/Request"
        );
        assert_eq!(floor_of("workqueue/add_get_done/2_tasks"), "floor/str");
        let estimates = vec![
            est("client-go:workqueue/add_get_done/1_task", 123),
            est("client-go:workqueue/add_get_done/1_task/Request", 250),
            est("floor/str", 41),
            est("workqueue/add_get_done/1_task", 82),
            est("workqueue/add_get_done/1_task/Request", 160),
        ];
        let text = render(&RunInfo::here("--quick"), &estimates, &[]);
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | 41.0 ns | 82.0 ns | 2.0 | 123 ns | 3.0 |"
            ),
            "{text}"
        );
        // No floor/Request in this run: the times, and no multiples.
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task/Request` | not run | 160 ns |  | 250 ns |  |"
            ),
            "{text}"
        );
        // Without any floor the table is left out.
        let text = render(&RunInfo::here("--quick"), &estimates[..2], &[]);
        assert!(!text.contains("× floor"), "{text}");
    }

    /// A missed target with a reason shows its reading in the verdict column and, below the
    /// table, the reason's rows, their sum, the reading, what they are and what was tried,
    /// once per reason and key kind. A met target, or a reason whose rows did not run, shows
    /// no reading.
    #[test]
    fn a_missed_target_is_shown_with_its_reason() {
        const R: Reason = Reason {
            short: "the floor and the clone alone",
            what: "what `{kind}` costs.",
            rows: &["floor/{kind}", "clone/{kind}"],
            tried: "cloning less for `{kind}`.",
        };
        let target = |id: &'static str, peer: &'static str| Target {
            id,
            goal: Goal::FasterThan { peer, ratio: 2.0 },
            why: "half",
            reason: Some(&R),
        };
        let targets = [
            target("q/a/String", "go:q/a/String"),
            target("q/b/String", "go:q/b/String"),
            target("q/c/String", "go:q/c/String"),
            target("q/a/Request", "go:q/a/Request"),
        ];
        let estimates = vec![
            est("q/a/String", 100),
            est("go:q/a/String", 150),
            est("q/b/String", 120),
            est("go:q/b/String", 180),
            est("q/c/String", 10),
            est("go:q/c/String", 180),
            est("q/a/Request", 100),
            est("go:q/a/Request", 150),
            est("floor/String", 60),
            est("clone/String", 30),
            est("floor/Request", 70),
        ];
        let text = render(&RunInfo::here("--quick"), &estimates, &targets);
        assert!(
            text.contains("| **missed**, 1.50×; the floor and the clone alone: 1.67× |"),
            "{text}"
        );
        assert!(
            text.contains("| `q/c/String` | ≥ 2.00× `go:q/c/String` | half | met, 18.00× |"),
            "{text}"
        );
        assert!(
            text.contains(
                "- **the floor and the clone alone** (`floor/String` 60.0 ns + `clone/String` \
                 30.0 ns): `q/a/String` 1.50×, 90.0 ns = 1.67×; `q/b/String` 1.50×, 90.0 ns = \
                 2.00×. what `String` costs. Tried: cloning less for `String`.\n"
            ),
            "{text}"
        );
        // No clone/Request in this run: the verdict alone, and no line for Request.
        assert!(
            text.contains(
                "| `q/a/Request` | ≥ 2.00× `go:q/a/Request` | half | **missed**, 1.50× |"
            ),
            "{text}"
        );
        assert!(!text.contains("`floor/Request` 70.0 ns"), "{text}");
    }

    #[test]
    fn the_priority_queue_rows_name_their_upstream() {
        let estimates = vec![
            est(
                "controller-runtime:priorityqueue/add_duplicate/priority_queue",
                300,
            ),
            est(
                "client-go:priorityqueue/add_duplicate/rate_limiting_queue",
                30,
            ),
            est("priorityqueue/add_duplicate/priority_queue", 100),
        ];
        let text = render(&RunInfo::here("--quick"), &estimates, &TARGETS[..0]);
        assert!(
            text.contains(
                "| `priorityqueue/add_duplicate/priority_queue` | controller-runtime | 100 ns | 300 ns \
                 | 299 ns – 301 ns | 0.33 |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| `priorityqueue/add_duplicate/rate_limiting_queue` | client-go | not run | 30.0 ns"
            ),
            "{text}"
        );
    }
}
