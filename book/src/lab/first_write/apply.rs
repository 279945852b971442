//! Chapter 17's server-side apply on a real kube-apiserver: two field managers, the conflict
//! when the second sets a field the first owns, `force`, and a field removed because its only
//! manager stopped applying it.
//!
//! Runs on the real control plane (`cargo run -- cluster up`); the embedded server refuses
//! every apply (415, chapter 17's block above this one), so there is nothing to run there.
//! Follows kubernetes/kubernetes v1.37.2 `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager`
//! and sigs.k8s.io/structured-merge-diff (the conflict's Status and its causes) by running them:
//! every answer below is kube-apiserver's own.
//!
//! # Invariants
//! 1. Each run starts from no object: it deletes [`OBJECT`] first and waits until it is gone,
//!    and deletes it again at the end (on a real control plane, in [`crate::lab::rig::ASIDE`]).
//! 2. The steps run in order on one client, each on the answer of the one before.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde::Serialize;
use serde_json::{Value, json};

/// The ConfigMap the managers apply to (its own name: no other run of the real tier touches it).
pub const OBJECT: &str = "controlloop-apply";

/// One apply and what the server made of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The field manager that applied.
    pub manager: &'static str,
    /// The data it applied (its whole intent: apply sends every field the manager wants).
    pub applied: BTreeMap<String, String>,
    /// Whether it applied with `force`.
    pub force: bool,
    /// 200 on success, else the Status's code.
    pub code: u16,
    /// The Status's message, on a refusal.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The Status's causes, on a refusal: `field: message`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
    /// The object's data after the step.
    pub data: BTreeMap<String, String>,
    /// Who owns each data key after the step (from `managedFields`), `key: manager (operation)`.
    pub owners: BTreeMap<String, Vec<String>>,
}

/// A manager's intent: the ConfigMap with only `data`.
fn intent(data: &[(&str, &str)]) -> Value {
    let data: BTreeMap<&str, &str> = data.iter().copied().collect();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": OBJECT}, // the namespace is the Api's
        "data": data,
    })
}

/// The data keys each manager owns, read from the object's `managedFields`.
fn owners(cm: &ConfigMap) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in cm.metadata.managed_fields.iter().flatten() {
        let fields = entry.fields_v1.as_ref().map(|f| &f.0);
        let Some(Value::Object(data)) = fields.and_then(|f| f.get("f:data")) else {
            continue;
        };
        for key in data.keys().filter_map(|k| k.strip_prefix("f:")) {
            out.entry(key.to_owned()).or_default().push(format!(
                "{} ({})",
                entry.manager.as_deref().unwrap_or(""),
                entry.operation.as_deref().unwrap_or("")
            ));
        }
    }
    out
}

/// One apply by `manager` of `data`, and the object as it stands after.
pub async fn apply(
    api: &Api<ConfigMap>,
    manager: &'static str,
    data: &[(&str, &str)],
    force: bool,
) -> Result<Step, kube::Error> {
    let mut params = PatchParams::apply(manager);
    params.force = force;
    let answer = api
        .patch(OBJECT, &params, &Patch::Apply(intent(data)))
        .await;
    let (code, message, causes) = match answer {
        Ok(_) => (200, String::new(), Vec::new()),
        Err(kube::Error::Api(s)) => {
            let causes = s.details.iter().flat_map(|d| &d.causes);
            let causes = causes.map(|c| format!("{}: {}", c.field, c.message));
            (s.code, s.message.clone(), causes.collect())
        }
        Err(e) => return Err(e),
    };
    let now = api.get(OBJECT).await?;
    let owners = owners(&now);
    Ok(Step {
        manager,
        applied: data
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        force,
        code,
        message,
        causes,
        data: now.data.unwrap_or_default(),
        owners,
    })
}

/// Deletes [`OBJECT`] if it is there, and waits until it is gone (invariant 1).
pub async fn fresh(api: &Api<ConfigMap>) -> Result<(), kube::Error> {
    match api.delete(OBJECT, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    while api.get_opt(OBJECT).await?.is_some() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The two managers' run, in order. Chapter 17 shows this body.
pub async fn managers(api: &Api<ConfigMap>) -> Result<Vec<Step>, kube::Error> {
    fresh(api).await?;
    // book: ch17_managers
    let steps = vec![
        apply(api, "alice", &[("color", "red"), ("size", "1")], false).await?, // creates it
        apply(api, "bob", &[("color", "blue")], false).await?, // alice owns color: 409
        apply(api, "bob", &[("color", "blue"), ("shape", "round")], true).await?, // forced
        apply(api, "alice", &[("color", "red"), ("size", "3")], false).await?, // now bob owns it
        apply(api, "alice", &[("size", "2")], false).await?,   // alice gives color up
        apply(api, "bob", &[("color", "blue")], false).await?, // bob stops applying shape
    ];
    // book: end ch17_managers
    fresh(api).await?; // leave nothing behind (invariant 1)
    Ok(steps)
}
