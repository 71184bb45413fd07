//! The one handler behind every GitHub path: GitHub's own refusals (no `User-Agent`, an
//! unknown API version, no token), injected faults, the rate limit, then the endpoint's
//! answer with `ETag`, `Link` and `x-ratelimit-*` headers; every request is recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::graphql;
use crate::request_log::RequestRecord;

use super::rest::rest;
use super::route::{Route, by_name, route};
use super::{Bucket, FaultKind, Reply, SimState, lock};

/// The `X-GitHub-Api-Version`s GitHub accepts; any other is refused with 400, as GitHub
/// does.
const API_VERSIONS: [&str; 2] = ["2022-11-28", "2026-03-10"];

/// The one handler behind every GitHub path.
pub(super) async fn github(State(state): State<Arc<SimState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query: BTreeMap<String, String> =
        Query::try_from_uri(&parts.uri).map(|Query(q)| q).unwrap_or_default();
    let body = axum::body::to_bytes(body, 25 * 1024 * 1024).await.unwrap_or_default();
    let method = parts.method.clone();
    let routed = route(&method, &by_name(&state, &path));
    let endpoint = routed.as_ref().map_or(path.clone(), |r| r.endpoint.to_owned());
    let response = answer(&state, &parts.headers, &method, &path, &query, &body, routed).await;
    let header =
        |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    lock(&state.log).records.push(RequestRecord {
        method: method.to_string(),
        endpoint,
        path,
        query,
        status: response.status().as_u16(),
        api_version: header("x-github-api-version"),
        accept: header("accept"),
    });
    response
}

async fn answer(
    state: &SimState,
    headers: &HeaderMap,
    method: &Method,
    path: &str,
    query: &BTreeMap<String, String>,
    body: &Bytes,
    routed: Option<Route>,
) -> Response {
    if !headers.contains_key(header::USER_AGENT) {
        return finish(
            state,
            None,
            Reply::error(
                StatusCode::FORBIDDEN,
                "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required).",
            ),
            false,
        );
    }
    let version = headers.get("x-github-api-version").and_then(|v| v.to_str().ok());
    if version.is_some_and(|v| !API_VERSIONS.contains(&v)) {
        let message = format!("Invalid API version: {}", version.unwrap_or_default());
        return finish(state, None, Reply::error(StatusCode::BAD_REQUEST, &message), false);
    }
    let Some(route) = routed else {
        return finish(state, None, Reply::error(StatusCode::NOT_FOUND, "Not Found"), false);
    };
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split_once(' ').is_some_and(|(_, token)| !token.trim().is_empty()));
    if !authorized {
        return finish(
            state,
            Some(&route),
            Reply::error(StatusCode::UNAUTHORIZED, "Requires authentication"),
            false,
        );
    }
    if let Some(fault) = take_fault(state, path) {
        match fault {
            FaultKind::Latency { millis } => {
                tokio::time::sleep(Duration::from_millis(millis)).await
            }
            FaultKind::ServerError { status } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                return finish(state, Some(&route), Reply::error(status, "Server Error"), false);
            }
            FaultKind::SecondaryRateLimit { retry_after } => {
                let mut response = finish(
                    state,
                    Some(&route),
                    Reply::error(
                        StatusCode::FORBIDDEN,
                        "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                    ),
                    false,
                );
                if let Some(seconds) = retry_after {
                    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
                }
                return response;
            }
            FaultKind::NotFound => {
                return finish(
                    state,
                    Some(&route),
                    Reply::error(StatusCode::NOT_FOUND, "Not Found"),
                    false,
                );
            }
            FaultKind::Unauthorized => {
                return finish(
                    state,
                    Some(&route),
                    Reply::error(StatusCode::UNAUTHORIZED, "Bad credentials"),
                    false,
                );
            }
            FaultKind::GraphqlError { message } => {
                let answer = json!({ "data": null, "errors": [{ "message": message }] });
                return finish(state, Some(&route), Reply::ok(answer), false);
            }
            FaultKind::Malformed => {
                let mut response = (StatusCode::OK, "{\"id\": 1, \"title\": ").into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json; charset=utf-8"),
                );
                return response;
            }
        }
    }
    if rate_limit_spent(state, route.resource) {
        let reply = Reply::error(
            StatusCode::FORBIDDEN,
            "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.",
        );
        return finish(state, Some(&route), reply, false);
    }
    let reply = if route.resource == "graphql" {
        match serde_json::from_slice::<Value>(body) {
            Ok(request) => {
                lock(&state.graphql_requests).push(request.clone());
                let mut world = lock(&state.world);
                let viewer = state.settings.viewer.clone();
                Reply::ok(graphql::answer(
                    &mut world,
                    state.now(),
                    &viewer,
                    &state.urls(""),
                    &request,
                ))
            }
            Err(_) => Reply::error(StatusCode::BAD_REQUEST, "Problems parsing JSON"),
        }
    } else {
        rest(state, method, &route, query, body)
    };
    let etag = (*method == Method::GET && reply.status == StatusCode::OK).then(|| etag_of(&reply));
    let not_modified = etag.as_ref().is_some_and(|etag| {
        headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|candidate| candidate.trim() == etag))
    });
    if not_modified {
        let mut response = finish(
            state,
            Some(&route),
            Reply {
                status: StatusCode::NOT_MODIFIED,
                body: Value::Null,
                link: reply.link,
                location: None,
            },
            false,
        );
        if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
            response.headers_mut().insert(header::ETAG, etag);
        }
        return response;
    }
    let mut response = finish(state, Some(&route), reply, true);
    if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    response
}

/// The next fault for `path`, used up by one.
fn take_fault(state: &SimState, path: &str) -> Option<FaultKind> {
    let mut faults = lock(&state.faults);
    let index =
        faults.iter().position(|f| f.path_contains.as_deref().is_none_or(|p| path.contains(p)))?;
    let fault = faults.get_mut(index)?;
    let kind = fault.kind.clone();
    fault.times = fault.times.saturating_sub(1);
    if fault.times == 0 {
        faults.remove(index);
    }
    Some(kind)
}

fn rate_limit_spent(state: &SimState, resource: &'static str) -> bool {
    let now = state.now();
    let mut buckets = lock(&state.buckets);
    let Some(bucket) = buckets.get_mut(resource) else { return false };
    if now.as_second() >= bucket.reset {
        *bucket = Bucket::fresh(bucket.limit, now);
    }
    bucket.used >= bucket.limit
}

fn etag_of(reply: &Reply) -> String {
    let mut hasher = Sha256::new();
    hasher.update(reply.body.to_string().as_bytes());
    hasher.update(reply.link.as_deref().unwrap_or("").as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("W/\"{hex}\"")
}

/// Adds GitHub's headers; `counts` spends one request of the rate limit.
fn finish(state: &SimState, route: Option<&Route>, reply: Reply, counts: bool) -> Response {
    let resource = route.map_or("core", |r| r.resource);
    let bucket = {
        let mut buckets = lock(&state.buckets);
        buckets.get_mut(resource).map(|bucket| {
            if counts {
                bucket.used += 1;
            }
            *bucket
        })
    };
    let mut response = if matches!(reply.status, StatusCode::NOT_MODIFIED | StatusCode::FOUND) {
        Response::builder().status(reply.status).body(Body::empty()).unwrap_or_default()
    } else {
        (reply.status, axum::Json(reply.body)).into_response()
    };
    let headers = response.headers_mut();
    if let Some(bucket) = bucket {
        headers.insert("x-ratelimit-limit", HeaderValue::from(bucket.limit));
        headers.insert(
            "x-ratelimit-remaining",
            HeaderValue::from(bucket.limit.saturating_sub(bucket.used)),
        );
        headers.insert("x-ratelimit-used", HeaderValue::from(bucket.used));
        headers.insert("x-ratelimit-reset", HeaderValue::from(bucket.reset));
        headers.insert("x-ratelimit-resource", HeaderValue::from_static(resource));
    }
    headers.insert("x-github-api-version-selected", HeaderValue::from_static("2022-11-28"));
    headers.insert("x-github-media-type", HeaderValue::from_static("github.v3; format=json"));
    if let Some(location) = reply.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, location);
    }
    if let Some(link) = reply.link.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LINK, link);
    }
    response
}
