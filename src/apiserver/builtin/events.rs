//! `events.k8s.io/v1` Events (kubernetes v1.37.2 `pkg/registry/core/event`, which serves
//! both groups, and `pkg/apis/core/validation/events.go`): validated as upstream validates an
//! event written through this group (after its conversion to the core type, so the causes
//! name the core fields: `involvedObject`, `reportingComponent`).
//!
//! # Differences from upstream
//! - Its own resource here, not the core Events' storage seen through another group (see the
//!   module above).

use k8s_openapi::api::events::v1::Event;
use serde_json::{Value, json};

use super::super::kinds::Kind;
use super::shared::{defaulted, not_supported, required};
use crate::apiserver::schema::Cause;
use crate::apiserver::strategy::Hooks;

pub(super) fn kinds() -> Vec<Kind> {
    vec![Kind {
        hooks: Some(&EVENT),
        ..Kind::base("events.k8s.io", "Event", "events", &["ev"], |v| {
            defaulted::<Event>(v, |e| {
                for f in [
                    "eventTime",
                    "deprecatedFirstTimestamp",
                    "deprecatedLastTimestamp",
                ] {
                    if e.get(f).is_none() {
                        e[f] = Value::Null;
                    }
                }
                super::shared::or_default(e, "deprecatedSource", json!({}));
            })
        })
    }]
}

static EVENT: Hooks = Hooks {
    validate: validate_event,
    ..Hooks::NONE
};

/// `ValidateEventCreate` for an event with an `eventTime` (every `events.k8s.io` event):
/// unlike a core/v1 event's, the object it is about may be in another namespace. Go's
/// `events/v1.Event` sends the deprecated timestamps (null) and source (`{}`) always.
fn validate_event(e: &Value, causes: &mut Vec<Cause>) {
    if e["eventTime"].is_null() {
        causes.push(required("eventTime"));
    }
    for (field, core) in [
        ("reportingController", "reportingComponent"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
    ] {
        if e[field].as_str().is_none_or(str::is_empty) {
            causes.push(required(core));
        }
    }
    let ty = &e["type"];
    if !matches!(ty.as_str(), Some("Normal" | "Warning")) {
        causes.push(not_supported("type", ty, &["Normal", "Warning"]));
    }
}
