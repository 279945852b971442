//! The built-in kinds operators own, beyond the server's first five: each kind's decoding
//! (k8s-openapi's type, with the defaults kube-apiserver applies when it decodes a body) and
//! its strategy's hooks (`PrepareForCreate`, `PrepareForUpdate`, `Validate`,
//! `ValidateUpdate`), one file per API group.
//!
//! Follows kubernetes v1.37.2: defaults from `pkg/apis/core/v1/defaults.go`,
//! `pkg/apis/apps/v1/defaults.go` and `pkg/apis/batch/v1/defaults.go` (and the declarative
//! `+default` tags of k8s.io/api v0.37.2), strategies from `pkg/registry/core/{secret,
//! serviceaccount,service,pod,event}`, `pkg/registry/apps/{deployment,statefulset,daemonset}`,
//! `pkg/registry/batch/job` and `pkg/registry/events`, validation from
//! `pkg/apis/{core,apps,batch}/validation`. Nothing runs these kinds' controllers, as in
//! envtest: a Deployment gets no ReplicaSet, a Job no Pod, a Pod no node.
//!
//! | kind | group | status | generation | rules kept |
//! |---|---|---|---|---|
//! | Secret | core | — | — | `stringData` merged into `data`, `type` Opaque, keys, 1 MiB, per-type keys, `type` immutable, `immutable` |
//! | ServiceAccount | core | — | — | object metadata |
//! | Service | core | yes | — | defaults, a cluster IP allocated, `clusterIP` immutable |
//! | Pod | core | yes | yes | pod-spec defaults, admission's priority and tolerations, the spec immutable but for images |
//! | Event | core, `events.k8s.io` | — | — | the namespace of the object it is about |
//! | Deployment, StatefulSet, DaemonSet | apps | yes | yes | defaults, the selector matches the template and is immutable |
//! | Job | batch | yes | yes | defaults, the generated selector and labels, the selector and template immutable |
//!
//! Every value a defaulter reads has been through the kind's k8s-openapi type first, so it
//! has the type's shape.
//!
//! # Differences from upstream
//! - The status subresource takes the body's status and metadata (a Deployment's labels
//!   excepted), as upstream's status strategies do, but does not validate the status
//!   (non-negative counts, a ClusterIP service's load balancer ingress): such a status is
//!   stored where kube-apiserver answers 422.
//! - Validation covers what a controller commonly meets (see each file); the rest of
//!   upstream's field validation (resource quantities, probes, volumes' sources, affinity)
//!   is not done: such an object is stored where kube-apiserver answers 422.
//! - A core/v1 Event and an `events.k8s.io/v1` Event are two resources here; upstream they
//!   share one storage, so an event written through one group is read through the other.
//! - Strategic merge patch is 415 for these kinds (kube-apiserver serves it): JSON merge and
//!   JSON patches work.
//! - Protobuf bodies are 415 for these kinds, saying so (the server reads protobuf for
//!   ConfigMaps and Namespaces only): kubectl's generators (`kubectl create secret`,
//!   `create deployment`, `create serviceaccount`) send protobuf and are refused;
//!   `kubectl create -f` and `kubectl apply -f` send JSON and work.

mod apps;
mod batch;
mod core;
mod events;
mod pod;
mod shared;

use super::kinds::Kind;

/// The kinds of this module, in the order they follow the first built-in kinds.
pub(crate) fn kinds() -> Vec<Kind> {
    let mut out = core::kinds();
    out.extend(apps::kinds());
    out.extend(batch::kinds());
    out.extend(events::kinds());
    out
}
