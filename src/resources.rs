//! The book's shared custom resource, `Widget` (`lab.controlloop.dev/v1`, namespaced).
//!
//! This is a Kubernetes type, not server code: the embedded API server serves it, and
//! controllers in later chapters reconcile it through `kube::Api<Widget>`, exactly as they
//! would against a real cluster where its CustomResourceDefinition is installed
//! (`Widget::crd()` prints one).
//!
//! The resource has the status subresource, so it follows the rules a real API server applies
//! to such a CRD:
//! - `metadata.generation` starts at 1 and increments only when something outside `metadata`
//!   and `status` changes (in practice: the spec);
//! - writes to the main endpoint ignore `status`; writes to `/status` change only `status` and
//!   never bump the generation.
//!
//! [`PlainWidget`] is the same resource without the status subresource, to show what that
//! changes.
//!
//! ```
//! use controlloop::resources::{Widget, WidgetSpec};
//! use kube::{CustomResourceExt, Resource};
//!
//! let w = Widget::new("blue", WidgetSpec { replicas: 3, color: Some("blue".into()) });
//! assert_eq!(Widget::api_version(&()), "lab.controlloop.dev/v1");
//! assert_eq!(Widget::plural(&()), "widgets");
//! assert_eq!(w.spec.replicas, 3);
//! assert!(Widget::crd().spec.versions[0].subresources.is_some());
//! ```

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResource;
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

/// A Widget whose CustomResourceDefinition installs **no** subresources
/// (`lab.controlloop.dev/v1`, kind `PlainWidget`, namespaced): the same spec and status, but
/// `status` is an ordinary field, written through the main endpoint like the spec.
///
/// It exists to show what the status subresource changes. The embedded server applies the
/// rules a real API server applies to such a CRD (apiextensions-apiserver v0.36.3,
/// `pkg/registry/customresource/strategy.go`, `PrepareForUpdate`): any change outside
/// `metadata` bumps `metadata.generation`, so a status write does too, and there is no
/// `/status` endpoint (a request to it is a 404).
///
/// kube's `CustomResource` derive always declares the status subresource for a type with a
/// status, so this type implements [`kube::Resource`] by hand.
///
/// ```
/// use controlloop::resources::{PlainWidget, WidgetSpec};
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
