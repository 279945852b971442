//! Chapter 03's experiments: the same events through DeltaFIFO and RealFIFO, the ghost Delete,
//! the InOrderInformers gate's history, the environment override, and what a queue depth
//! measured in keys became in 1.33.
//!
//! The body of every `pub fn ch03_…` here is a block of `chapters/03-realfifo.md`, and so is
//! every function such a block defines: each is a region marked `// book: NAME`, which
//! `book/tests/book_layout.rs` holds equal to the chapter's copy, so the page shows the code
//! `cargo run` runs. The rest of this module is the rig those blocks stand on: the
//! objects they queue and the labels they print.
//!
//! Every FIFO is built the way an informer builds it: [`select_fifo`] on the gates of an
//! emulated Kubernetes version, then [`FifoChoice::build`] with the informer's (empty) cache.

use std::{cell::RefCell, fmt, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use crate::kit::{moved::ClientGo, snap};
use controlloop::cache::{Delta, Deltas};
use controlloop::cache::{
    DeltaFifo, DeltaFifoOptions, DeltaObject, DeltaType, Fifo, FifoChoice, InformerFifo, RealFifo,
    RealFifoOptions, Store, select_fifo,
};
use controlloop::features::{Feature, FeatureGates, PreRelease};
use controlloop::klog;

/// A ConfigMap `default/name`, with `data.v` when `v` is given.
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

/// A ConfigMap `default/name` as the server returns it after the write that gave it
/// resourceVersion `rv`: the resourceVersion is the order in which the server made the changes.
pub fn cm_at(name: &str, rv: u64) -> Arc<ConfigMap> {
    let mut c = (*cm(name, None)).clone();
    c.metadata.resource_version = Some(rv.to_string());
    Arc::new(c)
}

fn object_label(o: &ConfigMap) -> String {
    let mut out = o.metadata.name.clone().unwrap_or_default();
    if let Some(rv) = &o.metadata.resource_version {
        out += &format!(" rv{rv}");
    }
    if let Some(v) = o.data.as_ref().and_then(|d| d.get("v")) {
        out += &format!(" v{v}");
    }
    out
}

/// One delta as the chapter prints it: `Updated alpha rv3`, `Deleted ghost`.
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

/// The FIFO an informer runs at Kubernetes `1.minor` with default gates (the benchmarks' too).
pub fn informer_fifo(minor: u32) -> (FifoChoice, InformerFifo<ConfigMap>) {
    let gates = FeatureGates::at_minor(minor).expect("1.32..=1.37");
    let choice = select_fifo(&gates);
    let fifo = choice.build("*v1.ConfigMap", &Store::new());
    (choice, fifo)
}

/// One FIFO's run: its name and mode, and its Pops.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Pops {
    /// The FIFO and mode, from [`FifoChoice::describe`].
    pub fifo: String,
    /// Each Pop's deltas, labelled by [`delta_label`].
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

/// The maturity column of the gate table.
pub fn maturity(p: PreRelease) -> &'static str {
    match p {
        PreRelease::PreAlpha => "-",
        PreRelease::Alpha => "Alpha",
        PreRelease::Beta => "Beta",
        PreRelease::GA => "GA",
        PreRelease::Deprecated => "Deprecated",
    }
}

/// What `KUBE_FEATURE_InOrderInformers=false` did at one version.
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

// The chapter's blocks, in page order: each `// book:` region is a chapter block's text.

// book: ch03_fn_interleave_through
/// The six interleaved events through the FIFO an informer builds at `1.minor`.
pub fn interleave_through(minor: u32) -> Pops {
    // The gates of Kubernetes 1.minor choose the FIFO, as the informer's constructor does.
    let choice = select_fifo(&FeatureGates::at_minor(minor).unwrap());
    let fifo = choice.build("*v1.ConfigMap", &Store::new());
    // Six changes, all queued before the informer pops anything.
    fifo.add(cm_at("alpha", 1)).unwrap();
    fifo.add(cm_at("beta", 2)).unwrap();
    fifo.update(cm_at("alpha", 3)).unwrap();
    fifo.update(cm_at("beta", 4)).unwrap();
    fifo.update(cm_at("alpha", 5)).unwrap();
    fifo.delete(cm_at("beta", 6)).unwrap();
    Pops {
        fifo: choice.describe(),
        pops: drain(&fifo),
    }
}

/// The informer's loop: Pop until nothing is queued, keeping what each Pop handed over.
pub fn drain(fifo: &InformerFifo<ConfigMap>) -> Vec<Vec<String>> {
    let mut pops = Vec::new();
    while let Some(deltas) = fifo.try_pop(|_, _| Ok::<(), ()>(())) {
        pops.push(deltas.unwrap().iter().map(delta_label).collect());
    }
    pops
}
// book: end ch03_fn_interleave_through

/// Chapter 03, "The same six events through both FIFOs".
pub fn ch03_interleave() {
    // book: ch03_interleave
    let (delta, real) = (interleave_through(32), interleave_through(33));
    // Nothing is lost: both hand out all six deltas...
    assert_eq!((delta.total_deltas(), real.total_deltas()), (6, 6));
    // ...but in a different number of Pops, and in a different order.
    assert_eq!((delta.pops.len(), real.pops.len()), (2, 6));
    assert_ne!(delta.handler_order(), real.handler_order());
    snap::text("ch03_interleave_pops", format!("{delta}\n{real}"));
    // book: end ch03_interleave
}

/// Chapter 03: DeltaFIFO merges a second deletion directly after a first.
pub fn ch03_double_delete() {
    // book: ch03_double_delete
    let fifo = DeltaFifo::new(DeltaFifoOptions::default());
    fifo.add(cm_at("alpha", 1)).unwrap();
    fifo.delete(cm_at("alpha", 2)).unwrap();
    fifo.delete(cm_at("alpha", 2)).unwrap(); // the watch and a relist both saw it go
    let deltas = fifo.try_pop(|_, _| Ok::<(), ()>(())).unwrap().unwrap();
    let types: Vec<DeltaType> = deltas.iter().map(|d| d.delta_type).collect();
    assert_eq!(types, [DeltaType::Added, DeltaType::Deleted]);
    // book: end ch03_double_delete
}

// book: ch03_fn_order_claims
/// The first block's claims, as a check that says what it found.
pub fn order_claims(a: &Pops, b: &Pops) -> Result<(), String> {
    if a.total_deltas() != b.total_deltas() {
        return Err("the FIFOs handed out different numbers of deltas".into());
    }
    if a.pops.len() == b.pops.len() {
        return Err(format!("both FIFOs popped {} times", a.pops.len()));
    }
    if a.handler_order() == b.handler_order() {
        return Err("both FIFOs hand the deltas out in the same order".into());
    }
    Ok(())
}
// book: end ch03_fn_order_claims

/// Chapter 03: the interleaving check, on the real pair and on a broken one.
pub fn ch03_check_fires() {
    // book: ch03_check_fires
    let (delta, real) = (interleave_through(32), interleave_through(33));
    assert_eq!(order_claims(&delta, &real), Ok(()));
    // A broken pair: DeltaFIFO against itself.
    let same = interleave_through(32);
    assert_eq!(
        order_claims(&delta, &same),
        Err("both FIFOs popped 2 times".into())
    );
    // book: end ch03_check_fires
}

// book: ch03_fn_ghost_through
/// A Delete for an object nobody ever saw, through the FIFO an informer builds at `1.minor`.
pub fn ghost_through(minor: u32) -> Pops {
    let choice = select_fifo(&FeatureGates::at_minor(minor).unwrap());
    // The informer's cache, empty: the FIFO's "known objects".
    let fifo = choice.build("*v1.ConfigMap", &Store::new());
    fifo.delete(cm("ghost", None)).unwrap();
    Pops {
        fifo: choice.describe(),
        pops: drain(&fifo),
    }
}
// book: end ch03_fn_ghost_through

/// Chapter 03, "The ghost Delete".
pub fn ch03_ghost() {
    // book: ch03_ghost
    // The check: the Delete must reach the informer, as [Deleted ghost].
    let delivered = |run: Pops| match run.pops == [["Deleted ghost"]] {
        true => Ok(()),
        false => Err(format!("{}: the Delete yielded {:?}", run.fifo, run.pops)),
    };
    assert_eq!(delivered(ghost_through(33)), Ok(()));
    // Against the wrong FIFO, DeltaFIFO as an informer built it at 1.32, the check fails.
    assert_eq!(
        delivered(ghost_through(32)),
        Err("DeltaFIFO (Replaced, known objects): the Delete yielded []".into())
    );
    // The same function at every version this book models.
    let mut table = String::new();
    for minor in 32..=37 {
        let run = ghost_through(minor);
        table += &format!("1.{minor}  {:<48} {:?}\n", run.fifo, run.pops);
    }
    snap::text("ch03_ghost_by_version", table);
    // book: end ch03_ghost
}

/// Chapter 03, "The version: 1.33, not 1.36": the gate's history from the registry.
pub fn ch03_gate_table() {
    // book: ch03_gate_table
    let mut table = String::from("version maturity  default  locked  informer FIFO\n");
    for minor in 32..=37 {
        let gates = FeatureGates::at_minor(minor).unwrap();
        let gate = gates.spec(Feature::IN_ORDER_INFORMERS).unwrap();
        table += &format!(
            "1.{minor:<6}{:<10}{:<9}{:<8}{}\n",
            maturity(gate.pre_release),
            if gate.default { "on" } else { "off" },
            if gate.lock_to_default { "yes" } else { "no" },
            select_fifo(&gates).describe(),
        );
    }
    snap::text("ch03_gate_table", table);
    // book: end ch03_gate_table
}

/// Chapter 03: `KUBE_FEATURE_InOrderInformers=false` at 1.35 and at 1.36.
pub fn ch03_env_override() {
    // book: ch03_env_override
    let mut runs = Vec::new();
    for minor in [35, 36] {
        let mut gates = FeatureGates::at_minor(minor).unwrap();
        let env = [("KUBE_FEATURE_InOrderInformers", "false")];
        let ((), log) = klog::capture(|| gates.apply_env(env));
        runs.push(EnvOverride {
            version: format!("1.{minor}"),
            env: "KUBE_FEATURE_InOrderInformers=false".into(),
            in_order_informers: gates.enabled(Feature::IN_ORDER_INFORMERS),
            fifo: select_fifo(&gates).describe(),
            log,
        });
    }
    let (v35, v36) = (&runs[0], &runs[1]);
    assert!(!v35.in_order_informers && v35.log.is_empty());
    assert!(v35.fifo.starts_with("DeltaFIFO"));
    assert!(v36.in_order_informers); // the override lost
    assert!(v36.log[0].contains("Could not set feature gate, feature is locked"));
    snap::yaml("ch03_env_override", &runs, vec![]);
    // book: end ch03_env_override
}

// book: ch03_fn_queue_depth
/// `updates` rounds of one update to each of `objects` ConfigMaps, through the FIFO of
/// `1.minor`; then Popped until empty.
pub fn queue_depth(minor: u32, objects: usize, updates: u32) -> DepthReport {
    let choice = select_fifo(&FeatureGates::at_minor(minor).unwrap());
    let fifo = choice.build("*v1.ConfigMap", &Store::new());
    for v in 1..=updates {
        for i in 0..objects {
            fifo.update(cm(&format!("cm-{i}"), Some(v))).unwrap();
        }
    }
    let depth = fifo.len(); // what a dashboard plots as "waiting"
    let (mut pops, mut deltas, mut over) = (0, 0, 0);
    while let Some(popped) = fifo.try_pop(|_, _| Ok::<(), ()>(())) {
        deltas += popped.unwrap().len();
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
// book: end ch03_fn_queue_depth

/// `[Updated a v2, Updated b v2]`: deltas as the recordings of upstream print them.
pub fn deltas(ds: &[Delta<ConfigMap>]) -> String {
    let labels: Vec<String> = ds.iter().map(delta_label).collect();
    format!("[{}]", labels.join(", "))
}

// book: ch03_fn_batches
/// The informer's loop on a RealFIFO in batches: PopBatch until nothing is queued, printing
/// each Pop and whether it went to the batch or to the single-delta function.
pub fn batches(what: &str, fifo: &RealFifo<ConfigMap>) -> String {
    let mut pops = Vec::new();
    loop {
        let got = RefCell::new(String::new());
        let popped = fifo.try_pop_batch(
            |ds: &[Delta<ConfigMap>], _| {
                *got.borrow_mut() = format!("batch {}", deltas(ds));
                Ok::<(), ()>(())
            },
            |d: &Deltas<ConfigMap>, _| {
                *got.borrow_mut() = format!("single {}", deltas(&d.0));
                Ok(())
            },
        );
        match popped {
            None => break,
            Some(r) => pops.push(r.map(|_| got.into_inner()).expect("never fails")),
        }
    }
    let mut text = format!("{what}: {} pops\n", pops.len());
    for (i, p) in pops.iter().enumerate() {
        text += &format!("  pop {}: {p}\n", i + 1);
    }
    text
}

/// The six interleaved events (without resourceVersions) through DeltaFIFO and RealFIFO
/// Popped one at a time, as informers built them at 1.32 and 1.33, and through the atomic
/// RealFIFO the informer builds at 1.`minor`, popped in batches as its loop pops it.
pub fn interleave_popped(minor: u32) -> String {
    let queue = |fifo: &InformerFifo<ConfigMap>| {
        fifo.add(cm("alpha", Some(1))).unwrap();
        fifo.add(cm("beta", Some(1))).unwrap();
        fifo.update(cm("alpha", Some(2))).unwrap();
        fifo.update(cm("beta", Some(2))).unwrap();
        fifo.update(cm("alpha", Some(3))).unwrap();
        fifo.delete(cm("beta", Some(2))).unwrap();
    };
    let mut text = String::new();
    for (old, what) in [(32, "DeltaFIFO Pop"), (33, "RealFIFO Pop")] {
        let choice = select_fifo(&FeatureGates::at_minor(old).unwrap());
        let fifo = choice.build("*v1.ConfigMap", &Store::new());
        queue(&fifo);
        let pops = drain(&fifo);
        text += &format!("{what}: {} pops\n", pops.len());
        for (i, p) in pops.iter().enumerate() {
            text += &format!("  pop {}: [{}]\n", i + 1, p.join(", "));
        }
    }
    let choice = select_fifo(&FeatureGates::at_minor(minor).unwrap());
    let fifo = RealFifo::new(RealFifoOptions {
        atomic_events: choice.atomic_events,
        unlock_while_processing: choice.unlock_while_processing,
        emit_delta_type_bookmark: choice.emit_bookmarks,
        batches_repeat_keys: choice.batches_repeat_keys, // from 1.38 on
        ..RealFifoOptions::default()
    })
    .unwrap();
    queue(&InformerFifo::Real(fifo.clone()));
    text + &batches("atomic RealFIFO PopBatch", &fifo)
}
// book: end ch03_fn_batches

/// Chapter 03, "On 1.38": the six events popped in batches at 1.37 and at 1.38.
pub fn ch03_on_138() {
    // book: ch03_on_138
    let recorded = |minor| ClientGo(minor).recorded("fifo_interleave").unwrap();
    let (v037, v038) = (interleave_popped(37), interleave_popped(38));
    assert_eq!(v037, recorded(37)); // client-go v0.37.2, line for line
    assert_eq!(v038, recorded(38)); // client-go v0.38.0-beta.0, line for line
    // What chapter 03 claims of Pop holds on both: DeltaFIFO 2 Pops, RealFIFO 6, in order.
    let pop_lines = |text: &str| text.lines().take(10).collect::<Vec<_>>().join("\n");
    assert_eq!(pop_lines(&v037), pop_lines(&v038));
    // What moved is the batch: three on 1.37, one on 1.38, the six deltas in the same order.
    assert!(v037.contains("atomic RealFIFO PopBatch: 3 pops\n"));
    assert!(v038.contains("atomic RealFIFO PopBatch: 1 pops\n"));
    snap::text(
        "ch03_on_138",
        format!("client-go 1.37:\n{v037}\nclient-go 1.38:\n{v038}"),
    );
    // book: end ch03_on_138
}

/// Chapter 03, "What broke quietly at 1.33".
pub fn ch03_queue_depth() {
    // book: ch03_queue_depth
    let (old, new) = (queue_depth(32, 3, 10), queue_depth(33, 3, 10));
    assert_eq!((old.deltas, new.deltas), (30, 30)); // the same work arrived
    assert_eq!((old.depth, new.depth), (3, 30)); // a "backlog" ten times larger
    assert_eq!((old.pops, new.pops), (3, 30)); // ten times the Pops, the same 30 handler calls
    snap::yaml("ch03_queue_depth", &[old, new], vec![]);
    // book: end ch03_queue_depth
}

/// Chapter 03, "Where our numbers differ from the essay's": one Pop after the first two events.
pub fn ch03_early_pop() {
    snap::text("ch03_early_pop", early_pop());
}

/// The six events with one Pop after the first two (an informer keeping up for a moment);
/// the chapter's table of the essay's figure takes its count from here.
pub fn early_pop() -> Pops {
    // book: ch03_early_pop
    let choice = select_fifo(&FeatureGates::at_minor(32).unwrap());
    let fifo = choice.build("*v1.ConfigMap", &Store::new());
    fifo.add(cm_at("alpha", 1)).unwrap();
    fifo.add(cm_at("beta", 2)).unwrap();
    // The informer keeps up for a moment: one Pop, after the first two events.
    let first: Deltas<ConfigMap> = fifo.try_pop(|_, _| Ok::<(), ()>(())).unwrap().unwrap();
    let mut pops = vec![first.iter().map(delta_label).collect()];
    fifo.update(cm_at("alpha", 3)).unwrap();
    fifo.update(cm_at("beta", 4)).unwrap();
    fifo.update(cm_at("alpha", 5)).unwrap();
    fifo.delete(cm_at("beta", 6)).unwrap();
    pops.extend(drain(&fifo));
    let run = Pops {
        fifo: choice.describe(),
        pops,
    };
    assert_eq!((run.pops.len(), run.total_deltas()), (3, 6));
    // book: end ch03_early_pop
    run
}
