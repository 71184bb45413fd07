//! The REST reads: listings of issues, pull requests, comments, reviews, jobs and
//! annotations, with GitHub's filters and `Link` pagination.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::shapes::{self, Urls};
use crate::world::{Repo, World, WorldError};

use super::Reply;
use super::route::Route;

pub(super) fn read(
    world: &World,
    urls: &Urls,
    route: &Route,
    query: &BTreeMap<String, String>,
) -> Result<Reply, WorldError> {
    let repo = world.repo(&route.repo)?;
    let n = route.number;
    let on_issues = route.endpoint.starts_with("/repos/{owner}/{repo}/issues");
    let is_pull = repo.items.get(&n).is_some_and(|i| i.pull.is_some());
    if on_issues && !repo.has_issues && !is_pull {
        return Ok(Reply::error(StatusCode::GONE, "Issues are disabled for this repo"));
    }
    match route.endpoint {
        "/repos/{owner}/{repo}/issues" => {
            let state = query.get("state").map_or("open", String::as_str);
            let wanted: Vec<String> = query
                .get("labels")
                .map(|l| {
                    l.split(',')
                        .map(|s| s.trim().to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let mut items: Vec<&crate::world::Item> = repo
                .items
                .values()
                .filter(|i| match state {
                    "all" => true,
                    "closed" => !i.open,
                    _ => i.open,
                })
                .filter(|i| {
                    wanted.iter().all(|w| i.labels.iter().any(|l| l.eq_ignore_ascii_case(w)))
                })
                .collect();
            // GitHub's defaults: sort=created, direction=desc.
            match query.get("sort").map(String::as_str) {
                Some("updated") => items.sort_by_key(|i| (i.updated_at, i.number)),
                _ => items.sort_by_key(|i| (i.created_at, i.number)),
            }
            if query.get("direction").map(String::as_str) != Some("asc") {
                items.reverse();
            }
            let rows = items.into_iter().map(|i| shapes::issue(world, urls, repo, i)).collect();
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/pulls" => {
            let state = query.get("state").map_or("open", String::as_str);
            let rows = repo
                .items
                .values()
                .rev()
                .filter(|i| match state {
                    "all" => true,
                    "closed" => !i.open,
                    _ => i.open,
                })
                .filter_map(|i| shapes::pull_request(world, urls, repo, i))
                .collect();
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/issues/{issue_number}" => {
            Ok(Reply::ok(shapes::issue(world, urls, repo, world.item(&route.repo, n)?)))
        }
        "/repos/{owner}/{repo}/issues/{issue_number}/comments" => {
            let item = world.item(&route.repo, n)?;
            let since = since(query)?;
            let rows = item
                .comments
                .iter()
                .filter(|c| since.is_none_or(|since| c.updated_at >= since))
                .map(|c| shapes::issue_comment(world, urls, repo, n, c))
                .collect();
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/pulls/{pull_number}" => {
            let item = world.item(&route.repo, n)?;
            shapes::pull_request(world, urls, repo, item)
                .map(Reply::ok)
                .ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })
        }
        "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"
        | "/repos/{owner}/{repo}/pulls/{pull_number}/comments" => {
            let item = world.item(&route.repo, n)?;
            let pull = item
                .pull
                .as_ref()
                .ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })?;
            let rows = if route.endpoint.ends_with("/reviews") {
                pull.reviews
                    .iter()
                    .map(|r| shapes::review(world, urls, repo, n, r, &pull.head_sha))
                    .collect()
            } else {
                // An inline comment is never edited here: its `updated_at` is its creation.
                let since = since(query)?;
                pull.review_comments
                    .iter()
                    .filter(|c| since.is_none_or(|since| c.created_at >= since))
                    .map(|c| shapes::review_comment(world, urls, repo, n, c, &pull.head_sha))
                    .collect()
            };
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs" => {
            let run = world.run(&route.repo, n)?;
            let jobs: Vec<Value> =
                run.jobs.iter().map(|j| shapes::job(urls, repo, run, j)).collect();
            Ok(Reply::ok(json!({"total_count": jobs.len(), "jobs": jobs})))
        }
        "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations" => {
            let (run, job) =
                world.job(n).ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })?;
            Ok(Reply::ok(shapes::annotations(urls, repo, run, job)))
        }
        "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs" => {
            world.job(n).ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })?;
            // GitHub answers with a short-lived address of the log on another host; here
            // the simulator serves it itself, outside the API.
            let root = urls.api.trim_end_matches("/api/v3");
            Ok(Reply {
                status: StatusCode::FOUND,
                body: Value::Null,
                link: None,
                location: Some(format!("{root}/_sim/job-logs/{n}")),
            })
        }
        _ => Err(WorldError::NoRepo { repo: route.repo.clone() }),
    }
}

/// The `since` of a comment listing: only comments updated at or after it are listed
/// (inclusive, as GitHub compares `updated_at`). One that is not an ISO 8601 time is
/// refused.
fn since(query: &BTreeMap<String, String>) -> Result<Option<Timestamp>, WorldError> {
    query
        .get("since")
        .map(|since| {
            since.parse::<Timestamp>().map_err(|_| WorldError::Invalid {
                reason: format!("`since` must be an ISO 8601 timestamp, not {since:?}"),
            })
        })
        .transpose()
}

/// One page of `rows` (`per_page` default 30, at most 100) with GitHub's `Link` header,
/// whose URLs name `repo` by its id (`/repositories/{id}/…`), as GitHub's do.
fn paginate(
    urls: &Urls,
    route: &Route,
    repo: &Repo,
    query: &BTreeMap<String, String>,
    rows: Vec<Value>,
) -> Reply {
    let per_page =
        query.get("per_page").and_then(|p| p.parse::<usize>().ok()).unwrap_or(30).clamp(1, 100);
    let page = query.get("page").and_then(|p| p.parse::<usize>().ok()).unwrap_or(1).max(1);
    let last = rows.len().div_ceil(per_page).max(1);
    let body: Vec<Value> = rows.into_iter().skip((page - 1) * per_page).take(per_page).collect();
    let url_of = |p: usize| {
        let mut q = query.clone();
        q.insert("page".to_owned(), p.to_string());
        let encoded: Vec<String> =
            q.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
        let number = route.number.to_string();
        let path = route
            .endpoint
            .replace("/repos/{owner}/{repo}", &format!("/repositories/{}", repo.id))
            .replace("{issue_number}", &number)
            .replace("{pull_number}", &number);
        format!("<{}{}?{}>", urls.api, path, encoded.join("&"))
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", url_of(page + 1)));
        links.push(format!("{}; rel=\"last\"", url_of(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url_of(1)));
        links.push(format!("{}; rel=\"prev\"", url_of(page - 1)));
    }
    Reply {
        status: StatusCode::OK,
        body: Value::Array(body),
        link: (!links.is_empty()).then(|| links.join(", ")),
        location: None,
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
