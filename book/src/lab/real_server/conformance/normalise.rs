//! What legitimately differs between two servers answering the same requests, replaced by
//! tokens so that the rest can be compared exactly.
//!
//! | what | why it differs | token |
//! |---|---|---|
//! | `metadata.uid` (and a Status's `details.uid`, and a uid as a value elsewhere: a Job's labels and selector) | random per object | `<uid:NAME>`, the object's name |
//! | a timestamp (`creationTimestamp`, `deletionTimestamp`) | the clock | `<time>` |
//! | an object's `metadata.resourceVersion` | each server's own revision counter, shared with other writers on the real one | `<NAME@k>`: the object's k-th version, in numeric order |
//! | a list's or a bookmark's resourceVersion | the revision when it was answered, which other writers (leases) move on a real server | `≥<NAME@k>`: the newest object version at or below it |
//! | a number in a message that is one of those versions | the same | its token; any other number of three digits or more `<n>` |
//! | `metadata.continue` | opaque, encodes a revision | `<continue>` |
//! | `metadata.managedFields` | field management (a difference of its own, which the apply scenario records) | removed |
//! | a name made from `generateName` | a random suffix | `<generated:PREFIX>` |
//! | a Service's `clusterIP` and `clusterIPs` (but `None`), a port's `nodePort` | allocated: at random upstream, from the creation serial on the embedded server | `<clusterIP>`, `<nodePort>` |
//!
//! Versions are numbered per object, so one extra write to one object (a difference of its
//! own) moves only that object's later tokens; a scenario that needs an order across objects
//! records it as a derived fact ([`super::Session::note`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::transcript::Transcript;

/// Normalises every answer of `t` (see the module's table).
pub fn normalise(t: &Transcript) -> Transcript {
    let mut out = t.clone();
    for r in &mut out.records {
        generated_names(&mut r.body);
    }
    let mut seen = Seen::default();
    for r in &out.records {
        seen.collect(&r.body);
    }
    let tokens = seen.tokens();
    for r in &mut out.records {
        rewrite(&mut r.body, &tokens, &seen);
    }
    out
}

/// What the first pass finds: each object's versions, the other versions, each uid's object.
#[derive(Default)]
struct Seen {
    objects: BTreeMap<String, BTreeSet<u64>>,
    others: BTreeSet<u64>,
    uids: HashMap<String, String>,
}

fn number(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_str).and_then(|s| s.parse().ok())
}

impl Seen {
    fn collect(&mut self, v: &Value) {
        match v {
            Value::Object(map) => {
                if let Some(meta) = map.get("metadata") {
                    let name = meta.get("name").and_then(Value::as_str);
                    match (name, number(meta.get("resourceVersion"))) {
                        (Some(n), Some(rv)) => {
                            self.objects.entry(n.to_owned()).or_default().insert(rv);
                        }
                        (None, Some(rv)) => {
                            self.others.insert(rv);
                        }
                        _ => {}
                    }
                    if let (Some(n), Some(uid)) = (name, meta.get("uid").and_then(Value::as_str)) {
                        self.uids
                            .entry(uid.to_owned())
                            .or_insert_with(|| n.to_owned());
                    }
                }
                if let Some(d) = map.get("details")
                    && let (Some(n), Some(uid)) = (
                        d.get("name").and_then(Value::as_str),
                        d.get("uid").and_then(Value::as_str),
                    )
                {
                    self.uids
                        .entry(uid.to_owned())
                        .or_insert_with(|| n.to_owned());
                }
                map.values().for_each(|c| self.collect(c));
            }
            Value::Array(items) => items.iter().for_each(|c| self.collect(c)),
            _ => {}
        }
    }

    /// Every object version seen, in order, with its token.
    fn versions(&self) -> Vec<(u64, String)> {
        let mut all: Vec<(u64, String)> = Vec::new();
        for (name, rvs) in &self.objects {
            for (k, rv) in rvs.iter().enumerate() {
                all.push((*rv, format!("<{name}@{}>", k + 1)));
            }
        }
        all.sort();
        all
    }

    /// Every version seen, as its token: an object's as itself, another (a list's, a
    /// bookmark's) as the newest object version at or below it.
    fn tokens(&self) -> HashMap<u64, String> {
        let all = self.versions();
        let mut tokens: HashMap<u64, String> = all.iter().cloned().collect();
        for &rv in &self.others {
            tokens.entry(rv).or_insert_with(|| list_token(&all, rv));
        }
        tokens
    }
}

/// A list's or a bookmark's version `rv` as a token: `≥` the newest object version at or
/// below it (even one equal to it: one server's list is at its last write, another's past it).
fn list_token(all: &[(u64, String)], rv: u64) -> String {
    match all.partition_point(|(o, _)| *o <= rv) {
        0 => "≥<none>".to_owned(),
        i => format!("≥{}", all[i - 1].1),
    }
}

/// Replaces names made from `generateName` by `<generated:PREFIX>`.
fn generated_names(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(meta)) = map.get_mut("metadata")
                && let Some(prefix) = meta.get("generateName").and_then(Value::as_str)
                && let Some(Value::String(name)) = meta.get("name")
                && name.starts_with(prefix)
                && name.len() > prefix.len()
            {
                let token = format!("<generated:{prefix}>");
                meta.insert("name".into(), Value::String(token));
            }
            map.values_mut().for_each(generated_names);
        }
        Value::Array(items) => items.iter_mut().for_each(generated_names),
        _ => {}
    }
}

fn rewrite(v: &mut Value, tokens: &HashMap<u64, String>, seen: &Seen) {
    let uids = &seen.uids;
    match v {
        Value::Object(map) => {
            // A nameless metadata's version is a list's or a bookmark's.
            let nameless = !map.contains_key("name");
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                meta.remove("managedFields");
                if let Some(Value::String(c)) = meta.get_mut("continue")
                    && !c.is_empty()
                {
                    *c = "<continue>".into();
                }
            }
            for (k, child) in map.iter_mut() {
                match (k.as_str(), child) {
                    ("uid", Value::String(u)) => {
                        *u = format!("<uid:{}>", uids.get(u.as_str()).map_or("?", String::as_str));
                    }
                    ("resourceVersion", Value::String(rv)) => match rv.parse::<u64>() {
                        Ok(n) if nameless && seen.others.contains(&n) => {
                            *rv = list_token(&seen.versions(), n);
                        }
                        Ok(n) => {
                            if let Some(t) = tokens.get(&n) {
                                *rv = t.clone();
                            }
                        }
                        Err(_) => {}
                    },
                    ("message", Value::String(m)) => *m = numbers(m, tokens),
                    ("clusterIP", Value::String(ip)) if ip != "None" => {
                        *ip = "<clusterIP>".into();
                    }
                    ("clusterIPs", Value::Array(ips)) => {
                        for ip in ips.iter_mut().filter(|ip| *ip != "None") {
                            *ip = Value::String("<clusterIP>".into());
                        }
                    }
                    ("nodePort", n @ Value::Number(_)) => *n = Value::String("<nodePort>".into()),
                    (_, child) => rewrite(child, tokens, seen),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rewrite(i, tokens, seen)),
        Value::String(s) if is_timestamp(s) => *s = "<time>".into(),
        Value::String(s) if uids.contains_key(s.as_str()) => {
            *s = format!("<uid:{}>", uids[s.as_str()]);
        }
        _ => {}
    }
}

/// Whether `s` is an RFC 3339 UTC timestamp as Kubernetes writes them.
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && s.ends_with('Z')
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// `message` with each number that is a known resourceVersion replaced by its token, and any
/// other number of three digits or more by `<n>`.
fn numbers(message: &str, known: &HashMap<u64, String>) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        if digits.is_empty() {
            return;
        }
        let n: Option<u64> = digits.parse().ok();
        match n.and_then(|n| known.get(&n)) {
            Some(t) => out.push_str(t),
            None if digits.len() >= 3 => out.push_str("<n>"),
            None => out.push_str(digits),
        }
        digits.clear();
    };
    for c in message.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::real_server::conformance::Record;
    use serde_json::json;

    fn transcript(bodies: Vec<Value>) -> Transcript {
        Transcript {
            records: bodies
                .into_iter()
                .enumerate()
                .map(|(i, body)| Record {
                    label: format!("s{i}"),
                    request: "GET /".into(),
                    code: 200,
                    body,
                })
                .collect(),
        }
    }

    fn cm(name: &str, rv: &str, uid: &str) -> Value {
        json!({"kind": "ConfigMap", "metadata": {"name": name, "uid": uid, "resourceVersion": rv,
               "creationTimestamp": "2026-01-02T03:04:05Z"}})
    }

    #[test]
    fn versions_become_each_objects_order_and_a_lists_is_the_newest_object_below_it() {
        // One server counts 7, 9, list at 12; another 100, 250, list at 250.
        let a = transcript(vec![
            cm("a", "7", "x"),
            cm("a", "9", "x"),
            json!({"kind": "ConfigMapList", "metadata": {"resourceVersion": "12"}, "items": []}),
        ]);
        let b = transcript(vec![
            cm("a", "100", "y"),
            cm("a", "250", "y"),
            json!({"kind": "ConfigMapList", "metadata": {"resourceVersion": "250"}, "items": []}),
        ]);
        let (a, b) = (normalise(&a), normalise(&b));
        assert_eq!(a, b);
        assert_eq!(a.records[1].body["metadata"]["resourceVersion"], "<a@2>");
        assert_eq!(a.records[2].body["metadata"]["resourceVersion"], "≥<a@2>");
        assert_eq!(a.records[0].body["metadata"]["uid"], "<uid:a>");
        assert_eq!(a.records[0].body["metadata"]["creationTimestamp"], "<time>");
    }

    #[test]
    fn an_extra_write_to_one_object_moves_only_that_objects_tokens() {
        let a = normalise(&transcript(vec![cm("a", "5", "x"), cm("b", "6", "y")]));
        let b = normalise(&transcript(vec![cm("a", "5", "x"), cm("b", "9", "y")]));
        assert_eq!(
            a, b,
            "b's first version is b@1 however many writes came between"
        );
        let c = normalise(&transcript(vec![cm("a", "9", "x"), cm("a", "7", "x")]));
        assert_eq!(c.records[0].body["metadata"]["resourceVersion"], "<a@2>");
    }

    #[test]
    fn allocated_addresses_and_uids_as_values_are_tokens() {
        let job = json!({"metadata": {"name": "j", "uid": "u-1", "resourceVersion": "5",
                                      "labels": {"controller-uid": "u-1"}},
                         "spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
                                  "ports": [{"nodePort": 30001}]}});
        let headless = json!({"metadata": {"name": "h", "resourceVersion": "6"},
                              "spec": {"clusterIP": "None", "clusterIPs": ["None"]}});
        let t = normalise(&transcript(vec![job, headless]));
        let (j, h) = (&t.records[0].body, &t.records[1].body);
        assert_eq!(j["metadata"]["labels"]["controller-uid"], "<uid:j>");
        assert_eq!(j["spec"]["clusterIP"], "<clusterIP>");
        assert_eq!(j["spec"]["clusterIPs"], json!(["<clusterIP>"]));
        assert_eq!(j["spec"]["ports"][0]["nodePort"], "<nodePort>");
        assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn numbers_in_messages_are_tokens_or_hidden() {
        let mut known = HashMap::new();
        known.insert(7, "<a@1>".to_owned());
        assert_eq!(
            numbers("too old resource version: 7 (1234), 3 tries", &known),
            "too old resource version: <a@1> (<n>), 3 tries"
        );
    }

    #[test]
    fn managed_fields_generated_names_and_continue_tokens_are_replaced() {
        let t = normalise(&transcript(vec![
            json!({
                "metadata": {"name": "gen-x7k2p", "generateName": "gen-", "managedFields": [{}],
                             "resourceVersion": "5", "uid": "u"},
            }),
            json!({"metadata": {"continue": "abc", "resourceVersion": "5"}, "items": []}),
        ]));
        let m = &t.records[0].body["metadata"];
        assert_eq!(m["name"], "<generated:gen->");
        assert_eq!(m["uid"], "<uid:<generated:gen->>");
        assert!(m.get("managedFields").is_none());
        assert_eq!(t.records[1].body["metadata"]["continue"], "<continue>");
    }
}
