//! Chapter 16's owner references: one owner ConfigMap and two dependents that name it (with
//! `blockOwnerDeletion`, as controller-runtime's `SetControllerReference` sets them), the owner
//! deleted with each propagation policy, on the embedded server and on a real control plane
//! whose kube-controller-manager runs the garbage collector.
//!
//! Follows kubernetes/kubernetes v1.37.2 `pkg/controller/garbagecollector` and
//! `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` (the `orphan` and
//! `foregroundDeletion` finalizers a delete adds) by running them on the real control plane;
//! the embedded server has no collector, and refuses what only a collector could do.
//!
//! # Invariants
//! 1. Each run starts from none of [`OWNER`] and [`DEPENDENTS`] and creates them afresh;
//!    [`all_policies`] removes them at the end (on a real control plane, they live in
//!    [`crate::lab::rig::ASIDE`]).
//! 2. A run watches until the state settles (the owner gone, and each dependent gone or without
//!    ownerReferences) or [`SETTLE`] passes, polling; the report holds only what was seen, not
//!    when.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, PropagationPolicy};
use serde::Serialize;

/// The owner.
pub const OWNER: &str = "controlloop-owner";
/// Its two dependents.
pub const DEPENDENTS: [&str; 2] = ["controlloop-dependent-a", "controlloop-dependent-b"];
/// How long a run waits for the state to settle: far beyond the collector's usual second on
/// the real control plane; on the embedded server, where nothing collects, the wait runs out.
pub const SETTLE: Duration = Duration::from_secs(30);

/// What one object looked like: `gone`, or kept with its finalizers and owner references.
fn state(cm: Option<&ConfigMap>) -> String {
    let Some(cm) = cm else {
        return "gone".to_owned();
    };
    let m = &cm.metadata;
    let marked = if m.deletion_timestamp.is_some() {
        "marked for deletion, "
    } else {
        ""
    };
    let finalizers = m.finalizers.clone().unwrap_or_default();
    let owners = m.owner_references.as_ref().map_or(0, Vec::len);
    format!("kept, {marked}finalizers {finalizers:?}, {owners} ownerReferences")
}

/// One delete of the owner with one policy, and what followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cascade {
    /// The propagation policy the delete asked for.
    pub policy: &'static str,
    /// The delete's answer: `the object` (it is still there, marked), `a Status` (it is gone),
    /// or the refusal's code and message.
    pub answer: String,
    /// The owner, read right after the delete answered.
    pub owner_at_once: String,
    /// Whether the state settled within [`SETTLE`].
    pub settled: bool,
    /// Every object, when the state settled or the wait ran out.
    pub at_the_end: BTreeMap<&'static str, String>,
}

/// Deletes `name` if it is there (with no policy) and waits until it is gone.
async fn remove(api: &Api<ConfigMap>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut waited = Duration::ZERO;
    while api.get_opt(name).await?.is_some() && waited < SETTLE {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    Ok(())
}

/// Creates the owner and its dependents (invariant 1).
pub async fn create(api: &Api<ConfigMap>) -> Result<(), kube::Error> {
    for name in [OWNER].iter().chain(&DEPENDENTS) {
        remove(api, name).await?;
    }
    let pp = PostParams::default();
    let named = |name: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let owner = api.create(&pp, &named(OWNER)).await?;
    for name in DEPENDENTS {
        let mut dependent = named(name);
        dependent.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: OWNER.into(),
            uid: owner.metadata.uid.clone().unwrap_or_default(),
            block_owner_deletion: Some(true),
            controller: Some(true),
        }]);
        api.create(&pp, &dependent).await?;
    }
    Ok(())
}

/// Every object as it stands.
async fn look(api: &Api<ConfigMap>) -> Result<BTreeMap<&'static str, String>, kube::Error> {
    let mut out = BTreeMap::new();
    for name in [OWNER].into_iter().chain(DEPENDENTS) {
        out.insert(name, state(api.get_opt(name).await?.as_ref()));
    }
    Ok(out)
}

/// Whether the collector has nothing left to do: the owner gone, and every dependent gone or
/// freed of its owner reference.
fn settled(now: &BTreeMap<&'static str, String>) -> bool {
    now.iter().all(|(name, s)| {
        s == "gone"
            || (*name != OWNER && s.ends_with(", 0 ownerReferences") && !s.contains("marked"))
    })
}

/// Creates the owner and its dependents, deletes the owner with `policy`, and watches.
pub async fn cascade(
    api: &Api<ConfigMap>,
    policy: PropagationPolicy,
) -> Result<Cascade, kube::Error> {
    create(api).await?;
    // book: ch16_cascade
    let params = DeleteParams {
        propagation_policy: Some(policy.clone()),
        ..DeleteParams::default()
    };
    let answer = match api.delete(OWNER, &params).await {
        Ok(either) if either.is_left() => "the object".to_owned(), // still there, marked
        Ok(_) => "a Status".to_owned(),                            // gone at once
        Err(kube::Error::Api(s)) => format!("{} {}", s.code, s.message),
        Err(e) => return Err(e),
    };
    // book: end ch16_cascade
    let owner_at_once = state(api.get_opt(OWNER).await?.as_ref());
    let mut waited = Duration::ZERO;
    let mut now = look(api).await?;
    while !settled(&now) && waited < SETTLE {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
        now = look(api).await?;
    }
    Ok(Cascade {
        policy: match policy {
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
            PropagationPolicy::Orphan => "Orphan",
        },
        answer,
        owner_at_once,
        settled: settled(&now),
        at_the_end: now,
    })
}

/// The three policies, one after the other, on one cluster.
pub async fn all_policies(api: &Api<ConfigMap>) -> Result<Vec<Cascade>, kube::Error> {
    let mut out = Vec::new();
    for policy in [
        PropagationPolicy::Background,
        PropagationPolicy::Foreground,
        PropagationPolicy::Orphan,
    ] {
        out.push(cascade(api, policy).await?);
    }
    for name in [OWNER].iter().chain(&DEPENDENTS) {
        remove(api, name).await?; // leave nothing behind (invariant 1)
    }
    Ok(out)
}
