//! The rules and defaults the built-in kinds' strategies share: decoding with defaults, the
//! causes of a 422 in upstream's words, immutable fields, and a workload's selector and template.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::apiserver::schema::Cause;
use crate::apiserver::validation::ReasonedCause;

/// Decodes `v` as `T` and encodes it again (unknown fields dropped, the type's shape kept),
/// then applies `defaults` to the result (Go's decoder applies the registered defaulters to
/// every body it decodes).
pub(super) fn defaulted<T: Serialize + DeserializeOwned>(
    v: Value,
    defaults: fn(&mut Value),
) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let mut v = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    defaults(&mut v);
    Ok(v)
}

/// Sets `v[key]` to `value` unless it holds a value already (a defaulter's `if x == nil`).
pub(super) fn or_default(v: &mut Value, key: &str, value: Value) {
    if v.get(key).is_none_or(Value::is_null)
        && let Some(m) = v.as_object_mut()
    {
        m.insert(key.to_owned(), value);
    }
}

/// Each item of the list `v[key]`.
pub(super) fn each<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// A value as upstream's field errors print it: JSON.
pub(super) fn shown(v: &Value) -> String {
    v.to_string()
}

/// `field.Required`.
pub(super) fn required(field: impl Into<String>) -> Cause {
    (field.into(), "FieldValueRequired", "Required value".into())
}

/// `field.Invalid`.
pub(super) fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Cause {
    (
        field.into(),
        "FieldValueInvalid",
        format!("Invalid value: {}: {why}", shown(value)),
    )
}

/// `field.NotSupported`.
pub(super) fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
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
pub(super) fn immutable(
    new: &Value,
    old: &Value,
    field: &'static str,
    causes: &mut Vec<ReasonedCause>,
) {
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
pub(super) fn selector_matches(selector: &Value, labels: &Value) -> bool {
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
pub(super) fn selector_is_empty(selector: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.is_empty())
        && selector["matchExpressions"]
            .as_array()
            .is_none_or(|m| m.is_empty())
}

/// A workload's selector against its template's labels (`ValidateDeploymentSpec` and its
/// siblings): required, not empty, and matching.
pub(super) fn selector_and_template(spec: &Value, causes: &mut Vec<Cause>) {
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
pub(super) fn non_negative(v: &Value, field: &str, causes: &mut Vec<Cause>) {
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
