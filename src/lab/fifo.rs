//! The experiments of the chapter "'RealFIFO removed deduplication' is wrong, and so is the
//! version": the same events through both FIFOs, the ghost Delete, the gate's history, the
//! environment override, and what a queue depth measured in keys became in 1.33.
//!
//! Every FIFO here is built the way an informer builds it: [`select_fifo`] on the gates of an
//! emulated version, then [`FifoChoice::build`] with an (empty) indexer.

use std::{fmt, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use similar::{Algorithm, ChangeTag, capture_diff_slices};

use crate::book::snap;
use crate::cache::{
    Delta, DeltaObject, Deltas, FifoChoice, InformerFifo, Queue, Store, select_fifo,
};
use crate::features::{Feature, FeatureGates, PreRelease, klog};

/// A ConfigMap in `default` named `name`, with `data.v` when `v` is given.
pub fn cm(name: &str, v: Option<u32>) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: v.map(|v| [("v".to_owned(), v.to_string())].into()),
        ..Default::default()
    })
}

fn object_label(o: &ConfigMap) -> String {
    let name = o.metadata.name.clone().unwrap_or_default();
    match o.data.as_ref().and_then(|d| d.get("v")) {
        Some(v) => format!("{name} v{v}"),
        None => name,
    }
}

/// One delta as the chapter prints it: `Updated alpha v2`, `Deleted ghost`.
pub fn delta_label(d: &Delta<ConfigMap>) -> String {
    let what = match &d.object {
        DeltaObject::Object(o) => object_label(o),
        DeltaObject::Tombstone(t) => format!("tombstone({})", t.key),
        DeltaObject::ReplacedAll(r) => {
            format!("{} objects at rv {}", r.objects.len(), r.resource_version)
        }
        DeltaObject::SyncAll => "all".to_owned(),
        DeltaObject::Bookmark(b) => format!("rv {}", b.resource_version),
    };
    format!("{} {what}", d.delta_type)
}

/// The FIFO an informer runs at Kubernetes `1.minor` with default gates.
pub fn informer_fifo(minor: u32) -> (FifoChoice, InformerFifo<ConfigMap>) {
    let gates = FeatureGates::at_minor(minor).expect("1.32..=1.37");
    let choice = select_fifo(&gates);
    let fifo = choice.build("*v1.ConfigMap", &Store::new());
    (choice, fifo)
}

/// Pops without waiting until nothing is queued; each Pop's deltas, labelled.
pub fn drain(fifo: &impl Queue<ConfigMap>) -> Vec<Vec<String>> {
    std::iter::from_fn(|| fifo.try_pop(|_, _| Ok::<(), ()>(())))
        .map(|r| r.expect("this process never fails"))
        .map(|d: Deltas<ConfigMap>| d.iter().map(delta_label).collect())
        .collect()
}

/// One FIFO's run: its name and its Pops.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pops {
    /// The FIFO and mode, from [`FifoChoice::describe`].
    pub fifo: String,
    /// Each Pop's deltas.
    pub pops: Vec<Vec<String>>,
}

impl Pops {
    /// Deltas handed out, summed over Pops.
    pub fn total_deltas(&self) -> usize {
        self.pops.iter().map(Vec::len).sum()
    }

    /// Every delta, in the order the informer's handler sees them.
    pub fn handler_order(&self) -> Vec<String> {
        self.pops.iter().flatten().cloned().collect()
    }
}

impl fmt::Display for Pops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {} pops", self.fifo, self.pops.len())?;
        for (i, p) in self.pops.iter().enumerate() {
            writeln!(f, "  pop {}: [{}]", i + 1, p.join(", "))?;
        }
        Ok(())
    }
}

/// The interleaving scenario: alpha and beta, created, updated and (beta) deleted, in turns.
pub fn interleaved_events(fifo: &impl Queue<ConfigMap>) {
    fifo.add(cm("alpha", Some(1))).unwrap();
    fifo.add(cm("beta", Some(1))).unwrap();
    fifo.update(cm("alpha", Some(2))).unwrap();
    fifo.update(cm("beta", Some(2))).unwrap();
    fifo.update(cm("alpha", Some(3))).unwrap();
    fifo.delete(cm("beta", Some(2))).unwrap();
}

/// The interleaving through DeltaFIFO (1.32) and RealFIFO (1.33).
#[derive(Debug, Clone)]
pub struct Interleave {
    /// DeltaFIFO's Pops.
    pub delta: Pops,
    /// RealFIFO's Pops.
    pub real: Pops,
}

/// Runs [`interleaved_events`] through the FIFO of `minor`, all queued before the first Pop.
pub fn run_interleave(minor: u32) -> Pops {
    let (choice, fifo) = informer_fifo(minor);
    interleaved_events(&fifo);
    Pops {
        fifo: choice.describe(),
        pops: drain(&fifo),
    }
}

/// The chapter's first experiment.
pub fn interleave() -> Interleave {
    Interleave {
        delta: run_interleave(32),
        real: run_interleave(33),
    }
}

impl Interleave {
    /// The durable claims: nothing is lost (equal delta counts), but the Pops differ in number
    /// and the deltas reach the handler in a different order.
    pub fn check(&self) -> Result<(), String> {
        let (d, r) = (self.delta.total_deltas(), self.real.total_deltas());
        if d != r {
            return Err(format!("delta counts differ: DeltaFIFO {d}, RealFIFO {r}"));
        }
        if self.delta.pops.len() == self.real.pops.len() {
            return Err(format!("both FIFOs popped {} times", self.real.pops.len()));
        }
        if self.delta.handler_order() == self.real.handler_order() {
            return Err("both FIFOs hand the deltas out in the same order".into());
        }
        Ok(())
    }

    /// The handler's view of the two runs as a diff: `-` only in DeltaFIFO's order, `+` only
    /// in RealFIFO's, ` ` in both.
    pub fn diff(&self) -> String {
        order_diff(&self.delta.handler_order(), &self.real.handler_order())
    }
}

/// A line diff of two orders (`similar`, Myers).
pub fn order_diff(old: &[String], new: &[String]) -> String {
    let mut out = String::new();
    for op in capture_diff_slices(Algorithm::Myers, old, new) {
        for change in op.iter_changes(old, new) {
            let sign = match change.tag() {
                ChangeTag::Equal => ' ',
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
            };
            out.push_str(&format!("{sign} {}\n", change.value()));
        }
    }
    out
}

impl fmt::Display for Interleave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n{}", self.delta, self.real)
    }
}

/// The ghost check: a Delete for an object no one ever saw, on an empty FIFO, must come out
/// as `[Deleted ghost]`. Returns the Pops, or an error naming what came out instead.
pub fn check_ghost_delivered(fifo: &impl Queue<ConfigMap>) -> Result<Vec<Vec<String>>, String> {
    fifo.delete(cm("ghost", None)).unwrap();
    let pops = drain(fifo);
    if pops == [["Deleted ghost"]] {
        Ok(pops)
    } else {
        Err(format!(
            "{}: a Delete of an object it never knew yielded {pops:?}, not [Deleted ghost]",
            fifo.name()
        ))
    }
}

/// The ghost at every modelled version: what the informer's FIFO yields.
pub fn ghost_by_version() -> String {
    let mut out = String::new();
    for minor in 32..=37 {
        let (choice, fifo) = informer_fifo(minor);
        let shown = match check_ghost_delivered(&fifo) {
            Ok(pops) => format!("{pops:?}"),
            Err(_) => format!("{:?} (nothing)", drain(&fifo)),
        };
        out.push_str(&format!("1.{minor}  {:<48} {shown}\n", choice.describe()));
    }
    out
}

fn pre(p: PreRelease) -> &'static str {
    match p {
        PreRelease::PreAlpha => "-",
        PreRelease::Alpha => "Alpha",
        PreRelease::Beta => "Beta",
        PreRelease::GA => "GA",
        PreRelease::Deprecated => "Deprecated",
    }
}

/// The InOrderInformers history, 1.32–1.37, printed from the registry, with the FIFO an
/// informer runs at each version.
pub fn gate_table() -> String {
    let mut out = format!(
        "{:<8}{:<10}{:<9}{:<8}{}\n",
        "version", "maturity", "default", "locked", "informer FIFO"
    );
    for minor in 32..=37 {
        let gates = FeatureGates::at_minor(minor).expect("modelled");
        let s = gates.spec(Feature::IN_ORDER_INFORMERS).expect("known");
        out.push_str(&format!(
            "{:<8}{:<10}{:<9}{:<8}{}\n",
            format!("1.{minor}"),
            pre(s.pre_release),
            if s.default { "on" } else { "off" },
            if s.lock_to_default { "yes" } else { "no" },
            select_fifo(&gates).describe()
        ));
    }
    out
}

/// What `KUBE_FEATURE_InOrderInformers=false` does at one version.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EnvOverride {
    /// The emulated version.
    pub version: String,
    /// The variable set.
    pub env: String,
    /// InOrderInformers afterwards.
    pub in_order_informers: bool,
    /// The FIFO an informer then runs.
    pub fifo: String,
    /// What was logged (klog's error lines, header cut to the severity letter).
    pub log: Vec<String>,
}

/// Applies `KUBE_FEATURE_InOrderInformers=false` at `1.minor`, capturing the log.
pub fn env_override(minor: u32) -> EnvOverride {
    let mut gates = FeatureGates::at_minor(minor).expect("modelled");
    let env = ("KUBE_FEATURE_InOrderInformers", "false");
    let ((), log) = klog::capture(|| gates.apply_env([env]));
    EnvOverride {
        version: format!("1.{minor}"),
        env: format!("{}={}", env.0, env.1),
        in_order_informers: gates.enabled(Feature::IN_ORDER_INFORMERS),
        fifo: select_fifo(&gates).describe(),
        log,
    }
}

/// A burst measured by code that reads the FIFO's depth as "objects waiting".
#[derive(Debug, Clone, serde::Serialize)]
pub struct DepthReport {
    /// The FIFO and mode.
    pub fifo: String,
    /// Objects touched by the burst.
    pub objects: usize,
    /// Deltas the burst queued.
    pub deltas: usize,
    /// `len()` after the burst: what a dashboard would plot.
    pub depth: usize,
    /// Pops (handler calls) to drain it.
    pub pops: usize,
    /// Pops after which more than 10 items were still queued: upstream logs a "slow event
    /// handlers blocking the queue" trace for those when a handler takes over 100 ms.
    pub pops_over_trace_depth: usize,
}

/// `updates` updates to each of `objects` ConfigMaps, round-robin, through the FIFO of
/// `1.minor`; then drained.
pub fn queue_depth(minor: u32, objects: usize, updates: u32) -> DepthReport {
    let (choice, fifo) = informer_fifo(minor);
    for v in 1..=updates {
        for i in 0..objects {
            fifo.update(cm(&format!("cm-{i}"), Some(v))).unwrap();
        }
    }
    let depth = fifo.len();
    let mut pops = 0;
    let mut over = 0;
    let mut deltas = 0;
    while let Some(r) = fifo.try_pop(|_, _| Ok::<(), ()>(())) {
        deltas += r.expect("never fails").len();
        pops += 1;
        if fifo.len() > 10 {
            over += 1;
        }
    }
    DepthReport {
        fifo: choice.describe(),
        objects,
        deltas,
        depth,
        pops,
        pops_over_trace_depth: over,
    }
}

/// The interleaving again, but with one Pop after the first two events, as a consumer that
/// keeps up with its producer does.
pub fn interleave_with_early_pop(minor: u32) -> Pops {
    let (choice, fifo) = informer_fifo(minor);
    fifo.add(cm("alpha", Some(1))).unwrap();
    fifo.add(cm("beta", Some(1))).unwrap();
    let mut pops = drain_one(&fifo);
    fifo.update(cm("alpha", Some(2))).unwrap();
    fifo.update(cm("beta", Some(2))).unwrap();
    fifo.update(cm("alpha", Some(3))).unwrap();
    fifo.delete(cm("beta", Some(2))).unwrap();
    pops.extend(drain(&fifo));
    Pops {
        fifo: choice.describe(),
        pops,
    }
}

fn drain_one(fifo: &impl Queue<ConfigMap>) -> Vec<Vec<String>> {
    let d = fifo
        .try_pop(|_, _| Ok::<(), ()>(()))
        .expect("two events are queued")
        .expect("never fails");
    vec![d.iter().map(delta_label).collect()]
}

/// Runs every experiment of the chapter, checks its claims and records its snapshots.
pub fn run() {
    let il = interleave();
    il.check().expect("interleave claims");
    snap::text("ch03_interleave_pops", &il);
    snap::text("ch03_interleave_diff", il.diff());
    let real = check_ghost_delivered(&informer_fifo(33).1).expect("RealFIFO delivers the ghost");
    snap::text("ch03_ghost_real", format!("{real:?}"));
    let wrong = check_ghost_delivered(&informer_fifo(32).1).expect_err("DeltaFIFO drops it");
    snap::text("ch03_ghost_wrong_fifo", wrong);
    snap::text("ch03_ghost_by_version", ghost_by_version());
    snap::text("ch03_gate_table", gate_table());
    snap::yaml(
        "ch03_env_override",
        &[env_override(35), env_override(36)],
        vec![],
    );
    snap::yaml(
        "ch03_queue_depth",
        &[queue_depth(32, 3, 10), queue_depth(33, 3, 10)],
        vec![],
    );
    snap::text("ch03_early_pop", interleave_with_early_pop(32));
}
