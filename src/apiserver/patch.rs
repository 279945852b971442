//! Patches: merge, JSON (RFC 6902), strategic merge and apply, each bounded before it can grow.
//!
//! Follows kubernetes v1.36 `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`
//! (`applyJSPatch`, `maxJSONPatchOperations`) and `pkg/server/config.go`
//! (`JSONPatchMaxCopyBytes`), which bound JSON patches since CVE-2019-1002100: at most 10,000
//! operations (413), and at most 3 MiB added by `copy` operations over the whole patch (422).
//!
//! ```text
//!  body ──► parse (400 bad JSON, 413 too many operations)  ── no lock held ──►
//!  current object ──► apply op by op, checking each one's growth first (422) ──► result
//! ```
//!
//! # Invariants
//! 1. A document being patched is never nested deeper than [`MAX_DEPTH`]: before each
//!    operation that places a value, the depth it would create (the target path's length plus
//!    the value's own depth) is checked. Every recursive walk here (serialising, comparing,
//!    dropping, decoding into the kind's type) is therefore bounded.
//! 2. A document grows by at most the patch body plus [`MAX_COPY_BYTES`]: `add`/`replace`
//!    values come from the body, and every `copy` is charged its serialised size before it runs.
//! 3. Applying a patch never touches storage: it works on a copy of the current object, so
//!    it runs without the storage lock (the caller commits with a resourceVersion check).
//!
//! # Differences from upstream
//! - The depth bound: upstream's Go decoder allows 10,000 levels; here a patch may not build a
//!   document deeper than serde_json (and so this server's own body decoder and kube-rs
//!   clients) can read back, 127 levels.
//! - A `move` to a deeper path walks the moved value to know its depth; that walk is charged to
//!   the same 3 MiB budget as copies (upstream charges moves nothing; it needs no depth).
//! - Strategic merge patch follows upstream for the built-in kinds (see `strategic`); custom
//!   resources refuse it with 415, as upstream does.
//! - Server-side apply (`application/apply-patch+yaml`) is refused with 415: the server keeps
//!   no field ownership (`managedFields`), and applying without it would silently do
//!   something else than kube-apiserver does.

use json_patch::PatchOperation;
use serde_json::Value;

use super::errors::ApiError;
use super::kinds::Kind;

/// `maxJSONPatchOperations`.
pub(crate) const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// `JSONPatchMaxCopyBytes`: the most bytes `copy` operations may add over one patch.
pub(crate) const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The deepest nesting a patched document may reach: serde_json's own parse limit.
pub(crate) const MAX_DEPTH: usize = 127;

/// The patch formats, by content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Json,
    StrategicMerge,
}

/// A decoded patch body.
#[derive(Debug)]
pub(crate) enum Patch {
    /// A merge patch (RFC 7386): an object.
    Merge(Value),
    /// A strategic merge patch: an object, applied with the kind's patch metadata.
    Strategic(Value),
    /// A JSON patch: at most [`MAX_JSON_PATCH_OPERATIONS`] operations.
    Json(Vec<PatchOperation>),
}

/// The content types of server-side apply, which this server refuses.
const APPLY_TYPES: [&str; 3] = [
    "application/apply-patch+yaml",
    "application/apply-patch+json",
    "application/apply-patch+cbor",
];

impl PatchType {
    /// The patch type of a content type: 415 for one the resource does not accept, naming the
    /// ones it does (upstream's `NewUnsupportedMediaTypeError`). Strategic merge patch is for
    /// built-in kinds only; server-side apply is refused for every kind.
    pub fn from_content_type(ct: &str, k: &Kind) -> Result<Self, ApiError> {
        let accepted = if k.patch_schema.is_some() {
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
        } else {
            "application/json-patch+json, application/merge-patch+json"
        };
        match ct {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" if k.patch_schema.is_some() => {
                Ok(PatchType::StrategicMerge)
            }
            apply if APPLY_TYPES.contains(&apply) => Err(ApiError::unsupported_media_type_because(
                apply,
                &format!(
                    "server-side apply is not implemented by this server: it keeps no field \
                     ownership (managedFields), so it cannot apply as kube-apiserver does; \
                     accepted patch types: {accepted}"
                ),
            )),
            "application/strategic-merge-patch+json" => {
                Err(ApiError::unsupported_media_type_because(
                    ct,
                    &format!(
                        "strategic merge patch is not supported for custom resources, as in \
                         kube-apiserver; accepted patch types: {accepted}"
                    ),
                ))
            }
            other => Err(ApiError::unsupported_media_type_because(
                other,
                &format!("accepted patch types: {accepted}"),
            )),
        }
    }

    /// Decodes a patch body: 400 if it is not this patch type's JSON, 413 for a JSON patch of
    /// more than [`MAX_JSON_PATCH_OPERATIONS`] operations.
    pub fn parse(self, body: Value) -> Result<Patch, ApiError> {
        match self {
            PatchType::Merge => {
                if !body.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                Ok(Patch::Merge(body))
            }
            PatchType::StrategicMerge => {
                if !body.is_object() {
                    return Err(ApiError::bad_request(
                        "a strategic merge patch must be a JSON object",
                    ));
                }
                Ok(Patch::Strategic(body))
            }
            PatchType::Json => {
                if let Some(n) = body.as_array().map(Vec::len)
                    && n > MAX_JSON_PATCH_OPERATIONS
                {
                    return Err(ApiError::entity_too_large(format!(
                        "a JSON patch may have at most {MAX_JSON_PATCH_OPERATIONS} operations; this one has {n}"
                    )));
                }
                let p: json_patch::Patch = serde_json::from_value(body)
                    .map_err(|e| ApiError::bad_request(format!("malformed JSON patch: {e}")))?;
                Ok(Patch::Json(p.0))
            }
        }
    }
}

/// The nesting depth of `v`: 0 for a scalar, 1 for `{}` or `[]`. Iterative, so any depth is
/// safe to measure.
pub(crate) fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(a) => {
                deepest = deepest.max(d + 1);
                stack.extend(a.iter().map(|c| (c, d + 1)));
            }
            Value::Object(m) => {
                deepest = deepest.max(d + 1);
                stack.extend(m.values().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The size of `v` serialised as JSON, without building the bytes.
fn serialized_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(b.len());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a Value into an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

impl Patch {
    /// Applies the patch to `cur` (the current object, taken out of storage). A patch that
    /// cannot be applied (a failed `test`, a missing path) or that would grow the document
    /// past a bound is 422 Invalid.
    pub fn apply(&self, mut cur: Value, k: &Kind, name: &str) -> Result<Value, ApiError> {
        match self {
            Patch::Merge(patch) => {
                // Depth: at most the deeper of the two, both already bounded (keeps I1);
                // size: at most their sum (keeps I2).
                json_patch::merge(&mut cur, patch);
                Ok(cur)
            }
            // Keeps I1 and I2 the same way (strategic I1).
            Patch::Strategic(patch) => {
                let schema = k.patch_schema.expect("parsed only for kinds with a schema");
                super::strategic::apply(cur, patch.clone(), schema)
            }
            Patch::Json(ops) => {
                let invalid =
                    |m: String| ApiError::invalid(&k.group, &k.kind, name, &[("patch", m)]);
                let mut charged = 0usize;
                for (i, op) in ops.iter().enumerate() {
                    let placed = match op {
                        PatchOperation::Add(o) => Some((o.path.count(), depth(&o.value))),
                        PatchOperation::Replace(o) => Some((o.path.count(), depth(&o.value))),
                        PatchOperation::Copy(o) => cur.pointer(o.from.as_str()).map(|src| {
                            charged = charged.saturating_add(serialized_len(src)); // keeps I2
                            (o.path.count(), depth(src))
                        }),
                        // Moving a value no deeper than it was cannot deepen the document.
                        PatchOperation::Move(o) if o.path.count() > o.from.count() => {
                            cur.pointer(o.from.as_str()).map(|src| {
                                charged = charged.saturating_add(serialized_len(src));
                                (o.path.count(), depth(src))
                            })
                        }
                        _ => None,
                    };
                    if charged > MAX_COPY_BYTES {
                        return Err(invalid(format!(
                            "operation {i}: the patch copies more than {MAX_COPY_BYTES} bytes in total"
                        )));
                    }
                    if let Some((path, value)) = placed
                        && path.saturating_add(value) > MAX_DEPTH
                    {
                        return Err(invalid(format!(
                            "operation {i}: the result would be nested {} levels deep, more than {MAX_DEPTH}",
                            path.saturating_add(value)
                        ))); // keeps I1
                    }
                    if let PatchOperation::Test(t) = op
                        && t.value.is_null()
                        && cur.pointer(t.path.as_str()).is_none()
                        && parent_is_object(&cur, &t.path)
                    {
                        continue; // a missing member tests equal to null, as upstream's does
                    }
                    json_patch::patch_unsafe(&mut cur, std::slice::from_ref(op)).map_err(|e| {
                        invalid(format!(
                            "operation {i} failed at path '{}': {}",
                            e.path, e.kind
                        ))
                    })?;
                }
                Ok(cur)
            }
        }
    }
}

/// Whether the parent of `path` is an object in `doc` (the document itself for a top-level
/// member).
fn parent_is_object(doc: &Value, path: &json_patch::jsonptr::Pointer) -> bool {
    let parent = path.parent().map_or("", |p| p.as_str());
    doc.pointer(parent).is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::kinds::{CONFIGMAPS, builtin};
    use serde_json::json;

    fn json_patch(ops: Value) -> Patch {
        PatchType::Json.parse(ops).unwrap()
    }

    fn apply(p: &Patch, doc: Value) -> Result<Value, ApiError> {
        p.apply(doc, &builtin(CONFIGMAPS), "a")
    }

    #[test]
    fn a_test_of_null_passes_on_a_missing_member_only() {
        // kube-runtime's finalizer helper adds the first finalizer this way (kube-apiserver
        // v1.37.2 accepts it: a missing member tests equal to null).
        let doc = json!({"metadata": {"name": "a"}});
        let add = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]}
        ]);
        let added = apply(&json_patch(add.clone()), doc).unwrap();
        assert_eq!(added["metadata"]["finalizers"], json!(["x/y"]));
        // Present: the test fails, as it does upstream; so does a missing parent.
        let again = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
        assert_eq!(
            apply(&json_patch(again), added.clone()).unwrap_err().code,
            422
        );
        let orphan = json!([{"op": "test", "path": "/metadata/none/deeper", "value": null}]);
        assert_eq!(
            apply(&json_patch(orphan), added.clone()).unwrap_err().code,
            422
        );
        let valued = json!([{"op": "test", "path": "/data/zz", "value": "q"}]);
        assert_eq!(apply(&json_patch(valued), added).unwrap_err().code, 422);
    }

    #[test]
    fn depth_counts_containers_iteratively() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        let mut deep = json!(0);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(depth(&deep), 100_000);
        // Dropping it is recursive in serde_json: take it apart by hand.
        while let Value::Array(mut a) = deep {
            deep = a.pop().unwrap();
        }
    }

    #[test]
    fn a_path_nested_deeper_with_each_operation_stops_at_the_depth_bound() {
        // add /a {}; add /a/a {}; ... : each operation nests one level deeper.
        let ops: Vec<Value> = (1..=200)
            .map(|n| json!({"op": "add", "path": "/a".repeat(n), "value": {}}))
            .collect();
        let e = apply(&json_patch(Value::Array(ops)), json!({})).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("operation 126"), "{}", e.message);
    }

    #[test]
    fn copies_are_charged_and_a_self_doubling_copy_stops_at_3_mib() {
        let doc = json!({"data": {"a": "x".repeat(100_000)}});
        // copy /data to /data/a... doubles the document with every operation.
        let ops: Vec<Value> = (0..40)
            .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/k{i}")}))
            .collect();
        let e = apply(&json_patch(Value::Array(ops)), doc.clone()).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("copies more than"), "{}", e.message);
        // Twenty flat copies of 100 kB fit in the budget.
        let ops: Vec<Value> = (0..20)
            .map(|i| json!({"op": "copy", "from": "/data/a", "path": format!("/data/c{i}")}))
            .collect();
        let out = apply(&json_patch(Value::Array(ops)), doc).unwrap();
        assert_eq!(out["data"].as_object().unwrap().len(), 21);
    }

    #[test]
    fn moving_deeper_is_checked_and_moving_up_is_free() {
        let mut chain = json!(1);
        for _ in 0..100 {
            chain = json!({"n": chain});
        }
        let doc = json!({"a": chain});
        let deeper = json_patch(
            json!([{"op": "move", "from": "/a", "path": "/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/a/b/c"}]),
        );
        let e = apply(&deeper, doc.clone()).unwrap_err();
        assert!(e.message.contains("nested 128 levels"), "{}", e.message);
        let up = json_patch(json!([{"op": "move", "from": "/a/n", "path": "/b"}]));
        assert_eq!(depth(&apply(&up, doc).unwrap()), 100);
    }

    #[test]
    fn too_many_operations_is_413_and_a_bad_patch_is_400() {
        let ops = vec![json!({"op": "test", "path": "/a", "value": 1}); 10_001];
        assert_eq!(
            PatchType::Json.parse(Value::Array(ops)).unwrap_err().code,
            413
        );
        assert_eq!(
            PatchType::Json
                .parse(json!([{"op": "nope"}]))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(PatchType::Merge.parse(json!([1])).unwrap_err().code, 400);
        let failed = json_patch(json!([{"op": "test", "path": "/a", "value": 2}]));
        assert_eq!(apply(&failed, json!({"a": 1})).unwrap_err().code, 422);
    }
}
