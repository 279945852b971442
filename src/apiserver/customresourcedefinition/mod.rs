//! The CustomResourceDefinition's strategy: its defaults, what create and update prepare, and
//! its validation.
//!
//! Follows the behaviour of apiextensions-apiserver v0.37.2
//! `pkg/registry/customresourcedefinition/strategy.go` (status cleared on create, generation 1,
//! the storage version recorded in `status.storedVersions`), `pkg/apis/apiextensions/v1/
//! defaults.go` (`singular`, `listKind`, `conversion`) and `validation.go` (see `validation`).
//! What the CRD then makes the server do is `crd_controllers`.

mod validation;

use serde_json::{Value, json};

use super::schema::Cause;

/// Validates a CRD body as its strategy does.
pub(crate) fn validate(v: &Value, causes: &mut Vec<Cause>) {
    validation::crd(v, causes);
}

/// The CRD's defaults (`SetDefaults_CustomResourceDefinitionSpec`): `singular` is the kind in
/// lower case, `listKind` the kind plus `List`, conversion `None`.
pub(crate) fn default(v: &mut Value) {
    let spec = &mut v["spec"];
    if !spec.is_object() {
        return;
    }
    let kind = spec["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if spec["names"]["singular"].as_str().is_none_or(str::is_empty) && !kind.is_empty() {
        spec["names"]["singular"] = json!(kind.to_lowercase());
    }
    if spec["names"]["listKind"].as_str().is_none_or(str::is_empty) && !kind.is_empty() {
        spec["names"]["listKind"] = json!(format!("{kind}List"));
    }
    if spec["conversion"].is_null() {
        spec["conversion"] = json!({"strategy": "None"});
    }
}

/// A stored CRD's numbers as Go writes them: a schema's `minimum`, `maximum` and
/// `multipleOf` are float64, which Go's encoder writes without a fraction when they have
/// none (`10`, where serde writes `10.0`).
pub(crate) fn go_numbers(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if matches!(k.as_str(), "minimum" | "maximum" | "multipleOf")
                    && let Some(f) = x.as_f64()
                    && f.fract() == 0.0
                    && f.abs() < 1e15
                {
                    *x = json!(f as i64);
                } else {
                    go_numbers(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(go_numbers),
        _ => {}
    }
}

/// The storage version's name.
pub(crate) fn storage_version(v: &Value) -> Option<String> {
    v["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .and_then(|v| v["name"].as_str().map(str::to_string))
}

/// `PrepareForCreate`: the status is cleared, and holds the storage version.
pub(crate) fn prepare_for_create(obj: &mut Value) {
    let stored: Vec<String> = storage_version(obj).into_iter().collect();
    obj["status"] = json!({
        "conditions": null,
        "acceptedNames": {"plural": "", "kind": ""},
        "storedVersions": stored,
    });
}

/// `PrepareForUpdate` after the stored status is put back: the storage version is added to
/// `status.storedVersions` if it is new.
pub(crate) fn prepare_for_update(obj: &mut Value) {
    let Some(v) = storage_version(obj) else {
        return;
    };
    let stored = &mut obj["status"]["storedVersions"];
    match stored.as_array_mut() {
        Some(list) if list.iter().any(|s| s == &json!(v)) => {}
        Some(list) => list.push(json!(v)),
        None => *stored = json!([v]),
    }
}
