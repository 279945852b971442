//! Decoding of the Kubernetes protobuf envelope for ConfigMap and Namespace request bodies.
//!
//! kubectl (client-go) sends built-in kinds as `application/vnd.kubernetes.protobuf` and does
//! not fall back to JSON on 415, so `kubectl create configmap` and `kubectl create namespace`
//! need this. The envelope is the
//! 4-byte magic `k8s\0` followed by a `runtime.Unknown` message (`typeMeta` = 1, `raw` = 2),
//! whose `raw` is the object's own message; field numbers are those of `generated.proto` in
//! k8s.io/api and k8s.io/apimachinery. Only what a ConfigMap or a Namespace carries is decoded; unknown fields
//! are skipped, as a protobuf decoder does. Responses are always JSON, which every client
//! accepts.

use serde_json::{Map, Value, json};

use super::errors::ApiError;

/// The magic prefix of a Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("malformed protobuf body: {what}"))
}

/// One field of a protobuf message.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &mut &[u8]) -> Result<u64, ApiError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first().ok_or_else(|| bad("truncated varint"))?;
        *buf = rest;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(bad("varint too long"))
}

/// Iterates `(field number, value)` pairs, skipping fixed-width fields.
fn fields(mut buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ApiError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((num, Field::Varint(varint(&mut buf)?))),
            2 => {
                let len = varint(&mut buf)? as usize;
                if len > buf.len() {
                    return Err(bad("truncated field"));
                }
                let (v, rest) = buf.split_at(len);
                out.push((num, Field::Bytes(v)));
                buf = rest;
            }
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                buf = buf.get(n..).ok_or_else(|| bad("truncated fixed field"))?;
            }
            _ => return Err(bad("unsupported wire type")),
        }
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

/// A `map<string, string>` entry (key = 1, value = 2); bytes values are base64, as in JSON.
fn map_entry(b: &[u8], binary: bool) -> Result<(String, Value), ApiError> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = string(x)?,
            (2, Field::Bytes(x)) if binary => {
                use base64::Engine;
                v = Value::String(base64::engine::general_purpose::STANDARD.encode(x));
            }
            (2, Field::Bytes(x)) => v = Value::String(string(x)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn time(b: &[u8]) -> Result<Value, ApiError> {
    let mut secs = 0i64;
    for (n, f) in fields(b)? {
        if let (1, Field::Varint(v)) = (n, f) {
            secs = v as i64;
        }
    }
    let t =
        k8s_openapi::jiff::Timestamp::from_second(secs).map_err(|_| bad("time out of range"))?;
    Ok(json!(t.to_string()))
}

fn owner_reference(b: &[u8]) -> Result<Value, ApiError> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        let (key, v) = match (n, f) {
            (1, Field::Bytes(x)) => ("kind", json!(string(x)?)),
            (3, Field::Bytes(x)) => ("name", json!(string(x)?)),
            (4, Field::Bytes(x)) => ("uid", json!(string(x)?)),
            (5, Field::Bytes(x)) => ("apiVersion", json!(string(x)?)),
            (6, Field::Varint(x)) => ("controller", json!(x != 0)),
            (7, Field::Varint(x)) => ("blockOwnerDeletion", json!(x != 0)),
            _ => continue,
        };
        o.insert(key.into(), v);
    }
    Ok(Value::Object(o))
}

fn object_meta(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    let names = [
        (1, "name"),
        (2, "generateName"),
        (3, "namespace"),
        (5, "uid"),
        (6, "resourceVersion"),
    ];
    for (n, f) in fields(b)? {
        match (n, f) {
            (n, Field::Bytes(x)) if !x.is_empty() && names.iter().any(|(i, _)| *i == n) => {
                let key = names
                    .iter()
                    .find(|(i, _)| *i == n)
                    .map(|(_, k)| *k)
                    .unwrap_or_default();
                m.insert(key.into(), json!(string(x)?));
            }
            (7, Field::Varint(v)) => {
                m.insert("generation".into(), json!(v as i64));
            }
            (8, Field::Bytes(x)) => {
                m.insert("creationTimestamp".into(), time(x)?);
            }
            (11 | 12, Field::Bytes(x)) => {
                let key = if n == 11 { "labels" } else { "annotations" };
                let (k, v) = map_entry(x, false)?;
                m.entry(key).or_insert_with(|| json!({}))[k] = v;
            }
            (13, Field::Bytes(x)) => {
                let arr = m.entry("ownerReferences").or_insert_with(|| json!([]));
                arr.as_array_mut().expect("array").push(owner_reference(x)?);
            }
            (14, Field::Bytes(x)) => {
                let arr = m.entry("finalizers").or_insert_with(|| json!([]));
                arr.as_array_mut().expect("array").push(json!(string(x)?));
            }
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

fn config_map(b: &[u8]) -> Result<Value, ApiError> {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => cm["metadata"] = object_meta(x)?,
            (2 | 3, Field::Bytes(x)) => {
                let key = if n == 2 { "data" } else { "binaryData" };
                let (k, v) = map_entry(x, n == 3)?;
                if cm.get(key).is_none() {
                    cm[key] = json!({});
                }
                cm[key][k] = v;
            }
            (4, Field::Varint(v)) => cm["immutable"] = json!(v != 0),
            _ => {}
        }
    }
    Ok(cm)
}

fn namespace_condition(b: &[u8]) -> Result<Value, ApiError> {
    let mut c = Map::new();
    for (n, f) in fields(b)? {
        let (key, v) = match (n, f) {
            (1, Field::Bytes(x)) => ("type", json!(string(x)?)),
            (2, Field::Bytes(x)) => ("status", json!(string(x)?)),
            (4, Field::Bytes(x)) => ("lastTransitionTime", time(x)?),
            (5, Field::Bytes(x)) => ("reason", json!(string(x)?)),
            (6, Field::Bytes(x)) => ("message", json!(string(x)?)),
            _ => continue,
        };
        c.insert(key.into(), v);
    }
    Ok(Value::Object(c))
}

fn namespace(b: &[u8]) -> Result<Value, ApiError> {
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace"});
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => ns["metadata"] = object_meta(x)?,
            (2, Field::Bytes(x)) => {
                let mut fins = Vec::new();
                for (n, f) in fields(x)? {
                    if let (1, Field::Bytes(f)) = (n, f) {
                        fins.push(json!(string(f)?));
                    }
                }
                ns["spec"] = json!({"finalizers": fins});
            }
            (3, Field::Bytes(x)) => {
                let mut status = json!({});
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(p)) => status["phase"] = json!(string(p)?),
                        (2, Field::Bytes(c)) => {
                            if status.get("conditions").is_none() {
                                status["conditions"] = json!([]);
                            }
                            let c = namespace_condition(c)?;
                            status["conditions"].as_array_mut().expect("array").push(c);
                        }
                        _ => {}
                    }
                }
                ns["status"] = status;
            }
            _ => {}
        }
    }
    Ok(ns)
}

/// Decodes a protobuf body for `kind` (`ConfigMap` and `Namespace` have decoders) into JSON.
pub(crate) fn decode(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let object: fn(&[u8]) -> Result<Value, ApiError> = match kind {
        "ConfigMap" => config_map,
        "Namespace" => namespace,
        _ => {
            return Err(ApiError::unsupported_media_type_because(
                "application/vnd.kubernetes.protobuf",
                "protobuf bodies are read for ConfigMaps and Namespaces only; send JSON or YAML",
            ));
        }
    };
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing the k8s magic prefix"))?;
    let mut raw = None;
    for (n, f) in fields(unknown)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    if let (2, Field::Bytes(k)) = (n, f)
                        && k != kind.as_bytes()
                    {
                        return Err(bad("the envelope names another kind"));
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = Some(r),
            _ => {}
        }
    }
    object(raw.ok_or_else(|| bad("no object in the envelope"))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(n: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_configmap_envelope_decodes_to_json() {
        let meta = [
            tag(1, b"c1"),
            tag(3, b"default"),
            tag(11, &[tag(1, b"app"), tag(2, b"web")].concat()),
        ]
        .concat();
        let data = tag(2, &[tag(1, b"a"), tag(2, b"1")].concat());
        let cm = [tag(1, &meta), data].concat();
        let type_meta = [tag(1, b"v1"), tag(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), tag(1, &type_meta), tag(2, &cm)].concat();
        let v = decode("ConfigMap", &body).unwrap();
        assert_eq!(v["metadata"]["name"], "c1");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
        assert_eq!(v["data"]["a"], "1");
        assert_eq!(decode("ConfigMap", b"junk").unwrap_err().code, 400);
    }

    #[test]
    fn a_namespace_envelope_decodes_to_json() {
        let meta = tag(1, b"team");
        let spec = tag(1, b"kubernetes");
        let cond = [tag(1, b"Ready"), tag(2, b"True")].concat();
        let status = [tag(1, b"Active"), tag(2, &cond)].concat();
        let ns = [tag(1, &meta), tag(2, &spec), tag(3, &status)].concat();
        let type_meta = [tag(1, b"v1"), tag(2, b"Namespace")].concat();
        let body = [MAGIC.to_vec(), tag(1, &type_meta), tag(2, &ns)].concat();
        let v = decode("Namespace", &body).unwrap();
        assert_eq!(v["metadata"]["name"], "team");
        assert_eq!(v["spec"]["finalizers"][0], "kubernetes");
        assert_eq!(v["status"]["conditions"][0]["type"], "Ready");
        let wrong = [MAGIC.to_vec(), tag(1, &type_meta), tag(2, &ns)].concat();
        assert_eq!(decode("ConfigMap", &wrong).unwrap_err().code, 400);
        assert_eq!(decode("Lease", &body).unwrap_err().code, 415);
    }
}
