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

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::kinds::Kind;
use super::schema::Cause;
use super::validation::ReasonedCause;

/// A kind's strategy, beyond what every kind does.
#[derive(Debug)]
pub(crate) struct Hooks {
    /// `Validate` of the whole object, after its metadata's rules (on create and on update).
    pub validate: fn(&Value, &mut Vec<Cause>),
    /// `ValidateUpdate`: the rules between the stored object (second) and the new one.
    pub validate_update: fn(&Value, &Value, &mut Vec<ReasonedCause>),
    /// `PrepareForCreate`, once the object has its name and uid.
    pub prepare_for_create: fn(&mut Value),
    /// `PrepareForUpdate` on the main endpoint, after the stored status is put back.
    pub prepare_for_update: fn(&mut Value, &Value),
    /// The metadata fields the status strategy keeps as stored (a Deployment's labels); the
    /// rest of the metadata a client may write comes from the body of a status write.
    pub status_keeps: &'static [&'static str],
    /// `ValidateUpdate` reports the update rules before the object's own (a Secret's
    /// `ValidateSecretUpdate`), rather than after them (a Deployment's spec, then its
    /// selector).
    pub update_rules_first: bool,
}

fn no_causes(_: &Value, _: &mut Vec<Cause>) {}
fn no_update_causes(_: &Value, _: &Value, _: &mut Vec<ReasonedCause>) {}
fn nothing(_: &mut Value) {}
fn nothing_on_update(_: &mut Value, _: &Value) {}

impl Hooks {
    /// A strategy with nothing of its own.
    pub const NONE: Hooks = Hooks {
        validate: no_causes,
        validate_update: no_update_causes,
        prepare_for_create: nothing,
        prepare_for_update: nothing_on_update,
        status_keeps: &[],
        update_rules_first: false,
    };
}

/// Metadata the server owns: never taken from a body.
const SERVER_OWNED: [&str; 8] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The stored object `old` with `body`'s status (none if the body has none).
pub(crate) fn with_status(body: &Value, old: &Value) -> Value {
    let mut obj = old.clone();
    match body.get("status") {
        Some(s) => obj["status"] = s.clone(),
        None => {
            obj.as_object_mut().map(|m| m.remove("status"));
        }
    }
    obj
}

/// A status write as these kinds' status strategies make it (`PrepareForUpdate` of
/// `*StatusStrategy`): the stored object with the body's status, and the body's metadata
/// but for what the server owns and what the strategy keeps (`kept`).
pub(crate) fn status_write(body: &Value, old: &Value, kept: &[&str]) -> Value {
    let mut obj = with_status(body, old);
    let mut meta = body["metadata"].clone();
    if !meta.is_object() {
        meta = json!({});
    }
    for f in SERVER_OWNED.iter().chain(kept) {
        match old["metadata"].get(*f) {
            Some(v) => meta[*f] = v.clone(),
            None => {
                meta.as_object_mut().map(|m| m.remove(*f));
            }
        }
    }
    obj["metadata"] = meta;
    obj
}

/// The kinds of this module, in the order they follow the first built-in kinds.
pub(crate) fn kinds() -> Vec<Kind> {
    let mut out = core::kinds();
    out.extend(apps::kinds());
    out.extend(batch::kinds());
    out.extend(events::kinds());
    out
}

/// Decodes `v` as `T` and encodes it again (unknown fields dropped, the type's shape kept),
/// then applies `defaults` to the result (Go's decoder applies the registered defaulters to
/// every body it decodes).
fn defaulted<T: Serialize + DeserializeOwned>(
    v: Value,
    defaults: fn(&mut Value),
) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let mut v = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    defaults(&mut v);
    Ok(v)
}

/// Sets `v[key]` to `value` unless it holds a value already (a defaulter's `if x == nil`).
fn or_default(v: &mut Value, key: &str, value: Value) {
    if v.get(key).is_none_or(Value::is_null)
        && let Some(m) = v.as_object_mut()
    {
        m.insert(key.to_owned(), value);
    }
}

/// Each item of the list `v[key]`.
fn each<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// A value as upstream's field errors print it: JSON.
fn shown(v: &Value) -> String {
    v.to_string()
}

/// `field.Required`.
fn required(field: impl Into<String>) -> Cause {
    (field.into(), "FieldValueRequired", "Required value".into())
}

/// `field.Invalid`.
fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Cause {
    (
        field.into(),
        "FieldValueInvalid",
        format!("Invalid value: {}: {why}", shown(value)),
    )
}

/// `field.NotSupported`.
fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    (
        field.into(),
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {}: supported values: {}",
            shown(value),
            list.join(", ")
        ),
    )
}

/// `ValidateImmutableField`: `field` of `new` is `old`'s.
fn immutable(new: &Value, old: &Value, field: &'static str, causes: &mut Vec<ReasonedCause>) {
    let at = |v: &Value| {
        field
            .split('.')
            .fold(v.clone(), |v, f| v.get(f).cloned().unwrap_or(Value::Null))
    };
    let (n, o) = (at(new), at(old));
    if n != o {
        causes.push((
            field,
            "FieldValueInvalid",
            format!("Invalid value: {}: field is immutable", shown(&n)),
        ));
    }
}

/// Whether `labels` (a JSON map) match a `metav1.LabelSelector` (`matchLabels` and
/// `matchExpressions`, as `LabelSelectorAsSelector` reads them).
fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => label(key).is_some_and(|l| values.contains(&l)),
                "NotIn" => label(key).is_none_or(|l| !values.contains(&l)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_expressions
}

/// Whether a selector selects nothing in particular (no labels, no expressions).
fn selector_is_empty(selector: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.is_empty())
        && selector["matchExpressions"]
            .as_array()
            .is_none_or(|m| m.is_empty())
}

/// A workload's selector against its template's labels (`ValidateDeploymentSpec` and its
/// siblings): required, not empty, and matching.
fn selector_and_template(spec: &Value, causes: &mut Vec<Cause>) {
    let selector = &spec["selector"];
    if selector.is_null() {
        causes.push(required("spec.selector"));
        return;
    }
    if selector_is_empty(selector) {
        causes.push(invalid(
            "spec.selector",
            selector,
            "empty selector is invalid for deployment",
        ));
        return;
    }
    let labels = &spec["template"]["metadata"]["labels"];
    if !selector_matches(selector, labels) {
        causes.push(invalid(
            "spec.template.metadata.labels",
            if labels.is_null() {
                &Value::Null
            } else {
                labels
            },
            "`selector` does not match template `labels`",
        ));
    }
}

/// A count field that must not be negative (`ValidateNonnegativeField`).
fn non_negative(v: &Value, field: &str, causes: &mut Vec<Cause>) {
    let at = field
        .split('.')
        .fold(v.clone(), |v, f| v.get(f).cloned().unwrap_or(Value::Null));
    if at.as_i64().is_some_and(|n| n < 0) {
        causes.push(invalid(field, &at, "must be greater than or equal to 0"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"app": "a", "tier": "web"});
        assert!(selector_matches(
            &json!({"matchLabels": {"app": "a"}}),
            &labels
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"app": "b"}}),
            &labels
        ));
        let expr = |op: &str, values: Value| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": values}]});
        assert!(selector_matches(&expr("In", json!(["web", "db"])), &labels));
        assert!(!selector_matches(&expr("NotIn", json!(["web"])), &labels));
        assert!(selector_matches(&expr("Exists", json!([])), &labels));
        assert!(!selector_matches(&expr("DoesNotExist", json!([])), &labels));
        assert!(!selector_matches(&expr("Bogus", json!([])), &labels));
        assert!(selector_is_empty(&json!({"matchLabels": {}})));
    }
}
