//! CustomResourceDefinitions on the embedded server: a CRD POSTed to it is stored,
//! established, and its resource served, as kube-apiserver v1.37.2 serves it
//! (apiextensions-apiserver v0.37.2: `pkg/registry/customresourcedefinition`,
//! `pkg/controller/status/naming_controller.go`, `pkg/controller/establish`,
//! `pkg/controller/finalizer`, `pkg/apiserver/customresource_handler.go`,
//! `pkg/apiserver/schema`).
//!
//! Every test runs under tokio's paused clock against the in-process client: no socket, so
//! virtual time only moves when every task waits (the two seconds a create waits after its
//! CRD was established pass at once). Every await that could hang is bounded by `within`,
//! which names the deadlock it suspects.

mod apiserver_support;

use apiserver_support::within;
use controlloop::apiserver::Cluster;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::discovery::{Discovery, Scope};
use kube::{CustomResource, CustomResourceExt, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A user's own resource, defined in the test: kube's derive writes its CRD.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "stable.example.com",
    version = "v1",
    kind = "CronTab",
    namespaced,
    status = "CronTabStatus",
    shortname = "ct"
)]
#[serde(rename_all = "camelCase")]
pub struct CronTabSpec {
    pub cron_spec: String,
    pub replicas: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CronTabStatus {
    pub runs: i32,
}

fn cron(name: &str, replicas: i32) -> CronTab {
    CronTab::new(
        name,
        CronTabSpec {
            cron_spec: "* * * * */5".into(),
            replicas,
        },
    )
}

/// The Status of a failed call, or a panic naming what succeeded instead.
fn status_of<T: std::fmt::Debug>(r: kube::Result<T>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The causes of a 422, as `(field, reason, message)`.
fn causes(s: &Status) -> Vec<(String, String, String)> {
    s.details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.field.clone(), c.reason.clone(), c.message.clone()))
                .collect()
        })
        .unwrap_or_default()
}

async fn install(
    client: &kube::Client,
    crd: &CustomResourceDefinition,
) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    within(
        "the CRD create never answered",
        crds.create(&PostParams::default(), crd),
    )
    .await
    .expect("the CRD was refused");
    let name = crd.metadata.name.as_deref().unwrap();
    within("the CRD get never answered", crds.get(name))
        .await
        .unwrap()
}

fn condition(crd: &CustomResourceDefinition, ty: &str) -> (String, String) {
    let c = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == ty))
        .unwrap_or_else(|| panic!("no {ty} condition on {crd:?}"));
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

/// Teaches: a CRD from kube's derive is established at once, and its resource then answers
/// every verb, typed and dynamic, with the generation and the status subresource the
/// custom resource strategy keeps.
#[tokio::test(start_paused = true)]
async fn a_crd_from_the_derive_is_established_and_its_resource_served() {
    let client = Cluster::new(Default::default()).in_process_client();
    let crd = install(&client, &CronTab::crd()).await;
    assert_eq!(crd.metadata.generation, Some(1));
    assert_eq!(
        condition(&crd, "NamesAccepted"),
        ("True".into(), "NoConflicts".into())
    );
    assert_eq!(
        condition(&crd, "Established"),
        ("True".into(), "InitialNamesAccepted".into())
    );
    let status = crd.status.clone().unwrap();
    let accepted = status.accepted_names.unwrap();
    assert_eq!(
        (accepted.plural.as_str(), accepted.kind.as_str()),
        ("crontabs", "CronTab")
    );
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));

    let typed: Api<CronTab> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let created = within("create never answered", typed.create(&pp, &cron("a", 1)))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.spec.replicas, 1);

    // The main endpoint ignores status; /status writes only status; only spec bumps the
    // generation.
    // A status the schema refuses is not even looked at on the main endpoint.
    let patch = Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"runs": "nine"}}));
    let patched = typed
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(
        (patched.metadata.generation, patched.status),
        (Some(2), None)
    );
    let patch = Patch::Merge(json!({"spec": {"replicas": 7}, "status": {"runs": 3}}));
    let patched = typed
        .patch_status("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(patched.spec.replicas, 2);
    assert_eq!(patched.status, Some(CronTabStatus { runs: 3 }));
    let patch = Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}}));
    let labelled = typed
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));

    // The same objects through the dynamic API.
    let ar = ApiResource::erase::<CronTab>(&());
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut b = DynamicObject::new("b", &ar);
    b.data = json!({"spec": {"cronSpec": "0 * * * *", "replicas": 5}});
    within("dynamic create never answered", dynamic.create(&pp, &b))
        .await
        .unwrap();
    let names: Vec<String> = dynamic
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(typed.get("b").await.unwrap().spec.replicas, 5);

    // A watch sees a change and a delete.
    let wp = WatchParams::default();
    let rv = typed
        .get("b")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = within("the watch never opened", typed.watch(&wp, &rv))
        .await
        .unwrap()
        .boxed();
    let patch = Patch::Merge(json!({"spec": {"replicas": 6}}));
    dynamic
        .patch("b", &PatchParams::default(), &patch)
        .await
        .unwrap();
    within(
        "b's delete never answered",
        typed.delete("b", &DeleteParams::default()),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        match within("a watch event never came", events.next()).await {
            Some(Ok(WatchEvent::Modified(o))) => seen.push(("MODIFIED", o.spec.replicas)),
            Some(Ok(WatchEvent::Deleted(o))) => seen.push(("DELETED", o.spec.replicas)),
            other => panic!("unexpected watch item {other:?}"),
        }
    }
    assert_eq!(seen, [("MODIFIED", 6), ("DELETED", 6)]);
}

/// Teaches: discovery lists a CRD's resource as soon as it is established, in every
/// document kube's `Discovery` reads.
#[tokio::test(start_paused = true)]
async fn discovery_finds_an_established_crd() {
    let client = Cluster::new(Default::default()).in_process_client();
    install(&client, &CronTab::crd()).await;
    let discovery = within(
        "discovery never answered",
        Discovery::new(client.clone()).run(),
    )
    .await
    .unwrap();
    let gvk = GroupVersionKind::gvk("stable.example.com", "v1", "CronTab");
    let (ar, caps) = discovery.resolve_gvk(&gvk).expect("CronTab is discovered");
    assert_eq!(ar.plural, "crontabs");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    let crds = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    assert!(discovery.resolve_gvk(&crds).is_some());
}

/// A two-version CRD written as JSON: `v1` served, `v2` stored; cluster-scoped.
fn two_versions() -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 3, "minimum": 0},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "label": {"type": "string", "pattern": "^[a-z]+$"},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"], "properties": {
                          "name": {"type": "string"}, "port": {"type": "integer"}}}},
            "port": {"x-kubernetes-int-or-string": true},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "x-kubernetes-preserve-unknown-fields": true},
        }, "required": ["mode"]},
    }}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.shop.example.com"},
        "spec": {
            "group": "shop.example.com",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                      "listKind": "GadgetCatalog"},
            "versions": [
                {"name": "v1", "served": true, "storage": false, "schema": schema},
                {"name": "v2", "served": true, "storage": true, "schema": schema,
                 "subresources": {"status": {}}},
            ],
        },
    })
}

fn gadgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("shop.example.com", version, "Gadget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    Api::all_with(client.clone(), &ar)
}

async fn install_json(client: &kube::Client, crd: Value) -> CustomResourceDefinition {
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    install(client, &crd).await
}

/// Teaches: objects are stored at the storage version and served at the version asked
/// for, with only `apiVersion` changed (`strategy: None`).
#[tokio::test(start_paused = true)]
async fn a_multi_version_crd_stores_at_its_storage_version_and_serves_each_version() {
    let client = Cluster::new(Default::default()).in_process_client();
    let crd = install_json(&client, two_versions()).await;
    assert_eq!(
        crd.status.unwrap().stored_versions,
        Some(vec!["v2".to_string()])
    );
    let v1 = gadgets(&client, "v1");
    let v2 = gadgets(&client, "v2");
    let mut g = DynamicObject::new("g", &ApiResource::erase::<DynamicObject>(&v1_ar()));
    g.data = json!({"spec": {"mode": "fast"}});
    let created = within(
        "create never answered",
        v1.create(&PostParams::default(), &g),
    )
    .await
    .unwrap();
    assert_eq!(created.types.unwrap().api_version, "shop.example.com/v1");
    let read = v2.get("g").await.unwrap();
    assert_eq!(read.types.unwrap().api_version, "shop.example.com/v2");
    let listed = v1.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.types.kind, "GadgetCatalog");
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "shop.example.com/v1"
    );
    // Discovery prefers v2 (kube-aware version order) and lists both.
    let d = within(
        "discovery never answered",
        Discovery::new(client.clone()).run(),
    )
    .await
    .unwrap();
    let group = d.get("shop.example.com").expect("the group is discovered");
    assert_eq!(group.preferred_version_or_latest(), "v2");
    assert_eq!(group.versions().collect::<Vec<_>>(), ["v2", "v1"]);
}

fn v1_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("shop.example.com", "v1", "Gadget"),
        "gadgets",
    )
}

/// Teaches: the schema prunes unknown fields, applies defaults, keeps what
/// `x-kubernetes-preserve-unknown-fields` preserves, and refuses what it does not allow
/// with kube-apiserver's causes.
#[tokio::test(start_paused = true)]
async fn the_schema_prunes_defaults_and_validates() {
    let client = Cluster::new(Default::default()).in_process_client();
    install_json(&client, two_versions()).await;
    let api = gadgets(&client, "v2");
    let ar = ApiResource::erase::<DynamicObject>(&v1_ar());
    let mut g = DynamicObject::new("g", &ar);
    g.types.as_mut().unwrap().api_version = "shop.example.com/v2".into();
    g.data = json!({"spec": {"mode": "slow", "bogus": 1, "port": "http",
        "extra": {"anything": [1, 2]},
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1}, "x": 1}},
        "unknown": true});
    let created = within(
        "create never answered",
        api.create(&PostParams::default(), &g),
    )
    .await
    .unwrap();
    assert_eq!(
        created.data,
        json!({"spec": {"mode": "slow", "size": 3, "port": "http",
            "extra": {"anything": [1, 2]},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "x": 1}}})
    );

    let mut bad = DynamicObject::new("bad", &ar);
    bad.types.as_mut().unwrap().api_version = "shop.example.com/v2".into();
    bad.data = json!({"spec": {"mode": "medium", "size": "big", "port": true, "label": "A1",
        "at": "yesterday", "tags": ["a", "b", "a"],
        "ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}],
        "template": {"metadata": {}}}});
    let s = status_of(
        within(
            "create never answered",
            api.create(&PostParams::default(), &bad),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    let mut got = causes(&s);
    got.sort();
    assert_eq!(
        got,
        [
            ("spec.at".into(), "FieldValueTypeInvalid".into(),
             r#"Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday""#.into()),
            ("spec.label".into(), "FieldValueInvalid".into(),
             r#"Invalid value: "A1": spec.label in body should match '^[a-z]+$'"#.into()),
            ("spec.mode".into(), "FieldValueNotSupported".into(),
             r#"Unsupported value: "medium": supported values: "fast", "slow""#.into()),
            ("spec.port".into(), "FieldValueTypeInvalid".into(),
             r#"Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#.into()),
            ("spec.ports[1]".into(), "FieldValueDuplicate".into(),
             r#"Duplicate value: {"name":"x"}"#.into()),
            ("spec.size".into(), "FieldValueTypeInvalid".into(),
             r#"Invalid value: "string": spec.size in body must be of type integer: "string""#.into()),
            ("spec.tags[2]".into(), "FieldValueDuplicate".into(),
             r#"Duplicate value: "a""#.into()),
            ("spec.template.apiVersion".into(), "FieldValueRequired".into(),
             "Required value: must not be empty".into()),
            ("spec.template.kind".into(), "FieldValueRequired".into(),
             "Required value: must not be empty".into()),
        ]
    );
    let mut missing = DynamicObject::new("missing", &ar);
    missing.types.as_mut().unwrap().api_version = "shop.example.com/v2".into();
    missing.data = json!({"spec": {"size": -1}});
    let s = status_of(api.create(&PostParams::default(), &missing).await);
    let mut got = causes(&s);
    got.sort();
    assert_eq!(
        got,
        [
            (
                "spec.mode".into(),
                "FieldValueRequired".into(),
                "Required value".into()
            ),
            (
                "spec.size".into(),
                "FieldValueInvalid".into(),
                "Invalid value: -1: spec.size in body should be greater than or equal to 0".into()
            ),
        ]
    );
}

/// Teaches: deleting a CRD deletes its objects (watchers see each go), then the CRD, and
/// the resource is no longer served.
#[tokio::test(start_paused = true)]
async fn deleting_the_crd_removes_its_objects_and_stops_serving_it() {
    let cluster = Cluster::new(Default::default());
    let client = cluster.in_process_client();
    install(&client, &CronTab::crd()).await;
    let typed: Api<CronTab> = Api::namespaced(client.clone(), "default");
    for n in ["a", "b"] {
        within(
            "create never answered",
            typed.create(&PostParams::default(), &cron(n, 1)),
        )
        .await
        .unwrap();
    }
    let rv = cluster.resource_version().to_string();
    let mut events = within(
        "the watch never opened",
        typed.watch(&WatchParams::default(), &rv),
    )
    .await
    .unwrap()
    .boxed();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let marked = within(
        "the CRD delete never answered",
        crds.delete("crontabs.stable.example.com", &DeleteParams::default()),
    )
    .await
    .unwrap()
    .left()
    .expect("the delete answers with the marked CRD");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec![
            "customresourcecleanup.apiextensions.k8s.io".to_string()
        ])
    );
    let mut gone = Vec::new();
    for _ in 0..2 {
        match within("a DELETED event never came", events.next()).await {
            Some(Ok(WatchEvent::Deleted(o))) => gone.push(o.metadata.name.unwrap()),
            other => panic!("unexpected watch item {other:?}"),
        }
    }
    assert_eq!(gone, ["a", "b"]);
    assert!(
        within("the watch on a removed resource never ended", events.next())
            .await
            .is_none()
    );
    assert_eq!(
        status_of(crds.get("crontabs.stable.example.com").await).code,
        404
    );
    assert_eq!(
        status_of(typed.list(&ListParams::default()).await).code,
        404
    );
    // Installed again, it starts empty.
    install(&client, &CronTab::crd()).await;
    assert!(
        typed
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// Teaches: what a user can get wrong in a CRD is a 422 naming the field, and what this
/// server cannot do (a conversion webhook, CEL rules) is refused, never done differently.
#[tokio::test(start_paused = true)]
async fn a_wrong_or_unsupported_crd_is_refused_with_its_causes() {
    let client = Cluster::new(Default::default()).in_process_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let refuse = |mutate: fn(&mut Value)| {
        let crds = crds.clone();
        async move {
            let mut crd = two_versions();
            mutate(&mut crd);
            let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
            let s = status_of(
                within(
                    "create never answered",
                    crds.create(&PostParams::default(), &crd),
                )
                .await,
            );
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
            causes(&s)
        }
    };
    let got = refuse(|c| c["metadata"]["name"] = json!("widgets.shop.example.com")).await;
    assert_eq!(
        got,
        [(
            "metadata.name".into(),
            "FieldValueInvalid".into(),
            r#"Invalid value: "widgets.shop.example.com": must be spec.names.plural+"."+spec.group"#.into()
        )]
    );
    let got = refuse(|c| c["spec"]["versions"][0]["storage"] = json!(true)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].0.as_str(), got[0].1.as_str()),
        ("spec.versions", "FieldValueInvalid")
    );
    assert!(
        got[0]
            .2
            .ends_with("must have exactly one version marked as storage version"),
        "{got:?}"
    );
    let got = refuse(|c| {
        c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://x.example.com"}}})
    })
    .await;
    assert_eq!(got[0].0, "spec.conversion.strategy");
    assert!(
        got[0].2.contains("Webhook") && got[0].2.contains("does not call conversion webhooks"),
        "{got:?}"
    );
    // A CEL rule calling a function of Kubernetes' libraries the server does not evaluate.
    let got = refuse(|c| {
        c["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
            json!([{"rule": "self.spec.tags.isSorted()"}])
    })
    .await;
    assert_eq!(
        got[0].0,
        "spec.versions[1].schema.openAPIV3Schema.x-kubernetes-validations[0].rule"
    );
    assert!(
        got[0].2.contains(r#"the CEL function "isSorted""#),
        "{got:?}"
    );
    let got = refuse(|c| {
        c["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["size"]["multipleOf"] = json!(2)
    })
    .await;
    assert_eq!(
        got,
        [(
            "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[size].multipleOf"
                .into(),
            "FieldValueForbidden".into(),
            "Forbidden: this embedded server does not evaluate multipleOf in a schema yet".into()
        )]
    );
    let got = refuse(|c| {
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["loose"] = json!({})
    })
    .await;
    assert_eq!(
        got,
        [(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[loose].type"
                .into(),
            "FieldValueRequired".into(),
            "Required value: must not be empty for specified object fields".into()
        )]
    );
    // Nothing was stored.
    assert!(
        crds.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// Teaches: `kubectl apply -f crd.yaml` sends the YAML file as a JSON body; the server takes
/// it as any client's CRD.
#[tokio::test(start_paused = true)]
async fn a_crd_posted_as_kubectl_apply_sends_it_is_served() {
    let client = Cluster::new(Default::default()).in_process_client();
    let yaml = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    kind: CronTab
    plural: crontabs
    singular: crontab
    shortNames: [ct]
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec:
                  type: string
                image:
                  type: string
                replicas:
                  type: integer
"#;
    let body: Value = serde_saphyr::from_str(yaml).unwrap();
    let (code, _, _) = apiserver_support::send(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let ct: Value = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"}});
    let (code, created, _) = apiserver_support::send(
        &client,
        "POST",
        "/apis/stable.example.com/v1/namespaces/default/crontabs",
        "application/json",
        serde_json::to_vec(&ct).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["image"], "my-awesome-cron-image");
    assert_eq!(CronTab::kind(&()), "CronTab");
}

/// Teaches: a schema is walked for every write, so its size is bounded when the CRD is
/// written: a schema deeper or larger than the server walks is a 422 naming the bound, and
/// the server goes on serving.
#[tokio::test(start_paused = true)]
async fn a_hostile_schema_is_refused_before_it_is_ever_walked() {
    let client = Cluster::new(Default::default()).in_process_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let with_schema = |schema: Value| {
        let mut crd = two_versions();
        for v in 0..2 {
            crd["spec"]["versions"][v]["schema"]["openAPIV3Schema"] = schema.clone();
        }
        serde_json::from_value::<CustomResourceDefinition>(crd).unwrap()
    };
    let mut deep = json!({"type": "string"});
    for _ in 0..40 {
        deep = json!({"type": "object", "properties": {"a": deep}});
    }
    let wide: serde_json::Map<String, Value> = (0..5_000)
        .map(|i| (format!("f{i}"), json!({"type": "string"})))
        .collect();
    let wide = json!({"type": "object", "properties": wide});
    for (what, schema) in [("deep", deep), ("wide", wide)] {
        let s = status_of(
            within(
                "a hostile CRD was never answered",
                crds.create(&PostParams::default(), &with_schema(schema)),
            )
            .await,
        );
        assert_eq!(s.code, 422, "{what}: {s:?}");
        assert!(
            causes(&s)
                .iter()
                .any(|c| c.1 == "FieldValueForbidden" && c.2.contains("levels deep")),
            "{what}: {s:?}"
        );
    }
    // A pattern whose program would be huge is refused, not compiled to its size.
    let huge = json!({"type": "object", "properties": {
        "spec": {"type": "string", "pattern": "(((a{100}){100}){100})"}}});
    let s = status_of(
        crds.create(&PostParams::default(), &with_schema(huge))
            .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert!(
        causes(&s)
            .iter()
            .any(|c| c.0.ends_with("properties[spec].pattern")
                && c.2.contains("must be a valid regular expression")),
        "{s:?}"
    );
    install_json(&client, two_versions()).await;
}

/// Teaches: the CRD's delete waits for its instances: one held by a finalizer keeps the CRD
/// Terminating (and its resource refusing creates, 403) until the finalizer goes.
#[tokio::test(start_paused = true)]
async fn a_crd_waits_for_an_instance_held_by_a_finalizer() {
    let client = Cluster::new(Default::default()).in_process_client();
    install(&client, &CronTab::crd()).await;
    let typed: Api<CronTab> = Api::namespaced(client.clone(), "default");
    let mut held = cron("held", 1);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    within(
        "create never answered",
        typed.create(&PostParams::default(), &held),
    )
    .await
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "crontabs.stable.example.com";
    within(
        "the CRD delete never answered",
        crds.delete(name, &DeleteParams::default()),
    )
    .await
    .unwrap();
    let crd = crds
        .get(name)
        .await
        .expect("the CRD waits for its instance");
    assert_eq!(
        condition(&crd, "Terminating"),
        ("True".into(), "InstanceDeletionInProgress".into())
    );
    let s = status_of(typed.create(&PostParams::default(), &cron("new", 1)).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{s:?}");
    assert_eq!(
        s.message,
        r#"crontabs.stable.example.com "new" is forbidden: create not allowed while custom resource definition is terminating"#
    );
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    within(
        "the finalizer's removal never answered",
        typed.patch("held", &PatchParams::default(), &patch),
    )
    .await
    .unwrap();
    assert_eq!(status_of(crds.get(name).await).code, 404);
}

/// Teaches: the naming controller refuses a kind another CRD of the group was given:
/// `NamesAccepted` is False with upstream's reason (the last conflict it checks: the list
/// kind, `CronTabList`, defaulted from the kind), and the resource is not served.
#[tokio::test(start_paused = true)]
async fn a_crd_whose_kind_is_taken_is_not_established() {
    let client = Cluster::new(Default::default()).in_process_client();
    install(&client, &CronTab::crd()).await;
    let mut twin = serde_json::to_value(CronTab::crd()).unwrap();
    twin["metadata"]["name"] = json!("crontwins.stable.example.com");
    twin["spec"]["names"] =
        json!({"plural": "crontwins", "singular": "crontwin", "kind": "CronTab"});
    let crd = install_json(&client, twin).await;
    assert_eq!(
        condition(&crd, "NamesAccepted"),
        ("False".into(), "ListKindConflict".into())
    );
    assert_eq!(
        condition(&crd, "Established"),
        ("False".into(), "NotAccepted".into())
    );
    let gvk = GroupVersionKind::gvk("stable.example.com", "v1", "CronTab");
    let twins: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "crontwins"),
    );
    assert_eq!(
        status_of(twins.list(&ListParams::default()).await).code,
        404
    );
}

/// A CRD whose rules are CEL `x-kubernetes-validations`: at the root, on a property with a
/// `fieldPath` and a `reason`, a `messageExpression`, and a transition rule.
fn with_rules() -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.max < 100", "reason": "FieldValueForbidden", "fieldPath": ".max",
                 "messageExpression": "self.max > 500 ? 'max is far too high' : 'max is too high'"},
            ],
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "ratio": {"type": "number",
                          "x-kubernetes-validations": [{"rule": "self / 2.0 <= 1.0"}]},
                "mode": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "mode is immutable"},
                    {"rule": "self.matches('^[a-z]+$')"}]},
                "names": {"type": "array", "maxItems": 5,
                          "items": {"type": "string", "maxLength": 10},
                          "x-kubernetes-validations": [
                              {"rule": "self.all(n, n.lowerAscii() == n)"}]},
            }},
    }}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "limits.rules.example.com"},
        "spec": {
            "group": "rules.example.com",
            "scope": "Cluster",
            "names": {"plural": "limits", "kind": "Limit"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema,
                          "subresources": {"status": {}}}],
        },
    })
}

fn limits(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("rules.example.com", "v1", "Limit");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "limits"),
    )
}

fn limit(name: &str, spec: Value) -> DynamicObject {
    let gvk = GroupVersionKind::gvk("rules.example.com", "v1", "Limit");
    let mut o = DynamicObject::new(name, &ApiResource::from_gvk_with_plural(&gvk, "limits"));
    o.data = json!({ "spec": spec });
    o
}

/// Teaches: a CEL rule that is false is a 422 with one cause at its node (or its
/// `fieldPath`), of its `reason`, with its message, its messageExpression's value or
/// `failed rule: RULE`, as kube-apiserver v1.37.2 answers (its messages, run on it).
#[tokio::test(start_paused = true)]
async fn cel_rules_refuse_what_they_reject_with_upstreams_causes() {
    let client = Cluster::new(Default::default()).in_process_client();
    install_json(&client, with_rules()).await;
    let api = limits(&client);
    let ok = limit(
        "ok",
        json!({"min": 1, "max": 5, "ratio": 2, "mode": "ab", "names": ["a"]}),
    );
    within(
        "create never answered",
        api.create(&PostParams::default(), &ok),
    )
    .await
    .expect("an object every rule accepts is created");
    let bad = limit(
        "bad",
        json!({"min": 500, "max": 200, "ratio": 2.5, "mode": "Ab", "names": ["a", "B"]}),
    );
    let s = status_of(
        within(
            "create never answered",
            api.create(&PostParams::default(), &bad),
        )
        .await,
    );
    assert_eq!(s.code, 422);
    let mut got = causes(&s);
    got.sort();
    let want = |f: &str, r: &str, m: &str| (f.to_string(), r.to_string(), m.to_string());
    assert_eq!(
        got,
        [
            want(
                "spec",
                "FieldValueInvalid",
                "Invalid value: min must not exceed max"
            ),
            want(
                "spec.max",
                "FieldValueForbidden",
                "Forbidden: max is too high"
            ),
            want(
                "spec.mode",
                "FieldValueInvalid",
                r#"Invalid value: "Ab": failed rule: self.matches('^[a-z]+$')"#
            ),
            want(
                "spec.names",
                "FieldValueInvalid",
                "Invalid value: failed rule: self.all(n, n.lowerAscii() == n)"
            ),
            want(
                "spec.ratio",
                "FieldValueInvalid",
                "Invalid value: 2.5: failed rule: self / 2.0 <= 1.0"
            ),
        ]
    );
    // A blocking schema error (a type) stops the rules, with upstream's extra cause.
    let typed = limit("typed", json!({"min": "x", "max": 1000}));
    let s = status_of(api.create(&PostParams::default(), &typed).await);
    let got = causes(&s);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].1, "FieldValueTypeInvalid");
    assert!(
        got[1].2.contains("some validation rules were not checked"),
        "{got:?}"
    );
}

/// Teaches: a transition rule (`oldSelf`) runs only on an update, against the stored value;
/// a rule that is not one, on a value the update did not change, is ratcheted.
#[tokio::test(start_paused = true)]
async fn a_transition_rule_runs_on_update_only() {
    let client = Cluster::new(Default::default()).in_process_client();
    install_json(&client, with_rules()).await;
    let api = limits(&client);
    let o = limit("o", json!({"min": 1, "max": 5, "mode": "ab"}));
    within(
        "create never answered",
        api.create(&PostParams::default(), &o),
    )
    .await
    .expect("a create does not run the transition rule");
    let changed = Patch::Merge(json!({"spec": {"mode": "cd"}}));
    let s = status_of(api.patch("o", &PatchParams::default(), &changed).await);
    assert_eq!(
        causes(&s),
        [(
            "spec.mode".to_string(),
            "FieldValueInvalid".to_string(),
            r#"Invalid value: "cd": mode is immutable"#.to_string()
        )]
    );
    let other = Patch::Merge(json!({"spec": {"max": 6}}));
    let done = api
        .patch("o", &PatchParams::default(), &other)
        .await
        .unwrap();
    assert_eq!(done.data["spec"]["max"], 6);
    // The status subresource runs them too: an unchanged spec passes.
    let status = Patch::Merge(json!({"status": {"x": 1}}));
    api.patch_status("o", &PatchParams::default(), &status)
        .await
        .expect("an unchanged spec passes its rules");
}

/// Teaches: a rule the server cannot evaluate exactly as cel-go does is refused with the CRD,
/// naming what it lacks, and so is a rule that does not parse or names an unknown variable.
#[tokio::test(start_paused = true)]
async fn a_rule_the_server_cannot_evaluate_refuses_the_crd() {
    let client = Cluster::new(Default::default()).in_process_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule";
    for (rule, says) in [
        ("self.q == quantity('1Gi')", r#""quantity""#),
        ("self.min <=", "compilation failed"),
        ("self.min <= other", "undeclared reference to 'other'"),
        ("self.all(k, v, v > 0)", "two-variable comprehensions"),
        ("duration('1h') > duration('1m')", r#""duration""#),
    ] {
        let mut c = with_rules();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
            json!([{"rule": rule}]);
        let crd: CustomResourceDefinition = serde_json::from_value(c).unwrap();
        let s = status_of(crds.create(&PostParams::default(), &crd).await);
        let got = causes(&s);
        assert_eq!(got[0].0, at, "{rule}: {got:?}");
        assert!(got[0].2.contains(says), "{rule}: {got:?}");
    }
    // oldSelf where items do not correlate.
    let mut c = with_rules();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["names"]
        ["items"]["x-kubernetes-validations"] = json!([{"rule": "self == oldSelf"}]);
    let crd: CustomResourceDefinition = serde_json::from_value(c).unwrap();
    let s = status_of(crds.create(&PostParams::default(), &crd).await);
    assert!(
        causes(&s)[0]
            .2
            .contains("oldSelf cannot be used on the uncorrelatable portion"),
        "{:?}",
        causes(&s)
    );
}

/// Teaches: a rule whose work on a request's values passes the server's bound is refused
/// at once (a 422 saying so), never evaluated for long.
#[tokio::test(start_paused = true)]
async fn a_rule_too_costly_for_its_values_is_refused_not_run() {
    let client = Cluster::new(Default::default()).in_process_client();
    let mut c = with_rules();
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["names"] = json!({"type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [
                {"rule": "self.all(a, self.all(b, self.all(c, a + b + c != 'nope')))"}]});
    install_json(&client, c).await;
    let api = limits(&client);
    let names: Vec<String> = (0..200).map(|i| format!("n{i}")).collect();
    let o = limit("o", json!({"min": 1, "max": 5, "names": names}));
    let started = std::time::Instant::now();
    let s = status_of(api.create(&PostParams::default(), &o).await);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(
        causes(&s)[0].2.contains("bounds the work"),
        "{:?}",
        causes(&s)
    );
    let few = limit("few", json!({"min": 1, "max": 5, "names": ["x", "y", "z"]}));
    api.create(&PostParams::default(), &few)
        .await
        .expect("the same rule on a few values runs");
}

fn with_scale(scale: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.shop.example.com"},
        "spec": {
            "group": "shop.example.com",
            "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool", "listKind": "PoolList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": scale}}],
        },
    })
}

fn pools(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("shop.example.com", "v1", "Pool");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "pools"),
    )
}

fn pool(name: &str, spec: Value) -> DynamicObject {
    let mut o = DynamicObject::new(
        name,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("shop.example.com", "v1", "Pool"),
            "pools",
        ),
    );
    o.data = json!({"spec": spec});
    o
}

/// Teaches: a CRD's `scale` subresource serves an `autoscaling/v1` Scale read from the paths
/// it names, and a write to it changes the object's spec through the object's own update
/// (apiextensions-apiserver v0.37.2 `pkg/registry/customresource/etcd.go`, `ScaleREST`).
#[tokio::test(start_paused = true)]
async fn the_scale_subresource_reads_and_writes_the_named_replicas() {
    let client = Cluster::new(Default::default()).in_process_client();
    let scale = json!({"specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"});
    install_json(&client, with_scale(scale)).await;
    let discovery: Value = within(
        "discovery never answered",
        client.request(
            http::Request::get("/apis/shop.example.com/v1")
                .body(vec![])
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    let names: Vec<&str> = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pools", "pools/status", "pools/scale"]);
    assert_eq!(discovery["resources"][2]["kind"], "Scale");
    assert_eq!(discovery["resources"][2]["group"], "autoscaling");

    let api = pools(&client);
    let created = within(
        "create",
        api.create(&PostParams::default(), &pool("a", json!({"replicas": 2}))),
    )
    .await
    .unwrap();
    let mut status = created.clone();
    status.data["status"] = json!({"replicas": 1, "selector": "app=a"});
    within(
        "status write",
        api.replace_status("a", &PostParams::default(), &status),
    )
    .await
    .unwrap();
    let scale = within("get scale", api.get_scale("a")).await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    let st = scale.status.as_ref().unwrap();
    assert_eq!((st.replicas, st.selector.as_deref()), (1, Some("app=a")));
    assert_eq!(scale.metadata.name.as_deref(), Some("a"));
    assert_eq!(scale.metadata.uid, created.metadata.uid);

    // A merge patch of the Scale: the object's spec moves, and with it its generation.
    let patch = Patch::Merge(json!({"spec": {"replicas": 5}}));
    let scaled = within(
        "patch scale",
        api.patch_scale("a", &PatchParams::default(), &patch),
    )
    .await
    .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    let now = within("get", api.get("a")).await.unwrap();
    assert_eq!(now.data["spec"]["replicas"], 5);
    assert_eq!(now.metadata.generation, Some(2));
    assert_eq!(
        scaled.metadata.resource_version,
        now.metadata.resource_version
    );

    // A replace carrying a stale resourceVersion is a conflict on the object.
    let mut stale = scale.clone();
    stale.spec.as_mut().unwrap().replicas = Some(7);
    let conflict = status_of(
        within(
            "replace scale",
            api.replace_scale("a", &PostParams::default(), &stale),
        )
        .await,
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    stale.metadata.resource_version = None;
    let replaced = within(
        "replace scale",
        api.replace_scale("a", &PostParams::default(), &stale),
    )
    .await
    .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(7));

    // Every write of the object keeps the replicas fields integers of int32's range.
    let bad = status_of(
        within(
            "create",
            api.create(&PostParams::default(), &pool("b", json!({"replicas": -1}))),
        )
        .await,
    );
    assert_eq!(
        causes(&bad),
        [(
            ".spec.replicas".to_string(),
            "FieldValueInvalid".to_string(),
            "Invalid value: -1: should be a non-negative integer".to_string()
        )]
    );

    // An object without the spec replicas field: GET is a 500 naming it, and a patch that
    // does not set it is a 400.
    within(
        "create",
        api.create(&PostParams::default(), &pool("c", json!({}))),
    )
    .await
    .unwrap();
    let missing = status_of(within("get scale", api.get_scale("c")).await);
    assert_eq!(
        (missing.code, missing.reason.as_str()),
        (500, "InternalError")
    );
    assert_eq!(
        missing.message,
        "Internal error occurred: the spec replicas field \".spec.replicas\" does not exist"
    );
    let label = Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}}));
    let empty = status_of(
        within(
            "patch scale",
            api.patch_scale("c", &PatchParams::default(), &label),
        )
        .await,
    );
    assert_eq!(
        (empty.code, empty.message.as_str()),
        (
            400,
            "the spec replicas field \".spec.replicas\" cannot be empty"
        )
    );
}

/// Teaches: a CRD's scale paths must lie under `.spec` and `.status`, with upstream's causes
/// (`ValidateCustomResourceDefinitionSubresources`), at `spec.subresources` when every version
/// shares them.
#[tokio::test(start_paused = true)]
async fn a_crd_with_scale_paths_outside_spec_and_status_is_refused() {
    let client = Cluster::new(Default::default()).in_process_client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(with_scale(
        json!({"specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas"}),
    ))
    .unwrap();
    let refused = status_of(within("create", crds.create(&PostParams::default(), &crd)).await);
    assert_eq!(refused.code, 422);
    assert_eq!(
        causes(&refused),
        [
            (
                "spec.subresources.scale.specReplicasPath".to_string(),
                "FieldValueInvalid".to_string(),
                "Invalid value: \"spec.replicas\": must be a simple json path starting with ."
                    .to_string()
            ),
            (
                "spec.subresources.scale.statusReplicasPath".to_string(),
                "FieldValueInvalid".to_string(),
                "Invalid value: \".spec.replicas\": should be a json path under .status"
                    .to_string()
            ),
        ]
    );
}
