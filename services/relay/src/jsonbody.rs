//! The JSON request bodies of the HTTP APIs are objects. serde reads a struct from an array as
//! well (`["x", {"max_peers": 5}]` fills the fields in order), so without this check a body
//! that is not what the documents describe could still change state.

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

/// `deserialize_with` for a field that holds an object: serde's own derive would also take
/// an array for it (nested bodies are checked here, the top level by [`objects_only`]).
pub fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    serde_json::from_value(serde_json::Value::Object(map)).map_err(serde::de::Error::custom)
}

/// Like [`object`], for an optional field (`null` is `None`).
pub fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    Option::<serde_json::Map<String, serde_json::Value>>::deserialize(d)?
        .map(|map| serde_json::from_value(serde_json::Value::Object(map)))
        .transpose()
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Inner {
        a: Option<i64>,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Outer {
        #[serde(default, deserialize_with = "super::optional_object")]
        inner: Option<Inner>,
    }

    #[test]
    fn nested_fields_take_objects_and_null_but_not_arrays() {
        let read = |s: &str| serde_json::from_str::<Outer>(s).map(|o| o.inner);
        assert_eq!(
            read(r#"{"inner": {"a": 1}}"#).ok(),
            Some(Some(Inner { a: Some(1) }))
        );
        assert_eq!(read(r#"{"inner": null}"#).ok(), Some(None));
        assert_eq!(read("{}").ok(), Some(None));
        assert!(read(r#"{"inner": [1]}"#).is_err());
        assert!(read(r#"{"inner": [null]}"#).is_err());
    }
}
