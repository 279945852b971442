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
