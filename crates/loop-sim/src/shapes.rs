//! GitHub's JSON shapes for the simulated world: the objects the REST API answers with and
//! webhook payloads carry, with GitHub's field names, URL templates and node-id prefixes.
//!
//! The contract tests validate these against GitHub's OpenAPI description, so every field
//! the description requires is present, with a plausible value. Nothing here mutates the
//! world.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::world::{
    Comment, Item, Reaction, Repo, Review, ReviewComment, RunJob, WorkflowRun, World, node_id,
};

/// Where the simulated GitHub lives: its API root and its web root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Urls {
    /// e.g. `http://127.0.0.1:40123` (or `…/api/v3` for an Enterprise layout).
    pub api: String,
    /// e.g. `https://github.com`; work-item refs are read from `html_url`s.
    pub web: String,
}

pub fn time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn opt_time(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| json!(time(t)))
}

pub fn user(world: &World, urls: &Urls, login: &str) -> Value {
    let id = world.users.get(login).map_or(1, |u| u.id);
    let api = format!("{}/users/{login}", urls.api);
    let kind = if login.ends_with("[bot]") { "Bot" } else { "User" };
    json!({
        "login": login,
        "id": id,
        "node_id": node_id("U", id),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "",
        "url": api,
        "html_url": format!("{}/{login}", urls.web),
        "followers_url": format!("{api}/followers"),
        "following_url": format!("{api}/following{{/other_user}}"),
        "gists_url": format!("{api}/gists{{/gist_id}}"),
        "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/subscriptions"),
        "organizations_url": format!("{api}/orgs"),
        "repos_url": format!("{api}/repos"),
        "events_url": format!("{api}/events{{/privacy}}"),
        "received_events_url": format!("{api}/received_events"),
        "type": kind,
        "user_view_type": "public",
        "site_admin": false
    })
}

fn association(repo: &Repo, login: &str) -> &'static str {
    if login.eq_ignore_ascii_case(&repo.owner) { "OWNER" } else { "CONTRIBUTOR" }
}

pub fn repository(world: &World, urls: &Urls, repo: &Repo) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}", urls.api);
    let html = format!("{}/{full}", urls.web);
    let open = repo.items.values().filter(|i| i.open).count();
    let host = urls.web.trim_start_matches("https://").trim_start_matches("http://");
    let mut value = json!({
        "id": repo.id,
        "node_id": node_id("R", repo.id),
        "name": repo.name,
        "full_name": full,
        "private": false,
        "owner": user(world, urls, &repo.owner),
        "html_url": html,
        "description": null,
        "fork": false,
        "url": api,
        "archive_url": format!("{api}/{{archive_format}}{{/ref}}"),
        "assignees_url": format!("{api}/assignees{{/user}}"),
        "blobs_url": format!("{api}/git/blobs{{/sha}}"),
        "branches_url": format!("{api}/branches{{/branch}}"),
        "collaborators_url": format!("{api}/collaborators{{/collaborator}}"),
        "comments_url": format!("{api}/comments{{/number}}"),
        "commits_url": format!("{api}/commits{{/sha}}"),
        "compare_url": format!("{api}/compare/{{base}}...{{head}}"),
        "contents_url": format!("{api}/contents/{{+path}}"),
        "contributors_url": format!("{api}/contributors"),
        "deployments_url": format!("{api}/deployments"),
        "downloads_url": format!("{api}/downloads"),
        "events_url": format!("{api}/events"),
        "forks_url": format!("{api}/forks"),
        "git_commits_url": format!("{api}/git/commits{{/sha}}"),
        "git_refs_url": format!("{api}/git/refs{{/sha}}"),
        "git_tags_url": format!("{api}/git/tags{{/sha}}"),
        "git_url": format!("git://{host}/{full}.git"),
        "issue_comment_url": format!("{api}/issues/comments{{/number}}"),
        "issue_events_url": format!("{api}/issues/events{{/number}}"),
        "issues_url": format!("{api}/issues{{/number}}"),
        "keys_url": format!("{api}/keys{{/key_id}}"),
        "labels_url": format!("{api}/labels{{/name}}"),
        "languages_url": format!("{api}/languages"),
        "merges_url": format!("{api}/merges"),
        "milestones_url": format!("{api}/milestones{{/number}}"),
        "notifications_url": format!("{api}/notifications{{?since,all,participating}}"),
        "pulls_url": format!("{api}/pulls{{/number}}"),
        "releases_url": format!("{api}/releases{{/id}}"),
        "ssh_url": format!("git@{host}:{full}.git"),
        "stargazers_url": format!("{api}/stargazers"),
        "statuses_url": format!("{api}/statuses/{{sha}}"),
        "subscribers_url": format!("{api}/subscribers"),
        "subscription_url": format!("{api}/subscription"),
        "tags_url": format!("{api}/tags"),
        "teams_url": format!("{api}/teams"),
        "trees_url": format!("{api}/git/trees{{/sha}}"),
        "clone_url": format!("{html}.git"),
        "mirror_url": null,
        "hooks_url": format!("{api}/hooks"),
        "svn_url": html,
        "homepage": null,
        "language": "Rust",
        "forks_count": 0,
        "forks": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 1,
        "default_branch": "main",
        "open_issues_count": open,
        "open_issues": open,
        "custom_properties": {}
    });
    let settings = json!({
        "is_template": false,
        "topics": [],
        "has_issues": repo.has_issues,
        "has_projects": false,
        "has_wiki": false,
        "has_pages": false,
        "has_downloads": true,
        "has_discussions": false,
        "archived": false,
        "disabled": false,
        "visibility": "public",
        "pushed_at": time(repo.created_at),
        "created_at": time(repo.created_at),
        "updated_at": time(repo.created_at),
        "allow_forking": true,
        "web_commit_signoff_required": false,
        "license": null,
        "allow_merge_commit": true,
        "allow_rebase_merge": true,
        "allow_squash_merge": true,
        "allow_auto_merge": false,
        "delete_branch_on_merge": false
    });
    if let (Some(value), Value::Object(settings)) = (value.as_object_mut(), settings) {
        value.extend(settings);
    }
    value
}

/// The label objects for `names`, as every answer that lists an item's labels carries.
pub fn labels(repo: &Repo, urls: &Urls, names: &[String]) -> Value {
    let api = format!("{}/repos/{}", urls.api, repo.full_name());
    names
        .iter()
        .map(|name| {
            let label = repo.labels.get(&name.to_ascii_lowercase());
            let id = label.map_or(1, |l| l.id);
            json!({
                "id": id,
                "node_id": node_id("LA", id),
                "url": format!("{api}/labels/{}", name.replace(' ', "%20")),
                "name": name,
                "color": label.map_or("ededed", |l| l.color.as_str()),
                "default": false,
                "description": null
            })
        })
        .collect()
}

pub fn label(repo: &Repo, urls: &Urls, name: &str) -> Value {
    labels(repo, urls, &[name.to_owned()])[0].clone()
}

fn reaction_rollup(url: String, reactions: &[Reaction]) -> Value {
    let count = |c: &str| reactions.iter().filter(|r| r.content == c).count();
    json!({
        "url": url,
        "total_count": reactions.len(),
        "+1": count("+1"), "-1": count("-1"), "laugh": count("laugh"), "hooray": count("hooray"),
        "confused": count("confused"), "heart": count("heart"), "rocket": count("rocket"), "eyes": count("eyes")
    })
}

/// An issue or pull request as `GET /repos/{o}/{r}/issues/{n}` shows it.
pub fn issue(world: &World, urls: &Urls, repo: &Repo, item: &Item) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}/issues/{}", urls.api, item.number);
    let kind = if item.pull.is_some() { "pull" } else { "issues" };
    let html = format!("{}/{full}/{kind}/{}", urls.web, item.number);
    let mut value = json!({
        "url": api,
        "repository_url": format!("{}/repos/{full}", urls.api),
        "labels_url": format!("{api}/labels{{/name}}"),
        "comments_url": format!("{api}/comments"),
        "events_url": format!("{api}/events"),
        "html_url": html,
        "id": item.id,
        "node_id": node_id(if item.pull.is_some() { "PR" } else { "I" }, item.id),
        "number": item.number,
        "title": item.title,
        "user": user(world, urls, &item.author),
        "labels": labels(repo, urls, &item.labels),
        "state": if item.open { "open" } else { "closed" },
        "locked": false,
        "assignee": null,
        "assignees": [],
        "milestone": null,
        "comments": item.comments.len(),
        "created_at": time(item.created_at),
        "updated_at": time(item.updated_at),
        "closed_at": opt_time(item.closed_at),
        "author_association": association(repo, &item.author),
        "active_lock_reason": null,
        "body": if item.body.is_empty() { Value::Null } else { json!(item.body) },
        "closed_by": item.closed_by.as_deref().map_or(Value::Null, |l| user(world, urls, l)),
        "reactions": reaction_rollup(format!("{api}/reactions"), &item.reactions),
        "timeline_url": format!("{api}/timeline"),
        "performed_via_github_app": null,
        "state_reason": item.state_reason,
        "draft": false
    });
    if let Some(pull) = &item.pull {
        let pulls = format!("{}/repos/{full}/pulls/{}", urls.api, item.number);
        value["pull_request"] = json!({
            "url": pulls,
            "html_url": html,
            "diff_url": format!("{html}.diff"),
            "patch_url": format!("{html}.patch"),
            "merged_at": opt_time(pull.merged_at)
        });
    }
    value
}

/// A pull request as `GET /repos/{o}/{r}/pulls/{n}` shows it. `None` for an issue.
pub fn pull_request(world: &World, urls: &Urls, repo: &Repo, item: &Item) -> Option<Value> {
    let pull = item.pull.as_ref()?;
    let full = repo.full_name();
    let api = format!("{}/repos/{full}/pulls/{}", urls.api, item.number);
    let issue_api = format!("{}/repos/{full}/issues/{}", urls.api, item.number);
    let html = format!("{}/{full}/pull/{}", urls.web, item.number);
    let statuses = format!("{}/repos/{full}/statuses/{}", urls.api, pull.head_sha);
    let branch = |name: &str, sha: &str| {
        json!({
            "label": format!("{}:{name}", repo.owner),
            "ref": name,
            "sha": sha,
            "user": user(world, urls, &repo.owner),
            "repo": repository(world, urls, repo)
        })
    };
    let link = |href: String| json!({ "href": href });
    let merged = pull.merged_at.is_some();
    Some(json!({
        "url": api,
        "id": item.id,
        "node_id": node_id("PR", item.id),
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "issue_url": issue_api,
        "commits_url": format!("{api}/commits"),
        "review_comments_url": format!("{api}/comments"),
        "review_comment_url": format!("{}/repos/{full}/pulls/comments{{/number}}", urls.api),
        "comments_url": format!("{issue_api}/comments"),
        "statuses_url": statuses,
        "number": item.number,
        "state": if item.open { "open" } else { "closed" },
        "locked": false,
        "title": item.title,
        "user": user(world, urls, &item.author),
        "body": if item.body.is_empty() { Value::Null } else { json!(item.body) },
        "labels": labels(repo, urls, &item.labels),
        "milestone": null,
        "active_lock_reason": null,
        "created_at": time(item.created_at),
        "updated_at": time(item.updated_at),
        "closed_at": opt_time(item.closed_at),
        "merged_at": opt_time(pull.merged_at),
        "merge_commit_sha": if merged { json!(format!("{:040x}", item.id)) } else { Value::Null },
        "assignee": null,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": branch(&pull.head_ref, &pull.head_sha),
        "base": branch(&pull.base_ref, &format!("{:040x}", repo.id)),
        "_links": {
            "self": link(api.clone()),
            "html": link(html.clone()),
            "issue": link(issue_api.clone()),
            "comments": link(format!("{issue_api}/comments")),
            "review_comments": link(format!("{api}/comments")),
            "review_comment": link(format!("{}/repos/{full}/pulls/comments{{/number}}", urls.api)),
            "commits": link(format!("{api}/commits")),
            "statuses": link(statuses)
        },
        "author_association": association(repo, &item.author),
        "auto_merge": null,
        "draft": false,
        "merged": merged,
        "mergeable": if item.open { json!(true) } else { Value::Null },
        "rebaseable": if item.open { json!(true) } else { Value::Null },
        "mergeable_state": if item.open { "clean" } else { "unknown" },
        "merged_by": pull.merged_by.as_deref().map_or(Value::Null, |l| user(world, urls, l)),
        "comments": item.comments.len(),
        "review_comments": pull.review_comments.len(),
        "maintainer_can_modify": false,
        "commits": 1,
        "additions": 1,
        "deletions": 0,
        "changed_files": 1
    }))
}

pub fn issue_comment(world: &World, urls: &Urls, repo: &Repo, number: u64, c: &Comment) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}/issues/comments/{}", urls.api, c.id);
    json!({
        "id": c.id,
        "node_id": node_id("IC", c.id),
        "url": api,
        "html_url": format!("{}/{full}/issues/{number}#issuecomment-{}", urls.web, c.id),
        "body": c.body,
        "user": user(world, urls, &c.author),
        "created_at": time(c.created_at),
        "updated_at": time(c.updated_at),
        "issue_url": format!("{}/repos/{full}/issues/{number}", urls.api),
        "author_association": association(repo, &c.author),
        "performed_via_github_app": null,
        "reactions": reaction_rollup(format!("{api}/reactions"), &c.reactions)
    })
}

pub fn review(
    world: &World,
    urls: &Urls,
    repo: &Repo,
    number: u64,
    r: &Review,
    commit: &str,
) -> Value {
    let full = repo.full_name();
    let html = format!("{}/{full}/pull/{number}#pullrequestreview-{}", urls.web, r.id);
    let pr_api = format!("{}/repos/{full}/pulls/{number}", urls.api);
    let mut value = json!({
        "id": r.id,
        "node_id": node_id("PRR", r.id),
        "user": user(world, urls, &r.author),
        "body": r.body,
        "state": r.state.as_str(),
        "html_url": html,
        "pull_request_url": pr_api,
        "author_association": association(repo, &r.author),
        "_links": { "html": { "href": html }, "pull_request": { "href": pr_api } },
        "commit_id": commit
    });
    if let Some(at) = r.submitted_at {
        value["submitted_at"] = json!(time(at));
    }
    value
}

pub fn review_comment(
    world: &World,
    urls: &Urls,
    repo: &Repo,
    number: u64,
    c: &ReviewComment,
    commit: &str,
) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}/pulls/comments/{}", urls.api, c.id);
    let html = format!("{}/{full}/pull/{number}#discussion_r{}", urls.web, c.id);
    let pr_api = format!("{}/repos/{full}/pulls/{number}", urls.api);
    json!({
        "url": api,
        "pull_request_review_id": c.review_id,
        "id": c.id,
        "node_id": node_id("PRRC", c.id),
        "diff_hunk": format!("@@ -{0},1 +{0},1 @@", c.line),
        "path": c.path,
        "commit_id": commit,
        "original_commit_id": commit,
        "user": user(world, urls, &c.author),
        "body": c.body,
        "created_at": time(c.created_at),
        "updated_at": time(c.created_at),
        "html_url": html,
        "pull_request_url": pr_api,
        "author_association": association(repo, &c.author),
        "_links": {
            "self": { "href": api },
            "html": { "href": html },
            "pull_request": { "href": pr_api }
        },
        "start_line": null,
        "original_start_line": null,
        "start_side": null,
        "line": c.line,
        "original_line": c.line,
        "side": "RIGHT",
        "original_position": 1,
        "position": 1,
        "subject_type": "line",
        "reactions": reaction_rollup(format!("{api}/reactions"), &c.reactions)
    })
}

pub fn reaction(world: &World, urls: &Urls, r: &Reaction) -> Value {
    json!({
        "id": r.id,
        "node_id": node_id("REA", r.id),
        "user": user(world, urls, &r.user),
        "content": r.content,
        "created_at": time(r.created_at)
    })
}
/// A workflow (the `workflow` of a `workflow_run` webhook).
pub fn workflow(urls: &Urls, repo: &Repo, run: &WorkflowRun) -> Value {
    let full = repo.full_name();
    json!({
        "id": run.workflow_id,
        "node_id": node_id("W", run.workflow_id),
        "name": run.name,
        "path": ".github/workflows/ci.yml",
        "state": "active",
        "created_at": time(run.created_at),
        "updated_at": time(run.created_at),
        "url": format!("{}/repos/{full}/actions/workflows/{}", urls.api, run.workflow_id),
        "html_url": format!("{}/{full}/blob/main/.github/workflows/ci.yml", urls.web),
        "badge_url": format!("{}/{full}/workflows/{}/badge.svg", urls.web, run.name.replace(' ', "%20")),
    })
}

/// A workflow run as the `workflow_run` webhook carries it.
pub fn workflow_run(world: &World, urls: &Urls, repo: &Repo, run: &WorkflowRun) -> Value {
    let full = repo.full_name();
    let api = format!("{}/repos/{full}/actions/runs/{}", urls.api, run.id);
    let suite = run.id + 1_000_000;
    let pull = world.item(&full, run.number).ok().and_then(|item| item.pull.as_ref());
    let base = pull.map_or("main", |p| p.base_ref.as_str());
    let repo_ref =
        json!({"id": repo.id, "url": format!("{}/repos/{full}", urls.api), "name": repo.name});
    json!({
        "id": run.id,
        "name": run.name,
        "node_id": node_id("WFR", run.id),
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": ".github/workflows/ci.yml",
        "display_title": run.name,
        "run_number": run.id,
        "event": "pull_request",
        "status": "completed",
        "conclusion": run.conclusion,
        "workflow_id": run.workflow_id,
        "check_suite_id": suite,
        "check_suite_node_id": node_id("CS", suite),
        "url": api,
        "html_url": format!("{}/{full}/actions/runs/{}", urls.web, run.id),
        "pull_requests": [{
            "id": run.number,
            "number": run.number,
            "url": format!("{}/repos/{full}/pulls/{}", urls.api, run.number),
            "head": {"ref": run.head_branch, "sha": run.head_sha, "repo": repo_ref},
            "base": {"ref": base, "sha": format!("{:040x}", repo.id), "repo": repo_ref},
        }],
        "created_at": time(run.created_at),
        "updated_at": time(run.completed_at),
        "actor": user(world, urls, &run.actor),
        "triggering_actor": user(world, urls, &run.actor),
        "run_attempt": 1,
        "referenced_workflows": [],
        "run_started_at": time(run.created_at),
        "jobs_url": format!("{api}/jobs"),
        "logs_url": format!("{api}/logs"),
        "check_suite_url": format!("{}/repos/{full}/check-suites/{suite}", urls.api),
        "artifacts_url": format!("{api}/artifacts"),
        "cancel_url": format!("{api}/cancel"),
        "rerun_url": format!("{api}/rerun"),
        "previous_attempt_url": null,
        "workflow_url": format!("{}/repos/{full}/actions/workflows/{}", urls.api, run.workflow_id),
        "head_commit": {
            "id": run.head_sha,
            "tree_id": format!("{:040x}", run.id),
            "message": "work in progress",
            "timestamp": time(run.created_at),
            "author": {"name": run.actor, "email": format!("{}@example.com", run.actor)},
            "committer": {"name": "GitHub", "email": "noreply@github.com"},
        },
        "repository": repository(world, urls, repo),
        "head_repository": repository(world, urls, repo),
    })
}

/// A job of a run (`GET …/actions/runs/{run_id}/jobs`).
pub fn job(urls: &Urls, repo: &Repo, run: &WorkflowRun, job: &RunJob) -> Value {
    let full = repo.full_name();
    let steps: Vec<Value> = job
        .steps
        .iter()
        .enumerate()
        .map(|(at, step)| {
            json!({
                "name": step.name,
                "status": "completed",
                "conclusion": if step.failed { "failure" } else { "success" },
                "number": at + 1,
                "started_at": time(run.created_at),
                "completed_at": time(run.completed_at),
            })
        })
        .collect();
    json!({
        "id": job.id,
        "run_id": run.id,
        "run_url": format!("{}/repos/{full}/actions/runs/{}", urls.api, run.id),
        "run_attempt": 1,
        "node_id": node_id("CR", job.id),
        "head_sha": run.head_sha,
        "url": format!("{}/repos/{full}/actions/jobs/{}", urls.api, job.id),
        "html_url": format!("{}/{full}/actions/runs/{}/job/{}", urls.web, run.id, job.id),
        "status": "completed",
        "conclusion": job.conclusion,
        "created_at": time(run.created_at),
        "started_at": time(run.created_at),
        "completed_at": time(run.completed_at),
        "name": job.name,
        "steps": steps,
        "check_run_url": format!("{}/repos/{full}/check-runs/{}", urls.api, job.id),
        "labels": ["ubuntu-latest"],
        "runner_id": 1,
        "runner_name": "GitHub Actions 1",
        "runner_group_id": 2,
        "runner_group_name": "GitHub Actions",
        "workflow_name": run.name,
        "head_branch": run.head_branch,
    })
}

/// The annotations of a job's check run (`GET …/check-runs/{id}/annotations`).
pub fn annotations(urls: &Urls, repo: &Repo, run: &WorkflowRun, job: &RunJob) -> Value {
    let full = repo.full_name();
    job.annotations
        .iter()
        .map(|a| {
            json!({
                "path": a.path,
                "start_line": a.line,
                "end_line": a.line,
                "start_column": null,
                "end_column": null,
                "annotation_level": a.level,
                "title": null,
                "message": a.message,
                "raw_details": null,
                "blob_href": format!("{}/{full}/blob/{}/{}", urls.web, run.head_sha, a.path),
            })
        })
        .collect()
}
