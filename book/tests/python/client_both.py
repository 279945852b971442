"""What a Python controller author does with the official Kubernetes Python client, one step a
line, for `book/tests/python_client_both.rs`, which runs it against the embedded API server and
against kube-apiserver v1.37.2 and holds each line to upstream's answer.

    python client_both.py KUBECONFIG NAMESPACE

Creates NAMESPACE (set-up, not a step), runs every step in it, deletes it, and prints one line
per step: `LABEL<TAB>CODE<TAB>OUTPUT`. CODE is the HTTP status code the client saw (a refused
call: its `ApiException.status`; a watch read to its end: 200, since a watch the server refuses
raises). OUTPUT keeps what a controller reads and drops what is never the same twice: no uids,
no timestamps, no continue tokens, and resourceVersions only as an order ("newer: True"). A
refused call prints `ApiException reason=R`, R being the `Status` reason in the exception's body
(a watch's ERROR event carries it in `ApiException.reason`, before the colon).

Every request has a connect and read timeout (`T`); every watch has a server-side
`timeoutSeconds` as well, so no step can hang.
"""

import json
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

KUBECONFIG, NS = sys.argv[1], sys.argv[2]
T = (5, 20)  # connect, read (seconds) for every request
GROUP, VERSION, WIDGETS = "lab.controlloop.dev", "v1", "widgets"
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"

api = config.new_client_from_config(config_file=KUBECONFIG)
core = client.CoreV1Api(api)
custom = client.CustomObjectsApi(api)
mem = {}  # what later steps read from earlier answers


def reason_of(e):
    try:
        return json.loads(e.body)["reason"]
    except Exception:
        return (e.reason or "").split(":")[0]


def step(label, call):
    try:
        code, out = call()
    except ApiException as e:
        code, out = e.status, "ApiException reason=" + reason_of(e)
    except Exception as e:  # the client could not read the answer: say what it raised
        code, out = 0, "raised " + type(e).__name__
    print(f"{label}\t{code}\t{out}", flush=True)


def rv(o):
    m = o["metadata"] if isinstance(o, dict) else o.metadata
    return int(m["resourceVersion"] if isinstance(m, dict) else m.resource_version)


def kv(d):
    return ",".join(f"{k}={v}" for k, v in sorted((d or {}).items()))


def cm(o):
    out = f"{o.metadata.name} {kv(o.data)}"
    if o.metadata.labels:
        out += f" labels {kv(o.metadata.labels)}"
    return out


def names(items):
    return " ".join(i.metadata.name if not isinstance(i, dict) else i["metadata"]["name"] for i in items)


def configmap(name, data, labels=None, rv=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if rv is not None:
        meta["resourceVersion"] = str(rv)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def created(name, data, labels=None):
    def call():
        o, code, _ = core.create_namespaced_config_map_with_http_info(
            NS, configmap(name, data, labels), _request_timeout=T)
        mem[name] = o
        return code, cm(o)
    return call


def patched(body, content_type=None):
    def call():
        o, code, _ = core.patch_namespaced_config_map_with_http_info(
            "a", NS, body, _content_type=content_type, _request_timeout=T)
        return code, cm(o)
    return call


def listed(**kw):
    def call():
        o, code, _ = core.list_namespaced_config_map_with_http_info(NS, _request_timeout=T, **kw)
        out = names(o.items)
        if "limit" in kw:
            mem["continue"] = o.metadata._continue
            out += f"; continue: {'yes' if o.metadata._continue else 'no'}"
        return code, out
    return call


def read_a():
    o, code, _ = core.read_namespaced_config_map_with_http_info("a", NS, _request_timeout=T)
    mem["read"] = o
    return code, cm(o)


def update():
    o = mem["read"]
    o.data["k"] = "w"
    o, code, _ = core.replace_namespaced_config_map_with_http_info("a", NS, o, _request_timeout=T)
    mem["updated"] = o
    return code, f"{cm(o)}; newer than the create: {rv(o) > rv(mem['a'])}"


def stale_update():
    body = configmap("a", {"k": "stale"}, rv=rv(mem["a"]))
    o, code, _ = core.replace_namespaced_config_map_with_http_info("a", NS, body, _request_timeout=T)
    return code, cm(o)


def replace_without_rv():
    o, code, _ = core.replace_namespaced_config_map_with_http_info(
        "a", NS, configmap("a", {"k": "r"}), _request_timeout=T)
    return code, f"{cm(o)}; newer than the update: {rv(o) > rv(mem['updated'])}"


def first_list():
    o, code, _ = core.list_namespaced_config_map_with_http_info(NS, _request_timeout=T)
    mem["list"] = o
    return code, names(o.items)


def page_2():
    o, code, _ = core.list_namespaced_config_map_with_http_info(
        NS, limit=2, _continue=mem["continue"], _request_timeout=T)
    return code, f"{names(o.items)}; continue: {'yes' if o.metadata._continue else 'no'}"


def watch_from_the_list():
    # Every write since the first list, replayed from its resourceVersion: read until the
    # last one (d's creation), or until the server ends the watch after 10 s.
    w = watch.Watch()
    events = []
    for e in w.stream(core.list_namespaced_config_map, NS, resource_version=mem["list"].metadata.resource_version,
                      timeout_seconds=10, _request_timeout=T):
        events.append(e)
        if e["type"] == "ADDED" and e["object"].metadata.name == "d":
            w.stop()
    rvs = [rv(e["object"]) for e in events]
    ordered = all(a < b for a, b in zip(rvs, rvs[1:]))
    resumes = w.resource_version == events[-1]["object"].metadata.resource_version if events else False
    seen = ", ".join(f"{e['type']} {e['object'].metadata.name}" for e in events)
    return 200, f"{seen}; each newer than the last: {ordered}; Watch.resource_version is the last event's: {resumes}"


def watch_from_1():
    w = watch.Watch()
    n = sum(1 for _ in w.stream(core.list_namespaced_config_map, NS, resource_version="1",
                                 timeout_seconds=2, _request_timeout=T))
    return 200, f"{n} events"


def relist():
    o, code, _ = core.list_namespaced_config_map_with_http_info(NS, _request_timeout=T)
    mem["relist"] = o
    return code, names(o.items)


def watch_to_its_timeout():
    w = watch.Watch()
    events = list(w.stream(core.list_namespaced_config_map, NS, resource_version=mem["relist"].metadata.resource_version,
                           timeout_seconds=1, _request_timeout=T))
    return 200, f"{len(events)} events, then the server ended the watch"


def delete(name, **preconditions):
    def call():
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(**preconditions)) if preconditions else None
        o, code, _ = core.delete_namespaced_config_map_with_http_info(name, NS, body=body, _request_timeout=T)
        return code, f"answer kind={o.get('kind')}"  # the client reads a delete's answer as a dict
    return call


def widget_out(o, code):
    spec, status = o.get("spec", {}), o.get("status", {})
    return code, (f"{o['metadata']['name']} generation {o['metadata'].get('generation')} replicas "
                  f"{spec.get('replicas')} status {kv(status)}")


def widget_create(name, spec):
    def call():
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
        o, code, _ = custom.create_namespaced_custom_object_with_http_info(
            GROUP, VERSION, NS, WIDGETS, body, _request_timeout=T)
        return widget_out(o, code)
    return call


def widget_patch(body, status=False):
    def call():
        f = (custom.patch_namespaced_custom_object_status_with_http_info if status
             else custom.patch_namespaced_custom_object_with_http_info)
        o, code, _ = f(GROUP, VERSION, NS, WIDGETS, "w", body, _content_type=MERGE, _request_timeout=T)
        return widget_out(o, code)
    return call


def widget_list():
    o, code, _ = custom.list_namespaced_custom_object_with_http_info(GROUP, VERSION, NS, WIDGETS, _request_timeout=T)
    return code, names(o["items"])


def widget_delete():
    o, code, _ = custom.delete_namespaced_custom_object_with_http_info(GROUP, VERSION, NS, WIDGETS, "w", _request_timeout=T)
    return code, f"answer kind={o.get('kind')}"


def apply(manager, value, force=None):
    def call():
        o, code, _ = core.patch_namespaced_config_map_with_http_info(
            "b", NS, configmap("b", {"k": value}), field_manager=manager, force=force,
            _content_type=APPLY, _request_timeout=T)
        managers = ",".join(sorted(f"{m.manager}({m.operation})" for m in o.metadata.managed_fields or []))
        return code, f"{cm(o)} managers {managers}"
    return call


def read(name):
    def call():
        o, code, _ = core.read_namespaced_config_map_with_http_info(name, NS, _request_timeout=T)
        return code, cm(o)
    return call


try:
    core.create_namespace({"metadata": {"name": NS}}, _request_timeout=T)
except ApiException as e:
    if e.status != 409:
        raise

step("create", created("a", {"k": "v"}))
step("create twice", created("a", {"k": "v"}))
step("get", read_a)
step("get missing", read("missing"))
step("list", first_list)
step("update", update)
step("stale update", stale_update)
step("replace without resourceVersion", replace_without_rv)
step("label (a dict: strategic merge)", patched({"metadata": {"labels": {"app": "web"}}}))
step("merge patch", patched({"data": {"k": "m"}}, MERGE))
step("strategic merge patch", patched({"data": {"s": "1"}}))
step("json patch (a list)", patched([{"op": "replace", "path": "/data/k", "value": "j"}]))
step("json patch failing test", patched([{"op": "test", "path": "/data/k", "value": "nope"}]))
step("create c", created("c", {"k": "v"}, {"app": "web"}))
step("create d", created("d", {"k": "v"}, {"app": "db"}))
step("label selector", listed(label_selector="app=web"))
step("set-based selector", listed(label_selector="app in (web,db),app notin (web)"))
step("field selector", listed(field_selector="metadata.name=c"))
step("invalid label selector", listed(label_selector="app in (web"))
step("unsupported field selector", listed(field_selector="data.k=v"))
step("page 1", listed(limit=2))
step("page 2", page_2)
step("watch from the list", watch_from_the_list)
step("watch from resourceVersion 1", watch_from_1)
step("relist", relist)
step("watch to its timeout", watch_to_its_timeout)
step("delete with another uid", delete("c", uid="00000000-0000-0000-0000-000000000000"))
step("delete with a stale resourceVersion", delete("c", resource_version=str(rv(mem["c"]) - 1)))
step("delete with matching preconditions", delete("c", uid=mem["c"].metadata.uid, resource_version=str(rv(mem["c"]))))
step("get deleted", read("c"))
step("delete missing", delete("c"))
step("widget create", widget_create("w", {"replicas": 1}))
step("widget spec patch", widget_patch({"spec": {"replicas": 2}}))
step("widget status", widget_patch({"status": {"readyReplicas": 2, "observedGeneration": 2}}, status=True))
step("widget status through the main resource", widget_patch({"status": {"readyReplicas": 5}}))
step("widget spec through the status", widget_patch({"spec": {"replicas": 9}}, status=True))
step("widget without replicas", widget_create("bad", {}))
step("widget list", widget_list)
step("widget delete", widget_delete)
step("server-side apply create", apply("alice", "alice"))
step("server-side apply conflict", apply("bob", "bob"))
step("server-side apply force", apply("bob", "bob", force=True))
step("after the apply", read("b"))

try:
    core.delete_namespace(NS, _request_timeout=T)
except ApiException:
    pass
