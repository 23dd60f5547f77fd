//! The JSON request bodies of the HTTP APIs are objects. serde reads a struct from an array as
//! well (`["x", {"max_peers": 5}]` fills the fields in order), so without this check a body
//! that is not what the documents describe could still change state. The nested fields of the
//! admin bodies get the same rule from `crate::tenancy::admin::fields`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use repowire_protocol::ErrorCode;

use crate::error::AppError;

/// Largest body read (axum's own default limit for JSON bodies).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Middleware: a `POST`, `PUT` or `PATCH` body that is not empty must start with `{` (after
/// whitespace): anything else is `400 invalid_request`, and a body over [`MAX_BODY_BYTES`]
/// `413 invalid_request`, before the route runs.
pub async fn objects_only(request: Request, next: Next) -> Response {
    if !matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    ) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return AppError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::InvalidRequest,
            format!("the body is larger than {MAX_BODY_BYTES} bytes, or it was cut off"),
        )
        .into_response();
    };
    if let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace())
        && *first != b'{'
    {
        return AppError::bad_request("the body must be a JSON object (`{…}`)").into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
