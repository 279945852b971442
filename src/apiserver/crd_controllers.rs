//! CustomResourceDefinitions: a CRD written to the server makes it serve a new resource.
//!
//! Follows the behaviour of apiextensions-apiserver v0.37.2: the CRD's strategy
//! (`pkg/registry/customresourcedefinition/strategy.go`: status cleared on create, generation,
//! `status.storedVersions`), its delete (`etcd.go`: the `customresourcecleanup` finalizer and
//! the `Terminating` condition), and the controllers that act on it
//! (`pkg/controller/status/naming_controller.go`: `NamesAccepted` and `acceptedNames`;
//! `pkg/controller/establish/establishing_controller.go`: `Established`;
//! `pkg/controller/finalizer/crd_finalizer.go`: the instances deleted, then the finalizer).
//! The custom resources are served as `pkg/apiserver/customresource_handler.go` serves them,
//! through the registry ([`Entry`]) and a [`Schema`] per version.
//!
//! ```text
//!  POST crd ──► stored (status cleared, generation 1)
//!        └──► sync: NamesAccepted True ─► Established True ─► registered: served at once
//!  DELETE crd ──► marked (finalizer, Terminating) ─► instances deleted ─► finalizer gone ─► CRD gone, unregistered
//! ```
//!
//! # Invariants
//! 1. A resource is registered exactly while its CRD is stored with its names accepted; it
//!    is built from the CRD's spec as stored, and rebuilt whenever the CRD changes.
//! 2. The controllers' work is done at once, under the storage lock, after each CRD write and
//!    after each write to a resource whose CRD is terminating: no request sees a CRD
//!    established and not served, nor served and gone.
//!
//! # Differences from upstream
//! - The naming, establishing and finalizer controllers run inside the request that wrote the
//!   CRD, not a moment later; their status writes are separate revisions (watchers see them as
//!   upstream's do), but a client never sees the CRD before them.
//! - `spec.conversion.strategy: Webhook` is refused (422 FieldValueNotSupported, naming it):
//!   the server calls no webhooks. Objects of other versions are converted as `None` does:
//!   only `apiVersion` changes.
//! - CEL rules (`x-kubernetes-validations`) are evaluated with the differences `schema::cel`
//!   lists (no type-checking, a bound of its own in place of upstream's cost model, the
//!   functions it has not measured refused by name). An update's rules run once its schema
//!   passed, so an update failing both gets the schema's causes only (upstream: both); they
//!   are the storage version's rules.
//! - `allOf`/`anyOf`/`oneOf`/`not`, `multipleOf`,
//!   `minProperties`/`maxProperties`, `exclusiveMinimum`/`exclusiveMaximum`, `uniqueItems`
//!   and a string `format` other than `date-time` (and the formats kube-openapi does not
//!   check) are refused (422 FieldValueForbidden, naming them), never accepted and ignored.
//!   A `date-time` is parsed as RFC 3339 with an offset; Go's strfmt also takes a few
//!   layouts without one. A
//!   `pattern` is compiled by the `regex` crate: RE2 syntax, as Go's `regexp`, but a pattern
//!   at the edges of either (a Unicode class one of them lacks) may be taken by one and
//!   refused by the other.
//! - `additionalPrinterColumns` (no server-side tables),
//!   `selectableFields` and the schema's validation ratcheting are not served (the CEL
//!   rules' is); a version's `subresources`
//!   apply as the storage version's declares them.
//! - The cause for a CRD without exactly one storage version shows the version names, where
//!   upstream prints the Go structure of the whole list.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::customresourcedefinition::storage_version;
use super::kinds::{CRDS, Decode, Kind};
use super::registry::Entry;
use super::scale::ScalePaths;
use super::schema::Schema;
use super::storage::{Preconditions, Storage};
use super::validation::NameRule;

/// The finalizer a CRD's delete adds; the finalizer controller removes it once the CRD's
/// instances are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// How long a create waits after its resource was established
/// (`customresource_handler.go`: two seconds, for HA servers to catch up).
pub(crate) const JUST_CREATED: std::time::Duration = std::time::Duration::from_secs(2);

/// The condition of `ty` in a CRD's status.
fn condition<'a>(crd: &'a Value, ty: &str) -> Option<&'a Value> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
}

fn is_true(crd: &Value, ty: &str) -> bool {
    condition(crd, ty).is_some_and(|c| c["status"] == "True")
}

/// `SetCRDCondition`: the transition time moves only when the status changes.
fn set_condition(crd: &mut Value, ty: &str, status: &str, reason: &str, message: &str, now: &str) {
    let fresh = json!({"type": ty, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now});
    let conditions = &mut crd["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("an array");
    match list.iter_mut().find(|c| c["type"] == ty) {
        None => list.push(fresh),
        Some(c) => {
            if c["status"] != status {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
    }
}

/// The names other CRDs of `group` have been given (the naming controller's `usedNames`).
fn names_in_use(st: &Storage, group: &str, except: &str) -> (Vec<String>, Vec<String>) {
    let mut resources = Vec::new();
    let mut kinds = Vec::new();
    for other in st.values(CRDS) {
        if other["metadata"]["name"] == except || other["spec"]["group"] != group {
            continue;
        }
        let a = &other["status"]["acceptedNames"];
        for f in ["plural", "singular"] {
            resources.extend(a[f].as_str().map(str::to_string));
        }
        for s in a["shortNames"].as_array().into_iter().flatten() {
            resources.extend(s.as_str().map(str::to_string));
        }
        for f in ["kind", "listKind"] {
            kinds.extend(a[f].as_str().map(str::to_string));
        }
    }
    // The built-in resources of the group are taken too.
    for (_, e) in st.registry().live() {
        if e.storage.group == group && e.storage.crd.is_none() {
            resources.push(e.storage.plural.clone());
            kinds.push(e.storage.kind.clone());
        }
    }
    (resources, kinds)
}

/// The naming controller's answer: the accepted names, and the reason and message of
/// `NamesAccepted` (`None` when every name is accepted).
fn accepted_names(st: &Storage, crd: &Value) -> (Value, Option<(&'static str, String)>) {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let (resources, kinds) = names_in_use(st, group, name);
    let want = &crd["spec"]["names"];
    let mut names = crd["status"]["acceptedNames"].clone();
    let mut conflict = None;
    // Upstream's order: plural, singular, short names, kind, list kind; a later conflict's
    // reason replaces an earlier one's.
    let check = |names: &mut Value,
                 conflict: &mut Option<(&'static str, String)>,
                 field: &str,
                 used: &[String],
                 reason: &'static str| {
        let requested = want[field].as_str().unwrap_or_default();
        if requested != names[field].as_str().unwrap_or_default()
            && used.iter().any(|u| u == requested)
        {
            *conflict = Some((reason, format!("{requested:?} is already in use")));
        } else {
            names[field] = json!(requested);
        }
    };
    check(
        &mut names,
        &mut conflict,
        "plural",
        &resources,
        "PluralConflict",
    );
    check(
        &mut names,
        &mut conflict,
        "singular",
        &resources,
        "SingularConflict",
    );
    let shorts: Vec<&str> = want["shortNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let taken: Vec<&&str> = shorts
        .iter()
        .filter(|s| resources.iter().any(|u| u == **s))
        .collect();
    if let Some(first) = taken.first() {
        conflict = Some(("ShortNamesConflict", format!("{first:?} is already in use")));
    } else if shorts.is_empty() {
        if let Some(m) = names.as_object_mut() {
            m.remove("shortNames");
        }
    } else {
        names["shortNames"] = json!(shorts);
    }
    check(&mut names, &mut conflict, "kind", &kinds, "KindConflict");
    check(
        &mut names,
        &mut conflict,
        "listKind",
        &kinds,
        "ListKindConflict",
    );
    if let Some(c) = want.get("categories") {
        names["categories"] = c.clone();
    }
    (names, conflict)
}

/// Kube-aware version priority (`version.CompareKubeAwareVersionStrings`): GA above beta
/// above alpha, higher numbers first, other strings last in alphabetical order.
fn priority(v: &str) -> (u8, u64, u64, String) {
    let parse = || -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        for (word, rank) in [("beta", 2), ("alpha", 1)] {
            if let Some(n) = tail.strip_prefix(word) {
                let minor: u64 = if n.is_empty() { 0 } else { n.parse().ok()? };
                return Some((rank, major, minor));
            }
        }
        None
    };
    match parse() {
        Some((rank, major, minor)) => (rank, major, minor, String::new()),
        None => (0, 0, 0, v.to_string()),
    }
}

/// The resource a CRD serves, built from its spec and accepted names (keeps I1).
fn entry_of(crd: &Value, established_at: Option<tokio::time::Instant>) -> Option<Entry> {
    let name = crd["metadata"]["name"].as_str()?.to_string();
    let spec = &crd["spec"];
    let names = &crd["status"]["acceptedNames"];
    let storage = storage_version(crd)?;
    let group = spec["group"].as_str()?.to_string();
    let terminating = !crd["metadata"]["deletionTimestamp"].is_null();
    let mut versions: Vec<&Value> = spec["versions"].as_array()?.iter().collect();
    versions.sort_by(|a, b| {
        let (pa, pb) = (
            priority(a["name"].as_str().unwrap_or_default()),
            priority(b["name"].as_str().unwrap_or_default()),
        );
        (pb.0, pb.1, pb.2, &pa.3).cmp(&(pa.0, pa.1, pa.2, &pb.3))
    });
    let kind_of = |v: &Value| -> Kind {
        let version = v["name"].as_str().unwrap_or_default().to_string();
        let mut ignored = Vec::new();
        let schema = Schema::read(&v["schema"]["openAPIV3Schema"], "", &mut ignored);
        Kind {
            group: group.clone(),
            version: version.clone(),
            kind: names["kind"].as_str().unwrap_or_default().into(),
            plural: names["plural"].as_str().unwrap_or_default().into(),
            singular: names["singular"].as_str().unwrap_or_default().into(),
            list_kind: names["listKind"].as_str().unwrap_or_default().into(),
            short_names: names["shortNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            status_subresource: v["subresources"]["status"].is_object(),
            scale: ScalePaths::read(&v["subresources"]).map(Arc::new),
            tracks_generation: true,
            unconditional_update: false,
            patch_schema: None,
            decode: Decode::Schema(Arc::new(schema)),
            decode_error_is_invalid: true,
            namespaced: spec["scope"] == "Namespaced",
            name_rule: NameRule::Subdomain,
            returns_deleted_object: false,
            crd: Some(name.clone()),
            stored_as: (version != storage).then(|| format!("{group}/{storage}")),
            terminating,
            established_at,
            hooks: None,
        }
    };
    let storage_kind = versions
        .iter()
        .find(|v| v["name"] == storage.as_str())
        .map(|v| Arc::new(kind_of(v)))?;
    let served = versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| {
            if v["name"] == storage.as_str() {
                storage_kind.clone()
            } else {
                Arc::new(kind_of(v))
            }
        })
        .collect();
    Some(Entry {
        storage: storage_kind,
        served,
        source: Some(crd["metadata"]["resourceVersion"].clone()),
    })
}

/// The controllers' work for every CRD, done at once (keeps I2): names accepted and the CRD
/// established, its resource registered (or rebuilt); a CRD being deleted has its instances
/// deleted, and once none is left, its finalizer removed and its resource unregistered.
pub(crate) fn sync(st: &mut Storage, now: Timestamp) {
    let now_s = Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string();
    // A resource whose CRD is gone (a deletecollection removes CRDs at once): its
    // instances go, then the resource.
    let names: std::collections::BTreeSet<String> =
        st.keys(CRDS).into_iter().map(|(_, name)| name).collect();
    let orphans: Vec<usize> = st
        .registry()
        .live()
        .filter(|(_, e)| e.storage.crd.as_ref().is_some_and(|n| !names.contains(n)))
        .map(|(id, _)| id)
        .collect();
    for id in orphans {
        for (ns, name) in st.keys(id) {
            let _ = st.delete(id, &ns, &name, &Preconditions::default(), now);
        }
        st.unregister(id);
    }
    for name in names {
        // A CRD served as stored needs nothing: it is not even parsed (keeps the work of a
        // write linear in the number of CRDs).
        let Some(stored) = st.get(CRDS, "", &name) else {
            continue;
        };
        let id = st.registry().find_crd(&name);
        let current = id
            .and_then(|id| st.registry().entry(id))
            .is_some_and(|e| e.source == Some(Value::String(stored.rv.to_string())));
        if current && !stored.meta.deleting {
            continue;
        }
        let crd = stored.value();
        if !crd["metadata"]["deletionTimestamp"].is_null() {
            finalize(st, crd, id, now, &now_s);
            continue;
        }
        let mut crd = crd;
        let (names, conflict) = accepted_names(st, &crd);
        let mut changed = names != crd["status"]["acceptedNames"];
        crd["status"]["acceptedNames"] = names;
        let accepted = match &conflict {
            None => ("True", "NoConflicts", "no conflicts found".to_string()),
            Some((reason, message)) => ("False", *reason, message.clone()),
        };
        let was = condition(&crd, "NamesAccepted").cloned();
        set_condition(
            &mut crd,
            "NamesAccepted",
            accepted.0,
            accepted.1,
            &accepted.2,
            &now_s,
        );
        changed |= was.as_ref() != condition(&crd, "NamesAccepted");
        if !is_true(&crd, "Established") {
            let (reason, message) = if conflict.is_none() {
                ("Installing", "the initial names have been accepted")
            } else {
                ("NotAccepted", "not all names are accepted")
            };
            let was = condition(&crd, "Established").cloned();
            set_condition(&mut crd, "Established", "False", reason, message, &now_s);
            changed |= was.as_ref() != condition(&crd, "Established");
        }
        if changed {
            match st.put(CRDS, crd) {
                Ok(s) => crd = s.value(),
                Err(_) => continue,
            }
        }
        // The establishing controller.
        if is_true(&crd, "NamesAccepted") && !is_true(&crd, "Established") {
            set_condition(
                &mut crd,
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
                &now_s,
            );
            match st.put(CRDS, crd) {
                Ok(s) => crd = s.value(),
                Err(_) => continue,
            }
        }
        if !(is_true(&crd, "NamesAccepted") || is_true(&crd, "Established")) {
            continue;
        }
        serve(st, &crd, id);
    }
}

/// Registers or rebuilds the resource of an accepted CRD.
fn serve(st: &mut Storage, crd: &Value, id: Option<usize>) {
    let rv = &crd["metadata"]["resourceVersion"];
    let established_at = match id.and_then(|id| st.registry().entry(id)) {
        Some(e) if e.source.as_ref() == Some(rv) => return,
        Some(e) => e.storage.established_at,
        None => Some(tokio::time::Instant::now()),
    };
    let Some(entry) = entry_of(crd, established_at) else {
        return;
    };
    match id {
        Some(id) => st.reregister(id, entry),
        None => {
            // A conflict with a resource the registry already serves leaves it unserved.
            let _ = st.register(entry);
        }
    }
}

/// The finalizer controller on a CRD being deleted: it says so (`InstanceDeletionInProgress`,
/// a write of its own), deletes the instances, then writes `InstanceDeletionCompleted` and
/// removes its finalizer; that write deletes the CRD, whose DELETED event carries the CRD as
/// it was stored before it (etcd's previous value, as upstream's watchers see it).
fn finalize(st: &mut Storage, crd: Value, id: Option<usize>, now: Timestamp, now_s: &str) {
    let mut crd = crd;
    if let Some(id) = id {
        serve(st, &crd, Some(id)); // rebuilt as terminating: creates are refused
        let mut marked = crd.clone();
        set_condition(
            &mut marked,
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
            now_s,
        );
        if marked != crd
            && let Ok(s) = st.put(CRDS, marked)
        {
            crd = s.value();
        }
        for (ns, name) in st.keys(id) {
            let _ = st.delete(id, &ns, &name, &Preconditions::default(), now);
        }
        if st.count(id) > 0 {
            return;
        }
        st.unregister(id);
    }
    let mut done = crd.clone();
    if let Some(f) = done["metadata"]["finalizers"].as_array_mut() {
        f.retain(|f| f != CLEANUP_FINALIZER);
    }
    set_condition(
        &mut done,
        "Terminating",
        "True",
        "InstanceDeletionCompleted",
        "removed all instances",
        now_s,
    );
    let held = done["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if held {
        let _ = st.put(CRDS, done);
    } else {
        let _ = st.remove(CRDS, crd);
    }
}

/// The CRD's delete (`etcd.go`): the first one marks the CRD (deletion timestamp, the
/// cleanup finalizer, `Terminating`) and answers with it; the finalizer controller then
/// does the rest ([`sync`]).
pub(crate) fn mark_deleted(
    st: &mut Storage,
    name: &str,
    pre: &Preconditions,
    now: Timestamp,
) -> Result<Arc<super::storage::Stored>, super::errors::ApiError> {
    let cur = st.get(CRDS, "", name).ok_or_else(|| {
        super::errors::ApiError::not_found(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            name,
        )
    })?;
    let mut crd = cur.value();
    if let Some(uid) = &pre.uid
        && crd["metadata"]["uid"] != uid.as_str()
    {
        return Err(super::errors::ApiError::conflict(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            name,
            format!(
                "precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                crd["metadata"]["uid"].as_str().unwrap_or_default()
            ),
        ));
    }
    if let Some(rv) = &pre.resource_version
        && *rv != cur.rv.to_string()
    {
        return Err(super::errors::ApiError::conflict(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            name,
            format!(
                "precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                cur.rv
            ),
        ));
    }
    if !crd["metadata"]["deletionTimestamp"].is_null() {
        return Ok(cur);
    }
    let now_s = Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string();
    crd["metadata"]["deletionTimestamp"] = json!(now_s);
    let fins = &mut crd["metadata"]["finalizers"];
    match fins.as_array_mut() {
        Some(list) if list.iter().any(|f| f == CLEANUP_FINALIZER) => {}
        Some(list) => list.push(json!(CLEANUP_FINALIZER)),
        None => *fins = json!([CLEANUP_FINALIZER]),
    }
    set_condition(
        &mut crd,
        "Terminating",
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        &now_s,
    );
    st.put(CRDS, crd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kube_aware_strings() {
        let mut v = vec![
            "v1alpha1", "v2beta1", "foo", "v1", "v2", "v1beta2", "v1beta1",
        ];
        v.sort_by(|a, b| {
            let (pa, pb) = (priority(a), priority(b));
            (pb.0, pb.1, pb.2, &pa.3).cmp(&(pa.0, pa.1, pa.2, &pb.3))
        });
        assert_eq!(
            v,
            [
                "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }
}
