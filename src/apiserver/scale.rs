//! The `scale` subresource: `GET`, `PUT` and `PATCH` of an `autoscaling/v1` `Scale` read from
//! and written to the object. A custom resource's is at the paths its CustomResourceDefinition
//! names, as kube-apiserver serves it (apiextensions-apiserver v0.37.2
//! `pkg/registry/customresource/etcd.go`, `ScaleREST`), with the checks every write of such a
//! resource gets (`validator.go`, `ValidateScaleSpec` and `ValidateScaleStatus`); a Deployment's
//! and a StatefulSet's read `spec.replicas`, `status.replicas` and `spec.selector` (kubernetes
//! v1.37.2 `pkg/registry/apps/deployment/storage/storage.go` and `statefulset/storage`,
//! `ScaleREST`), and a write of a negative count is a 422 on the `Scale` (`ValidateScale`).
//!
//! - A `Scale`'s metadata is the object's name, namespace, uid, resourceVersion and
//!   creationTimestamp; `spec.replicas` and `status.replicas` are read as integers (0 when
//!   missing), `status.selector` as a string.
//! - `GET` of an object without the spec replicas field is a 500 naming the path.
//! - A write sets the spec replicas field of the stored object, keeping a non-empty
//!   `metadata.resourceVersion` of the `Scale` as a precondition, and then goes through the
//!   object's own update (its generation, schema and rules, the checks below).
//! - On every create and update of the object (through `/status` too for the status fields):
//!   the spec and status replicas fields, when present, are integers from 0 to 2^31 - 1, and the
//!   label selector field a string; otherwise 422 with the path as the field, as upstream
//!   words it.
//!
//! # Differences from upstream
//! - `Scale`'s `managedFields` are not kept (this server keeps none).
//! - A workload's `Scale` write does not check a `metadata.uid` precondition.

use serde_json::{Value, json};

use super::schema::Cause;

/// The paths a CustomResourceDefinition's `subresources.scale` names, leading `.` kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalePaths {
    /// `specReplicasPath`, under `.spec`.
    pub spec_replicas: String,
    /// `statusReplicasPath`, under `.status`.
    pub status_replicas: String,
    /// `labelSelectorPath`, under `.spec` or `.status`, if set.
    pub label_selector: Option<String>,
    /// A built-in workload's: the selector is `spec.selector` as a string, and a `Scale`
    /// write is validated as a `Scale`.
    pub workload: bool,
}

/// The field a `NestedInt64` or `NestedString` finds at `path`, or why it cannot: `Ok(None)`
/// when it is missing, `Err` (upstream's "accessor error") when a step is not an object.
fn nested<'a>(obj: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let mut at = obj;
    let steps: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for (i, step) in steps.iter().enumerate() {
        let Value::Object(map) = at else {
            let walked = format!(".{}", steps[..i].join("."));
            return Err(format!(
                "{walked} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                go_value(at),
                go_type(at)
            ));
        };
        match map.get(*step) {
            Some(v) => at = v,
            None => return Ok(None),
        }
    }
    Ok(Some(at))
}

/// A JSON value as Go's `%v` prints it once decoded into `interface{}`.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => format!(
            "map[{}]",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        other => other.to_string(),
    }
}

/// A JSON value's Go type once decoded into `interface{}` (integers as `int64`).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// `NestedInt64`: the integer at `path` (`None` when missing).
fn nested_int(obj: &Value, path: &str) -> Result<Option<i64>, String> {
    match nested(obj, path)? {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            format!(
                "{path} accessor error: {} is of the type {}, expected int64",
                go_value(v),
                go_type(v)
            )
        }),
    }
}

/// `NestedString`: the string at `path` (`None` when missing).
fn nested_string(obj: &Value, path: &str) -> Result<Option<String>, String> {
    match nested(obj, path)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!(
            "{path} accessor error: {} is of the type {}, expected string",
            go_value(v),
            go_type(v)
        )),
    }
}

impl ScalePaths {
    /// The paths of a version's `subresources` (`None` without `scale`).
    pub fn read(subresources: &Value) -> Option<Self> {
        let scale = subresources.get("scale")?.as_object()?;
        let path = |f: &str| scale.get(f).and_then(Value::as_str).map(str::to_string);
        Some(ScalePaths {
            spec_replicas: path("specReplicasPath").unwrap_or_default(),
            status_replicas: path("statusReplicasPath").unwrap_or_default(),
            label_selector: path("labelSelectorPath").filter(|p| !p.is_empty()),
            workload: false,
        })
    }

    /// A Deployment's or a StatefulSet's.
    pub fn workload() -> Self {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
            workload: true,
        }
    }

    /// A `Scale` write's own checks (`ValidateScale`, a workload's only): the causes of a 422
    /// on `Scale.autoscaling`.
    pub fn scale_causes(&self, scale: &Value) -> Vec<Cause> {
        match scale["spec"]["replicas"].as_i64() {
            Some(n) if self.workload && n < 0 => vec![(
                "spec.replicas".into(),
                "FieldValueInvalid",
                format!("Invalid value: {n}: must be greater than or equal to 0"),
            )],
            _ => Vec::new(),
        }
    }

    /// `scaleFromCustomResource`: the object's `Scale`, and whether its spec replicas field
    /// exists.
    pub fn scale_of(&self, obj: &Value) -> Result<(Value, bool), String> {
        let spec = nested_int(obj, &self.spec_replicas)?;
        let status = nested_int(obj, &self.status_replicas)?.unwrap_or(0);
        let selector = match &self.label_selector {
            Some(p) => nested_string(obj, p)?.unwrap_or_default(),
            None if self.workload => selector_string(&obj["spec"]["selector"]),
            None => String::new(),
        };
        let meta = &obj["metadata"];
        let mut metadata = serde_json::Map::new();
        for f in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(v) = meta.get(f).filter(|v| *v != "" && !v.is_null()) {
                metadata.insert(f.into(), v.clone());
            }
        }
        // Go's int32 conversion, and the `omitempty` of `spec.replicas` and `status.selector`.
        let mut scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": metadata,
            "spec": {},
            "status": {"replicas": status as i32},
        });
        let replicas = spec.unwrap_or(0) as i32;
        if replicas != 0 {
            scale["spec"]["replicas"] = json!(replicas);
        }
        if !selector.is_empty() {
            scale["status"]["selector"] = json!(selector);
        }
        Ok((scale, spec.is_some()))
    }

    /// `ValidateScaleSpec` (when `spec`) and `ValidateScaleStatus` on a written object.
    pub fn causes(&self, obj: &Value, spec: bool, out: &mut Vec<Cause>) {
        let mut replicas = |path: &str| {
            let cause = |m: String| (path.to_string(), "FieldValueInvalid", m);
            match nested_int(obj, path) {
                Err(e) => out.push(cause(format!("Invalid value: 0: {e}"))),
                Ok(Some(n)) if n < 0 => out.push(cause(format!(
                    "Invalid value: {n}: should be a non-negative integer"
                ))),
                Ok(Some(n)) if n > i64::from(i32::MAX) => out.push(cause(format!(
                    "Invalid value: {n}: should be less than or equal to {}",
                    i32::MAX
                ))),
                Ok(_) => {}
            }
        };
        if spec {
            replicas(&self.spec_replicas);
        }
        replicas(&self.status_replicas);
        if let Some(p) = &self.label_selector
            && let Err(e) = nested_string(obj, p)
        {
            out.push((
                p.clone(),
                "FieldValueInvalid",
                format!("Invalid value: \"\": {e}"),
            ));
        }
    }

    /// `scaleUpdatedObjectInfo.UpdatedObject`: `scale` written into `obj` (the stored object),
    /// its resourceVersion, if any, kept as the update's precondition. `Err` is a 400's message.
    pub fn apply(&self, obj: &mut Value, scale: &Value) -> Result<(), String> {
        let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
        if replicas == i64::from(i32::MIN) {
            return Err(format!(
                "the spec replicas field {:?} cannot be empty",
                self.spec_replicas
            ));
        }
        let mut at = &mut *obj;
        let steps: Vec<&str> = self
            .spec_replicas
            .trim_start_matches('.')
            .split('.')
            .collect();
        for step in &steps[..steps.len() - 1] {
            if !at.get(*step).is_some_and(Value::is_object) {
                at[*step] = json!({});
            }
            at = &mut at[*step];
        }
        at[steps[steps.len() - 1]] = json!(replicas);
        match scale["metadata"]["resourceVersion"].as_str() {
            Some(rv) if !rv.is_empty() => obj["metadata"]["resourceVersion"] = json!(rv),
            _ => {}
        }
        Ok(())
    }

    /// The `Scale` a `PATCH` starts from: the object's, with a missing spec replicas field
    /// marked (int32's least value) so that a patch that does not set it is refused.
    pub fn patch_base(&self, obj: &Value) -> Result<Value, String> {
        let (mut scale, found) = self.scale_of(obj)?;
        if !found {
            scale["spec"]["replicas"] = json!(i32::MIN);
        }
        Ok(scale)
    }
}

/// A `LabelSelector` as apimachinery's `labels.Selector` prints it once converted
/// (`LabelSelectorAsSelector`, then `String`): one requirement per label and expression, sorted
/// by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by commas.
fn selector_string(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// `ValidateCustomResourceDefinitionSubresources`' scale rules, for the version at `at`
/// (`spec.versions[i].subresources`).
pub(crate) fn crd_causes(subresources: &Value, at: &str, out: &mut Vec<Cause>) {
    let Some(scale) = subresources.get("scale").filter(|s| s.is_object()) else {
        return;
    };
    let path = |f: &str| scale.get(f).and_then(Value::as_str).unwrap_or_default();
    let mut check = |field: &str, under: &[&str], what: &str| {
        let p = path(field);
        let at = format!("{at}.scale.{field}");
        if p.is_empty() {
            if field != "labelSelectorPath" {
                out.push((at, "FieldValueRequired", "Required value".into()));
            }
        } else if !p.starts_with('.') {
            out.push((
                at,
                "FieldValueInvalid",
                format!("Invalid value: {p:?}: must be a simple json path starting with ."),
            ));
        } else if !under.iter().any(|u| p.starts_with(u)) {
            out.push((
                at,
                "FieldValueInvalid",
                format!("Invalid value: {p:?}: {what}"),
            ));
        }
    };
    check(
        "specReplicasPath",
        &[".spec."],
        "should be a json path under .spec",
    );
    check(
        "statusReplicasPath",
        &[".status."],
        "should be a json path under .status",
    );
    check(
        "labelSelectorPath",
        &[".spec.", ".status."],
        "should be a json path under either .spec or .status",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths::read(&json!({"scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        }}))
        .unwrap()
    }

    #[test]
    fn a_scale_is_read_from_the_named_paths_with_zero_for_missing_fields() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u",
            "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"x": "y"}},
            "spec": {"replicas": 3}, "status": {"selector": "app=a"}});
        let (scale, found) = paths().scale_of(&obj).unwrap();
        assert!(found);
        assert_eq!(
            scale,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                    "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": 3}, "status": {"replicas": 0, "selector": "app=a"}})
        );
        let (scale, found) = paths()
            .scale_of(&json!({"metadata": {}, "spec": {}}))
            .unwrap();
        assert!(!found);
        assert_eq!(
            scale["spec"],
            json!({}),
            "replicas 0 is omitted, as Go's omitempty"
        );
    }

    #[test]
    fn the_replicas_fields_must_be_int32_and_the_selector_a_string() {
        let mut causes = Vec::new();
        let obj = json!({"spec": {"replicas": -1}, "status": {"replicas": "two", "selector": 5}});
        paths().causes(&obj, true, &mut causes);
        let got: Vec<(&str, &str)> = causes
            .iter()
            .map(|(f, _, m)| (f.as_str(), m.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    ".spec.replicas",
                    "Invalid value: -1: should be a non-negative integer"
                ),
                (
                    ".status.replicas",
                    "Invalid value: 0: .status.replicas accessor error: two is of the type string, expected int64"
                ),
                (
                    ".status.selector",
                    "Invalid value: \"\": .status.selector accessor error: 5 is of the type int64, expected string"
                ),
            ]
        );
        causes.clear();
        let big = json!({"spec": {"replicas": 2147483648_i64}, "status": {"replicas": 1.5}});
        paths().causes(&big, false, &mut causes);
        assert_eq!(causes.len(), 1, "the spec is not checked on a status write");
        assert!(
            causes[0]
                .2
                .ends_with("1.5 is of the type float64, expected int64")
        );
    }

    #[test]
    fn a_write_sets_the_spec_path_and_keeps_the_scales_resource_version() {
        let mut obj = json!({"metadata": {"resourceVersion": "9"}});
        let scale = json!({"metadata": {"resourceVersion": "4"}, "spec": {"replicas": 5}});
        paths().apply(&mut obj, &scale).unwrap();
        assert_eq!(obj["spec"]["replicas"], 5);
        assert_eq!(obj["metadata"]["resourceVersion"], "4");
        let base = paths().patch_base(&json!({"metadata": {}})).unwrap();
        let err = paths().apply(&mut obj, &base).unwrap_err();
        assert_eq!(
            err,
            "the spec replicas field \".spec.replicas\" cannot be empty"
        );
    }

    #[test]
    fn a_workloads_scale_prints_its_selector_and_checks_its_count() {
        let obj = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {
            "matchLabels": {"app": "d", "tier": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "zone", "operator": "DoesNotExist"}]}}});
        let (scale, found) = ScalePaths::workload().scale_of(&obj).unwrap();
        assert!(found);
        assert_eq!(
            scale["status"],
            json!({"replicas": 0, "selector": "app=d,env in (dev,prod),tier=web,!zone"})
        );
        let causes = ScalePaths::workload().scale_causes(&json!({"spec": {"replicas": -2}}));
        assert_eq!(
            causes[0].2,
            "Invalid value: -2: must be greater than or equal to 0"
        );
        assert!(
            paths()
                .scale_causes(&json!({"spec": {"replicas": -2}}))
                .is_empty()
        );
    }

    #[test]
    fn a_crd_names_its_scale_paths_under_spec_and_status() {
        let mut causes = Vec::new();
        let sub = json!({"scale": {"specReplicasPath": "spec.replicas",
            "statusReplicasPath": ".spec.replicas", "labelSelectorPath": ".metadata.labels"}});
        crd_causes(&sub, "spec.versions[0].subresources", &mut causes);
        let got: Vec<String> = causes.iter().map(|(f, _, m)| format!("{f}: {m}")).collect();
        assert_eq!(
            got,
            [
                "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \"spec.replicas\": must be a simple json path starting with .",
                "spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: \".spec.replicas\": should be a json path under .status",
                "spec.versions[0].subresources.scale.labelSelectorPath: Invalid value: \".metadata.labels\": should be a json path under either .spec or .status",
            ]
        );
        causes.clear();
        crd_causes(&json!({"scale": {}}), "s", &mut causes);
        assert_eq!(
            causes.len(),
            2,
            "both replicas paths are required: {causes:?}"
        );
    }
}
