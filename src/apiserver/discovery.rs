//! Discovery documents: how clients learn which resources exist and where.
//!
//! Follows the apiserver's legacy (unaggregated) discovery endpoints: `/version`, `/api`,
//! `/api/v1`, `/apis`, `/apis/{group}` and `/apis/{group}/{version}`. Every client still
//! understands these; kubectl asks for the aggregated form first and falls back to them when
//! the answer's content type is plain `application/json`.

use serde_json::{Value, json};

use super::kinds::Kind;
use super::registry::Registry;

/// The Kubernetes version the server reports: the modelled minor (k8s-openapi `v1_36`).
pub const KUBERNETES_VERSION: &str = "v1.36.0";

/// Every served version's kind, in registry order.
fn served(reg: &Registry) -> impl Iterator<Item = &Kind> {
    reg.live().flat_map(|(_, e)| e.served.iter().map(|k| &**k))
}

fn resources(reg: &Registry, group: &str, version: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for k in served(reg).filter(|k| k.group == group && k.version == version) {
        if k.crd.is_some() {
            out.push(custom_resource(k));
        } else {
            out.push(json!({
                "name": k.plural,
                "singularName": k.singular,
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                "shortNames": k.short_names,
            }));
        }
        if k.status_subresource {
            out.push(json!({
                "name": format!("{}/status", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if k.scale.is_some() {
            out.push(json!({
                "name": format!("{}/scale", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    out
}

/// A custom resource as the CRD handler lists it (apiextensions-apiserver v0.37.2
/// `pkg/apiserver/customresource_discovery_controller.go`): its verbs in that handler's order,
/// `deletecollection` among them, the storage version's hash (`discovery.StorageVersionHash`:
/// the first 8 bytes of the SHA-256 of `group/version/kind`, base64), no empty `shortNames`.
fn custom_resource(k: &Kind) -> Value {
    use base64::Engine;
    use sha2::Digest;
    let stored = k
        .stored_as
        .clone()
        .unwrap_or_else(|| format!("{}/{}", k.group, k.version));
    let hash = sha2::Sha256::digest(format!("{stored}/{}", k.kind).as_bytes());
    let mut r = json!({
        "name": k.plural,
        "singularName": k.singular,
        "namespaced": k.namespaced,
        "kind": k.kind,
        "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
        "storageVersionHash": base64::engine::general_purpose::STANDARD.encode(&hash[..8]),
    });
    if !k.short_names.is_empty() {
        r["shortNames"] = json!(k.short_names);
    }
    r
}

/// Each API group with its versions, in the order they were registered.
fn groups(reg: &Registry) -> Vec<(&str, Vec<&str>)> {
    let mut seen: Vec<(&str, Vec<&str>)> = Vec::new();
    for k in served(reg).filter(|k| !k.group.is_empty()) {
        match seen.iter_mut().find(|(g, _)| *g == k.group) {
            Some((_, versions)) if !versions.contains(&k.version.as_str()) => {
                versions.push(&k.version)
            }
            Some(_) => {}
            None => seen.push((&k.group, vec![&k.version])),
        }
    }
    seen
}

fn group_doc((group, versions): (&str, Vec<&str>)) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(versions[0]),
    })
}

/// Whether a path is a discovery or health path (exempt from the fault switch), without
/// building it.
pub(crate) fn is_discovery_path(segments: &[&str]) -> bool {
    matches!(
        segments,
        [] | ["version"]
            | ["readyz" | "livez" | "healthz"]
            | ["api"]
            | ["api", _]
            | ["apis"]
            | ["apis", _]
            | ["apis", _, _]
    )
}

/// The discovery document at `path`, or `None` if `path` is not a discovery path.
pub(crate) fn document(reg: &Registry, segments: &[&str], server_address: &str) -> Option<Value> {
    Some(match segments {
        ["version"] => {
            let minor = KUBERNETES_VERSION.split('.').nth(1).unwrap_or_default();
            json!({
                "major": "1",
                "minor": minor,
                "gitVersion": format!("{KUBERNETES_VERSION}+controlloop"),
                "gitCommit": "",
                "gitTreeState": "clean",
                "buildDate": "1970-01-01T00:00:00Z",
                "goVersion": "none (controlloop's embedded API server)",
                "compiler": "rustc",
                "platform": "linux/amd64",
            })
        }
        ["api"] => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        }),
        ["api", "v1"] => json!({
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": resources(reg, "", "v1"),
        }),
        ["apis"] => json!({
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": groups(reg).into_iter().map(group_doc).collect::<Vec<_>>(),
        }),
        ["apis", g] => {
            let found = groups(reg).into_iter().find(|(name, _)| name == g)?;
            let mut d = group_doc(found);
            d["kind"] = json!("APIGroup");
            d["apiVersion"] = json!("v1");
            d
        }
        ["apis", g, v] if served(reg).any(|k| k.group == *g && k.version == *v) => json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{g}/{v}"),
            "resources": resources(reg, g, v),
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_resource_is_discoverable() {
        let reg = Registry::builtin();
        let core = document(&reg, &["api", "v1"], "x").unwrap();
        assert_eq!(core["resources"][0]["name"], "configmaps");
        assert_eq!(core["resources"][1]["name"], "namespaces");
        assert_eq!(core["resources"][1]["namespaced"], false);
        let groups = document(&reg, &["apis"], "x").unwrap();
        assert_eq!(groups["groups"][0]["name"], "coordination.k8s.io");
        let crds = document(&reg, &["apis", "apiextensions.k8s.io", "v1"], "x").unwrap();
        let names: Vec<_> = crds["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].clone())
            .collect();
        assert_eq!(
            names,
            [
                "customresourcedefinitions",
                "customresourcedefinitions/status"
            ]
        );
        assert!(document(&reg, &["apis", "nope", "v1"], "x").is_none());
        assert_eq!(document(&reg, &["version"], "x").unwrap()["minor"], "36");
    }
}
