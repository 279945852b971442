//! Scenarios of a CustomResourceDefinition each creates for itself: its schema's rules
//! (defaults, pruning, `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`,
//! an enum, a pattern, the 422 causes), the status subresource and `metadata.generation`,
//! several versions served or not, the CRD's delete, and CEL `x-kubernetes-validations`.
//!
//! The expectations are kube-apiserver v1.37.2's answers (apiextensions-apiserver v0.37.2:
//! `pkg/apiserver/customresource_handler.go`, `pkg/apiserver/schema/`,
//! `pkg/registry/customresource/strategy.go`, `pkg/controller/establish/`,
//! `pkg/controller/finalizer/`, `pkg/apiserver/schema/cel/validation.go`).
//!
//! Each CRD's group is made from the scenario's namespace (`c-NONCE-NAME.conformance.test`),
//! so two runs never share one, and both servers see the same names. A CRD is deleted at the
//! scenario's end (unrecorded) unless its delete is what the scenario checks.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    error::ConformanceError,
    scenario::at,
    session::{Body, Session, rv},
};

/// CustomResourceDefinitions.
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// How long a CRD may take to be established and served, or to go.
const SETTLE: Duration = Duration::from_secs(30);

/// The group a scenario's CRD is in.
fn group(s: &Session) -> String {
    format!("{}.conformance.test", s.ns)
}

/// A namespaced CRD of `kind` (plural: lower case plus `s`) in `group` with `versions`.
fn crd(group: &str, kind: &str, versions: Value) -> Value {
    let plural = format!("{}s", kind.to_lowercase());
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{plural}.{group}")},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"kind": kind, "plural": plural},
                    "versions": versions}})
}

/// One version `name` with `schema`, served, stored if `storage`, with the status
/// subresource.
fn version(name: &str, storage: bool, schema: Value) -> Value {
    json!({"name": name, "served": true, "storage": storage,
           "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}})
}

/// Whether a CRD watch event shows it established.
fn established(event: &Value) -> bool {
    event["object"]["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

/// Whether a watch event is a DELETED.
fn deleted(event: &Value) -> bool {
    event["type"] == "DELETED"
}

/// Creates `body` (recorded as `create the CRD`), waits for `Established` (unrecorded: the
/// real server's controllers write it a moment later, the embedded one's at once), then
/// until `path` is served (a real server's handlers take a moment after `Established`), and
/// records the CRD as it is then (`established`).
async fn install(s: &mut Session, body: Value, path: &str) -> Result<(), ConformanceError> {
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    s.post("create the CRD", CRDS, body).await?;
    wait_established(s, &name, path).await?;
    s.get("established", &format!("{CRDS}/{name}")).await?;
    Ok(())
}

/// Waits (unrecorded) until CRD `name` is established and `path` is served.
async fn wait_established(s: &mut Session, name: &str, path: &str) -> Result<(), ConformanceError> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let crd = s
            .unrecorded("wait", http::Method::GET, &format!("{CRDS}/{name}"), None)
            .await?;
        if established(&json!({ "object": crd })) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(s.missing("established", format!("{name} never established")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    settle(s, "served", path, |code| code == 200).await
}

/// Reads `path` (unrecorded) until its code satisfies `done`, for at most [`SETTLE`].
async fn settle(
    s: &mut Session,
    step: &str,
    path: &str,
    done: fn(u16) -> bool,
) -> Result<(), ConformanceError> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let code = s.code_of(step, path).await?;
        if done(code) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(s.missing(step, format!("{path} still answers {code}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// CRD `name` as it is stored now (unrecorded).
async fn read_crd(s: &mut Session, name: &str) -> Result<Value, ConformanceError> {
    let path = format!("{CRDS}/{name}");
    s.unrecorded("read the CRD", http::Method::GET, &path, None)
        .await
}

/// Deletes the CRD `name` (unrecorded clean-up).
async fn remove(s: &mut Session, name: &str) -> Result<(), ConformanceError> {
    s.unrecorded(
        "delete the CRD",
        http::Method::DELETE,
        &format!("{CRDS}/{name}"),
        None,
    )
    .await?;
    Ok(())
}

/// The schema of `Gadget`: a required `spec` with a default, an enum with a default, a
/// pattern with a length bound, an int-or-string, a free-form object, a bounded list; a
/// `status`.
fn gadget_schema() -> Value {
    json!({"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "required": ["name"], "properties": {
            "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
            "mode": {"type": "string", "enum": ["Fast", "Slow"], "default": "Fast"},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 10},
            "port": {"x-kubernetes-int-or-string": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}}}},
        "status": {"type": "object", "properties": {"ready": {"type": "integer"}}}}})
}

/// The CRD of `Gadget` in `group`.
fn gadget_crd(group: &str) -> Value {
    crd(
        group,
        "Gadget",
        json!([version("v1", true, gadget_schema())]),
    )
}

/// Installs the scenario's `Gadget` CRD: its group, the path of its objects, its name.
async fn install_gadgets(s: &mut Session) -> Result<(String, String, String), ConformanceError> {
    let g = group(s);
    let path = format!("/apis/{g}/v1/namespaces/{{ns}}/gadgets");
    let name = format!("gadgets.{g}");
    install(s, gadget_crd(&g), &path).await?;
    Ok((g, path, name))
}

fn gadget(group: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
           "metadata": {"name": name}, "spec": spec})
}

/// A CRD's schema: defaults, pruning, preserved fields, int-or-string, the 422 causes of an
/// enum, a pattern, bounds, a type and required fields.
pub(super) async fn crd_schema(s: &mut Session) -> Result<(), ConformanceError> {
    let (g, path, name) = install_gadgets(s).await?;
    let mut valid = gadget(
        &g,
        "a",
        json!({"name": "web", "port": "80%", "free": {"any": {"x": 1}}, "bogus": 1}),
    );
    valid["junk"] = json!(true);
    let created = s.post("create", &path, valid).await?;
    s.note(
        "pruned",
        json!([created["spec"].get("bogus"), created.get("junk")]),
    );
    s.get("get", &format!("{path}/a")).await?;
    sorted_causes(
        s,
        "create failing the schema",
        http::Method::POST,
        &path,
        (
            Body::Json,
            gadget(
                &g,
                "b",
                json!({"name": "Web!", "replicas": 11, "mode": "Medium", "port": true,
                       "tags": ["x", "y", "z"]}),
            ),
        ),
    )
    .await?;
    s.post(
        "create of the wrong type",
        &path,
        gadget(&g, "c", json!({"name": "web", "replicas": "many"})),
    )
    .await?;
    s.post(
        "create without required fields",
        &path,
        json!({"apiVersion": format!("{g}/v1"), "kind": "Gadget", "metadata": {"name": "d"}}),
    )
    .await?;
    s.post(
        "create with an empty spec",
        &path,
        gadget(&g, "e", json!({})),
    )
    .await?;
    s.post(
        "create with a long name",
        &path,
        gadget(&g, "f", json!({"name": "abcdefghijkl", "port": 8080})),
    )
    .await?;
    remove(s, &name).await
}

/// The status subresource and `metadata.generation` of a CRD's objects.
pub(super) async fn crd_status(s: &mut Session) -> Result<(), ConformanceError> {
    let (g, path, name) = install_gadgets(s).await?;
    let a = format!("{path}/a");
    let created = s
        .post("create", &path, gadget(&g, "a", json!({"name": "web"})))
        .await?;
    let v1 = rv(s, "create", &created)?;
    let mut status = created.clone();
    status["status"] = json!({"ready": 1});
    status["spec"]["replicas"] = json!(5);
    s.put("status write", &format!("{a}/status"), at(status, &v1))
        .await?;
    let status = format!("{a}/status");
    for (step, at, body) in [
        (
            "status through the main endpoint",
            &a,
            json!({"status": {"ready": 9}}),
        ),
        (
            "label write",
            &a,
            json!({"metadata": {"labels": {"l": "1"}}}),
        ),
        ("spec write", &a, json!({"spec": {"replicas": 2}})),
        ("status patch", &status, json!({"status": {"ready": 2}})),
        (
            "status patch failing the schema",
            &status,
            json!({"status": {"ready": "two"}}),
        ),
    ] {
        s.patch(step, at, Body::Merge, body).await?;
    }
    remove(s, &name).await
}

/// A CRD with the scale subresource: discovery, a `Scale` read from the named paths, a patch
/// and a stale replace of it, the replicas fields' checks on every write, an object without
/// the spec replicas field, and a CRD whose status path lies under `.spec`.
pub(super) async fn crd_scale(s: &mut Session) -> Result<(), ConformanceError> {
    let g = group(s);
    let path = format!("/apis/{g}/v1/namespaces/{{ns}}/pools");
    let name = format!("pools.{g}");
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "status": {"type": "object", "properties": {
            "replicas": {"type": "integer"}, "selector": {"type": "string"}}}}});
    let scale = |status_path: &str| {
        let mut v = version("v1", true, schema.clone());
        v["subresources"]["scale"] = json!({"specReplicasPath": ".spec.replicas",
            "statusReplicasPath": status_path, "labelSelectorPath": ".status.selector"});
        v
    };
    install(
        s,
        crd(&g, "Pool", json!([scale(".status.replicas")])),
        &path,
    )
    .await?;
    s.get("discovery of the version", &format!("/apis/{g}/v1"))
        .await?;
    let pool = |name: &str, spec: Value| {
        json!({"apiVersion": format!("{g}/v1"), "kind": "Pool",
               "metadata": {"name": name}, "spec": spec})
    };
    let created = s
        .post("create", &path, pool("p", json!({"replicas": 2})))
        .await?;
    let v1 = rv(s, "create", &created)?;
    let mut status = created.clone();
    status["status"] = json!({"replicas": 1, "selector": "app=p"});
    s.put("status write", &format!("{path}/p/status"), at(status, &v1))
        .await?;
    let scale_path = format!("{path}/p/scale");
    s.get("get scale", &scale_path).await?;
    s.patch(
        "patch scale",
        &scale_path,
        Body::Merge,
        json!({"spec": {"replicas": 5}}),
    )
    .await?;
    s.get("get after the patch", &format!("{path}/p")).await?;
    let stale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "p", "resourceVersion": v1}, "spec": {"replicas": 7}});
    s.put(
        "replace scale at a stale resourceVersion",
        &scale_path,
        stale,
    )
    .await?;
    s.post(
        "create with negative replicas",
        &path,
        pool("q", json!({"replicas": -1})),
    )
    .await?;
    s.post("create without replicas", &path, pool("r", json!({})))
        .await?;
    let r_scale = format!("{path}/r/scale");
    s.get("get scale without replicas", &r_scale).await?;
    s.patch(
        "patch scale not setting replicas",
        &r_scale,
        Body::Merge,
        json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await?;
    let mut wrong = crd(&g, "Pond", json!([scale(".spec.replicas")]));
    wrong["metadata"]["name"] = json!(format!("ponds.{g}"));
    s.post("create a CRD with its status path under spec", CRDS, wrong)
        .await?;
    remove(s, &name).await
}

/// A CRD with three versions: `v1` stored, `v1beta1` served, `v2alpha1` not; discovery, a
/// create at one version read at another, and `v1beta1` no longer served.
pub(super) async fn crd_versions(s: &mut Session) -> Result<(), ConformanceError> {
    let g = group(s);
    let name = format!("things.{g}");
    let at_version = |v: &str| format!("/apis/{g}/{v}/namespaces/{{ns}}/things");
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}});
    let mut alpha = version("v2alpha1", false, schema.clone());
    alpha["served"] = json!(false);
    let body = crd(
        &g,
        "Thing",
        json!([
            version("v1beta1", false, schema.clone()),
            version("v1", true, schema.clone()),
            alpha
        ]),
    );
    install(s, body, &at_version("v1")).await?;
    settle(s, "v1beta1 served", &at_version("v1beta1"), |c| c == 200).await?;
    s.get("discovery of the group", &format!("/apis/{g}"))
        .await?;
    let thing = |version: &str, name: &str| {
        json!({"apiVersion": format!("{g}/{version}"), "kind": "Thing",
               "metadata": {"name": name}, "spec": {"size": 1}})
    };
    let created = s
        .post(
            "create at v1beta1",
            &at_version("v1beta1"),
            thing("v1beta1", "t"),
        )
        .await?;
    let at_v1 = s
        .get("get at v1", &format!("{}/t", at_version("v1")))
        .await?;
    let at_beta = s
        .get("get at v1beta1", &format!("{}/t", at_version("v1beta1")))
        .await?;
    // The version each answer is at (the group is the run's own).
    let version_of = |v: &Value| {
        v["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit('/').next())
            .map(str::to_owned)
    };
    s.note(
        "versions read",
        json!([
            version_of(&created),
            version_of(&at_v1),
            version_of(&at_beta)
        ]),
    );
    s.get("get at v2alpha1", &format!("{}/t", at_version("v2alpha1")))
        .await?;
    s.post(
        "create with the wrong apiVersion",
        &at_version("v1"),
        thing("v1beta1", "u"),
    )
    .await?;
    let mut changed = read_crd(s, &name).await?;
    if let Some(vs) = changed["spec"]["versions"].as_array_mut() {
        for v in vs {
            if v["name"] == "v1beta1" {
                v["served"] = json!(false);
            }
        }
    }
    s.put("stop serving v1beta1", &format!("{CRDS}/{name}"), changed)
        .await?;
    settle(s, "v1beta1 gone", &at_version("v1beta1"), |c| c == 404).await?;
    s.get(
        "get at v1beta1 after",
        &format!("{}/t", at_version("v1beta1")),
    )
    .await?;
    s.get("get at v1 after", &format!("{}/t", at_version("v1")))
        .await?;
    remove(s, &name).await
}

/// Deleting a CRD deletes its objects (one DELETED each), then the CRD; its resource is no
/// longer served.
pub(super) async fn crd_delete(s: &mut Session) -> Result<(), ConformanceError> {
    let (g, path, name) = install_gadgets(s).await?;
    for n in ["a", "b"] {
        s.post(
            &format!("create {n}"),
            &path,
            gadget(&g, n, json!({"name": "web"})),
        )
        .await?;
    }
    s.get("list", &path).await?;
    let crd_now = read_crd(s, &name).await?;
    let crd_from = rv(s, "read the CRD", &crd_now)?;
    let answer = s
        .delete("delete the CRD", &format!("{CRDS}/{name}"), None)
        .await?;
    s.note(
        "marked",
        json!([
            answer["metadata"]["deletionTimestamp"].is_string(),
            answer["metadata"]["finalizers"]
        ]),
    );
    s.watch_for(
        "the CRD goes",
        &format!(
            "{CRDS}?watch=true&fieldSelector=metadata.name%3D{name}&resourceVersion={crd_from}"
        ),
        deleted,
        SETTLE,
    )
    .await?;
    settle(s, "not served", &path, |c| c == 404).await?;
    s.get("list after", &path).await?;
    s.get("get the CRD after", &format!("{CRDS}/{name}"))
        .await?;
    // The objects went with it: the same CRD created again serves none.
    s.post("create the CRD again", CRDS, gadget_crd(&g)).await?;
    wait_established(s, &name, &path).await?;
    s.get("list after creating it again", &path).await?;
    remove(s, &name).await
}

/// Sends `body` to `path` with `method` (unrecorded) and records its code, reason and
/// causes, the causes sorted: kube-apiserver walks an object's properties in Go's map order,
/// so the order of causes from sibling fields changes from one request to the next.
async fn sorted_causes(
    s: &mut Session,
    step: &str,
    method: http::Method,
    path: &str,
    body: (Body, Value),
) -> Result<(), ConformanceError> {
    let answer = s.unrecorded(step, method, path, Some(body)).await?;
    let mut causes: Vec<Value> = answer["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    causes.sort_by_key(|c| (c["field"].to_string(), c["message"].to_string()));
    s.note(
        step,
        json!({"code": answer["code"], "reason": answer["reason"], "causes": causes}),
    );
    Ok(())
}

/// The schema of `Limit`: CEL rules at `spec` (one with a `fieldPath`, a `reason` and a
/// `messageExpression`), a transition rule and a pattern rule on `mode`, a rule over a
/// bounded list.
fn limit_schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.max < 100", "reason": "FieldValueForbidden", "fieldPath": ".max",
                 "messageExpression": "self.max > 500 ? 'max is far too high' : 'max is too high'"}],
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
                              {"rule": "self.all(n, n.lowerAscii() == n)"}]}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

fn limit(group: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{group}/v1"), "kind": "Limit",
           "metadata": {"name": name}, "spec": spec})
}

/// CEL `x-kubernetes-validations`: objects that pass, that fail (the causes compared, sorted),
/// a transition rule on update, a blocking schema error, and the CRDs refused or accepted
/// for their rules.
pub(super) async fn crd_cel(s: &mut Session) -> Result<(), ConformanceError> {
    let g = group(s);
    let path = format!("/apis/{g}/v1/namespaces/{{ns}}/limits");
    let name = format!("limits.{g}");
    install(
        s,
        crd(&g, "Limit", json!([version("v1", true, limit_schema())])),
        &path,
    )
    .await?;
    s.post(
        "create passing",
        &path,
        limit(
            &g,
            "a",
            json!({"min": 1, "max": 5, "ratio": 2, "mode": "ab", "names": ["x"]}),
        ),
    )
    .await?;
    sorted_causes(
        s,
        "create failing the rules",
        http::Method::POST,
        &path,
        (
            Body::Json,
            limit(
                &g,
                "b",
                json!({"min": 500, "max": 200, "ratio": 2.5, "mode": "Ab", "names": ["x", "Y"]}),
            ),
        ),
    )
    .await?;
    let (a, status) = (format!("{path}/a"), format!("{path}/a/status"));
    for (step, at, body) in [
        (
            "change the immutable mode",
            &a,
            json!({"spec": {"mode": "cd"}}),
        ),
        ("change another field", &a, json!({"spec": {"max": 6}})),
        ("status write", &status, json!({"status": {"seen": 1}})),
    ] {
        s.patch(step, at, Body::Merge, body).await?;
    }
    s.post(
        "create with a type error",
        &path,
        limit(&g, "c", json!({"min": "one", "max": 1000})),
    )
    .await?;
    // CRDs refused, or not, for their rules alone (the rule on `spec` replaced).
    let with_rule = |kind: &str, rule: Value| {
        let mut schema = limit_schema();
        schema["properties"]["spec"]["x-kubernetes-validations"] = json!([rule]);
        crd(&g, kind, json!([version("v1", true, schema)]))
    };
    for (step, kind, rule) in [
        (
            "a CRD whose rule does not compile",
            "Broken",
            json!({"rule": "self.min <="}),
        ),
        (
            "a CRD whose rule names an unknown field",
            "Unknown",
            json!({"rule": "self.nope > 1"}),
        ),
        (
            "a CRD whose rule calls isSorted",
            "Sorted",
            json!({"rule": "self.names.isSorted()"}),
        ),
        (
            "a CRD whose messageExpression may cost too much",
            "Costly",
            json!({"rule": "self.max < 100", "messageExpression": "'max is ' + string(self.max)"}),
        ),
    ] {
        s.post(step, CRDS, with_rule(kind, rule)).await?;
    }
    for kind in ["brokens", "unknowns", "sorteds", "costlys"] {
        remove(s, &format!("{kind}.{g}")).await?;
    }
    remove(s, &name).await
}
