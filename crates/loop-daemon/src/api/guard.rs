//! Who may use the control plane, decided before any route runs (SPEC §1, reference
//! §1.3 hardened).
//!
//! - **Host** (bound to loopback): the `Host` header must name loopback — `localhost`,
//!   `127.0.0.0/8` or `[::1]` — so a page that rebinds its own domain to 127.0.0.1 is
//!   refused (403) even though the browser thinks it talks to itself.
//! - **Origin** on a state-changing request (any method but GET, HEAD, OPTIONS): a
//!   browser names the page that sends it; only the service's own origin and the exact
//!   origins of `service.cors.allowOrigins` (not `*`) may act (403 otherwise), so no web
//!   page can drive the machine. Requests without an `Origin` (curl, the CLI, agents)
//!   are not a browser's and pass.
//! - **Token**: when the variable `service.tokenEnv` names is set — which binding beyond
//!   loopback requires — every route but health and the dashboard's files needs
//!   `Authorization: Bearer <token>`, compared in constant time (401 with
//!   `WWW-Authenticate: Bearer` otherwise).
//! - **CORS** (`service.cors`): exact origins, answered by tower-http's layer; an empty
//!   list installs none.
//!
//! It also writes the `api.request` line of every `/api/` request but health and
//! preflights, refusals included.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use loop_core::config::{CorsConfig, is_loopback_host};
use loop_core::log::{Kind, Line};
use loop_store::EventLog;
use sha2::{Digest, Sha256};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::HEALTH;
use super::error::ApiError;

/// The bearer token clients must send (the value of the variable `service.tokenEnv`
/// names). Never printed.
#[derive(Clone)]
pub struct ApiToken(Arc<[u8; 32]>);

impl ApiToken {
    /// `None` for an unset or empty value: no token.
    pub fn from_value(value: Option<&str>) -> Option<Self> {
        value.filter(|v| !v.is_empty()).map(|v| Self(Arc::new(Sha256::digest(v).into())))
    }

    /// Whether `offered` is the token. Both sides are hashed first, so the comparison
    /// takes the same time whatever the offered value's length or content.
    fn admits(&self, offered: &[u8]) -> bool {
        let offered: [u8; 32] = Sha256::digest(offered).into();
        self.0.iter().zip(offered).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// The rules of one running control plane (boot-time config: a change needs a restart).
#[derive(Debug, Clone)]
pub(super) struct Access {
    pub(super) token: Option<ApiToken>,
    /// Bound to loopback: the `Host` must name loopback.
    pub(super) loopback: bool,
    /// The exact origins that may act besides the service's own (`*` is not one).
    pub(super) origins: Arc<[String]>,
    pub(super) events: EventLog,
}

impl Access {
    /// Why `request` may not go on, if it may not.
    fn refusal(&self, request: &Request) -> Option<Response> {
        let headers = request.headers();
        let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if self.loopback && !is_loopback_host(hostname(host)) {
            return Some(
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "`Host: {host}` is not this service: it answers requests addressed to localhost, 127.0.0.1 or [::1] only"
                    ),
                )
                .into_response(),
            );
        }
        let safe = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
        if !safe && let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let own = [format!("http://{host}"), format!("https://{host}")];
            if !own.iter().any(|o| o == origin) && !self.origins.iter().any(|o| o == origin) {
                return Some(
                    ApiError::new(
                        StatusCode::FORBIDDEN,
                        format!(
                            "cross-origin `{}` refused: the page at `{origin}` may not act on this machine; list its exact origin in `service.cors.allowOrigins` to let it",
                            request.method()
                        ),
                    )
                    .into_response(),
                );
            }
        }
        let path = request.uri().path();
        if let Some(token) = &self.token
            && path != HEALTH
            && !super::dashboard::is_asset(path)
        {
            let offered = headers
                .get(AUTHORIZATION)
                .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "));
            if !offered.is_some_and(|offered| token.admits(offered)) {
                let mut answer = ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is required: send `Authorization: Bearer <token>` with the value of the variable `service.tokenEnv` names",
                )
                .into_response();
                answer.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return Some(answer);
            }
        }
        None
    }
}

/// `host` of `host[:port]` (an IPv6 address keeps its brackets).
fn hostname(authority: &str) -> &str {
    match authority.rfind(':') {
        Some(colon) if !authority[colon..].contains(']') => &authority[..colon],
        _ => authority,
    }
}

/// Refuses what [`Access`] refuses; everything else goes on.
pub(super) async fn admit(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    match access.refusal(&request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// Writes `api.request` (`method`, `path`, `status`) for every `/api/` request but
/// health and CORS preflights (those are answered before this runs).
pub(super) async fn audit(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if path.starts_with("/api/") && path != HEALTH {
        access.events.emit(
            Line::info(Kind::ApiRequest)
                .field("method", method.as_str())
                .field("path", path)
                .field("status", response.status().as_u16()),
        );
    }
    response
}

/// The CORS layer `cors` describes; `None` when it lists no origin.
pub(super) fn cors_layer(cors: &CorsConfig) -> Option<CorsLayer> {
    if cors.allow_origins.is_empty() {
        return None;
    }
    // The config admitted only origins and HTTP tokens, so every entry parses.
    let origin = if cors.allow_origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(cors.allow_origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    let methods: Vec<Method> =
        cors.allow_methods.iter().filter_map(|m| Method::from_bytes(m.as_bytes()).ok()).collect();
    let headers: Vec<HeaderName> = cors
        .allow_headers
        .iter()
        .filter_map(|h| HeaderName::from_bytes(h.as_bytes()).ok())
        .collect();
    Some(
        CorsLayer::new()
            .allow_origin(origin)
            .allow_methods(methods)
            .allow_headers(headers)
            .allow_credentials(cors.allow_credentials)
            .allow_private_network(cors.allow_private_network),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_admits_itself_only() {
        let token = ApiToken::from_value(Some("s3cret")).unwrap();
        assert!(token.admits(b"s3cret"));
        assert!(!token.admits(b"s3cre"));
        assert!(!token.admits(b""));
        assert!(ApiToken::from_value(Some("")).is_none());
        assert_eq!(format!("{token:?}"), "ApiToken(<redacted>)");
    }

    #[test]
    fn the_hostname_drops_the_port_and_keeps_ipv6_brackets() {
        assert_eq!(hostname("127.0.0.1:4114"), "127.0.0.1");
        assert_eq!(hostname("localhost"), "localhost");
        assert_eq!(hostname("[::1]:4114"), "[::1]");
        assert_eq!(hostname("[::1]"), "[::1]");
        assert_eq!(hostname("evil.example:4114"), "evil.example");
    }
}
