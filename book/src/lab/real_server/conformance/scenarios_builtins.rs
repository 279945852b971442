//! The scenarios of the built-in kinds operators own: each kind's defaults on create, its
//! update rules, its status subresource and generation, compared on both servers. Their
//! entries are appended to [`super::SCENARIOS`].
//!
//! The expectations are kube-apiserver v1.37.2's answers (kubernetes v1.37.2
//! `pkg/apis/{core,apps,batch}/v1/defaults.go`, `pkg/registry/{core,apps,batch}/*/strategy.go`,
//! `pkg/apis/{core,apps,batch}/validation`), as the real server gave them when they were
//! written.

use serde_json::{Value, json};

use super::{
    error::ConformanceError,
    scenario::{On, Scenario, at, code, field},
    session::{Body, Session, rv},
};

/// Secrets.
pub const SECRETS: &str = "/api/v1/namespaces/{ns}/secrets";
/// ServiceAccounts.
pub const SERVICE_ACCOUNTS: &str = "/api/v1/namespaces/{ns}/serviceaccounts";
/// Services.
pub const SERVICES: &str = "/api/v1/namespaces/{ns}/services";
/// Pods.
pub const PODS: &str = "/api/v1/namespaces/{ns}/pods";
/// Deployments.
pub const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/{ns}/deployments";
/// StatefulSets.
pub const STATEFUL_SETS: &str = "/apis/apps/v1/namespaces/{ns}/statefulsets";
/// DaemonSets.
pub const DAEMON_SETS: &str = "/apis/apps/v1/namespaces/{ns}/daemonsets";
/// Jobs.
pub const JOBS: &str = "/apis/batch/v1/namespaces/{ns}/jobs";
/// core/v1 Events.
pub const EVENTS: &str = "/api/v1/namespaces/{ns}/events";
/// `events.k8s.io/v1` Events.
pub const NEW_EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/{ns}/events";

/// What upstream says of each field an immutable Secret keeps.
const FROZEN: &str = "\"Forbidden: field is immutable when `immutable` is set\"";

/// The causes of an update that unfreezes an immutable Secret and changes its data.
const THAWED: &str = r#"[
    {"field": "immutable", "reason": "FieldValueForbidden",
     "message": "Forbidden: field is immutable when `immutable` is set"},
    {"field": "data", "reason": "FieldValueForbidden",
     "message": "Forbidden: field is immutable when `immutable` is set"}]"#;

pub(super) const SECRET: Scenario = Scenario {
    name: "secret",
    on: On::Both,
    what: "a Secret: stringData merged into data, type Opaque; an immutable one's data, \
           immutable flag and (any one's) type are 422; bad keys and a TLS secret's missing keys",
    run: |s| Box::pin(secret(s)),
    expect: &[
        field("create", 201, "/data", r#"{"a": "eA==", "b": "eQ=="}"#),
        field("create", 201, "/type", "\"Opaque\""),
        code("create immutable", 201),
        field("change data", 422, "/details/causes/0/field", "\"data\""),
        field("change data", 422, "/details/causes/0/message", FROZEN),
        field("thaw and change data", 422, "/details/causes", THAWED),
        code("change a label", 200),
        field(
            "change the type",
            422,
            "/details/causes/0/field",
            "\"type\"",
        ),
        field("retype to tls", 422, "/details/causes/0/field", "\"type\""),
        field(
            "retype to tls",
            422,
            "/details/causes/2/field",
            "\"data[tls.key]\"",
        ),
        field(
            "bad key",
            422,
            "/details/causes/0/field",
            "\"data[bad key]\"",
        ),
        field(
            "bad key",
            422,
            "/details/causes/1/field",
            "\"data[tls.crt]\"",
        ),
    ],
};

async fn secret(s: &mut Session) -> Result<(), ConformanceError> {
    let secret = |name: &str, extra: Value| {
        let mut b = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            b[k] = v.clone();
        }
        b
    };
    s.post(
        "create",
        SECRETS,
        secret(
            "a",
            json!({"stringData": {"a": "x"}, "data": {"a": "eQ==", "b": "eQ=="}}),
        ),
    )
    .await?;
    let f = format!("{SECRETS}/f");
    let created = s
        .post(
            "create immutable",
            SECRETS,
            secret("f", json!({"immutable": true, "data": {"k": "dg=="}})),
        )
        .await?;
    s.patch(
        "change data",
        &f,
        Body::Merge,
        json!({"data": {"k": "dw=="}}),
    )
    .await?;
    let mut thawed = created.clone();
    thawed["immutable"] = json!(false);
    thawed["stringData"] = json!({"k": "w"});
    s.put("thaw and change data", &f, thawed).await?;
    s.patch(
        "change a label",
        &f,
        Body::Merge,
        json!({"metadata": {"labels": {"l": "1"}}}),
    )
    .await?;
    s.patch(
        "change the type",
        &format!("{SECRETS}/a"),
        Body::Merge,
        json!({"type": "kubernetes.io/basic-auth", "data": {"username": "dQ=="}}),
    )
    .await?;
    s.patch(
        "retype to tls",
        &format!("{SECRETS}/a"),
        Body::Merge,
        json!({"type": "kubernetes.io/tls"}),
    )
    .await?;
    s.post(
        "bad key",
        SECRETS,
        secret(
            "b",
            json!({"type": "kubernetes.io/tls", "data": {"bad key": "eQ=="}}),
        ),
    )
    .await?;
    Ok(())
}

pub(super) const SERVICE_ACCOUNT: Scenario = Scenario {
    name: "serviceaccount",
    on: On::Both,
    what: "a ServiceAccount: create, get, list, delete",
    run: |s| Box::pin(service_account(s)),
    expect: &[
        code("create", 201),
        field("get", 200, "/metadata/name", "\"sa\""),
        field("list", 200, "/items/0/metadata/name", "\"sa\""),
        field("delete", 200, "/kind", "\"ServiceAccount\""), // the object, not a Status
    ],
};

async fn service_account(s: &mut Session) -> Result<(), ConformanceError> {
    let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
                      "automountServiceAccountToken": false});
    s.post("create", SERVICE_ACCOUNTS, body).await?;
    s.get("get", &format!("{SERVICE_ACCOUNTS}/sa")).await?;
    s.get("list", SERVICE_ACCOUNTS).await?;
    s.delete("delete", &format!("{SERVICE_ACCOUNTS}/sa"), None)
        .await?;
    Ok(())
}

/// A pod template labelled `app: {app}`, one container of `image`.
fn template(app: &str, image: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": image,
                                    "ports": [{"containerPort": 80}]}]}})
}

/// A workload of `kind` (`apps/v1`) selecting `app: {app}`.
fn workload(kind: &str, name: &str, app: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
           "spec": {"selector": {"matchLabels": {"app": app}}, "template": template(app, "nginx")}})
}

pub(super) const DEPLOYMENT: Scenario = Scenario {
    name: "deployment",
    on: On::Both,
    what: "a Deployment: its and its pod template's defaults, generation with spec and \
           annotations, the status subresource, a selector that must match and never changes",
    run: |s| Box::pin(deployment(s)),
    expect: &[
        field("create", 201, "/spec/replicas", "1"),
        field(
            "create",
            201,
            "/spec/strategy",
            r#"{"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}"#,
        ),
        field("create", 201, "/spec/revisionHistoryLimit", "10"),
        field("create", 201, "/spec/progressDeadlineSeconds", "600"),
        field(
            "create",
            201,
            "/spec/template/spec/containers/0/imagePullPolicy",
            "\"Always\"",
        ),
        field("create", 201, "/metadata/generation", "1"),
        field("create", 201, "/status", "{}"),
        field("scale", 200, "/metadata/generation", "2"),
        field("annotate", 200, "/metadata/generation", "3"),
        field("label", 200, "/metadata/generation", "3"),
        field("status write", 200, "/status/replicas", "3"),
        field("status write", 200, "/metadata/generation", "3"),
        field("main write with a status", 200, "/status/replicas", "3"),
        field(
            "selector mismatch",
            422,
            "/details/causes/0/field",
            "\"spec.template.metadata.labels\"",
        ),
        field(
            "change the selector",
            422,
            "/details/causes/0/field",
            "\"spec.selector\"",
        ),
        // The status's count is the deployment controller's on kube-apiserver: not compared.
        field("get the scale", 200, "/kind", "\"Scale\""),
        field("get the scale", 200, "/spec/replicas", "3"),
        field("get the scale", 200, "/status/selector", "\"app=d\""),
        field("scale through the subresource", 200, "/spec/replicas", "4"),
        field(
            "scale below 0",
            422,
            "/message",
            r#""Scale.autoscaling \"d\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0""#,
        ),
        field("after the scale", 200, "/spec/replicas", "4"),
        field("after the scale", 200, "/metadata/generation", "4"),
    ],
};

async fn deployment(s: &mut Session) -> Result<(), ConformanceError> {
    let d = format!("{DEPLOYMENTS}/d");
    s.post("create", DEPLOYMENTS, workload("Deployment", "d", "d"))
        .await?;
    s.patch("scale", &d, Body::Merge, json!({"spec": {"replicas": 3}}))
        .await?;
    s.patch(
        "annotate",
        &d,
        Body::Merge,
        json!({"metadata": {"annotations": {"a": "1"}}}),
    )
    .await?;
    let labelled = s
        .patch(
            "label",
            &d,
            Body::Merge,
            json!({"metadata": {"labels": {"l": "1"}}}),
        )
        .await?;
    let mut body = at(
        workload("Deployment", "d", "d"),
        &rv(s, "label", &labelled)?,
    );
    body["status"] = json!({"replicas": 3, "observedGeneration": 3});
    s.put("status write", &format!("{d}/status"), body).await?;
    s.patch(
        "main write with a status",
        &d,
        Body::Merge,
        json!({"status": {"replicas": 9}}),
    )
    .await?;
    s.post(
        "selector mismatch",
        DEPLOYMENTS,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "e"},
               "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template("e", "nginx")}}),
    )
    .await?;
    s.patch(
        "change the selector",
        &d,
        Body::Merge,
        json!({"spec": {"selector": {"matchLabels": {"app": "e"}},
                        "template": {"metadata": {"labels": {"app": "e"}}}}}),
    )
    .await?;
    let scale = format!("{d}/scale");
    s.get("get the scale", &scale).await?;
    s.patch(
        "scale through the subresource",
        &scale,
        Body::Merge,
        json!({"spec": {"replicas": 4}}),
    )
    .await?;
    s.patch(
        "scale below 0",
        &scale,
        Body::Merge,
        json!({"spec": {"replicas": -1}}),
    )
    .await?;
    s.get("after the scale", &d).await?;
    Ok(())
}

pub(super) const STATEFUL_SET: Scenario = Scenario {
    name: "statefulset",
    on: On::Both,
    what: "a StatefulSet: its defaults and status on create, generation with the template, \
           the selector immutable",
    run: |s| Box::pin(stateful_set(s)),
    expect: &[
        field(
            "create",
            201,
            "/spec/podManagementPolicy",
            "\"OrderedReady\"",
        ),
        field(
            "create",
            201,
            "/spec/updateStrategy",
            r#"{"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}}"#,
        ),
        field(
            "create",
            201,
            "/status",
            r#"{"replicas": 0, "availableReplicas": 0}"#,
        ),
        field("new image", 200, "/metadata/generation", "2"),
        field(
            "change the selector",
            422,
            "/details/causes/0/field",
            "\"spec.selector\"",
        ),
    ],
};

/// Steps `create` (a workload of `kind` named `name`) and `new image` (its template's
/// container image changed by a JSON patch); the object's path.
async fn create_and_new_image(
    s: &mut Session,
    collection: &str,
    kind: &str,
    name: &str,
) -> Result<String, ConformanceError> {
    s.post("create", collection, workload(kind, name, name))
        .await?;
    let path = format!("{collection}/{name}");
    s.patch(
        "new image",
        &path,
        Body::JsonPatch,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:2"}]),
    )
    .await?;
    Ok(path)
}

async fn stateful_set(s: &mut Session) -> Result<(), ConformanceError> {
    let path = create_and_new_image(s, STATEFUL_SETS, "StatefulSet", "ss").await?;
    s.patch(
        "change the selector",
        &path,
        Body::Merge,
        json!({"spec": {"selector": {"matchLabels": {"app": "x"}},
                        "template": {"metadata": {"labels": {"app": "x"}}}}}),
    )
    .await?;
    Ok(())
}

pub(super) const DAEMON_SET: Scenario = Scenario {
    name: "daemonset",
    on: On::Both,
    what: "a DaemonSet: its defaults and status on create, its template generation annotation",
    run: |s| Box::pin(daemon_set(s)),
    expect: &[
        field(
            "create",
            201,
            "/metadata/annotations/deprecated.daemonset.template.generation",
            "\"1\"",
        ),
        field(
            "create",
            201,
            "/spec/updateStrategy",
            r#"{"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}"#,
        ),
        field(
            "new image",
            200,
            "/metadata/annotations/deprecated.daemonset.template.generation",
            "\"2\"",
        ),
        field("new image", 200, "/metadata/generation", "2"),
        field("history limit", 200, "/metadata/generation", "3"),
        field(
            "history limit",
            200,
            "/metadata/annotations/deprecated.daemonset.template.generation",
            "\"2\"",
        ),
    ],
};

async fn daemon_set(s: &mut Session) -> Result<(), ConformanceError> {
    let path = create_and_new_image(s, DAEMON_SETS, "DaemonSet", "ds").await?;
    s.patch(
        "history limit",
        &path,
        Body::Merge,
        json!({"spec": {"revisionHistoryLimit": 3}}),
    )
    .await?;
    Ok(())
}

pub(super) const JOB: Scenario = Scenario {
    name: "job",
    on: On::Both,
    what: "a Job: its defaults, the selector and labels generated from its uid, the template \
           immutable, the restart policy Always refused",
    run: |s| Box::pin(job(s)),
    expect: &[
        field("create", 201, "/spec/backoffLimit", "6"),
        field("create", 201, "/spec/completions", "1"),
        field("create", 201, "/metadata/labels/job-name", "\"j\""),
        field("create", 201, "/spec/completionMode", "\"NonIndexed\""),
        field("selector generated from the uid", 0, "", "true"),
        field(
            "change the template",
            422,
            "/details/causes/0/field",
            "\"spec.template\"",
        ),
        field("suspend", 200, "/metadata/generation", "2"),
        field(
            "restart always",
            422,
            "/details/causes/0/field",
            "\"spec.template.spec.restartPolicy\"",
        ),
    ],
};

fn job_body(name: &str, restart: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"template": {"spec": {"restartPolicy": restart,
                    "containers": [{"name": "c", "image": "busybox:1"}]}}}})
}

async fn job(s: &mut Session) -> Result<(), ConformanceError> {
    let path = format!("{JOBS}/j");
    let created = s.post("create", JOBS, job_body("j", "Never")).await?;
    let uid = &created["metadata"]["uid"];
    let generated = created["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"]
        == *uid
        && created["spec"]["template"]["metadata"]["labels"]["controller-uid"] == *uid;
    s.note("selector generated from the uid", json!(generated));
    s.patch(
        "change the template",
        &path,
        Body::JsonPatch,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "busybox:2"}]),
    )
    .await?;
    s.patch(
        "suspend",
        &path,
        Body::Merge,
        json!({"spec": {"suspend": true}}),
    )
    .await?;
    s.post("restart always", JOBS, job_body("k", "Always"))
        .await?;
    Ok(())
}

pub(super) const SERVICE: Scenario = Scenario {
    name: "service",
    on: On::Both,
    what: "a Service: its defaults, an allocated cluster IP kept by an update that leaves it \
           out and never changed, the status subresource, headless and NodePort services",
    run: |s| Box::pin(service(s)),
    expect: &[
        field("create", 201, "/spec/type", "\"ClusterIP\""),
        field("create", 201, "/spec/ports/0/targetPort", "80"),
        field("create", 201, "/spec/ipFamilies", r#"["IPv4"]"#),
        field("create", 201, "/status", r#"{"loadBalancer": {}}"#),
        code("update without the IP", 200),
        field("IP kept", 0, "", "true"),
        field(
            "change the IP",
            422,
            "/details/causes/0/field",
            "\"spec.clusterIPs[0]\"",
        ),
        field(
            "status write",
            200,
            "/status/conditions/0/type",
            "\"Ready\"",
        ),
        field("headless", 201, "/spec/ipFamilyPolicy", "\"SingleStack\""),
        field(
            "node port",
            201,
            "/spec/externalTrafficPolicy",
            "\"Cluster\"",
        ),
        field("node port allocated", 0, "", "true"),
    ],
};

fn service_body(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

async fn service(s: &mut Session) -> Result<(), ConformanceError> {
    let path = format!("{SERVICES}/svc");
    let spec = json!({"selector": {"app": "a"}, "ports": [{"port": 80}]});
    let created = s
        .post("create", SERVICES, service_body("svc", spec.clone()))
        .await?;
    let body = at(service_body("svc", spec), &rv(s, "create", &created)?);
    let updated = s.put("update without the IP", &path, body).await?;
    let ip = &created["spec"]["clusterIP"];
    s.note(
        "IP kept",
        json!(ip.is_string() && updated["spec"]["clusterIP"] == *ip),
    );
    s.patch(
        "change the IP",
        &path,
        Body::Merge,
        json!({"spec": {"clusterIP": "10.0.0.250", "clusterIPs": ["10.0.0.250"]}}),
    )
    .await?;
    let mut body = updated.clone();
    body["status"] = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "R",
        "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    s.put("status write", &format!("{path}/status"), body)
        .await?;
    s.post(
        "headless",
        SERVICES,
        service_body(
            "h",
            json!({"clusterIP": "None", "selector": {"app": "a"}, "ports": [{"port": 80, "name": "x"}]}),
        ),
    )
    .await?;
    let np = s
        .post(
            "node port",
            SERVICES,
            service_body("np", json!({"type": "NodePort", "ports": [{"port": 80}]})),
        )
        .await?;
    let port = np["spec"]["ports"][0]["nodePort"].as_i64().unwrap_or(0);
    s.note(
        "node port allocated",
        json!((30000..=32767).contains(&port)),
    );
    Ok(())
}

pub(super) const POD: Scenario = Scenario {
    name: "pod",
    on: On::Both,
    what: "a Pod: its defaults and admission's, status Pending with its QoS class, an image \
           change allowed (generation 2), other spec changes forbidden",
    run: |s| Box::pin(pod(s)),
    expect: &[
        field("create", 201, "/status/phase", "\"Pending\""),
        field("create", 201, "/status/qosClass", "\"Burstable\""),
        field("create", 201, "/spec/enableServiceLinks", "true"),
        field("create", 201, "/metadata/generation", "1"),
        field("new image", 200, "/metadata/generation", "2"),
        field(
            "change the restart policy",
            422,
            "/details/causes/0/field",
            "\"spec\"",
        ),
    ],
};

async fn pod(s: &mut Session) -> Result<(), ConformanceError> {
    let path = format!("{PODS}/p");
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                 "resources": {"limits": {"cpu": "100m"}}}]}});
    s.post("create", PODS, body).await?;
    s.patch(
        "new image",
        &path,
        Body::JsonPatch,
        json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}]),
    )
    .await?;
    s.patch(
        "change the restart policy",
        &path,
        Body::Merge,
        json!({"spec": {"restartPolicy": "Never"}}),
    )
    .await?;
    Ok(())
}

pub(super) const EVENT: Scenario = Scenario {
    name: "events",
    on: On::Both,
    what: "Events of both groups: created; a core/v1 one about another namespace's object is \
           422, an events.k8s.io/v1 one is not",
    run: |s| Box::pin(events(s)),
    expect: &[
        code("core create", 201),
        field(
            "core elsewhere",
            422,
            "/details/causes/0/field",
            "\"involvedObject.namespace\"",
        ),
        code("events.k8s.io create", 201),
        code("events.k8s.io elsewhere", 201),
    ],
};

async fn events(s: &mut Session) -> Result<(), ConformanceError> {
    let ns = s.ns.clone();
    let core = |name: &str, about_ns: &str| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
               "involvedObject": {"kind": "Pod", "name": "p", "namespace": about_ns},
               "reason": "Started", "message": "m", "type": "Normal"})
    };
    s.post("core create", EVENTS, core("e", &ns)).await?;
    s.post("core elsewhere", EVENTS, core("f", "other")).await?;
    let new = |name: &str, about_ns: &str| {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
               "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "x.io/c",
               "reportingInstance": "i", "action": "Act", "reason": "Started", "type": "Normal",
               "regarding": {"kind": "Pod", "name": "p", "namespace": about_ns}})
    };
    s.post("events.k8s.io create", NEW_EVENTS, new("g", &ns))
        .await?;
    s.post("events.k8s.io elsewhere", NEW_EVENTS, new("h", "other"))
        .await?;
    Ok(())
}

/// Every scenario of this file, for a test that they keep the suite's rules.
#[cfg(test)]
const ALL: [Scenario; 9] = [
    SECRET,
    SERVICE_ACCOUNT,
    DEPLOYMENT,
    STATEFUL_SET,
    DAEMON_SET,
    JOB,
    SERVICE,
    POD,
    EVENT,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_of_this_file_is_in_the_list() {
        for s in ALL {
            assert!(
                super::super::SCENARIOS.iter().any(|t| t.name == s.name),
                "{}",
                s.name
            );
        }
    }
}
