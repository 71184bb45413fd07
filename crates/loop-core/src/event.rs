//! The normalized event: what a GitHub event says, whichever ingress brought it.
//!
//! The receiver builds an [`Event`] from a webhook payload with [`Event::from_webhook`];
//! the poller builds the same value from what it listed. Everything downstream — routing
//! ([`crate::route`]), the guards ([`crate::guards`]), control parsing
//! ([`crate::control`]) and the prompt excerpt ([`crate::excerpt`]) — reads this value and
//! never the raw payload, so a comment means the same thing pushed or polled.
//!
//! Normalization tolerates any JSON: a missing, `null` or wrongly typed field is simply
//! absent, a non-object payload yields an event that carries nothing, and nothing here
//! panics. It must not judge the event (that is the guards' job) and must not keep the
//! raw payload.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::linkage;
use crate::login::Login;
use crate::refs::{DEFAULT_HOST, RepoRef, WorkItemRef};

/// The GitHub event name (`X-GitHub-Event`), with the nine routed by default named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    Issues,
    IssueComment,
    PullRequest,
    PullRequestReview,
    PullRequestReviewComment,
    PullRequestReviewThread,
    WorkflowRun,
    CheckRun,
    CheckSuite,
    Status,
    /// Any other name an operator added to `webhooks.ghWebhook.events`.
    Other(String),
}

impl EventKind {
    /// The event set accepted when `webhooks.ghWebhook.events` is empty.
    pub const DEFAULT_SET: [EventKind; 9] = [
        EventKind::Issues,
        EventKind::IssueComment,
        EventKind::PullRequest,
        EventKind::PullRequestReview,
        EventKind::PullRequestReviewComment,
        EventKind::WorkflowRun,
        EventKind::CheckRun,
        EventKind::CheckSuite,
        EventKind::Status,
    ];

    pub fn from_name(name: &str) -> Self {
        match name {
            "issues" => Self::Issues,
            "issue_comment" => Self::IssueComment,
            "pull_request" => Self::PullRequest,
            "pull_request_review" => Self::PullRequestReview,
            "pull_request_review_comment" => Self::PullRequestReviewComment,
            "pull_request_review_thread" => Self::PullRequestReviewThread,
            "workflow_run" => Self::WorkflowRun,
            "check_run" => Self::CheckRun,
            "check_suite" => Self::CheckSuite,
            "status" => Self::Status,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Issues => "issues",
            Self::IssueComment => "issue_comment",
            Self::PullRequest => "pull_request",
            Self::PullRequestReview => "pull_request_review",
            Self::PullRequestReviewComment => "pull_request_review_comment",
            Self::PullRequestReviewThread => "pull_request_review_thread",
            Self::WorkflowRun => "workflow_run",
            Self::CheckRun => "check_run",
            Self::CheckSuite => "check_suite",
            Self::Status => "status",
            Self::Other(name) => name,
        }
    }

    /// Events about a pull request by name (`pull_request*`).
    pub fn is_pull_request_event(&self) -> bool {
        self.as_str().starts_with("pull_request")
    }

    /// Events that report a CI result and carry no human text.
    pub fn is_ci(&self) -> bool {
        matches!(self, Self::WorkflowRun | Self::CheckRun | Self::CheckSuite | Self::Status)
    }
}

/// Who caused an event, as far as the payload says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// No actor: CI events, and a comment whose author account was deleted.
    Nobody,
    /// A named GitHub login.
    User(Login),
    /// A login the payload spelled but GitHub would never issue. It matches no list, so
    /// it can neither pass the actor guard nor command anything.
    Unrecognised(String),
}

impl Actor {
    fn from_login(value: Option<&Value>) -> Self {
        match value.and_then(Value::as_str) {
            None | Some("") => Self::Nobody,
            Some(text) => match text.parse::<Login>() {
                Ok(login) => Self::User(login),
                Err(_) => Self::Unrecognised(text.to_owned()),
            },
        }
    }

    /// The login when the actor is a named, well-formed one.
    pub fn login(&self) -> Option<&Login> {
        match self {
            Self::User(login) => Some(login),
            Self::Nobody | Self::Unrecognised(_) => None,
        }
    }

    /// The actor as the event log spells it (`None` for nobody).
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Nobody => None,
            Self::User(login) => Some(login.as_str()),
            Self::Unrecognised(text) => Some(text),
        }
    }
}

/// The issue or pull request an event is about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entity {
    /// `None` when the payload names no usable number (such an entity routes nowhere and
    /// closes nothing).
    pub number: Option<u64>,
    /// A pull request, or an issue object carrying GitHub's `pull_request` key (the shape
    /// of a PR conversation comment).
    pub is_pull_request: bool,
    pub title: Option<String>,
    pub state: Option<String>,
    pub draft: Option<bool>,
    pub merged: Option<bool>,
    pub labels: Vec<String>,
    pub author: Option<Login>,
    /// `head.ref` of a pull request; absent from a PR conversation comment's webhook.
    pub head_branch: Option<String>,
    /// The description. Linkage reads closing keywords in it; it is never a command,
    /// never marker-checked and never excerpted.
    pub body: Option<String>,
    pub html_url: Option<String>,
    pub updated_at: Option<String>,
    /// GitHub's own `closingIssuesReferences` (poll path; webhooks never carry it),
    /// resolved to refs.
    pub closing_issues: Vec<WorkItemRef>,
}

/// Where on GitHub a comment was left (seed 002, issue-246).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// An issue or PR conversation comment (`issue_comment`).
    Conversation,
    /// A review body (`pull_request_review`).
    Review,
    /// An inline review-thread comment (`pull_request_review_comment`).
    Inline,
}

/// The comment or review an event carries: the only text that can be a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub surface: Surface,
    /// The id as the payload gave it: numeric on webhooks, a node id on the poll path.
    pub id: Option<String>,
    pub node_id: Option<String>,
    pub body: Option<String>,
    pub author: Actor,
    pub html_url: Option<String>,
    /// File and line of an inline comment (the line it was written against).
    pub path: Option<String>,
    pub line: Option<u64>,
    /// A review's state (`commented`, `approved`, …), carried as context only.
    pub review_state: Option<String>,
    /// The numeric id of the review this is (a review) or belongs to (an inline
    /// comment's `pull_request_review_id`): what pastes a review and its inline comments
    /// as one prompt ([`crate::batch`]).
    pub review_id: Option<String>,
}

/// Which CI object a [`CiRun`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    WorkflowRun,
    CheckRun,
    CheckSuite,
}

impl RunKind {
    pub fn key(self) -> &'static str {
        match self {
            Self::WorkflowRun => "workflow_run",
            Self::CheckRun => "check_run",
            Self::CheckSuite => "check_suite",
        }
    }
}

/// A workflow run, check run or check suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiRun {
    pub kind: RunKind,
    pub id: Option<String>,
    pub name: Option<String>,
    /// A workflow run's triggering event (`push`, `pull_request`, …).
    pub trigger: Option<String>,
    pub status: Option<String>,
    pub conclusion: Option<String>,
    pub head_branch: Option<String>,
    pub head_sha: Option<String>,
    pub html_url: Option<String>,
    pub details_url: Option<String>,
    pub output_title: Option<String>,
    pub output_summary: Option<String>,
    pub updated_at: Option<String>,
    /// The pull requests the run is for. For a check run these are its suite's, as is
    /// [`Self::routing_branch`].
    pub pull_requests: Vec<u64>,
    pub routing_branch: Option<String>,
}

/// A commit status (`status` event).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitStatus {
    pub id: Option<String>,
    /// The commit the status is about.
    pub sha: Option<String>,
    pub state: Option<String>,
    pub context: Option<String>,
    pub description: Option<String>,
    pub target_url: Option<String>,
    pub updated_at: Option<String>,
}

/// What names the GitHub object an event is about, so that the same comment seen by
/// webhook and by poll is one delivery: a comment's node id and action, or for lifecycle
/// and CI events the kind, object, action and timestamp.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey(String);

impl DedupKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DedupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One GitHub event, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub action: Option<String>,
    /// `repository.full_name` on the host its `html_url` names; `None` when the payload
    /// names no well-formed repository (such an event routes nowhere).
    pub repository: Option<RepoRef>,
    pub entity: Option<Entity>,
    /// Who acted (reference §2.6): the comment's or review's author for those events, the
    /// sender for issue and pull-request events, nobody for CI.
    pub actor: Actor,
    pub comment: Option<Comment>,
    /// `label.name` of a `labeled`/`unlabeled` action.
    pub label: Option<String>,
    pub runs: Vec<CiRun>,
    pub status: Option<CommitStatus>,
    /// `branches[].name` of a `status` event.
    pub branches: Vec<String>,
}

/// Every key normalization reads, at any depth ([`Event::from_webhook`] and
/// [`linkage`]): [`Event::read_webhook`] keeps these and skips the rest of a payload.
/// Sorted, for a binary search per key.
const READ_KEYS: &[&str] = &[
    "action",
    "body",
    "branches",
    "check_run",
    "check_suite",
    "closingIssuesReferences",
    "comment",
    "completed_at",
    "conclusion",
    "context",
    "description",
    "details_url",
    "draft",
    "event",
    "full_name",
    "head",
    "head_branch",
    "head_sha",
    "html_url",
    "id",
    "issue",
    "label",
    "labels",
    "line",
    "login",
    "merged",
    "name",
    "nameWithOwner",
    "node_id",
    "nodes",
    "number",
    "original_line",
    "output",
    "owner",
    "path",
    "pull_request",
    "pull_request_review_id",
    "pull_requests",
    "ref",
    "repository",
    "review",
    "sender",
    "sha",
    "started_at",
    "state",
    "status",
    "summary",
    "target_url",
    "title",
    "updated_at",
    "url",
    "user",
    "workflow_run",
];

/// Deserializes a JSON value keeping only the object keys in [`READ_KEYS`]: the rest
/// is checked for shape and skipped, never allocated.
struct Pruned;

impl<'de> DeserializeSeed<'de> for Pruned {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pruned {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            match key {
                Some(key) => {
                    kept.insert(key.to_owned(), map.next_value_seed(Pruned)?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut kept = Vec::new();
        while let Some(value) = seq.next_element_seed(Pruned)? {
            kept.push(value);
        }
        Ok(Value::Array(kept))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// An object key as [`Pruned`] reads it: the [`READ_KEYS`] entry it is, or `None`. Read
/// in place, so the keys skipped (most of a payload's) are never allocated.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Key {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(READ_KEYS.binary_search(&key).ok().map(|at| READ_KEYS[at]))
    }
}

impl Event {
    /// Normalizes a raw webhook body, reading only the fields normalization uses (a
    /// GitHub payload is mostly URLs and profile fields nothing here reads). `None` when
    /// the body is not a JSON object. The same event as [`Event::from_webhook`] over the
    /// whole parsed payload.
    pub fn read_webhook(name: &str, body: &[u8]) -> Option<Self> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let payload = Pruned.deserialize(&mut de).ok().filter(Value::is_object)?;
        de.end().ok()?;
        Some(Self::from_webhook(name, &payload))
    }

    /// Normalizes a webhook payload. `name` is the `X-GitHub-Event` header.
    pub fn from_webhook(name: &str, payload: &Value) -> Self {
        let kind = EventKind::from_name(name);
        let empty = Map::new();
        let root = payload.as_object().unwrap_or(&empty);
        let host = event_host(root);
        let repository = root
            .get("repository")
            .and_then(|r| r.get("full_name"))
            .and_then(Value::as_str)
            .and_then(|full| full.split_once('/'))
            .and_then(|(owner, name)| RepoRef::new(host.as_deref(), owner, name).ok());

        let entity = ["pull_request", "issue"].iter().find_map(|key| {
            let object = root.get(*key)?.as_object()?;
            Some(entity(object, *key == "pull_request", repository.as_ref()))
        });
        let comment = comment(&kind, root);
        let actor = match &kind {
            EventKind::IssueComment
            | EventKind::PullRequestReviewComment
            | EventKind::PullRequestReview => {
                comment.as_ref().map_or(Actor::Nobody, |c| c.author.clone())
            }
            EventKind::Issues => sender(root),
            kind if kind.is_pull_request_event() => sender(root),
            _ => Actor::Nobody,
        };
        let runs = [RunKind::WorkflowRun, RunKind::CheckRun, RunKind::CheckSuite]
            .into_iter()
            .filter_map(|run_kind| Some(ci_run(run_kind, root.get(run_kind.key())?.as_object()?)))
            .collect();
        let status = (kind == EventKind::Status).then(|| CommitStatus {
            id: id_text(root.get("id")),
            sha: text(root.get("sha")),
            state: text(root.get("state")),
            context: text(root.get("context")),
            description: text(root.get("description")),
            target_url: text(root.get("target_url")),
            updated_at: text(root.get("updated_at")),
        });
        Self {
            kind,
            action: text(root.get("action")),
            repository,
            entity,
            actor,
            comment,
            label: text(root.get("label").and_then(|l| l.get("name"))),
            runs,
            status,
            branches: list(root.get("branches")).filter_map(|b| text(b.get("name"))).collect(),
        }
    }

    /// The text that is checked for the self-authored marker and parsed for commands: a
    /// comment's or review's body. An issue's or PR's description never is.
    pub fn comment_body(&self) -> Option<&str> {
        self.comment.as_ref().and_then(|c| c.body.as_deref())
    }

    /// The pull request's own ref when the event is about one.
    pub fn pull_request(&self) -> Option<WorkItemRef> {
        let entity = self.entity.as_ref().filter(|e| e.is_pull_request)?;
        Some(self.repository.as_ref()?.item(entity.number?))
    }

    /// Whether this is an `issues` or `pull_request` close: the one action that bypasses
    /// the actor guard and that ends sessions instead of reaching them.
    pub fn is_close(&self) -> bool {
        matches!(self.kind, EventKind::Issues | EventKind::PullRequest)
            && self.action.as_deref() == Some("closed")
    }

    /// The work item a close event ends: the closed object itself, named by repository
    /// and number (SPEC §1: a PR's linked issue is never closed by number alone). `None`
    /// for any other event, and for a close payload without a number.
    pub fn closed_item(&self) -> Option<WorkItemRef> {
        if !self.is_close() {
            return None;
        }
        Some(self.repository.as_ref()?.item(self.entity.as_ref()?.number?))
    }

    /// Whether the event carries the auto-execute label (reference §2.6): the label
    /// just added, or among the entity's labels. Exact, case-sensitive; an empty label
    /// never matches.
    pub fn carries_label(&self, label: &str) -> bool {
        if label.is_empty() {
            return false;
        }
        let just_added =
            self.action.as_deref() == Some("labeled") && self.label.as_deref() == Some(label);
        just_added || self.entity.as_ref().is_some_and(|e| e.labels.iter().any(|l| l == label))
    }

    /// The key naming the GitHub object this event is about, shared by both ingresses;
    /// `None` when the payload identifies nothing (the receiver then falls back to the
    /// delivery id alone).
    pub fn dedup_key(&self) -> Option<DedupKey> {
        let action = self.action.as_deref().unwrap_or("-");
        let kind = self.kind.as_str();
        if let Some(comment) = &self.comment {
            let object = comment.node_id.as_ref().or(comment.id.as_ref())?;
            return Some(DedupKey(format!("{kind}:{object}:{action}")));
        }
        if let Some(status) = &self.status {
            let id = status.id.as_ref()?;
            return Some(DedupKey(format!("{kind}:{id}")));
        }
        if let Some(run) = self.runs.first() {
            let id = run.id.as_ref()?;
            let at = run.updated_at.as_deref().unwrap_or("-");
            return Some(DedupKey(format!("{kind}:{id}:{action}:{at}")));
        }
        let entity = self.entity.as_ref()?;
        let item = self.repository.as_ref()?.item(entity.number?);
        let at = entity.updated_at.as_deref()?;
        Some(DedupKey(format!("{kind}:{item}:{action}:{at}")))
    }
}

/// The host of an event (reference §2.2): from `repository.html_url`, then the issue's
/// or pull request's `html_url`; `None` means github.com.
fn event_host(root: &Map<String, Value>) -> Option<String> {
    ["repository", "issue", "pull_request"]
        .iter()
        .filter_map(|key| root.get(*key)?.get("html_url")?.as_str())
        .find_map(url_host)
        .filter(|host| !host.eq_ignore_ascii_case(DEFAULT_HOST))
        .map(str::to_owned)
}

/// The host of an `http(s)://host/...` address.
fn url_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then_some(host)
}

fn entity(object: &Map<String, Value>, pull_request: bool, repo: Option<&RepoRef>) -> Entity {
    Entity {
        number: object.get("number").and_then(Value::as_u64).filter(|n| *n > 0),
        is_pull_request: pull_request || object.contains_key("pull_request"),
        title: text(object.get("title")),
        state: text(object.get("state")),
        draft: object.get("draft").and_then(Value::as_bool),
        merged: object.get("merged").and_then(Value::as_bool),
        labels: list(object.get("labels")).filter_map(|l| text(l.get("name"))).collect(),
        author: object
            .get("user")
            .and_then(|u| u.get("login"))
            .and_then(Value::as_str)
            .and_then(|l| l.parse().ok()),
        head_branch: text(object.get("head").and_then(|h| h.get("ref"))),
        body: text(object.get("body")),
        html_url: text(object.get("html_url")),
        updated_at: text(object.get("updated_at")),
        closing_issues: match repo {
            Some(repo) => closing_issues(object, repo),
            None => Vec::new(),
        },
    }
}

/// `closingIssuesReferences` in either GraphQL shape: a list, or `{nodes: [...]}`.
fn closing_issues(object: &Map<String, Value>, repo: &RepoRef) -> Vec<WorkItemRef> {
    let Some(references) = object.get("closingIssuesReferences") else {
        return Vec::new();
    };
    let entries = references.get("nodes").unwrap_or(references);
    list(Some(entries)).filter_map(|entry| linkage::closing_issue_reference(entry, repo)).collect()
}

fn comment(kind: &EventKind, root: &Map<String, Value>) -> Option<Comment> {
    let (key, surface) = match kind {
        EventKind::PullRequestReview => ("review", Surface::Review),
        EventKind::PullRequestReviewComment => ("comment", Surface::Inline),
        _ if root.contains_key("comment") => ("comment", Surface::Conversation),
        _ if root.contains_key("review") => ("review", Surface::Review),
        _ => return None,
    };
    let object = root.get(key)?.as_object()?;
    Some(Comment {
        surface,
        id: id_text(object.get("id")),
        node_id: text(object.get("node_id")),
        body: text(object.get("body")),
        author: Actor::from_login(object.get("user").and_then(|u| u.get("login"))),
        html_url: text(object.get("html_url")),
        path: text(object.get("path")),
        // An outdated inline comment has no `line` any more; `original_line` says where
        // it was left (the poller reads the same fallback from the REST listing).
        line: object
            .get("line")
            .and_then(Value::as_u64)
            .or_else(|| object.get("original_line").and_then(Value::as_u64)),
        review_state: text(object.get("state")),
        review_id: match surface {
            Surface::Review => id_text(object.get("id")),
            Surface::Inline => id_text(object.get("pull_request_review_id")),
            Surface::Conversation => None,
        },
    })
}

fn ci_run(kind: RunKind, object: &Map<String, Value>) -> CiRun {
    // A check run is routed by its suite: the suite names the PRs and the branch.
    let routing = match kind {
        RunKind::CheckRun => object.get("check_suite").and_then(Value::as_object),
        RunKind::WorkflowRun | RunKind::CheckSuite => Some(object),
    };
    let output = object.get("output");
    CiRun {
        kind,
        id: id_text(object.get("id")),
        name: text(object.get("name")),
        trigger: text(object.get("event")),
        status: text(object.get("status")),
        conclusion: text(object.get("conclusion")),
        head_branch: text(object.get("head_branch")),
        head_sha: text(object.get("head_sha")),
        html_url: text(object.get("html_url")),
        details_url: text(object.get("details_url")),
        output_title: text(output.and_then(|o| o.get("title"))),
        output_summary: text(output.and_then(|o| o.get("summary"))),
        updated_at: ["updated_at", "completed_at", "started_at"]
            .iter()
            .find_map(|key| text(object.get(*key))),
        pull_requests: list(routing.and_then(|r| r.get("pull_requests")))
            .filter_map(|pr| pr.get("number")?.as_u64())
            .filter(|n| *n > 0)
            .collect(),
        routing_branch: text(routing.and_then(|r| r.get("head_branch"))),
    }
}

fn sender(root: &Map<String, Value>) -> Actor {
    Actor::from_login(root.get("sender").and_then(|s| s.get("login")))
}

/// A non-empty string field.
fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// An id as text: numeric ids are written in decimal, string ids kept as they are.
fn id_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// The elements of a JSON array; nothing for anything else.
fn list(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_keys_read_are_sorted_for_the_binary_search() {
        assert!(READ_KEYS.is_sorted(), "keep READ_KEYS sorted");
    }

    #[test]
    fn a_pr_conversation_comment_is_about_the_pull_request() {
        let event = Event::from_webhook(
            "issue_comment",
            &json!({
                "action": "created",
                "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
                "issue": {"number": 16, "pull_request": {"url": "x"}},
                "comment": {"id": 5, "node_id": "IC_5", "body": "hi", "user": {"login": "ann"}},
                "sender": {"login": "someone-else"},
            }),
        );
        assert_eq!(event.pull_request().unwrap().to_string(), "github:octo/app#16");
        assert_eq!(event.actor.name(), Some("ann"));
        assert_eq!(event.comment_body(), Some("hi"));
        assert_eq!(event.dedup_key().unwrap().as_str(), "issue_comment:IC_5:created");
    }

    #[test]
    fn the_host_comes_from_the_repository_address() {
        let event = Event::from_webhook(
            "issues",
            &json!({
                "repository": {"full_name": "o/r", "html_url": "https://ghe.example.com/o/r"},
                "issue": {"number": 3, "updated_at": "2026-01-01T00:00:00Z"},
                "action": "opened",
            }),
        );
        let repo = event.repository.as_ref().unwrap();
        assert_eq!(repo.to_string(), "ghe.example.com/o/r");
        assert_eq!(
            event.dedup_key().unwrap().as_str(),
            "issues:github:ghe.example.com/o/r#3:opened:2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn actors_per_event_kind() {
        let payload = |extra: Value| {
            let mut base = json!({
                "repository": {"full_name": "o/r"},
                "sender": {"login": "sender"},
            });
            base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            base
        };
        let cases = [
            ("issues", payload(json!({})), Some("sender")),
            ("pull_request", payload(json!({})), Some("sender")),
            (
                "pull_request_review",
                payload(json!({"review": {"user": {"login": "rev"}}})),
                Some("rev"),
            ),
            ("issue_comment", payload(json!({"comment": {"user": null}})), None),
            ("issue_comment", payload(json!({})), None),
            ("check_run", payload(json!({})), None),
            ("status", payload(json!({})), None),
            ("issues", payload(json!({"sender": {"login": "not a login"}})), Some("not a login")),
        ];
        for (name, payload, actor) in cases {
            assert_eq!(Event::from_webhook(name, &payload).actor.name(), actor, "{name} {payload}");
        }
    }

    #[test]
    fn anything_that_is_not_an_object_carries_nothing() {
        for payload in [json!(null), json!([1, 2]), json!("x"), json!(3)] {
            let event = Event::from_webhook("issues", &payload);
            assert_eq!(event.repository, None);
            assert_eq!(event.entity, None);
            assert_eq!(event.actor, Actor::Nobody);
            assert_eq!(event.dedup_key(), None);
        }
    }

    #[test]
    fn the_label_flag_is_exact() {
        let event = |action: &str, added: &str, labels: Value| {
            Event::from_webhook(
                "issues",
                &json!({"action": action, "label": {"name": added}, "issue": {"labels": labels}}),
            )
        };
        let label = "the-loop: auto-execute";
        assert!(event("labeled", label, json!([])).carries_label(label));
        assert!(event("edited", "x", json!([{"name": label}])).carries_label(label));
        assert!(!event("unlabeled", label, json!([])).carries_label(label));
        assert!(!event("labeled", "The-Loop: Auto-Execute", json!([])).carries_label(label));
        assert!(!event("labeled", "", json!([{"name": ""}])).carries_label(""));
    }
}
