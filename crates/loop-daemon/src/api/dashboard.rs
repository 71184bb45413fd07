//! The dashboard: a page and its scripts at `/` and `/assets/…`, written by hand (HTML,
//! CSS and JavaScript modules, no bundler, nothing fetched from elsewhere) and embedded
//! in the binary, so `cargo build` needs no Node toolchain. It is a client of `/api/v1`
//! like any other (see `docs/control-plane.md`, "The dashboard").
//!
//! The assets hold no secret and no state, so they are served without the token — a
//! browser cannot send one on a page load; the page asks for it when the API answers
//! 401. The `Host` check still applies. Every answer carries a strict
//! Content-Security-Policy: only this origin's scripts, styles, images and API, no
//! inline script, no framing.

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::ApiState;

/// What a page of the dashboard may load and do.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                      connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: where it is served, its type, its bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The bytes of `dashboard/<file>` in this crate.
macro_rules! embedded {
    ($file:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/dashboard/", $file))
    };
}

/// `dashboard/<file>`, served at `/assets/<file>` as `$type`.
macro_rules! asset {
    ($file:literal, $type:expr) => {
        Asset { path: concat!("/assets/", $file), content_type: $type, body: embedded!($file) }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the dashboard.
static ASSETS: &[Asset] = &[
    Asset { path: "/", content_type: "text/html; charset=utf-8", body: embedded!("index.html") },
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("live.js", JS),
    asset!("model.js", JS),
    asset!("board.js", JS),
    asset!("item.js", JS),
];

/// Whether `path` is one of the dashboard's files (served without the token).
pub(super) fn is_asset(path: &str) -> bool {
    ASSETS.iter().any(|asset| asset.path == path)
}

pub(super) fn routes() -> Router<ApiState> {
    ASSETS.iter().fold(Router::new(), |router, asset| {
        router.route(asset.path, get(move || async move { serve(asset) }))
    })
}

fn serve(asset: &'static Asset) -> Response {
    let headers = [
        (CONTENT_TYPE, HeaderValue::from_static(asset.content_type)),
        (CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY)),
        // The files change with the binary: a browser asks again on each load.
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ];
    (headers, asset.body).into_response()
}
