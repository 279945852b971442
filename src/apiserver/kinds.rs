//! A served kind, and how each one's objects are decoded and validated; the built-in kinds
//! every server starts with (the registry, `registry`, holds them and the CRDs' kinds).
//!
//! Follows the apiserver's per-resource strategies: a built-in kind (`ConfigMap`, `Namespace`,
//! `CustomResourceDefinition`) decodes strictly into its Go type (a type error is a 400 from
//! the decoder), a custom resource is checked against its structural schema (a type error is
//! a 422) and pruned of unknown fields: a CRD's resource is decoded by its schema (`schema`).
//! A Namespace also has its strategy's hooks
//! (`PrepareForCreate`, `PrepareForUpdate`, `Canonicalize`, kubernetes v1.37.2
//! `pkg/registry/core/namespace/strategy.go`): Active on create, the `kubernetes` finalizer in
//! `spec.finalizers` (kept as stored by the main endpoint; the `finalize` subresource writes
//! it), and the label naming it. A Lease
//! (`coordination.k8s.io/v1`, the lock client-go's leader election holds) has its strategy's
//! rules (kubernetes v1.37.2 `pkg/registry/coordination/lease/strategy.go`): every update needs
//! a resourceVersion (`AllowUnconditionalUpdate` is false, so two candidates racing for one
//! lease cannot both win), `spec.strategy` and `spec.preferredHolder` are dropped as the
//! `CoordinatedLeaderElection` gate (off by default) drops them, and `ValidateLeaseSpec`'s
//! bounds are 422.
//!
//! The kinds operators own (Secret, Service, Deployment and the rest) are in `builtin`, each
//! with its strategy's hooks ([`Kind::hooks`]), appended after these.
//!
//! # Differences from upstream
//! - A PUT to a Lease that does not exist is 404; upstream's lease strategy allows create on
//!   update. client-go's Lease lock creates with POST, so it never relies on it.
//! - A field k8s-openapi requires (a `NamespaceCondition`'s `status`, an owner reference's
//!   `uid`) is required in a body; Go's decoder would take a missing one as empty.

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::errors::ApiError;
use super::strategic::{self, Ty};
use super::validation::{self, NameRule, ReasonedCause};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::sync::Arc;

use super::customresourcedefinition as crd;
use super::scale::ScalePaths;
use super::schema::{self, Schema};
use super::strategy::{self, Hooks};

/// One resource the server serves.
#[derive(Debug)]
pub(crate) struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    /// The kind of a list of them (`{kind}List`, or a CRD's `names.listKind`).
    pub list_kind: String,
    pub short_names: Vec<String>,
    /// The `/status` subresource: the main endpoint ignores `status`, `/status` writes only it.
    pub status_subresource: bool,
    /// The `/scale` subresource's paths (a custom resource whose CRD declares one).
    pub scale: Option<Arc<ScalePaths>>,
    /// `metadata.generation` is kept (starts at 1, bumps when the spec changes).
    pub tracks_generation: bool,
    /// An update without `metadata.resourceVersion` is allowed (no optimistic concurrency).
    pub unconditional_update: bool,
    /// The patch metadata strategic merge patch follows; `None` refuses it with 415 (custom
    /// resources, as upstream).
    pub patch_schema: Option<&'static Ty>,
    /// How a body is decoded: a typed round trip, or a CRD's structural schema.
    pub decode: Decode,
    /// A decode failure is 422 (schema validation) rather than 400 (decoder).
    pub decode_error_is_invalid: bool,
    /// Objects live in a namespace (else the kind is cluster-scoped: key `("", name)`).
    pub namespaced: bool,
    /// How names are checked.
    pub name_rule: NameRule,
    /// A delete that removes the object at once answers with the object (the registry's
    /// `ReturnDeletedObject`), else with a `Status` of success naming it (`finalizeDelete`:
    /// ConfigMaps, Leases and custom resources alike, as kube-apiserver v1.37.2 answers in the
    /// conformance suite). A namespace is never removed at once upstream: its delete answers
    /// with the namespace, Terminating.
    pub returns_deleted_object: bool,
    /// The CustomResourceDefinition that serves this kind; `None` for a built-in kind.
    pub crd: Option<String>,
    /// The `apiVersion` objects are stored at, when this kind is a served version other than
    /// the storage version: a body is converted to it (as `strategy: None` conversion does),
    /// and a stored object is converted back to this version when it is read.
    pub stored_as: Option<String>,
    /// Its CRD is being deleted: creates are refused.
    pub terminating: bool,
    /// When its CRD was established (tokio's clock): a create waits until
    /// two seconds after it, as upstream's handler does.
    pub established_at: Option<tokio::time::Instant>,
    /// The strategy of a built-in kind of `builtin` (its defaults are in its decoder).
    pub hooks: Option<&'static Hooks>,
}

/// How a kind's bodies are decoded.
#[derive(Debug)]
pub(crate) enum Decode {
    /// Into the typed object and back, dropping unknown fields (a built-in kind).
    Typed(fn(Value) -> Result<Value, String>),
    /// Pruned, defaulted and validated by a CRD version's structural schema.
    Schema(Arc<Schema>),
}

/// Index of ConfigMaps in [`builtins`], and their id in every registry.
#[cfg(test)]
pub(crate) const CONFIGMAPS: usize = 0;
/// Index of Namespaces in [`builtins`], and their id in every registry.
pub(crate) const NAMESPACES: usize = 1;
/// Index of CustomResourceDefinitions in [`builtins`], and their id in every registry.
pub(crate) const CRDS: usize = 3;

/// Built-in kind `i` (see [`builtins`]), for unit tests.
#[cfg(test)]
pub(crate) fn builtin(i: usize) -> Kind {
    builtins().into_iter().nth(i).expect("a built-in kind")
}

/// The namespaces a fresh cluster has, as kube-apiserver's bootstrap controllers create them
/// (`default`; `kube-system`, `kube-public`, `kube-node-lease`). None of them may be deleted
/// (the namespace lifecycle admission's immortal namespaces).
pub(crate) const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The finalizer every namespace gets on create (`FinalizerKubernetes`): the namespace
/// controller removes it once the namespace's content is gone.
pub(crate) const NAMESPACE_FINALIZER: &str = "kubernetes";

/// An empty `spec.finalizers` is not written, as Go's `omitempty` drops it on the wire.
pub(crate) fn omit_empty_spec_finalizers(ns: &mut Value) {
    if !holds_finalizers(ns, "spec")
        && let Some(spec) = ns.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("finalizers");
    }
}

/// Whether `v[field]["finalizers"]` is a non-empty list.
pub(crate) fn holds_finalizers(v: &Value, field: &str) -> bool {
    v[field]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

/// The label every namespace carries, naming it (`kubernetes.io/metadata.name`).
pub(crate) const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn round_trip<T: Serialize + DeserializeOwned>(v: Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// The kinds every server serves from its start, indexed by the constants above: the first
/// entries of its registry.
pub(crate) fn builtins() -> Vec<Kind> {
    vec![
        Kind {
            patch_schema: Some(&strategic::CONFIG_MAP),
            ..Kind::base(
                "",
                "ConfigMap",
                "configmaps",
                &["cm"],
                round_trip::<ConfigMap>,
            )
        },
        // Namespaces (kubernetes v1.37.2 `pkg/registry/core/namespace`): cluster-scoped, a
        // status subresource, `spec.finalizers` written only through the finalize subresource.
        Kind {
            status_subresource: true,
            patch_schema: Some(&strategic::NAMESPACE),
            namespaced: false,
            returns_deleted_object: true,
            name_rule: NameRule::Label,
            ..Kind::base(
                "",
                "Namespace",
                "namespaces",
                &["ns"],
                round_trip::<Namespace>,
            )
        },
        // leases (coordination.k8s.io/v1): begin
        // Leases (kubernetes v1.37.2 `pkg/registry/coordination/lease`): namespaced, no
        // status, optimistic concurrency on every update.
        Kind {
            unconditional_update: false,
            patch_schema: Some(&strategic::LEASE),
            ..Kind::base(
                "coordination.k8s.io",
                "Lease",
                "leases",
                &[],
                round_trip::<Lease>,
            )
        },
        // leases (coordination.k8s.io/v1): end
        // CustomResourceDefinitions (apiextensions-apiserver v0.37.2
        // `pkg/registry/customresourcedefinition`): cluster-scoped, a status subresource, a
        // generation, optimistic concurrency on every update; each one serves a resource
        // (`crd_controllers`).
        Kind {
            status_subresource: true,
            tracks_generation: true,
            unconditional_update: false,
            namespaced: false,
            ..Kind::base(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                &["crd", "crds"],
                round_trip::<CustomResourceDefinition>,
            )
        },
    ]
    .into_iter()
    .collect()
}

impl Kind {
    /// A built-in `v1` kind with the generic registry's defaults: namespaced, no status
    /// subresource, no generation, updates without a resourceVersion allowed, DNS-subdomain
    /// names, a type error a 400, a delete answered with a `Status`.
    pub(crate) fn base(
        group: &str,
        kind: &str,
        plural: &str,
        short_names: &[&str],
        decode: fn(Value) -> Result<Value, String>,
    ) -> Kind {
        Kind {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            list_kind: format!("{kind}List"),
            short_names: short_names.iter().map(|s| s.to_string()).collect(),
            status_subresource: false,
            scale: None,
            tracks_generation: false,
            unconditional_update: true,
            patch_schema: None,
            decode: Decode::Typed(decode),
            decode_error_is_invalid: false,
            namespaced: true,
            name_rule: NameRule::Subdomain,
            returns_deleted_object: false,
            crd: None,
            stored_as: None,
            terminating: false,
            established_at: None,
            hooks: None,
        }
    }
}

impl Kind {
    /// `v1` or `group/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", &self.group, &self.version)
        }
    }

    /// Checks a request body against the path and this kind, and returns it normalised:
    /// `apiVersion`, `kind` and `metadata.namespace` set, unknown fields dropped,
    /// server-owned metadata the client may not write removed. Nothing is stored.
    pub fn prepare(
        &self,
        namespace: &str,
        path_name: Option<&str>,
        body: Value,
    ) -> Result<Value, ApiError> {
        let Value::Object(mut map) = body else {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        };
        let want_av = self.api_version();
        for (field, want) in [("apiVersion", want_av.as_str()), ("kind", &self.kind)] {
            match map.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s == want => {}
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "{field} {other} in the body does not match {want:?}, which the path serves"
                    )));
                }
            }
            map.insert(field.into(), Value::String(want.into()));
        }
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        let Value::Object(meta) = meta else {
            return Err(ApiError::bad_request("metadata must be an object"));
        };
        if self.namespaced {
            match meta.get("namespace").and_then(Value::as_str) {
                None | Some("") => {}
                Some(ns) if ns == namespace => {}
                Some(ns) => {
                    return Err(ApiError::bad_request(format!(
                        "the namespace of the object ({ns}) does not match the namespace of the request ({namespace})"
                    )));
                }
            }
            meta.insert("namespace".into(), Value::String(namespace.into()));
        } else {
            // A cluster-scoped object has no namespace: upstream clears whatever the body says.
            meta.remove("namespace");
        }
        if let Some(path_name) = path_name {
            match meta.get("name").and_then(Value::as_str) {
                None | Some("") => {
                    meta.insert("name".into(), Value::String(path_name.into()));
                }
                Some(n) if n == path_name => {}
                Some(n) => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name in the path ({path_name})"
                    )));
                }
            }
        }
        meta.remove("managedFields");
        meta.remove("selfLink");
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let mut value = Value::Object(map);
        if self.is_crd() {
            crd::default(&mut value);
        }
        let mut value = self.decode(value).map_err(|e| {
            if self.decode_error_is_invalid {
                ApiError::invalid(&self.group, &self.kind, &name, &[("body", e)])
            } else {
                ApiError::bad_request(format!("the body is not a valid {}: {e}", self.kind))
            }
        })?;
        if self.is_crd() {
            crd::go_numbers(&mut value);
        }
        validation::dedup_owner_references(&mut value["metadata"]);
        validation::omit_empty_lists(&mut value["metadata"]);
        self.validate(&name, &value, path_name.is_none())?;
        if let Some(stored) = &self.stored_as {
            value["apiVersion"] = Value::String(stored.clone());
        }
        Ok(value)
    }

    /// The kind's decoder: a typed round trip, or the schema's pruning and defaulting (the
    /// object's `metadata` round-trips through ObjectMeta, as upstream's coercion drops
    /// unknown metadata fields).
    fn decode(&self, mut v: Value) -> Result<Value, String> {
        match &self.decode {
            Decode::Typed(round_trip) => round_trip(v),
            Decode::Schema(schema) => {
                schema.prune_and_default(&mut v, true);
                v["metadata"] = round_trip::<ObjectMeta>(v["metadata"].take())
                    .map_err(|e| format!("metadata: {e}"))?;
                Ok(v)
            }
        }
    }

    /// A write to the status subresource: the body's status on the stored object, and the
    /// metadata as the kind's status strategy takes it (`old`'s, unless `builtin` says).
    pub fn status_write(&self, body: &Value, old: &Value) -> Value {
        match self.builtin_hooks() {
            Some(h) => strategy::status_write(body, old, h.status_keeps),
            None => strategy::with_status(body, old),
        }
    }

    /// A built-in kind's own rules for an updated object (`Validate` within upstream's
    /// `ValidateUpdate`); none for the other kinds, whose rules `prepare` checks.
    pub fn validate_updated(&self, new: &Value) -> Vec<schema::Cause> {
        let mut causes = Vec::new();
        if let Some(h) = self.builtin_hooks() {
            (h.validate)(new, &mut causes);
        }
        causes
    }

    /// Whether the kind's update rules come before its object rules in a 422 (a Secret's
    /// and a Service's do; a workload's spec comes first).
    pub fn update_rules_first(&self) -> bool {
        self.builtin_hooks().is_some_and(|h| h.update_rules_first)
    }

    /// The strategy of a built-in kind of `builtin` (never a CRD's kind of the same name).
    fn builtin_hooks(&self) -> Option<&'static Hooks> {
        self.hooks.filter(|_| self.crd.is_none())
    }

    /// Whether this is the CustomResourceDefinition kind itself.
    pub fn is_crd(&self) -> bool {
        self.crd.is_none() && self.kind == "CustomResourceDefinition"
    }

    /// Whether this is the built-in `kind` of `group` (a CRD may reuse a built-in kind's name
    /// in a group of its own).
    fn is(&self, group: &str, kind: &str) -> bool {
        self.crd.is_none() && self.group == group && self.kind == kind
    }

    /// A stored object as this kind serves it: converted to this version, pruned and
    /// defaulted by its schema (upstream's read path). The stored bytes themselves when there
    /// is nothing to do.
    pub fn present(&self, stored: &Bytes) -> Bytes {
        let Decode::Schema(schema) = &self.decode else {
            return stored.clone();
        };
        if self.stored_as.is_none() && !schema.has_defaults() {
            return stored.clone();
        }
        let Ok(mut v) = serde_json::from_slice::<Value>(stored) else {
            return stored.clone();
        };
        v = self.present_value(v);
        Bytes::from(serde_json::to_vec(&v).expect("a JSON value serialises"))
    }

    /// [`Kind::present`] on a parsed object.
    pub fn present_value(&self, mut v: Value) -> Value {
        if let Decode::Schema(schema) = &self.decode {
            if self.stored_as.is_some() {
                v["apiVersion"] = Value::String(self.api_version());
            }
            schema.prune_and_default(&mut v, true);
        }
        v
    }

    /// Field validation that yields 422 Invalid, as the resource's strategy would: object
    /// metadata (see `validation`) and, for a ConfigMap, `ValidateConfigMap` (kubernetes v1.36
    /// `pkg/apis/core/validation`): key syntax, no key in both maps, at most 1 MiB of values.
    fn validate(&self, name: &str, v: &Value, create: bool) -> Result<(), ApiError> {
        let mut causes =
            validation::object_meta_of(&v["metadata"], create, self.namespaced, self.name_rule);
        if self.is("", "ConfigMap") {
            config_map(v, &mut causes);
        }
        if self.is("coordination.k8s.io", "Lease") {
            lease_spec(v, &mut causes);
        }
        // `ValidateNamespace` names the list; on update the stored list is kept (and checked
        // by the finalize subresource, entry by entry, in storage).
        if self.is("", "Namespace") && create {
            for (_, m) in validation::spec_finalizer_causes(v, false) {
                causes.push(("spec.finalizers", m));
            }
        }
        // The CRD's own rules and a custom resource's schema name fields of their own.
        let mut more: Vec<schema::Cause> = Vec::new();
        // A built-in kind's own rules on update are checked with its update rules (storage).
        if let Some(h) = self.builtin_hooks()
            && create
        {
            (h.validate)(v, &mut more);
        }
        if self.is_crd() {
            crd::validate(v, &mut more);
        }
        if let Decode::Schema(schema) = &self.decode {
            schema.validate(v, "", &mut more);
            if let Some(scale) = &self.scale {
                scale.causes(v, true, &mut more);
            }
            if create {
                schema.evaluate_rules(v, None, &mut more);
            }
        }
        if causes.is_empty() && more.is_empty() {
            Ok(())
        } else if more.is_empty() {
            Err(ApiError::invalid(&self.group, &self.kind, name, &causes))
        } else {
            let all: Vec<(&str, &str, String)> = causes
                .iter()
                .map(|(f, m)| (*f, "FieldValueInvalid", m.clone()))
                .chain(more.iter().map(|(f, r, m)| (f.as_str(), *r, m.clone())))
                .collect();
            Err(ApiError::invalid_causes(
                &self.group,
                &self.kind,
                name,
                &all,
            ))
        }
    }
}

impl Kind {
    /// The kind's `PrepareForCreate` and `Canonicalize`, after the name is known: a Namespace
    /// is Active, carries the `kubernetes` finalizer in `spec.finalizers` and the label naming
    /// it.
    pub fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(h) = self.builtin_hooks() {
            (h.prepare_for_create)(obj);
            return;
        }
        if self.is_crd() {
            crd::prepare_for_create(obj);
            return;
        }
        if self.is("coordination.k8s.io", "Lease") {
            drop_coordinated_fields(obj, None);
            return;
        }
        if !self.is("", "Namespace") {
            return;
        }
        obj["status"] = serde_json::json!({"phase": "Active"});
        let fins = &mut obj["spec"]["finalizers"];
        match fins.as_array_mut() {
            Some(list) if list.iter().any(|f| f == NAMESPACE_FINALIZER) => {}
            Some(list) => list.push(Value::from(NAMESPACE_FINALIZER)),
            None => *fins = serde_json::json!([NAMESPACE_FINALIZER]),
        }
        self.canonicalize(obj);
    }

    /// The kind's `PrepareForUpdate` on the main endpoint, after the stored status is put back:
    /// a Namespace's `spec.finalizers` are the stored ones (only `/finalize` changes them).
    pub fn prepare_for_update(&self, obj: &mut Value, old: &Value) {
        if let Some(h) = self.builtin_hooks() {
            (h.prepare_for_update)(obj, old);
            return;
        }
        if self.is_crd() {
            crd::prepare_for_update(obj);
            return;
        }
        if self.is("coordination.k8s.io", "Lease") {
            drop_coordinated_fields(obj, Some(old));
            return;
        }
        if !self.is("", "Namespace") {
            return;
        }
        match old["spec"].get("finalizers") {
            Some(f) => obj["spec"]["finalizers"] = f.clone(),
            None => {
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
            }
        }
        self.canonicalize(obj);
    }

    /// The kind's own `ValidateUpdate` rules, after the object-metadata ones: a ConfigMap
    /// stored with `immutable: true` keeps `immutable`, `data` and `binaryData`
    /// (`ValidateConfigMapUpdate`, kubernetes v1.37.2 `pkg/apis/core/validation`).
    pub fn validate_update(&self, new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
        if let Some(h) = self.builtin_hooks() {
            (h.validate_update)(new, old, causes);
        }
        if self.is("", "ConfigMap") && old["immutable"] == Value::Bool(true) {
            config_map_immutable(new, old, causes);
        }
    }

    /// A custom resource's CEL rules on an update (of the object or its status), with the
    /// stored object as `oldSelf` (read as its schema presents it).
    pub fn validate_rules_update(&self, new: &Value, old: &Value) -> Result<(), ApiError> {
        let Decode::Schema(schema) = &self.decode else {
            return Ok(());
        };
        if !schema.has_rules() {
            return Ok(());
        }
        let old = self.present_value(old.clone());
        let mut causes = Vec::new();
        schema.evaluate_rules(new, Some(&old), &mut causes);
        if causes.is_empty() {
            return Ok(());
        }
        let all: Vec<(&str, &str, String)> = causes
            .iter()
            .map(|(f, r, m)| (f.as_str(), *r, m.clone()))
            .collect();
        let name = new["metadata"]["name"].as_str().unwrap_or_default();
        Err(ApiError::invalid_causes(
            &self.group,
            &self.kind,
            name,
            &all,
        ))
    }

    /// `Canonicalize`: a Namespace's name label matches its name.
    pub(crate) fn canonicalize(&self, obj: &mut Value) {
        let name = obj["metadata"]["name"].clone();
        obj["metadata"]["labels"][NAMESPACE_NAME_LABEL] = name;
    }
}

// leases (coordination.k8s.io/v1): begin
/// The lease strategy's `PrepareForCreate` and `PrepareForUpdate` with the
/// `CoordinatedLeaderElection` gate off (its default): `spec.strategy` and
/// `spec.preferredHolder` are dropped, unless the stored lease (`old`) already has them.
fn drop_coordinated_fields(obj: &mut Value, old: Option<&Value>) {
    for field in ["strategy", "preferredHolder"] {
        let kept = old.is_some_and(|o| !o["spec"][field].is_null());
        if !kept && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove(field);
        }
    }
}

/// `ValidateLeaseSpec` (kubernetes v1.37.2 `pkg/apis/coordination/validation`): a lease
/// duration above 0, transitions at 0 or above. Its rules for `strategy` and `preferredHolder`
/// never meet a stored value here: with the gate off, neither field is ever stored.
fn lease_spec(v: &Value, causes: &mut Vec<validation::Cause>) {
    let spec = &v["spec"];
    if spec["leaseDurationSeconds"]
        .as_i64()
        .is_some_and(|d| d <= 0)
    {
        causes.push((
            "spec.leaseDurationSeconds",
            format!(
                "Invalid value: {}: must be greater than 0",
                spec["leaseDurationSeconds"]
            ),
        ));
    }
    if spec["leaseTransitions"].as_i64().is_some_and(|t| t < 0) {
        causes.push((
            "spec.leaseTransitions",
            format!(
                "Invalid value: {}: must be greater than or equal to 0",
                spec["leaseTransitions"]
            ),
        ));
    }
}
// leases (coordination.k8s.io/v1): end

/// What upstream says of each field an immutable ConfigMap keeps.
const IMMUTABLE: &str = "Forbidden: field is immutable when `immutable` is set";

/// An immutable ConfigMap's update: `immutable` stays true, `data` and `binaryData` stay as
/// stored. An empty map counts as no map, as kube-apiserver v1.37.2 answers (a `data: {}`
/// sent to an immutable ConfigMap without data is accepted there).
fn config_map_immutable(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    if new["immutable"] != Value::Bool(true) {
        causes.push(("immutable", "FieldValueForbidden", IMMUTABLE.into()));
    }
    let map = |v: &Value| v.as_object().filter(|m| !m.is_empty()).cloned();
    for field in ["data", "binaryData"] {
        if map(&new[field]) != map(&old[field]) {
            causes.push((field, "FieldValueForbidden", IMMUTABLE.into()));
        }
    }
}

/// The most bytes of `data` and `binaryData` values together (`core.MaxSecretSize`).
pub(crate) const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;

/// `IsConfigMapKey`: `[-._a-zA-Z0-9]+`, at most 253 bytes, not `.`, `..` or `..`-prefixed.
fn is_config_map_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        && !k.starts_with("..")
        && k != "."
}

fn config_map(v: &Value, causes: &mut Vec<validation::Cause>) {
    let mut total = 0usize;
    for field in ["data", "binaryData"] {
        for (k, val) in v[field].as_object().into_iter().flatten() {
            if !is_config_map_key(k) {
                causes.push((
                    "data",
                    format!("key {k:?} is not a valid config key ([-._a-zA-Z0-9]+, not '.' or '..'-prefixed, at most 253 characters)"),
                ));
            }
            if field == "binaryData" && v["data"].get(k).is_some() {
                causes.push((
                    "binaryData",
                    format!("key {k:?} duplicates a key present in data"),
                ));
            }
            let s = val.as_str().unwrap_or_default();
            let len = if field == "binaryData" {
                // The stored form is base64; upstream counts the decoded bytes.
                (s.len() / 4 * 3).saturating_sub(s.bytes().rev().take_while(|b| *b == b'=').count())
            } else {
                s.len()
            };
            total = total.saturating_add(len);
        }
    }
    if total > MAX_CONFIG_MAP_BYTES {
        causes.push((
            "data",
            format!("Too long: data and binaryData hold {total} bytes, more than the limit of {MAX_CONFIG_MAP_BYTES}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prepare_fills_type_and_namespace_and_drops_unknown_fields() {
        let v = builtin(CONFIGMAPS)
            .prepare(
                "ns1",
                None,
                json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "bogus": 1}),
            )
            .unwrap();
        assert_eq!(v["kind"], "ConfigMap");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["metadata"]["namespace"], "ns1");
        assert!(v.get("bogus").is_none());
    }

    #[test]
    fn a_type_error_is_400_for_a_builtin_and_422_for_a_custom_resource() {
        let cm =
            builtin(CONFIGMAPS).prepare("d", None, json!({"metadata": {"name": "a"}, "data": 5}));
        assert_eq!(cm.unwrap_err().code, 400);
        // A custom resource, as a CRD's kind decodes it: by its structural schema.
        let mut causes = Vec::new();
        let schema = Schema::read(
            &json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"replicas": {"type": "integer"}}}}}),
            "",
            &mut causes,
        );
        assert!(causes.is_empty(), "{causes:?}");
        let custom = Kind {
            tracks_generation: true,
            unconditional_update: false,
            decode: Decode::Schema(Arc::new(schema)),
            decode_error_is_invalid: true,
            crd: Some("things.example.com".into()),
            ..Kind::base("example.com", "Thing", "things", &[], Ok)
        };
        let w = custom.prepare(
            "d",
            None,
            json!({"metadata": {"name": "a"}, "spec": {"replicas": "x"}}),
        );
        assert_eq!(w.unwrap_err().code, 422);
    }

    #[test]
    fn names_labels_and_config_map_limits_are_validated() {
        let e = builtin(CONFIGMAPS)
            .prepare("d", None, json!({"metadata": {"name": "Bad_Name"}}))
            .unwrap_err();
        assert_eq!(e.code, 422);
        let e = builtin(CONFIGMAPS)
            .prepare("Bad", None, json!({"metadata": {"name": "a"}}))
            .unwrap_err();
        assert!(e.message.contains("metadata.namespace"), "{}", e.message);
        let big = "x".repeat(MAX_CONFIG_MAP_BYTES / 2 + 1);
        let e = builtin(CONFIGMAPS)
            .prepare(
                "d",
                None,
                json!({"metadata": {"name": "a"}, "data": {"a": big, "b": big}}),
            )
            .unwrap_err();
        assert!(e.message.contains("Too long"), "{}", e.message);
        let e = builtin(CONFIGMAPS)
            .prepare(
                "d",
                None,
                json!({"metadata": {"name": "a"}, "data": {"k": "1", "..x": "2"}, "binaryData": {"k": "MQ=="}}),
            )
            .unwrap_err();
        assert_eq!(e.details.unwrap()["causes"].as_array().unwrap().len(), 2);
        assert!(is_config_map_key("a.b_C-9"));
        assert!(!is_config_map_key(".") && !is_config_map_key("a/b"));
    }
}
