//! A built-in kind's strategy beyond what every kind does ([`Hooks`]), and the status write
//! its status strategy makes: what `kinds` calls and `builtin` fills in for each kind it
//! serves (kubernetes v1.37.2 `pkg/registry/*/strategy.go`, `PrepareForUpdate` of each
//! `*StatusStrategy`).

use serde_json::{Value, json};

use super::schema::Cause;
use super::validation::ReasonedCause;

/// A kind's strategy, beyond what every kind does.
#[derive(Debug)]
pub(crate) struct Hooks {
    /// `Validate` of the whole object, after its metadata's rules (on create and on update).
    pub validate: fn(&Value, &mut Vec<Cause>),
    /// `ValidateUpdate`: the rules between the stored object (second) and the new one.
    pub validate_update: fn(&Value, &Value, &mut Vec<ReasonedCause>),
    /// `PrepareForCreate`, once the object has its name and uid.
    pub prepare_for_create: fn(&mut Value),
    /// `PrepareForUpdate` on the main endpoint, after the stored status is put back.
    pub prepare_for_update: fn(&mut Value, &Value),
    /// The metadata fields the status strategy keeps as stored (a Deployment's labels); the
    /// rest of the metadata a client may write comes from the body of a status write.
    pub status_keeps: &'static [&'static str],
    /// `ValidateUpdate` reports the update rules before the object's own (a Secret's
    /// `ValidateSecretUpdate`), rather than after them (a Deployment's spec, then its
    /// selector).
    pub update_rules_first: bool,
}

fn no_causes(_: &Value, _: &mut Vec<Cause>) {}
fn no_update_causes(_: &Value, _: &Value, _: &mut Vec<ReasonedCause>) {}
fn nothing(_: &mut Value) {}
fn nothing_on_update(_: &mut Value, _: &Value) {}

impl Hooks {
    /// A strategy with nothing of its own.
    pub const NONE: Hooks = Hooks {
        validate: no_causes,
        validate_update: no_update_causes,
        prepare_for_create: nothing,
        prepare_for_update: nothing_on_update,
        status_keeps: &[],
        update_rules_first: false,
    };
}

/// Metadata the server owns: never taken from a body.
const SERVER_OWNED: [&str; 8] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The stored object `old` with `body`'s status (none if the body has none).
pub(crate) fn with_status(body: &Value, old: &Value) -> Value {
    let mut obj = old.clone();
    match body.get("status") {
        Some(s) => obj["status"] = s.clone(),
        None => {
            obj.as_object_mut().map(|m| m.remove("status"));
        }
    }
    obj
}

/// A status write as these kinds' status strategies make it (`PrepareForUpdate` of
/// `*StatusStrategy`): the stored object with the body's status, and the body's metadata
/// but for what the server owns and what the strategy keeps (`kept`).
pub(crate) fn status_write(body: &Value, old: &Value, kept: &[&str]) -> Value {
    let mut obj = with_status(body, old);
    let mut meta = body["metadata"].clone();
    if !meta.is_object() {
        meta = json!({});
    }
    for f in SERVER_OWNED.iter().chain(kept) {
        match old["metadata"].get(*f) {
            Some(v) => meta[*f] = v.clone(),
            None => {
                meta.as_object_mut().map(|m| m.remove(*f));
            }
        }
    }
    obj["metadata"] = meta;
    obj
}
