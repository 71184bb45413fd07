//! The simulated GitHub's state: repositories, issues, pull requests, comments, reviews,
//! inline comments, reactions and closures, and the user actions that change them.
//!
//! Every change goes through [`World::apply`] with an [`Action`], whether a test calls it
//! from Rust, a script posts it to `/_sim/actions`, or the-loop writes through the REST
//! API. `updated_at` moves exactly when GitHub moves it (comments, reviews, labels, state
//! changes — not reactions, not pending reviews), and each change yields the webhook
//! deliveries GitHub would send. Timestamps come from a logical clock that never repeats a
//! second, so "did `updated_at` move" is always answerable.
//!
//! This module renders nothing and does no IO; `shapes.rs` turns it into GitHub's JSON.

use std::collections::BTreeMap;

use jiff::Timestamp;
use loop_core::RepoRef;
use serde::{Deserialize, Serialize};

/// What a simulated user (or the-loop, through the API) does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    CreateRepo {
        repo: String,
    },
    OpenIssue {
        repo: String,
        author: String,
        title: String,
        #[serde(default)]
        body: String,
        #[serde(default)]
        labels: Vec<String>,
    },
    /// Opens a pull request; `Closes #N` (and GitHub's other closing keywords) in the body
    /// link issue N.
    OpenPullRequest {
        repo: String,
        author: String,
        title: String,
        #[serde(default)]
        body: String,
        head_ref: String,
        #[serde(default)]
        labels: Vec<String>,
    },
    Label {
        repo: String,
        number: u64,
        actor: String,
        label: String,
    },
    Unlabel {
        repo: String,
        number: u64,
        actor: String,
        label: String,
    },
    Comment {
        repo: String,
        number: u64,
        author: String,
        body: String,
    },
    /// Edits a conversation comment's body, as a person ticking a checklist in
    /// GitHub's UI does (`issue_comment` `edited`).
    EditComment {
        repo: String,
        id: u64,
        actor: String,
        body: String,
    },
    /// A review; `PENDING` reviews are stored but neither bump nor announce anything.
    Review {
        repo: String,
        number: u64,
        author: String,
        state: ReviewState,
        #[serde(default)]
        body: String,
        #[serde(default)]
        comments: Vec<InlineDraft>,
    },
    /// Merges a pull request; its linked open issues in the same repository close.
    Merge {
        repo: String,
        number: u64,
        actor: String,
    },
    Close {
        repo: String,
        number: u64,
        actor: String,
        #[serde(default)]
        reason: Option<String>,
    },
    Reopen {
        repo: String,
        number: u64,
        actor: String,
    },
    React {
        target: ReactionSubject,
        actor: String,
        content: String,
    },
    /// Turns a repository's Issues feature on or off (off: its issue endpoints answer 410).
    SetIssuesEnabled {
        repo: String,
        enabled: bool,
    },
    /// A GitHub Actions workflow run on a pull request's head completes: it failed when a
    /// step of one of its jobs failed. Sends `workflow_run` `completed`.
    CompleteRun {
        repo: String,
        number: u64,
        actor: String,
        workflow: String,
        jobs: Vec<JobDraft>,
    },
}

/// A job of a scripted workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobDraft {
    pub name: String,
    pub steps: Vec<StepDraft>,
    /// The check run's annotations.
    #[serde(default)]
    pub annotations: Vec<AnnotationDraft>,
    /// The job's log, as the runner wrote it.
    #[serde(default)]
    pub log: String,
}

/// A step of a scripted job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDraft {
    pub name: String,
    #[serde(default)]
    pub failed: bool,
}

/// A check-run annotation of a scripted job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnnotationDraft {
    pub path: String,
    pub line: u64,
    /// `notice`, `warning` or `failure` (the default).
    #[serde(default = "failure")]
    pub level: String,
    pub message: String,
}

fn failure() -> String {
    "failure".to_owned()
}

/// An inline comment written as part of a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InlineDraft {
    pub path: String,
    pub line: u64,
    pub body: String,
}

/// GitHub's review states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
    Pending,
}

impl ReviewState {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewState::Approved => "APPROVED",
            ReviewState::ChangesRequested => "CHANGES_REQUESTED",
            ReviewState::Commented => "COMMENTED",
            ReviewState::Pending => "PENDING",
        }
    }
}

/// What a reaction is put on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReactionSubject {
    Item {
        repo: String,
        number: u64,
    },
    IssueComment {
        repo: String,
        id: u64,
    },
    ReviewComment {
        repo: String,
        id: u64,
    },
    /// A submitted pull-request review (GraphQL only: REST has no endpoint for it).
    Review {
        repo: String,
        id: u64,
    },
}

/// What an action produced: the number, id and node id of what it created, if anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// Whether a reaction already existed (GitHub answers 200 instead of 201).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub existed: bool,
}

/// Why an action could not be applied; the REST layer maps these to 404 and 422.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    #[error("no repository `{repo}` in the simulated GitHub")]
    NoRepo { repo: String },
    #[error("no issue or pull request `{repo}#{number}` in the simulated GitHub")]
    NoItem { repo: String, number: u64 },
    #[error("no comment {id} in `{repo}`")]
    NoComment { repo: String, id: u64 },
    #[error("`{repo}#{number}` is not a pull request")]
    NotPullRequest { repo: String, number: u64 },
    #[error("invalid action: {reason}")]
    Invalid { reason: String },
}

/// A webhook GitHub would send for a change: event name, action and what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Happening {
    pub event: &'static str,
    pub action: &'static str,
    pub repo: String,
    pub number: u64,
    pub sender: String,
    pub detail: HappeningDetail,
}

/// The object a webhook carries besides the item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HappeningDetail {
    None,
    Label(String),
    Comment(u64),
    Review(u64),
    ReviewComment(u64),
    WorkflowRun(u64),
}

/// A GitHub account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: u64,
    pub login: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Label {
    pub id: u64,
    pub name: String,
    pub color: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reaction {
    pub id: u64,
    pub user: String,
    pub content: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Comment {
    pub id: u64,
    pub author: String,
    pub body: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub reactions: Vec<Reaction>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Review {
    pub id: u64,
    pub author: String,
    pub body: String,
    pub state: ReviewState,
    /// `None` while pending.
    pub submitted_at: Option<Timestamp>,
    pub reactions: Vec<Reaction>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewComment {
    pub id: u64,
    pub review_id: u64,
    pub author: String,
    pub body: String,
    pub path: String,
    pub line: u64,
    pub created_at: Timestamp,
    pub reactions: Vec<Reaction>,
}

/// Where the entry with numeric id `id` is in `list`. Entries are pushed as they are made
/// and ids on a surface only grow, so every list is sorted by id and a lookup is a binary
/// search: a soak's hundred thousand comments must not make each reaction a scan.
fn position_by_id<T>(list: &[T], id: u64, id_of: impl FnMut(&T) -> u64) -> Option<usize> {
    list.binary_search_by_key(&id, id_of).ok()
}

/// A completed GitHub Actions workflow run on a pull request's head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowRun {
    pub id: u64,
    pub workflow_id: u64,
    pub name: String,
    /// The pull request it ran for.
    pub number: u64,
    pub actor: String,
    pub head_sha: String,
    pub head_branch: String,
    /// `success` or `failure`.
    pub conclusion: String,
    pub created_at: Timestamp,
    pub completed_at: Timestamp,
    pub jobs: Vec<RunJob>,
}

/// A job of a workflow run; its id is also its check run's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunJob {
    pub id: u64,
    pub name: String,
    pub conclusion: String,
    pub steps: Vec<StepDraft>,
    pub annotations: Vec<AnnotationDraft>,
    pub log: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pull {
    pub head_ref: String,
    pub head_sha: String,
    pub base_ref: String,
    pub merged_at: Option<Timestamp>,
    pub merged_by: Option<String>,
    /// Issues the body's closing keywords name: `(owner/repo, number)`.
    pub closes: Vec<(String, u64)>,
    pub reviews: Vec<Review>,
    pub review_comments: Vec<ReviewComment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    pub number: u64,
    pub id: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub state_reason: Option<String>,
    pub closed_by: Option<String>,
    pub closed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub comments: Vec<Comment>,
    pub reactions: Vec<Reaction>,
    pub pull: Option<Pull>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repo {
    pub id: u64,
    pub owner: String,
    pub name: String,
    pub created_at: Timestamp,
    pub labels: BTreeMap<String, Label>,
    pub items: BTreeMap<u64, Item>,
    /// Whether the Issues feature is on (GitHub answers 410 for issues when it is off).
    pub has_issues: bool,
    pub runs: BTreeMap<u64, WorkflowRun>,
}

impl Repo {
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

/// The whole simulated GitHub.
#[derive(Debug, Clone, Serialize)]
pub struct World {
    next_id: u64,
    /// The numeric ids of conversation comments, reviews and inline review comments: three
    /// sequences of their own, as on GitHub, so one pull request can hold a comment, a
    /// review and an inline comment with the same number (only node ids tell them apart).
    surface_ids: [u64; 3],
    last_tick: Timestamp,
    pub users: BTreeMap<String, User>,
    /// Keyed by lower-cased `owner/name` (GitHub compares names without case).
    pub repos: BTreeMap<String, Repo>,
}

impl World {
    /// An empty world whose clock starts at `now`, in whole seconds as GitHub's.
    pub fn new(now: Timestamp) -> Self {
        Self {
            next_id: 1000,
            surface_ids: [1000; 3],
            last_tick: Timestamp::from_second(now.as_second()).unwrap_or(now),
            users: BTreeMap::new(),
            repos: BTreeMap::new(),
        }
    }

    /// The repository named `repo` (any case).
    pub fn repo(&self, repo: &str) -> Result<&Repo, WorldError> {
        self.repos
            .get(&repo.to_ascii_lowercase())
            .ok_or_else(|| WorldError::NoRepo { repo: repo.to_owned() })
    }

    pub fn item(&self, repo: &str, number: u64) -> Result<&Item, WorldError> {
        self.repo(repo)?
            .items
            .get(&number)
            .ok_or_else(|| WorldError::NoItem { repo: repo.to_owned(), number })
    }

    /// The user `login`, created on first sight.
    pub fn user(&mut self, login: &str) -> User {
        if let Some(user) = self.users.get(login) {
            return user.clone();
        }
        let user = User { id: self.id(), login: login.to_owned() };
        self.users.insert(login.to_owned(), user.clone());
        user
    }

    /// Applies `action` at `now`, returning what it created and the webhooks it causes.
    pub fn apply(
        &mut self,
        action: Action,
        now: Timestamp,
    ) -> Result<(Outcome, Vec<Happening>), WorldError> {
        let at = self.tick(now);
        match action {
            Action::CreateRepo { repo } => {
                let parsed: RepoRef = repo.parse().map_err(|err: loop_core::RefError| {
                    WorldError::Invalid { reason: err.to_string() }
                })?;
                let key = repo.to_ascii_lowercase();
                if !self.repos.contains_key(&key) {
                    let id = self.id();
                    self.user(parsed.owner());
                    self.repos.insert(
                        key,
                        Repo {
                            id,
                            owner: parsed.owner().to_owned(),
                            name: parsed.name().to_owned(),
                            created_at: at,
                            labels: BTreeMap::new(),
                            items: BTreeMap::new(),
                            has_issues: true,
                            runs: BTreeMap::new(),
                        },
                    );
                }
                Ok((Outcome::default(), Vec::new()))
            }
            Action::CompleteRun { repo, number, actor, workflow, jobs } => {
                self.complete_run(&repo, number, &actor, workflow, jobs, at)
            }
            Action::SetIssuesEnabled { repo, enabled } => {
                self.repos
                    .get_mut(&repo.to_ascii_lowercase())
                    .ok_or_else(|| WorldError::NoRepo { repo: repo.clone() })?
                    .has_issues = enabled;
                Ok((Outcome::default(), Vec::new()))
            }
            Action::OpenIssue { repo, author, title, body, labels } => {
                self.open_item(&repo, &author, title, body, labels, None, at)
            }
            Action::OpenPullRequest { repo, author, title, body, head_ref, labels } => {
                let pull = Pull {
                    head_sha: format!("{:040x}", self.id()),
                    head_ref,
                    base_ref: "main".to_owned(),
                    merged_at: None,
                    merged_by: None,
                    closes: closing_references(&body, &repo),
                    reviews: Vec::new(),
                    review_comments: Vec::new(),
                };
                self.open_item(&repo, &author, title, body, labels, Some(pull), at)
            }
            Action::Label { repo, number, actor, label } => {
                self.user(&actor);
                self.ensure_label(&repo, &label)?;
                let item = self.item_mut(&repo, number)?;
                if item.labels.iter().any(|l| l.eq_ignore_ascii_case(&label)) {
                    return Ok((Outcome::default(), Vec::new()));
                }
                item.labels.push(label.clone());
                Ok(label_changed(item, "labeled", &repo, number, &actor, label, at))
            }
            Action::Unlabel { repo, number, actor, label } => {
                self.user(&actor);
                let item = self.item_mut(&repo, number)?;
                let before = item.labels.len();
                item.labels.retain(|l| !l.eq_ignore_ascii_case(&label));
                if item.labels.len() == before {
                    return Ok((Outcome::default(), Vec::new()));
                }
                Ok(label_changed(item, "unlabeled", &repo, number, &actor, label, at))
            }
            Action::Comment { repo, number, author, body } => {
                if body.trim().is_empty() {
                    return Err(WorldError::Invalid { reason: "a comment needs a body".into() });
                }
                self.user(&author);
                let id = self.surface_id(CONVERSATION);
                let item = self.item_mut(&repo, number)?;
                item.comments.push(Comment {
                    id,
                    author: author.clone(),
                    body,
                    created_at: at,
                    updated_at: at,
                    reactions: Vec::new(),
                });
                item.updated_at = at;
                Ok(comment_changed("created", &repo, number, &author, id))
            }
            Action::EditComment { repo, id, actor, body } => {
                if body.trim().is_empty() {
                    return Err(WorldError::Invalid { reason: "a comment needs a body".into() });
                }
                self.user(&actor);
                let number = self.comment(&repo, id)?.0;
                let item = self.item_mut(&repo, number)?;
                if let Some(at_index) = position_by_id(&item.comments, id, |c| c.id) {
                    let comment = &mut item.comments[at_index];
                    comment.body = body;
                    comment.updated_at = at;
                }
                item.updated_at = at;
                Ok(comment_changed("edited", &repo, number, &actor, id))
            }
            Action::Review { repo, number, author, state, body, comments } => {
                self.user(&author);
                let review_id = self.surface_id(REVIEW);
                let comment_ids: Vec<u64> =
                    comments.iter().map(|_| self.surface_id(INLINE)).collect();
                let item = self.item_mut(&repo, number)?;
                let pending = state == ReviewState::Pending;
                let pull = item
                    .pull
                    .as_mut()
                    .ok_or_else(|| WorldError::NotPullRequest { repo: repo.clone(), number })?;
                pull.reviews.push(Review {
                    id: review_id,
                    author: author.clone(),
                    body,
                    state,
                    submitted_at: (!pending).then_some(at),
                    reactions: Vec::new(),
                });
                let mut happenings = Vec::new();
                if !pending {
                    happenings.push(happening(
                        "pull_request_review",
                        "submitted",
                        &repo,
                        number,
                        &author,
                        HappeningDetail::Review(review_id),
                    ));
                }
                for (draft, id) in comments.into_iter().zip(comment_ids) {
                    pull.review_comments.push(ReviewComment {
                        id,
                        review_id,
                        author: author.clone(),
                        body: draft.body,
                        path: draft.path,
                        line: draft.line,
                        created_at: at,
                        reactions: Vec::new(),
                    });
                    if !pending {
                        happenings.push(happening(
                            "pull_request_review_comment",
                            "created",
                            &repo,
                            number,
                            &author,
                            HappeningDetail::ReviewComment(id),
                        ));
                    }
                }
                if !pending {
                    item.updated_at = at;
                }
                Ok((
                    Outcome {
                        id: Some(review_id),
                        node_id: Some(node_id("PRR", review_id)),
                        ..Outcome::default()
                    },
                    happenings,
                ))
            }
            Action::Merge { repo, number, actor } => {
                self.user(&actor);
                let item = self.item_mut(&repo, number)?;
                let pull = item
                    .pull
                    .as_mut()
                    .ok_or_else(|| WorldError::NotPullRequest { repo: repo.clone(), number })?;
                if pull.merged_at.is_some() || !item.open {
                    return Err(WorldError::Invalid {
                        reason: format!("{repo}#{number} is not open"),
                    });
                }
                pull.merged_at = Some(at);
                pull.merged_by = Some(actor.clone());
                let closes = pull.closes.clone();
                close(item, &actor, None, at);
                let mut happenings = vec![happening(
                    "pull_request",
                    "closed",
                    &repo,
                    number,
                    &actor,
                    HappeningDetail::None,
                )];
                for (issue_repo, issue) in closes {
                    if let Ok(linked) = self.item_mut(&issue_repo, issue)
                        && linked.open
                        && linked.pull.is_none()
                    {
                        close(linked, &actor, Some("completed".to_owned()), at);
                        happenings.push(happening(
                            "issues",
                            "closed",
                            &issue_repo,
                            issue,
                            &actor,
                            HappeningDetail::None,
                        ));
                    }
                }
                Ok((Outcome::default(), happenings))
            }
            Action::Close { repo, number, actor, reason } => {
                self.user(&actor);
                let item = self.item_mut(&repo, number)?;
                if !item.open {
                    return Ok((Outcome::default(), Vec::new()));
                }
                let reason = match (&item.pull, reason) {
                    (Some(_), _) => None,
                    (None, reason) => Some(reason.unwrap_or_else(|| "completed".to_owned())),
                };
                close(item, &actor, reason, at);
                let event = item_event(item);
                Ok((
                    Outcome::default(),
                    vec![happening(event, "closed", &repo, number, &actor, HappeningDetail::None)],
                ))
            }
            Action::Reopen { repo, number, actor } => {
                self.user(&actor);
                let item = self.item_mut(&repo, number)?;
                if item.open || item.pull.as_ref().is_some_and(|p| p.merged_at.is_some()) {
                    return Ok((Outcome::default(), Vec::new()));
                }
                item.open = true;
                item.state_reason = item.pull.is_none().then(|| "reopened".to_owned());
                item.closed_at = None;
                item.closed_by = None;
                item.updated_at = at;
                let event = item_event(item);
                Ok((
                    Outcome::default(),
                    vec![happening(
                        event,
                        "reopened",
                        &repo,
                        number,
                        &actor,
                        HappeningDetail::None,
                    )],
                ))
            }
            Action::React { target, actor, content } => {
                const CONTENTS: [&str; 8] =
                    ["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"];
                if !CONTENTS.contains(&content.as_str()) {
                    return Err(WorldError::Invalid {
                        reason: format!("`{content}` is not a reaction"),
                    });
                }
                self.user(&actor);
                let id = self.id();
                let reactions = self.reactions_mut(&target)?;
                if let Some(existing) =
                    reactions.iter().find(|r| r.user == actor && r.content == content)
                {
                    let id = existing.id;
                    return Ok((
                        Outcome {
                            id: Some(id),
                            node_id: Some(node_id("REA", id)),
                            existed: true,
                            ..Outcome::default()
                        },
                        Vec::new(),
                    ));
                }
                reactions.push(Reaction { id, user: actor, content, created_at: at });
                Ok((
                    Outcome {
                        id: Some(id),
                        node_id: Some(node_id("REA", id)),
                        ..Outcome::default()
                    },
                    Vec::new(),
                ))
            }
        }
    }

    /// Finds a conversation comment by id: the item number and the comment.
    pub fn comment(&self, repo: &str, id: u64) -> Result<(u64, &Comment), WorldError> {
        self.repo(repo)?
            .items
            .values()
            .find_map(|item| {
                let at = position_by_id(&item.comments, id, |c| c.id)?;
                Some((item.number, &item.comments[at]))
            })
            .ok_or_else(|| WorldError::NoComment { repo: repo.to_owned(), id })
    }

    /// Finds an inline review comment by id: the pull request number and the comment.
    pub fn review_comment(&self, repo: &str, id: u64) -> Result<(u64, &ReviewComment), WorldError> {
        self.repo(repo)?
            .items
            .values()
            .find_map(|item| {
                let pull = item.pull.as_ref()?;
                let at = position_by_id(&pull.review_comments, id, |c| c.id)?;
                Some((item.number, &pull.review_comments[at]))
            })
            .ok_or_else(|| WorldError::NoComment { repo: repo.to_owned(), id })
    }

    /// Finds a submitted review by id: the pull request number.
    fn review(&self, repo: &str, id: u64) -> Result<u64, WorldError> {
        self.repo(repo)?
            .items
            .values()
            .find(|item| {
                item.pull.as_ref().is_some_and(|p| {
                    p.reviews.iter().any(|r| r.id == id && r.submitted_at.is_some())
                })
            })
            .map(|item| item.number)
            .ok_or_else(|| WorldError::NoComment { repo: repo.to_owned(), id })
    }

    /// What a GraphQL node id names, when it is something reactions go on: an issue
    /// (`I_`), a pull request (`PR_`), a conversation comment (`IC_`), a submitted review
    /// (`PRR_`) or an inline review comment (`PRRC_`).
    pub fn reaction_subject(&self, node: &str) -> Option<ReactionSubject> {
        let (prefix, id) = node.split_once("_kwDOSim")?;
        let id: u64 = id.parse().ok()?;
        if node_id(prefix, id) != node {
            return None;
        }
        self.repos.values().find_map(|repo| {
            let name = repo.full_name();
            repo.items.values().find_map(|item| {
                let pull = item.pull.as_ref();
                match prefix {
                    "I" | "PR" => (item.id == id && pull.is_some() == (prefix == "PR"))
                        .then(|| ReactionSubject::Item { repo: name.clone(), number: item.number }),
                    "IC" => position_by_id(&item.comments, id, |c| c.id)
                        .map(|_| ReactionSubject::IssueComment { repo: name.clone(), id }),
                    "PRR" => pull
                        .is_some_and(|p| {
                            p.reviews.iter().any(|r| r.id == id && r.submitted_at.is_some())
                        })
                        .then(|| ReactionSubject::Review { repo: name.clone(), id }),
                    "PRRC" => pull
                        .and_then(|p| position_by_id(&p.review_comments, id, |c| c.id))
                        .map(|_| ReactionSubject::ReviewComment { repo: name.clone(), id }),
                    _ => None,
                }
            })
        })
    }

    #[allow(clippy::too_many_arguments, reason = "one place builds issues and pull requests alike")]
    fn open_item(
        &mut self,
        repo: &str,
        author: &str,
        title: String,
        body: String,
        labels: Vec<String>,
        pull: Option<Pull>,
        at: Timestamp,
    ) -> Result<(Outcome, Vec<Happening>), WorldError> {
        if title.trim().is_empty() {
            return Err(WorldError::Invalid { reason: "an issue needs a title".into() });
        }
        self.user(author);
        for label in &labels {
            self.ensure_label(repo, label)?;
        }
        let id = self.id();
        let key = repo.to_ascii_lowercase();
        let entry =
            self.repos.get_mut(&key).ok_or_else(|| WorldError::NoRepo { repo: repo.to_owned() })?;
        let number = entry.items.keys().next_back().map_or(1, |n| n + 1);
        let is_pull = pull.is_some();
        entry.items.insert(
            number,
            Item {
                number,
                id,
                title,
                body,
                author: author.to_owned(),
                labels: labels.clone(),
                open: true,
                state_reason: None,
                closed_by: None,
                closed_at: None,
                created_at: at,
                updated_at: at,
                comments: Vec::new(),
                reactions: Vec::new(),
                pull,
            },
        );
        let event = if is_pull { "pull_request" } else { "issues" };
        let mut happenings =
            vec![happening(event, "opened", repo, number, author, HappeningDetail::None)];
        happenings.extend(
            labels.into_iter().map(|l| {
                happening(event, "labeled", repo, number, author, HappeningDetail::Label(l))
            }),
        );
        let prefix = if is_pull { "PR" } else { "I" };
        Ok((
            Outcome {
                number: Some(number),
                id: Some(id),
                node_id: Some(node_id(prefix, id)),
                existed: false,
            },
            happenings,
        ))
    }

    fn ensure_label(&mut self, repo: &str, label: &str) -> Result<(), WorldError> {
        let id = self.id();
        let entry = self
            .repos
            .get_mut(&repo.to_ascii_lowercase())
            .ok_or_else(|| WorldError::NoRepo { repo: repo.to_owned() })?;
        entry.labels.entry(label.to_ascii_lowercase()).or_insert_with(|| Label {
            id,
            name: label.to_owned(),
            color: "ededed".to_owned(),
        });
        Ok(())
    }

    fn item_mut(&mut self, repo: &str, number: u64) -> Result<&mut Item, WorldError> {
        self.repos
            .get_mut(&repo.to_ascii_lowercase())
            .ok_or_else(|| WorldError::NoRepo { repo: repo.to_owned() })?
            .items
            .get_mut(&number)
            .ok_or_else(|| WorldError::NoItem { repo: repo.to_owned(), number })
    }

    fn reactions_mut(
        &mut self,
        target: &ReactionSubject,
    ) -> Result<&mut Vec<Reaction>, WorldError> {
        match target {
            ReactionSubject::Item { repo, number } => {
                Ok(&mut self.item_mut(repo, *number)?.reactions)
            }
            ReactionSubject::IssueComment { repo, id } => {
                let (number, _) = self.comment(repo, *id)?;
                let item = self.item_mut(repo, number)?;
                position_by_id(&item.comments, *id, |c| c.id)
                    .map(|at| &mut item.comments[at].reactions)
                    .ok_or_else(|| WorldError::NoComment { repo: repo.clone(), id: *id })
            }
            ReactionSubject::Review { repo, id } => {
                let number = self.review(repo, *id)?;
                let item = self.item_mut(repo, number)?;
                item.pull
                    .as_mut()
                    .and_then(|p| p.reviews.iter_mut().find(|r| r.id == *id))
                    .map(|r| &mut r.reactions)
                    .ok_or_else(|| WorldError::NoComment { repo: repo.clone(), id: *id })
            }
            ReactionSubject::ReviewComment { repo, id } => {
                let (number, _) = self.review_comment(repo, *id)?;
                let item = self.item_mut(repo, number)?;
                item.pull
                    .as_mut()
                    .and_then(|p| {
                        let at = position_by_id(&p.review_comments, *id, |c| c.id)?;
                        Some(&mut p.review_comments[at].reactions)
                    })
                    .ok_or_else(|| WorldError::NoComment { repo: repo.clone(), id: *id })
            }
        }
    }

    /// The workflow run `id` of `repo`.
    pub fn run(&self, repo: &str, id: u64) -> Result<&WorkflowRun, WorldError> {
        self.repo(repo)?
            .runs
            .get(&id)
            .ok_or_else(|| WorldError::NoItem { repo: repo.to_owned(), number: id })
    }

    /// The job `id` (of any run, in any repository) and its run.
    pub fn job(&self, id: u64) -> Option<(&WorkflowRun, &RunJob)> {
        self.repos
            .values()
            .flat_map(|r| r.runs.values())
            .find_map(|run| run.jobs.iter().find(|job| job.id == id).map(|job| (run, job)))
    }

    fn complete_run(
        &mut self,
        repo: &str,
        number: u64,
        actor: &str,
        workflow: String,
        drafts: Vec<JobDraft>,
        at: Timestamp,
    ) -> Result<(Outcome, Vec<Happening>), WorldError> {
        self.user(actor);
        let (id, workflow_id) = (self.id(), self.id());
        let jobs: Vec<RunJob> = drafts
            .into_iter()
            .map(|draft| {
                let failed = draft.steps.iter().any(|s| s.failed);
                RunJob {
                    id: self.id(),
                    name: draft.name,
                    conclusion: if failed { "failure" } else { "success" }.to_owned(),
                    steps: draft.steps,
                    annotations: draft.annotations,
                    log: draft.log,
                }
            })
            .collect();
        let item = self.item(repo, number)?;
        let pull = item
            .pull
            .as_ref()
            .ok_or_else(|| WorldError::NotPullRequest { repo: repo.to_owned(), number })?;
        let conclusion =
            if jobs.iter().any(|j| j.conclusion == "failure") { "failure" } else { "success" };
        let run = WorkflowRun {
            id,
            workflow_id,
            name: workflow,
            number,
            actor: actor.to_owned(),
            head_sha: pull.head_sha.clone(),
            head_branch: pull.head_ref.clone(),
            conclusion: conclusion.to_owned(),
            created_at: at,
            completed_at: at,
            jobs,
        };
        self.repos
            .get_mut(&repo.to_ascii_lowercase())
            .ok_or_else(|| WorldError::NoRepo { repo: repo.to_owned() })?
            .runs
            .insert(id, run);
        let sent = happening(
            "workflow_run",
            "completed",
            repo,
            number,
            actor,
            HappeningDetail::WorkflowRun(id),
        );
        Ok((
            Outcome { id: Some(id), node_id: Some(node_id("WFR", id)), ..Outcome::default() },
            vec![sent],
        ))
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The next numeric id on a comment surface (see `surface_ids`).
    fn surface_id(&mut self, surface: usize) -> u64 {
        self.surface_ids[surface] += 1;
        self.surface_ids[surface]
    }

    /// The time of a change: `now` truncated to the second, but always at least one second
    /// after the previous change.
    fn tick(&mut self, now: Timestamp) -> Timestamp {
        let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
        let next = self
            .last_tick
            .checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap_or(self.last_tick);
        self.last_tick = now.max(next);
        self.last_tick
    }
}

/// Indexes of `World::surface_ids`.
const CONVERSATION: usize = 0;
const REVIEW: usize = 1;
const INLINE: usize = 2;

/// GitHub's node id shape: a type prefix, `_`, an opaque base64-ish tail.
pub fn node_id(prefix: &str, id: u64) -> String {
    format!("{prefix}_kwDOSim{id:010}")
}

fn item_event(item: &Item) -> &'static str {
    if item.pull.is_some() { "pull_request" } else { "issues" }
}

/// What adding or removing `label` on `item` answers: nothing, and its `issues` or
/// `pull_request` webhook with `action` (`labeled`, `unlabeled`). The item was updated.
fn label_changed(
    item: &mut Item,
    action: &'static str,
    repo: &str,
    number: u64,
    sender: &str,
    label: String,
    at: Timestamp,
) -> (Outcome, Vec<Happening>) {
    item.updated_at = at;
    let labeled =
        happening(item_event(item), action, repo, number, sender, HappeningDetail::Label(label));
    (Outcome::default(), vec![labeled])
}

/// What creating or editing conversation comment `id` answers: its ids, and its
/// `issue_comment` webhook with `action`.
fn comment_changed(
    action: &'static str,
    repo: &str,
    number: u64,
    sender: &str,
    id: u64,
) -> (Outcome, Vec<Happening>) {
    let outcome = Outcome { id: Some(id), node_id: Some(node_id("IC", id)), ..Outcome::default() };
    let comment = HappeningDetail::Comment(id);
    (outcome, vec![happening("issue_comment", action, repo, number, sender, comment)])
}

fn happening(
    event: &'static str,
    action: &'static str,
    repo: &str,
    number: u64,
    sender: &str,
    detail: HappeningDetail,
) -> Happening {
    Happening { event, action, repo: repo.to_owned(), number, sender: sender.to_owned(), detail }
}

fn close(item: &mut Item, actor: &str, reason: Option<String>, at: Timestamp) {
    item.open = false;
    item.state_reason = reason;
    item.closed_by = Some(actor.to_owned());
    item.closed_at = Some(at);
    item.updated_at = at;
}

/// The issues named by GitHub's closing keywords (`close[sd]`, `fix(es|ed)`,
/// `resolve[sd]`, any case, optional colon) followed by `#N` (in `repo`) or
/// `owner/name#N`, as `(owner/name, N)`.
pub fn closing_references(body: &str, repo: &str) -> Vec<(String, u64)> {
    const KEYWORDS: [&str; 9] =
        ["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"];
    let words: Vec<&str> = body.split_whitespace().collect();
    let mut refs = Vec::new();
    for pair in words.windows(2) {
        let keyword = pair[0].trim_end_matches(':').to_ascii_lowercase();
        let target = pair[1].trim_end_matches(|c: char| !c.is_ascii_digit());
        let Some((target_repo, number)) = target.rsplit_once('#') else { continue };
        let target_repo = if target_repo.is_empty() { repo } else { target_repo };
        if KEYWORDS.contains(&keyword.as_str())
            && target_repo.parse::<RepoRef>().is_ok()
            && let Ok(n) = number.parse::<u64>()
        {
            let linked = (target_repo.to_owned(), n);
            if !refs.contains(&linked) {
                refs.push(linked);
            }
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn world() -> World {
        let mut w = World::new(t0());
        w.apply(Action::CreateRepo { repo: "octo/app".into() }, t0()).unwrap();
        w
    }

    fn open_issue(w: &mut World) -> u64 {
        let action = Action::OpenIssue {
            repo: "octo/app".into(),
            author: "alice".into(),
            title: "Bug".into(),
            body: String::new(),
            labels: vec!["the-loop: auto-execute".into()],
        };
        w.apply(action, t0()).unwrap().0.number.unwrap()
    }

    #[test]
    fn closing_keywords_link_issue_numbers() {
        let app = |n| ("octo/app".to_owned(), n);
        assert_eq!(
            closing_references("Closes #12, fixes: #3.\nResolved #12 and see #4", "octo/app"),
            vec![app(12), app(3)]
        );
        assert_eq!(
            closing_references("fixes octo/lib#7.", "octo/app"),
            vec![("octo/lib".to_owned(), 7)]
        );
        for unlinked in ["closes the bug #1", "closes a/b/c#1", "see #2"] {
            assert!(closing_references(unlinked, "octo/app").is_empty(), "{unlinked}");
        }
    }

    #[test]
    fn comments_bump_updated_at_and_reactions_do_not() {
        let mut w = world();
        let n = open_issue(&mut w);
        let opened = w.item("octo/app", n).unwrap().updated_at;
        let comment = Action::Comment {
            repo: "octo/app".into(),
            number: n,
            author: "bob".into(),
            body: "hi".into(),
        };
        let (outcome, happenings) = w.apply(comment, t0()).unwrap();
        let commented = w.item("octo/app", n).unwrap().updated_at;
        assert!(commented > opened);
        assert_eq!(happenings[0].event, "issue_comment");
        let react = Action::React {
            target: ReactionSubject::IssueComment {
                repo: "octo/app".into(),
                id: outcome.id.unwrap(),
            },
            actor: "op".into(),
            content: "eyes".into(),
        };
        assert!(!w.apply(react.clone(), t0()).unwrap().0.existed);
        assert!(w.apply(react, t0()).unwrap().0.existed);
        assert_eq!(w.item("octo/app", n).unwrap().updated_at, commented);
    }

    #[test]
    fn pending_reviews_are_silent_and_merging_closes_linked_issues() {
        let mut w = world();
        let issue = open_issue(&mut w);
        let pr = Action::OpenPullRequest {
            repo: "octo/app".into(),
            author: "alice".into(),
            title: "Fix".into(),
            body: format!("Closes #{issue}"),
            head_ref: "issue-1".into(),
            labels: vec![],
        };
        let pr = w.apply(pr, t0()).unwrap().0.number.unwrap();
        let before = w.item("octo/app", pr).unwrap().updated_at;
        let pending = Action::Review {
            repo: "octo/app".into(),
            number: pr,
            author: "bob".into(),
            state: ReviewState::Pending,
            body: "draft".into(),
            comments: vec![InlineDraft { path: "a.rs".into(), line: 3, body: "x".into() }],
        };
        assert!(w.apply(pending, t0()).unwrap().1.is_empty());
        assert_eq!(w.item("octo/app", pr).unwrap().updated_at, before);
        let merge = Action::Merge { repo: "octo/app".into(), number: pr, actor: "carol".into() };
        let happenings = w.apply(merge, t0()).unwrap().1;
        let kinds: Vec<_> = happenings.iter().map(|h| (h.event, h.action, h.number)).collect();
        assert_eq!(kinds, vec![("pull_request", "closed", pr), ("issues", "closed", issue)]);
        let closed = w.item("octo/app", issue).unwrap();
        assert_eq!(closed.closed_by.as_deref(), Some("carol"));
        assert_eq!(closed.state_reason.as_deref(), Some("completed"));
    }
}
