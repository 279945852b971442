//! The built-in kinds operators own, on the embedded server: Secret, ServiceAccount, Service,
//! Pod, Event (both groups), Deployment, StatefulSet, DaemonSet and Job, with the defaults
//! and rules kube-apiserver v1.37.2 keeps for them (kubernetes v1.37.2
//! `pkg/apis/{core,apps,batch}/v1/defaults.go`, `pkg/registry/{core,apps,batch}`,
//! `pkg/apis/{core,apps,batch}/validation`).
//!
//! Every test runs under tokio's paused clock against the in-process client; every await
//! that could hang is bounded by `within`, which names the deadlock it suspects.

mod apiserver_support;

use apiserver_support::within;
use controlloop::apiserver::Cluster;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::discovery::Discovery;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn client() -> kube::Client {
    Cluster::new(Default::default()).in_process_client()
}

/// `body` as `T` (a typed value from JSON written in the test).
fn typed<T: DeserializeOwned>(body: Value) -> T {
    serde_json::from_value(body).expect("the test's body is a valid object")
}

/// The Status of a request that must fail.
fn refused<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The `(field, reason)` of each cause of a 422.
fn causes(s: &Status) -> Vec<(String, String)> {
    s.details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.field.clone(), c.reason.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn workload(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
           "spec": {"selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

#[tokio::test(start_paused = true)]
async fn a_secret_merges_string_data_and_an_immutable_one_refuses_changes() {
    let secrets: Api<Secret> = Api::namespaced(client(), "default");
    let s: Secret = typed(json!({"metadata": {"name": "s"}, "immutable": true,
        "stringData": {"a": "x"}, "data": {"b": "eQ=="}}));
    let created = within(
        "create a secret",
        secrets.create(&PostParams::default(), &s),
    )
    .await
    .unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let data = created.data.clone().unwrap();
    assert_eq!(data["a"].0, b"x");
    assert!(created.string_data.is_none());
    let patch = Patch::Merge(json!({"immutable": false, "data": {"b": "eg=="}}));
    let e = refused(
        within(
            "patch it",
            secrets.patch("s", &PatchParams::default(), &patch),
        )
        .await,
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        causes(&e),
        [
            ("immutable".into(), "FieldValueForbidden".into()),
            ("data".into(), "FieldValueForbidden".into())
        ]
    );
    let patch = Patch::Merge(json!({"metadata": {"labels": {"l": "1"}}}));
    within(
        "label it",
        secrets.patch("s", &PatchParams::default(), &patch),
    )
    .await
    .unwrap();
    let patch = Patch::Merge(json!({"type": "kubernetes.io/tls"}));
    let e = refused(
        within(
            "retype it",
            secrets.patch("s", &PatchParams::default(), &patch),
        )
        .await,
    );
    let fields: Vec<String> = causes(&e).into_iter().map(|c| c.0).collect();
    assert_eq!(fields, ["type", "data[tls.crt]", "data[tls.key]"]);
}

#[tokio::test(start_paused = true)]
async fn a_deployment_gets_its_defaults_generation_and_status_subresource() {
    let deployments: Api<Deployment> = Api::namespaced(client(), "default");
    let d: Deployment = typed(workload("Deployment", "d"));
    let created = within("create", deployments.create(&PostParams::default(), &d))
        .await
        .unwrap();
    let v = serde_json::to_value(&created).unwrap();
    assert_eq!(v["metadata"]["generation"], 1);
    assert_eq!(v["spec"]["replicas"], 1);
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(v["spec"]["progressDeadlineSeconds"], 600);
    assert_eq!(
        v["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["securityContext"], json!({}));
    let c = &pod["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(v["status"], json!({}));

    let pp = PatchParams::default();
    let scaled = within(
        "scale",
        deployments.patch("d", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}}))),
    )
    .await
    .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    // Its scale subresource: the count and the selector, and a write through it.
    let scale = within("get its scale", deployments.get_scale("d"))
        .await
        .unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(3));
    let selector = scale.status.as_ref().unwrap().selector.clone();
    assert_eq!(selector.as_deref(), Some("app=d"));
    let merge = Patch::Merge(json!({"spec": {"replicas": 4}}));
    let scaled = within("scale it", deployments.patch_scale("d", &pp, &merge))
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let negative = Patch::Merge(json!({"spec": {"replicas": -1}}));
    let below = match within(
        "scale below 0",
        deployments.patch_scale("d", &pp, &negative),
    )
    .await
    {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a 422, got {other:?}"),
    };
    assert_eq!(
        below.message,
        "Scale.autoscaling \"d\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    let annotated = within(
        "annotate",
        deployments.patch(
            "d",
            &pp,
            &Patch::Merge(json!({"metadata": {"annotations": {"a": "1"}}})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(annotated.metadata.generation, Some(4));
    let status = within(
        "write the status",
        deployments.patch_status(
            "d",
            &pp,
            &Patch::Merge(json!({"status": {"replicas": 3}, "spec": {"replicas": 7}})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(status.status.unwrap().replicas, Some(3));
    assert_eq!(status.spec.replicas, Some(4), "spec kept");
    assert_eq!(status.metadata.generation, Some(4));

    let mut wrong = workload("Deployment", "e");
    wrong["spec"]["selector"]["matchLabels"]["app"] = json!("x");
    let e = refused(
        within(
            "mismatched selector",
            deployments.create(&PostParams::default(), &typed(wrong)),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        [(
            "spec.template.metadata.labels".into(),
            "FieldValueInvalid".into()
        )]
    );
    let moved = json!({"spec": {"selector": {"matchLabels": {"app": "z"}},
                                "template": {"metadata": {"labels": {"app": "z"}}}}});
    let e = refused(
        within(
            "move the selector",
            deployments.patch("d", &pp, &Patch::Merge(moved)),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        [("spec.selector".into(), "FieldValueInvalid".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_service_gets_its_defaults_and_keeps_its_cluster_ip() {
    let services: Api<Service> = Api::namespaced(client(), "default");
    let s: Service = typed(json!({"metadata": {"name": "svc"},
        "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}}));
    let created = within("create", services.create(&PostParams::default(), &s))
        .await
        .unwrap();
    let v = serde_json::to_value(&created).unwrap();
    let spec = &v["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    let ip = spec["clusterIP"].as_str().unwrap().to_owned();
    assert!(ip.starts_with("10."), "{ip}");
    assert_eq!(spec["clusterIPs"], json!([ip]));
    // A replace that leaves the address out keeps it; one that changes it is 422.
    let mut again = s.clone();
    again.metadata.resource_version = created.metadata.resource_version.clone();
    let replaced = within(
        "replace",
        services.replace("svc", &PostParams::default(), &again),
    )
    .await
    .unwrap();
    assert_eq!(
        replaced.spec.unwrap().cluster_ip.as_deref(),
        Some(ip.as_str())
    );
    let moved =
        Patch::Merge(json!({"spec": {"clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"]}}));
    let e = refused(
        within(
            "move it",
            services.patch("svc", &PatchParams::default(), &moved),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        [("spec.clusterIPs[0]".into(), "FieldValueInvalid".into())]
    );
    // Another service gets another address.
    let mut other = s.clone();
    other.metadata.name = Some("other".into());
    let other = within(
        "create another",
        services.create(&PostParams::default(), &other),
    )
    .await
    .unwrap();
    assert_ne!(other.spec.unwrap().cluster_ip.as_deref(), Some(ip.as_str()));
    // The delete answers with the object, as upstream's service registry does.
    let gone = within("delete", services.delete("svc", &DeleteParams::default()))
        .await
        .unwrap();
    assert!(gone.left().is_some(), "the deleted Service");
}

#[tokio::test(start_paused = true)]
async fn a_job_gets_its_selector_from_its_uid_and_keeps_its_template() {
    let jobs: Api<Job> = Api::namespaced(client(), "default");
    let j: Job = typed(
        json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    );
    let created = within("create", jobs.create(&PostParams::default(), &j))
        .await
        .unwrap();
    let v = serde_json::to_value(&created).unwrap();
    let uid = &v["metadata"]["uid"];
    assert_eq!(
        v["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    let labels = &v["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["job-name"], "j");
    assert_eq!(labels["controller-uid"], *uid);
    assert_eq!(v["metadata"]["labels"], *labels);
    assert_eq!(v["spec"]["backoffLimit"], 6);
    assert_eq!(v["spec"]["completions"], 1);
    assert_eq!(v["spec"]["parallelism"], 1);
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let patch = Patch::Json::<()>(
        serde_json::from_value(json!([{"op": "replace",
            "path": "/spec/template/spec/containers/0/image", "value": "busybox:2"}]))
        .unwrap(),
    );
    let e = refused(
        within(
            "new image",
            jobs.patch("j", &PatchParams::default(), &patch),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        [("spec.template".into(), "FieldValueInvalid".into())]
    );
    let mut always = j.clone();
    always.metadata.name = Some("k".into());
    always
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = Some("Always".into());
    let e = refused(
        within(
            "restart always",
            jobs.create(&PostParams::default(), &always),
        )
        .await,
    );
    assert_eq!(
        causes(&e),
        [(
            "spec.template.spec.restartPolicy".into(),
            "FieldValueRequired".into()
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn stateful_and_daemon_sets_pods_and_service_accounts_are_served() {
    let client = client();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let ss = within(
        "create a statefulset",
        sets.create(
            &PostParams::default(),
            &typed(workload("StatefulSet", "ss")),
        ),
    )
    .await
    .unwrap();
    let v = serde_json::to_value(&ss).unwrap();
    assert_eq!(v["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(v["spec"]["serviceName"], "");
    assert_eq!(v["status"], json!({"replicas": 0, "availableReplicas": 0}));
    let daemons: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let ds = within(
        "create a daemonset",
        daemons.create(&PostParams::default(), &typed(workload("DaemonSet", "ds"))),
    )
    .await
    .unwrap();
    let annotation = "deprecated.daemonset.template.generation";
    assert_eq!(ds.metadata.annotations.unwrap()[annotation], "1");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p: Pod = typed(json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}]}}));
    let created = within("create a pod", pods.create(&PostParams::default(), &p))
        .await
        .unwrap();
    let v = serde_json::to_value(&created).unwrap();
    assert_eq!(
        v["status"],
        json!({"phase": "Pending", "qosClass": "Burstable"})
    );
    assert_eq!(
        v["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "1"
    );
    assert_eq!(v["spec"]["tolerations"].as_array().unwrap().len(), 2);
    assert_eq!(v["spec"]["enableServiceLinks"], true);
    let patch = Patch::Merge(json!({"spec": {"restartPolicy": "Never"}}));
    let e = refused(
        within(
            "change a pod",
            pods.patch("p", &PatchParams::default(), &patch),
        )
        .await,
    );
    assert_eq!(causes(&e), [("spec".into(), "FieldValueForbidden".into())]);
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    within(
        "create a service account",
        sas.create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "sa"}})),
        ),
    )
    .await
    .unwrap();
    // kube's discovery finds every new kind.
    let discovery = within("discovery", Discovery::new(client).run())
        .await
        .unwrap();
    for (g, v, k) in [
        ("", "v1", "Secret"),
        ("", "v1", "ServiceAccount"),
        ("", "v1", "Service"),
        ("", "v1", "Pod"),
        ("", "v1", "Event"),
        ("events.k8s.io", "v1", "Event"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "StatefulSet"),
        ("apps", "v1", "DaemonSet"),
        ("batch", "v1", "Job"),
    ] {
        let (_, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(g, v, k))
            .unwrap_or_else(|| panic!("{g}/{v} {k} is discovered"));
        let status = caps.subresources.iter().any(|(s, _)| s.plural == "status");
        let want = !matches!(k, "Secret" | "ServiceAccount" | "Event");
        assert_eq!(status, want, "{k}'s status subresource");
    }
}
