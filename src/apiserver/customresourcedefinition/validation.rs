//! A CustomResourceDefinition's own validation: what a user can get wrong, with
//! kube-apiserver's causes (apiextensions-apiserver v0.37.2
//! `pkg/apis/apiextensions/validation/validation.go`, `ValidateCustomResourceDefinition`),
//! and what this server refuses because it lacks the feature (a conversion webhook, CEL rules).

use serde_json::Value;

use crate::apiserver::scale;
use crate::apiserver::schema::{Cause, Schema};

/// The names a CRD's spec must carry, and the path they are reported at.
const NAMES: [&str; 4] = ["plural", "singular", "kind", "listKind"];

/// `spec.group`, `spec.names`, `spec.scope`, `spec.versions` and `spec.conversion`, as the
/// CRD's strategy validates them on create and update; each version's schema is read (and so
/// checked) as well.
pub(crate) fn crd(v: &Value, causes: &mut Vec<Cause>) {
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &v["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    if !name.is_empty() && name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".into(),
            "FieldValueInvalid",
            format!(r#"Invalid value: {name:?}: must be spec.names.plural+"."+spec.group"#),
        ));
    }
    if group.is_empty() {
        causes.push((
            "spec.group".into(),
            "FieldValueRequired",
            "Required value".into(),
        ));
    } else if !group.contains('.') {
        causes.push((
            "spec.group".into(),
            "FieldValueInvalid",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    match spec["scope"].as_str().unwrap_or_default() {
        "Namespaced" | "Cluster" => {}
        "" => causes.push((
            "spec.scope".into(),
            "FieldValueRequired",
            "Required value".into(),
        )),
        other => causes.push((
            "spec.scope".into(),
            "FieldValueNotSupported",
            format!(r#"Unsupported value: {other:?}: supported values: "Cluster", "Namespaced""#),
        )),
    }
    versions(spec, causes);
    for n in NAMES {
        let value = spec["names"][n].as_str().unwrap_or_default();
        if value.is_empty() && n != "singular" && n != "listKind" {
            causes.push((
                format!("spec.names.{n}"),
                "FieldValueRequired",
                "Required value".into(),
            ));
        }
    }
    conversion(spec, causes);
}

/// Each version: a unique name, exactly one storage version, a schema that is structural.
fn versions(spec: &Value, causes: &mut Vec<Cause>) {
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push((
            "spec.versions".into(),
            "FieldValueInvalid",
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        ));
        return;
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    let mut names: Vec<&str> = versions.iter().filter_map(|v| v["name"].as_str()).collect();
    names.sort_unstable();
    let unique = names.windows(2).all(|w| w[0] != w[1]);
    let shown = format!("{:?}", names);
    if !unique {
        causes.push((
            "spec.versions".into(),
            "FieldValueInvalid",
            format!("Invalid value: {shown}: must contain unique version names"),
        ));
    }
    if storage != 1 {
        causes.push((
            "spec.versions".into(),
            "FieldValueInvalid",
            format!(
                "Invalid value: {shown}: must have exactly one version marked as storage version"
            ),
        ));
    }
    // Upstream validates the internal version, which holds a schema every version shares
    // once, as `spec.validation`: its causes name that path.
    let shared = !versions[0]["schema"]["openAPIV3Schema"].is_null()
        && versions
            .windows(2)
            .all(|w| w[0]["schema"] == w[1]["schema"]);
    for (i, v) in versions.iter().enumerate() {
        if shared && i > 0 {
            break;
        }
        let path = if shared {
            "spec.validation.openAPIV3Schema".to_string()
        } else {
            format!("spec.versions[{i}].schema.openAPIV3Schema")
        };
        match v["schema"].get("openAPIV3Schema") {
            Some(raw) if !raw.is_null() => {
                Schema::read(raw, &path, causes);
            }
            _ => causes.push((path, "FieldValueRequired", "Required value".into())),
        }
    }
    // Subresources every version shares are hoisted the same way, to `spec.subresources`.
    let shared = versions
        .windows(2)
        .all(|w| w[0]["subresources"] == w[1]["subresources"]);
    for (i, v) in versions.iter().enumerate() {
        if shared && i > 0 {
            break;
        }
        let path = if shared {
            "spec.subresources".to_string()
        } else {
            format!("spec.versions[{i}].subresources")
        };
        scale::crd_causes(&v["subresources"], &path, causes);
    }
}

/// `spec.conversion`: `None` is served; `Webhook` is refused, naming the missing feature.
fn conversion(spec: &Value, causes: &mut Vec<Cause>) {
    match spec["conversion"]["strategy"].as_str() {
        None | Some("None") => {}
        Some("Webhook") => causes.push((
            "spec.conversion.strategy".into(),
            "FieldValueNotSupported",
            r#"Unsupported value: "Webhook": supported values: "None" (this embedded server does not call conversion webhooks; run a real control plane for webhook conversion)"#.into(),
        )),
        Some(other) => causes.push((
            "spec.conversion.strategy".into(),
            "FieldValueNotSupported",
            format!(r#"Unsupported value: {other:?}: supported values: "None", "Webhook""#),
        )),
    }
}
