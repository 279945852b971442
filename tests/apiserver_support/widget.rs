//! The tests' own custom resource, `Widget` (`lab.controlloop.dev/v1`, namespaced, the status
//! subresource), and `PlainWidget` (the same group, no subresources): the server knows neither
//! until their CustomResourceDefinitions are POSTed to it (`install_widgets`).

use std::borrow::Cow;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a Widget should look like.
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
    /// A free-form attribute.
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
    /// A note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A Widget whose CRD installs no subresources: `status` is an ordinary field. kube's derive
/// always declares the status subresource for a type with a status, so this type implements
/// `kube::Resource` by hand.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlainWidget {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: WidgetSpec,
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

/// The CRDs of `Widget` and of `PlainWidget` (`Widget`'s, renamed, without subresources).
pub fn crds() -> [CustomResourceDefinition; 2] {
    let mut plain = Widget::crd();
    plain.metadata.name = Some("plainwidgets.lab.controlloop.dev".into());
    let names = &mut plain.spec.names;
    names.kind = "PlainWidget".into();
    names.plural = "plainwidgets".into();
    names.singular = Some("plainwidget".into());
    names.short_names = None;
    for v in &mut plain.spec.versions {
        v.subresources = None;
    }
    [Widget::crd(), plain]
}

/// How long after its CRD is established the server holds a create of the new resource, as
/// kube-apiserver's custom resource handler does.
pub const CREATE_HOLD: Duration = Duration::from_secs(2);

/// Whether `crd`'s `Established` condition is `True`.
pub fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
