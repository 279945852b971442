//! A custom resource's structural schema: read from a CRD version's `openAPIV3Schema`, checked
//! as the CRD's validation checks it, and applied to each object as the custom resource
//! handler applies it (pruning, defaulting, then validation).
//!
//! Follows the behaviour of apiextensions-apiserver v0.37.2: `pkg/apiserver/schema/structural.go`
//! and `validation.go` (what makes a schema structural), `pkg/apiserver/schema/pruning/`
//! (unknown fields are dropped unless `x-kubernetes-preserve-unknown-fields`),
//! `pkg/apiserver/schema/defaulting/` (a missing property with a `default` gets it; a `null`
//! where the schema is not nullable is dropped), `pkg/apiserver/schema/objectmeta/` (an
//! embedded resource's `metadata` is coerced to ObjectMeta) and `pkg/apiserver/validation/`
//! (the 422 causes: `Invalid value: "string": spec.replicas in body must be of type integer:
//! "string"`, `Required value`, `Unsupported value`), and `pkg/apiserver/schema/cel/` for
//! the CEL rules of `x-kubernetes-validations` (see `cel`).
//!
//! Why hand-written rather than a JSON-Schema crate: upstream's rules are not JSON Schema's.
//! Pruning and defaulting rewrite the object, `x-kubernetes-*` extensions change what a type
//! means, and the causes must name Kubernetes field paths in kube-openapi's words; a general
//! validator would do none of that and would still need this walk around it.
//!
//! # Invariants
//! 1. A schema is at most [`MAX_DEPTH`] levels deep and [`MAX_NODES`] nodes large; a deeper
//!    or larger one is refused when the CRD is written (422), so every walk below is bounded
//!    by the schema and by the object (itself bounded by the body limit and serde's depth).
//! 2. Applying a schema never fails half-way: pruning and defaulting rewrite a copy, and the
//!    causes are collected over the whole object, in upstream's order within each object.

pub(crate) mod cel;
mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

/// The deepest schema accepted (keeps I1).
pub(crate) const MAX_DEPTH: usize = 32;

/// The most schema nodes accepted in one version's schema (keeps I1).
pub(crate) const MAX_NODES: usize = 4_096;

/// One node of a structural schema.
#[derive(Debug, Default, Clone)]
pub(crate) struct Schema {
    /// `type`: object, array, string, integer, number, boolean; empty for none.
    pub ty: String,
    pub nullable: bool,
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties` as a schema: the object is a map of these.
    pub additional: Option<Box<Schema>>,
    pub items: Option<Box<Schema>>,
    pub required: Vec<String>,
    pub enumeration: Option<Vec<Value>>,
    pub default: Option<Value>,
    pub preserve_unknown: bool,
    pub int_or_string: bool,
    pub embedded: bool,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    /// `pattern`, compiled (at most [`MAX_PATTERN_BYTES`] of program).
    pub pattern: Option<regex::Regex>,
    /// `x-kubernetes-list-type`: `set` and `map` lists hold no duplicates.
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`: what identifies an item of a `map` list.
    pub list_map_keys: Vec<String>,
    /// `format: date-time` on a string: an RFC 3339 time.
    pub date_time: bool,
    /// `x-kubernetes-validations`, compiled.
    pub rules: Vec<Arc<cel::Rule>>,
}

/// Schema keywords this server does not evaluate yet: a schema that uses one is refused
/// rather than served without it.
const NOT_EVALUATED: [&str; 16] = [
    "$ref",
    "$schema",
    "id",
    "definitions",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "exclusiveMinimum",
    "exclusiveMaximum",
];

/// The `format`s of a string this server evaluates: `date-time`, and those kube-openapi does
/// not check (`password`, the numeric ones a generator may write on a string).
const STRING_FORMATS: [&str; 6] = ["", "date-time", "password", "int32", "int64", "double"];

/// The most memory one compiled `pattern` may take (keeps I1).
pub(crate) const MAX_PATTERN_BYTES: usize = 1 << 20;

/// A cause of a 422: field path, reason, message.
pub(crate) type Cause = (String, &'static str, String);

/// What a schema node is read from, with where it is (for the CRD's own causes).
struct Reader<'a> {
    causes: &'a mut Vec<Cause>,
    nodes: usize,
    /// The node being read correlates with an old value on an update (it is not under a
    /// list other than a `map` list).
    correlatable: bool,
}

impl Schema {
    /// Reads `raw` (an `openAPIV3Schema`, as stored) at `path`, checking what makes it
    /// structural and what this server evaluates; the causes name fields under `path`.
    pub fn read(raw: &Value, path: &str, causes: &mut Vec<Cause>) -> Schema {
        let mut r = Reader {
            causes,
            nodes: 0,
            correlatable: true,
        };
        let s = r.node(raw, path, 0, Context::Root);
        if s.ty.is_empty() && !s.preserve_unknown {
            r.causes.push((
                format!("{path}.type"),
                "FieldValueRequired",
                "Required value: must not be empty at the root".into(),
            ));
        } else if !s.ty.is_empty() && s.ty != "object" {
            r.causes.push((
                format!("{path}.type"),
                "FieldValueInvalid",
                format!("Invalid value: {:?}: must be object at the root", s.ty),
            ));
        }
        s
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Root,
    Property,
    Items,
    Additional,
}

impl Reader<'_> {
    fn push(&mut self, field: String, reason: &'static str, message: impl Into<String>) {
        self.causes.push((field, reason, message.into()));
    }

    fn node(&mut self, raw: &Value, path: &str, depth: usize, ctx: Context) -> Schema {
        self.nodes += 1;
        let mut s = Schema::default();
        let Some(m) = raw.as_object() else {
            return s;
        };
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            if self.nodes == MAX_NODES + 1 || depth == MAX_DEPTH + 1 {
                self.push(
                    path.to_string(),
                    "FieldValueForbidden",
                    format!(
                        "Forbidden: this embedded server accepts schemas at most {MAX_DEPTH} levels deep and {MAX_NODES} nodes large"
                    ),
                );
            }
            return s;
        }
        let flag = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        let count = |k: &str| m.get(k).and_then(Value::as_u64);
        s.ty = m
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into();
        s.nullable = flag("nullable");
        s.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields");
        s.int_or_string = flag("x-kubernetes-int-or-string");
        s.embedded = flag("x-kubernetes-embedded-resource");
        s.default = m.get("default").cloned();
        s.enumeration = m.get("enum").and_then(Value::as_array).cloned();
        s.minimum = num("minimum");
        s.maximum = num("maximum");
        s.min_length = count("minLength");
        s.max_length = count("maxLength");
        s.min_items = count("minItems");
        s.max_items = count("maxItems");
        let strings = |k: &str| -> Vec<String> {
            let list = m.get(k).and_then(Value::as_array).into_iter().flatten();
            list.filter_map(|r| r.as_str().map(str::to_string))
                .collect()
        };
        s.required = strings("required");
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            match regex::RegexBuilder::new(p)
                .size_limit(MAX_PATTERN_BYTES)
                .build()
            {
                Ok(re) => s.pattern = Some(re),
                Err(e) => self.push(
                    format!("{path}.pattern"),
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {p:?}: must be a valid regular expression, but isn't: {e}"
                    ),
                ),
            }
        }
        s.list_type = m
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string);
        s.list_map_keys = strings("x-kubernetes-list-map-keys");
        if !matches!(
            s.ty.as_str(),
            "" | "object" | "array" | "string" | "integer" | "number" | "boolean"
        ) {
            self.push(
                format!("{path}.type"),
                "FieldValueNotSupported",
                format!(
                    r#"Unsupported value: {:?}: supported values: "array", "boolean", "integer", "number", "object", "string""#,
                    s.ty
                ),
            );
        }
        let format = m.get("format").and_then(Value::as_str).unwrap_or_default();
        s.date_time = s.ty == "string" && format == "date-time";
        let mut refused: Vec<&str> = NOT_EVALUATED
            .iter()
            .copied()
            .filter(|k| m.contains_key(*k))
            .collect();
        if m.get("uniqueItems") == Some(&Value::Bool(true)) {
            refused.push("uniqueItems");
        }
        if s.ty == "string" && !STRING_FORMATS.contains(&format) {
            refused.push("format");
        }
        for unsupported in refused {
            let what = if unsupported == "format" {
                format!("format {format:?} on a string")
            } else {
                unsupported.to_string()
            };
            self.push(
                format!("{path}.{unsupported}"),
                "FieldValueForbidden",
                format!("Forbidden: this embedded server does not evaluate {what} in a schema yet"),
            );
        }
        // What makes a node structural (upstream's `validateStructuralInvariants` and
        // `validateStructuralCompleteness`, the rules a user meets).
        if s.int_or_string {
            if s.preserve_unknown {
                self.push(
                    format!("{path}.x-kubernetes-preserve-unknown-fields"),
                    "FieldValueInvalid",
                    "Invalid value: true: must be false if x-kubernetes-int-or-string is true",
                );
            }
        } else if s.ty.is_empty() && !s.preserve_unknown && !s.embedded {
            match ctx {
                Context::Property => self.push(
                    format!("{path}.type"),
                    "FieldValueRequired",
                    "Required value: must not be empty for specified object fields",
                ),
                Context::Items => self.push(
                    format!("{path}.type"),
                    "FieldValueRequired",
                    "Required value: must not be empty for specified array items",
                ),
                Context::Root | Context::Additional => {}
            }
        }
        if s.embedded && s.ty != "object" {
            if s.ty.is_empty() {
                self.push(
                    format!("{path}.type"),
                    "FieldValueRequired",
                    "Required value: must be object if x-kubernetes-embedded-resource is true",
                );
            } else {
                self.push(
                    format!("{path}.type"),
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {:?}: must be object if x-kubernetes-embedded-resource is true",
                        s.ty
                    ),
                );
            }
        }
        if s.ty == "array" && m.get("items").is_none() {
            self.push(
                format!("{path}.items"),
                "FieldValueRequired",
                "Required value: must be specified",
            );
        }
        if let Some(props) = m.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                let child = self.node(
                    v,
                    &format!("{path}.properties[{k}]"),
                    depth + 1,
                    Context::Property,
                );
                s.properties.insert(k.clone(), child);
            }
        }
        match m.get("additionalProperties") {
            Some(v @ Value::Object(_)) => {
                if !s.properties.is_empty() {
                    self.push(
                        format!("{path}.additionalProperties"),
                        "FieldValueForbidden",
                        "Forbidden: additionalProperties and properties are mutual exclusive",
                    );
                }
                if ctx == Context::Root {
                    self.push(
                        format!("{path}.additionalProperties"),
                        "FieldValueForbidden",
                        "Forbidden: must not be used at the root",
                    );
                }
                let child = self.node(
                    v,
                    &format!("{path}.additionalProperties"),
                    depth + 1,
                    Context::Additional,
                );
                s.additional = Some(Box::new(child));
            }
            Some(Value::Bool(true)) => s.preserve_unknown = true,
            _ => {}
        }
        if let Some(items) = m.get("items") {
            let was = self.correlatable;
            self.correlatable = was && s.list_type.as_deref() == Some("map");
            let child = self.node(items, &format!("{path}.items"), depth + 1, Context::Items);
            self.correlatable = was;
            s.items = Some(Box::new(child));
        }
        // The rules last: a `fieldPath` names the node's properties.
        let rules = m.get("x-kubernetes-validations").and_then(Value::as_array);
        for (i, raw) in rules.into_iter().flatten().enumerate() {
            let at = format!("{path}.x-kubernetes-validations[{i}]");
            if let Some(rule) = cel::Rule::read(
                raw,
                &at,
                &|p| normalise_field_path(p, &s),
                self.correlatable,
                self.causes,
            ) {
                s.rules.push(Arc::new(rule));
            }
        }
        s
    }
}

/// Where a cause is, as `field.Path` prints it: `spec.items[0].name`, `spec.labels[key]`.
fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// The JSON type of `v` as kube-openapi names it.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` has type `ty` (an integral number is also an integer, an integer also a
/// number, as kube-openapi's type validator allows).
fn has_type(v: &Value, ty: &str) -> bool {
    match (ty, v) {
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        ("number", Value::Number(_)) => true,
        _ => type_of(v) == ty,
    }
}

/// The metadata fields an embedded resource keeps (ObjectMeta's), as `objectmeta.Coerce`
/// drops the rest.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

impl Schema {
    /// Whether any node has a `default` (reads must then apply them).
    pub fn has_defaults(&self) -> bool {
        self.default.is_some()
            || self.properties.values().any(Schema::has_defaults)
            || self.additional.as_ref().is_some_and(|s| s.has_defaults())
            || self.items.as_ref().is_some_and(|s| s.has_defaults())
    }

    /// Prunes unknown fields and applies defaults to `v` (the decoder's work), in place.
    /// `root` keeps `apiVersion`, `kind` and `metadata`, which every object has.
    pub fn prune_and_default(&self, v: &mut Value, root: bool) {
        match v {
            Value::Object(m) => self.object(m, root),
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    for item in items {
                        s.prune_and_default(item, false);
                    }
                }
            }
            _ => {}
        }
    }

    fn object(&self, m: &mut Map<String, Value>, root: bool) {
        let keep_meta = root || self.embedded;
        if let Some(add) = &self.additional {
            for val in m.values_mut() {
                add.prune_and_default(val, false);
            }
        } else if !self.preserve_unknown {
            m.retain(|k, _| {
                self.properties.contains_key(k)
                    || (keep_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            });
        }
        if self.embedded
            && let Some(Value::Object(meta)) = m.get_mut("metadata")
        {
            meta.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
        }
        for (k, s) in &self.properties {
            // A null where the schema allows none and has no default is dropped
            // (`PruneNonNullableNullsWithoutDefaults`); a missing field gets its default.
            if m.get(k).is_some_and(Value::is_null) && !s.nullable {
                m.remove(k);
            }
            if !m.contains_key(k)
                && let Some(d) = &s.default
            {
                m.insert(k.clone(), d.clone());
            }
            if let Some(val) = m.get_mut(k) {
                s.prune_and_default(val, false);
            }
        }
    }

    /// Validates `v` at `path` against this schema, collecting kube-apiserver's causes.
    pub fn validate(&self, v: &Value, path: &str, causes: &mut Vec<Cause>) {
        if v.is_null() && self.nullable {
            return;
        }
        if self.int_or_string {
            if !(has_type(v, "integer") || v.is_string()) {
                let got = type_of(v);
                causes.push((
                    path.to_string(),
                    "FieldValueTypeInvalid",
                    format!(
                        "Invalid value: {got:?}: {path} in body must be of type integer,string: {got:?}"
                    ),
                ));
            }
            return;
        }
        if !self.ty.is_empty() && !has_type(v, &self.ty) {
            let got = type_of(v);
            causes.push((
                path.to_string(),
                "FieldValueTypeInvalid",
                format!(
                    "Invalid value: {got:?}: {path} in body must be of type {}: {got:?}",
                    self.ty
                ),
            ));
            return;
        }
        if let Some(allowed) = &self.enumeration
            && !allowed.contains(v)
        {
            let list: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => format!("{s:?}"),
                    other => format!("{:?}", other.to_string()),
                })
                .collect();
            causes.push((
                path.to_string(),
                "FieldValueNotSupported",
                format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(v),
                    list.join(", ")
                ),
            ));
        }
        self.bounds(v, path, causes);
        match v {
            Value::Object(m) => {
                if self.embedded {
                    for f in ["apiVersion", "kind"] {
                        if m.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                            causes.push((
                                child(path, f),
                                "FieldValueRequired",
                                "Required value: must not be empty".into(),
                            ));
                        }
                    }
                }
                for r in &self.required {
                    if !m.contains_key(r) {
                        causes.push((
                            child(path, r),
                            "FieldValueRequired",
                            "Required value".into(),
                        ));
                    }
                }
                for (k, val) in m {
                    if let Some(s) = self.properties.get(k) {
                        s.validate(val, &child(path, k), causes);
                    } else if let Some(s) = &self.additional {
                        s.validate(val, &format!("{path}[{k}]"), causes);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    for (i, item) in items.iter().enumerate() {
                        s.validate(item, &format!("{path}[{i}]"), causes);
                    }
                }
                self.unique(items, path, causes);
            }
            _ => {}
        }
    }

    /// A `set` or `map` list's duplicates (`listtype`): each later copy of an item (a set) or
    /// of an item's keys (a map) is a `Duplicate value`. Items are compared by their JSON
    /// (object keys sorted, as Go's encoder sorts them), through a hash set: linear in the
    /// list's size, whatever a client sends.
    fn unique(&self, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
        let key = |item: &Value| -> Option<Value> {
            match self.list_type.as_deref() {
                Some("set") => Some(item.clone()),
                Some("map") => {
                    let m = item.as_object()?;
                    let keys = self
                        .list_map_keys
                        .iter()
                        .filter_map(|k| m.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    Some(Value::Object(keys))
                }
                _ => None,
            }
        };
        let mut seen = std::collections::HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let Some(k) = key(item) else {
                continue;
            };
            if !seen.insert(k.to_string()) {
                causes.push((
                    format!("{path}[{i}]"),
                    "FieldValueDuplicate",
                    format!("Duplicate value: {}", shown(&k)),
                ));
            }
        }
    }

    /// `minimum`, `maximum`, the length and item-count bounds.
    fn bounds(&self, v: &Value, path: &str, causes: &mut Vec<Cause>) {
        let invalid = |causes: &mut Vec<Cause>, detail: String| {
            causes.push((
                path.to_string(),
                "FieldValueInvalid",
                format!("Invalid value: {}: {path} in body {detail}", shown(v)),
            ));
        };
        if let Some(n) = v.as_f64() {
            if let Some(min) = self.minimum.filter(|min| n < *min) {
                invalid(causes, format!("should be greater than or equal to {min}"));
            }
            if let Some(max) = self.maximum.filter(|max| n > *max) {
                invalid(causes, format!("should be less than or equal to {max}"));
            }
        }
        if let Some(s) = v.as_str() {
            if self.date_time && s.parse::<k8s_openapi::jiff::Timestamp>().is_err() {
                causes.push((
                    path.to_string(),
                    "FieldValueTypeInvalid",
                    format!(
                        "Invalid value: {s:?}: {path} in body must be of type date-time: {s:?}"
                    ),
                ));
            }
            if let Some(re) = self.pattern.as_ref().filter(|re| !re.is_match(s)) {
                invalid(causes, format!("should match '{}'", re.as_str()));
            }
            let len = s.chars().count() as u64;
            if let Some(min) = self.min_length.filter(|min| len < *min) {
                invalid(causes, format!("should be at least {min} chars long"));
            }
            if let Some(max) = self.max_length.filter(|max| len > *max) {
                causes.push((
                    path.to_string(),
                    "FieldValueTooLong",
                    format!("Too long: may not be more than {max} bytes"),
                ));
            }
        }
        if let Some(a) = v.as_array() {
            let n = a.len() as u64;
            if let Some(min) = self.min_items.filter(|min| n < *min) {
                invalid(causes, format!("should have at least {min} items"));
            }
            if let Some(max) = self.max_items.filter(|max| n > *max) {
                causes.push((
                    path.to_string(),
                    "FieldValueTooMany",
                    format!("Too many: {n}: must have at most {max} items"),
                ));
            }
        }
    }
}

/// A value as `field.Error` prints it: a string quoted, a number or bool bare, the rest as
/// JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// A `fieldPath` (`.a.b`, `.a['k']`) as `field.Path` prints it under the node, if every step
/// names a property (or a key of a map) of the schema.
pub(super) fn normalise_field_path(p: &str, schema: &Schema) -> Option<String> {
    let mut out = String::new();
    let mut s = schema;
    let mut rest = p;
    while !rest.is_empty() {
        let (name, next) = if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            (&r[..end], &r[end + 2..])
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (&r[..end], &r[end..])
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if let Some(child) = s.properties.get(name) {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
            s = child;
        } else if let Some(add) = &s.additional {
            out.push_str(&format!("[{name}]"));
            s = add;
        } else {
            return None;
        }
        rest = next;
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Any JSON a client could send, a few levels deep, biased towards schema keywords.
    fn any_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("type".to_string()),
            Just("properties".to_string()),
            Just("items".to_string()),
            Just("additionalProperties".to_string()),
            Just("required".to_string()),
            Just("default".to_string()),
            Just("enum".to_string()),
            Just("pattern".to_string()),
            Just("x-kubernetes-preserve-unknown-fields".to_string()),
            Just("x-kubernetes-embedded-resource".to_string()),
            Just("x-kubernetes-int-or-string".to_string()),
            Just("x-kubernetes-validations".to_string()),
            Just("rule".to_string()),
            "[a-z]{1,3}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            prop_oneof![
                Just("object"),
                Just("array"),
                Just("string"),
                Just("integer"),
                Just("(a"),
                Just("x"),
                Just("self.a.all(e, e > 0)"),
                Just("self == oldSelf"),
                Just("self.size() <")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever a client sends as a schema and as an object, reading, pruning,
        /// defaulting and validating never panic, and pruning twice is pruning once.
        #[test]
        fn any_schema_and_object_are_walked_without_panic(raw in any_json(), obj in any_json()) {
            let mut causes = Vec::new();
            let schema = Schema::read(&raw, "s", &mut causes);
            let mut once = obj.clone();
            schema.prune_and_default(&mut once, true);
            let mut twice = once.clone();
            schema.prune_and_default(&mut twice, true);
            prop_assert_eq!(&once, &twice);
            let mut found = Vec::new();
            schema.validate(&once, "", &mut found);
        }
    }

    fn read(raw: Value) -> (Schema, Vec<Cause>) {
        let mut causes = Vec::new();
        let s = Schema::read(&raw, "s", &mut causes);
        (s, causes)
    }

    #[test]
    fn unknown_fields_are_pruned_and_defaults_applied_unless_preserved() {
        let (s, causes) = read(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "default": 3},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
        }}));
        assert!(causes.is_empty(), "{causes:?}");
        let mut v = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"bogus": 1, "free": {"any": [1]}}, "extra": true});
        s.prune_and_default(&mut v, true);
        assert_eq!(
            v,
            json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"},
            "spec": {"size": 3, "free": {"any": [1]}}})
        );
    }

    #[test]
    fn a_type_error_names_the_field_as_kube_openapi_does() {
        let (s, _) = read(
            json!({"type": "object", "required": ["spec"], "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer"},
                    "mode": {"type": "string", "enum": ["a", "b"]}}},
            }}),
        );
        let mut causes = Vec::new();
        s.validate(
            &json!({"spec": {"size": "x", "mode": "c"}}),
            "",
            &mut causes,
        );
        assert_eq!(
            causes,
            [
                (
                    "spec.mode".to_string(),
                    "FieldValueNotSupported",
                    r#"Unsupported value: "c": supported values: "a", "b""#.to_string()
                ),
                (
                    "spec.size".to_string(),
                    "FieldValueTypeInvalid",
                    r#"Invalid value: "string": spec.size in body must be of type integer: "string""#
                        .to_string()
                ),
            ]
        );
        let mut causes = Vec::new();
        s.validate(&json!({}), "", &mut causes);
        assert_eq!(causes[0].0, "spec");
        assert_eq!(causes[0].2, "Required value");
    }

    #[test]
    fn a_schema_that_is_not_structural_or_too_deep_is_refused() {
        let (_, causes) = read(json!({"type": "object", "properties": {"a": {}}}));
        assert_eq!(causes[0].0, "s.properties[a].type");
        let (_, causes) = read(json!({"type": "object", "properties": {"a": {"type": "text"}}}));
        assert_eq!(
            (causes[0].0.as_str(), causes[0].1),
            ("s.properties[a].type", "FieldValueNotSupported")
        );
        let (_, causes) = read(json!({"type": "object", "$ref": "#/x"}));
        assert_eq!(causes[0].0, "s.$ref");
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let (_, causes) = read(deep);
        assert!(causes[0].2.contains("levels deep"), "{causes:?}");
        let (_, causes) = read(
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.isSorted()"}]}),
        );
        assert!(causes[0].2.contains("\"isSorted\""), "{causes:?}");
    }
}
