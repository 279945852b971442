//! Object-metadata rules: names, namespaces, labels, annotations, finalizers, owner references.
//!
//! Follows apimachinery v0.36.3: `pkg/api/validation/objectmeta.go` (`ValidateObjectMetaAccessor`,
//! `ValidateAnnotations`, `ValidateFinalizers`, `ValidateOwnerReferences`),
//! `pkg/api/validation/generic.go` (`NameIsDNSSubdomain`, `NameIsDNSLabel`, `maskTrailingDash`),
//! `pkg/api/validate/content` (`IsDNS1123Subdomain`, `IsDNS1123Label`, `IsLabelKey`,
//! `IsLabelValue`, `IsPathSegmentName`), and apiserver's `storage/names` (`SimpleNameGenerator`:
//! a `generateName` base is cut to 58 bytes before its 5-character suffix).
//!
//! Every check here is a pure function of a string or a JSON value, so the same rules apply
//! whatever the source of a name: the request body, the path, or `generateName` plus suffix.
//!
//! # Invariants
//! 1. A name that passes [`object_name`] is a valid path segment: it can be read, replaced and
//!    deleted through the REST paths (no `/`, no `%`, not `.` or `..`).
//! 2. [`generated_name`] only appends `[0-9a-z]` to a base of at most
//!    [`MAX_GENERATED_NAME_BASE`] bytes, so a base that passes [`object_meta_of`] yields a name of
//!    at most 63 bytes that passes [`object_name`].
//!
//! # Differences from upstream
//! - Messages are this crate's own words; the field paths (`metadata.name`, `metadata.labels`,
//!   …) and the HTTP codes are upstream's.
//! - `managedFields` are never validated: the server drops them (no field management).
//! - Duplicate owner references are dropped as upstream drops them, but without the
//!   `Warning` header kube-apiserver answers with (`… contains duplicate entries …`): this
//!   server sends no warnings.

use serde_json::Value;

/// The most bytes of annotation keys and values together (`TotalAnnotationSizeLimitB`).
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The longest `generateName` base kept before the random suffix (63 - 5).
pub(crate) const MAX_GENERATED_NAME_BASE: usize = 58;

/// The length of the suffix appended to a `generateName` base.
pub(crate) const GENERATED_SUFFIX_LEN: usize = 5;

/// `(field, message)`: one cause of a 422 Invalid.
pub(crate) type Cause = (&'static str, String);

/// `(field, reason, message)`: one cause of a 422 Invalid with its own reason
/// (`FieldValueForbidden`, `FieldValueInvalid`, …), as update rules mix them.
pub(crate) type ReasonedCause = (&'static str, &'static str, String);

/// `ValidateNoNewFinalizers`, for an object being deleted: `new` (its metadata) may lose
/// finalizers of `old`, never gain one.
pub(crate) fn no_new_finalizers(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    let old = old["finalizers"].as_array();
    let mut added: Vec<&str> = new["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| old.is_none_or(|o| !o.iter().any(|x| x == f)))
        .collect();
    added.sort_unstable();
    added.dedup();
    if !added.is_empty() {
        causes.push((
            "metadata.finalizers",
            "FieldValueForbidden",
            format!(
                "Forbidden: the object is being deleted, so no finalizer may be added (new: {added:?})"
            ),
        ));
    }
}

fn is_dns1123_label_chars(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

/// A lowercase RFC 1123 label, at most 63 bytes: what namespaces must be.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_dns1123_label_chars(s)
}

/// A lowercase RFC 1123 subdomain, at most 253 bytes: what object names must be.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label_chars)
}

/// `maskTrailingDash`: a prefix may end in `-`, since a suffix follows it.
/// Like upstream, the last two bytes become `a`; a multi-byte character cut in half turns into
/// U+FFFD, which fails the check as the original would.
fn mask_trailing_dash(name: &str) -> String {
    let b = name.as_bytes();
    if b.len() > 1 && name.ends_with('-') {
        format!("{}a", String::from_utf8_lossy(&b[..b.len() - 2]))
    } else {
        name.to_string()
    }
}

/// `IsPathSegmentName`: `None` if `name` can be one segment of a REST path.
pub(crate) fn path_segment_name(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    let bad: Vec<&str> = ["/", "%"]
        .into_iter()
        .filter(|c| name.contains(c))
        .collect();
    (!bad.is_empty()).then(|| format!("may not contain '{}'", bad.join("' or '")))
}

/// `BeforeUpdate` and then `ValidateObjectMetaUpdate` on the deletion fields of `new` (an
/// update's metadata) against `old` (the stored object's): a deletion timestamp the object has
/// is kept whatever the body says, and one it lacks may not be set (only a delete sets it); a
/// grace period the object has is kept when the body leaves it out, and may not change
/// otherwise. Each refusal is upstream's `FieldValueInvalid`, naming the value sent.
pub(crate) fn deletion_fields_kept(new: &mut Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    if !old["deletionTimestamp"].is_null() {
        new["deletionTimestamp"] = old["deletionTimestamp"].clone();
    }
    if new["deletionGracePeriodSeconds"].is_null() && !old["deletionGracePeriodSeconds"].is_null() {
        new["deletionGracePeriodSeconds"] = old["deletionGracePeriodSeconds"].clone();
    }
    for (field, path) in [
        ("deletionTimestamp", "metadata.deletionTimestamp"),
        (
            "deletionGracePeriodSeconds",
            "metadata.deletionGracePeriodSeconds",
        ),
    ] {
        let sent = &new[field];
        if *sent != old[field] {
            causes.push((
                path,
                "FieldValueInvalid",
                format!("Invalid value: {sent}: field is immutable"),
            ));
        }
    }
}

/// `dedupOwnerReferences` (apiserver `pkg/endpoints/handlers/rest.go`), on a create, an update
/// or a patch: an owner reference identical to an earlier one in the list is dropped, and the
/// first copy kept in its place. References that share a uid but differ in another field all
/// stay, as upstream compares whole references.
pub(crate) fn dedup_owner_references(meta: &mut Value) {
    let Some(refs) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let mut kept: Vec<Value> = Vec::with_capacity(refs.len());
    for r in refs.drain(..) {
        if !kept.contains(&r) {
            kept.push(r);
        }
    }
    *refs = kept;
}

/// Go's `omitempty` on ObjectMeta's lists: an empty `finalizers` or `ownerReferences` is not
/// stored, so a JSON patch that removes the last finalizer leaves no `finalizers: []` behind.
pub(crate) fn omit_empty_lists(meta: &mut Value) {
    if let Some(meta) = meta.as_object_mut() {
        for field in ["finalizers", "ownerReferences"] {
            if meta
                .get(field)
                .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty))
            {
                meta.remove(field);
            }
        }
    }
}

/// `NameIsDNSSubdomain`: the rule for ConfigMap and custom resource names (keeps I1).
pub(crate) fn object_name(name: &str, prefix: bool) -> Option<String> {
    let checked = if prefix {
        mask_trailing_dash(name)
    } else {
        name.to_string()
    };
    (!is_dns1123_subdomain(&checked)).then(|| {
        format!(
            "{name:?} must be a lowercase RFC 1123 subdomain of at most 253 characters \
             (a-z, 0-9, '-' and '.', starting and ending with an alphanumeric character)"
        )
    })
}

/// `NameIsDNSLabel`: the rule for Namespace names (keeps I1, since a label is a subdomain).
pub(crate) fn label_name(name: &str, prefix: bool) -> Option<String> {
    let checked = if prefix {
        mask_trailing_dash(name)
    } else {
        name.to_string()
    };
    (!is_dns1123_label(&checked)).then(|| {
        format!(
            "{name:?} must be a lowercase RFC 1123 label of at most 63 characters \
             (a-z, 0-9 and '-', starting and ending with an alphanumeric character)"
        )
    })
}

/// How a kind's names are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// `NameIsDNSSubdomain` (ConfigMaps, custom resources).
    Subdomain,
    /// `NameIsDNSLabel` (Namespaces).
    Label,
}

impl NameRule {
    /// `None` if `name` (or a `generateName` prefix, if `prefix`) passes the rule.
    pub fn check(self, name: &str, prefix: bool) -> Option<String> {
        match self {
            NameRule::Subdomain => object_name(name, prefix),
            NameRule::Label => label_name(name, prefix),
        }
    }
}

/// `ValidateNamespaceName` (`NameIsDNSLabel`).
pub(crate) fn namespace_name(ns: &str) -> Option<String> {
    (!is_dns1123_label(ns)).then(|| {
        format!(
            "{ns:?} must be a lowercase RFC 1123 label of at most 63 characters \
             (a-z, 0-9 and '-', starting and ending with an alphanumeric character)"
        )
    })
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 bytes, possibly empty.
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)))
}

/// `IsLabelKey` (a "qualified name"): an optional DNS-subdomain prefix and `/`, then a
/// non-empty name of at most 63 bytes.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    let mut parts = s.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => return false,
    };
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// The name for `generateName` plus `suffix` (keeps I2).
pub(crate) fn generated_name(base: &str, suffix: &str) -> String {
    let mut cut = base.len().min(MAX_GENERATED_NAME_BASE);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &base[..cut])
}

fn labels(v: &Value, causes: &mut Vec<Cause>) {
    let Some(labels) = v.as_object() else { return };
    for (k, val) in labels {
        if !is_qualified_name(k) {
            causes.push(("metadata.labels", format!("key {k:?} is not a valid label key: an optional DNS subdomain prefix and '/', then at most 63 characters of [-A-Za-z0-9_.] starting and ending alphanumeric")));
        }
        let val = val.as_str().unwrap_or_default();
        if !is_label_value(val) {
            causes.push(("metadata.labels", format!("value {val:?} is not a valid label value: at most 63 characters of [-A-Za-z0-9_.] starting and ending alphanumeric, or empty")));
        }
    }
}

fn annotations(v: &Value, causes: &mut Vec<Cause>) {
    let Some(annotations) = v.as_object() else {
        return;
    };
    let mut total = 0usize;
    for (k, val) in annotations {
        // Upstream checks the lowercased key: case does not matter in annotation keys.
        if !is_qualified_name(&k.to_ascii_lowercase()) {
            causes.push((
                "metadata.annotations",
                format!("key {k:?} is not a valid annotation key"),
            ));
        }
        total = total
            .saturating_add(k.len())
            .saturating_add(val.as_str().map_or(0, str::len));
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        causes.push((
            "metadata.annotations",
            format!("Too long: the annotations have {total} bytes, more than the limit of {TOTAL_ANNOTATION_SIZE_LIMIT}"),
        ));
    }
}

fn finalizers(v: &Value, causes: &mut Vec<Cause>) {
    let Some(list) = v.as_array() else { return };
    let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    for f in &names {
        if !is_qualified_name(f) {
            causes.push((
                "metadata.finalizers",
                format!("{f:?} is not a valid finalizer name (a qualified name)"),
            ));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        causes.push((
            "metadata.finalizers",
            "finalizers orphan and foregroundDeletion cannot both be set".into(),
        ));
    }
}

fn owner_references(v: &Value, causes: &mut Vec<Cause>) {
    let Some(refs) = v.as_array() else { return };
    let mut controllers = 0;
    for r in refs {
        let api_version = r["apiVersion"].as_str().unwrap_or_default();
        let version = api_version.rsplit('/').next().unwrap_or_default();
        for (field, empty) in [
            ("apiVersion", version.is_empty()),
            ("kind", r["kind"].as_str().unwrap_or_default().is_empty()),
            ("name", r["name"].as_str().unwrap_or_default().is_empty()),
            ("uid", r["uid"].as_str().unwrap_or_default().is_empty()),
        ] {
            if empty {
                causes.push((
                    "metadata.ownerReferences",
                    format!("{field} must not be empty"),
                ));
            }
        }
        if api_version == "v1" && r["kind"] == "Event" {
            causes.push((
                "metadata.ownerReferences",
                "an Event is disallowed from being an owner".into(),
            ));
        }
        if r["controller"] == Value::Bool(true) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        causes.push((
            "metadata.ownerReferences",
            "only one reference can have controller set to true".into(),
        ));
    }
}

/// `ValidateObjectMetaAccessor` for a namespaced object, after name generation. `name` may be
/// empty only when `generateName` is set (the name is generated at commit); `generateName` is
/// checked when `check_generate_name` (a create).
#[cfg(test)]
pub(crate) fn object_meta(meta: &Value, check_generate_name: bool) -> Vec<Cause> {
    object_meta_of(meta, check_generate_name, true, NameRule::Subdomain)
}

/// `ValidateObjectMetaAccessor` for a kind that is `namespaced` or not (a cluster-scoped object has no
/// namespace), whose names follow `rule`.
pub(crate) fn object_meta_of(
    meta: &Value,
    check_generate_name: bool,
    namespaced: bool,
    rule: NameRule,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let generate = meta["generateName"].as_str().unwrap_or_default();
    if check_generate_name
        && !generate.is_empty()
        && let Some(m) = rule.check(generate, true)
    {
        causes.push(("metadata.generateName", m));
    }
    match meta["name"].as_str().unwrap_or_default() {
        "" if generate.is_empty() => {
            causes.push(("metadata.name", "name or generateName is required".into()))
        }
        "" => {}
        name => {
            if let Some(m) = rule.check(name, false) {
                causes.push(("metadata.name", m));
            }
        }
    }
    match meta["namespace"].as_str().unwrap_or_default() {
        "" if namespaced => causes.push(("metadata.namespace", "namespace is required".into())),
        "" => {}
        ns if namespaced => {
            if let Some(m) = namespace_name(ns) {
                causes.push(("metadata.namespace", m));
            }
        }
        _ => causes.push((
            "metadata.namespace",
            "not allowed on this type: it is cluster-scoped".into(),
        )),
    }
    if meta["generation"].as_i64().is_some_and(|g| g < 0) {
        causes.push((
            "metadata.generation",
            "must be greater than or equal to 0".into(),
        ));
    }
    labels(&meta["labels"], &mut causes);
    annotations(&meta["annotations"], &mut causes);
    owner_references(&meta["ownerReferences"], &mut causes);
    finalizers(&meta["finalizers"], &mut causes);
    causes
}

/// The finalizers a name without a `/` may be (`IsStandardFinalizerName`).
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// `validateFinalizerName` on each of a namespace's `spec.finalizers`: a qualified name, and
/// one without a `/` must be a standard finalizer. `indexed`: the finalize subresource names
/// each entry (`spec.finalizers[i]`), create and update the list (`spec.finalizers`).
pub(crate) fn spec_finalizer_causes(ns: &Value, indexed: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, f) in ns["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = f.as_str().unwrap_or_default();
        let field = if indexed {
            format!("spec.finalizers[{i}]")
        } else {
            "spec.finalizers".to_owned()
        };
        if !is_qualified_name(name) {
            out.push((
                field.clone(),
                format!("Invalid value: {name:?}: not a qualified name"),
            ));
        }
        if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
            out.push((
                field,
                format!(
                    "Invalid value: {name:?}: name is neither a standard finalizer name nor is it fully qualified"
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(extra: Value) -> Value {
        let mut m = json!({"name": "a", "namespace": "d"});
        json_patch::merge(&mut m, &extra);
        m
    }

    #[test]
    fn names_follow_the_dns_subdomain_rule_and_prefixes_may_end_in_a_dash() {
        assert!(object_name("a.b-c", false).is_none());
        for bad in ["A", "-a", "a-", "a/b", "a%b", "a..b", ".", "..", ""] {
            assert!(object_name(bad, false).is_some(), "{bad}");
        }
        assert!(object_name(&"a".repeat(253), false).is_none());
        assert!(object_name(&"a".repeat(254), false).is_some());
        assert!(object_name("web-", true).is_none());
        assert!(object_name("web/", true).is_some());
        assert!(object_name("-", true).is_some());
        assert!(object_name("é-", true).is_some());
    }

    #[test]
    fn every_name_that_passes_is_a_path_segment() {
        for name in ["a", "a.b", "0-9", &"z".repeat(253)] {
            assert!(object_name(name, false).is_none());
            assert!(path_segment_name(name).is_none(), "{name}");
        }
        assert!(path_segment_name("..").is_some());
        assert!(path_segment_name("a%2fb").is_some());
    }

    #[test]
    fn a_generated_name_cuts_the_base_to_58_bytes() {
        let name = generated_name(&"b".repeat(300), "x1y2z");
        assert_eq!(name.len(), MAX_GENERATED_NAME_BASE + GENERATED_SUFFIX_LEN);
        assert!(object_name(&name, false).is_none()); // keeps I2
        assert_eq!(generated_name("web-", "abcde"), "web-abcde");
        // A multi-byte character at the cut is not split (the base is invalid anyway).
        let odd = format!("{}é", "a".repeat(57));
        assert_eq!(generated_name(&odd, "z").len(), 58);
    }

    #[test]
    fn label_keys_and_values_have_upstreams_limits() {
        assert!(is_qualified_name("app.kubernetes.io/name"));
        assert!(is_qualified_name(&"k".repeat(63)));
        for bad in ["/x", "a/b/c", "x/", &"k".repeat(64), "Bad Prefix/x", "-a"] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
        assert!(is_label_value(""));
        assert!(is_label_value(&"v".repeat(63)));
        assert!(!is_label_value(&"v".repeat(64)));
        assert!(!is_label_value("-x"));
        let causes = object_meta(&meta(json!({"labels": {"a": "v".repeat(64)}})), true);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].0, "metadata.labels");
    }

    #[test]
    fn annotations_are_limited_to_256_kib_in_total() {
        let fits = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        assert!(object_meta(&meta(json!({"annotations": {"a": fits}})), true).is_empty());
        let over = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let causes = object_meta(&meta(json!({"annotations": {"a": over}})), true);
        assert_eq!(causes[0].0, "metadata.annotations");
        assert!(causes[0].1.starts_with("Too long"), "{}", causes[0].1);
        // Case does not matter in annotation keys.
        assert!(
            object_meta(&meta(json!({"annotations": {"Mixed.Case/Key": ""}})), true).is_empty()
        );
    }

    #[test]
    fn generate_name_namespace_finalizers_and_owners_are_checked() {
        let bad_generate = meta(json!({"name": "", "generateName": "a/"}));
        assert_eq!(
            object_meta(&bad_generate, true)[0].0,
            "metadata.generateName"
        );
        assert!(object_meta(&bad_generate, false).is_empty());
        let missing = json!({"namespace": "d"});
        assert_eq!(object_meta(&missing, true)[0].0, "metadata.name");
        assert_eq!(
            object_meta(&meta(json!({"namespace": "Bad"})), true)[0].0,
            "metadata.namespace"
        );
        assert_eq!(
            object_meta(&meta(json!({"namespace": "a.b"})), true)[0].0,
            "metadata.namespace"
        );
        let f = meta(json!({"finalizers": ["orphan", "foregroundDeletion", "x y"]}));
        assert_eq!(object_meta(&f, true).len(), 2);
        let o = meta(json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "", "controller": true}
        ]}));
        assert_eq!(object_meta(&o, true).len(), 2);
    }
}
