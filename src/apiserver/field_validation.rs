//! Server-side field validation: what a write does with fields its kind does not have, and
//! with fields a JSON body sends twice.
//!
//! Follows kube-apiserver v1.37.2 as a client sees it (`k8s.io/apiserver`
//! `pkg/endpoints/handlers/{create,update,patch}.go` and the `fieldValidation` of
//! `CreateOptions`, `UpdateOptions` and `PatchOptions`):
//!
//! | `fieldValidation` | create, update | patch |
//! |---|---|---|
//! | `Strict` | 400 BadRequest, `strict decoding error: unknown field "x", duplicate field "y"` | 422 Invalid, one cause on `patch` |
//! | `Warn`, or none (the default) | written; one `Warning` header per field | the same |
//! | `Ignore` | written, the fields dropped, nothing said | the same |
//! | anything else | 422 Invalid on the options kind, `FieldValueNotSupported` | the same |
//!
//! An unknown field is one the body (a patch: the patched object) has and the kind's decoding
//! drops; a duplicate field is a key sent twice in one JSON object of a create's or an
//! update's body (the last value wins, as upstream).
//!
//! # Differences from upstream
//! - Duplicate fields are found in create and update bodies sent as JSON only; in a patch
//!   body, and in YAML or protobuf bodies, they are not reported (the last value still wins).
//! - The 422 of a strict patch names the fields in its own words; upstream quotes the whole
//!   patched object in the cause.
//! - Unknown fields are named in the order of their keys (the decoded body's); upstream names
//!   them in the order the body sends them.

use std::fmt;

use http::HeaderValue;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

use super::errors::ApiError;

/// What a write does with unknown and duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Directive {
    /// Drop them silently.
    Ignore,
    /// Drop them, and say so in a `Warning` header each (the default).
    Warn,
    /// Refuse the write.
    Strict,
}

/// The values upstream takes, as its 422 lists them.
const SUPPORTED: &str = r#""", "Ignore", "Strict", "Warn""#;

impl Directive {
    /// The `fieldValidation` of a write's query (its first value), or a 422 on `options`
    /// (`CreateOptions`, `UpdateOptions`, `PatchOptions`) for a value upstream does not take.
    pub fn of(value: Option<&str>, options: &str) -> Result<Directive, ApiError> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(Directive::Warn),
            "Ignore" => Ok(Directive::Ignore),
            "Strict" => Ok(Directive::Strict),
            other => Err(ApiError::invalid_with_reason(
                "meta.k8s.io",
                options,
                "",
                "FieldValueNotSupported",
                &[(
                    "fieldValidation",
                    format!("Unsupported value: {other:?}: supported values: {SUPPORTED}"),
                )],
            )),
        }
    }

    /// What a create or an update does with `problems` (each `unknown field "…"` or
    /// `duplicate field "…"`): the warnings to send, or the 400 of a strict one.
    pub fn on_write(
        self,
        kind: &str,
        version: &str,
        problems: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        match self {
            _ if problems.is_empty() => Ok(problems),
            Directive::Ignore => Ok(Vec::new()),
            Directive::Warn => Ok(problems),
            Directive::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                problems.join(", ")
            ))),
        }
    }

    /// What a patch does with `problems`: the warnings to send, or the 422 of a strict one,
    /// with one cause on `patch`.
    pub fn on_patch(self, problems: Vec<String>) -> Result<Vec<String>, ApiError> {
        if self != Directive::Strict || problems.is_empty() {
            return self.on_write("", "", problems);
        }
        let message = format!(
            "Invalid value: the patched object: strict decoding error: {}",
            problems.join(", ")
        );
        let mut e = ApiError::unprocessable(format!(" \"\" is invalid: patch: {message}"));
        e.details = Some(json!({"causes": [
            {"reason": "FieldValueInvalid", "message": message, "field": "patch"}
        ]}));
        Err(e)
    }
}

/// `unknown field "PATH"` for each field of `sent` that `kept` (the same object decoded by
/// its kind) no longer has, in the order of `sent`'s keys; a field sent as `null` is no field. `ignored`
/// are top-level paths the server removes on purpose (`metadata.managedFields`, …).
pub(crate) fn unknown_fields(sent: &Value, kept: &Value, ignored: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    walk("", sent, kept, ignored, &mut out);
    out
}

fn walk(path: &str, sent: &Value, kept: &Value, ignored: &[&str], out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, v) in s {
                let p = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match k.get(key) {
                    Some(kv) => walk(&p, v, kv, ignored, out),
                    None if v.is_null() || ignored.contains(&p.as_str()) => {}
                    None => out.push(format!("unknown field {p:?}")),
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, (v, kv)) in s.iter().zip(k).enumerate() {
                walk(&format!("{path}[{i}]"), v, kv, ignored, out);
            }
        }
        _ => {}
    }
}

/// `duplicate field "PATH"` for each key a JSON document sends twice in one object, in the
/// order they occur. Bytes that are not JSON give none (the decoder refuses them anyway).
pub(crate) fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Keys {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut de);
    out
}

/// A visitor that reads a JSON value, noting repeated keys under `path`.
struct Keys<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Keys<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(format!("duplicate field {path:?}"));
            }
            map.next_value_seed(Keys {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq
            .next_element_seed(Keys {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// `text` as a `Warning` header value, as kube-apiserver writes one: code 299, no agent,
/// the text quoted.
pub(crate) fn warning(text: &str) -> Option<HeaderValue> {
    let quoted = text.replace('\\', "\\\\").replace('"', "\\\"");
    HeaderValue::from_str(&format!("299 - \"{quoted}\"")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_duplicate_fields_are_named_by_path() {
        let sent = json!({"a": 1, "m": {"x": 1, "y": null, "drop": 2}, "l": [{"k": 1, "z": 2}]});
        let kept = json!({"a": 1, "m": {"x": 1}, "l": [{"k": 1}]});
        assert_eq!(
            unknown_fields(&sent, &kept, &["m.drop"]),
            [r#"unknown field "l[0].z""#]
        );
        let body = br#"{"a": 1, "m": {"k": 1, "k": 2}, "a": 3, "l": [{"q": 1, "q": 1}]}"#;
        assert_eq!(
            duplicate_fields(body),
            [
                r#"duplicate field "m.k""#,
                r#"duplicate field "a""#,
                r#"duplicate field "l[0].q""#
            ]
        );
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn directives_are_upstreams_four_and_nothing_else() {
        assert_eq!(
            Directive::of(None, "CreateOptions").unwrap(),
            Directive::Warn
        );
        assert_eq!(
            Directive::of(Some("Strict"), "CreateOptions").unwrap(),
            Directive::Strict
        );
        let e = Directive::of(Some("strict"), "PatchOptions").unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        let problems = vec![r#"unknown field "x""#.to_owned()];
        let e = Directive::Strict
            .on_write("ConfigMap", "v1", problems.clone())
            .unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            Directive::Strict
                .on_patch(problems.clone())
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(
            Directive::Warn.on_patch(problems.clone()).unwrap(),
            problems
        );
        assert!(
            Directive::Ignore
                .on_write("ConfigMap", "v1", problems)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            warning(r#"unknown field "x""#).unwrap(),
            r#"299 - "unknown field \"x\"""#
        );
    }
}
