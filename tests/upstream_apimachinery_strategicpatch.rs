//! apimachinery's strategic merge patch test cases, ported by hand to the kinds the embedded
//! API server serves, and applied through its HTTP handlers.
//!
//! Follows kubernetes/kubernetes v1.37.2,
//! `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch_test.go`: its
//! `createStrategicMergePatchTestCaseData`, `strategicMergePatchRawTestCases` and
//! `customStrategicMergePatchRawTestCases`. Each upstream case gives an original object, the
//! two-way patch and the object it yields, and (most) a current object, the three-way patch
//! and the result; upstream's `testPatchApplication` applies each patch and compares. Every
//! case here names the upstream case it follows and applies both patches the same way.
//!
//! Upstream runs the cases on a test type, `MergeItem`. The cases ported are those whose fields
//! have a counterpart in a served kind, written here in upstream's field names and mapped on:
//!
//! | upstream field | served field | how |
//! |---|---|---|
//! | `mergingIntList` (merge list of ints) | ConfigMap `metadata.finalizers` (merge list of strings) | each int as its decimal string |
//! | `mergingList` (merge list keyed by `name`) | Namespace `status.conditions` (merge list keyed by `type`) | `name` → `type`, `value` → `message`, `other` → `reason`; every item also carries `status: "True"`, which `NamespaceCondition` requires |
//! | `simpleMap`, `retainKeysMap`, the top-level scalars | ConfigMap `data` (a map of strings) | keys kept, values as strings |
//!
//! Cases that need a field no served kind has (`nonMergingList`, `mergeItemPtr`,
//! `retainKeysMergingList`, `replacingItem`, lists nested in list items) are not ported. Upstream
//! compares the object; here the served field is compared, an absent list or map being equal
//! to an empty one (upstream's typed objects omit empty ones). Raw cases compare lists in
//! order, as upstream does; the YAML-defined cases upstream compares after sorting merge lists
//! by key, and so does this port. Where upstream expects an error, the server's `Status`
//! (400, see `strategic`'s differences from upstream) and its message are checked.

use controlloop::apiserver::{Cluster, ServerOptions};
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

/// Which served field a case's upstream field maps to.
#[derive(Debug, Clone, Copy)]
enum Field {
    /// `mergingIntList` → ConfigMap `metadata.finalizers`.
    Finalizers,
    /// `mergingList` → Namespace `status.conditions`.
    Conditions,
    /// A map of strings (upstream: the map at this key, or the top level if empty) → ConfigMap
    /// `data`.
    Data(&'static str),
}

/// One upstream case: JSON documents in upstream's field names.
struct Case {
    /// The upstream case's description.
    upstream: &'static str,
    field: Field,
    original: &'static str,
    two_way: &'static str,
    /// `TwoWayResult` if upstream gives one, else `Modified`.
    two_way_result: &'static str,
    /// `(current, three_way, result)`, if upstream gives them.
    three_way: Option<(&'static str, &'static str, &'static str)>,
    /// Upstream expects the two-way patch to fail; this server's message says so thus.
    error: Option<&'static str>,
    /// Lists compare in order (upstream's raw cases) or sorted by key (its YAML cases).
    ordered: bool,
}

const fn raw(
    upstream: &'static str,
    field: Field,
    original: &'static str,
    two_way: &'static str,
    two_way_result: &'static str,
    three_way: Option<(&'static str, &'static str, &'static str)>,
) -> Case {
    Case {
        upstream,
        field,
        original,
        two_way,
        two_way_result,
        three_way,
        error: None,
        ordered: true,
    }
}

use Field::{Conditions, Data, Finalizers};

const CASES: &[Case] = &[
    // ---- createStrategicMergePatchTestCaseData (compared sorted) ----
    Case {
        ordered: false,
        ..raw(
            "add field to map",
            Data(""),
            r#"{"name":1}"#,
            r#"{"value":1}"#,
            r#"{"name":1,"value":1}"#,
            Some((
                r#"{"name":1,"other":"a"}"#,
                r#"{"value":1}"#,
                r#"{"name":1,"value":1,"other":"a"}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "add field to map with conflict",
            Data(""),
            r#"{"name":1}"#,
            r#"{"value":1}"#,
            r#"{"name":1,"value":1}"#,
            Some((
                r#"{"name":"a","other":"a"}"#,
                r#"{"name":1,"value":1}"#,
                r#"{"name":1,"value":1,"other":"a"}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "add field and delete field from map",
            Data(""),
            r#"{"name":1}"#,
            r#"{"name":null,"value":1}"#,
            r#"{"value":1}"#,
            Some((
                r#"{"name":1,"other":"a"}"#,
                r#"{"name":null,"value":1}"#,
                r#"{"value":1,"other":"a"}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "delete field from nested map",
            Data("simpleMap"),
            r#"{"simpleMap":{"key1":1,"key2":1}}"#,
            r#"{"simpleMap":{"key2":null}}"#,
            r#"{"simpleMap":{"key1":1}}"#,
            Some((
                r#"{"simpleMap":{"key1":1,"key2":1,"other":"a"}}"#,
                r#"{"simpleMap":{"key2":null}}"#,
                r#"{"simpleMap":{"key1":1,"other":"a"}}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "delete field from nested map with conflict",
            Data("simpleMap"),
            r#"{"simpleMap":{"key1":1,"key2":1}}"#,
            r#"{"simpleMap":{"key2":null}}"#,
            r#"{"simpleMap":{"key1":1}}"#,
            Some((
                r#"{"simpleMap":{"key1":"a","key2":1,"other":"a"}}"#,
                r#"{"simpleMap":{"key1":1,"key2":null}}"#,
                r#"{"simpleMap":{"key1":1,"other":"a"}}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "delete all fields from map",
            Data(""),
            r#"{"name":1,"value":1}"#,
            r#"{"name":null,"value":null}"#,
            r#"{}"#,
            Some((
                r#"{"name":1,"value":1,"other":"a"}"#,
                r#"{"name":null,"value":null}"#,
                r#"{"other":"a"}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "add field and delete all fields from map",
            Data(""),
            r#"{"name":1,"value":1}"#,
            r#"{"name":null,"value":null,"other":"a"}"#,
            r#"{"other":"a"}"#,
            Some((
                r#"{"name":1,"value":1,"other":"a"}"#,
                r#"{"name":null,"value":null}"#,
                r#"{"other":"a"}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "delete all maps from merging list",
            Conditions,
            r#"{"mergingList":[{"name":1},{"name":2}]}"#,
            r#"{"mergingList":[{"name":1,"$patch":"delete"},{"name":2,"$patch":"delete"}]}"#,
            r#"{"mergingList":[]}"#,
            Some((
                r#"{"mergingList":[{"name":1},{"name":2}]}"#,
                r#"{"mergingList":[{"name":1,"$patch":"delete"},{"name":2,"$patch":"delete"}]}"#,
                r#"{"mergingList":[]}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "delete all maps from merging list with conflict",
            Conditions,
            r#"{"mergingList":[{"name":1},{"name":2}]}"#,
            r#"{"mergingList":[{"name":1,"$patch":"delete"},{"name":2,"$patch":"delete"}]}"#,
            r#"{"mergingList":[]}"#,
            Some((
                r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"other":"b"}]}"#,
                r#"{"mergingList":[{"name":1,"$patch":"delete"},{"name":2,"$patch":"delete"}]}"#,
                r#"{"mergingList":[]}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "delete all maps from empty merging list",
            Conditions,
            r#"{"mergingList":[{"name":1},{"name":2}]}"#,
            r#"{"mergingList":[{"name":1,"$patch":"delete"},{"name":2,"$patch":"delete"}]}"#,
            r#"{"mergingList":[]}"#,
            Some((
                r#"{"mergingList":[]}"#,
                r#"{"mergingList":[{"name":1,"$patch":"delete"},{"name":2,"$patch":"delete"}]}"#,
                r#"{"mergingList":[]}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "defined null values should propagate overwrite current fields (with conflict)",
            Data(""),
            r#"{"name":2}"#,
            r#"{"name":1,"value":1,"other":null}"#,
            r#"{"name":1,"value":1}"#,
            Some((
                r#"{"name":"a","other":"a"}"#,
                r#"{"name":1,"value":1,"other":null}"#,
                r#"{"name":1,"value":1}"#,
            )),
        )
    },
    Case {
        ordered: false,
        ..raw(
            "defined null values should propagate removing original fields",
            Data(""),
            r#"{"name":"original-name","value":"original-value"}"#,
            r#"{"name":"modified-name","value":null}"#,
            r#"{"name":"modified-name"}"#,
            Some((
                r#"{"name":"original-name","value":"original-value","other":"current-other"}"#,
                r#"{"name":"modified-name","value":null}"#,
                r#"{"name":"modified-name","other":"current-other"}"#,
            )),
        )
    },
    // ---- customStrategicMergePatchRawTestCases ----
    raw(
        "$setElementOrder contains item that is not present in the list to be merged",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":3}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":3},{"name":2},{"name":1}],"mergingList":[{"name":3,"value":3},{"name":1,"value":1}]}"#,
        r#"{"mergingList":[{"name":3,"value":3},{"name":1,"value":1}]}"#,
        None,
    ),
    raw(
        "$setElementOrder contains item that is not present in the int list to be merged",
        Finalizers,
        r#"{"mergingIntList":[1,3]}"#,
        r#"{"$setElementOrder/mergingIntList":[3,2,1]}"#,
        r#"{"mergingIntList":[3,1]}"#,
        None,
    ),
    Case {
        error: Some("contradicts its $setElementOrder list"),
        ..raw(
            "should check if order in $setElementOrder and patch list match",
            Conditions,
            r#"{"mergingList":[{"name":1},{"name":3},{"name":2}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2},{"name":3}],"mergingList":[{"name":3,"value":3},{"name":1,"value":1}]}"#,
            "",
            None,
        )
    },
    Case {
        error: Some("contradicts its $setElementOrder list"),
        ..raw(
            // The second case of this description upstream: an int list.
            "$setElementOrder contains item that is not present in the int list to be merged",
            Finalizers,
            r#"{"mergingIntList":[1,3,2]}"#,
            r#"{"$setElementOrder/mergingIntList":[1,2,3],"mergingIntList":[3,1]}"#,
            "",
            None,
        )
    },
    Case {
        error: Some("no merge key"),
        ..raw(
            "missing merge key should error out",
            Conditions,
            r#"{"mergingList":[{"name":1,"value":"a"}]}"#,
            r#"{"mergingList":[{"value":"b"}]}"#,
            "",
            None,
        )
    },
    raw(
        "$deleteFromPrimitiveList of nonexistent item in primitive list should not add the item to the list",
        Finalizers,
        r#"{"mergingIntList":[1,2]}"#,
        r#"{"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{"mergingIntList":[1,2]}"#,
        None,
    ),
    raw(
        "$deleteFromPrimitiveList on empty primitive list should not add the item to the list",
        Finalizers,
        r#"{"mergingIntList":null}"#,
        r#"{"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{"mergingIntList":null}"#,
        None,
    ),
    raw(
        // Upstream's object holds an unrelated list `foo`; no served kind has one.
        "$deleteFromPrimitiveList on nonexistent primitive list should not add the primitive list",
        Finalizers,
        r#"{}"#,
        r#"{"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{}"#,
        None,
    ),
    raw(
        "$deleteFromPrimitiveList should delete item from a list with merge patch strategy",
        Finalizers,
        r#"{"mergingIntList":[1,2,3]}"#,
        r#"{"$deleteFromPrimitiveList/mergingIntList":[2]}"#,
        r#"{"mergingIntList":[1,3]}"#,
        None,
    ),
    // ---- strategicMergePatchRawTestCases ----
    raw(
        "nested patch merge with empty list",
        Conditions,
        r#"{}"#,
        r#"{"mergingList":[{"name":"hello"},{"$patch":"delete","name":"doesntexist"}]}"#,
        r#"{"mergingList":[{"name":"hello"}]}"#,
        Some((
            r#"{"mergingList":[{"name":"hello2"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":"hello"},{"name":"doesntexist"}],"mergingList":[{"name":"hello"}]}"#,
            r#"{"mergingList":[{"name":"hello"},{"name":"hello2"}]}"#,
        )),
    ),
    raw(
        "delete items in lists of scalars",
        Finalizers,
        r#"{"mergingIntList":[1,2,3]}"#,
        r#"{"$setElementOrder/mergingIntList":[1,2],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{"mergingIntList":[1,2]}"#,
        Some((
            r#"{"mergingIntList":[1,2,3,4]}"#,
            r#"{"$setElementOrder/mergingIntList":[1,2],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
            r#"{"mergingIntList":[1,2,4]}"#,
        )),
    ),
    raw(
        "delete all duplicate items in lists of scalars",
        Finalizers,
        r#"{"mergingIntList":[1,2,3,3]}"#,
        r#"{"$setElementOrder/mergingIntList":[1,2],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{"mergingIntList":[1,2]}"#,
        Some((
            r#"{"mergingIntList":[1,2,3,3,4]}"#,
            r#"{"$setElementOrder/mergingIntList":[1,2],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
            r#"{"mergingIntList":[1,2,4]}"#,
        )),
    ),
    raw(
        "add and delete items in lists of scalars",
        Finalizers,
        r#"{"mergingIntList":[1,2,3]}"#,
        r#"{"$setElementOrder/mergingIntList":[1,2,4],"$deleteFromPrimitiveList/mergingIntList":[3],"mergingIntList":[4]}"#,
        r#"{"mergingIntList":[1,2,4]}"#,
        Some((
            r#"{"mergingIntList":[1,2,3,4]}"#,
            r#"{"$setElementOrder/mergingIntList":[1,2,4],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
            r#"{"mergingIntList":[1,2,4]}"#,
        )),
    ),
    raw(
        "merge lists of maps",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":4},{"name":1},{"name":2},{"name":3}],"mergingList":[{"name":4,"value":4},{"name":3,"value":3}]}"#,
        r#"{"mergingList":[{"name":4,"value":4},{"name":1},{"name":2,"value":2},{"name":3,"value":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":4},{"name":1},{"name":2},{"name":3}],"mergingList":[{"name":4,"value":4},{"name":3,"value":3}]}"#,
            r#"{"mergingList":[{"name":4,"value":4},{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]}"#,
        )),
    ),
    raw(
        "merge lists of maps with conflict",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2},{"name":3}],"mergingList":[{"name":3,"value":3}]}"#,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2},{"name":3,"value":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":3,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2},{"name":3}],"mergingList":[{"name":2,"value":2},{"name":3,"value":3}]}"#,
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]}"#,
        )),
    ),
    raw(
        "add field to map in merging list",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":1}]}"#,
        r#"{"mergingList":[{"name":1,"value":1},{"name":2,"value":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":1}]}"#,
            r#"{"mergingList":[{"name":1,"value":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
        )),
    ),
    raw(
        "add field to map in merging list with conflict",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":1}]}"#,
        r#"{"mergingList":[{"name":1,"value":1},{"name":2,"value":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":3,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":1},{"name":2,"value":2}]}"#,
            r#"{"mergingList":[{"name":1,"value":1,"other":"a"},{"name":2,"value":2},{"name":3,"value":2,"other":"b"}]}"#,
        )),
    ),
    raw(
        "add an item that already exists in current object in merging list",
        Conditions,
        r#"{"mergingList":[{"name":1,"value":"a"},{"name":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2},{"name":3}],"mergingList":[{"name":3}]}"#,
        r#"{"mergingList":[{"name":1,"value":"a"},{"name":2},{"name":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"value":"a","other":"x"},{"name":2},{"name":3}]}"#,
            r#"{}"#,
            r#"{"mergingList":[{"name":1,"value":"a","other":"x"},{"name":2},{"name":3}]}"#,
        )),
    ),
    raw(
        "replace map field value in merging list",
        Conditions,
        r#"{"mergingList":[{"name":1,"value":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":"a"}]}"#,
        r#"{"mergingList":[{"name":1,"value":"a"},{"name":2,"value":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"value":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":"a"}]}"#,
            r#"{"mergingList":[{"name":1,"value":"a","other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
        )),
    ),
    raw(
        "delete map from merging list",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2}],"mergingList":[{"name":1,"$patch":"delete"}]}"#,
        r#"{"mergingList":[{"name":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":1},{"name":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2}],"mergingList":[{"name":1,"$patch":"delete"}]}"#,
            r#"{"mergingList":[{"name":2,"other":"b"}]}"#,
        )),
    ),
    raw(
        "delete missing map from merging list with conflict",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2}],"mergingList":[{"name":1,"$patch":"delete"}]}"#,
        r#"{"mergingList":[{"name":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":3,"other":"a"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2}],"mergingList":[{"name":2},{"name":1,"$patch":"delete"}]}"#,
            r#"{"mergingList":[{"name":2},{"name":3,"other":"a"}]}"#,
        )),
    ),
    raw(
        "add map and delete map from merging list",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2},{"name":3}],"mergingList":[{"name":3},{"name":1,"$patch":"delete"}]}"#,
        r#"{"mergingList":[{"name":2},{"name":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1},{"name":2,"other":"b"},{"name":4,"other":"c"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2},{"name":3}],"mergingList":[{"name":3},{"name":1,"$patch":"delete"}]}"#,
            r#"{"mergingList":[{"name":2,"other":"b"},{"name":4,"other":"c"},{"name":3}]}"#,
        )),
    ),
    raw(
        "add map and delete map from merging list with conflict",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2},{"name":3}],"mergingList":[{"name":3},{"name":1,"$patch":"delete"}]}"#,
        r#"{"mergingList":[{"name":2},{"name":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":4,"other":"c"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2},{"name":3}],"mergingList":[{"name":2},{"name":3},{"name":1,"$patch":"delete"}]}"#,
            r#"{"mergingList":[{"name":4,"other":"c"},{"name":2},{"name":3}]}"#,
        )),
    ),
    raw(
        "delete field from map in merging list",
        Conditions,
        r#"{"mergingList":[{"name":1,"value":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":null}]}"#,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"value":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":null}]}"#,
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
        )),
    ),
    raw(
        "delete missing field from map in merging list",
        Conditions,
        r#"{"mergingList":[{"name":1,"value":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":null}]}"#,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":2}],"mergingList":[{"name":1,"value":null}]}"#,
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
        )),
    ),
    raw(
        "merge lists of scalars",
        Finalizers,
        r#"{"mergingIntList":[1,2]}"#,
        r#"{"$setElementOrder/mergingIntList":[1,2,3],"mergingIntList":[3]}"#,
        r#"{"mergingIntList":[1,2,3]}"#,
        Some((
            r#"{"mergingIntList":[1,2,4]}"#,
            r#"{"$setElementOrder/mergingIntList":[1,2,3],"mergingIntList":[3]}"#,
            r#"{"mergingIntList":[1,2,3,4]}"#,
        )),
    ),
    raw(
        "add an item in a list of primitives and preserve order",
        Finalizers,
        r#"{"mergingIntList":[1,2]}"#,
        r#"{"$setElementOrder/mergingIntList":[3,1,2],"mergingIntList":[3]}"#,
        r#"{"mergingIntList":[3,1,2]}"#,
        Some((
            r#"{"mergingIntList":[1,4,2]}"#,
            r#"{"$setElementOrder/mergingIntList":[3,1,2],"mergingIntList":[3]}"#,
            r#"{"mergingIntList":[3,1,4,2]}"#,
        )),
    ),
    raw(
        "delete an item in a list of primitives and preserve order",
        Finalizers,
        r#"{"mergingIntList":[1,2,3]}"#,
        r#"{"$setElementOrder/mergingIntList":[2,1],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{"mergingIntList":[2,1]}"#,
        Some((
            r#"{"mergingIntList":[1,2,3]}"#,
            r#"{"$setElementOrder/mergingIntList":[2,1],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
            r#"{"mergingIntList":[2,1]}"#,
        )),
    ),
    raw(
        "add multiple items in a list and preserve order",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":1},{"name":4},{"name":2},{"name":3}],"mergingList":[{"name":4,"value":4},{"name":3,"value":3}]}"#,
        r#"{"mergingList":[{"name":1},{"name":4,"value":4},{"name":2,"value":2},{"name":3,"value":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":1},{"name":4},{"name":2},{"name":3}],"mergingList":[{"name":4,"value":4},{"name":3,"value":3}]}"#,
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":4,"value":4},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]}"#,
        )),
    ),
    raw(
        "delete an item in a list and preserve order",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":3,"value":3},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2},{"name":1}],"mergingList":[{"name":3,"$patch":"delete"}]}"#,
        r#"{"mergingList":[{"name":2,"value":2},{"name":1}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2},{"name":1}],"mergingList":[{"name":3,"$patch":"delete"}]}"#,
            r#"{"mergingList":[{"name":2,"value":2,"other":"b"},{"name":1,"other":"a"}]}"#,
        )),
    ),
    raw(
        "add and delete an item in a list and preserve order",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":3,"value":3},{"name":2,"value":2}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":4},{"name":2},{"name":1}],"mergingList":[{"name":4,"value":4},{"name":3,"$patch":"delete"}]}"#,
        r#"{"mergingList":[{"name":4,"value":4},{"name":2,"value":2},{"name":1}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":4},{"name":2},{"name":1}],"mergingList":[{"name":4,"value":4},{"name":3,"$patch":"delete"}]}"#,
            r#"{"mergingList":[{"name":4,"value":4},{"name":2,"value":2,"other":"b"},{"name":1,"other":"a"}]}"#,
        )),
    ),
    raw(
        "set elements order in a list with server-only items 3",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":2},{"name":3,"value":3},{"name":4,"value":4}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2},{"name":1},{"name":4},{"name":3}]}"#,
        r#"{"mergingList":[{"name":2,"value":2},{"name":1},{"name":4,"value":4},{"name":3,"value":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1,"other":"a"},{"name":2,"value":2},{"name":7},{"name":9},{"name":8},{"name":3,"value":3},{"name":4,"value":4}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2},{"name":1},{"name":4},{"name":3}]}"#,
            r#"{"mergingList":[{"name":2,"value":2},{"name":1,"other":"a"},{"name":7},{"name":9},{"name":8},{"name":4,"value":4},{"name":3,"value":3}]}"#,
        )),
    ),
    raw(
        "set elements order in a int list with server-only items 2",
        Finalizers,
        r#"{"mergingIntList":[1,2,3,4]}"#,
        r#"{"$setElementOrder/mergingIntList":[2,1,4,3]}"#,
        r#"{"mergingIntList":[2,1,4,3]}"#,
        Some((
            r#"{"mergingIntList":[1,2,9,3,4]}"#,
            r#"{"$setElementOrder/mergingIntList":[2,1,4,3]}"#,
            r#"{"mergingIntList":[2,1,9,4,3]}"#,
        )),
    ),
    raw(
        "add and delete an item in a int list and preserve order",
        Finalizers,
        r#"{"mergingIntList":[1,3,2]}"#,
        r#"{"$setElementOrder/mergingIntList":[4,2,1],"mergingIntList":[4],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
        r#"{"mergingIntList":[4,2,1]}"#,
        Some((
            r#"{"mergingIntList":[1,2,3]}"#,
            r#"{"$setElementOrder/mergingIntList":[4,2,1],"mergingIntList":[4],"$deleteFromPrimitiveList/mergingIntList":[3]}"#,
            r#"{"mergingIntList":[4,2,1]}"#,
        )),
    ),
    raw(
        "behavior of set element order for a merging list with duplicate",
        Conditions,
        r#"{"mergingList":[{"name":1},{"name":2,"value":"dup1"},{"name":3},{"name":2,"value":"dup2"},{"name":4}]}"#,
        r#"{"$setElementOrder/mergingList":[{"name":2},{"name":1},{"name":4},{"name":3},{"name":2}]}"#,
        r#"{"mergingList":[{"name":2,"value":"dup1"},{"name":2,"value":"dup2"},{"name":1},{"name":4},{"name":3}]}"#,
        Some((
            r#"{"mergingList":[{"name":1},{"name":2,"value":"dup1"},{"name":3},{"name":2,"value":"dup2"},{"name":4}]}"#,
            r#"{"$setElementOrder/mergingList":[{"name":2},{"name":1},{"name":4},{"name":3},{"name":2}]}"#,
            r#"{"mergingList":[{"name":2,"value":"dup1"},{"name":2,"value":"dup2"},{"name":1},{"name":4},{"name":3}]}"#,
        )),
    ),
    raw(
        "behavior of set element order for a merging int list with duplicate",
        Finalizers,
        r#"{"mergingIntList":[1,2,3,2,4]}"#,
        r#"{"$setElementOrder/mergingIntList":[2,1,4,3,2]}"#,
        r#"{"mergingIntList":[2,2,1,4,3]}"#,
        Some((
            r#"{"mergingIntList":[1,2,3,2,4]}"#,
            r#"{"$setElementOrder/mergingIntList":[2,1,4,3,2]}"#,
            r#"{"mergingIntList":[2,2,1,4,3]}"#,
        )),
    ),
    raw(
        "retainKeys map should clear defaulted field",
        Data("retainKeysMap"),
        r#"{}"#,
        r#"{"retainKeysMap":{"other":"bar"}}"#,
        r#"{"retainKeysMap":{"other":"bar"}}"#,
        Some((
            r#"{"retainKeysMap":{"value":"foo"}}"#,
            r#"{"retainKeysMap":{"$retainKeys":["other"],"other":"bar"}}"#,
            r#"{"retainKeysMap":{"other":"bar"}}"#,
        )),
    ),
    raw(
        "retainKeys map should clear defaulted field with conflict (discriminated union)",
        Data("retainKeysMap"),
        r#"{}"#,
        r#"{"retainKeysMap":{"name":"type2","other":"bar"}}"#,
        r#"{"retainKeysMap":{"name":"type2","other":"bar"}}"#,
        Some((
            r#"{"retainKeysMap":{"name":"type1","value":"foo"}}"#,
            r#"{"retainKeysMap":{"$retainKeys":["name","other"],"name":"type2","other":"bar"}}"#,
            r#"{"retainKeysMap":{"name":"type2","other":"bar"}}"#,
        )),
    ),
    raw(
        "retainKeys map adds a field and clear a field",
        Data("retainKeysMap"),
        r#"{"retainKeysMap":{"name":"foo"}}"#,
        r#"{"retainKeysMap":{"$retainKeys":["name","value"],"value":"bar"}}"#,
        r#"{"retainKeysMap":{"name":"foo","value":"bar"}}"#,
        Some((
            r#"{"retainKeysMap":{"name":"foo","other":"a"}}"#,
            r#"{"retainKeysMap":{"$retainKeys":["name","value"],"value":"bar"}}"#,
            r#"{"retainKeysMap":{"name":"foo","value":"bar"}}"#,
        )),
    ),
    raw(
        "retainKeys map deletes a field and clears a field",
        Data("retainKeysMap"),
        r#"{"retainKeysMap":{"name":"foo","value":"bar"}}"#,
        r#"{"retainKeysMap":{"$retainKeys":["name"],"value":null}}"#,
        r#"{"retainKeysMap":{"name":"foo"}}"#,
        Some((
            r#"{"retainKeysMap":{"name":"foo","value":"bar","other":"a"}}"#,
            r#"{"retainKeysMap":{"$retainKeys":["name"],"value":null}}"#,
            r#"{"retainKeysMap":{"name":"foo"}}"#,
        )),
    ),
    raw(
        "retainKeys map clears a field",
        Data("retainKeysMap"),
        r#"{"retainKeysMap":{"name":"foo","value":"bar"}}"#,
        r#"{}"#,
        r#"{"retainKeysMap":{"name":"foo","value":"bar"}}"#,
        Some((
            r#"{"retainKeysMap":{"name":"foo","value":"bar","other":"a"}}"#,
            r#"{"retainKeysMap":{"$retainKeys":["name","value"]}}"#,
            r#"{"retainKeysMap":{"name":"foo","value":"bar"}}"#,
        )),
    ),
];

/// A scalar of upstream's test type as the served field holds it: a string.
fn string_of(v: &Value) -> Value {
    match v {
        Value::String(_) => v.clone(),
        Value::Null => Value::Null,
        other => Value::String(other.to_string()),
    }
}

/// A `mergingList` item as a Namespace condition; `with_status` adds the field every condition
/// carries (not to a `$patch` item, nor to a `$setElementOrder` entry, which names a key only).
fn condition(item: &Value, with_status: bool) -> Value {
    let mut out = Map::new();
    for (k, v) in item.as_object().expect("a list item is an object") {
        let k = match k.as_str() {
            "name" => "type",
            "value" => "message",
            "other" => "reason",
            other => other,
        };
        let v = if k == "$patch" {
            v.clone()
        } else {
            string_of(v)
        };
        out.insert(k.to_string(), v);
    }
    if with_status && !out.contains_key("$patch") {
        out.insert("status".into(), json!("True"));
    }
    Value::Object(out)
}

/// The served field's content of an upstream document (a list, a map, or null if absent).
fn content(field: Field, doc: &Value) -> Value {
    match field {
        Finalizers => match &doc["mergingIntList"] {
            Value::Array(a) => Value::Array(a.iter().map(string_of).collect()),
            _ => Value::Null,
        },
        Conditions => match &doc["mergingList"] {
            Value::Array(a) => Value::Array(a.iter().map(|i| condition(i, true)).collect()),
            _ => Value::Null,
        },
        Data(at) => {
            let map = if at.is_empty() { doc } else { &doc[at] };
            match map {
                Value::Object(m) => {
                    Value::Object(m.iter().map(|(k, v)| (k.clone(), string_of(v))).collect())
                }
                _ => Value::Null,
            }
        }
    }
}

/// An upstream patch as a patch of the served field's parent map.
fn patch_of(field: Field, patch: &Value) -> Value {
    let (list, served) = match field {
        Finalizers => ("mergingIntList", "finalizers"),
        Conditions => ("mergingList", "conditions"),
        Data(at) => {
            let map = if at.is_empty() {
                patch.clone()
            } else {
                patch.get(at).cloned().unwrap_or(json!({}))
            };
            return match map {
                Value::Object(m) => Value::Object(
                    m.into_iter()
                        .map(|(k, v)| {
                            let v = if k == "$retainKeys" { v } else { string_of(&v) };
                            (k, v)
                        })
                        .collect(),
                ),
                other => other,
            };
        }
    };
    let mut out = Map::new();
    for (k, v) in patch.as_object().expect("a patch is an object") {
        let Some(directive) = k.strip_suffix(list) else {
            panic!("a patch of another field: {k}");
        };
        let key = format!("{directive}{served}");
        let order = directive.starts_with("$setElementOrder");
        let v = match (field, v) {
            (Conditions, Value::Array(a)) => {
                Value::Array(a.iter().map(|i| condition(i, !order)).collect())
            }
            (_, Value::Array(a)) => Value::Array(a.iter().map(string_of).collect()),
            (_, other) => other.clone(),
        };
        out.insert(key, v);
    }
    Value::Object(out)
}

async fn call(cluster: &Cluster, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(axum::body::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = cluster.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const SMP: &str = "application/strategic-merge-patch+json";

/// Stores an object whose served field holds `content`, applies `patch` by strategic merge
/// patch, and returns the code and the served field (or the `Status`) of the answer.
async fn apply(field: Field, content: &Value, patch: &Value) -> (u16, Value) {
    let cluster = Cluster::new(ServerOptions::default());
    match field {
        Conditions => {
            let ns = "/api/v1/namespaces";
            let (code, _) = call(
                &cluster,
                "POST",
                ns,
                "application/json",
                &json!({"metadata": {"name": "n"}}),
            )
            .await;
            assert_eq!(code, 201);
            let mut status = json!({"phase": "Active"});
            if !content.is_null() {
                status["conditions"] = content.clone();
            }
            let body = json!({"metadata": {"name": "n"}, "status": status});
            let (code, put) = call(
                &cluster,
                "PUT",
                &format!("{ns}/n/status"),
                "application/json",
                &body,
            )
            .await;
            assert_eq!(code, 200, "{put}");
            let (code, out) = call(
                &cluster,
                "PATCH",
                &format!("{ns}/n/status"),
                SMP,
                &json!({"status": patch}),
            )
            .await;
            let got = if code == 200 {
                out["status"]["conditions"].clone()
            } else {
                out
            };
            (code, got)
        }
        Finalizers | Data(_) => {
            let cms = "/api/v1/namespaces/default/configmaps";
            let mut obj = json!({"metadata": {"name": "a"}});
            match field {
                Finalizers if !content.is_null() => obj["metadata"]["finalizers"] = content.clone(),
                Data(_) if !content.is_null() => obj["data"] = content.clone(),
                _ => {}
            }
            let (code, made) = call(&cluster, "POST", cms, "application/json", &obj).await;
            assert_eq!(code, 201, "{made}");
            let body = match field {
                Finalizers => json!({"metadata": patch}),
                _ => json!({"data": patch}),
            };
            let (code, out) = call(&cluster, "PATCH", &format!("{cms}/a"), SMP, &body).await;
            let got = match (code, field) {
                (200, Finalizers) => out["metadata"]["finalizers"].clone(),
                (200, _) => out["data"].clone(),
                _ => out,
            };
            (code, got)
        }
    }
}

/// Absent and empty are the same; unordered lists are sorted by key.
fn normal(v: &Value, ordered: bool) -> Value {
    match v {
        Value::Array(a) if a.is_empty() => Value::Null,
        Value::Object(m) if m.is_empty() => Value::Null,
        Value::Array(a) if !ordered => {
            let mut a = a.clone();
            a.sort_by_key(|i| i.get("type").unwrap_or(i).to_string());
            Value::Array(a)
        }
        other => other.clone(),
    }
}

async fn check(case: &Case, which: &str, original: &str, patch: &str, want: &str) {
    let doc = |s: &str| -> Value { serde_json::from_str(s).expect("a case's JSON") };
    let content = content(case.field, &doc(original));
    let patch = patch_of(case.field, &doc(patch));
    let (code, got) = apply(case.field, &content, &patch).await;
    if let (Some(says), "two-way") = (case.error, which) {
        assert_eq!(code, 400, "{} ({which}): {got}", case.upstream);
        let message = got["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(says),
            "{} ({which}): {message}",
            case.upstream
        );
        return;
    }
    assert_eq!(code, 200, "{} ({which}): {got}", case.upstream);
    let want = self::content(case.field, &doc(want));
    assert_eq!(
        normal(&got, case.ordered),
        normal(&want, case.ordered),
        "{} ({which}): patch {patch} on {content}",
        case.upstream
    );
}

/// Every ported case, both of its patches (upstream's `testTwoWayPatch` and
/// `testThreeWayPatch` application step). One Rust test per upstream case would be 50 tests
/// of four lines; the failure message names the case instead.
#[test]
fn upstream_strategic_merge_patch_cases_apply_as_upstream_applies_them() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        for case in CASES {
            check(
                case,
                "two-way",
                case.original,
                case.two_way,
                case.two_way_result,
            )
            .await;
            if let Some((current, three_way, result)) = case.three_way {
                check(case, "three-way", current, three_way, result).await;
            }
        }
    });
    assert!(CASES.len() >= 40, "{} cases", CASES.len());
}
