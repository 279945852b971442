//! The book's custom resource, `Widget` (`lab.controlloop.dev/v1`, namespaced), and its
//! CustomResourceDefinitions, installed on a cluster as a user installs them.
//!
//! This is the book's own Kubernetes type: the library knows nothing of it. Controllers in the
//! chapters reconcile it through `kube::Api<Widget>`, and every cluster they run on serves it
//! because its CustomResourceDefinition was POSTed there first ([`install_widgets`]): the
//! embedded API server serves it exactly as a real cluster where `Widget::crd()` is installed.
//!
//! The resource has the status subresource, so it follows the rules a real API server applies
//! to such a CRD:
//! - `metadata.generation` starts at 1 and increments only when something outside `metadata`
//!   and `status` changes (in practice: the spec);
//! - writes to the main endpoint ignore `status`; writes to `/status` change only `status` and
//!   never bump the generation.
//!
//! [`PlainWidget`] is the same resource without the status subresource, to show what that
//! changes; its CRD is [`plain_widget_crd`].
//!
//! ```
//! use controlloop_book::lab::rig::{Widget, WidgetSpec};
//! use kube::{CustomResourceExt, Resource};
//!
//! let w = Widget::new("blue", WidgetSpec { replicas: 3, color: Some("blue".into()) });
//! assert_eq!(Widget::api_version(&()), "lab.controlloop.dev/v1");
//! assert_eq!(Widget::plural(&()), "widgets");
//! assert_eq!(w.spec.replicas, 3);
//! assert!(Widget::crd().spec.versions[0].subresources.is_some());
//! ```

use std::{borrow::Cow, time::Duration};

use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    CustomResource, CustomResourceExt,
    api::{Api, PostParams},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a Widget should look like: the desired state a controller works towards.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "lab.controlloop.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd"
)]
pub struct WidgetSpec {
    /// How many copies the widget should have.
    pub replicas: i32,
    /// A free-form attribute, so that spec changes need not change the replica count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

/// What a controller last observed: written only through the `/status` subresource.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// How many copies are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// A human-readable note from the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A Widget whose CustomResourceDefinition ([`plain_widget_crd`]) installs **no**
/// subresources (`lab.controlloop.dev/v1`, kind `PlainWidget`, namespaced): the same spec and
/// status, but `status` is an ordinary field, written through the main endpoint like the spec.
///
/// It exists to show what the status subresource changes. An API server applies its rules
/// for such a CRD (apiextensions-apiserver v0.36.3, `pkg/registry/customresource/strategy.go`,
/// `PrepareForUpdate`): any change outside `metadata` bumps `metadata.generation`, so a status
/// write does too, and there is no `/status` endpoint (a request to it is a 404).
///
/// kube's `CustomResource` derive always declares the status subresource for a type with a
/// status, so this type implements [`kube::Resource`] by hand.
///
/// ```
/// use controlloop_book::lab::rig::{PlainWidget, WidgetSpec};
/// use kube::Resource;
///
/// let w = PlainWidget::new("p", WidgetSpec { replicas: 1, color: None });
/// assert_eq!(PlainWidget::plural(&()), "plainwidgets");
/// assert_eq!(w.api_version, "lab.controlloop.dev/v1");
/// ```
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlainWidget {
    /// `lab.controlloop.dev/v1`.
    pub api_version: String,
    /// `PlainWidget`.
    pub kind: String,
    /// The object's metadata.
    pub metadata: ObjectMeta,
    /// What the widget should look like.
    pub spec: WidgetSpec,
    /// What a controller last observed: an ordinary field here, not a subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WidgetStatus>,
}

impl PlainWidget {
    /// A plain widget called `name`, without namespace or status.
    pub fn new(name: &str, spec: WidgetSpec) -> Self {
        PlainWidget {
            api_version: "lab.controlloop.dev/v1".into(),
            kind: "PlainWidget".into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }
}

impl kube::Resource for PlainWidget {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "PlainWidget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "lab.controlloop.dev".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "plainwidgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The CRD of [`PlainWidget`]: `Widget`'s, renamed, without subresources.
///
/// ```
/// use controlloop_book::lab::rig::widget::plain_widget_crd;
///
/// let crd = plain_widget_crd();
/// assert_eq!(crd.metadata.name.as_deref(), Some("plainwidgets.lab.controlloop.dev"));
/// assert!(crd.spec.versions.iter().all(|v| v.subresources.is_none()));
/// ```
pub fn plain_widget_crd() -> CustomResourceDefinition {
    let mut crd = Widget::crd();
    crd.metadata.name = Some("plainwidgets.lab.controlloop.dev".into());
    let names = &mut crd.spec.names;
    names.kind = "PlainWidget".into();
    names.plural = "plainwidgets".into();
    names.singular = Some("plainwidget".into());
    names.short_names = None;
    for v in &mut crd.spec.versions {
        v.subresources = None;
    }
    crd
}

/// The book's two CustomResourceDefinitions: [`Widget`]'s and [`PlainWidget`]'s.
pub fn crds() -> [CustomResourceDefinition; 2] {
    [Widget::crd(), plain_widget_crd()]
}

/// How long [`install_widgets`] waits for a CRD to be established.
pub const ESTABLISH_LIMIT: Duration = Duration::from_secs(30);

/// How long after its CRD is established an API server holds a create of the new resource
/// (kube-apiserver's custom resource handler: two seconds, for the other servers of a highly
/// available control plane to catch up); [`install_widgets`] waits it out.
pub const CREATE_HOLD: Duration = Duration::from_secs(2);

/// Installs the book's CRDs ([`crds`]) on the cluster of `client` as a user does: a POST of
/// each (one that exists already is kept), then a wait, polling every 100 ms of the runtime's
/// clock for at most [`ESTABLISH_LIMIT`], until each is `Established`, then [`CREATE_HOLD`], so
/// that the first create of a widget is answered at once.
///
/// ```
/// # controlloop_book::lab::rig::paused(async {
/// use controlloop::apiserver::{Cluster, ServerOptions};
/// use controlloop_book::lab::rig::{Widget, WidgetSpec, widget::install_widgets};
/// use kube::api::{Api, PostParams};
///
/// let cluster = Cluster::new(ServerOptions::default());
/// install_widgets(&cluster.in_process_client()).await.unwrap();
/// let widgets: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
/// let w = Widget::new("w", WidgetSpec { replicas: 1, color: None });
/// let w = widgets.create(&PostParams::default(), &w).await.unwrap();
/// assert_eq!(w.metadata.generation, Some(1));
/// # });
/// ```
pub async fn install_widgets(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for crd in crds() {
        names.push(crd.metadata.name.clone().unwrap_or_default());
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    for name in &names {
        let deadline = tokio::time::Instant::now() + ESTABLISH_LIMIT;
        while !established(&api.get(name).await?) {
            if tokio::time::Instant::now() > deadline {
                return Err(kube::Error::Service(
                    format!("CRD {name} not established within {ESTABLISH_LIMIT:?}").into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(CREATE_HOLD).await;
    Ok(())
}

/// Whether `crd`'s `Established` condition is `True`.
fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
