//! HTTP errors: one type, one JSON shape, 4xx says why, 5xx says nothing internal.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use repowire_protocol::ErrorCode;
use repowire_protocol::http::{HttpError, HttpErrorBody};

use crate::storage::store::StoreError;

/// An HTTP error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppError {
    /// Status.
    pub status: StatusCode,
    /// Code.
    pub code: ErrorCode,
    /// Message shown to the caller.
    pub message: String,
    /// When to retry (the `Retry-After` header, in whole seconds rounded up).
    pub retry_after: Option<std::time::Duration>,
}

impl AppError {
    /// Any error.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    /// With a `Retry-After` header.
    pub fn with_retry_after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }
    /// 401.
    pub fn unauthorized(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }
    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
    }
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(message) => {
                Self::new(StatusCode::CONFLICT, ErrorCode::Conflict, message)
            }
            other => {
                tracing::error!(error = %other, "storage failure in an HTTP request");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::Unavailable,
                    "storage is unavailable; retry later",
                )
                .with_retry_after(std::time::Duration::from_secs(1))
            }
        }
    }
}

impl From<crate::cluster::bus::BusError> for AppError {
    fn from(e: crate::cluster::bus::BusError) -> Self {
        tracing::error!(error = %e, "bus failure in an HTTP request");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            "the relay's bus is unavailable; retry later",
        )
        .with_retry_after(std::time::Duration::from_secs(1))
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let message = if self.status.is_server_error() && self.code == ErrorCode::Internal {
            "internal error".to_owned()
        } else {
            self.message
        };
        let mut response = (
            self.status,
            Json(HttpError {
                error: HttpErrorBody {
                    code: self.code,
                    message,
                },
            }),
        )
            .into_response();
        if let Some(wait) = self.retry_after {
            // Whole seconds, rounded up: a client that waits that long is let in.
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs.max(1)),
            );
        }
        // Read by the metrics middleware to count errors by code.
        response.extensions_mut().insert(self.code);
        response
    }
}
