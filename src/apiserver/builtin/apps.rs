//! The `apps/v1` workloads: Deployment, StatefulSet and DaemonSet (kubernetes v1.37.2
//! `pkg/apis/apps/v1/defaults.go`, `pkg/registry/apps/{deployment,statefulset,daemonset}`,
//! `pkg/apis/apps/validation/validation.go`).
//!
//! Each has the status subresource and a generation that bumps with its spec (a Deployment's
//! also with its annotations, which it copies to its ReplicaSets), its kind's defaults and
//! its pod template's (`pod`), an empty status on create (with the counts Go always sends),
//! and the rules a controller meets: a selector that is required, not empty, matches the
//! template's labels and never changes; the template's restart policy `Always`; counts not
//! negative. A DaemonSet carries the `deprecated.daemonset.template.generation` annotation,
//! set to its generation on create and bumped with template changes.
//!
//! # Differences from upstream
//! - The Deployment's and the StatefulSet's `scale` subresource is served (`scale`); the
//!   DaemonSet has none, as upstream.
//! - The StatefulSet's `volumeClaimTemplates` are neither defaulted nor validated, and its
//!   spec's other immutable fields (all but replicas, template, update strategy, ordinals,
//!   persistentVolumeClaimRetentionPolicy and minReadySeconds) are not checked on update.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use serde_json::{Value, json};

use super::super::kinds::Kind;
use super::super::validation::ReasonedCause;
use super::pod;
use super::shared::{
    defaulted, immutable, invalid, non_negative, not_supported, or_default, selector_and_template,
};
use crate::apiserver::scale::ScalePaths;
use crate::apiserver::schema::Cause;
use crate::apiserver::strategy::Hooks;

/// A workload kind of `apps/v1`: status subresource, generation.
fn workload(
    kind: &str,
    plural: &str,
    short: &[&str],
    hooks: &'static Hooks,
    decode: fn(Value) -> Result<Value, String>,
) -> Kind {
    Kind {
        status_subresource: true,
        tracks_generation: true,
        hooks: Some(hooks),
        ..Kind::base("apps", kind, plural, short, decode)
    }
}

pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            scale: Some(Arc::new(ScalePaths::workload())),
            ..workload("Deployment", "deployments", &["deploy"], &DEPLOYMENT, |v| {
                defaulted::<Deployment>(v, deployment_defaults)
            })
        },
        Kind {
            scale: Some(Arc::new(ScalePaths::workload())),
            ..workload(
                "StatefulSet",
                "statefulsets",
                &["sts"],
                &STATEFUL_SET,
                |v| defaulted::<StatefulSet>(v, stateful_set_defaults),
            )
        },
        workload("DaemonSet", "daemonsets", &["ds"], &DAEMON_SET, |v| {
            defaulted::<DaemonSet>(v, daemon_set_defaults)
        }),
    ]
}

/// The spec, made an object if it is not one.
fn spec(v: &mut Value) -> &mut Value {
    if !v["spec"].is_object() {
        v["spec"] = json!({});
    }
    &mut v["spec"]
}

// Deployments.

static DEPLOYMENT: Hooks = Hooks {
    validate: validate_deployment,
    validate_update: selector_kept,
    prepare_for_create: |d| d["status"] = json!({}),
    prepare_for_update: deployment_annotations_bump,
    status_keeps: &["labels"],
    ..Hooks::NONE
};

/// `SetDefaults_Deployment` and the template's.
fn deployment_defaults(d: &mut Value) {
    let s = spec(d);
    or_default(s, "replicas", json!(1));
    or_default(s, "strategy", json!({}));
    or_default(&mut s["strategy"], "type", json!("RollingUpdate"));
    if s["strategy"]["type"] == "RollingUpdate" {
        let st = &mut s["strategy"];
        or_default(st, "rollingUpdate", json!({}));
        or_default(&mut st["rollingUpdate"], "maxUnavailable", json!("25%"));
        or_default(&mut st["rollingUpdate"], "maxSurge", json!("25%"));
    }
    or_default(s, "revisionHistoryLimit", json!(10));
    or_default(s, "progressDeadlineSeconds", json!(600));
    pod::template_defaults(&mut s["template"]);
}

fn validate_deployment(d: &Value, causes: &mut Vec<Cause>) {
    workload_spec(d, causes);
    let s = &d["spec"];
    for f in [
        "spec.replicas",
        "spec.revisionHistoryLimit",
        "spec.minReadySeconds",
    ] {
        non_negative(d, f, causes);
    }
    let ty = &s["strategy"]["type"];
    if !matches!(ty.as_str(), Some("Recreate" | "RollingUpdate")) {
        causes.push(not_supported(
            "spec.strategy.type",
            ty,
            &["Recreate", "RollingUpdate"],
        ));
    }
    if ty == "Recreate" && !s["strategy"]["rollingUpdate"].is_null() {
        causes.push((
            "spec.strategy.rollingUpdate".into(),
            "FieldValueForbidden",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'".into(),
        ));
    }
    let deadline = s["progressDeadlineSeconds"].as_i64();
    let ready = s["minReadySeconds"].as_i64().unwrap_or(0);
    if deadline.is_some_and(|p| p <= ready) {
        causes.push(invalid(
            "spec.progressDeadlineSeconds",
            &s["progressDeadlineSeconds"],
            "must be greater than minReadySeconds",
        ));
    }
}

/// The deployment strategy's generation rule: annotations count as spec (the storage bumps
/// for the spec itself).
fn deployment_annotations_bump(new: &mut Value, old: &Value) {
    let annotations = |v: &Value| {
        v["metadata"]["annotations"]
            .as_object()
            .filter(|m| !m.is_empty())
            .cloned()
    };
    if annotations(new) != annotations(old) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(0);
        new["metadata"]["generation"] = json!(g.saturating_add(1));
    }
}

// StatefulSets.

static STATEFUL_SET: Hooks = Hooks {
    validate: validate_stateful_set,
    validate_update: selector_kept,
    prepare_for_create: |s| s["status"] = json!({"replicas": 0, "availableReplicas": 0}),
    ..Hooks::NONE
};

/// `SetDefaults_StatefulSet` (the `MaxUnavailableStatefulSet` gate on, as at v1.37.2) and the
/// template's; `serviceName` is a plain string in Go, always sent.
fn stateful_set_defaults(v: &mut Value) {
    let s = spec(v);
    or_default(s, "podManagementPolicy", json!("OrderedReady"));
    or_default(s, "updateStrategy", json!({}));
    if s["updateStrategy"]["type"].is_null() {
        s["updateStrategy"]["type"] = json!("RollingUpdate");
        or_default(&mut s["updateStrategy"], "rollingUpdate", json!({}));
    }
    if s["updateStrategy"]["type"] == "RollingUpdate"
        && s["updateStrategy"]["rollingUpdate"].is_object()
    {
        let r = &mut s["updateStrategy"]["rollingUpdate"];
        or_default(r, "partition", json!(0));
        or_default(r, "maxUnavailable", json!(1));
    }
    or_default(s, "persistentVolumeClaimRetentionPolicy", json!({}));
    let p = &mut s["persistentVolumeClaimRetentionPolicy"];
    or_default(p, "whenDeleted", json!("Retain"));
    or_default(p, "whenScaled", json!("Retain"));
    or_default(s, "replicas", json!(1));
    or_default(s, "revisionHistoryLimit", json!(10));
    or_default(s, "serviceName", json!(""));
    pod::template_defaults(&mut s["template"]);
}

fn validate_stateful_set(v: &Value, causes: &mut Vec<Cause>) {
    workload_spec(v, causes);
    for f in ["spec.replicas", "spec.minReadySeconds"] {
        non_negative(v, f, causes);
    }
    let policy = &v["spec"]["podManagementPolicy"];
    if !matches!(policy.as_str(), Some("OrderedReady" | "Parallel")) {
        causes.push(not_supported(
            "spec.podManagementPolicy",
            policy,
            &["OrderedReady", "Parallel"],
        ));
    }
}

// DaemonSets.

static DAEMON_SET: Hooks = Hooks {
    validate: validate_daemon_set,
    validate_update: selector_kept,
    prepare_for_create: daemon_set_create,
    prepare_for_update: daemon_set_update,
    ..Hooks::NONE
};

/// The annotation a DaemonSet's template generation is kept in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// `SetDefaults_DaemonSet` and the template's.
fn daemon_set_defaults(v: &mut Value) {
    let s = spec(v);
    or_default(s, "updateStrategy", json!({}));
    or_default(&mut s["updateStrategy"], "type", json!("RollingUpdate"));
    if s["updateStrategy"]["type"] == "RollingUpdate" {
        let u = &mut s["updateStrategy"];
        or_default(u, "rollingUpdate", json!({}));
        or_default(&mut u["rollingUpdate"], "maxUnavailable", json!(1));
        or_default(&mut u["rollingUpdate"], "maxSurge", json!(0));
    }
    or_default(s, "revisionHistoryLimit", json!(10));
    pod::template_defaults(&mut s["template"]);
}

/// `PrepareForCreate`: an empty status (its four counts always sent), and the template
/// generation annotation at the first generation.
fn daemon_set_create(v: &mut Value) {
    v["status"] = json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                         "desiredNumberScheduled": 0, "numberReady": 0});
    v["metadata"]["annotations"][TEMPLATE_GENERATION] = json!("1");
}

/// `PrepareForUpdate`: a template change bumps the template generation annotation (the
/// storage bumps the generation itself); otherwise the stored one is kept.
fn daemon_set_update(new: &mut Value, old: &Value) {
    let kept = old["metadata"]["annotations"][TEMPLATE_GENERATION].clone();
    if new["spec"]["template"] != old["spec"]["template"] {
        let was: i64 = kept.as_str().and_then(|g| g.parse().ok()).unwrap_or(0);
        new["metadata"]["annotations"][TEMPLATE_GENERATION] =
            json!(was.saturating_add(1).to_string());
    } else if !kept.is_null() {
        new["metadata"]["annotations"][TEMPLATE_GENERATION] = kept;
    }
}

fn validate_daemon_set(v: &Value, causes: &mut Vec<Cause>) {
    workload_spec(v, causes);
    for f in ["spec.revisionHistoryLimit", "spec.minReadySeconds"] {
        non_negative(v, f, causes);
    }
}

// Shared.

/// The rules every apps workload keeps: its selector and template, the template's restart
/// policy `Always`.
fn workload_spec(v: &Value, causes: &mut Vec<Cause>) {
    let s = &v["spec"];
    selector_and_template(s, causes);
    pod::validate_spec(
        &s["template"]["spec"],
        "spec.template.spec",
        &["Always"],
        causes,
    );
}

/// `ValidateDeploymentUpdate` and its siblings: the selector is immutable in apps/v1.
fn selector_kept(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    immutable(new, old, "spec.selector", causes);
}
