//! YAML request bodies (`Content-Type: application/yaml`), decoded with budgets that bound what
//! a hostile document can cost.
//!
//! Follows kube-apiserver, which accepts YAML for a create or an update and converts it to JSON
//! (`sigs.k8s.io/yaml`, `YAMLToJSON`) before decoding the object: one document, mapping keys as
//! strings. The decoder is serde-saphyr, whose parser never panics on malformed input and
//! enforces a [`serde_saphyr::Budget`] while it reads.
//!
//! # Invariants
//! 1. The decoded value is nested at most [`MAX_DEPTH`] levels (under the JSON decoder's 127,
//!    so every later walk is bounded as for a JSON body).
//! 2. Aliases cannot multiply a document: at most [`MAX_ALIASES`] alias uses, at most
//!    [`MAX_REPLAYED_EVENTS`] events replayed from them in all, and the scalar text of the
//!    decoded value, replays included, at most the body limit. So a decoded value is no larger
//!    than a JSON body the server would accept, plus its node count ([`MAX_NODES`]).
//! 3. A document the budget or the parser refuses is a 400 `Status` naming why; nothing is
//!    stored.
//!
//! # Differences from upstream
//! - Go's YAML decoder limits alias expansion by a ratio of the document's size; the limits
//!   here are counts. Its depth limit is 10,000; here 100.
//! - Merge keys (`<<`) are expanded, and `y`, `yes`, `on` (and their opposites) are booleans,
//!   as in YAML 1.1 and Go's decoder: a name such as `y` must be quoted.

use serde_json::Value;

use super::errors::ApiError;

/// The deepest nesting a YAML body may have (keeps I1).
pub(crate) const MAX_DEPTH: usize = 100;

/// The most alias uses (`*name`) in one body (keeps I2).
pub(crate) const MAX_ALIASES: usize = 1_000;

/// The most parser events replayed from aliases in one body (keeps I2).
pub(crate) const MAX_REPLAYED_EVENTS: usize = 100_000;

/// The most nodes (scalars, sequences and mappings, replays included) in one body.
pub(crate) const MAX_NODES: usize = 500_000;

/// Decodes one YAML document into JSON; `max_bytes` bounds the decoded scalar text (keeps I2).
pub(crate) fn decode(body: &[u8], max_bytes: usize) -> Result<Value, ApiError> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_nodes = MAX_NODES;
    budget.max_total_scalar_bytes = max_bytes;
    budget.max_documents = 1;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    options.with_snippet = false;
    let value: Value = serde_saphyr::from_slice_with_options(body, options)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")))?;
    // Keeps I1 however the decoder counts levels.
    if super::patch::depth(&value) > MAX_DEPTH {
        drop_deep(value);
        return Err(ApiError::bad_request(format!(
            "the request body is nested more than {MAX_DEPTH} levels deep"
        )));
    }
    Ok(value)
}

/// Drops a value without recursion (serde_json's drop is recursive).
fn drop_deep(v: Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 3 * 1024 * 1024;

    #[test]
    fn a_yaml_object_decodes_to_the_json_it_stands_for() {
        let v = decode(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"1\"\n  n: 2\n",
            LIMIT,
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a"}, "data": {"k": "1", "n": 2}})
        );
    }

    #[test]
    fn alias_bombs_deep_nesting_and_several_documents_are_refused() {
        // Billion laughs: each level doubles ten times the one below.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = (b'a' + i - 1) as char;
            let this = (b'a' + i) as char;
            bomb.push_str(&format!(
                "{this}: &{this} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
        }
        let e = decode(bomb.as_bytes(), LIMIT).unwrap_err();
        assert_eq!(e.code, 400, "{}", e.message);
        // One large scalar aliased many times is bounded by the scalar budget.
        let big = format!(
            "a: &s \"{}\"\nb: [{}]\n",
            "x".repeat(100_000),
            vec!["*s"; 100].join(", ")
        );
        assert_eq!(decode(big.as_bytes(), LIMIT).unwrap_err().code, 400);
        let deep = format!(
            "{}x{}",
            "[".repeat(MAX_DEPTH + 5),
            "]".repeat(MAX_DEPTH + 5)
        );
        assert_eq!(decode(deep.as_bytes(), LIMIT).unwrap_err().code, 400);
        let two = b"a: 1\n---\nb: 2\n";
        assert_eq!(decode(two, LIMIT).unwrap_err().code, 400);
        assert_eq!(decode(b"\xff\xfe", LIMIT).unwrap_err().code, 400);
        assert_eq!(decode(b"a: [1, 2", LIMIT).unwrap_err().code, 400);
    }
}
