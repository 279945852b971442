//! The core group's kinds: Secret, ServiceAccount, Service, Pod and Event (kubernetes v1.37.2
//! `pkg/registry/core/{secret,serviceaccount,service,pod,event}`, `pkg/apis/core/v1/defaults.go`,
//! `pkg/apis/core/validation/validation.go`).
//!
//! - **Secret**: `stringData` is merged into `data` (its keys win) and dropped, as the v1
//!   conversion does; `type` defaults to `Opaque`. `ValidateSecret`: each key a config key,
//!   at most 1 MiB of decoded data, the keys each type requires; `ValidateSecretUpdate`:
//!   `type` never changes, and a Secret stored with `immutable: true` keeps `immutable` and
//!   `data`.
//! - **Service**: `SetDefaults_Service`; the status cleared on create (`{"loadBalancer": {}}`);
//!   `ipFamilies` and `ipFamilyPolicy` as the allocator of a single-stack IPv4 cluster sets
//!   them; a cluster IP and node ports allocated; an update that leaves them out keeps them,
//!   one that changes `clusterIP` is 422.
//! - **Pod**: see `pod`; `status` is `Pending` with its QoS class on create; generation bumps
//!   with the spec; the spec is immutable but for images and a few fields.
//! - **Event**: the object it is about lives in its namespace (`ValidateEventCreate`).
//!
//! # Differences from upstream
//! - Cluster IPs come from 10.96.0.0/12 and node ports from 30000-32767, each a function of
//!   the object's creation serial: deterministic, never random, but not checked against the
//!   addresses and ports already taken. A `clusterIP` the client asks for is accepted as
//!   written (upstream allocates it or answers 422 when taken or outside the range).
//! - Data of an `immutable` Secret is compared as a map: an empty `data` is no `data`.

use base64::Engine;
use k8s_openapi::api::core::v1::{Event, Pod, Secret, Service, ServiceAccount};
use serde_json::{Value, json};

use super::super::kinds::Kind;
use super::super::validation::ReasonedCause;
use super::pod;
use super::shared::{defaulted, each, immutable, invalid, not_supported, or_default, required};
use crate::apiserver::schema::Cause;
use crate::apiserver::strategy::Hooks;

pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            hooks: Some(&SECRET),
            ..Kind::base("", "Secret", "secrets", &[], |v| {
                defaulted::<Secret>(v, secret_defaults)
            })
        },
        Kind {
            hooks: Some(&Hooks::NONE),
            returns_deleted_object: true,
            ..Kind::base("", "ServiceAccount", "serviceaccounts", &["sa"], |v| {
                defaulted::<ServiceAccount>(v, |_| {})
            })
        },
        Kind {
            status_subresource: true,
            returns_deleted_object: true,
            hooks: Some(&SERVICE),
            ..Kind::base("", "Service", "services", &["svc"], |v| {
                defaulted::<Service>(v, service_defaults)
            })
        },
        Kind {
            status_subresource: true,
            tracks_generation: true,
            returns_deleted_object: true,
            hooks: Some(&POD),
            ..Kind::base("", "Pod", "pods", &["po"], |v| {
                defaulted::<Pod>(v, pod::pod_defaults)
            })
        },
        Kind {
            hooks: Some(&EVENT),
            ..Kind::base("", "Event", "events", &["ev"], |v| {
                defaulted::<Event>(v, event_defaults)
            })
        },
    ]
}

// Secrets.

static SECRET: Hooks = Hooks {
    validate: validate_secret,
    validate_update: secret_update,
    update_rules_first: true,
    ..Hooks::NONE
};

/// The v1 conversion's `stringData` merge, and `SetDefaults_Secret`.
fn secret_defaults(s: &mut Value) {
    if let Some(Value::Object(strings)) = s.as_object_mut().and_then(|m| m.remove("stringData")) {
        if !s["data"].is_object() {
            s["data"] = json!({});
        }
        for (k, v) in strings {
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
            s["data"][k] = Value::String(encoded);
        }
    }
    or_default(s, "type", json!("Opaque"));
}

/// The most bytes a Secret's data may hold (`core.MaxSecretSize`).
const MAX_SECRET_BYTES: usize = 1024 * 1024;

/// `ValidateSecret`.
fn validate_secret(s: &Value, causes: &mut Vec<Cause>) {
    let data = s["data"].as_object();
    let mut total = 0usize;
    for (k, v) in data.into_iter().flatten() {
        for m in config_key_messages(k) {
            causes.push(invalid(format!("data[{k}]"), &json!(k), m));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .map(|b| b.len())
            .unwrap_or_default();
        total = total.saturating_add(bytes);
    }
    if total > MAX_SECRET_BYTES {
        causes.push((
            "data".into(),
            "FieldValueTooLong",
            format!("Too long: may not be more than {MAX_SECRET_BYTES} bytes"),
        ));
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let key = |k: &str| format!("data[{k}]");
    match s["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let name = "kubernetes.io/service-account.name";
            if s["metadata"]["annotations"][name]
                .as_str()
                .is_none_or(str::is_empty)
            {
                causes.push(required(format!("metadata.annotations[{name}]")));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => causes.push(required(key(".dockercfg"))),
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            causes.push(required(key(".dockerconfigjson")))
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            causes.push(required(key("username")));
            causes.push(required(key("password")));
        }
        "kubernetes.io/ssh-auth"
            if s["data"]["ssh-privatekey"]
                .as_str()
                .is_none_or(str::is_empty) =>
        {
            causes.push(required(key("ssh-privatekey")))
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    causes.push(required(key(k)));
                }
            }
        }
        _ => {}
    }
}

/// `IsConfigMapKey`'s messages for `k`.
fn config_key_messages(k: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if k.len() > 253 {
        out.push("must be no more than 253 characters");
    }
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        out.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
             (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
             '[-._a-zA-Z0-9]+')",
        );
    }
    if k == "." {
        out.push("must not be '.'");
    } else if k == ".." {
        out.push("must not be '..'");
    } else if k.starts_with("..") {
        out.push("must not start with '..'");
    }
    out
}

/// What upstream says of each field an immutable Secret keeps.
const IMMUTABLE: &str = "Forbidden: field is immutable when `immutable` is set";

/// `ValidateSecretUpdate`: `type` is immutable; an immutable Secret keeps `immutable` and
/// `data`.
fn secret_update(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    immutable(new, old, "type", causes);
    if old["immutable"] == Value::Bool(true) {
        if new["immutable"] != Value::Bool(true) {
            causes.push(("immutable", "FieldValueForbidden", IMMUTABLE.into()));
        }
        let map = |v: &Value| v.as_object().filter(|m| !m.is_empty()).cloned();
        if map(&new["data"]) != map(&old["data"]) {
            causes.push(("data", "FieldValueForbidden", IMMUTABLE.into()));
        }
    }
}

// Services.

static SERVICE: Hooks = Hooks {
    validate: validate_service,
    validate_update: service_update,
    prepare_for_create: service_create,
    prepare_for_update: service_update_keeps,
    update_rules_first: true,
    ..Hooks::NONE
};

/// `SetDefaults_Service`, and the status Go always sends.
fn service_defaults(s: &mut Value) {
    let spec = &mut s["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    or_default(spec, "sessionAffinity", json!("None"));
    match spec["sessionAffinity"].as_str() {
        Some("None") => {
            spec.as_object_mut()
                .map(|m| m.remove("sessionAffinityConfig"));
        }
        Some("ClientIP")
            if spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"].is_null() =>
        {
            spec["sessionAffinityConfig"] = json!({"clientIP": {"timeoutSeconds": 10800}});
        }
        _ => {}
    }
    or_default(spec, "type", json!("ClusterIP"));
    each(spec, "ports").for_each(|p| {
        or_default(p, "protocol", json!("TCP"));
        let target = &p["targetPort"];
        if target.is_null() || *target == json!(0) || *target == json!("") {
            p["targetPort"] = p["port"].clone();
        }
    });
    let ty = spec["type"].as_str().unwrap_or_default().to_owned();
    let external = matches!(ty.as_str(), "NodePort" | "LoadBalancer")
        || spec["externalIPs"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
    if external {
        or_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        or_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        or_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    // Go's `ServiceStatus` and its `loadBalancer` are structs: always sent.
    or_default(s, "status", json!({}));
    or_default(&mut s["status"], "loadBalancer", json!({}));
}

/// The creation serial in a uid this server gave (its last twelve hex digits).
fn serial(obj: &Value) -> u64 {
    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
    u64::from_str_radix(uid.rsplit('-').next().unwrap_or_default(), 16).unwrap_or_default()
}

/// The first cluster IP given out (10.96.0.10; 10.96.0.1 is the `kubernetes` service's).
const FIRST_CLUSTER_IP: u32 = (10 << 24) | (96 << 16) | 10;
/// How many cluster IPs 10.96.0.0/12 gives out from [`FIRST_CLUSTER_IP`].
const CLUSTER_IPS: u64 = (1 << 20) - 11;
/// The node port range (`--service-node-port-range`'s default).
const NODE_PORTS: (u64, u64) = (30000, 32767);

/// `PrepareForCreate` and the REST layer's allocation: the status cleared, IP families, a
/// cluster IP unless headless or ExternalName, node ports for NodePort and LoadBalancer.
fn service_create(s: &mut Value) {
    s["status"] = json!({"loadBalancer": {}});
    let n = serial(s);
    let spec = &mut s["spec"];
    let ty = spec["type"].as_str().unwrap_or_default().to_owned();
    if ty == "ExternalName" {
        return;
    }
    let headless = spec["clusterIP"] == "None";
    if headless && spec["selector"].as_object().is_none_or(|m| m.is_empty()) {
        or_default(spec, "ipFamilyPolicy", json!("RequireDualStack"));
        or_default(spec, "ipFamilies", json!(["IPv4", "IPv6"]));
    } else {
        or_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        or_default(spec, "ipFamilies", json!(["IPv4"]));
    }
    if spec["clusterIP"].as_str().is_none_or(str::is_empty) {
        let ip = std::net::Ipv4Addr::from(FIRST_CLUSTER_IP + (n % CLUSTER_IPS) as u32);
        spec["clusterIP"] = json!(ip.to_string());
    }
    or_default(spec, "clusterIPs", json!([spec["clusterIP"].clone()]));
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        let span = NODE_PORTS.1 - NODE_PORTS.0 + 1;
        for (i, p) in each(spec, "ports").enumerate() {
            let port = NODE_PORTS.0 + (n.wrapping_mul(7).wrapping_add(i as u64)) % span;
            or_default(p, "nodePort", json!(port));
        }
    }
}

/// The REST layer's update: allocated values the body leaves out are kept
/// (`patchAllocatedValues`), and so are the IP families.
fn service_update_keeps(new: &mut Value, old: &Value) {
    let same_type = new["spec"]["type"] == old["spec"]["type"];
    for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if same_type && !old["spec"][f].is_null() {
            or_default(&mut new["spec"], f, old["spec"][f].clone());
        }
    }
    if same_type {
        let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
        each(&mut new["spec"], "ports").for_each(|p| {
            if let Some(o) = old_ports.iter().find(|o| o["port"] == p["port"])
                && !o["nodePort"].is_null()
            {
                or_default(p, "nodePort", o["nodePort"].clone());
            }
        });
    }
}

/// `ValidateService`'s rules a controller commonly meets.
fn validate_service(s: &Value, causes: &mut Vec<Cause>) {
    let spec = &s["spec"];
    let types = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    let ty = &spec["type"];
    if !ty.as_str().is_some_and(|t| types.contains(&t)) {
        causes.push(not_supported("spec.type", ty, &types));
    }
    let ports = spec["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ty != "ExternalName" && spec["clusterIP"] != "None" && ports.is_empty() {
        causes.push(required("spec.ports"));
    }
    if ty == "ExternalName" && spec["externalName"].as_str().is_none_or(str::is_empty) {
        causes.push(required("spec.externalName"));
    }
    for (i, p) in ports.iter().enumerate() {
        if ports.len() > 1 && p["name"].as_str().is_none_or(str::is_empty) {
            causes.push(required(format!("spec.ports[{i}].name")));
        }
        if !p["port"].as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
            causes.push(invalid(
                format!("spec.ports[{i}].port"),
                &p["port"],
                "must be between 1 and 65535, inclusive",
            ));
        }
        let protocol = &p["protocol"];
        if !matches!(protocol.as_str(), Some("TCP" | "UDP" | "SCTP")) {
            causes.push(not_supported(
                format!("spec.ports[{i}].protocol"),
                protocol,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    let affinity = ["ClientIP", "None"];
    let a = &spec["sessionAffinity"];
    if !a.as_str().is_some_and(|x| affinity.contains(&x)) {
        causes.push(not_supported("spec.sessionAffinity", a, &affinity));
    }
}

/// `ValidateServiceUpdate`: an allocated cluster IP does not change (unless the service
/// becomes or stops being ExternalName). A body that leaves the addresses out keeps them
/// (they are put back before upstream validates).
fn service_update(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    let external = |v: &Value| v["spec"]["type"] == "ExternalName";
    if external(new) || external(old) {
        return;
    }
    let ips = |v: &Value| match &v["spec"]["clusterIPs"] {
        Value::Array(a) if !a.is_empty() => Some(Value::Array(a.clone())),
        _ => v["spec"]["clusterIP"]
            .as_str()
            .filter(|ip| !ip.is_empty())
            .map(|ip| json!([ip])),
    };
    if let (Some(n), Some(o)) = (ips(new), ips(old))
        && n[0] != o[0]
    {
        causes.push((
            "spec.clusterIPs[0]",
            "FieldValueInvalid",
            format!("Invalid value: {n}: may not change once set"),
        ));
    }
}

// Pods.

static POD: Hooks = Hooks {
    validate: validate_pod,
    validate_update: pod_update,
    prepare_for_create: pod_create,
    ..Hooks::NONE
};

/// `PrepareForCreate` (status Pending, its QoS class) and admission's additions.
fn pod_create(p: &mut Value) {
    pod::admit(p);
    let qos = pod::qos_class(&p["spec"]);
    p["status"] = json!({"phase": "Pending", "qosClass": qos});
}

fn validate_pod(p: &Value, causes: &mut Vec<Cause>) {
    pod::validate_spec(
        &p["spec"],
        "spec",
        &["Always", "Never", "OnFailure"],
        causes,
    );
}

/// `ValidatePodUpdate`: the spec may change only where upstream lets it.
fn pod_update(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    if !pod::spec_update_allowed(&new["spec"], &old["spec"]) {
        causes.push((
            "spec",
            "FieldValueForbidden",
            "Forbidden: pod updates may not change fields other than \
             `spec.containers[*].image`,`spec.initContainers[*].image`,\
             `spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
             tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it \
             was previously negative)"
                .into(),
        ));
    }
}

// Events (core/v1).

static EVENT: Hooks = Hooks {
    validate: validate_event,
    ..Hooks::NONE
};

/// Go's core/v1 Event sends its non-pointer fields always: the timestamps (null when unset),
/// the reporting fields and `source`.
fn event_defaults(e: &mut Value) {
    for f in ["firstTimestamp", "lastTimestamp", "eventTime"] {
        if e.get(f).is_none() {
            e[f] = Value::Null;
        }
    }
    or_default(e, "reportingComponent", json!(""));
    or_default(e, "reportingInstance", json!(""));
    or_default(e, "source", json!({}));
    or_default(e, "involvedObject", json!({}));
}

/// `ValidateEventCreate`'s rule a client meets first: the object it is about is in the
/// event's namespace (or cluster-scoped, in `default`).
fn validate_event(e: &Value, causes: &mut Vec<Cause>) {
    let ns = e["metadata"]["namespace"].as_str().unwrap_or_default();
    let about = &e["involvedObject"]["namespace"];
    let about_ns = about.as_str().unwrap_or_default();
    if about_ns != ns && !(about_ns.is_empty() && ns == "default") {
        causes.push(invalid(
            "involvedObject.namespace",
            &json!(about_ns),
            "does not match event.namespace",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_merged_into_data_and_type_defaults_to_opaque() {
        let mut s = json!({"stringData": {"a": "x"}, "data": {"a": "eQ==", "b": "eQ=="}});
        secret_defaults(&mut s);
        assert_eq!(
            s,
            json!({"data": {"a": "eA==", "b": "eQ=="}, "type": "Opaque"})
        );
    }

    #[test]
    fn an_immutable_secret_keeps_its_data_and_every_secret_its_type() {
        let old = json!({"immutable": true, "data": {"a": "eA=="}, "type": "Opaque"});
        let mut causes = Vec::new();
        secret_update(
            &json!({"data": {"a": "eQ=="}, "type": "kubernetes.io/tls"}),
            &old,
            &mut causes,
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.0).collect();
        assert_eq!(fields, ["type", "immutable", "data"]);
    }

    #[test]
    fn bad_keys_and_missing_type_keys_are_causes() {
        let mut causes = Vec::new();
        validate_secret(
            &json!({"data": {"bad key": "eQ=="}, "type": "kubernetes.io/tls"}),
            &mut causes,
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(fields, ["data[bad key]", "data[tls.crt]", "data[tls.key]"]);
    }

    #[test]
    fn a_service_gets_its_defaults_and_an_ip() {
        let mut s = json!({"metadata": {"uid": "00000000-0000-4000-8000-000000000005"},
                           "spec": {"ports": [{"port": 80}]}});
        service_defaults(&mut s);
        service_create(&mut s);
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(s["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(s["spec"]["clusterIP"], "10.96.0.15");
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.96.0.15"]));
        assert_eq!(s["status"], json!({"loadBalancer": {}}));
    }
}
