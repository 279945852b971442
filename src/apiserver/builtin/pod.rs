//! Pods and pod templates: the defaults kube-apiserver applies to every pod spec (kubernetes
//! v1.37.2 `pkg/apis/core/v1/defaults.go`: `SetDefaults_PodSpec`, `_Container`, `_Probe`,
//! `_HTTPGetAction`, `_Volume` and the volume sources, and the `+default` tags of k8s.io/api
//! v0.37.2), a pod's own (`SetDefaults_Pod`), what admission adds to a pod on create, and the
//! pod-spec validation a controller commonly meets (`pkg/apis/core/validation`).
//!
//! # Differences from upstream
//! - Admission is that of the conformance suite's control plane (kube-apiserver's defaults
//!   less `ServiceAccount`): `Priority` sets `priority: 0` and `preemptionPolicy`,
//!   `DefaultTolerationSeconds` adds the two 300-second tolerations. No `ServiceAccount`
//!   admission: no `serviceAccountName: default`, no projected token volume (on a cluster
//!   with it, a pod needs its namespace's `default` ServiceAccount, which only
//!   kube-controller-manager creates).
//! - A pod's QoS class compares resource quantities as written (`1` and `1000m` differ).
//! - Validation covers containers (name, image, unique names, ports' protocol), the restart
//!   and DNS policies, and volumes' names; not resources, probes, affinity or volume sources.

use serde_json::{Value, json};

use super::shared::{each, invalid, not_supported, or_default, required};
use crate::apiserver::schema::Cause;

/// `SetDefaults_PodSpec` and the defaulters of what a pod spec holds.
pub(super) fn spec_defaults(spec: &mut Value) {
    if spec.get("serviceAccountName").is_none_or(Value::is_null)
        && let Some(sa) = spec.get("serviceAccount").cloned()
    {
        spec["serviceAccountName"] = sa;
    }
    if let Some(sa) = spec.get("serviceAccountName").cloned() {
        spec["serviceAccount"] = sa;
    }
    or_default(spec, "dnsPolicy", json!("ClusterFirst"));
    or_default(spec, "restartPolicy", json!("Always"));
    or_default(spec, "securityContext", json!({}));
    or_default(spec, "terminationGracePeriodSeconds", json!(30));
    or_default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        each(spec, list).for_each(container_defaults);
    }
    each(spec, "ephemeralContainers").for_each(container_defaults);
    each(spec, "volumes").for_each(volume_defaults);
}

/// `SetDefaults_Container`: the pull policy by the image's tag, the termination message, the
/// ports' protocol, the probes; `resources` is a struct in Go, always sent.
fn container_defaults(c: &mut Value) {
    let image = c["image"].as_str().unwrap_or_default().to_owned();
    let policy = if image_tag(&image) == "latest" {
        "Always"
    } else {
        "IfNotPresent"
    };
    or_default(c, "imagePullPolicy", json!(policy));
    or_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    or_default(c, "terminationMessagePolicy", json!("File"));
    or_default(c, "resources", json!({}));
    each(c, "ports").for_each(|p| or_default(p, "protocol", json!("TCP")));
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            or_default(p, "timeoutSeconds", json!(1));
            or_default(p, "periodSeconds", json!(10));
            or_default(p, "successThreshold", json!(1));
            or_default(p, "failureThreshold", json!(3));
            if let Some(h) = p.get_mut("httpGet").filter(|h| h.is_object()) {
                http_get_defaults(h);
            }
        }
    }
    if let Some(l) = c.get_mut("lifecycle").filter(|l| l.is_object()) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = l[hook].get_mut("httpGet").filter(|h| h.is_object()) {
                http_get_defaults(h);
            }
        }
    }
    each(c, "env").for_each(|e| {
        if let Some(f) = e["valueFrom"].get_mut("fieldRef").filter(|f| f.is_object()) {
            or_default(f, "apiVersion", json!("v1"));
        }
    });
}

/// `SetDefaults_HTTPGetAction`.
fn http_get_defaults(h: &mut Value) {
    or_default(h, "path", json!("/"));
    or_default(h, "scheme", json!("HTTP"));
}

/// `SetDefaults_Volume` (a volume without a source is an `emptyDir`) and the sources' modes.
fn volume_defaults(v: &mut Value) {
    if v.as_object().is_some_and(|m| m.keys().all(|k| k == "name")) {
        v["emptyDir"] = json!({});
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(source).filter(|s| s.is_object()) {
            or_default(s, "defaultMode", json!(0o644));
        }
    }
    if let Some(p) = v.get_mut("projected").filter(|s| s.is_object()) {
        each(p, "sources").for_each(|s| {
            if let Some(t) = s.get_mut("serviceAccountToken").filter(|t| t.is_object()) {
                or_default(t, "expirationSeconds", json!(3600));
            }
        });
    }
    if let Some(h) = v.get_mut("hostPath").filter(|s| s.is_object()) {
        or_default(h, "type", json!(""));
    }
}

/// The tag `ParseImageName` finds: after the last `:` of the last path segment; `latest`
/// when there is neither a tag nor a digest.
fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if digest => "",
        None => "latest",
    }
}

/// A pod template (`PodTemplateSpec`): its metadata is a struct in Go, always sent.
pub(super) fn template_defaults(template: &mut Value) {
    if template.is_object() {
        or_default(template, "metadata", json!({}));
        if let Some(spec) = template.get_mut("spec").filter(|s| s.is_object()) {
            spec_defaults(spec);
        }
    }
}

/// A pod's defaults: its spec's, then `SetDefaults_Pod` (service links on; a limit without
/// a request is requested too; a negative grace period is 1).
pub(super) fn pod_defaults(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    spec_defaults(spec);
    if spec["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
    {
        spec["terminationGracePeriodSeconds"] = json!(1);
    }
    or_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        each(spec, list).for_each(|c| {
            let Some(limits) = c["resources"]["limits"].as_object().cloned() else {
                return;
            };
            let requests = &mut c["resources"]["requests"];
            if !requests.is_object() {
                *requests = json!({});
            }
            for (k, v) in limits {
                or_default(requests, &k, v);
            }
        });
    }
}

/// What admission adds to a pod on create: `Priority` (no class: priority 0, preempting
/// lower ones) and `DefaultTolerationSeconds` (300 s on a not-ready or unreachable node,
/// unless the pod tolerates that already).
pub(super) fn admit(pod: &mut Value) {
    let spec = &mut pod["spec"];
    or_default(spec, "priority", json!(0));
    or_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = spec["tolerations"].as_array().is_some_and(|ts| {
            ts.iter().any(|t| {
                let effect = t["effect"].as_str().unwrap_or_default();
                (effect.is_empty() || effect == "NoExecute")
                    && (t["key"] == key || (t["key"].is_null() && t["operator"] == "Exists"))
            })
        });
        if tolerated {
            continue;
        }
        if !spec["tolerations"].is_array() {
            spec["tolerations"] = json!([]);
        }
        if let Some(ts) = spec["tolerations"].as_array_mut() {
            ts.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                           "tolerationSeconds": 300}),
            );
        }
    }
}

/// `GetPodQOS`: BestEffort without any request or limit, Guaranteed when every container
/// limits CPU and memory and requests what it limits, else Burstable.
pub(super) fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| spec[*l].as_array().into_iter().flatten())
        .collect();
    let compute = |m: &Value| {
        m.as_object().is_some_and(|m| {
            m.keys()
                .any(|k| k == "cpu" || k == "memory" || k.starts_with("hugepages-"))
        })
    };
    let any = containers
        .iter()
        .any(|c| compute(&c["resources"]["requests"]) || compute(&c["resources"]["limits"]));
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let (req, lim) = (&c["resources"]["requests"], &c["resources"]["limits"]);
        ["cpu", "memory"]
            .iter()
            .all(|r| !lim[*r].is_null() && req[*r] == lim[*r])
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The pod-spec validation a controller commonly meets (`ValidatePodSpec`), at `path`
/// (`spec` or `spec.template.spec`); `restart` is the restart policies the owner allows.
pub(super) fn validate_spec(spec: &Value, path: &str, restart: &[&str], causes: &mut Vec<Cause>) {
    if !spec.is_object() {
        causes.push(required(path.to_owned()));
        return;
    }
    let containers = spec["containers"].as_array().map(Vec::as_slice);
    if containers.is_none_or(<[Value]>::is_empty) {
        causes.push(required(format!("{path}.containers")));
    }
    let mut names: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            let name = c["name"].as_str().unwrap_or_default();
            if name.is_empty() {
                causes.push(required(format!("{at}.name")));
            } else if !super::super::validation::is_dns1123_label(name) {
                causes.push(invalid(
                    format!("{at}.name"),
                    &c["name"],
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric \
                     characters or '-', and must start and end with an alphanumeric character",
                ));
            } else if names.contains(&name) {
                causes.push((
                    format!("{at}.name"),
                    "FieldValueDuplicate",
                    format!("Duplicate value: {}", c["name"]),
                ));
            }
            names.push(name);
            if c["image"].as_str().is_none_or(str::is_empty) {
                causes.push(required(format!("{at}.image")));
            }
            for (j, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
                let protocol = &p["protocol"];
                if !matches!(protocol.as_str(), Some("TCP" | "UDP" | "SCTP")) {
                    causes.push(not_supported(
                        format!("{at}.ports[{j}].protocol"),
                        protocol,
                        &["SCTP", "TCP", "UDP"],
                    ));
                }
            }
        }
    }
    let policy = &spec["restartPolicy"];
    if !policy.as_str().is_some_and(|p| restart.contains(&p)) {
        causes.push(not_supported(
            format!("{path}.restartPolicy"),
            policy,
            restart,
        ));
    }
    let dns = &spec["dnsPolicy"];
    let dns_policies = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
    if !dns.as_str().is_some_and(|d| dns_policies.contains(&d)) {
        causes.push(not_supported(
            format!("{path}.dnsPolicy"),
            dns,
            &dns_policies,
        ));
    }
    let mut volumes: Vec<&str> = Vec::new();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let name = v["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(required(format!("{path}.volumes[{i}].name")));
        } else if volumes.contains(&name) {
            causes.push((
                format!("{path}.volumes[{i}].name"),
                "FieldValueDuplicate",
                format!("Duplicate value: {}", v["name"]),
            ));
        }
        volumes.push(name);
    }
    if spec["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
    {
        causes.push(invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            &spec["terminationGracePeriodSeconds"],
            "must be greater than or equal to 0",
        ));
    }
}

/// `ValidatePodUpdate`'s main rule: of the spec only the containers' images,
/// `activeDeadlineSeconds`, additions to `tolerations` and `terminationGracePeriodSeconds`
/// may change.
pub(super) fn spec_update_allowed(new: &Value, old: &Value) -> bool {
    let mutable = |spec: &Value, other: &Value| -> Value {
        let mut s = spec.clone();
        for list in ["containers", "initContainers"] {
            for (i, c) in s[list].as_array_mut().into_iter().flatten().enumerate() {
                c["image"] = other[list][i]["image"].clone();
            }
        }
        if let Some(m) = s.as_object_mut() {
            for f in [
                "activeDeadlineSeconds",
                "tolerations",
                "terminationGracePeriodSeconds",
            ] {
                m.remove(f);
            }
        }
        s
    };
    let old_tolerations = old["tolerations"].as_array().cloned().unwrap_or_default();
    let kept = old_tolerations
        .iter()
        .all(|t| new["tolerations"].as_array().is_some_and(|n| n.contains(t)));
    kept && mutable(new, old) == mutable(old, old)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pull_policy_follows_the_tag() {
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("nginx:1.2"), "1.2");
        assert_eq!(image_tag("registry:5000/nginx"), "latest");
        assert_eq!(image_tag("registry:5000/nginx:latest"), "latest");
        assert_eq!(image_tag("nginx@sha256:abc"), "");
    }

    #[test]
    fn a_template_gets_the_pod_spec_defaults() {
        let mut t = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1",
            "ports": [{"containerPort": 80}]}], "volumes": [{"name": "v"}]}});
        template_defaults(&mut t);
        assert_eq!(t["metadata"], json!({}));
        let s = &t["spec"];
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["terminationGracePeriodSeconds"], 30);
        assert_eq!(s["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(s["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(s["volumes"][0]["emptyDir"], json!({}));
        assert!(s.get("enableServiceLinks").is_none());
    }

    #[test]
    fn qos_classes() {
        let spec = |res: Value| json!({"containers": [{"name": "c", "resources": res}]});
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        let l = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            qos_class(&spec(json!({"limits": l, "requests": l}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
    }
}
