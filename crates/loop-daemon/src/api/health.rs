//! `GET /api/v1/health`: `{status: "ok", version}` — what a probe (or the dashboard's
//! "is it up?") asks; never audited, never behind the token.

use axum::Json;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ApiState;

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(health))
}

/// The service answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct Health {
    /// Always `ok`.
    status: &'static str,
    /// This build's version.
    version: &'static str,
}

/// Whether the control plane is up.
#[utoipa::path(get, path = "/api/v1/health", tag = "health",
    responses((status = 200, description = "Up", body = Health)))]
async fn health() -> Json<Health> {
    Json(Health { status: "ok", version: env!("CARGO_PKG_VERSION") })
}
