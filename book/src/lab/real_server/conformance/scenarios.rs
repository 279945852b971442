//! The scenario list: each scenario is a short program of raw requests, and the answers
//! upstream gives to its key steps ([`Expect`]), checked on both servers.
//!
//! The expectations are kube-apiserver v1.37.2's answers (`k8s.io/apiserver`, tag v0.37.2:
//! `pkg/endpoints/handlers/{create,update,patch,delete,get,watch}.go`,
//! `pkg/registry/generic/registry/store.go`, `pkg/storage/cacher/cacher.go`;
//! `k8s.io/apiextensions-apiserver` v0.37.2, `pkg/registry/customresource/strategy.go`), as
//! the real server gave them when the list was written; a scenario reads its earlier answers'
//! resourceVersions, never a number typed in (except `1`, older than any history).
//!
//! Watches that need a write to happen after they open start instead from a resourceVersion
//! before the write: both servers replay history from there, so no step races another.

use std::time::Duration;

use serde_json::{Value, json};

pub use super::scenario::{Expect, On, Run, Scenario, at};

use super::{
    error::ConformanceError,
    scenario::{code, field},
    scenarios_builtins as builtins, scenarios_crds,
    session::{Body, Session, Until, rv},
};

/// ConfigMaps: `/api/v1/namespaces/{ns}/configmaps`.
pub const CM: &str = "/api/v1/namespaces/{ns}/configmaps";
/// Widgets (status subresource): `/apis/lab.controlloop.dev/v1/namespaces/{ns}/widgets`.
pub const WD: &str = "/apis/lab.controlloop.dev/v1/namespaces/{ns}/widgets";
/// PlainWidgets (no subresources).
pub const PW: &str = "/apis/lab.controlloop.dev/v1/namespaces/{ns}/plainwidgets";

/// A ConfigMap `name` with `data`.
pub fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn widget(kind: &str, name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "lab.controlloop.dev/v1", "kind": kind, "metadata": {"name": name},
           "spec": {"replicas": replicas}})
}

/// A ConfigMap `name` with `labels` and no data.
fn labelled(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}})
}

/// A resourceVersion as a number (0 if it is not one).
pub fn number(rv: &str) -> u64 {
    rv.parse().unwrap_or(0)
}

/// How long a watch read may take.
pub const WATCH: Duration = Duration::from_secs(8);

/// Every scenario, in the order the table shows them.
pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "configmap_crud",
        on: On::Both,
        what: "create, get, list, update (with and without resourceVersion), delete, create twice",
        run: |s| Box::pin(configmap_crud(s)),
        expect: &[
            code("create", 201),
            field("get", 200, "/data/k", "\"v\""),
            field("list", 200, "/items/0/metadata/name", "\"a\""),
            field("update", 200, "/data/k", "\"w\""),
            code("update without resourceVersion", 200),
            field("delete", 200, "/details/kind", "\"configmaps\""), // a Status, not the object
            code("get deleted", 404),
            field("create twice", 409, "/reason", "\"AlreadyExists\""),
        ],
    },
    Scenario {
        name: "widget_crud",
        on: On::Both,
        what: "the Widget CRD: create, update the spec, update without resourceVersion, delete",
        run: |s| Box::pin(widget_crud(s)),
        expect: &[
            field("create", 201, "/metadata/generation", "1"),
            field("update spec", 200, "/metadata/generation", "2"),
            field(
                "update without resourceVersion",
                422,
                "/reason",
                "\"Invalid\"",
            ),
            field("delete", 200, "/details/kind", "\"widgets\""), // a Status, custom resources too
            code("get deleted", 404),
        ],
    },
    Scenario {
        name: "configmap_patches",
        on: On::Both,
        what: "merge, JSON and strategic-merge patches of a ConfigMap, and the ones refused",
        run: |s| Box::pin(configmap_patches(s)),
        expect: &[
            field("merge patch", 200, "/data", r#"{"k":"w"}"#),
            field("json patch", 200, "/data", r#"{"j":"1","k":"z"}"#),
            code("json patch failing test", 422),
            code("json patch removing a missing key", 422),
            field("strategic merge patch", 200, "/data/s", "\"1\""),
            code("patch of a missing object", 404),
            field("patch renaming", 400, "/reason", "\"BadRequest\""),
        ],
    },
    Scenario {
        name: "widget_patches",
        on: On::Both,
        what: "patches of a custom resource: merge and JSON, strategic merge refused, a type error",
        run: |s| Box::pin(widget_patches(s)),
        expect: &[
            field("merge patch", 200, "/metadata/generation", "2"),
            field(
                "strategic merge patch",
                415,
                "/reason",
                "\"UnsupportedMediaType\"",
            ),
            field("json patch", 200, "/spec/replicas", "5"),
            field(
                "merge patch of the wrong type",
                422,
                "/reason",
                "\"Invalid\"",
            ),
            // kube-runtime's finalizer helper: a missing member tests equal to null.
            field(
                "json patch adding the first finalizer",
                200,
                "/metadata/finalizers",
                r#"["example.com/hold"]"#,
            ),
            field(
                "json patch testing a present member against null",
                422,
                "/reason",
                "\"Invalid\"",
            ),
            code("json patch testing under a missing parent", 422),
            code("json patch releasing the finalizer", 200),
        ],
    },
    Scenario {
        name: "resource_versions",
        on: On::Both,
        what: "a list's resourceVersion, a watch from it, a stale update refused",
        run: |s| Box::pin(resource_versions(s)),
        expect: &[
            code("list", 200),
            code("update", 200),
            field("stale update", 409, "/reason", "\"Conflict\""),
            field("watch from the list", 200, "/0/type", "\"MODIFIED\""),
            field("the update is newer than the list", 0, "", "true"),
        ],
    },
    Scenario {
        name: "too_old",
        on: On::WithoutWatchCache,
        what: "a watch and an exact list from resourceVersion 2, long compacted in etcd: 410",
        run: |s| Box::pin(too_old(s)),
        expect: &[
            field("watch from 2", 200, "/0/object/code", "410"),
            field("watch from 2", 200, "/0/object/reason", "\"Expired\""),
            field("exact list at 2", 410, "/reason", "\"Expired\""),
        ],
    },
    Scenario {
        name: "bookmarks",
        on: On::Both,
        what: "a watch with allowWatchBookmarks and a 2 s timeout, read to its end",
        run: |s| Box::pin(bookmarks(s)),
        expect: &[code("watch with bookmarks", 200)],
    },
    Scenario {
        name: "watch_list",
        on: On::Both,
        what: "sendInitialEvents: the objects as ADDED, then the initial-events-end bookmark",
        run: |s| Box::pin(watch_list(s)),
        expect: &[
            field("watch-list", 200, "/0/type", "\"ADDED\""),
            field("watch-list", 200, "/3/type", "\"BOOKMARK\""),
            field(
                "watch-list",
                200,
                "/3/object/metadata/annotations/k8s.io~1initial-events-end",
                "\"true\"",
            ),
            field("watch-list without bookmarks", 200, "/0/type", "\"ADDED\""),
            code("watch-list with an exact match", 422),
        ],
    },
    Scenario {
        name: "pagination",
        on: On::Both,
        what: "limit and continue over five objects; a malformed continue token",
        run: |s| Box::pin(pagination(s)),
        expect: &[
            field("page 1", 200, "/metadata/remainingItemCount", "3"),
            field("page 2", 200, "/items/1/metadata/name", "\"p4\""),
            field("page 3", 200, "/metadata/continue", "null"),
            field("bad continue", 400, "/reason", "\"BadRequest\""),
        ],
    },
    Scenario {
        name: "selectors",
        on: On::Both,
        what: "label and field selectors, invalid ones, and a watch an object leaves",
        run: |s| Box::pin(selectors(s)),
        expect: &[
            field("label equality", 200, "/items/0/metadata/name", "\"a\""),
            field("label set", 200, "/items/1/metadata/name", "\"b\""),
            field("label absent", 200, "/items/0/metadata/name", "\"c\""),
            field("invalid label selector", 400, "/reason", "\"BadRequest\""),
            field("field selector", 200, "/items/0/metadata/name", "\"b\""),
            field(
                "unsupported field selector",
                400,
                "/reason",
                "\"BadRequest\"",
            ),
            field("watch the object leaves", 200, "/0/type", "\"DELETED\""),
            field(
                "watch the object leaves",
                200,
                "/0/object/metadata/labels/app",
                "\"web\"",
            ),
        ],
    },
    Scenario {
        name: "validation",
        on: On::Both,
        what: "names and labels: 422 with causes; generateName; a namespace that differs",
        run: |s| Box::pin(validation(s)),
        expect: &[
            field(
                "invalid name",
                422,
                "/details/causes/0/field",
                "\"metadata.name\"",
            ),
            field("invalid label key", 422, "/reason", "\"Invalid\""),
            field("invalid label value", 422, "/reason", "\"Invalid\""),
            code("missing name", 422),
            code("generateName", 201),
            field("namespace differs", 400, "/reason", "\"BadRequest\""),
            field("widget without replicas", 422, "/reason", "\"Invalid\""),
        ],
    },
    Scenario {
        name: "status_subresource",
        on: On::Both,
        what: "Widget: /status writes only status, the main endpoint ignores status",
        run: |s| Box::pin(status_subresource(s)),
        expect: &[
            field("status write", 200, "/spec/replicas", "1"),
            field("status write", 200, "/metadata/generation", "1"),
            field(
                "main write with a status",
                200,
                "/status/readyReplicas",
                "1",
            ),
            field("spec write", 200, "/metadata/generation", "2"),
            field("status patch", 200, "/metadata/generation", "2"),
        ],
    },
    Scenario {
        name: "generation",
        on: On::Both,
        what: "PlainWidget (no subresource): a status write moves the generation, metadata does not",
        run: |s| Box::pin(generation(s)),
        expect: &[
            field(
                "status through the main endpoint",
                200,
                "/metadata/generation",
                "2",
            ),
            code("status endpoint", 404),
            field("label write", 200, "/metadata/generation", "2"),
        ],
    },
    Scenario {
        name: "finalizers",
        on: On::Both,
        what: "delete with a finalizer sets deletionTimestamp; no new finalizers; removal deletes",
        run: |s| Box::pin(finalizers(s)),
        expect: &[
            code("delete", 200),
            field(
                "get while deleting",
                200,
                "/metadata/finalizers",
                r#"["example.com/hold"]"#,
            ),
            field(
                "add a finalizer while deleting",
                422,
                "/reason",
                "\"Invalid\"",
            ),
            code("update while deleting", 200),
            code("remove the finalizer", 200),
            code("get after", 404),
            field("widget delete", 200, "/metadata/generation", "2"),
        ],
    },
    Scenario {
        name: "delete_preconditions",
        on: On::Both,
        what: "delete with a stale resourceVersion or another uid: 409; the right ones: 200",
        run: |s| Box::pin(delete_preconditions(s)),
        expect: &[
            field("stale resourceVersion", 409, "/reason", "\"Conflict\""),
            field("other uid", 409, "/reason", "\"Conflict\""),
            code("matching", 200),
        ],
    },
    Scenario {
        name: "dry_run",
        on: On::Both,
        what: "dryRun=All on create, update and delete changes nothing; an invalid value is 400",
        run: |s| Box::pin(dry_run(s)),
        expect: &[
            code("dry-run create", 201),
            code("get after dry-run create", 404),
            field("dry-run update", 200, "/data/k", "\"dry\""),
            field("get after dry-run update", 200, "/data/k", "\"v\""),
            code("dry-run delete", 200),
            code("get after dry-run delete", 200),
            field("invalid dryRun", 422, "/reason", "\"Invalid\""),
        ],
    },
    Scenario {
        name: "server_side_apply",
        on: On::Both,
        what: "apply creates, a second manager conflicts (409), force takes the field",
        run: |s| Box::pin(server_side_apply(s)),
        expect: &[
            code("apply create", 201),
            field("managers after create", 0, "", r#"[["alice","Apply"]]"#),
            field("apply conflict", 409, "/reason", "\"Conflict\""),
            field("apply force", 200, "/data/k", "\"bob\""),
            field("managers after force", 0, "", r#"[["bob","Apply"]]"#),
            code("apply without fieldManager", 422),
        ],
    },
    Scenario {
        name: "immutable_configmap",
        on: On::Both,
        what: "a ConfigMap created immutable: data, binaryData and immutable itself are 422",
        run: |s| Box::pin(immutable_configmap(s)),
        expect: &[
            code("create immutable", 201),
            field("change data", 422, "/details/causes/0/field", "\"data\""),
            field(
                "change data",
                422,
                "/details/causes/0/reason",
                "\"FieldValueForbidden\"",
            ),
            field(
                "change data",
                422,
                "/details/causes/0/message",
                "\"Forbidden: field is immutable when `immutable` is set\"",
            ),
            field(
                "change binaryData",
                422,
                "/details/causes/0/field",
                "\"binaryData\"",
            ),
            field(
                "thaw and change data",
                422,
                "/details/causes",
                IMMUTABLE_AND_DATA,
            ),
            field("change a label", 200, "/metadata/labels/l", "\"1\""),
        ],
    },
    Scenario {
        name: "server_set_metadata",
        on: On::Both,
        what: "an update setting deletionTimestamp is 422; an owner reference sent twice is kept once",
        run: |s| Box::pin(server_set_metadata(s)),
        expect: &[
            field(
                "set deletionTimestamp",
                422,
                "/details/causes/0/field",
                "\"metadata.deletionTimestamp\"",
            ),
            field(
                "set deletionTimestamp",
                422,
                "/details/causes/0/reason",
                "\"FieldValueInvalid\"",
            ),
            field(
                "set deletionTimestamp",
                422,
                "/details/causes/0/message",
                "\"Invalid value: \\\"2026-01-01T00:00:00Z\\\": field is immutable\"",
            ),
            field("get after", 200, "/metadata/deletionTimestamp", "null"),
            field(
                "create with an owner twice",
                201,
                "/metadata/ownerReferences/0/name",
                "\"o\"",
            ),
            field("owner references stored", 0, "", "1"),
        ],
    },
    Scenario {
        name: "delete_collection",
        on: On::Both,
        what: "DELETE on a collection with a label selector: the matching objects, one by one",
        run: |s| Box::pin(delete_collection(s)),
        expect: &[
            field("delete collection", 200, "/kind", "\"ConfigMapList\""),
            field("delete collection", 200, "/items/0/metadata/name", "\"a\""),
            field("deleted", 0, "", "2"),
            field("list after", 200, "/items/0/metadata/name", "\"c\""),
            field("watch the deletes", 200, "/0/type", "\"DELETED\""),
            field("watch the deletes", 200, "/1/object/metadata/name", "\"b\""),
            code("delete collection in every namespace", 405),
        ],
    },
    Scenario {
        name: "terminating_namespace",
        on: On::Both,
        what: "a create in a namespace being deleted: 403 with the NamespaceTerminating cause",
        run: |s| Box::pin(terminating_namespace(s)),
        expect: &[
            field(
                "delete the namespace",
                200,
                "/status/phase",
                "\"Terminating\"",
            ),
            field("create in it", 403, "/reason", "\"Forbidden\""),
            field(
                "create in it",
                403,
                "/details/causes/0/reason",
                "\"NamespaceTerminating\"",
            ),
            field(
                "create in it",
                403,
                "/details/causes/0/field",
                "\"metadata.namespace\"",
            ),
        ],
    },
    Scenario {
        name: "namespace_finalize",
        on: On::Both,
        what: "a namespace's end: another controller's token in spec.finalizers keeps it \
               Terminating after the namespace controller empties it and takes its own, until \
               PUT /finalize (PUT only) empties the list",
        run: |s| Box::pin(namespace_finalize(s)),
        expect: &[
            field(
                "create the namespace",
                201,
                "/spec/finalizers",
                "[\"example.com/x\",\"kubernetes\"]",
            ),
            field("get finalize", 405, "/reason", "\"MethodNotAllowed\""),
            code("patch finalize", 405),
            field(
                "finalize with a bad name",
                422,
                "/details/causes/0/field",
                "\"spec.finalizers[1]\"",
            ),
            field(
                "delete the namespace",
                200,
                "/status/phase",
                "\"Terminating\"",
            ),
            field(
                "the controller's last write",
                200,
                "/0/object/status/conditions/3/reason",
                "\"ContentRemoved\"",
            ),
            field(
                "the controller's last write",
                200,
                "/0/type",
                "\"MODIFIED\"",
            ),
            code("the object is gone", 404),
            field(
                "delete again",
                200,
                "/spec/finalizers",
                "[\"example.com/x\"]",
            ),
            field("finalize", 200, "/kind", "\"Namespace\""),
            code("get after finalize", 404),
        ],
    },
    Scenario {
        name: "namespace_objects_deleted",
        on: On::Both,
        what: "deleting a namespace deletes its objects one by one: a watcher of them sees one \
               DELETED each, and no 410",
        run: |s| Box::pin(namespace_objects_deleted(s)),
        expect: &[
            field("list before", 200, "/items/29/metadata/name", "\"m-29\""),
            field(
                "delete the namespace",
                200,
                "/status/phase",
                "\"Terminating\"",
            ),
            field("watch the objects", 200, "/0/type", "\"DELETED\""),
            field("watch the objects", 200, "/29/type", "\"DELETED\""),
            field("deleted", 0, "", "30"),
            field("expired", 0, "", "0"),
        ],
    },
    Scenario {
        name: "field_validation",
        on: On::Both,
        what: "fieldValidation: Strict refuses an unknown field (400; a patch 422), Warn writes, \
               an unknown directive is 422",
        run: |s| Box::pin(field_validation(s)),
        expect: &[
            field("strict create", 400, "/reason", "\"BadRequest\""),
            field("strict create", 400, "/message", STRICT_CREATE),
            code("get after the strict create", 404),
            code("warned create", 201),
            field(
                "unknown directive",
                422,
                "/details/causes/0/reason",
                "\"FieldValueNotSupported\"",
            ),
            field("strict update", 400, "/reason", "\"BadRequest\""),
            field("strict patch", 422, "/details/causes/0/field", "\"patch\""),
            code("warned patch", 200),
        ],
    },
    Scenario {
        name: "not_found",
        on: On::Both,
        what: "a missing object and a resource the server does not serve",
        run: |s| Box::pin(not_found(s)),
        expect: &[
            field("get missing", 404, "/details/kind", "\"configmaps\""),
            code("unknown resource", 404),
        ],
    },
    builtins::SECRET,
    builtins::SERVICE_ACCOUNT,
    builtins::DEPLOYMENT,
    builtins::STATEFUL_SET,
    builtins::DAEMON_SET,
    builtins::JOB,
    builtins::SERVICE,
    builtins::POD,
    builtins::EVENT,
    Scenario {
        name: "crd_schema",
        on: On::Both,
        what: "a CRD's schema: defaults, pruning, preserved fields, int-or-string, and the \
               causes of an enum, a pattern, bounds, a type and required fields",
        run: |s| Box::pin(scenarios_crds::crd_schema(s)),
        expect: &[
            code("create the CRD", 201),
            field(
                "established",
                200,
                "/status/acceptedNames/kind",
                "\"Gadget\"",
            ),
            field("create", 201, "/spec/replicas", "1"),
            field("create", 201, "/spec/mode", "\"Fast\""),
            field("create", 201, "/spec/free/any/x", "1"),
            field("create", 201, "/spec/port", "\"80%\""),
            field("pruned", 0, "", "[null,null]"),
            field("create failing the schema", 0, "/code", "422"),
            field(
                "create failing the schema",
                0,
                "/causes/0/reason",
                "\"FieldValueNotSupported\"",
            ),
            field(
                "create failing the schema",
                0,
                "/causes/2/reason",
                "\"FieldValueTypeInvalid\"",
            ),
            field(
                "create failing the schema",
                0,
                "/causes/4/reason",
                "\"FieldValueTooMany\"",
            ),
            field(
                "create of the wrong type",
                422,
                "/details/causes/0/reason",
                "\"FieldValueTypeInvalid\"",
            ),
            field(
                "create without required fields",
                422,
                "/details/causes/0/field",
                "\"spec\"",
            ),
            field(
                "create with an empty spec",
                422,
                "/details/causes/0/field",
                "\"spec.name\"",
            ),
            field(
                "create with a long name",
                422,
                "/details/causes/0/reason",
                "\"FieldValueTooLong\"",
            ),
        ],
    },
    Scenario {
        name: "crd_status",
        on: On::Both,
        what: "a CRD's status subresource: /status writes only status, generation moves on \
               spec changes only",
        run: |s| Box::pin(scenarios_crds::crd_status(s)),
        expect: &[
            field("status write", 200, "/spec/replicas", "1"),
            field("status write", 200, "/status/ready", "1"),
            field("status write", 200, "/metadata/generation", "1"),
            field(
                "status through the main endpoint",
                200,
                "/status/ready",
                "1",
            ),
            field("label write", 200, "/metadata/generation", "1"),
            field("spec write", 200, "/metadata/generation", "2"),
            field("status patch", 200, "/status/ready", "2"),
            field(
                "status patch failing the schema",
                422,
                "/details/causes/0/field",
                "\"status.ready\"",
            ),
        ],
    },
    Scenario {
        name: "crd_scale",
        on: On::Both,
        what: "a CRD's scale subresource: a Scale read from the named paths and written \
               through the object's own update; the replicas fields checked on every write",
        run: |s| Box::pin(scenarios_crds::crd_scale(s)),
        expect: &[
            field(
                "discovery of the version",
                200,
                "/resources/2/name",
                "\"pools/scale\"",
            ),
            field(
                "discovery of the version",
                200,
                "/resources/2/group",
                "\"autoscaling\"",
            ),
            field(
                "discovery of the version",
                200,
                "/resources/2/kind",
                "\"Scale\"",
            ),
            field("get scale", 200, "/apiVersion", "\"autoscaling/v1\""),
            field("get scale", 200, "/spec/replicas", "2"),
            field(
                "get scale",
                200,
                "/status",
                r#"{"replicas":1,"selector":"app=p"}"#,
            ),
            field("get scale", 200, "/metadata/name", "\"p\""),
            field("patch scale", 200, "/spec/replicas", "5"),
            field("get after the patch", 200, "/spec/replicas", "5"),
            field("get after the patch", 200, "/metadata/generation", "2"),
            field(
                "replace scale at a stale resourceVersion",
                409,
                "/reason",
                "\"Conflict\"",
            ),
            field(
                "create with negative replicas",
                422,
                "/details/causes",
                r#"[{"field":".spec.replicas","message":"Invalid value: -1: should be a non-negative integer","reason":"FieldValueInvalid"}]"#,
            ),
            code("create without replicas", 201),
            field(
                "get scale without replicas",
                500,
                "/message",
                r#""Internal error occurred: the spec replicas field \".spec.replicas\" does not exist""#,
            ),
            field(
                "patch scale not setting replicas",
                400,
                "/message",
                r#""the spec replicas field \".spec.replicas\" cannot be empty""#,
            ),
            field(
                "create a CRD with its status path under spec",
                422,
                "/details/causes/0/field",
                "\"spec.subresources.scale.statusReplicasPath\"",
            ),
        ],
    },
    Scenario {
        name: "crd_versions",
        on: On::Both,
        what: "a CRD's versions: served or not, stored at one, read at another; a version \
               no longer served",
        run: |s| Box::pin(scenarios_crds::crd_versions(s)),
        expect: &[
            field(
                "discovery of the group",
                200,
                "/preferredVersion/version",
                "\"v1\"",
            ),
            field(
                "discovery of the group",
                200,
                "/versions/1/version",
                "\"v1beta1\"",
            ),
            code("create at v1beta1", 201),
            field("versions read", 0, "", r#"["v1beta1","v1","v1beta1"]"#),
            code("get at v2alpha1", 404),
            field(
                "create with the wrong apiVersion",
                400,
                "/reason",
                "\"BadRequest\"",
            ),
            field("stop serving v1beta1", 200, "/metadata/generation", "2"),
            code("get at v1beta1 after", 404),
            code("get at v1 after", 200),
        ],
    },
    Scenario {
        name: "crd_delete",
        on: On::Both,
        what: "deleting a CRD deletes its objects, then itself; its resource is gone",
        run: |s| Box::pin(scenarios_crds::crd_delete(s)),
        expect: &[
            field(
                "delete the CRD",
                200,
                "/metadata/finalizers",
                r#"["customresourcecleanup.apiextensions.k8s.io"]"#,
            ),
            field("marked", 0, "/0", "true"),
            field("the CRD goes", 200, "/0/type", "\"DELETED\""),
            field(
                "the CRD goes",
                200,
                "/0/object/status/conditions/2/reason",
                "\"InstanceDeletionInProgress\"",
            ),
            code("list after", 404),
            field("get the CRD after", 404, "/reason", "\"NotFound\""),
            field("list after creating it again", 200, "/items", "[]"),
        ],
    },
    Scenario {
        name: "crd_cel",
        on: On::Both,
        what: "a CRD's CEL rules: objects that pass and fail, a transition rule, a blocking \
               schema error, and CRDs refused for their rules",
        run: |s| Box::pin(scenarios_crds::crd_cel(s)),
        expect: &[
            field("create passing", 201, "/spec/ratio", "2"),
            field("create failing the rules", 0, "/code", "422"),
            field(
                "create failing the rules",
                0,
                "/causes/0/message",
                "\"Invalid value: min must not exceed max\"",
            ),
            field(
                "create failing the rules",
                0,
                "/causes/1/message",
                "\"Forbidden: max is too high\"",
            ),
            field(
                "create failing the rules",
                0,
                "/causes/4/message",
                "\"Invalid value: 2.5: failed rule: self / 2.0 <= 1.0\"",
            ),
            field(
                "change the immutable mode",
                422,
                "/details/causes/0/message",
                r#""Invalid value: \"cd\": mode is immutable""#,
            ),
            field("change another field", 200, "/spec/max", "6"),
            code("status write", 200),
            field(
                "create with a type error",
                422,
                "/details/causes/1/field",
                "\"<nil>\"",
            ),
            field(
                "a CRD whose rule does not compile",
                422,
                "/details/causes/0/field",
                r#""spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule""#,
            ),
            code("a CRD whose rule names an unknown field", 422),
            code("a CRD whose rule calls isSorted", 201),
            field(
                "a CRD whose messageExpression may cost too much",
                422,
                "/details/causes/0/reason",
                "\"FieldValueForbidden\"",
            ),
        ],
    },
];

async fn configmap_crud(s: &mut Session) -> Result<(), ConformanceError> {
    let created = s.post("create", CM, cm("a", json!({"k": "v"}))).await?;
    let v1 = rv(s, "create", &created)?;
    s.get("get", &format!("{CM}/a")).await?;
    s.get("list", CM).await?;
    s.put(
        "update",
        &format!("{CM}/a"),
        at(cm("a", json!({"k": "w"})), &v1),
    )
    .await?;
    s.put(
        "update without resourceVersion",
        &format!("{CM}/a"),
        cm("a", json!({"k": "x"})),
    )
    .await?;
    s.delete("delete", &format!("{CM}/a"), None).await?;
    s.get("get deleted", &format!("{CM}/a")).await?;
    s.post("create once", CM, cm("b", json!({}))).await?;
    s.post("create twice", CM, cm("b", json!({}))).await?;
    Ok(())
}

async fn widget_crud(s: &mut Session) -> Result<(), ConformanceError> {
    let created = s.post("create", WD, widget("Widget", "w", 1)).await?;
    let v1 = rv(s, "create", &created)?;
    s.put(
        "update spec",
        &format!("{WD}/w"),
        at(widget("Widget", "w", 2), &v1),
    )
    .await?;
    s.put(
        "update without resourceVersion",
        &format!("{WD}/w"),
        widget("Widget", "w", 3),
    )
    .await?;
    s.delete("delete", &format!("{WD}/w"), None).await?;
    s.get("get deleted", &format!("{WD}/w")).await?;
    Ok(())
}

async fn configmap_patches(s: &mut Session) -> Result<(), ConformanceError> {
    let a = format!("{CM}/a");
    s.post("create", CM, cm("a", json!({"k": "v", "drop": "x"})))
        .await?;
    s.patch(
        "merge patch",
        &a,
        Body::Merge,
        json!({"data": {"k": "w", "drop": null}}),
    )
    .await?;
    s.patch(
        "json patch",
        &a,
        Body::JsonPatch,
        json!([{"op": "add", "path": "/data/j", "value": "1"},
               {"op": "replace", "path": "/data/k", "value": "z"}]),
    )
    .await?;
    s.patch(
        "json patch failing test",
        &a,
        Body::JsonPatch,
        json!([{"op": "test", "path": "/data/k", "value": "nope"}]),
    )
    .await?;
    s.patch(
        "json patch removing a missing key",
        &a,
        Body::JsonPatch,
        json!([{"op": "remove", "path": "/data/missing"}]),
    )
    .await?;
    s.patch(
        "strategic merge patch",
        &a,
        Body::Strategic,
        json!({"data": {"s": "1"}}),
    )
    .await?;
    s.patch(
        "patch of a missing object",
        &format!("{CM}/missing"),
        Body::Merge,
        json!({"data": {"k": "v"}}),
    )
    .await?;
    s.patch(
        "patch renaming",
        &a,
        Body::Merge,
        json!({"metadata": {"name": "other"}}),
    )
    .await?;
    Ok(())
}

async fn widget_patches(s: &mut Session) -> Result<(), ConformanceError> {
    let w = format!("{WD}/w");
    s.post("create", WD, widget("Widget", "w", 1)).await?;
    s.patch(
        "merge patch",
        &w,
        Body::Merge,
        json!({"spec": {"color": "red"}}),
    )
    .await?;
    s.patch(
        "strategic merge patch",
        &w,
        Body::Strategic,
        json!({"spec": {"color": "blue"}}),
    )
    .await?;
    s.patch(
        "json patch",
        &w,
        Body::JsonPatch,
        json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]),
    )
    .await?;
    s.patch(
        "merge patch of the wrong type",
        &w,
        Body::Merge,
        json!({"spec": {"replicas": "many"}}),
    )
    .await?;
    let first = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                       {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/hold"]}]);
    s.patch(
        "json patch adding the first finalizer",
        &w,
        Body::JsonPatch,
        first.clone(),
    )
    .await?;
    s.patch(
        "json patch testing a present member against null",
        &w,
        Body::JsonPatch,
        first,
    )
    .await?;
    s.patch(
        "json patch testing under a missing parent",
        &w,
        Body::JsonPatch,
        json!([{"op": "test", "path": "/metadata/none/deeper", "value": null}]),
    )
    .await?;
    s.patch(
        "json patch releasing the finalizer",
        &w,
        Body::JsonPatch,
        json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/hold"},
               {"op": "remove", "path": "/metadata/finalizers/0"}]),
    )
    .await?;
    Ok(())
}

// book: ch97_scenario
async fn resource_versions(s: &mut Session) -> Result<(), ConformanceError> {
    let created = s.post("create", CM, cm("a", json!({"k": "v"}))).await?;
    let v1 = rv(s, "create", &created)?;
    let list = s.get("list", CM).await?;
    let listed = rv(s, "list", &list)?;
    let updated = s
        .patch(
            "update",
            &format!("{CM}/a"),
            Body::Merge,
            json!({"data": {"k": "w"}}),
        )
        .await?;
    let newer = number(&rv(s, "update", &updated)?) > number(&listed);
    s.note("the update is newer than the list", json!(newer));
    s.put(
        "stale update",
        &format!("{CM}/a"),
        at(cm("a", json!({"k": "stale"})), &v1),
    )
    .await?;
    s.watch(
        "watch from the list",
        &format!("{CM}?watch=true&resourceVersion={listed}"),
        Until::Events(1),
        WATCH,
    )
    .await?;
    Ok(())
}
// book: end ch97_scenario

async fn too_old(s: &mut Session) -> Result<(), ConformanceError> {
    s.post("create", CM, cm("a", json!({}))).await?;
    s.watch(
        "watch from 2",
        &format!("{CM}?watch=true&resourceVersion=2"),
        Until::End,
        WATCH,
    )
    .await?;
    s.get(
        "exact list at 2",
        &format!("{CM}?resourceVersion=2&resourceVersionMatch=Exact"),
    )
    .await?;
    Ok(())
}

async fn bookmarks(s: &mut Session) -> Result<(), ConformanceError> {
    let created = s.post("create", CM, cm("a", json!({}))).await?;
    let v1 = rv(s, "create", &created)?;
    s.watch(
        "watch with bookmarks",
        &format!("{CM}?watch=true&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion={v1}"),
        Until::End,
        WATCH,
    )
    .await?;
    Ok(())
}

async fn watch_list(s: &mut Session) -> Result<(), ConformanceError> {
    for name in ["a", "b", "c"] {
        s.post(&format!("create {name}"), CM, cm(name, json!({})))
            .await?;
    }
    s.watch(
        "watch-list",
        &format!(
            "{CM}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
             &allowWatchBookmarks=true"
        ),
        Until::Events(4),
        WATCH,
    )
    .await?;
    s.watch(
        "watch-list without bookmarks",
        &format!("{CM}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
        Until::Events(1),
        WATCH,
    )
    .await?;
    s.watch(
        "watch-list with an exact match",
        &format!(
            "{CM}?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact\
             &allowWatchBookmarks=true"
        ),
        Until::Events(1),
        WATCH,
    )
    .await?;
    Ok(())
}

async fn pagination(s: &mut Session) -> Result<(), ConformanceError> {
    for i in 1..=5 {
        s.post(&format!("create p{i}"), CM, cm(&format!("p{i}"), json!({})))
            .await?;
    }
    let mut token = String::new();
    for page in 1..=3 {
        let q = if token.is_empty() {
            String::new()
        } else {
            format!("&continue={token}")
        };
        let label = format!("page {page}");
        let answer = s.get(&label, &format!("{CM}?limit=2{q}")).await?;
        token = answer["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    s.get(
        "bad continue",
        &format!("{CM}?limit=2&continue=not-a-token"),
    )
    .await?;
    Ok(())
}

async fn selectors(s: &mut Session) -> Result<(), ConformanceError> {
    s.post(
        "create a",
        CM,
        labelled("a", json!({"app": "web", "tier": "fe"})),
    )
    .await?;
    s.post("create b", CM, labelled("b", json!({"app": "db"})))
        .await?;
    let c = s.post("create c", CM, labelled("c", json!({}))).await?;
    let before = rv(s, "create c", &c)?;
    s.get("label equality", &format!("{CM}?labelSelector=app%3Dweb"))
        .await?;
    s.get(
        "label set",
        &format!("{CM}?labelSelector=app%20in%20(web%2Cdb)"),
    )
    .await?;
    s.get("label absent", &format!("{CM}?labelSelector=!app"))
        .await?;
    s.get(
        "invalid label selector",
        &format!("{CM}?labelSelector=app%3D%3D%3D"),
    )
    .await?;
    s.get(
        "field selector",
        &format!("{CM}?fieldSelector=metadata.name%3Db"),
    )
    .await?;
    s.get(
        "unsupported field selector",
        &format!("{CM}?fieldSelector=data.k%3Dv"),
    )
    .await?;
    s.patch(
        "relabel a",
        &format!("{CM}/a"),
        Body::Merge,
        json!({"metadata": {"labels": {"app": "other"}}}),
    )
    .await?;
    s.watch(
        "watch the object leaves",
        &format!("{CM}?watch=true&labelSelector=app%3Dweb&resourceVersion={before}"),
        Until::Events(1),
        WATCH,
    )
    .await?;
    Ok(())
}

async fn validation(s: &mut Session) -> Result<(), ConformanceError> {
    s.post("invalid name", CM, cm("Bad_Name", json!({})))
        .await?;
    s.post(
        "invalid label key",
        CM,
        json!({"metadata": {"name": "a", "labels": {"bad key!": "v"}}}),
    )
    .await?;
    s.post(
        "invalid label value",
        CM,
        json!({"metadata": {"name": "a", "labels": {"app": "-bad-"}}}),
    )
    .await?;
    s.post("missing name", CM, json!({"metadata": {}})).await?;
    s.post(
        "generateName",
        CM,
        json!({"metadata": {"generateName": "gen-"}}),
    )
    .await?;
    s.post(
        "namespace differs",
        CM,
        json!({"metadata": {"name": "a", "namespace": "elsewhere"}}),
    )
    .await?;
    s.post(
        "widget without replicas",
        WD,
        json!({"apiVersion": "lab.controlloop.dev/v1", "kind": "Widget",
               "metadata": {"name": "w"}, "spec": {}}),
    )
    .await?;
    Ok(())
}

async fn status_subresource(s: &mut Session) -> Result<(), ConformanceError> {
    let w = format!("{WD}/w");
    let created = s.post("create", WD, widget("Widget", "w", 1)).await?;
    let mut body = at(widget("Widget", "w", 5), &rv(s, "create", &created)?);
    body["status"] = json!({"readyReplicas": 1});
    let written = s.put("status write", &format!("{w}/status"), body).await?;
    let mut body = at(widget("Widget", "w", 1), &rv(s, "status write", &written)?);
    body["status"] = json!({"readyReplicas": 7});
    let written = s.put("main write with a status", &w, body).await?;
    let body = at(
        widget("Widget", "w", 3),
        &rv(s, "main write with a status", &written)?,
    );
    s.put("spec write", &w, body).await?;
    s.patch(
        "status patch",
        &format!("{w}/status"),
        Body::Merge,
        json!({"status": {"message": "m"}}),
    )
    .await?;
    s.get("get", &w).await?;
    Ok(())
}

async fn generation(s: &mut Session) -> Result<(), ConformanceError> {
    let p = format!("{PW}/p");
    let created = s.post("create", PW, widget("PlainWidget", "p", 1)).await?;
    let v1 = rv(s, "create", &created)?;
    s.patch(
        "status through the main endpoint",
        &p,
        Body::Merge,
        json!({"status": {"readyReplicas": 1}}),
    )
    .await?;
    let mut body = at(widget("PlainWidget", "p", 1), &v1);
    body["status"] = json!({"readyReplicas": 2});
    s.put("status endpoint", &format!("{p}/status"), body)
        .await?;
    s.patch(
        "label write",
        &p,
        Body::Merge,
        json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await?;
    Ok(())
}

async fn finalizers(s: &mut Session) -> Result<(), ConformanceError> {
    let f = format!("{CM}/f");
    s.post(
        "create",
        CM,
        json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}),
    )
    .await?;
    s.delete("delete", &f, None).await?;
    s.get("get while deleting", &f).await?;
    s.patch(
        "add a finalizer while deleting",
        &f,
        Body::Merge,
        json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
    )
    .await?;
    s.patch(
        "update while deleting",
        &f,
        Body::Merge,
        json!({"data": {"k": "v"}}),
    )
    .await?;
    s.patch(
        "remove the finalizer",
        &f,
        Body::Merge,
        json!({"metadata": {"finalizers": null}}),
    )
    .await?;
    s.get("get after", &f).await?;
    let mut w = widget("Widget", "w", 1);
    w["metadata"]["finalizers"] = json!(["example.com/hold"]);
    s.post("create widget", WD, w).await?;
    s.delete("widget delete", &format!("{WD}/w"), None).await?;
    s.patch(
        "widget release",
        &format!("{WD}/w"),
        Body::Merge,
        json!({"metadata": {"finalizers": null}}),
    )
    .await?;
    Ok(())
}

async fn delete_preconditions(s: &mut Session) -> Result<(), ConformanceError> {
    let a = format!("{CM}/a");
    let created = s.post("create", CM, cm("a", json!({"k": "v"}))).await?;
    let stale = rv(s, "create", &created)?;
    let updated = s
        .patch("update", &a, Body::Merge, json!({"data": {"k": "w"}}))
        .await?;
    let current = rv(s, "update", &updated)?;
    let uid = updated["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    s.delete(
        "stale resourceVersion",
        &a,
        Some(json!({"preconditions": {"resourceVersion": stale}})),
    )
    .await?;
    s.delete(
        "other uid",
        &a,
        Some(json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
    )
    .await?;
    s.delete(
        "matching",
        &a,
        Some(json!({"preconditions": {"resourceVersion": current, "uid": uid}})),
    )
    .await?;
    Ok(())
}

async fn dry_run(s: &mut Session) -> Result<(), ConformanceError> {
    let a = format!("{CM}/a");
    s.post(
        "dry-run create",
        &format!("{CM}?dryRun=All"),
        cm("d", json!({})),
    )
    .await?;
    s.get("get after dry-run create", &format!("{CM}/d"))
        .await?;
    let created = s.post("create", CM, cm("a", json!({"k": "v"}))).await?;
    let v1 = rv(s, "create", &created)?;
    s.put(
        "dry-run update",
        &format!("{a}?dryRun=All"),
        at(cm("a", json!({"k": "dry"})), &v1),
    )
    .await?;
    s.get("get after dry-run update", &a).await?;
    s.delete("dry-run delete", &format!("{a}?dryRun=All"), None)
        .await?;
    s.get("get after dry-run delete", &a).await?;
    s.post(
        "invalid dryRun",
        &format!("{CM}?dryRun=Some"),
        cm("e", json!({})),
    )
    .await?;
    Ok(())
}

/// The field managers of an answer, as `[manager, operation]` pairs.
fn managers(answer: &Value) -> Value {
    let pairs: Vec<Value> = answer["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| json!([m["manager"], m["operation"]]))
        .collect();
    Value::Array(pairs)
}

async fn server_side_apply(s: &mut Session) -> Result<(), ConformanceError> {
    let a = format!("{CM}/a");
    let body = |who: &str| cm("a", json!({"k": who}));
    let created = s
        .patch(
            "apply create",
            &format!("{a}?fieldManager=alice"),
            Body::Apply,
            body("alice"),
        )
        .await?;
    s.note("managers after create", managers(&created));
    s.patch(
        "apply conflict",
        &format!("{a}?fieldManager=bob"),
        Body::Apply,
        body("bob"),
    )
    .await?;
    let forced = s
        .patch(
            "apply force",
            &format!("{a}?fieldManager=bob&force=true"),
            Body::Apply,
            body("bob"),
        )
        .await?;
    s.note("managers after force", managers(&forced));
    s.patch("apply without fieldManager", &a, Body::Apply, body("eve"))
        .await?;
    Ok(())
}

/// The causes of an update that unfreezes an immutable ConfigMap and changes its data.
const IMMUTABLE_AND_DATA: &str = r#"[
    {"field": "immutable", "reason": "FieldValueForbidden",
     "message": "Forbidden: field is immutable when `immutable` is set"},
    {"field": "data", "reason": "FieldValueForbidden",
     "message": "Forbidden: field is immutable when `immutable` is set"}]"#;

async fn immutable_configmap(s: &mut Session) -> Result<(), ConformanceError> {
    let f = format!("{CM}/f");
    let mut body = cm("f", json!({"k": "v"}));
    body["immutable"] = json!(true);
    body["binaryData"] = json!({"b": "MQ=="});
    let created = s.post("create immutable", CM, body).await?;
    s.patch("change data", &f, Body::Merge, json!({"data": {"k": "w"}}))
        .await?;
    s.patch(
        "change binaryData",
        &f,
        Body::Merge,
        json!({"binaryData": {"b": "Mg=="}}),
    )
    .await?;
    let mut thawed = created.clone();
    thawed["immutable"] = json!(false);
    thawed["data"] = json!({"k": "w"});
    s.put("thaw and change data", &f, thawed).await?;
    s.patch(
        "change a label",
        &f,
        Body::Merge,
        json!({"metadata": {"labels": {"l": "1"}}}),
    )
    .await?;
    Ok(())
}

async fn server_set_metadata(s: &mut Session) -> Result<(), ConformanceError> {
    let a = format!("{CM}/a");
    s.post("create", CM, cm("a", json!({"k": "v"}))).await?;
    s.patch(
        "set deletionTimestamp",
        &a,
        Body::Merge,
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
    )
    .await?;
    s.get("get after", &a).await?;
    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                       "uid": "00000000-0000-4000-8000-000000000001"});
    let mut body = cm("b", json!({}));
    body["metadata"]["ownerReferences"] = json!([owner, owner]);
    let created = s.post("create with an owner twice", CM, body).await?;
    let n = created["metadata"]["ownerReferences"]
        .as_array()
        .map_or(0, Vec::len);
    s.note("owner references stored", json!(n));
    Ok(())
}

async fn delete_collection(s: &mut Session) -> Result<(), ConformanceError> {
    s.post("create a", CM, labelled("a", json!({"app": "web"})))
        .await?;
    s.post("create b", CM, labelled("b", json!({"app": "web"})))
        .await?;
    let c = s
        .post("create c", CM, labelled("c", json!({"app": "db"})))
        .await?;
    let before = rv(s, "create c", &c)?;
    let answer = s
        .delete(
            "delete collection",
            &format!("{CM}?labelSelector=app%3Dweb"),
            None,
        )
        .await?;
    let n = answer["items"].as_array().map_or(0, Vec::len);
    s.note("deleted", json!(n));
    s.get("list after", CM).await?;
    s.watch(
        "watch the deletes",
        &format!("{CM}?watch=true&resourceVersion={before}"),
        Until::Events(2),
        WATCH,
    )
    .await?;
    s.delete(
        "delete collection in every namespace",
        "/api/v1/configmaps?labelSelector=app%3Dnone",
        None,
    )
    .await?;
    Ok(())
}

async fn terminating_namespace(s: &mut Session) -> Result<(), ConformanceError> {
    // A second namespace, held in Terminating by an object's finalizer.
    let ns = format!("{}-t", s.ns);
    let objects = format!("/api/v1/namespaces/{ns}/configmaps");
    s.post(
        "create the namespace",
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await?;
    s.post(
        "create a held object",
        &objects,
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await?;
    s.delete(
        "delete the namespace",
        &format!("/api/v1/namespaces/{ns}"),
        None,
    )
    .await?;
    s.post("create in it", &objects, cm("new", json!({})))
        .await?;
    // The namespace controller empties the namespace at its own pace on the real server (at
    // once on the embedded one): releasing the object is clean-up, not compared.
    s.unrecorded(
        "release the held object",
        http::Method::PATCH,
        &format!("{objects}/held"),
        Some((Body::Merge, json!({"metadata": {"finalizers": null}}))),
    )
    .await?;
    Ok(())
}

/// A watch event whose namespace has only another controller's token left.
fn only_the_other_token(event: &Value) -> bool {
    event["object"]["spec"]["finalizers"] == json!(["example.com/x"])
}

async fn namespace_finalize(s: &mut Session) -> Result<(), ConformanceError> {
    // A second namespace, which another controller's token (`example.com/x`) holds.
    let ns = format!("{}-f", s.ns);
    let path = format!("/api/v1/namespaces/{ns}");
    let created = s
        .post(
            "create the namespace",
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                   "spec": {"finalizers": ["example.com/x"]}}),
        )
        .await?;
    let from = rv(s, "create the namespace", &created)?;
    s.get("get finalize", &format!("{path}/finalize")).await?;
    s.patch(
        "patch finalize",
        &format!("{path}/finalize"),
        Body::Merge,
        json!({"spec": {"finalizers": []}}),
    )
    .await?;
    let mut bad = created.clone();
    bad["spec"]["finalizers"] = json!(["kubernetes", "bogus"]);
    s.put("finalize with a bad name", &format!("{path}/finalize"), bad)
        .await?;
    s.post(
        "create an object",
        &format!("{path}/configmaps"),
        cm("a", json!({})),
    )
    .await?;
    s.delete("delete the namespace", &path, None).await?;
    // The namespace controller's pace is its own on the real server (at once on the embedded
    // one, a difference of the table): what the namespace holds right after the delete...
    let at_once = s
        .unrecorded("read at once", http::Method::GET, &path, None)
        .await?;
    s.note(
        "right after the delete",
        json!({"spec.finalizers": at_once["spec"]["finalizers"]}),
    );
    // ...and the write that leaves only the other token, read from a watch.
    let last = s
        .watch_for(
            "the controller's last write",
            &format!(
                "/api/v1/namespaces?watch=true&fieldSelector=metadata.name%3D{ns}&resourceVersion={from}"
            ),
            only_the_other_token,
            WATCH,
        )
        .await?;
    s.get("the object is gone", &format!("{path}/configmaps/a"))
        .await?;
    s.delete("delete again", &path, None).await?;
    let Some(last) = last else {
        return Err(s.missing(
            "the controller's last write",
            "the namespace controller never left only example.com/x",
        ));
    };
    let mut body = last["object"].clone();
    body["spec"]["finalizers"] = json!([]);
    s.put("finalize", &format!("{path}/finalize"), body).await?;
    s.get("get after finalize", &path).await?;
    Ok(())
}

async fn namespace_objects_deleted(s: &mut Session) -> Result<(), ConformanceError> {
    // A second namespace of 30 labelled objects (the label keeps out what controllers of the
    // real cluster create in every namespace, such as `kube-root-ca.crt`).
    let ns = format!("{}-d", s.ns);
    let path = format!("/api/v1/namespaces/{ns}");
    let objects = format!("{path}/configmaps");
    s.post(
        "create the namespace",
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await?;
    for i in 0..30 {
        let name = format!("m-{i:02}");
        s.unrecorded(
            &format!("create {name}"),
            http::Method::POST,
            &objects,
            Some((Body::Json, labelled(&name, json!({"app": "many"})))),
        )
        .await?;
    }
    let listed = s
        .get(
            "list before",
            &format!("{objects}?labelSelector=app%3Dmany"),
        )
        .await?;
    let from = listed["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| s.missing("list before", "no resourceVersion"))?;
    s.delete("delete the namespace", &path, None).await?;
    let events = s
        .watch(
            "watch the objects",
            &format!("{objects}?watch=true&labelSelector=app%3Dmany&resourceVersion={from}"),
            Until::Events(30),
            WATCH,
        )
        .await?;
    let of = |ty: &str| events.iter().filter(|e| e["type"] == ty).count();
    let (deleted, expired) = (of("DELETED"), of("ERROR"));
    s.note("deleted", json!(deleted));
    s.note("expired", json!(expired));
    Ok(())
}

/// kube-apiserver's 400 for a strict create with one unknown field, `bogus`.
const STRICT_CREATE: &str = r#""ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\"""#;

async fn field_validation(s: &mut Session) -> Result<(), ConformanceError> {
    let bogus = |name: &str| {
        let mut body = cm(name, json!({"k": "v"}));
        body["bogus"] = json!(1);
        body
    };
    s.post(
        "strict create",
        &format!("{CM}?fieldValidation=Strict"),
        bogus("a"),
    )
    .await?;
    s.get("get after the strict create", &format!("{CM}/a"))
        .await?;
    s.post(
        "warned create",
        &format!("{CM}?fieldValidation=Warn"),
        bogus("a"),
    )
    .await?;
    s.post(
        "unknown directive",
        &format!("{CM}?fieldValidation=strict"),
        bogus("b"),
    )
    .await?;
    s.put(
        "strict update",
        &format!("{CM}/a?fieldValidation=Strict"),
        bogus("a"),
    )
    .await?;
    s.patch(
        "strict patch",
        &format!("{CM}/a?fieldValidation=Strict"),
        Body::Merge,
        json!({"bogus": 2}),
    )
    .await?;
    s.patch(
        "warned patch",
        &format!("{CM}/a"),
        Body::Merge,
        json!({"bogus": 2, "data": {"k": "w"}}),
    )
    .await?;
    Ok(())
}

async fn not_found(s: &mut Session) -> Result<(), ConformanceError> {
    s.get("get missing", &format!("{CM}/missing")).await?;
    s.get("unknown resource", "/api/v1/namespaces/{ns}/nonexistents")
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_step_labels_are_unique_and_every_expectation_changes() {
        let mut names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
        for s in SCENARIOS {
            for e in s.expect {
                assert_ne!(e.changed(), *e, "{}: {}", s.name, e.step);
            }
        }
    }
}
