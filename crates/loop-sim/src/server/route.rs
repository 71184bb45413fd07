//! Which endpoint a request is for: its path matched against the OpenAPI templates the
//! client uses (github.com and Enterprise layouts), with its parameters.

use axum::http::Method;

use super::{SimState, lock};

/// A request routed to one of the endpoints: its OpenAPI template and parameters.
pub(super) struct Route {
    pub(super) endpoint: &'static str,
    pub(super) resource: &'static str,
    pub(super) repo: String,
    pub(super) number: u64,
    /// The `{name}` of a label path, percent-decoded; empty elsewhere.
    pub(super) label: String,
    /// The URL prefix of the layout (`""` or `/api/v3`).
    pub(super) prefix: &'static str,
}

pub(super) fn route(method: &Method, path: &str) -> Option<Route> {
    let (prefix, rest) = match path.strip_prefix("/api/v3") {
        Some(rest) => ("/api/v3", rest),
        None => ("", path),
    };
    if *method == Method::POST && (path == "/graphql" || path == "/api/graphql") {
        return Some(Route {
            endpoint: "/graphql",
            resource: "graphql",
            repo: String::new(),
            number: 0,
            label: String::new(),
            prefix: "",
        });
    }
    let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let ["repos", owner, name, tail @ ..] = segments.as_slice() else { return None };
    let repo = format!("{owner}/{name}");
    let num = |s: &str| s.parse::<u64>().ok().filter(|n| *n > 0);
    let label = match tail {
        ["issues", _, "labels", name] => percent_decoded(name)?,
        _ => String::new(),
    };
    let (endpoint, number) = match (method.as_str(), tail) {
        ("GET", ["issues"]) => ("/repos/{owner}/{repo}/issues", 0),
        ("GET", ["issues", n]) => ("/repos/{owner}/{repo}/issues/{issue_number}", num(n)?),
        ("GET", ["issues", n, "comments"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/comments", num(n)?)
        }
        ("POST", ["issues", n, "comments"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/comments", num(n)?)
        }
        ("POST", ["issues", n, "labels"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/labels", num(n)?)
        }
        ("DELETE", ["issues", n, "labels", _]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", num(n)?)
        }
        ("PATCH", ["issues", "comments", id]) => {
            ("/repos/{owner}/{repo}/issues/comments/{comment_id}", num(id)?)
        }
        ("POST", ["issues", "comments", id, "reactions"]) => {
            ("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", num(id)?)
        }
        ("POST", ["issues", n, "reactions"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/reactions", num(n)?)
        }
        ("POST", ["pulls", "comments", id, "reactions"]) => {
            ("/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions", num(id)?)
        }
        ("GET", ["pulls"]) => ("/repos/{owner}/{repo}/pulls", 0),
        ("GET", ["pulls", n]) => ("/repos/{owner}/{repo}/pulls/{pull_number}", num(n)?),
        ("GET", ["pulls", n, "reviews"]) => {
            ("/repos/{owner}/{repo}/pulls/{pull_number}/reviews", num(n)?)
        }
        ("GET", ["pulls", n, "comments"]) => {
            ("/repos/{owner}/{repo}/pulls/{pull_number}/comments", num(n)?)
        }
        ("GET", ["actions", "runs", id, "jobs"]) => {
            ("/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", num(id)?)
        }
        ("GET", ["actions", "jobs", id, "logs"]) => {
            ("/repos/{owner}/{repo}/actions/jobs/{job_id}/logs", num(id)?)
        }
        ("GET", ["check-runs", id, "annotations"]) => {
            ("/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations", num(id)?)
        }
        _ => return None,
    };
    Some(Route { endpoint, resource: "core", repo, number, label, prefix })
}

/// A path segment with its `%XX` escapes decoded; `None` when they are not UTF-8 or
/// malformed.
fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = segment.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `path` with a `/repositories/{id}` prefix — the form GitHub's `Link` headers use —
/// turned into the `/repos/{owner}/{repo}` form its routes are written in.
pub(super) fn by_name(state: &SimState, path: &str) -> String {
    let (prefix, rest) = path.split_at(if path.starts_with("/api/v3/") { 7 } else { 0 });
    let Some((id, tail)) = rest.strip_prefix("/repositories/").and_then(|r| r.split_once('/'))
    else {
        return path.to_owned();
    };
    let world = lock(&state.world);
    let Some(repo) = id.parse().ok().and_then(|id: u64| world.repos.values().find(|r| r.id == id))
    else {
        return path.to_owned();
    };
    format!("{prefix}/repos/{}/{tail}", repo.full_name())
}
