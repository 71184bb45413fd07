//! The REST writes the client makes (comments, comment edits, labels, reactions), each
//! applied to the world as the viewer; every other REST request is a [`read`].

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::shapes::{self, Urls};
use crate::world::{Action, ReactionSubject, World, WorldError};

use super::read::read;
use super::route::Route;
use super::{Reply, SimState, lock};

pub(super) fn rest(
    state: &SimState,
    method: &Method,
    route: &Route,
    query: &BTreeMap<String, String>,
    body: &Bytes,
) -> Reply {
    let urls = state.urls(route.prefix);
    let viewer = state.settings.viewer.clone();
    let result = match (method.as_str(), route.endpoint) {
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments") => {
            let Some(text) = json_field(body, "body") else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"body\" wasn't supplied.",
                );
            };
            let action = Action::Comment {
                repo: route.repo.clone(),
                number: route.number,
                author: viewer,
                body: text,
            };
            state.act(action).and_then(|outcome| {
                let world = lock(&state.world);
                let repo = world.repo(&route.repo)?;
                let (number, comment) =
                    world.comment(&route.repo, outcome.id.unwrap_or_default())?;
                Ok(Reply {
                    status: StatusCode::CREATED,
                    body: shapes::issue_comment(&world, &urls, repo, number, comment),
                    link: None,
                    location: None,
                })
            })
        }
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}") => {
            let Some(text) = json_field(body, "body") else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"body\" wasn't supplied.",
                );
            };
            let action = Action::EditComment {
                repo: route.repo.clone(),
                id: route.number,
                actor: viewer,
                body: text,
            };
            state.act(action).and_then(|_| {
                let world = lock(&state.world);
                let repo = world.repo(&route.repo)?;
                let (number, comment) = world.comment(&route.repo, route.number)?;
                Ok(Reply {
                    status: StatusCode::OK,
                    body: shapes::issue_comment(&world, &urls, repo, number, comment),
                    link: None,
                    location: None,
                })
            })
        }
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels") => {
            let names: Option<Vec<String>> = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("labels")?.as_array().cloned())
                .map(|names| names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
                .filter(|names: &Vec<String>| !names.is_empty());
            let Some(names) = names else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"labels\" wasn't supplied.",
                );
            };
            let mut result = Ok(());
            for label in names {
                let action = Action::Label {
                    repo: route.repo.clone(),
                    number: route.number,
                    actor: viewer.clone(),
                    label,
                };
                result = result.and_then(|()| state.act(action).map(drop));
            }
            result.and_then(|()| item_labels(state, &urls, route))
        }
        ("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}") => {
            let carried = {
                let world = lock(&state.world);
                world
                    .item(&route.repo, route.number)
                    .map(|item| item.labels.iter().any(|l| l.eq_ignore_ascii_case(&route.label)))
            };
            match carried {
                Ok(false) => return Reply::error(StatusCode::NOT_FOUND, "Label does not exist"),
                Ok(true) => {}
                Err(err) => return Reply::from_world(&err),
            }
            let action = Action::Unlabel {
                repo: route.repo.clone(),
                number: route.number,
                actor: viewer,
                label: route.label.clone(),
            };
            state.act(action).and_then(|_| item_labels(state, &urls, route))
        }
        ("POST", endpoint) if endpoint.ends_with("/reactions") => {
            let Some(content) = json_field(body, "content") else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"content\" wasn't supplied.",
                );
            };
            let repo = route.repo.clone();
            let target = if endpoint.contains("/issues/comments/") {
                ReactionSubject::IssueComment { repo, id: route.number }
            } else if endpoint.contains("/pulls/comments/") {
                ReactionSubject::ReviewComment { repo, id: route.number }
            } else {
                ReactionSubject::Item { repo, number: route.number }
            };
            state.act(Action::React { target, actor: viewer, content }).map(|outcome| {
                let world = lock(&state.world);
                let reaction = world_reaction(&world, outcome.id.unwrap_or_default());
                let status = if outcome.existed { StatusCode::OK } else { StatusCode::CREATED };
                Reply {
                    status,
                    body: reaction.map_or(Value::Null, |r| shapes::reaction(&world, &urls, &r)),
                    link: None,
                    location: None,
                }
            })
        }
        _ => {
            let world = lock(&state.world);
            read(&world, &urls, route, query)
        }
    };
    result.unwrap_or_else(|err| Reply::from_world(&err))
}

/// The labels an item carries, as GitHub answers a label write.
fn item_labels(state: &SimState, urls: &Urls, route: &Route) -> Result<Reply, WorldError> {
    let world = lock(&state.world);
    let repo = world.repo(&route.repo)?;
    let item = world.item(&route.repo, route.number)?;
    Ok(Reply {
        status: StatusCode::OK,
        body: shapes::labels(repo, urls, &item.labels),
        link: None,
        location: None,
    })
}

fn json_field(body: &Bytes, field: &str) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get(field)?.as_str().map(str::to_owned)
}

fn world_reaction(world: &World, id: u64) -> Option<crate::world::Reaction> {
    world.repos.values().flat_map(|repo| repo.items.values()).find_map(|item| {
        let on_item = item.reactions.iter();
        let on_comments = item.comments.iter().flat_map(|c| c.reactions.iter());
        let on_inline = item
            .pull
            .iter()
            .flat_map(|p| p.review_comments.iter())
            .flat_map(|c| c.reactions.iter());
        on_item.chain(on_comments).chain(on_inline).find(|r| r.id == id).cloned()
    })
}
