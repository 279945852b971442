//! Chapter 14's experiments ("On a real API server"): the embedded API server held to a real
//! kube-apiserver v1.37.2 on etcd v3.7.0 (`cargo run -- cluster up`), request by request
//! ([`conformance`]), and the book's real-clock experiments run on both: the write-to-reconcile
//! latency ([`latency`]), chapter 06's and 11's storms ([`storms`]), the cost of listing
//! 10,000 objects with and without the watch cache ([`lists`]), chapter 05's resourceVersion
//! check and compaction ([`versions`]), and chapter 04's relists ([`relists`]).
//!
//! Every experiment here needs the real tier ([`mod@crate::lab::rig::real`]): without a real server
//! (or without the `tls` feature) it prints one line naming the command that enables it and
//! returns; under `CI=true` a missing server fails.

pub mod conformance;
pub mod latency;
pub mod lists;
pub mod relists;
pub mod storms;
pub mod versions;

use std::time::Duration;

use crate::lab::rig::{self, Backend, real::RealServer};

/// Writes in one latency run, 20 ms apart.
pub const LATENCY_WRITES: u64 = 200;
/// The gap between the latency run's writes: longer than a reconcile, so each write is
/// reconciled on its own.
pub const LATENCY_GAP: Duration = Duration::from_millis(20);

/// One round of every banded real-tier run on `real` (and the embedded server beside it):
/// each band's values, by band name. `cargo run --features tls -- measure real` appends them to
/// the basis files.
pub fn basis_round(real: &RealServer) -> Vec<(&'static str, f64)> {
    let _only = real.exclusive();
    let mut out = Vec::new();
    for (prefix, backend) in [
        ("EMBEDDED", Backend::Http),
        ("REAL_SERVER", Backend::Kubeconfig(real.kubeconfig.clone())),
    ] {
        let l = rig::real(time_writes(&backend, LATENCY_WRITES, LATENCY_GAP))
            .unwrap_or_else(|e| panic!("latency on {prefix}: {e}"));
        assert_eq!(l.lost(), 0, "{prefix}: an event was lost");
        let names: [&'static str; 2] = match prefix {
            "EMBEDDED" => ["EMBEDDED_EVENT_P50_MS", "EMBEDDED_RECONCILE_P50_MS"],
            _ => ["REAL_SERVER_EVENT_P50_MS", "REAL_SERVER_RECONCILE_P50_MS"],
        };
        out.push((names[0], l.event_percentile(50.0)));
        out.push((names[1], l.reconcile_percentile(50.0)));
    }
    let storms = storms::run(&real.kubeconfig);
    storms.check_durable().unwrap_or_else(|e| panic!("{e}"));
    out.extend(storms.values());
    out
}

pub mod bands;

use std::fmt::Write as _;

use crate::kit::{measured, snap};
use crate::lab::rig::real::{Instance, or_skip};
use conformance::{KNOWN, differences::reconcile};
use latency::time_writes;
use versions::{UPDATES, rv_check};

/// How long each experiment may take before it is reported as hung.
pub const LIMIT: Duration = Duration::from_secs(600);

/// The appendix "The embedded server beside kube-apiserver": the conformance suite against
/// both real servers; its differences, each covered by one entry of the table, and the table.
pub fn ch97_conformance() {
    let Some(main) = or_skip(Instance::Main) else {
        return;
    };
    // book: ch97_conformance
    let _only = main.exclusive(); // one real-tier experiment at a time
    let no_cache = or_skip(Instance::NoWatchCache); // the second control plane, if it is up
    let without = no_cache.as_ref().map(|s| s.kubeconfig.as_path());
    let suite = conformance::against_real(&main.kubeconfig, without);
    let outcome = rig::real(rig::within(LIMIT, "the conformance suite", suite)).expect("a run");
    // kube-apiserver gives every answer the scenarios expect of it.
    assert!(outcome.missed.is_empty(), "{:#?}", outcome.missed);
    // Every difference is an entry of the table, and every entry is a difference of this run.
    let (uncovered, unused) = reconcile(KNOWN, &outcome.findings, &outcome.servers);
    assert!(uncovered.is_empty(), "not in the table: {uncovered:#?}");
    assert!(unused.is_empty(), "no longer found: {unused:#?}");
    // book: end ch97_conformance
    snap::text("ch97_differences", conformance::table(&outcome));
}

/// Chapter 14, "From a write to the reconcile": [`LATENCY_WRITES`] writes on the embedded
/// server and on the real one, in this run; no event lost on either. Then
/// [`latency_record`].
pub fn ch14_latency() {
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    let _only = real.exclusive();
    // book: ch14_latency_runs
    let mut runs = vec![];
    for (server, backend) in [
        ("embedded", Backend::Http),
        (
            "kube-apiserver",
            Backend::Kubeconfig(real.kubeconfig.clone()),
        ),
    ] {
        let run = time_writes(&backend, LATENCY_WRITES, LATENCY_GAP);
        let l = rig::real(rig::within(LIMIT, "the latency run", run)).expect("a latency run");
        assert_eq!(l.lost(), 0, "{server}: a write's event never came");
        assert!(
            l.to_reconcile_ms.iter().all(Option::is_some),
            "{server}: a write never reconciled"
        );
        runs.push((server, l));
    }
    // book: end ch14_latency_runs
    latency_record(&runs);
}

/// Checks each server's medians and 99th percentiles against their bands (panics outside
/// one), records snapshot `ch14_latency` (bands only) and this run's distributions.
pub fn latency_record(runs: &[(&str, latency::Latency)]) {
    let mut text = String::new();
    let mut m = String::from(
        "| server | to the watch event: p50 / p90 / p99 / max ms | to the reconcile's start: \
         p50 / p90 / p99 / max ms | reconciles |\n|---|---|---|---|\n",
    );
    for (server, l) in runs {
        let prefix = if *server == "embedded" {
            "EMBEDDED"
        } else {
            "REAL_SERVER"
        };
        let _ = writeln!(
            text,
            "{server}: {} writes, events lost {}",
            l.writes,
            l.lost()
        );
        // The medians are banded; the tail (p90, p99, max) is shown in the measured table
        // only: one slow wake-up on a loaded machine moves a p99 by tens of ms.
        for (what, p, v) in [
            ("event", "P50", l.event_percentile(50.0)),
            ("reconcile", "P50", l.reconcile_percentile(50.0)),
        ] {
            let name = format!("{prefix}_{}_{p}_MS", what.to_uppercase());
            let band = bands::band(&name);
            let _ = writeln!(text, "  {what:<9} {p}: {} ms", band.check(&name, round1(v)));
        }
        let q = |f: &dyn Fn(f64) -> f64| {
            [50.0, 90.0, 99.0, 100.0]
                .map(|p| format!("{:.1}", f(p)))
                .join(" / ")
        };
        let _ = writeln!(
            m,
            "| {server} | {} | {} | {} |",
            q(&|p| l.event_percentile(p)),
            q(&|p| l.reconcile_percentile(p)),
            l.reconciles
        );
    }
    snap::text("ch14_latency", text);
    let _ = measured::record("ch14_latency", m);
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Chapter 14, "The storms on a real server": chapter 06's essay storm and sweeps and chapter
/// 11's storm on the real server ([`storms::run`]), then [`storms_record`].
pub fn ch14_storms() {
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    let _only = real.exclusive();
    let s = storms::run(&real.kubeconfig);
    storms_record(&s);
}

/// Checks the durable claims exactly and every value against the real server's bands (panics
/// otherwise), records snapshot `ch14_storms` (bands only) and this run's values.
pub fn storms_record(s: &storms::Storms) {
    s.check_durable().unwrap_or_else(|e| panic!("{e}"));
    let mut text = String::from(
        "every storm: events = writes and final = the last value written (exact); merged \
         whenever behind in fact\n",
    );
    let mut checked = std::collections::BTreeMap::<&str, String>::new();
    for (name, value) in s.values() {
        let pinned = match bands::SHOWN.iter().find(|(n, _)| *n == name) {
            Some((_, reference)) => reference.show(value).to_string(),
            None => format!("in {}", bands::band(name).check(name, value)),
        };
        checked.insert(name, pinned);
    }
    for (name, pinned) in &checked {
        let _ = writeln!(text, "  {name:<38} {pinned}");
    }
    snap::text("ch14_storms", text);
    let mut m = String::from(
        "| run | writes | gap ms | cost ms | span ms | reconciles | collapse |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    let row = |m: &mut String, label: &str, r: &crate::lab::rig::burst::Report| {
        let _ = writeln!(
            m,
            "| {label} | {} | {} | {} | {:.0} | {} | {:.2} |",
            r.writes_issued,
            r.gap.as_millis(),
            r.cost.as_millis(),
            r.burst_span.as_secs_f64() * 1000.0,
            r.reconciles,
            r.collapse
        );
    };
    row(&mut m, "essay, controlloop", &s.essay);
    row(&mut m, "essay, kube-runtime", &s.kube_essay);
    for r in s.sweep_runs() {
        row(&mut m, "sweep", r);
    }
    let _ = measured::record("ch14_storms", m);
}

/// Chapter 14, "Listing 10,000 objects": the same lists on the embedded server and on
/// kube-apiserver with and without its watch cache. Snapshot `ch14_lists` (what every list
/// returned, exact) and this run's costs.
pub fn ch14_lists() {
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    let _only = real.exclusive();
    let Some(no_cache) = or_skip(Instance::NoWatchCache) else {
        return;
    };
    let backends = [
        ("embedded", Backend::Http),
        (
            "kube-apiserver",
            Backend::Kubeconfig(real.kubeconfig.clone()),
        ),
        (
            "kube-apiserver --watch-cache=false",
            Backend::Kubeconfig(no_cache.kubeconfig.clone()),
        ),
    ];
    let mut text = String::new();
    let mut m = String::from(
        "| server | a list, ms | at resourceVersion 0, ms | in pages of 500, ms | an informer's \
         list to synced, ms |\n|---|---:|---:|---:|---:|\n",
    );
    for (label, backend) in &backends {
        let c = rig::real(rig::within(
            LIMIT,
            "10,000 objects listed",
            lists::run(backend, label),
        ))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(c.items, lists::OBJECTS, "{label}");
        let _ = writeln!(
            text,
            "{label}: every list {} objects, the paged one in {} pages",
            c.items, c.pages
        );
        let _ = writeln!(
            m,
            "| {label} | {:.0} | {:.0} | {:.0} | {:.0} |",
            c.list_ms, c.list_rv0_ms, c.paged_ms, c.informer_sync_ms
        );
    }
    snap::text("ch14_lists", text);
    let _ = measured::record("ch14_lists", m);
}

/// Chapter 14, "The check that was vacuous": chapter 05's resourceVersion check on the real
/// server, on the faithful informer and on the one that calls its handlers before it writes
/// its cache. Snapshot `ch14_rv_check`.
pub fn ch14_rv_check() {
    use controlloop::cache::broken::Variant;
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    let _only = real.exclusive();
    let backend = Backend::Kubeconfig(real.kubeconfig.clone());
    // book: ch14_rv_checks
    let mut rows = Vec::new();
    for variant in [Variant::Faithful, Variant::HandlersBeforeCache] {
        let check = rv_check(&backend, variant); // on kube-apiserver's resourceVersions
        let row = rig::real(rig::within(LIMIT, "the check", check)).expect("a check");
        assert_eq!(row.updates, UPDATES);
        assert_eq!(row.rv_indistinguishable, 0); // every update has a new resourceVersion
        // The RV check now catches every broken update, as the payload check does.
        let caught = if variant == Variant::Faithful {
            0
        } else {
            UPDATES
        };
        assert_eq!(row.rv_check_violations, caught);
        assert_eq!(row.payload_check_violations, caught);
        rows.push((format!("{variant:?}"), row));
    }
    // book: end ch14_rv_checks
    snap::yaml("ch14_rv_check", &rows, vec![]);
}

/// Chapter 14, "Compaction on real etcd": an old resourceVersion after etcd compacted it,
/// with the watch cache in front and without. Snapshot `ch14_compaction` (exact).
pub fn ch14_compaction() {
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    let _only = real.exclusive();
    let Some(no_cache) = or_skip(Instance::NoWatchCache) else {
        return;
    };
    let mut text = String::new();
    let mut m = String::from("| server | etcd compacted the version after, ms |\n|---|---:|\n");
    for (label, kc) in [
        ("kube-apiserver", &real.kubeconfig),
        ("kube-apiserver --watch-cache=false", &no_cache.kubeconfig),
    ] {
        let c = rig::real(rig::within(
            LIMIT,
            "compaction",
            versions::compaction(&Backend::Kubeconfig(kc.clone()), label),
        ))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        if label.ends_with("false") {
            assert_eq!(c.watch_from_it, "ERROR 410 Expired");
        } else {
            assert_eq!((c.watch_from_it.as_str(), c.replayed), ("MODIFIED", 3));
        }
        let _ = writeln!(
            text,
            "{label}: an exact list at the version: 410 Expired; a watch from it: {}, {} \
             writes replayed",
            c.watch_from_it, c.replayed
        );
        let _ = writeln!(m, "| {label} | {:.0} |", c.compacted_after_ms);
    }
    snap::text("ch14_compaction", text);
    let _ = measured::record("ch14_compaction", m);
}

/// Chapter 14, "What relists on a real server": an informer's watch ended by a relay, with
/// and without the watch cache. Snapshot `ch14_relists` (exact).
pub fn ch14_relists() {
    use relists::Cut;
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    let _only = real.exclusive();
    let Some(no_cache) = or_skip(Instance::NoWatchCache) else {
        return;
    };
    let mut text = String::new();
    let mut m = String::from(
        "| server | cut | back on the last value after, ms | etcd compacted after, ms |\n|---|---|---:|---:|\n",
    );
    for (label, kc, cut) in [
        ("kube-apiserver", &real.kubeconfig, Cut::Closed),
        ("kube-apiserver", &real.kubeconfig, Cut::PastCompaction),
        (
            "kube-apiserver --watch-cache=false",
            &no_cache.kubeconfig,
            Cut::PastCompaction,
        ),
    ] {
        let r = rig::real(rig::within(LIMIT, "a cut watch", relists::run(kc, cut)))
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(
            r.caught_up,
            "{label} {cut:?}: the cache never got the writes"
        );
        assert!(r.resumed_watches >= 1, "{label} {cut:?}: no watch resumed");
        let relisted = label.ends_with("false");
        assert_eq!(r.relists > 0, relisted, "{label} {cut:?}: {r:?}");
        let _ = writeln!(
            text,
            "{label}, {cut:?}: relisted {}, watch resumed, cache on the last of {} writes",
            if relisted { "yes" } else { "no" },
            relists::WRITES
        );
        let _ = writeln!(
            m,
            "| {label} | {cut:?} | {:.0} | {} |",
            r.recovery_ms,
            r.compaction_ms.map_or("".into(), |c| format!("{c:.0}"))
        );
    }
    snap::text("ch14_relists", text);
    let _ = measured::record("ch14_relists", m);
}
