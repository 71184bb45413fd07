//! How the control plane answers a request it cannot serve: a status and
//! `{"detail": "…"}` (the reference's shape), and the extractors that turn axum's own
//! rejections — a body that is not JSON, a query that does not fit — into the same.
//!
//! The mapping: a caller's mistake in a value (a malformed ref, an unknown verb) is 400;
//! a thing that does not exist is 404; a body or query that does not have the request's
//! shape is 422 (400 for JSON that does not parse, 413 past the body cap, 415 without a
//! JSON content type, as axum decides them).

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A refusal: its status and the sentence saying what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: String,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self { status, detail: detail.into() }
    }

    /// 400: a value in the request is wrong (the detail names it).
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 404: what the request names does not exist.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 500: the service could not read or write its state (the detail says which).
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, detail)
    }
}

/// The body of every refusal.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Detail {
    /// What was wrong, and what to do about it.
    pub detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(Detail { detail: self.detail })).into_response()
    }
}

/// A JSON request body of type `T`; a body that is not one is an [`ApiError`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

/// A query string of type `T`; one that does not fit is a 422 [`ApiError`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => {
                Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejection.body_text()))
            }
        }
    }
}
