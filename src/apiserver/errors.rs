//! Kubernetes `Status` errors: every rejected request is answered with one.
//!
//! Follows the shapes built by apimachinery's `pkg/api/errors` and written by the apiserver's
//! `responsewriters`: `kind: Status`, `status: Failure`, a machine-readable `reason`, the HTTP
//! `code`, and `details` naming the object. Clients branch on `reason` and `code`, never on the
//! message, so the messages here are this crate's own words.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// A request the server refused, with the `Status` it answers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// The HTTP status code.
    pub code: u16,
    /// The `Status.reason`, e.g. `Conflict`, `AlreadyExists`, `Expired`.
    pub reason: &'static str,
    /// A human-readable explanation.
    pub message: String,
    /// `Status.details`, if the error names an object or fields.
    pub details: Option<Value>,
    /// Seconds for the `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after: Option<u64>,
}

/// A resource named as the apiserver names it in errors: `configmaps`, `crontabs.stable.example.com`.
pub(crate) fn group_resource(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_object(mut self, group: &str, plural: &str, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": group, "kind": plural}));
        self
    }

    /// 400: a malformed body or a bad parameter.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 for a named object that does not exist.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let gr = group_resource(group, plural);
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found"))
            .with_object(group, plural, name)
    }

    /// 404 for a path that names no resource this server serves.
    pub fn no_such_path(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server does not serve a resource at {path}"),
        )
    }

    /// 405 for a verb the resource does not support, with empty details as upstream sends.
    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        let mut e = Self::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {what}"),
        );
        e.details = Some(json!({}));
        e
    }

    /// 403 Forbidden: a rule forbids the request (an admission plugin's refusal).
    pub fn forbidden(group: &str, plural: &str, name: &str, why: String) -> Self {
        let gr = group_resource(group, plural);
        Self::new(
            403,
            "Forbidden",
            format!("{gr} \"{name}\" is forbidden: {why}"),
        )
        .with_object(group, plural, name)
    }

    /// 409 AlreadyExists: create of a name that is taken.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let gr = group_resource(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_object(group, plural, name)
    }

    /// 409 Conflict: an optimistic-concurrency precondition failed.
    pub fn conflict(group: &str, plural: &str, name: &str, why: impl Into<String>) -> Self {
        let gr = group_resource(group, plural);
        Self::new(
            409,
            "Conflict",
            format!(
                "cannot write {gr} \"{name}\": {}; read it again and reapply the change",
                why.into()
            ),
        )
        .with_object(group, plural, name)
    }

    /// 410 Expired: the requested resourceVersion (or continue token) was compacted away.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413: the request body exceeds the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 413 for a request whose effect would be too large (a patch of too many operations, an
    /// object over the size limit).
    pub fn entity_too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 504 Timeout: the request did not complete in time (upstream's request timeout filter).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// 400 for a name in the path that cannot name an object (`Name parameter invalid`).
    pub fn invalid_name_parameter(name: &str, why: &str) -> Self {
        Self::bad_request(format!("the name in the path is invalid: {name:?}: {why}"))
    }

    /// 415: a body or patch type the resource does not accept.
    pub fn unsupported_media_type(what: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the content type {what:?} is not supported here"),
        )
    }

    /// 415 with the reason the content type is refused.
    pub fn unsupported_media_type_because(what: &str, why: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the content type {what:?} is not supported here: {why}"),
        )
    }

    /// 422 without field causes: a request that is well-formed but cannot be carried out
    /// (upstream's generic 422 response, reason `Invalid`).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 422: the object is invalid. `causes` are `(field, message)` pairs.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[(&str, String)]) -> Self {
        Self::invalid_with_reason(group, kind, name, "FieldValueInvalid", causes)
    }

    /// 422 whose causes carry `reason` (`FieldValueForbidden`, `FieldValueNotSupported`, …).
    pub fn invalid_with_reason(
        group: &str,
        kind: &str,
        name: &str,
        reason: &str,
        causes: &[(&str, String)],
    ) -> Self {
        let causes: Vec<(&str, &str, String)> = causes
            .iter()
            .map(|(f, m)| (*f, reason, m.clone()))
            .collect();
        Self::invalid_causes(group, kind, name, &causes)
    }

    /// 422 whose causes each carry their own reason: `(field, reason, message)`.
    pub(crate) fn invalid_causes(
        group: &str,
        kind: &str,
        name: &str,
        causes: &[(&str, &str, String)],
    ) -> Self {
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let text: Vec<String> = causes.iter().map(|(f, _, m)| format!("{f}: {m}")).collect();
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{gk} \"{name}\" is invalid: {}", text.join(", ")),
        );
        let causes: Vec<Value> = causes
            .iter()
            .map(|(f, r, m)| json!({"reason": r, "message": m, "field": f}))
            .collect();
        e.details = Some(json!({"name": name, "group": group, "kind": kind, "causes": causes}));
        e
    }

    /// 500 InternalError for `err`, as upstream's `NewInternalError` words it.
    pub fn internal_cause(err: &str) -> Self {
        let mut e = Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {err}"),
        );
        e.details = Some(json!({"causes": [{"message": err}]}));
        e
    }

    /// 429, from the fault switch.
    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests; try again later",
        );
        e.retry_after = Some(retry_after);
        e.details = Some(json!({"retryAfterSeconds": retry_after}));
        e
    }

    /// 500, from the fault switch.
    pub fn internal(retry_after: u64) -> Self {
        let mut e = Self::new(500, "InternalError", "an injected internal error occurred");
        e.retry_after = Some(retry_after);
        e.details = Some(json!({"retryAfterSeconds": retry_after}));
        e
    }

    /// 500 for a request the storage layer refuses outright.
    pub fn internal_error(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 504 with the cause a reflector recognises: a resourceVersion from the future.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1
        }));
        e
    }

    /// The `Status` object, as JSON.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut resp = (code, body).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(s) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}
