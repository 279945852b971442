//! A JSON response, as kube-apiserver writes every API answer (`Content-Type:
//! application/json`): the one helper both the write and the read handlers use.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// `body` as a JSON response with status `code`.
pub(super) fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut r = (code, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
