//! Strategic merge patch, as kube-apiserver applies it to the built-in kinds.
//!
//! Follows kubernetes/kubernetes v1.37.2,
//! `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`
//! (`StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`, as the
//! apiserver's `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go` calls it), with
//! the patch metadata (`patchStrategy`, `patchMergeKey`) the Go types carry in their struct
//! tags, written down here as a [`Ty`] per served kind:
//!
//! ```text
//!  patch map ──► $patch (replace | delete) ──► $retainKeys ──► $setElementOrder/<list>
//!            ──► every other key: null deletes, maps merge, merge lists merge by key
//!                (or as a set of primitives), other lists and scalars are replaced
//!            ──► $deleteFromPrimitiveList/<list> last
//! ```
//!
//! - A **merge list** (`patchStrategy:"merge"`) of primitives is a set: the patch's items are
//!   added, `$deleteFromPrimitiveList/<list>` removes items. A merge list of objects is keyed
//!   (`patchMergeKey`, e.g. `uid` for `ownerReferences`): an item whose key matches a live
//!   item is merged into it, a new key is appended, `{"$patch": "delete", <key>: …}` removes
//!   the item, and `{"$patch": "replace"}` makes the patch's items the whole list.
//! - Order: the patch's items keep the patch's order (or `$setElementOrder/<list>`'s, which
//!   takes precedence), the live object's other items keep theirs, interleaved as upstream's
//!   `mergeSortedSlice` does.
//! - `$patch: replace` on an object replaces it, `$patch: delete` empties it;
//!   `$retainKeys: [...]` drops every live key it does not name.
//!
//! # Invariants
//! 1. Applying a patch never nests deeper than the deeper of the object and the patch (both
//!    bounded by the JSON decoder), and never grows past their sizes summed: every value in
//!    the result comes from one of them (patch I1, I2).
//! 2. Every lookup by merge key or item is a hash lookup, so a patch costs O((n + m) log(n + m))
//!    for lists of n live and m patch items; upstream's quadratic list walks are not repeated.
//! 3. A patch that upstream rejects is refused with a `Status` and changes nothing: the
//!    patch works on a copy of the object.
//!
//! # Differences from upstream
//! - Keys of one patch map are applied in a fixed order (sorted, deletion lists last); Go
//!   iterates maps at random, which only matters for a patch that adds and deletes the same
//!   primitive in one list.
//! - The errors upstream passes through as plain errors (a missing merge key, `$patch: merge`
//!   or an unknown `$patch`, a `$setElementOrder` list that contradicts the patch, lists of
//!   mixed element types), which kube-apiserver answers with 500, are 400 BadRequest here;
//!   lists of lists and the retainKeys mismatch are 422 as upstream. Upstream's messages are
//!   not copied.
//! - Custom resources are refused with 415 before this module is reached, as upstream
//!   refuses them (no Go struct tags to read).
//! - Upstream orders a `$setElementOrder` result's server-only items by the live list as its
//!   in-place merge left it (an effect of Go slices sharing an array; see `go_view`). That is
//!   emulated for lists of up to 4,096 items, with the capacity Go's decoders give a list
//!   built by appending; longer lists are ordered by the live list as it was.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::errors::ApiError;

/// The shape of a field, with the patch metadata upstream reads from Go struct tags.
#[derive(Debug)]
pub(crate) enum Ty {
    /// A Go struct: its known JSON fields.
    Struct(&'static [Field]),
    /// A Go map with string keys: every value has this shape.
    Map(&'static Ty),
    /// A list of elements of this shape, merged as `List` says.
    List(List, &'static Ty),
    /// A string, number or boolean.
    Scalar,
}

/// How a list field is patched (`patchStrategy` and `patchMergeKey`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum List {
    /// No strategy (or `listType=atomic`): the patch's list replaces the live one.
    Atomic,
    /// `patchStrategy:"merge"` on a list of primitives: a set.
    MergePrimitives,
    /// `patchStrategy:"merge"` with `patchMergeKey`: items are matched by this field.
    MergeByKey(&'static str),
}

/// One field of a struct.
#[derive(Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub ty: &'static Ty,
}

const fn field(name: &'static str, ty: &'static Ty) -> Field {
    Field { name, ty }
}

static SCALAR: Ty = Ty::Scalar;
static STRING_MAP: Ty = Ty::Map(&SCALAR);

/// `metav1.OwnerReference`.
static OWNER_REFERENCE: Ty = Ty::Struct(&[
    field("apiVersion", &SCALAR),
    field("kind", &SCALAR),
    field("name", &SCALAR),
    field("uid", &SCALAR),
    field("controller", &SCALAR),
    field("blockOwnerDeletion", &SCALAR),
]);

/// `metav1.ManagedFieldsEntry` (the server drops managed fields, but a patch may name them).
static MANAGED_FIELDS_ENTRY: Ty = Ty::Struct(&[
    field("manager", &SCALAR),
    field("operation", &SCALAR),
    field("apiVersion", &SCALAR),
    field("time", &SCALAR),
    field("fieldsType", &SCALAR),
    field("fieldsV1", &STRING_MAP),
    field("subresource", &SCALAR),
]);

/// `metav1.ObjectMeta` (apimachinery v0.37.2 `pkg/apis/meta/v1/types.go`): `finalizers` is a
/// merge list of strings, `ownerReferences` a merge list keyed by `uid`.
static OBJECT_META: Ty = Ty::Struct(&[
    field("name", &SCALAR),
    field("generateName", &SCALAR),
    field("namespace", &SCALAR),
    field("selfLink", &SCALAR),
    field("uid", &SCALAR),
    field("resourceVersion", &SCALAR),
    field("generation", &SCALAR),
    field("creationTimestamp", &SCALAR),
    field("deletionTimestamp", &SCALAR),
    field("deletionGracePeriodSeconds", &SCALAR),
    field("labels", &STRING_MAP),
    field("annotations", &STRING_MAP),
    field(
        "ownerReferences",
        &Ty::List(List::MergeByKey("uid"), &OWNER_REFERENCE),
    ),
    field("finalizers", &Ty::List(List::MergePrimitives, &SCALAR)),
    field(
        "managedFields",
        &Ty::List(List::Atomic, &MANAGED_FIELDS_ENTRY),
    ),
]);

/// `corev1.ConfigMap` (k8s.io/api v0.37.2 `core/v1/types.go`): two maps and a flag.
pub(crate) static CONFIG_MAP: Ty = Ty::Struct(&[
    field("apiVersion", &SCALAR),
    field("kind", &SCALAR),
    field("metadata", &OBJECT_META),
    field("immutable", &SCALAR),
    field("data", &STRING_MAP),
    field("binaryData", &STRING_MAP),
]);

/// `corev1.NamespaceCondition`.
static NAMESPACE_CONDITION: Ty = Ty::Struct(&[
    field("type", &SCALAR),
    field("status", &SCALAR),
    field("lastTransitionTime", &SCALAR),
    field("reason", &SCALAR),
    field("message", &SCALAR),
]);

/// `corev1.Namespace`: `spec.finalizers` is atomic, `status.conditions` a merge list keyed by
/// `type`.
pub(crate) static NAMESPACE: Ty = Ty::Struct(&[
    field("apiVersion", &SCALAR),
    field("kind", &SCALAR),
    field("metadata", &OBJECT_META),
    field(
        "spec",
        &Ty::Struct(&[field("finalizers", &Ty::List(List::Atomic, &SCALAR))]),
    ),
    field(
        "status",
        &Ty::Struct(&[
            field("phase", &SCALAR),
            field(
                "conditions",
                &Ty::List(List::MergeByKey("type"), &NAMESPACE_CONDITION),
            ),
        ]),
    ),
]);

// leases (coordination.k8s.io/v1): begin
/// `coordinationv1.Lease` (k8s.io/api v0.37.2 `coordination/v1/types.go`): a spec of scalars.
pub(crate) static LEASE: Ty = Ty::Struct(&[
    field("apiVersion", &SCALAR),
    field("kind", &SCALAR),
    field("metadata", &OBJECT_META),
    field(
        "spec",
        &Ty::Struct(&[
            field("holderIdentity", &SCALAR),
            field("leaseDurationSeconds", &SCALAR),
            field("acquireTime", &SCALAR),
            field("renewTime", &SCALAR),
            field("leaseTransitions", &SCALAR),
            field("strategy", &SCALAR),
            field("preferredHolder", &SCALAR),
        ]),
    ),
]);
// leases (coordination.k8s.io/v1): end

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(format!(
        "the strategic merge patch cannot be applied: {}",
        message.into()
    ))
}

fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::unprocessable(format!(
        "the strategic merge patch cannot be applied: {}",
        message.into()
    ))
}

impl Ty {
    /// The shape of `key` inside a value of this shape. A struct field it does not declare is
    /// an error (upstream's `FieldNotFoundError`), raised only where the live object and the
    /// patch both hold a map or a list under that key.
    fn child(&self, key: &str) -> Result<&'static Ty, ApiError> {
        match self {
            Ty::Struct(fields) => fields
                .iter()
                .find(|f| f.name == key)
                .map(|f| f.ty)
                .ok_or_else(|| bad(format!("the field {key:?} is not part of this kind"))),
            Ty::Map(elem) => Ok(elem),
            Ty::List(_, elem) => elem.child(key),
            Ty::Scalar => Err(bad(format!("{key:?} is inside a scalar field"))),
        }
    }

    /// `(strategy, element shape)` of the list field `key`.
    fn list(&self, key: &str) -> Result<(List, &'static Ty), ApiError> {
        match self.child(key)? {
            Ty::List(strategy, elem) => Ok((*strategy, elem)),
            _ => Err(bad(format!("the field {key:?} is not a list"))),
        }
    }
}

/// Applies `patch` to `original` as `StrategicMergeMapPatch` does, for an object of shape `ty`.
pub(crate) fn apply(original: Value, patch: Value, ty: &'static Ty) -> Result<Value, ApiError> {
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request(
            "a strategic merge patch must be a JSON object",
        ));
    };
    let original = match original {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    merge_map(original, patch, ty).map(Value::Object)
}

/// The dynamic type Go's decoder gives a JSON value (with `PreserveInts`): two values of
/// different types are never merged, and a list's items must all share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoType {
    Null,
    Bool,
    Int,
    Float,
    String,
    Slice,
    Map,
}

fn go_type(v: &Value) -> GoType {
    match v {
        Value::Null => GoType::Null,
        Value::Bool(_) => GoType::Bool,
        Value::Number(n) if n.is_f64() => GoType::Float,
        Value::Number(_) => GoType::Int,
        Value::String(_) => GoType::String,
        Value::Array(_) => GoType::Slice,
        Value::Object(_) => GoType::Map,
    }
}

/// A hashable stand-in for a merge key value or a primitive item, distinguishing types as
/// Go's `==` on interfaces does (`1` is not `1.0`, nor `"1"`).
fn ident(v: &Value) -> String {
    v.to_string()
}

/// What the ordering compares: the merge key's value for a map item, the item otherwise.
fn order_ident(item: &Value, key: Option<&str>) -> Option<String> {
    match key {
        Some(k) => item.get(k).map(ident),
        None => Some(ident(item)),
    }
}

/// First index of each item (by [`order_ident`]) in `list`.
fn first_index(list: &[Value], key: Option<&str>) -> HashMap<String, usize> {
    let mut at = HashMap::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        if let Some(id) = order_ident(v, key) {
            at.entry(id).or_insert(i);
        }
    }
    at
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: &'static Ty,
) -> Result<Map<String, Value>, ApiError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad(format!(
                "{DIRECTIVE}: {directive} is not a directive for an object (replace or delete)"
            ))),
        };
    }
    retain_keys(&mut original, &mut patch)?;
    set_element_orders(&mut original, &mut patch, ty)?;
    // Fixed order (differences from upstream): ordinary keys, then deletion lists.
    let mut keys: Vec<String> = patch.keys().cloned().collect();
    keys.sort_by_key(|k| (k.starts_with(DELETE_FROM_PRIMITIVE_LIST), k.clone()));
    for key in keys {
        let value = patch.remove(&key).expect("a key of the patch");
        let (key, delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            (strip_prefix(&key, DELETE_FROM_PRIMITIVE_LIST)?, true)
        } else {
            (key, false)
        };
        if value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(current) = original.remove(&key) else {
            if !delete_list {
                let mut value = value;
                discard_nulls(&mut value);
                if let Some(v) = remove_directives(value) {
                    original.insert(key, v);
                }
            }
            continue;
        };
        if go_type(&current) != go_type(&value) {
            if delete_list {
                original.insert(key, current);
            } else {
                let mut value = value;
                discard_nulls(&mut value);
                if let Some(v) = remove_directives(value) {
                    original.insert(key, v);
                }
            }
            continue;
        }
        let merged = match (current, value) {
            (Value::Object(cur), Value::Object(p)) => {
                Value::Object(merge_map(cur, p, ty.child(&key)?)?)
            }
            (Value::Array(cur), Value::Array(p)) => {
                let (strategy, elem) = ty.list(&key)?;
                merge_list_field(cur, p, strategy, elem, delete_list)?.0
            }
            (_, value) => match remove_directives(value) {
                Some(v) => v,
                None => continue,
            },
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// `mergeSliceHandler`: merge lists (and deletion lists, whatever the strategy) merge;
/// other lists are replaced by the patch's list as it is. Also returns what the live list
/// reads afterwards (see [`go_view`]).
fn merge_list_field(
    cur: Vec<Value>,
    patch: Vec<Value>,
    strategy: List,
    elem: &'static Ty,
    delete_list: bool,
) -> Result<(Value, Vec<Value>), ApiError> {
    let key = match strategy {
        List::MergeByKey(k) => Some(k),
        List::MergePrimitives => None,
        List::Atomic if delete_list => None,
        List::Atomic => return Ok((Value::Array(patch), cur)),
    };
    let (merged, view) = merge_slice(cur, patch, elem, key, delete_list)?;
    Ok((Value::Array(merged), view))
}

/// Lists longer than this are not run through [`go_view`]'s emulation (which walks them
/// quadratically); their live order is used as is.
const MAX_EMULATED_ITEMS: usize = 4096;

/// The capacity Go's decoders leave a slice of `n` items built by appending one at a time
/// (doubling from 1: the allocator's size classes keep powers of two for small lists).
fn go_cap(n: usize) -> usize {
    if n == 0 { 0 } else { n.next_power_of_two() }
}

/// What the live list reads after upstream's `mergeSlice` has run on it.
///
/// Upstream merges in place: `deleteMatchingEntries` removes an item with
/// `append(original[:k], original[k+1:]...)` and `mergeSliceWithoutSpecialElements` appends
/// new items with `append(original, v)`, both writing into the live list's backing array while
/// it has room, and `deduplicateScalars` moves items within the array `append(original,
/// patch...)` shares with it. `mergePatchIntoOriginal` then orders the `$setElementOrder`
/// result by that array as it now reads (`originalFieldValue`), not by the list as it was; a
/// live list's items are therefore ordered as upstream orders them only if this is emulated
/// (upstream's cases "add map and delete map from merging list", with and without conflict,
/// pin it). The capacity is [`go_cap`]'s.
fn go_view(live: &[Value], patch: &[Value], key: Option<&str>, kind: GoType) -> Vec<Value> {
    let n = live.len();
    if n == 0 || n + patch.len() > MAX_EMULATED_ITEMS {
        return live.to_vec();
    }
    let cap = go_cap(n);
    let mut view = live.to_vec();
    match key {
        Some(k) if kind == GoType::Map => {
            let mut len = n;
            let mut replace = false;
            for v in patch {
                match v.get(DIRECTIVE).and_then(Value::as_str) {
                    Some("delete") => {
                        let Some(id) = v.get(k) else { continue };
                        while let Some(at) = view[..len].iter().position(|x| x.get(k) == Some(id)) {
                            for i in at..len - 1 {
                                view[i] = view[i + 1].clone();
                            }
                            len -= 1;
                        }
                    }
                    Some("replace") => replace = true,
                    _ => {}
                }
            }
            if replace {
                return view;
            }
            let mut local: HashSet<String> = view[..len]
                .iter()
                .filter_map(|x| x.get(k).map(ident))
                .collect();
            let mut shared = true;
            for v in patch.iter().filter(|v| v.get(DIRECTIVE).is_none()) {
                let Some(id) = v.get(k).map(ident) else {
                    continue;
                };
                if !local.insert(id) {
                    continue; // merged into an item: its key is unchanged
                }
                if shared && len < cap {
                    if len < n {
                        view[len] = v.clone();
                    }
                    len += 1;
                } else {
                    shared = false;
                }
            }
            view
        }
        _ => {
            // `append(original, patch...)` shares the live array only if it fits, and
            // `deduplicateScalars` then writes into it only where the live list itself holds
            // duplicates.
            let mut seen = HashSet::new();
            if n + patch.len() > cap || live.iter().all(|v| seen.insert(ident(v))) {
                return view;
            }
            let mut both: Vec<Value> = live.iter().chain(patch).cloned().collect();
            let mut last = both.len() - 1;
            let mut i = 0;
            while i < last {
                let mut j = i + 1;
                while j <= last {
                    if both[i] == both[j] {
                        both[j] = both[last].clone();
                        last -= 1;
                    } else {
                        j += 1;
                    }
                }
                i += 1;
            }
            view.clone_from_slice(&both[..n]);
            view
        }
    }
}

/// `extractKey`: the list a `$deleteFromPrimitiveList/` or `$setElementOrder/` key names.
fn strip_prefix(key: &str, prefix: &str) -> Result<String, ApiError> {
    match key.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest.to_string()),
        _ => Err(bad(format!("{key:?} is not of the form {prefix}/<field>"))),
    }
}

/// `$retainKeys`: every live key the directive does not name is dropped; every key the patch
/// sets must be named.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad(format!("{RETAIN_KEYS} must be a list of field names")));
    };
    let names: HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !names.contains(k.as_str()) {
            return Err(bad(format!(
                "the patch sets {k:?}, which its {RETAIN_KEYS} list does not name"
            )));
        }
    }
    original.retain(|k, _| names.contains(k.as_str()));
    Ok(())
}

/// `mergePatchIntoOriginal`: each `$setElementOrder/<list>` is merged together with `<list>`
/// and sets the order of the result; both keys leave the patch.
fn set_element_orders(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    ty: &'static Ty,
) -> Result<(), ApiError> {
    let mut keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    keys.sort();
    for key in keys {
        let order = patch.remove(&key).expect("a key of the patch");
        let Value::Array(order) = order else {
            return Err(bad(format!("{key:?} must be a list")));
        };
        let field = strip_prefix(&key, SET_ELEMENT_ORDER)?;
        let live = match original.get(&field) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(_) => return Err(bad(format!("{field:?} is not a list in the object"))),
        };
        let patched = match patch.get(&field) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(_) => return Err(bad(format!("{field:?} is not a list in the patch"))),
        };
        let (strategy, elem) = ty.list(&field)?;
        let merge_key = match strategy {
            List::MergeByKey(k) => Some(k),
            _ => None,
        };
        check_order(patched.as_deref().unwrap_or_default(), &order, merge_key)?;
        // `view`: the live list as upstream's in-place merge leaves it (`go_view`), which
        // is what it orders the server-only items by.
        let (merged, view) = match (&live, &patched) {
            (Some(l), None) => (l.clone(), l.clone()),
            (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                Some(Value::Array(a)) => (a, Vec::new()),
                _ => (Vec::new(), Vec::new()),
            },
            (Some(l), Some(p)) => {
                match merge_list_field(l.clone(), p.clone(), strategy, elem, false)? {
                    (Value::Array(a), view) => (a, view),
                    _ => unreachable!("a list merges into a list"),
                }
            }
            (None, None) => continue,
        };
        let (ordered, server_only) = partition(merged, &order, merge_key)?;
        let live = live.unwrap_or_default();
        let kind = element_type(&live, patched.as_deref().unwrap_or_default())?;
        let both = normalize_order(ordered, server_only, &order, &view, merge_key, kind)?;
        original.insert(field.clone(), Value::Array(both));
        patch.remove(&field);
    }
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch's items (deletions aside) must appear in the
/// order list, in the same relative order.
fn check_order(patch: &[Value], order: &[Value], key: Option<&str>) -> Result<(), ApiError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = match key {
        Some(_) => {
            let mut kept = Vec::new();
            for v in patch {
                let Value::Object(m) = v else {
                    return Err(bad("the items of a keyed merge list must be objects"));
                };
                if m.get(DIRECTIVE).and_then(Value::as_str) != Some("delete") {
                    kept.push(v);
                }
            }
            kept
        }
        None => patch.iter().collect(),
    };
    let (mut pi, mut oi) = (0, 0);
    while pi < items.len() && oi < order.len() {
        if items[pi].get(DIRECTIVE).is_some() {
            pi += 1;
            continue;
        }
        let equal = match key {
            None => items[pi] == &order[oi],
            Some(k) => {
                let (Some(a), Some(b)) = (items[pi].as_object(), order[oi].as_object()) else {
                    return Err(bad("the items of a keyed merge list must be objects"));
                };
                match (a.get(k), b.get(k)) {
                    (Some(a), Some(b)) => a == b,
                    _ => return Err(no_merge_key(k)),
                }
            }
        };
        if equal {
            pi += 1;
        }
        oi += 1;
    }
    if pi < items.len() {
        return Err(bad(format!(
            "the order of the patch's list contradicts its {SET_ELEMENT_ORDER} list"
        )));
    }
    Ok(())
}

fn no_merge_key(key: &str) -> ApiError {
    bad(format!("an item of a merge list has no merge key {key:?}"))
}

/// The one Go type of every item of the lists (`sliceElementType`).
fn element_type(a: &[Value], b: &[Value]) -> Result<GoType, ApiError> {
    let mut seen: Option<GoType> = None;
    for v in a.iter().chain(b) {
        let t = go_type(v);
        match seen {
            None if t == GoType::Slice => {
                return Err(unprocessable("lists of lists cannot be merged"));
            }
            None if t == GoType::Null => return Err(bad("a merge list may not hold null")),
            None => seen = Some(t),
            Some(s) if s != t => {
                return Err(bad("the items of a merge list are not all of one type"));
            }
            Some(_) => {}
        }
    }
    seen.ok_or_else(|| bad("a merge list without items has no element type"))
}

/// `mergeSlice`.
/// `mergeSlice`: the merged list, and what the live list reads afterwards ([`go_view`]).
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    elem: &'static Ty,
    key: Option<&str>,
    delete_list: bool,
) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    if original.is_empty() && patch.is_empty() {
        return Ok((original, Vec::new()));
    }
    let kind = element_type(&original, &patch)?;
    if kind != GoType::Map && delete_list {
        let gone: HashSet<String> = patch.iter().map(ident).collect();
        let kept = original
            .iter()
            .filter(|v| !gone.contains(&ident(v)))
            .cloned()
            .collect();
        return Ok((kept, original));
    }
    let view = go_view(&original, &patch, key, kind);
    let (server_order, patch, merged) = if kind != GoType::Map {
        let mut seen = HashSet::new();
        let merged: Vec<Value> = original
            .iter()
            .chain(&patch)
            .filter(|v| seen.insert(ident(v)))
            .cloned()
            .collect();
        // Upstream orders by the live list as its deduplication left it (`go_view`).
        (view.clone(), patch, merged)
    } else {
        let key =
            key.ok_or_else(|| bad("a list of objects without a merge key cannot be merged"))?;
        let (original, patch) = special_elements(original, patch, key)?;
        let merged = merge_by_key(original.clone(), &patch, key, elem)?;
        (original, patch, merged)
    };
    let (ordered, server_only) = partition(merged, &patch, key)?;
    let merged = normalize_order(ordered, server_only, &patch, &server_order, key, kind)?;
    Ok((merged, view))
}

/// `mergeSliceWithSpecialElements`: applies `$patch: delete` items, notes `$patch: replace`,
/// and returns the live list and the patch without its special items.
fn special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    let mut deleted: HashSet<String> = HashSet::new();
    for v in patch {
        let Some(directive) = v.get(DIRECTIVE) else {
            plain.push(v);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let id = v.get(key).map(ident).ok_or_else(|| no_merge_key(key))?;
                deleted.insert(id);
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(bad(format!(
                    "{DIRECTIVE}: merge cannot be given for a list"
                )));
            }
            _ => {
                return Err(bad(format!(
                    "{DIRECTIVE}: {directive} is not a directive for a list item (delete or replace)"
                )));
            }
        }
    }
    if !deleted.is_empty() {
        for v in &original {
            if !v.is_object() {
                return Err(bad("the items of a keyed merge list must be objects"));
            }
        }
        original.retain(|v| v.get(key).is_none_or(|k| !deleted.contains(&ident(k))));
    }
    if replace {
        return Ok((plain, Vec::new()));
    }
    Ok((original, plain))
}

/// `mergeSliceWithoutSpecialElements`: each patch item merges into the live item with its key,
/// or is appended.
fn merge_by_key(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
    elem: &'static Ty,
) -> Result<Vec<Value>, ApiError> {
    let mut at: HashMap<String, usize> = HashMap::with_capacity(original.len() + patch.len());
    for (i, v) in original.iter().enumerate() {
        let Value::Object(m) = v else {
            return Err(bad("the items of a keyed merge list must be objects"));
        };
        if let Some(k) = m.get(key) {
            at.entry(ident(k)).or_insert(i);
        }
    }
    for v in patch {
        let id = v.get(key).map(ident).ok_or_else(|| no_merge_key(key))?;
        match at.get(&id) {
            Some(&i) => {
                let (Value::Object(cur), Value::Object(p)) = (original[i].take(), v.clone()) else {
                    unreachable!("both items are objects")
                };
                original[i] = Value::Object(merge_map(cur, p, elem)?);
            }
            None => {
                at.insert(id, original.len());
                original.push(v.clone());
            }
        }
    }
    Ok(original)
}

/// `partitionPrimitivesByPresentInList` / `partitionMapsByPresentInList`: the items `by`
/// names, and the rest.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    key: Option<&str>,
) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let named: HashSet<String> = by.iter().filter_map(|v| order_ident(v, key)).collect();
    let (mut inside, mut rest) = (Vec::new(), Vec::new());
    for v in merged {
        let id = match key {
            Some(k) => {
                if !v.is_object() {
                    return Err(bad("the items of a keyed merge list must be objects"));
                }
                ident(v.get(k).ok_or_else(|| no_merge_key(k))?)
            }
            None => ident(&v),
        };
        if named.contains(&id) {
            inside.push(v);
        } else {
            rest.push(v);
        }
    }
    Ok((inside, rest))
}

/// `normalizeElementOrder`: sorts the patch's items by `patch_order` and the others by
/// `server_order`, then interleaves them (`mergeSortedSlice`).
fn normalize_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
    kind: GoType,
) -> Result<Vec<Value>, ApiError> {
    let patch = sort_by_order(patch, patch_order, key, kind)?;
    let server_only = sort_by_order(server_only, server_order, key, kind)?;
    let at = first_index(server_order, key);
    let pos = |v: &Value| order_ident(v, key).and_then(|id| at.get(&id).copied());
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((pos(l), pos(r)), (Some(a), Some(b)) if a < b),
        };
        out.push(if take_left { left.next() } else { right.next() }.expect("peeked"));
    }
    Ok(out)
}

/// `normalizeSliceOrder`: a stable sort by position in `order`; for a keyed list every item
/// must carry the key, and `$patch: delete` items go last.
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    key: Option<&str>,
    kind: GoType,
) -> Result<Vec<Value>, ApiError> {
    let (mut items, deletes) = if kind == GoType::Map {
        let k = key.ok_or_else(|| bad("a list of objects without a merge key cannot be merged"))?;
        for v in items.iter().chain(order) {
            if !v.is_object() {
                return Err(bad("the items of a keyed merge list must be objects"));
            }
            if v.get(k).is_none() {
                return Err(no_merge_key(k));
            }
        }
        items.into_iter().partition::<Vec<Value>, _>(|v| {
            v.get(DIRECTIVE).and_then(Value::as_str) != Some("delete")
        })
    } else {
        (items, Vec::new())
    };
    let at = first_index(order, key);
    items.sort_by_key(|v| {
        order_ident(v, key)
            .and_then(|id| at.get(&id).copied())
            .unwrap_or(usize::MAX)
    });
    items.extend(deletes);
    Ok(items)
}

/// `removeDirectives`: drops every `$patch` object (and the fields and items holding one);
/// `None` when `v` itself is one.
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(
                m.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(a) => Some(Value::Array(
            a.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// `discardNullValuesFromPatch`: a null inside a value that is added whole means nothing.
fn discard_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(discard_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(meta: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    }

    fn smp(original: Value, patch: Value) -> Result<Value, ApiError> {
        apply(original, patch, &CONFIG_MAP)
    }

    #[test]
    fn finalizers_merge_as_a_set_and_a_deletion_list_removes() {
        let live = cm(json!({"name": "a", "finalizers": ["x", "y"]}));
        // The patch's items in the patch's order; `y`, which only the object has, goes after
        // `x`, the item it followed in the object (upstream's `mergeSortedSlice`).
        let out = smp(
            live.clone(),
            json!({"metadata": {"finalizers": ["z", "x"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["z", "x", "y"]));
        let out = smp(
            live,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn owner_references_merge_by_uid() {
        let r = |uid: &str, name: &str| json!({"apiVersion": "v1", "kind": "K", "name": name, "uid": uid});
        let live = cm(json!({"ownerReferences": [r("1", "a"), r("2", "b")]}));
        let patch = json!({"metadata": {"ownerReferences": [
            {"uid": "2", "name": "b2"}, r("3", "c"), {"$patch": "delete", "uid": "1"}
        ]}});
        let out = smp(live, patch).unwrap();
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([r("2", "b2"), r("3", "c")])
        );
    }

    #[test]
    fn set_element_order_reorders_and_replace_and_retain_keys_apply() {
        let live = cm(json!({"finalizers": ["a", "b", "c"]}));
        let out = smp(
            live.clone(),
            json!({"metadata": {"$setElementOrder/finalizers": ["c", "a", "b"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));
        let out = smp(
            json!({"data": {"a": "1", "b": "2"}}),
            json!({"data": {"$retainKeys": ["b", "c"], "c": "3"}}),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"b": "2", "c": "3"}));
        let out = smp(
            json!({"data": {"a": "1"}}),
            json!({"data": {"$patch": "replace", "z": "9"}}),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"z": "9"}));
        let out = smp(
            json!({"data": {"a": "1"}}),
            json!({"data": {"$patch": "delete"}}),
        )
        .unwrap();
        assert_eq!(out["data"], json!({}));
    }

    #[test]
    fn malformed_directives_are_refused_with_the_codes_upstream_uses() {
        let mut live = cm(json!({"finalizers": ["a"], "ownerReferences": [{"uid": "1"}]}));
        live["data"] = json!({"a": "1"});
        for (patch, code) in [
            (json!({"metadata": {"$patch": "merge"}}), 400),
            (
                json!({"metadata": {"ownerReferences": [{"name": "no-uid"}]}}),
                400,
            ),
            (
                json!({"metadata": {"ownerReferences": [{"$patch": "merge", "uid": "1"}]}}),
                400,
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}),
                400,
            ),
            (
                json!({"metadata": {"$setElementOrder/finalizers": "a"}}),
                400,
            ),
            (
                json!({"metadata": {"$setElementOrder/finalizers": ["b"], "finalizers": ["c"]}}),
                400,
            ),
            (json!({"data": {"$retainKeys": ["a"], "b": "1"}}), 400),
            (json!({"metadata": {"finalizers": [["a"]]}}), 400),
            (json!({"metadata": {"ownerReferences": [[]]}}), 400),
            (json!({"metadata": {"finalizers": [1]}}), 400),
        ] {
            let e = smp(live.clone(), patch.clone()).unwrap_err();
            assert_eq!(e.code, code, "{patch}: {}", e.message);
        }
        // A list whose first item is a list: upstream's `ErrNoListOfLists`, a 422.
        let empty = cm(json!({"finalizers": []}));
        let e = smp(empty, json!({"metadata": {"finalizers": [["a"]]}})).unwrap_err();
        assert_eq!(e.code, 422, "{}", e.message);
    }

    #[test]
    fn long_merge_lists_cost_no_quadratic_walk() {
        let n = 50_000;
        let live: Vec<Value> = (0..n).map(|i| json!({"uid": i.to_string()})).collect();
        let patch: Vec<Value> = (0..n)
            .rev()
            .map(|i| json!({"uid": (i + n / 2).to_string()}))
            .collect();
        let started = std::time::Instant::now();
        let out = smp(
            cm(json!({"ownerReferences": live})),
            json!({"metadata": {"ownerReferences": patch}}),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["ownerReferences"].as_array().unwrap().len(),
            n + n / 2
        );
        // A quadratic walk is 2.5e9 comparisons: minutes. Hash lookups: well under a second
        // even unoptimised on a loaded machine.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }
}
