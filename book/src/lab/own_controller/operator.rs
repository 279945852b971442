//! Chapter 19's operator, written the way kube-rs users write one: kube-runtime's
//! `Controller` over `Site`s, owning one ConfigMap per site, a finalizer held through
//! kube-runtime's `finalizer` helper, a status written through the status subresource, and
//! an hourly requeue that probes something no watch reports (the site's health).
//!
//! ```text
//!  Site event ─► reconcile ─► finalizer helper ─► Apply:   the page ConfigMap (owned)
//!  ConfigMap event ──┘                       │             probe the site (1 s)
//!  hourly requeue ───┘                       │             record the checked generation
//!                                            │             status.healthy
//!                                            └─► Cleanup: delete the page ConfigMap
//! ```
//!
//! [`Bug`] names the four mistakes chapter 19's tests are written to catch; an [`Operator`]
//! carries at most one of them.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
    runtime::{
        Controller,
        controller::Action,
        finalizer::{Event, finalizer},
        watcher,
    },
};
use tokio::task::JoinHandle;

use super::site::Site;

/// The finalizer the operator holds on every site.
pub const FINALIZER: &str = "demo.controlloop.dev/cleanup";
/// The annotation where the operator records the generation it last probed.
pub const CHECKED: &str = "demo.controlloop.dev/checked-generation";

/// One mistake an operator can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Bug {
    /// The cleanup treats "the ConfigMap is already gone" (404) as a failure, so the
    /// finalizer is never removed once something else deleted the ConfigMap first.
    NotFoundIsAnError,
    /// A write refused with 409 Conflict is sent again with the fresh resourceVersion and the
    /// content it had: the whole object as the cache held it, over a newer spec.
    OverwriteOnConflict,
    /// The controller is built without `.owns()` on its ConfigMaps.
    NoOwns,
    /// A successful reconcile waits for the next change instead of requeueing.
    NoRequeue,
}

impl Bug {
    /// Every bug, in the order the chapter's tests are written.
    pub const ALL: [Bug; 4] = [
        Bug::NotFoundIsAnError,
        Bug::OverwriteOnConflict,
        Bug::NoOwns,
        Bug::NoRequeue,
    ];
}

/// The operator under test: its timings and at most one [`Bug`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operator {
    /// How often a healthy site is probed again.
    pub probe_every: Duration,
    /// How long a probe takes.
    pub probe_takes: Duration,
    /// The mistake it carries, if any.
    pub bug: Option<Bug>,
}

impl Operator {
    /// The operator as written: a probe every hour, taking a second, no bug.
    pub const CORRECT: Operator = Operator {
        probe_every: Duration::from_secs(3600),
        probe_takes: Duration::from_secs(1),
        bug: None,
    };

    /// The same operator, carrying `bug`.
    pub fn with(bug: Bug) -> Operator {
        Operator {
            bug: Some(bug),
            ..Operator::CORRECT
        }
    }

    /// Whether it carries `bug`.
    pub fn has(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }
}

/// What a site's probe reaches: a stand-in for the site itself, which the test turns off.
#[derive(Debug, Default)]
pub struct Probe {
    down: AtomicBool,
}

impl Probe {
    /// The site stops (or starts) answering.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Whether the site answers.
    pub fn healthy(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The finalizer helper failed (its cause inside).
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// The object has no namespace.
    #[error("a site without a namespace")]
    NoNamespace,
}

/// What every reconcile shares.
pub struct Ctx {
    /// The client the operator runs on.
    pub client: Client,
    /// The operator's timings and bug.
    pub operator: Operator,
    /// The site's health, as its probe sees it.
    pub probe: Arc<Probe>,
}

/// The name of a site's ConfigMap.
pub fn page_name(site: &str) -> String {
    format!("{site}-page")
}

// book: ch19_reconcile
/// One reconcile of one site: kube-runtime's `finalizer` adds the finalizer first, then
/// calls `apply` while the site lives and `cleanup` once it is being deleted.
pub async fn reconcile(site: Arc<Site>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let namespace = site.namespace().ok_or(Error::NoNamespace)?;
    let sites: Api<Site> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&sites, FINALIZER, site, |event| async {
        match event {
            Event::Apply(site) => apply(&site, &sites, &ctx).await,
            Event::Cleanup(site) => cleanup(&site, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Its cleanup: the page goes; a page already gone is a cleanup already done.
pub async fn cleanup(site: &Site, ctx: &Ctx) -> Result<Action, Error> {
    let pages: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &sites_namespace(site));
    match pages
        .delete(&page_name(&site.name_any()), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 && !ctx.operator.has(Bug::NotFoundIsAnError) => {
            Ok(Action::await_change()) // already gone: the cleanup's work is done
        }
        Err(e) => Err(e.into()),
    }
}

/// A failed reconcile is tried again in five seconds.
pub fn error_policy(_site: Arc<Site>, _error: &Error, _ctx: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}
// book: end ch19_reconcile

// book: ch19_apply
/// Its work on a live site: the page, the probe, the checked generation, the status.
pub async fn apply(site: &Site, sites: &Api<Site>, ctx: &Ctx) -> Result<Action, Error> {
    let pages: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &sites_namespace(site));
    let page = page_for(site);
    match pages.get_opt(&page_name(&site.name_any())).await? {
        None => drop(pages.create(&PostParams::default(), &page).await?),
        Some(current) if current.data != page.data => {
            let patch = Patch::Merge(serde_json::json!({ "data": page.data }));
            pages
                .patch(
                    &page_name(&site.name_any()),
                    &PatchParams::default(),
                    &patch,
                )
                .await?;
        }
        Some(_) => {}
    }
    tokio::time::sleep(ctx.operator.probe_takes).await; // the probe: a call to the site
    let generation = site.meta().generation.unwrap_or_default().to_string();
    if site.annotations().get(CHECKED) != Some(&generation) {
        let mut checked = site.clone(); // the whole object, as the cache held it
        checked.annotations_mut().insert(CHECKED.into(), generation);
        let pp = PostParams::default();
        match sites.replace(&site.name_any(), &pp, &checked).await {
            Err(kube::Error::Api(s))
                if s.code == 409 && ctx.operator.has(Bug::OverwriteOnConflict) =>
            {
                let fresh = sites.get(&site.name_any()).await?; // "retry on conflict"
                checked.metadata.resource_version = fresh.metadata.resource_version;
                sites.replace(&site.name_any(), &pp, &checked).await?;
            }
            written => drop(written?),
        }
    }
    let healthy = ctx.probe.healthy();
    if site.status.as_ref().map(|s| s.healthy) != Some(healthy) {
        let status = Patch::Merge(serde_json::json!({ "status": { "healthy": healthy } }));
        sites
            .patch_status(&site.name_any(), &PatchParams::default(), &status)
            .await?;
    }
    Ok(match ctx.operator.has(Bug::NoRequeue) {
        true => Action::await_change(),
        false => Action::requeue(ctx.operator.probe_every),
    })
}
// book: end ch19_apply

/// The site's namespace.
pub fn sites_namespace(site: &Site) -> String {
    site.namespace().unwrap_or_default()
}

/// The ConfigMap a site owns: its page, with an owner reference to the site.
pub fn page_for(site: &Site) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(page_name(&site.name_any())),
            owner_references: site.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        data: Some([("message".to_string(), site.spec.message.clone())].into()),
        ..ConfigMap::default()
    }
}

// book: ch19_run
/// Starts the operator on `client`, over the sites and pages of `namespace`.
pub fn run(
    client: Client,
    namespace: &str,
    operator: Operator,
    probe: Arc<Probe>,
) -> JoinHandle<()> {
    let sites: Api<Site> = Api::namespaced(client.clone(), namespace);
    let pages: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let mut controller = Controller::new(sites, watcher::Config::default());
    if !operator.has(Bug::NoOwns) {
        controller = controller.owns(pages, watcher::Config::default());
    }
    let ctx = Arc::new(Ctx {
        client,
        operator,
        probe,
    });
    tokio::spawn(
        controller
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {}),
    )
}
// book: end ch19_run
