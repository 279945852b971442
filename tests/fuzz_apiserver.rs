//! Fuzzing the embedded API server's request decoding with proptest: short, bounded runs on
//! stable inside `cargo test`. Each property sends generated requests in-process to a fresh
//! seeded cluster and checks, through the harness shared with the `cargo fuzz` targets
//! (`apiserver_support/fuzz.rs`), that the server answers, that every rejection is a matching
//! `Status` that changed nothing, and that the server still answers afterwards.
//!
//! The inputs are shaped like requests (objects with odd names and labels, protobuf fields with
//! lying lengths, JSON patches over real and missing paths, extreme numbers, selectors built
//! from the selector grammar's tokens, paths with escapes), mixed with raw bytes. Each run
//! prints its seed; `FUZZ_SEED=<seed>` replays a run and `FUZZ_CASES=<n>` sets its length.
//! The committed `fuzz/corpus` is replayed too.

#[path = "apiserver_support/fuzz.rs"]
mod fuzz;

use std::cell::Cell;
use std::collections::BTreeMap;

use fuzz::Target;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{Value, json};

/// A runner whose seed is printed, so a failure can be replayed with `FUZZ_SEED`.
fn runner(name: &str) -> TestRunner {
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64 ^ name.len() as u64
        });
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    eprintln!("{name}: seed {seed}, {cases} cases (replay with FUZZ_SEED={seed})");
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key))
}

/// Runs `inputs` through the harness for `target`; checks that both accepted and rejected
/// requests occurred, so the generator is not stuck on one side.
fn fuzz(name: &str, target: Target, inputs: impl Strategy<Value = Vec<u8>>) {
    let (accepted, rejected) = (Cell::new(0u32), Cell::new(0u32));
    let result = runner(name).run(&inputs, |data| {
        match fuzz::check(target, &data).map_err(TestCaseError::fail)? {
            Some(code) if code < 400 => accepted.set(accepted.get() + 1),
            Some(_) => rejected.set(rejected.get() + 1),
            None => {}
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    let (a, r) = (accepted.get(), rejected.get());
    eprintln!("{name}: {a} accepted, {r} rejected");
    assert!(
        a > 0 && r > 0,
        "{name}: a one-sided run ({a} accepted, {r} rejected)"
    );
}

/// Strings a hostile client would try as names, keys and values.
fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(vec![
            "a", "web", "seed", "w", "A", "a/b", "..", ".", "-", "web-", "a.b", "0", "", "é", "%",
            "%2F", "app.kubernetes.io/name", "a/b/c", "/x", "x/", "-bad-", "5", "-1", "orphan",
            "foregroundDeletion", "k8s.io/initial-events-end", "default", "Bad_NS",
        ])
        .prop_map(str::to_string),
        1 => (1usize..300, proptest::sample::select(vec!['a', 'x', '-', '.', 'Z', '/']))
            .prop_map(|(n, c)| std::iter::repeat_n(c, n).collect()),
        2 => "[ -~]{0,24}",
    ]
}

/// A name the server accepts.
fn good_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}[a-z0-9]"
}

/// Mostly good names, sometimes odd ones.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![3 => good_name(), 1 => odd_string()]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        odd_string().prop_map(Value::from),
    ]
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            btree_map(odd_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn string_map() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => btree_map(good_name(), good_name(), 0..3),
        1 => btree_map(odd_string(), odd_string(), 0..4),
    ]
    .prop_map(|m: BTreeMap<String, String>| json!(m))
}

/// An object-shaped body: metadata with odd names, labels, annotations and finalizers.
fn object() -> impl Strategy<Value = Value> {
    let spec = prop_oneof![
        2 => (0i32..5).prop_map(|r| json!({"replicas": r})),
        1 => any_json(),
    ];
    (
        name(),
        proptest::option::weighted(0.2, odd_string()),
        proptest::option::weighted(0.2, odd_string()),
        string_map(),
        string_map(),
        proptest::option::weighted(0.3, vec(odd_string(), 0..3)),
        string_map(),
        spec,
        proptest::option::weighted(0.2, odd_string()),
    )
        .prop_map(
            |(name, generate, ns, labels, annotations, fin, data, spec, rv)| {
                json!({
                    "metadata": {"name": name, "generateName": generate, "namespace": ns,
                        "labels": labels, "annotations": annotations, "finalizers": fin,
                        "resourceVersion": rv},
                    "data": data,
                    "spec": spec,
                })
            },
        )
}

/// A first byte choosing the variant, then the payload.
fn with_pick(payload: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (any::<u8>(), payload).prop_map(|(p, mut rest)| {
        rest.insert(0, p);
        rest
    })
}

fn json_bytes(v: impl Strategy<Value = Value>) -> impl Strategy<Value = Vec<u8>> {
    v.prop_map(|v| serde_json::to_vec(&v).expect("a JSON value serialises"))
}

fn nested(open: &'static str, close: &'static str) -> impl Strategy<Value = Vec<u8>> {
    (100usize..400).prop_map(move |d| format!("{}{}", open.repeat(d), close.repeat(d)).into_bytes())
}

#[test]
fn json_bodies_are_answered_with_an_object_or_a_status() {
    let payload = prop_oneof![
        6 => json_bytes(object()),
        2 => json_bytes(any_json()),
        1 => nested("[", "]"),
        1 => nested("{\"a\":", "}"),
        1 => vec(any::<u8>(), 0..64),
    ];
    fuzz("json bodies", Target::JsonBody, with_pick(payload));
}

fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// One protobuf field: a key, then a varint, fixed or length-delimited payload whose length
/// may lie, or a nested message.
fn pb_field(depth: u32) -> BoxedStrategy<Vec<u8>> {
    let len_delimited = if depth == 0 {
        vec(any::<u8>(), 0..16).boxed()
    } else {
        prop_oneof![
            vec(any::<u8>(), 0..16),
            vec(pb_field(depth - 1), 0..5).prop_map(|f| f.concat()),
            odd_string().prop_map(String::into_bytes),
        ]
        .boxed()
    };
    (
        1u64..16,
        prop_oneof![
            any::<u64>().prop_map(|v| (0u64, varint(v))),
            len_delimited.prop_map(|b| (2, [varint(b.len() as u64), b].concat())),
            (any::<u64>(), vec(any::<u8>(), 0..4)).prop_map(|(l, b)| (2, [varint(l), b].concat())),
            vec(any::<u8>(), 8).prop_map(|b| (1, b)),
            vec(any::<u8>(), 4).prop_map(|b| (5, b)),
            (3u64..5).prop_map(|w| (w, Vec::new())),
        ],
    )
        .prop_map(|(num, (wire, payload))| [varint(num << 3 | wire), payload].concat())
        .boxed()
}

fn tag(n: u64, b: &[u8]) -> Vec<u8> {
    [varint(n << 3 | 2), varint(b.len() as u64), b.to_vec()].concat()
}

#[test]
fn protobuf_envelopes_are_answered_with_an_object_or_a_status() {
    // An envelope (without its magic, which the harness adds for even picks) around a
    // ConfigMap message whose metadata, data and labels are odd.
    let extra = prop_oneof![2 => Just(Vec::new()), 1 => vec(pb_field(1), 0..4)];
    let meta = (name(), name(), extra).prop_map(|(name, label, extra)| {
        let labels = tag(11, &[tag(1, label.as_bytes()), tag(2, b"v")].concat());
        [tag(1, name.as_bytes()), labels, extra.concat()].concat()
    });
    let rest = prop_oneof![2 => Just(Vec::new()), 1 => vec(pb_field(2), 0..6)];
    let config_map = (meta, rest).prop_map(|(meta, rest)| {
        [
            tag(1, &meta),
            tag(2, &[tag(1, b"k"), tag(2, b"v")].concat()),
            rest.concat(),
        ]
        .concat()
    });
    let envelope = (
        config_map,
        proptest::sample::select(vec!["ConfigMap", "ConfigMap", "Secret", ""]),
    )
        .prop_map(|(raw, kind)| {
            let type_meta = [tag(1, b"v1"), tag(2, kind.as_bytes())].concat();
            [tag(1, &type_meta), tag(2, &raw)].concat()
        });
    let payload = prop_oneof![
        6 => envelope,
        2 => vec(pb_field(3), 0..8).prop_map(|f| f.concat()),
        1 => vec(any::<u8>(), 0..64),
    ];
    fuzz("protobuf", Target::Protobuf, with_pick(payload));
}

fn pointer() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(vec![
            "", "/", "/data", "/data/k", "/data/new", "/data/-", "/data/~1x", "/data/~2",
            "/metadata", "/metadata/labels/app", "/metadata/name", "/metadata/namespace",
            "/metadata/resourceVersion", "/metadata/uid", "/spec/replicas", "/spec/color",
            "/status", "/status/message", "/kind", "/apiVersion", "/0", "/-", "data",
        ])
        .prop_map(str::to_string),
        1 => vec(odd_string(), 1..4).prop_map(|s| format!("/{}", s.join("/"))),
    ]
}

fn json_patch() -> impl Strategy<Value = Value> {
    let value = prop_oneof![2 => good_name().prop_map(Value::from), 1 => any_json()];
    let op = (
        proptest::sample::select(vec![
            "add", "remove", "replace", "move", "copy", "test", "nope",
        ]),
        pointer(),
        pointer(),
        value,
        any::<u8>(),
    )
        .prop_map(|(op, path, from, value, drop)| {
            let mut o = json!({"op": op, "path": path, "from": from, "value": value});
            // Leave a field out now and then.
            if let Some(m) = o.as_object_mut() {
                match drop % 8 {
                    0 => m.remove("path"),
                    1 => m.remove("value"),
                    _ => None,
                };
            }
            o
        });
    vec(op, 0..6).prop_map(Value::Array)
}

/// A merge patch that mostly changes data or labels in an acceptable way.
fn merge_patch() -> impl Strategy<Value = Value> {
    (string_map(), string_map())
        .prop_map(|(data, labels)| json!({"data": data, "metadata": {"labels": labels}}))
}

#[test]
fn patches_of_every_type_are_answered_with_an_object_or_a_status() {
    let payload = prop_oneof![
        4 => json_bytes(json_patch()),
        3 => json_bytes(merge_patch()),
        2 => json_bytes(object()),
        2 => json_bytes(any_json()),
        1 => nested("{\"data\":", "}"),
        1 => vec(any::<u8>(), 0..64),
    ];
    fuzz("patches", Target::Patch, with_pick(payload));
}

fn query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(vec![
            "", "0", "1", "2", "3", "4", "1000", "-1", "18446744073709551615",
            "18446744073709551616", "99999999999999999999999", "abc", "true", "false",
            "Exact", "NotOlderThan", "Orphan", "Background", "Sometimes", "1e3", " 5",
            "app=web", "n>3", "x in (a,b)", "!app", "metadata.name=seed", "spec.x=1",
            "eyJ2IjoiY29udHJvbGxvb3AvMSIsInJ2IjozLCJucyI6ImRlZmF1bHQiLCJuYW1lIjoiYSJ9",
            "bm90IGEgdG9rZW4", "All",
        ])
        .prop_map(str::to_string),
        1 => odd_string(),
    ]
}

/// Numbers at and past every boundary a parameter could be cast or added across.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => proptest::sample::select(vec![
            "0", "1", "2", "3", "-1", "4294967296", "9223372036854775807",
            "9223372036854775808", "18446744073709551615", "18446744073709551616",
        ])
        .prop_map(str::to_string),
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
    ]
}

#[test]
fn query_parameters_are_range_checked_and_answered_with_a_status() {
    let numeric = proptest::sample::select(vec![
        "limit",
        "resourceVersion",
        "timeoutSeconds",
        "gracePeriodSeconds",
    ]);
    let other = proptest::sample::select(vec![
        "continue",
        "resourceVersionMatch",
        "watch",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "labelSelector",
        "fieldSelector",
        "propagationPolicy",
        "orphanDependents",
        "dryRun",
        "fieldManager",
    ]);
    let pair = prop_oneof![
        3 => (numeric, number()).prop_map(|(k, v)| format!("{k}={v}")),
        3 => (other, query_value()).prop_map(|(k, v)| format!("{k}={v}")),
        1 => (odd_string(), query_value()).prop_map(|(k, v)| format!("{k}={v}")),
    ];
    let payload = vec(pair, 0..6).prop_map(|p| p.join("&").into_bytes());
    fuzz("query parameters", Target::Query, with_pick(payload));
}

#[test]
fn label_selectors_follow_the_grammar_or_are_400() {
    let token = prop_oneof![
        6 => proptest::sample::select(vec![
            "app", "web", "n", "5", "x/y", "a.b/c", "in", "notin", "(", ")", ",", "!", "=",
            "==", "!=", ">", "<", " ", "-", "metadata.name", "seed",
        ])
        .prop_map(str::to_string),
        1 => odd_string(),
    ];
    let payload = vec(token, 0..10).prop_map(|t| t.concat().into_bytes());
    fuzz("selectors", Target::Selector, with_pick(payload));
}

#[test]
fn paths_are_percent_decoded_and_answered_with_a_status() {
    let segment = prop_oneof![
        6 => proptest::sample::select(vec![
            "api", "apis", "v1", "namespaces", "default", "configmaps", "widgets",
            "lab.controlloop.dev", "seed", "w", "status", "..", ".", "%2F", "%2E%2E", "%zz",
            "%", "%C3%28", "%41", "x", "", "version",
        ])
        .prop_map(str::to_string),
        1 => odd_string(),
    ];
    let payload = vec(segment, 0..8).prop_map(|s| s.join("/").into_bytes());
    fuzz("paths", Target::Path, with_pick(payload));
}

/// Pieces of YAML a hostile client would combine: block and flow collections, anchors and
/// aliases (bombs included), merge keys, tags, several documents, odd scalars, deep nesting.
fn yaml_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(vec![
            "metadata:\n  name: y1\n",
            "metadata: {name: y2, labels: {app: web}}\n",
            "metadata:\n  generateName: g-\n",
            "data:\n  a: &x v\n  b: *x\n",
            "data: {k: \"1\", n: 2, t: true, z: null}\n",
            "spec: {replicas: 1, color: red}\n",
            "spec:\n  replicas: \"x\"\n",
            "status: {readyReplicas: 1}\n",
            "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b]\n",
            "base: &base {k: v}\nmerged:\n  <<: *base\n  j: w\n",
            "? [complex, key]\n: value\n",
            "1: integer key\n",
            "bin: !!binary aGVsbG8=\n",
            "tagged: !custom thing\n",
            "---\n",
            "...\n",
            "%YAML 1.2\n---\n",
            "- a\n- b\n",
            "lit: |\n  line one\n  line two\n",
            "num: [.inf, -.inf, .nan, 0x1F, 0o17, 1e400]\n",
            "quoted: \"\\u0000\\xff\"\n",
            "\t: tab\n",
            "&anchor\n",
            "*missing\n",
            "apiVersion: v1\nkind: ConfigMap\n",
            "kind: Secret\n",
        ])
        .prop_map(str::to_string),
        1 => (50usize..200).prop_map(|d| format!("deep: {}x{}\n", "[".repeat(d), "]".repeat(d))),
        1 => (50usize..200).prop_map(|d| (0..d).map(|i| format!("{}k:\n", "  ".repeat(i))).collect()),
        1 => "[ -~]{0,40}".prop_map(|s| format!("{s}\n")),
    ]
}

#[test]
fn yaml_bodies_are_answered_with_an_object_or_a_status() {
    let payload = prop_oneof![
        6 => vec(yaml_piece(), 1..6).prop_map(|p| p.concat().into_bytes()),
        2 => json_bytes(object()),
        1 => vec(any::<u8>(), 0..64),
    ];
    fuzz("yaml bodies", Target::Yaml, with_pick(payload));
}

#[test]
fn the_committed_fuzz_corpus_replays_clean() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let targets = [
        ("json_body", Target::JsonBody),
        ("protobuf", Target::Protobuf),
        ("patch", Target::Patch),
        ("query", Target::Query),
        ("selector", Target::Selector),
        ("path", Target::Path),
        ("yaml", Target::Yaml),
    ];
    let mut replayed = 0;
    for (dir, target) in targets {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            if let Err(e) = fuzz::check(target, &data) {
                panic!("{}: {e}", path.display());
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 7, "the corpus is missing ({replayed} inputs)");
}
