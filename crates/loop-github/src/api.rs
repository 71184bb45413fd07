//! The GitHub operations the-loop needs, as typed calls on [`GithubClient`].
//!
//! Each operation names the REST path (or GraphQL field) it uses in its doc comment; the
//! contract tests check every one of them against GitHub's OpenAPI description. Answers
//! are decoded into the few fields the-loop reads; a missing or mistyped field is a
//! [`GithubError::Malformed`], never a panic or a silent default that could be acted on.

use std::collections::BTreeMap;
use std::sync::Arc;

use loop_core::{RepoRef, WorkItemRef, ci};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client::{
    ApiEndpoints, Clock, GithubSettings, RateLimit, Resource, Reuse, SystemClock, Tail, Transport,
    Validator, malformed,
};
use crate::error::GithubError;
use crate::token::TokenSource;

/// How many pull requests one GraphQL request asks about.
const LINKED_ISSUES_BATCH: usize = 50;
/// How many closing references are read per pull request.
const LINKED_ISSUES_PER_PR: usize = 25;
/// The reaction mutation; subject and content are variables, never spliced in.
const ADD_REACTION: &str = "mutation AddReaction($subjectId: ID!, $content: ReactionContent!) { addReaction(input: {subjectId: $subjectId, content: $content}) { reaction { content } subject { id } } }";

/// Whether a work item is an issue or a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Issue,
    PullRequest,
}

/// Open or closed, as GitHub reports `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemState {
    Open,
    Closed,
}

/// One row of a repository's labelled open items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedItem {
    pub item: WorkItemRef,
    pub node_id: String,
    pub kind: ItemKind,
    pub title: String,
    /// The description (for a pull request, the text that may say `Closes #N`).
    pub body: String,
    pub html_url: String,
    /// Who opened it.
    pub author: String,
    pub labels: Vec<String>,
    /// GitHub's `updated_at`; it moves on every comment, review, label or state change,
    /// so the poller reads the comment surfaces only of items whose value moved.
    pub updated_at: String,
}

/// A repository's labelled open items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub items: Vec<ListedItem>,
    /// Every page was answered 304 Not Modified: nothing changed since the last listing.
    pub unchanged: bool,
}

/// What an item's own read says about it (`GET /repos/{o}/{r}/issues/{n}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemStatus {
    pub item: WorkItemRef,
    pub node_id: String,
    pub kind: ItemKind,
    pub title: String,
    pub html_url: String,
    pub state: ItemState,
    /// `completed`, `not_planned`, `reopened`, … when GitHub gives one.
    pub state_reason: Option<String>,
    /// A pull request that was merged (`pull_request.merged_at` set).
    pub merged: bool,
    /// Who closed it, when closed and GitHub says.
    pub closed_by: Option<String>,
    pub updated_at: String,
}

/// A pull request's own read (`GET /repos/{o}/{r}/pulls/{n}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub item: WorkItemRef,
    pub node_id: String,
    pub title: String,
    pub body: String,
    /// The head branch name (`head.ref`).
    pub head_ref: String,
    pub state: ItemState,
    pub merged: bool,
    pub author: String,
    pub html_url: String,
    pub updated_at: String,
}

/// Which of a thread's surfaces a comment was written on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum CommentSurface {
    /// The conversation of an issue or pull request (`IC_…` node ids).
    Conversation,
    /// The body of a submitted pull-request review (`PRR_…`); `state` is `APPROVED`,
    /// `CHANGES_REQUESTED`, `COMMENTED` or `DISMISSED`.
    Review { state: String },
    /// An inline review comment on a line of the diff (`PRRC_…`); `line` falls back to
    /// `original_line` when the line is outdated. `review` is the numeric id of the review
    /// it was submitted with (`pull_request_review_id`).
    Inline {
        path: String,
        line: Option<u64>,
        #[serde(default)]
        review: Option<u64>,
    },
}

/// A comment on any surface of a thread (serializable, so a poller can remember a thread
/// across processes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadComment {
    /// GitHub's numeric id (what reactions address).
    pub id: u64,
    /// GitHub's node id (the dedup key across ingresses).
    pub node_id: String,
    pub surface: CommentSurface,
    pub body: String,
    /// `""` when GitHub reports no user (a deleted account).
    pub author: String,
    /// `created_at`, or `submitted_at` for reviews.
    pub created_at: String,
    /// `updated_at` (moves when the comment is edited), or `submitted_at` for reviews.
    /// Empty in a thread remembered by an older version.
    #[serde(default)]
    pub updated_at: String,
    pub html_url: String,
}

impl ThreadComment {
    /// Where the surface comes in a thread's order when creation times tie: conversation,
    /// reviews, inline (as the reference merges them).
    fn surface_rank(&self) -> u8 {
        match self.surface {
            CommentSurface::Conversation => 0,
            CommentSurface::Review { .. } => 1,
            CommentSurface::Inline { .. } => 2,
        }
    }
}

/// Where an incremental read of a thread starts on each surface GitHub reads with
/// `since=`: the newest `updated_at` GitHub itself reported there, verbatim (never this
/// machine's clock, which may be skewed from GitHub's). `None`: read the surface whole.
/// Reviews have no `since` parameter; they are always read whole, conditionally.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadSince {
    pub conversation: Option<String>,
    pub inline: Option<String>,
}

impl ThreadSince {
    /// The newest `updated_at` on each surface of `thread` (as GitHub wrote it; a value
    /// that does not parse is passed over).
    pub fn of(thread: &[ThreadComment]) -> Self {
        let newest = |on: fn(&CommentSurface) -> bool| {
            thread
                .iter()
                .filter(|c| on(&c.surface))
                .filter_map(|c| Some((c.updated_at.parse::<jiff::Timestamp>().ok()?, c)))
                .max_by_key(|(at, _)| *at)
                .map(|(_, c)| c.updated_at.clone())
        };
        Self {
            conversation: newest(|s| matches!(s, CommentSurface::Conversation)),
            inline: newest(|s| matches!(s, CommentSurface::Inline { .. })),
        }
    }
}

/// Puts a thread in thread order: stably by creation time, ties in the order
/// conversation, reviews, inline.
fn thread_order(thread: &mut [ThreadComment]) {
    thread.sort_by(|a, b| {
        (a.created_at.as_str(), a.surface_rank()).cmp(&(b.created_at.as_str(), b.surface_rank()))
    });
}

/// Merges the comments an incremental read returned into the thread read before: each
/// replaces the comment with its node id (an edit, or one seen again at the inclusive
/// `since` boundary) or joins the thread, which stays in thread order. A comment deleted
/// since is not noticed here; the next whole read drops it.
pub fn merge_thread(thread: &mut Vec<ThreadComment>, changes: Vec<ThreadComment>) {
    let mut by_node: std::collections::HashMap<String, usize> =
        thread.iter().enumerate().map(|(at, c)| (c.node_id.clone(), at)).collect();
    for comment in changes {
        match by_node.get(&comment.node_id) {
            Some(&at) => thread[at] = comment,
            None => {
                by_node.insert(comment.node_id.clone(), thread.len());
                thread.push(comment);
            }
        }
    }
    thread_order(thread);
}

/// A comment the-loop just wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedComment {
    pub id: u64,
    pub node_id: String,
    pub html_url: String,
}

/// What a reaction is put on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactionTarget {
    /// Any reactable subject by its GraphQL node id (`IC_…`, `PRR_…`, `PRRC_…`, `I_…`,
    /// `PR_…`): the one way that reaches every surface, a pull-request review included
    /// (it has no REST reactions endpoint).
    Node(String),
    /// The issue or pull request itself.
    Item(WorkItemRef),
    /// A conversation comment (numeric id).
    IssueComment { repo: RepoRef, id: u64 },
    /// An inline review comment (numeric id).
    ReviewComment { repo: RepoRef, id: u64 },
}

/// GitHub's reaction contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    ThumbsUp,
    ThumbsDown,
    Laugh,
    Confused,
    Heart,
    Hooray,
    Rocket,
    Eyes,
}

impl Reaction {
    /// The REST spelling (`+1`, `eyes`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Reaction::ThumbsUp => "+1",
            Reaction::ThumbsDown => "-1",
            Reaction::Laugh => "laugh",
            Reaction::Confused => "confused",
            Reaction::Heart => "heart",
            Reaction::Hooray => "hooray",
            Reaction::Rocket => "rocket",
            Reaction::Eyes => "eyes",
        }
    }

    /// The GraphQL `ReactionContent` spelling (`THUMBS_UP`, `EYES`, …).
    pub fn as_graphql(self) -> &'static str {
        match self {
            Reaction::ThumbsUp => "THUMBS_UP",
            Reaction::ThumbsDown => "THUMBS_DOWN",
            Reaction::Laugh => "LAUGH",
            Reaction::Confused => "CONFUSED",
            Reaction::Heart => "HEART",
            Reaction::Hooray => "HOORAY",
            Reaction::Rocket => "ROCKET",
            Reaction::Eyes => "EYES",
        }
    }
}

/// A GitHub API client for one host.
#[derive(Debug, Clone)]
pub struct GithubClient {
    transport: Transport,
}

impl GithubClient {
    /// A client for `settings.host`, taking its token from `tokens`.
    pub fn new(settings: GithubSettings, tokens: TokenSource) -> Result<Self, GithubError> {
        Self::with_clock(settings, tokens, Arc::new(SystemClock))
    }

    /// The client for `host` as `integrations.github` configures it: `api.baseUrl` (applies
    /// to every host; tests point it at a simulator), the token from the variables named by
    /// `api.tokenEnv` in this process's environment, else `<cli.binary> auth token`.
    pub fn from_config(
        host: &str,
        github: &loop_core::config::GithubIntegration,
    ) -> Result<Self, GithubError> {
        let mut settings = GithubSettings::for_host(host);
        settings.base_url = github.api.base_url.clone();
        let tokens = TokenSource::from_process_env(&settings.host, &github.api.token_env)
            .with_gh_program(&github.cli.binary);
        Self::new(settings, tokens)
    }

    /// A client whose waits (back-off, rate-limit resets) go through `clock`.
    pub fn with_clock(
        settings: GithubSettings,
        tokens: TokenSource,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GithubError> {
        Ok(Self { transport: Transport::new(settings, tokens, clock)? })
    }

    pub fn host(&self) -> &str {
        self.transport.host()
    }

    pub fn endpoints(&self) -> &ApiEndpoints {
        self.transport.endpoints()
    }

    /// The last reported state of each rate-limit bucket (for metrics).
    pub fn rate_limits(&self) -> BTreeMap<Resource, RateLimit> {
        self.transport.rate_limits()
    }

    /// Whether a reaction on `target` now would draw on the last tenth of its rate-limit
    /// bucket before the reset. Reactions are best-effort and leave that reserve to what
    /// must be asked (the poller's reads and linkage query, the-loop's comments): a busy
    /// repository would otherwise spend the GraphQL budget on reactions and leave the
    /// poller waiting up to an hour for its reset.
    pub fn reaction_in_reserve(&self, target: &ReactionTarget) -> bool {
        let resource = match target {
            ReactionTarget::Node(_) => Resource::Graphql,
            _ => Resource::Core,
        };
        self.transport.in_reserve(resource)
    }

    /// Answers received by HTTP status, 304s included (for metrics).
    pub fn answers_by_status(&self) -> BTreeMap<u16, u64> {
        self.transport.answers_by_status()
    }

    /// Every remembered conditional answer, oldest first, to keep across processes.
    pub fn validators(&self) -> Vec<Validator> {
        self.transport.validators()
    }

    /// Gives back validators kept from an earlier process (each used only by a request
    /// with its own token and `Accept`).
    pub fn restore_validators(&self, validators: impl IntoIterator<Item = Validator>) {
        self.transport.restore_validators(validators);
    }

    /// Forgets the remembered answers about `item`: its own read and its comment
    /// surfaces' pages (conversation, reviews, inline comments). For an item the poller no
    /// longer lists, whose pages would otherwise stay in memory and in the poll cache
    /// until evicted by count.
    ///
    /// Pages after the first are read at the URL GitHub's `Link` header gives, which
    /// names the repository by id (`/repositories/{id}/…`), an id not known here: those
    /// of the same number in every repository are forgotten, which costs another item
    /// with that number one full read.
    pub fn forget_threads(&self, item: &WorkItemRef) {
        if self.check_host(&item.to_string(), item.repo()).is_err() {
            return;
        }
        let by_name = self.repo_url(item.repo(), "").to_string();
        let by_id = self.transport.rest_url("/repositories/").to_string();
        let number = item.number().to_string();
        self.transport.forget_answers(|url| {
            let path = url.split('?').next().unwrap_or(url);
            let in_repo = path.strip_prefix(by_name.as_str()).or_else(|| {
                let rest = path.strip_prefix(by_id.as_str())?;
                let id_end = rest.find('/')?;
                rest[..id_end].bytes().all(|b| b.is_ascii_digit()).then(|| &rest[id_end..])
            });
            in_repo.is_some_and(|rest| {
                let of_item = |collection: &str| {
                    rest.strip_prefix(collection)
                        .and_then(|rest| rest.strip_prefix(number.as_str()))
                        .is_some_and(|tail| matches!(tail, "" | "/comments" | "/reviews"))
                };
                of_item("/issues/") || of_item("/pulls/")
            })
        });
    }

    /// Changes whenever a remembered conditional answer is added, replaced or forgotten.
    pub fn validators_generation(&self) -> u64 {
        self.transport.validators_generation()
    }

    /// The open issues and pull requests of `repo` carrying `label`:
    /// `GET /repos/{owner}/{repo}/issues?labels=…&state=open&per_page=100`, every page,
    /// conditionally. Pull requests are the rows with a `pull_request` member.
    pub async fn list_labelled_open_items(
        &self,
        repo: &RepoRef,
        label: &str,
    ) -> Result<Listing, GithubError> {
        self.check_host(&repo.to_string(), repo)?;
        let mut url = self.repo_url(repo, "/issues");
        url.query_pairs_mut()
            .append_pair("labels", label)
            .append_pair("state", "open")
            .append_pair("per_page", "100");
        let (rows, unchanged) =
            self.transport.get_all_pages(url.as_str(), Reuse::Conditional).await?;
        let items = rows
            .into_iter()
            .map(|row| {
                let raw: RawIssue = decode_value(url.as_str(), row)?;
                Ok(ListedItem {
                    item: repo.item(raw.number),
                    kind: raw.kind(),
                    author: login(raw.user.as_ref()),
                    labels: raw.labels.into_iter().map(|l| l.name).collect(),
                    node_id: raw.node_id,
                    title: raw.title,
                    body: raw.body.unwrap_or_default(),
                    html_url: raw.html_url,
                    updated_at: raw.updated_at,
                })
            })
            .collect::<Result<_, GithubError>>()?;
        Ok(Listing { items, unchanged })
    }

    /// The open pull requests of `repo` carrying `label`, for a repository whose Issues
    /// feature is off (its issue listing answers [`GithubError::Gone`]):
    /// `GET /repos/{owner}/{repo}/pulls?state=open&per_page=100`, every page, conditionally.
    /// GitHub cannot filter this listing by label, so rows are filtered here.
    pub async fn list_labelled_open_pull_requests(
        &self,
        repo: &RepoRef,
        label: &str,
    ) -> Result<Listing, GithubError> {
        self.check_host(&repo.to_string(), repo)?;
        let mut url = self.repo_url(repo, "/pulls");
        url.query_pairs_mut().append_pair("state", "open").append_pair("per_page", "100");
        let (rows, unchanged) =
            self.transport.get_all_pages(url.as_str(), Reuse::Conditional).await?;
        let mut items = Vec::new();
        for row in rows {
            let raw: RawPull = decode_value(url.as_str(), row)?;
            if !raw.labels.iter().any(|l| l.name.eq_ignore_ascii_case(label)) {
                continue;
            }
            items.push(ListedItem {
                item: repo.item(raw.number),
                kind: ItemKind::PullRequest,
                author: login(raw.user.as_ref()),
                labels: raw.labels.into_iter().map(|l| l.name).collect(),
                node_id: raw.node_id,
                title: raw.title,
                body: raw.body.unwrap_or_default(),
                html_url: raw.html_url,
                updated_at: raw.updated_at,
            });
        }
        Ok(Listing { items, unchanged })
    }

    /// State, state reason, merged and closer of an issue or pull request:
    /// `GET /repos/{owner}/{repo}/issues/{issue_number}` (one endpoint for both).
    pub async fn read_item(&self, item: &WorkItemRef) -> Result<ItemStatus, GithubError> {
        let url = self.item_url(item, "/issues", "")?;
        let raw: RawIssue = self.get_json(&url).await?;
        Ok(ItemStatus {
            item: item.clone(),
            kind: raw.kind(),
            state: raw.state()?,
            merged: raw.pull_request.as_ref().is_some_and(|p| p.merged_at.is_some()),
            closed_by: raw.closed_by.as_ref().map(|u| u.login.clone()),
            node_id: raw.node_id,
            title: raw.title,
            html_url: raw.html_url,
            state_reason: raw.state_reason,
            updated_at: raw.updated_at,
        })
    }

    /// Whether issue or pull request `item` exists: `GET /repos/{owner}/{repo}/issues/{n}`.
    /// Only a 404 answers `false`; any doubt is an error.
    pub async fn item_exists(&self, item: &WorkItemRef) -> Result<bool, GithubError> {
        match self.read_item(item).await {
            Ok(_) => Ok(true),
            Err(err) if err.is_not_found() => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// A pull request's head branch, body and merge state:
    /// `GET /repos/{owner}/{repo}/pulls/{pull_number}` (conditional).
    pub async fn read_pull_request(&self, item: &WorkItemRef) -> Result<PullRequest, GithubError> {
        let url = self.item_url(item, "/pulls", "")?;
        let raw: RawPull = self.get_json(&url).await?;
        Ok(PullRequest {
            item: item.clone(),
            state: parse_state(&url, &raw.state)?,
            merged: raw.merged_at.is_some(),
            author: login(raw.user.as_ref()),
            head_ref: raw.head.ref_name,
            node_id: raw.node_id,
            title: raw.title,
            body: raw.body.unwrap_or_default(),
            html_url: raw.html_url,
            updated_at: raw.updated_at,
        })
    }

    /// The conversation comments of an issue or pull request, oldest first:
    /// `GET /repos/{owner}/{repo}/issues/{issue_number}/comments?per_page=100`, every page
    /// (the last one conditionally).
    pub async fn conversation_comments(
        &self,
        item: &WorkItemRef,
    ) -> Result<Vec<ThreadComment>, GithubError> {
        self.conversation_since(item, None).await
    }

    /// The conversation comments updated at or after `since` (all without one):
    /// `GET /repos/{owner}/{repo}/issues/{issue_number}/comments?per_page=100&since=…`.
    async fn conversation_since(
        &self,
        item: &WorkItemRef,
        since: Option<&str>,
    ) -> Result<Vec<ThreadComment>, GithubError> {
        let (url, reuse) = self.surface_url(item, "/issues", "/comments", since)?;
        let rows: Vec<RawComment> = self.get_all(&url, reuse).await?;
        Ok(rows.into_iter().map(|c| c.into_thread(CommentSurface::Conversation)).collect())
    }

    /// The submitted reviews of a pull request that have a body:
    /// `GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews?per_page=100`. `PENDING`
    /// reviews and reviews with an empty or blank body are dropped, as in the reference.
    pub async fn reviews(&self, item: &WorkItemRef) -> Result<Vec<ThreadComment>, GithubError> {
        let url = self.item_url(item, "/pulls", "/reviews?per_page=100")?;
        let rows: Vec<RawReview> = self.get_all(&url, Reuse::LastPage).await?;
        Ok(rows
            .into_iter()
            .filter(|r| r.state != "PENDING")
            .filter(|r| r.body.as_deref().is_some_and(|b| !b.trim().is_empty()))
            .map(|r| {
                let submitted_at = r.submitted_at.unwrap_or_default();
                ThreadComment {
                    id: r.id,
                    node_id: r.node_id,
                    author: login(r.user.as_ref()),
                    body: r.body.unwrap_or_default(),
                    updated_at: submitted_at.clone(),
                    created_at: submitted_at,
                    html_url: r.html_url,
                    surface: CommentSurface::Review { state: r.state },
                }
            })
            .collect())
    }

    /// The inline review comments of a pull request:
    /// `GET /repos/{owner}/{repo}/pulls/{pull_number}/comments?per_page=100`, every page
    /// (the last one conditionally).
    pub async fn review_comments(
        &self,
        item: &WorkItemRef,
    ) -> Result<Vec<ThreadComment>, GithubError> {
        self.review_comments_since(item, None).await
    }

    /// The inline review comments updated at or after `since` (all without one):
    /// `GET /repos/{owner}/{repo}/pulls/{pull_number}/comments?per_page=100&since=…`.
    async fn review_comments_since(
        &self,
        item: &WorkItemRef,
        since: Option<&str>,
    ) -> Result<Vec<ThreadComment>, GithubError> {
        let (url, reuse) = self.surface_url(item, "/pulls", "/comments", since)?;
        let rows: Vec<RawReviewComment> = self.get_all(&url, reuse).await?;
        Ok(rows
            .into_iter()
            .map(|c| {
                let line = c.line.or(c.original_line);
                let surface =
                    CommentSurface::Inline { path: c.path, line, review: c.pull_request_review_id };
                c.comment.into_thread(surface)
            })
            .collect())
    }

    /// All three surfaces of a pull request in thread order: stably sorted by creation
    /// time, ties kept in the order conversation, reviews, inline (as the reference does).
    pub async fn pull_request_thread(
        &self,
        item: &WorkItemRef,
    ) -> Result<Vec<ThreadComment>, GithubError> {
        self.thread_changes(item, ItemKind::PullRequest, &ThreadSince::default()).await
    }

    /// What changed in `item`'s thread since `since`, in thread order, to merge into the
    /// thread read before ([`merge_thread`]): on each surface with a watermark, the
    /// comments updated at or after it (GitHub's `since` is inclusive, so the comments at
    /// the watermark come back again); a surface without one is read whole. For a pull
    /// request the reviews are read whole too (they have no `since`). Reads with a
    /// watermark are not remembered for conditional requests (their URL changes with
    /// it); whole reads keep their last page. With no watermark at all this is the whole
    /// thread.
    pub async fn thread_changes(
        &self,
        item: &WorkItemRef,
        kind: ItemKind,
        since: &ThreadSince,
    ) -> Result<Vec<ThreadComment>, GithubError> {
        let mut thread = self.conversation_since(item, since.conversation.as_deref()).await?;
        if kind == ItemKind::PullRequest {
            thread.extend(self.reviews(item).await?);
            thread.extend(self.review_comments_since(item, since.inline.as_deref()).await?);
        }
        thread_order(&mut thread);
        Ok(thread)
    }

    /// The first page of a comment surface, `…{collection}/{n}{suffix}?per_page=100`, with
    /// `since=` when given, and how it is read: without a watermark conditionally, keeping
    /// the last page only (a long thread's old pages would fill the cache); fresh with one.
    fn surface_url(
        &self,
        item: &WorkItemRef,
        collection: &str,
        suffix: &str,
        since: Option<&str>,
    ) -> Result<(String, Reuse), GithubError> {
        let url = self.item_url(item, collection, &format!("{suffix}?per_page=100"))?;
        let Some(since) = since else { return Ok((url, Reuse::LastPage)) };
        let mut url = reqwest::Url::parse(&url).map_err(|err| malformed(&url, &err.to_string()))?;
        url.query_pairs_mut().append_pair("since", since);
        Ok((url.to_string(), Reuse::Fresh))
    }

    /// The jobs of a workflow run's latest attempt, with their steps (one page of up to
    /// 100, one request, not retried: the CI evidence spends a budget of its own):
    /// `GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs?filter=latest&per_page=100`.
    pub async fn run_jobs(&self, repo: &RepoRef, run_id: u64) -> Result<Vec<ci::Job>, GithubError> {
        self.check_host(&repo.to_string(), repo)?;
        let mut url = self.repo_url(repo, &format!("/actions/runs/{run_id}/jobs"));
        url.set_query(Some("filter=latest&per_page=100"));
        let answer = self.transport.get_once(url.as_str()).await?;
        let raw: RawJobs = decode_bytes(url.as_str(), &answer.body)?;
        Ok(raw
            .jobs
            .into_iter()
            .map(|job| ci::Job {
                id: job.id,
                name: job.name,
                conclusion: job.conclusion,
                html_url: job.html_url,
                steps: job
                    .steps
                    .into_iter()
                    .map(|step| ci::Step {
                        number: step.number,
                        name: step.name,
                        conclusion: step.conclusion,
                    })
                    .collect(),
            })
            .collect())
    }

    /// The first `max` annotations of a check run (one request, not retried):
    /// `GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations?per_page=N`.
    pub async fn check_run_annotations(
        &self,
        repo: &RepoRef,
        check_run_id: u64,
        max: usize,
    ) -> Result<Vec<ci::Annotation>, GithubError> {
        self.check_host(&repo.to_string(), repo)?;
        let mut url = self.repo_url(repo, &format!("/check-runs/{check_run_id}/annotations"));
        url.set_query(Some(&format!("per_page={}", max.clamp(1, 100))));
        let answer = self.transport.get_once(url.as_str()).await?;
        let raw: Vec<RawAnnotation> = decode_bytes(url.as_str(), &answer.body)?;
        Ok(raw
            .into_iter()
            .take(max)
            .map(|a| ci::Annotation {
                path: a.path,
                start_line: a.start_line,
                level: a.annotation_level,
                message: a.message.unwrap_or_default(),
            })
            .collect())
    }

    /// The last `keep` bytes of a job's log, reading at most `max_read`:
    /// `GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs`, which answers with a 302
    /// to the log's own address, followed (one request more, [`Tail::redirected`]).
    pub async fn job_log_tail(
        &self,
        repo: &RepoRef,
        job_id: u64,
        keep: usize,
        max_read: u64,
    ) -> Result<Tail, GithubError> {
        self.check_host(&repo.to_string(), repo)?;
        let url = self.repo_url(repo, &format!("/actions/jobs/{job_id}/logs"));
        self.transport.get_tail_once(url.as_str(), keep, max_read).await
    }

    /// Posts a conversation comment:
    /// `POST /repos/{owner}/{repo}/issues/{issue_number}/comments`. Not repeated after a
    /// 5xx (it may have landed).
    pub async fn post_comment(
        &self,
        item: &WorkItemRef,
        body: &str,
    ) -> Result<PostedComment, GithubError> {
        let url = self.item_url(item, "/issues", "/comments")?;
        let answer =
            self.transport.post(&url, &json!({ "body": body }), Resource::Core, false).await?;
        let raw: RawComment = decode_bytes(&url, &answer.body)?;
        Ok(PostedComment { id: raw.id, node_id: raw.node_id, html_url: raw.html_url })
    }

    /// Adds labels to an issue or pull request, leaving every other label on it:
    /// `POST /repos/{owner}/{repo}/issues/{issue_number}/labels`. Answers the labels the
    /// item carries afterwards. (Never the `PUT` of the same path, which replaces them.)
    pub async fn add_labels(
        &self,
        item: &WorkItemRef,
        labels: &[&str],
    ) -> Result<Vec<String>, GithubError> {
        let url = self.item_url(item, "/issues", "/labels")?;
        let answer =
            self.transport.post(&url, &json!({ "labels": labels }), Resource::Core, true).await?;
        let rows: Vec<RawLabel> = decode_bytes(&url, &answer.body)?;
        Ok(rows.into_iter().map(|l| l.name).collect())
    }

    /// Removes one label from an issue or pull request:
    /// `DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}`. `false` when the
    /// item did not carry it (GitHub's 404).
    pub async fn remove_label(&self, item: &WorkItemRef, label: &str) -> Result<bool, GithubError> {
        let base = self.item_url(item, "/issues", "/labels")?;
        let mut url = reqwest::Url::parse(&base)
            .map_err(|err| malformed(&base, &format!("not a URL: {err}")))?;
        url.path_segments_mut()
            .map_err(|()| malformed(&base, "the URL cannot carry a path"))?
            .push(label);
        match self.transport.delete(url.as_str()).await {
            Ok(_) => Ok(true),
            Err(err) if err.is_not_found() => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Adds a reaction. A node id goes through the GraphQL mutation
    /// `addReaction(input: {subjectId, content})`; the numeric targets through
    /// `POST /repos/{owner}/{repo}/issues/{issue_number}/reactions`,
    /// `…/issues/comments/{comment_id}/reactions` or `…/pulls/comments/{comment_id}/reactions`.
    /// Reacting twice with the same content is harmless (GitHub keeps one).
    pub async fn add_reaction(
        &self,
        target: &ReactionTarget,
        reaction: Reaction,
    ) -> Result<(), GithubError> {
        let url = match target {
            ReactionTarget::Node(subject) => {
                return self.add_reaction_by_node(subject, reaction).await;
            }
            ReactionTarget::Item(item) => self.item_url(item, "/issues", "/reactions")?,
            ReactionTarget::IssueComment { repo, id } => {
                self.check_host(&repo.to_string(), repo)?;
                self.repo_url(repo, &format!("/issues/comments/{id}/reactions")).to_string()
            }
            ReactionTarget::ReviewComment { repo, id } => {
                self.check_host(&repo.to_string(), repo)?;
                self.repo_url(repo, &format!("/pulls/comments/{id}/reactions")).to_string()
            }
        };
        let body = json!({ "content": reaction.as_str() });
        let answer = self.transport.post(&url, &body, Resource::Core, false).await?;
        let added: RawReaction = decode_bytes(&url, &answer.body)?;
        if added.content != reaction.as_str() {
            let reason = format!("asked for `{}`, got `{}`", reaction.as_str(), added.content);
            return Err(malformed(&url, &reason));
        }
        Ok(())
    }

    /// `mutation { addReaction(input: {subjectId, content}) { reaction { content } } }`.
    /// A GraphQL error (an unknown or unreactable subject answers `NOT_FOUND`) is an error;
    /// so is an answer naming another content than the one asked for.
    async fn add_reaction_by_node(
        &self,
        subject: &str,
        reaction: Reaction,
    ) -> Result<(), GithubError> {
        let url = self.transport.endpoints().graphql.to_string();
        let body = json!({
            "query": ADD_REACTION,
            "variables": { "subjectId": subject, "content": reaction.as_graphql() },
        });
        // Idempotent: the same content by the same user is kept once.
        let answer = self.transport.post(&url, &body, Resource::Graphql, true).await?;
        let response: Value = decode_bytes(&url, &answer.body)?;
        if let Some(errors) = response.get("errors").and_then(Value::as_array) {
            let kind = |e: &Value| e.get("type").and_then(Value::as_str).map(str::to_owned);
            let messages: Vec<&str> = errors
                .iter()
                .map(|e| e.get("message").and_then(Value::as_str).unwrap_or("unnamed error"))
                .collect();
            if errors.iter().any(|e| kind(e).as_deref() == Some("NOT_FOUND")) {
                return Err(GithubError::NotFound { url: format!("graphql node {subject}") });
            }
            return Err(malformed(&url, &format!("GraphQL errors: {}", messages.join("; "))));
        }
        let added: RawAddReaction = response
            .get("data")
            .and_then(|d| d.get("addReaction"))
            .cloned()
            .ok_or_else(|| malformed(&url, "no `data.addReaction` object"))
            .and_then(|v| decode_value(&url, v))?;
        if added.reaction.content != reaction.as_graphql() {
            let reason =
                format!("asked for `{}`, got `{}`", reaction.as_graphql(), added.reaction.content);
            return Err(malformed(&url, &reason));
        }
        Ok(())
    }

    /// The issues each pull request closes (`closingIssuesReferences`), for many pull
    /// requests in one GraphQL request per 50. Pull requests GitHub does not know are left
    /// out of the answer; linked issues carry their own repository (matching is by
    /// repository and number).
    pub async fn linked_issues(
        &self,
        pull_requests: &[WorkItemRef],
    ) -> Result<BTreeMap<WorkItemRef, Vec<WorkItemRef>>, GithubError> {
        for pr in pull_requests {
            self.check_host(&pr.to_string(), pr.repo())?;
        }
        let mut linked = BTreeMap::new();
        for batch in pull_requests.chunks(LINKED_ISSUES_BATCH) {
            linked.extend(self.linked_issues_batch(batch).await?);
        }
        Ok(linked)
    }

    async fn linked_issues_batch(
        &self,
        batch: &[WorkItemRef],
    ) -> Result<BTreeMap<WorkItemRef, Vec<WorkItemRef>>, GithubError> {
        let query = LinkedIssuesQuery::new(batch);
        let url = self.transport.endpoints().graphql.to_string();
        let answer = self.transport.post(&url, &query.body(), Resource::Graphql, true).await?;
        let response: Value = decode_bytes(&url, &answer.body)?;
        query.read(&url, &response, self.repo_host())
    }

    // --- plumbing ---

    fn repo_host(&self) -> Option<&str> {
        let host = self.transport.host();
        (!host.eq_ignore_ascii_case(loop_core::refs::DEFAULT_HOST)).then_some(host)
    }

    fn check_host(&self, what: &str, repo: &RepoRef) -> Result<(), GithubError> {
        if repo.host().eq_ignore_ascii_case(self.transport.host()) {
            Ok(())
        } else {
            Err(GithubError::WrongHost {
                item: what.to_owned(),
                item_host: repo.host().to_owned(),
                client_host: self.transport.host().to_owned(),
            })
        }
    }

    fn repo_url(&self, repo: &RepoRef, rest: &str) -> reqwest::Url {
        self.transport.rest_url(&format!("/repos/{}/{}{rest}", repo.owner(), repo.name()))
    }

    /// `/repos/{o}/{r}{collection}/{n}{suffix}`; `suffix` may carry a query.
    fn item_url(
        &self,
        item: &WorkItemRef,
        collection: &str,
        suffix: &str,
    ) -> Result<String, GithubError> {
        self.check_host(&item.to_string(), item.repo())?;
        let path = self.repo_url(item.repo(), &format!("{collection}/{}", item.number()));
        Ok(format!("{path}{suffix}"))
    }

    async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, GithubError> {
        let answer = self.transport.get(url).await?;
        decode_bytes(url, &answer.body)
    }

    async fn get_all<T: DeserializeOwned>(
        &self,
        url: &str,
        reuse: Reuse,
    ) -> Result<Vec<T>, GithubError> {
        let (rows, _unchanged) = self.transport.get_all_pages(url, reuse).await?;
        rows.into_iter().map(|row| decode_value(url, row)).collect()
    }
}

/// The aliased GraphQL query for one batch of pull requests: `r<i>` per repository,
/// `p<n>` per pull request, owner and name passed as variables.
struct LinkedIssuesQuery<'a> {
    /// Repositories in alias order, each with the pull requests asked about it.
    repos: Vec<(&'a RepoRef, Vec<&'a WorkItemRef>)>,
}

impl<'a> LinkedIssuesQuery<'a> {
    fn new(batch: &'a [WorkItemRef]) -> Self {
        let mut repos: Vec<(&RepoRef, Vec<&WorkItemRef>)> = Vec::new();
        for pr in batch {
            match repos.iter_mut().find(|(repo, _)| repo.same_repository(pr.repo())) {
                Some((_, prs)) => prs.push(pr),
                None => repos.push((pr.repo(), vec![pr])),
            }
        }
        Self { repos }
    }

    fn body(&self) -> Value {
        let mut params = Vec::new();
        let mut fields = String::new();
        let mut variables = serde_json::Map::new();
        for (i, (repo, prs)) in self.repos.iter().enumerate() {
            params.push(format!("$o{i}: String!, $n{i}: String!"));
            variables.insert(format!("o{i}"), json!(repo.owner()));
            variables.insert(format!("n{i}"), json!(repo.name()));
            fields.push_str(&format!(" r{i}: repository(owner: $o{i}, name: $n{i}) {{"));
            for pr in prs {
                let n = pr.number();
                fields.push_str(&format!(
                    " p{n}: pullRequest(number: {n}) {{ closingIssuesReferences(first: {LINKED_ISSUES_PER_PR}) {{ nodes {{ number repository {{ name owner {{ login }} }} }} }} }}"
                ));
            }
            fields.push_str(" }");
        }
        let query = format!("query LinkedIssues({}) {{{fields} }}", params.join(", "));
        json!({ "query": query, "variables": variables })
    }

    /// Reads the answer. A `NOT_FOUND` error leaves that pull request out; any other error
    /// fails the batch ([`GithubError::QueryRefused`]: its answer is in doubt).
    fn read(
        &self,
        url: &str,
        response: &Value,
        host: Option<&str>,
    ) -> Result<BTreeMap<WorkItemRef, Vec<WorkItemRef>>, GithubError> {
        if let Some(errors) = response.get("errors").and_then(Value::as_array) {
            let error_type = |e: &Value| e.get("type").and_then(Value::as_str).map(str::to_owned);
            if errors.iter().any(|e| error_type(e).as_deref() == Some("RATE_LIMITED")) {
                return Err(GithubError::Transient {
                    method: "POST".to_owned(),
                    url: url.to_owned(),
                    attempts: 1,
                    reason: "the GraphQL rate limit is spent".to_owned(),
                });
            }
            let doubtful: Vec<&str> = errors
                .iter()
                .filter(|e| e.get("type").and_then(Value::as_str) != Some("NOT_FOUND"))
                .map(|e| e.get("message").and_then(Value::as_str).unwrap_or("unnamed error"))
                .collect();
            if !doubtful.is_empty() {
                let messages = doubtful.join("; ");
                return Err(GithubError::QueryRefused { url: url.to_owned(), messages });
            }
        }
        let data = response
            .get("data")
            .filter(|d| d.is_object())
            .ok_or_else(|| malformed(url, "no `data` object"))?;
        let mut linked = BTreeMap::new();
        for (i, (_, prs)) in self.repos.iter().enumerate() {
            let Some(repo) = data.get(format!("r{i}")).filter(|r| !r.is_null()) else {
                continue;
            };
            for pr in prs {
                let Some(node) = repo.get(format!("p{}", pr.number())).filter(|p| !p.is_null())
                else {
                    continue;
                };
                let refs: RawClosingRefs = decode_value(url, node.clone())?;
                let issues = refs
                    .closing_issues_references
                    .nodes
                    .into_iter()
                    .map(|n| {
                        RepoRef::new(host, &n.repository.owner.login, &n.repository.name)
                            .map(|r| r.item(n.number))
                            .map_err(|err| malformed(url, &err.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                linked.insert((*pr).clone(), issues);
            }
        }
        Ok(linked)
    }
}

fn decode_bytes<T: DeserializeOwned>(url: &str, body: &[u8]) -> Result<T, GithubError> {
    serde_json::from_slice(body).map_err(|err| malformed(url, &err.to_string()))
}

fn decode_value<T: DeserializeOwned>(url: &str, value: Value) -> Result<T, GithubError> {
    serde_json::from_value(value).map_err(|err| malformed(url, &err.to_string()))
}

fn login(user: Option<&RawUser>) -> String {
    user.map(|u| u.login.clone()).unwrap_or_default()
}

fn parse_state(url: &str, state: &str) -> Result<ItemState, GithubError> {
    match state {
        "open" => Ok(ItemState::Open),
        "closed" => Ok(ItemState::Closed),
        other => Err(malformed(url, &format!("unknown state `{other}`"))),
    }
}

// --- GitHub's shapes, only the fields read ---

#[derive(Debug, Deserialize)]
struct RawUser {
    login: String,
}

#[derive(Debug, Deserialize)]
struct RawLabel {
    name: String,
}

#[derive(Debug, Deserialize)]
struct RawPullMarker {
    merged_at: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawIssue {
    number: u64,
    node_id: String,
    title: String,
    body: Option<String>,
    html_url: String,
    user: Option<RawUser>,
    labels: Vec<RawLabel>,
    state: String,
    state_reason: Option<String>,
    updated_at: String,
    closed_by: Option<RawUser>,
    pull_request: Option<RawPullMarker>,
}

impl RawIssue {
    fn kind(&self) -> ItemKind {
        if self.pull_request.is_some() { ItemKind::PullRequest } else { ItemKind::Issue }
    }

    fn state(&self) -> Result<ItemState, GithubError> {
        parse_state(&self.html_url, &self.state)
    }
}

#[derive(Debug, Deserialize)]
struct RawBranch {
    #[serde(rename = "ref")]
    ref_name: String,
}

#[derive(Debug, Deserialize)]
struct RawPull {
    number: u64,
    node_id: String,
    labels: Vec<RawLabel>,
    title: String,
    body: Option<String>,
    html_url: String,
    user: Option<RawUser>,
    state: String,
    merged_at: Option<String>,
    updated_at: String,
    head: RawBranch,
}

#[derive(Debug, Deserialize)]
struct RawComment {
    id: u64,
    node_id: String,
    body: Option<String>,
    html_url: String,
    user: Option<RawUser>,
    #[serde(default)]
    created_at: String,
    updated_at: Option<String>,
}

impl RawComment {
    /// The comment on `surface`; one never edited was updated when it was created.
    fn into_thread(self, surface: CommentSurface) -> ThreadComment {
        ThreadComment {
            id: self.id,
            node_id: self.node_id,
            surface,
            author: login(self.user.as_ref()),
            body: self.body.unwrap_or_default(),
            updated_at: self.updated_at.unwrap_or_else(|| self.created_at.clone()),
            created_at: self.created_at,
            html_url: self.html_url,
        }
    }
}

#[derive(Debug, Deserialize)]
struct RawReview {
    id: u64,
    node_id: String,
    body: Option<String>,
    html_url: String,
    user: Option<RawUser>,
    state: String,
    submitted_at: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawReviewComment {
    /// What every comment has; an inline one adds where it sits.
    #[serde(flatten)]
    comment: RawComment,
    path: String,
    line: Option<u64>,
    original_line: Option<u64>,
    pull_request_review_id: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct RawJobs {
    jobs: Vec<RawJob>,
}

#[derive(Debug, Deserialize)]
struct RawJob {
    id: u64,
    name: String,
    conclusion: Option<String>,
    html_url: Option<String>,
    #[serde(default)]
    steps: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
struct RawStep {
    name: String,
    number: u64,
    conclusion: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawAnnotation {
    path: String,
    start_line: u64,
    annotation_level: Option<String>,
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawReaction {
    content: String,
}

/// `addReaction`'s payload (a null reaction is malformed: nothing was added).
#[derive(Debug, Deserialize)]
struct RawAddReaction {
    reaction: RawReaction,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawClosingRefs {
    closing_issues_references: RawNodes,
}

#[derive(Debug, Deserialize)]
struct RawNodes {
    nodes: Vec<RawLinkedIssue>,
}

#[derive(Debug, Deserialize)]
struct RawLinkedIssue {
    number: u64,
    repository: RawRepository,
}

#[derive(Debug, Deserialize)]
struct RawRepository {
    name: String,
    owner: RawUser,
}

#[cfg(test)]
mod tests {
    use loop_core::config::{CliBinary, GithubApi, GithubIntegration};

    use super::*;

    fn comment(
        node_id: &str,
        surface: CommentSurface,
        created: &str,
        updated: &str,
    ) -> ThreadComment {
        ThreadComment {
            id: 1,
            node_id: node_id.into(),
            surface,
            body: format!("{node_id} at {updated}"),
            author: "ann".into(),
            created_at: created.into(),
            updated_at: updated.into(),
            html_url: String::new(),
        }
    }

    #[test]
    fn the_watermark_is_each_surfaces_newest_updated_at_as_github_wrote_it() {
        let inline = || CommentSurface::Inline { path: "a.rs".into(), line: Some(1), review: None };
        let review = || CommentSurface::Review { state: "COMMENTED".into() };
        let thread = [
            comment(
                "IC_1",
                CommentSurface::Conversation,
                "2026-12-01T10:00:00Z",
                "2026-12-01T12:00:00Z",
            ),
            comment(
                "IC_2",
                CommentSurface::Conversation,
                "2026-12-01T11:00:00Z",
                "2026-12-01T11:00:00Z",
            ),
            comment("IC_3", CommentSurface::Conversation, "2026-12-01T11:30:00Z", "not a time"),
            comment("PRR_1", review(), "2026-12-01T13:00:00Z", "2026-12-01T13:00:00Z"),
            comment("PRRC_1", inline(), "2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"),
        ];
        let since = ThreadSince::of(&thread);
        assert_eq!(since.conversation.as_deref(), Some("2026-12-01T12:00:00Z"), "an edit counts");
        assert_eq!(since.inline.as_deref(), Some("2026-12-01T09:00:00Z"), "reviews never do");
        assert_eq!(ThreadSince::of(&thread[3..4]), ThreadSince::default());
        // A thread an older version remembered carries no `updatedAt`: read it whole.
        let old: ThreadComment = serde_json::from_value(serde_json::json!({
            "id": 1, "nodeId": "IC_1", "surface": {"kind": "conversation"}, "body": "b",
            "author": "ann", "createdAt": "2026-12-01T10:00:00Z", "htmlUrl": ""
        }))
        .unwrap();
        assert_eq!(ThreadSince::of(&[old]), ThreadSince::default());
    }

    #[test]
    fn changes_replace_by_node_id_and_join_in_thread_order() {
        let inline = CommentSurface::Inline { path: "a.rs".into(), line: Some(1), review: None };
        let at = |h: u8| format!("2026-12-01T{h:02}:00:00Z");
        let mut thread = vec![
            comment("IC_1", CommentSurface::Conversation, &at(10), &at(10)),
            comment("PRRC_1", inline.clone(), &at(11), &at(11)),
            comment("IC_2", CommentSurface::Conversation, &at(12), &at(12)),
        ];
        let changes = vec![
            comment("IC_1", CommentSurface::Conversation, &at(10), &at(13)),
            comment("IC_2", CommentSurface::Conversation, &at(12), &at(12)),
            comment("PRRC_2", inline, &at(13), &at(13)),
            comment("IC_3", CommentSurface::Conversation, &at(13), &at(13)),
        ];
        merge_thread(&mut thread, changes);
        let merged: Vec<(&str, &str)> =
            thread.iter().map(|c| (c.node_id.as_str(), c.updated_at.as_str())).collect();
        let (eleven, twelve, thirteen) = (at(11), at(12), at(13));
        assert_eq!(
            merged,
            [
                ("IC_1", thirteen.as_str()),
                ("PRRC_1", eleven.as_str()),
                ("IC_2", twelve.as_str()),
                ("IC_3", thirteen.as_str()),
                ("PRRC_2", thirteen.as_str()),
            ],
            "the edit in place, the boundary comment once, ties conversation first"
        );
    }

    #[test]
    fn hostile_graphql_answers_are_errors_or_omissions_never_panics() {
        let prs: Vec<WorkItemRef> =
            vec!["github:octo/app#1".parse().unwrap(), "github:octo/app#2".parse().unwrap()];
        let query = LinkedIssuesQuery::new(&prs);
        let nodes = |n: Value| json!({ "data": { "r0": { "p1": { "closingIssuesReferences": { "nodes": n } } } } });
        let malformed = [
            json!(null),
            json!([]),
            json!({ "data": null }),
            json!({ "errors": "boom", "data": 3 }),
            json!({ "errors": [{ "type": "FORBIDDEN" }], "data": {} }),
            nodes(json!("x")),
            nodes(json!([{ "number": -1 }])),
            nodes(
                json!([{ "number": 3, "repository": { "name": "../x", "owner": { "login": "o" } } }]),
            ),
        ];
        for answer in malformed {
            assert!(query.read("u", &answer, None).is_err(), "{answer}");
        }
        let partial = json!({ "data": { "r0": { "p1": null, "p2": { "closingIssuesReferences": { "nodes": [] } } } },
                              "errors": [{ "type": "NOT_FOUND", "message": "no #1" }] });
        let linked = query.read("u", &partial, None).unwrap();
        let refused = json!({ "data": null, "errors": [{ "message": "Field 'closingIssuesReferences' doesn't exist" }] });
        assert!(query.read("u", &refused, None).is_err_and(|e| e.is_query_refused()));
        assert_eq!(
            linked.keys().map(ToString::to_string).collect::<Vec<_>>(),
            ["github:octo/app#2"]
        );
    }

    #[test]
    fn the_configured_base_url_applies_and_hosts_are_kept() {
        let github = |base_url: Option<&str>| GithubIntegration {
            cli: CliBinary { binary: "gh".to_owned() },
            api: GithubApi {
                token_env: vec!["MY_TOKEN".to_owned()],
                base_url: base_url.map(str::to_owned),
            },
        };
        let sim =
            GithubClient::from_config("github.com", &github(Some("http://127.0.0.1:1"))).unwrap();
        assert_eq!(sim.endpoints().rest.as_str(), "http://127.0.0.1:1/");
        let ghe = GithubClient::from_config("GHE.example.com", &github(None)).unwrap();
        assert_eq!(
            (ghe.host(), ghe.endpoints().rest.as_str()),
            ("ghe.example.com", "https://ghe.example.com/api/v3")
        );
    }
}
