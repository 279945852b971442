//! Chapter 19's custom resource, `Site` (`demo.controlloop.dev/v1`, namespaced), written as a
//! kube-rs user writes one: a `#[derive(CustomResource)]` spec with a status subresource.
//! Its CustomResourceDefinition is `Site::crd()`, which the tests apply to the server first.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a site should serve.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "demo.controlloop.dev",
    version = "v1",
    kind = "Site",
    namespaced,
    status = "SiteStatus"
)]
pub struct SiteSpec {
    /// The page the site serves, written into the site's ConfigMap.
    pub message: String,
}

/// What the operator last saw: written only through the `/status` subresource.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SiteStatus {
    /// Whether the site's last probe answered.
    pub healthy: bool,
}
