//! Chapter 08's generation experiments: which writes move `metadata.generation` with and
//! without the status subresource, and what that does to a controller that records
//! `status.observedGeneration`.
//!
//! Follows the API server's rules for custom resources (apiextensions-apiserver v0.36.3,
//! `pkg/registry/customresource/strategy.go`, `PrepareForUpdate`: any change outside
//! `metadata` bumps the generation, and with the status subresource the main endpoint keeps
//! the stored status; apiserver v0.36.3, `pkg/registry/generic/registry/store.go`,
//! `markAsDeleting`: setting `deletionTimestamp` bumps it once). The embedded server serves
//! [`Widget`] with the subresource and [`PlainWidget`] without it.
//!
//! Everything runs under tokio's paused clock against the embedded server in-process: every
//! count is exact.

use std::{
    fmt::{Debug, Write as _},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::{ENABLED, NAMESPACE, WORK};
use crate::lab::rig::{self, PlainWidget, Widget, WidgetSpec};
use controlloop::{
    cache::{InformerOptions, SharedIndexInformer},
    controller::{Context, Controller, ReconcileError, ReconcileResult, Request},
};

/// A finalizer that holds a deleted object, so that its marking can be read back.
pub const HOLD: &str = "lab.controlloop.dev/hold";

/// What these experiments need of a widget kind.
pub trait Observed:
    kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
    /// Whether the kind has the status subresource.
    const STATUS_SUBRESOURCE: bool;
    /// A new object called `name`, one replica, no status.
    fn named(name: &str) -> Self;
    /// `status.observedGeneration`.
    fn observed_generation(&self) -> Option<i64>;
}

impl Observed for Widget {
    const STATUS_SUBRESOURCE: bool = true;
    fn named(name: &str) -> Self {
        Widget::new(name, spec())
    }
    fn observed_generation(&self) -> Option<i64> {
        self.status.as_ref()?.observed_generation
    }
}

impl Observed for PlainWidget {
    const STATUS_SUBRESOURCE: bool = false;
    fn named(name: &str) -> Self {
        PlainWidget::new(name, spec())
    }
    fn observed_generation(&self) -> Option<i64> {
        self.status.as_ref()?.observed_generation
    }
}

fn spec() -> WidgetSpec {
    WidgetSpec {
        replicas: 1,
        color: Some("red".into()),
    }
}

/// Writes `status` the only way the kind allows: through `/status` with the subresource,
/// through the main endpoint without it.
// book: ch08_write_status
pub async fn write_status<K: Observed>(
    api: &Api<K>,
    name: &str,
    status: Value,
) -> Result<K, kube::Error> {
    let (patch, params) = (
        Patch::Merge(json!({ "status": status })),
        PatchParams::default(),
    );
    if K::STATUS_SUBRESOURCE {
        api.patch_status(name, &params, &patch).await
    } else {
        api.patch(name, &params, &patch).await
    }
}
// book: end ch08_write_status

/// The steps of [`generation_steps`], in order.
pub const STEPS: [&str; 5] = [
    "create",
    "a spec change",
    "a status write",
    "an annotation change",
    "delete (a finalizer holds it)",
];

/// Writes one object of kind `K` through [`STEPS`] and reads `metadata.generation` after each.
// book: ch08_generation_steps
pub async fn generation_steps<K: Observed>(api: &Api<K>) -> Result<Vec<Option<i64>>, kube::Error> {
    let (name, params) = ("g", PatchParams::default());
    let mut object = K::named(name);
    object.meta_mut().finalizers = Some(vec![HOLD.into()]); // a deletion waits for it
    let created = api.create(&PostParams::default(), &object).await?;
    let mut generations = vec![created.meta().generation];
    let spec = json!({ "spec": { "color": "green" } });
    let changed = api.patch(name, &params, &Patch::Merge(&spec)).await?;
    generations.push(changed.meta().generation);
    let status = json!({ "observedGeneration": 2, "message": "seen" });
    generations.push(write_status(api, name, status).await?.meta().generation);
    let annotation = json!({ "metadata": { "annotations": { ENABLED: "true" } } });
    let annotated = api.patch(name, &params, &Patch::Merge(&annotation)).await?;
    generations.push(annotated.meta().generation);
    api.delete(name, &DeleteParams::default()).await?; // sets deletionTimestamp only
    generations.push(api.get(name).await?.meta().generation);
    Ok(generations)
}
// book: end ch08_generation_steps

/// The generation after each of [`STEPS`], for a kind with the status subresource and for
/// one without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// [`Widget`], with `/status`.
    pub with_status: Vec<Option<i64>>,
    /// [`PlainWidget`], without.
    pub without_status: Vec<Option<i64>>,
}

/// Runs [`generation_steps`] for both kinds on one embedded server.
pub fn rules() -> Rules {
    crate::lab::rig::paused(async {
        let client = rig::widget_cluster().await.in_process_client();
        let (widgets, plain) = (
            Api::namespaced(client.clone(), NAMESPACE),
            Api::namespaced(client, NAMESPACE),
        );
        Rules {
            with_status: generation_steps::<Widget>(&widgets)
                .await
                .expect("the steps on a Widget"),
            without_status: generation_steps::<PlainWidget>(&plain)
                .await
                .expect("the steps on a PlainWidget"),
        }
    })
}

/// The rules as a table, one row per step.
pub fn rules_table(r: &Rules) -> String {
    let show = |g: Option<i64>| g.map_or("none".into(), |g| g.to_string());
    let mut out = format!(
        "{:<30} {:>22} {:>25}\n",
        "generation after", "Widget (with /status)", "PlainWidget (no /status)"
    );
    for (i, step) in STEPS.iter().enumerate() {
        let _ = writeln!(
            out,
            "{step:<30} {:>22} {:>25}",
            show(r.with_status[i]),
            show(r.without_status[i])
        );
    }
    out
}

/// Checks the rules chapter 08 states. Panics on the first that fails.
pub fn check_rules(r: &Rules) {
    let step =
        |g: &[Option<i64>], i: usize| g[i].unwrap_or_default() - g[i - 1].unwrap_or_default();
    for g in [&r.with_status, &r.without_status] {
        assert_eq!(g[0], Some(1), "a created object starts at generation 1");
        assert_eq!(step(g, 1), 1, "a spec change bumps the generation");
        assert_eq!(step(g, 3), 0, "an annotation change bumps no generation");
        assert_eq!(
            step(g, 4),
            1,
            "setting deletionTimestamp bumps the generation"
        );
    }
    assert_eq!(
        step(&r.with_status, 2),
        0,
        "with /status, a status write bumps no generation"
    );
    assert_eq!(
        step(&r.without_status, 2),
        1,
        "without /status, a status write bumps the generation"
    );
}

/// What a controller that records `observedGeneration` did in [`LOOP_FOR`] of virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loop {
    /// Status writes it made.
    pub status_writes: u64,
    /// `metadata.generation` at the end.
    pub generation: Option<i64>,
    /// `status.observedGeneration` at the end.
    pub observed_generation: Option<i64>,
}

/// How long [`observe_generation`] lets its controller run.
pub const LOOP_FOR: Duration = Duration::from_secs(2);

/// Runs, for [`LOOP_FOR`], a controller whose reconciler records the generation it saw in
/// `status.observedGeneration`, against one object of kind `K`; reports what it wrote.
// book: ch08_observe
pub async fn observe_generation<K: Observed>(client: kube::Client) -> Loop {
    let api: Api<K> = Api::namespaced(client, NAMESPACE);
    api.create(&PostParams::default(), &K::named("o"))
        .await
        .expect("a fresh object");
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let writes = Arc::new(AtomicU64::new(0));
    let (counted, writer) = (writes.clone(), api.clone());
    let controller = Controller::builder("observer") // no predicate
        .build(&informer, move |request: Request, ctx: Context<K>| {
            let (api, writes) = (writer.clone(), counted.clone());
            async move {
                let Some(object) = ctx.get(&request) else {
                    return Ok(ReconcileResult::done());
                };
                let generation = object.meta().generation;
                if object.observed_generation() == generation {
                    return Ok(ReconcileResult::done()); // up to date: nothing to write
                }
                tokio::time::sleep(WORK).await; // the reconcile's own work
                let status = json!({ "observedGeneration": generation });
                write_status(&api, &request.name, status)
                    .await
                    .map_err(ReconcileError::retry)?;
                writes.fetch_add(1, Ordering::SeqCst);
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds");
    let (c, i) = (controller.clone(), informer.clone());
    let tasks = [
        tokio::spawn(async move { drop(c.run(futures::future::pending()).await) }),
        tokio::spawn(async move { i.run(futures::future::pending()).await }),
    ];
    tokio::time::sleep(LOOP_FOR).await;
    controller.shutdown();
    tasks.iter().for_each(|t| t.abort());
    let object = api.get("o").await.expect("reading the object back");
    Loop {
        status_writes: writes.load(Ordering::SeqCst),
        generation: object.meta().generation,
        observed_generation: object.observed_generation(),
    }
}
// book: end ch08_observe

/// [`observe_generation`] on a [`Widget`] and on a [`PlainWidget`], each on its own server.
pub fn loops() -> [Loop; 2] {
    crate::lab::rig::paused(async {
        let client = || async { rig::widget_cluster().await.in_process_client() };
        let with = observe_generation::<Widget>(client().await).await;
        [
            with,
            observe_generation::<PlainWidget>(client().await).await,
        ]
    })
}

/// The two loops as text.
pub fn loops_text(l: &[Loop; 2]) -> String {
    let show = |g: Option<i64>| g.map_or("none".into(), |g| g.to_string());
    let mut out = format!(
        "a controller that records observedGeneration, {} s of virtual time:\n",
        LOOP_FOR.as_secs()
    );
    for (name, l) in [
        ("Widget (with /status)", l[0]),
        ("PlainWidget (no /status)", l[1]),
    ] {
        let _ = writeln!(
            out,
            "  {name:<25} status writes {:>3}, generation {:>3}, observedGeneration {:>3}",
            l.status_writes,
            show(l.generation),
            show(l.observed_generation)
        );
    }
    out
}

/// Checks the loop claims: with `/status` one write catches up and the controller goes quiet;
/// without it every write bumps the generation it records, so it never catches up.
pub fn check_loops(l: &[Loop; 2]) {
    let [with, without] = l;
    assert_eq!(with.status_writes, 1, "with /status: one write, then quiet");
    assert_eq!(
        with.observed_generation, with.generation,
        "with /status: caught up"
    );
    assert!(
        without.status_writes > 5,
        "without /status: the controller keeps writing ({} writes)",
        without.status_writes
    );
    assert_eq!(
        without.generation.map(|g| g - without.status_writes as i64),
        Some(1),
        "without /status: each status write bumped the generation once"
    );
    assert_ne!(
        without.observed_generation, without.generation,
        "without /status: never caught up"
    );
}
