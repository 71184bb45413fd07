//! The control plane: `/api/v1` on `service.host:service.port`, in the service process
//! beside the ingresses (see `docs/control-plane.md`).
//!
//! Layout:
//! - [`routes`]: the one list of route sets. Each is a `Router<ApiState>` from its own
//!   module; a new set (the agent's `sessions/reply` and `sessions/link-pr`, the MCP
//!   endpoint at `/mcp`) is merged there and gets the guards below for free.
//! - `guard`: the exposure rule (loopback `Host`, bearer token), the `Origin` check on
//!   state-changing requests, CORS and the `api.request` audit line.
//! - `error`: [`ApiError`] (`{"detail": …}` with 400/404/422…) and the [`Body`] /
//!   [`Params`] extractors that answer with it.
//! - `health`: `GET /api/v1/health`.
//! - `work_items`: the portable records and the "Needs you" list (`attention`).
//! - `sessions`: the session records, transcripts, and the operator's levers.
//! - `observe`: the event log (`events`, `events/types`), `explain`, `daemons`.
//! - `graph`: the process graph of a work item in a checkout (`graph`, `graph/check`,
//!   `graph/complete`, `graph/advance`), through the dispatcher's graph verbs.
//! - `settings`: the config in force and its schema.
//! - `stream`: `GET /api/v1/stream`, the event log as Server-Sent Events.
//! - `agent`: `POST /api/v1/sessions/reply` and `POST /api/v1/sessions/link-pr`.
//! - `dashboard`: the page at `/` and its embedded scripts, a client of the routes above.
//! - `/mcp` (unless `service.mcp.enabled: false`): [`crate::mcp`]'s server, behind the
//!   same guards and its own DNS-rebinding check.
//!
//! [`serve`] runs the app on a bound listener until its shutdown resolves; the app is
//! built by the first request (`OnFirstRequest`), so an idle service never holds it. What may not
//! start at all — beyond loopback without a token — is [`misconfigurations`], asked by
//! the service's preflight. It decides nothing about work items: routes read the store
//! and act through the dispatcher, exactly as the CLI's verbs do.

mod agent;
mod dashboard;
mod error;
mod graph;
mod guard;
mod health;
mod observe;
pub mod openapi;
mod sessions;
mod settings;
mod stream;
mod transcript_watch;
mod work_items;

use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::Response;
use axum::routing::future::RouteFuture;
use axum::{Extension, Router, ServiceExt};
use loop_core::config::ServiceConfig;
use loop_core::log::{Kind, Line};
use loop_store::{EventLog, StateStore};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tower_service::Service;
use utoipa_axum::router::OpenApiRouter;

pub use error::{ApiError, Body, Params};
pub use guard::ApiToken;
pub use stream::Hub as StreamHub;

use crate::dispatcher::Dispatcher;
use crate::live_config::LiveConfig;

/// The health route: never audited, never behind the token (liveness probes).
pub const HEALTH: &str = "/api/v1/health";

/// The largest request body a route reads (its JSON bodies are a few hundred bytes).
pub const BODY_LIMIT: usize = 64 * 1024;

/// What every route reads and acts through. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ApiState {
    /// The config in force (hot-reloaded; the control plane's own keys are boot-time).
    pub config: LiveConfig,
    /// The state root: portable and local records, ledgers.
    pub store: StateStore,
    /// The process's event log, as source `api`.
    pub events: EventLog,
    /// What the operator's verbs act through, as the CLI's do.
    pub dispatcher: Dispatcher,
    /// Claude Code's `projects/` directory, where session transcripts are.
    pub claude_projects: PathBuf,
    /// The sessions' tokens and cost, read on from their transcripts.
    pub usage: crate::usage::UsageBook,
    /// The one tail of the event log `GET /api/v1/stream`'s subscribers share.
    pub stream: StreamHub,
}

/// Every route set of the control plane, over [`ApiState`], each route with its OpenAPI
/// description (see [`openapi`]); add a new set here.
pub fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .merge(health::routes())
        .merge(agent::routes())
        .merge(work_items::routes())
        .merge(graph::routes())
        .merge(sessions::routes())
        .merge(observe::routes())
        .merge(settings::routes())
        .merge(stream::routes())
        .merge(openapi::routes())
        // Pages, not API routes: served, and not in the OpenAPI document.
        .merge(OpenApiRouter::from(dashboard::routes()))
}

/// The work item `text` names; a malformed ref is a 400 saying why (the error names
/// the text).
pub fn work_item(text: &str) -> Result<loop_core::WorkItemRef, ApiError> {
    text.trim()
        .parse()
        .map_err(|err: loop_core::refs::RefError| ApiError::bad_request(err.to_string()))
}

/// Runs a read of the state root off the runtime's threads; a failure is a 500 naming it.
pub async fn read<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, loop_store::StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    crate::dispatcher::blocking(f)
        .await
        .map_err(|err| ApiError::internal(format!("cannot read the state: {err}")))
}

/// Why the control plane `service` describes cannot start with `token`.
pub fn misconfigurations(service: &ServiceConfig, token: Option<&ApiToken>) -> Vec<ApiRefusal> {
    let mut found = Vec::new();
    if service.enabled && !service.is_loopback() && token.is_none() {
        found.push(ApiRefusal::ExposedWithoutToken {
            host: service.host.clone(),
            env: service.token_env.clone(),
        });
    }
    found
}

/// Why the control plane may not start.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiRefusal {
    #[error(
        "the control plane would listen on `{host}`, beyond loopback, without a token: the variable `{env}` is empty or missing"
    )]
    ExposedWithoutToken { host: String, env: String },
}

impl loop_core::Hint for ApiRefusal {
    fn hint(&self) -> Option<String> {
        match self {
            Self::ExposedWithoutToken { env, .. } => Some(format!(
                "export `{env}` with a long random token (clients send `Authorization: Bearer <token>`), or set `service.host: 127.0.0.1`"
            )),
        }
    }
}

/// The whole app: [`routes`] with the state, and `/mcp`, behind the guards.
fn app(
    state: ApiState,
    service: &ServiceConfig,
    token: Option<ApiToken>,
    local: std::net::SocketAddr,
    mcp_stop: tokio_util::sync::CancellationToken,
) -> Router {
    let access = Arc::new(guard::Access {
        token,
        loopback: service.is_loopback(),
        origins: service.cors.allow_origins.iter().filter(|o| *o != "*").cloned().collect(),
        events: state.events.clone(),
    });
    let (mut routes, collected) = routes().split_for_parts();
    let document = openapi::document(collected, service.mcp.enabled);
    // A document of plain maps and strings always renders.
    let document = serde_json::to_string(&document).unwrap_or_default();
    if service.mcp.enabled {
        let hosts = [service.host.as_str(), "localhost", "127.0.0.1", "::1", "[::1]"];
        let own = format!("http://{}", local);
        let origins = std::iter::once(own)
            .chain(service.cors.allow_origins.iter().filter(|o| *o != "*").cloned())
            .collect();
        let mcp = crate::mcp::service(
            state.dispatcher.clone(),
            state.usage.clone(),
            hosts.iter().map(|host| (*host).to_owned()).collect(),
            origins,
            mcp_stop,
        );
        routes = routes.route_service(openapi::MCP, mcp);
    }
    let app = routes
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this route")
        })
        .with_state(state)
        .layer(Extension(openapi::Rendered(Arc::new(document))))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(Arc::clone(&access), guard::admit))
        .layer(middleware::from_fn_with_state(access, guard::audit));
    match guard::cors_layer(&service.cors) {
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// The app, built when the first request comes rather than at start: a service nobody
/// asks never builds the route table, the OpenAPI document (50 KB, rendered from every
/// route's description) or the MCP server, and an idle one keeps ~3 MB less resident
/// (docs/performance.md "Idle"). Building is pure and takes a few milliseconds.
#[derive(Clone)]
struct OnFirstRequest(Arc<LazyLock<Router, Box<dyn FnOnce() -> Router + Send>>>);

impl OnFirstRequest {
    fn new(build: impl FnOnce() -> Router + Send + 'static) -> Self {
        Self(Arc::new(LazyLock::new(Box::new(build))))
    }
}

impl std::fmt::Debug for OnFirstRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnFirstRequest")
    }
}

impl Service<Request> for OnFirstRequest {
    type Response = Response;
    type Error = Infallible;
    type Future = RouteFuture<Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Router::clone(&self.0).call(request)
    }
}

/// How long the requests in flight may take to finish once the control plane stops.
const GRACE: Duration = Duration::from_secs(2);

/// Serves the control plane on `listener` until `shutdown` resolves, then gives the
/// requests in flight [`GRACE`] to finish (the stream's subscribers end at once);
/// `api.started` and `api.stopped` bracket it.
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    token: Option<ApiToken>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let service = state.config.current().service.clone();
    let events = state.events.clone();
    let stream = state.stream.clone();
    let local = listener.local_addr()?;
    events.emit(
        Line::info(Kind::ApiStarted)
            .field("host", local.ip().to_string())
            .field("port", local.port())
            .field("token", token.is_some()),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let mcp_stop = tokio_util::sync::CancellationToken::new();
    let built = mcp_stop.clone();
    let app = OnFirstRequest::new(move || app(state, &service, token, local, built));
    let mut server = tokio::spawn(
        axum::serve(listener, app.into_make_service())
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let served = tokio::select! {
        () = shutdown => {
            mcp_stop.cancel();
            stream.stop();
            let _ = stop.send(());
            match tokio::time::timeout(GRACE, &mut server).await {
                Ok(done) => done,
                Err(_) => {
                    server.abort();
                    Ok(Ok(()))
                }
            }
        }
        served = &mut server => served,
    };
    events.emit(
        Line::info(Kind::ApiStopped)
            .field("host", local.ip().to_string())
            .field("port", local.port()),
    );
    served.unwrap_or_else(|join| Err(std::io::Error::other(join)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::routing::get;

    use super::*;

    #[tokio::test]
    async fn the_app_is_built_by_the_first_request_once_and_shared_by_its_clones() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&builds);
        let app = OnFirstRequest::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Router::new().route("/", get(|| async { "built" }))
        });
        assert_eq!(builds.load(Ordering::SeqCst), 0, "built before any request");
        for mut clone in [app.clone(), app] {
            let Ok(response) = clone.call(Request::new(Body::empty())).await;
            assert_eq!(response.status(), StatusCode::OK);
        }
        assert_eq!(builds.load(Ordering::SeqCst), 1, "built once for both requests");
    }
}
