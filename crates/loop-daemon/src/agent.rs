//! The agent's side, carried out: a question posted for the agent (`the-loop ask`, the
//! MCP tool `ask`), the operator's reply pasted into the session (`the-loop reply`,
//! `POST /api/v1/sessions/reply`), and the one [`link_pull_request`] behind `sessions
//! link-pr`, `POST /api/v1/sessions/link-pr`, the MCP tool and the plugin's hook.
//!
//! What may be asked where, what is posted and pasted, and which deliveries answer a
//! question are loop-core's ([`loop_core::agent`]); this module does the IO and logs
//! `session.awaiting_input` / `session.reply_sent` (never the text of either).

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::agent::{self, Question, Refusal};
use loop_core::config::Config;
use loop_core::graph::state::Upstream;
use loop_core::log::{Kind, Line};
use loop_core::record::{AwaitingInput, LocalRecord};
use loop_sessions::registry::{Registry, RegistryError};
use loop_sessions::{Liveness, session};
use loop_store::StateStore;

use crate::dispatcher::{Dispatcher, blocking, record_pull_request};

/// A question posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// Where it was asked (the work item, or the pull request its session serves).
    pub asked: WorkItemRef,
    pub comment_url: String,
}

/// A reply pasted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replied {
    /// The session endpoint it was pasted into.
    pub served: WorkItemRef,
    /// The mirrored comment, or why it could not be posted (the reply was delivered).
    pub mirrored: Result<String, String>,
}

/// Why a question or a reply did not reach its destination.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Refused before anything was posted or pasted.
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("{served}'s tmux session is not running")]
    PaneGone { served: WorkItemRef },
    #[error("no GitHub client for the work items' host (`integrations.github`)")]
    NoGithub,
    #[error("could not post on {item}: {reason}")]
    NotPosted { item: WorkItemRef, reason: String },
    #[error("could not paste into {served}'s session: {reason}")]
    NotPasted { served: WorkItemRef, reason: String },
    #[error("cannot read the session records")]
    Registry(#[source] RegistryError),
}

impl loop_core::Hint for AgentError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::Refused(refusal) => loop_core::Hint::hint(refusal),
            Self::PaneGone { served } => {
                Some(format!("the next event respawns it; or `the-loop sessions start {served}`"))
            }
            _ => None,
        }
    }
}

impl AgentError {
    /// Whether the caller asked for something that cannot be (no session, empty text,
    /// paused) rather than met a failure on the way.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Refused(_) | Self::PaneGone { .. })
    }
}

impl Dispatcher {
    /// Posts `question` on `asked` for the agent whose session serves it, and records
    /// the wait on that endpoint (`session.awaiting_input`). Refused — nothing posted —
    /// unless a live session on this machine serves `asked`.
    pub async fn ask(&self, asked: &WorkItemRef, question: Question) -> Result<Asked, AgentError> {
        let record = self.owning_record(asked).await?;
        let record = agent::question_site(record.as_ref(), asked)?;
        let github = self.github().ok_or(AgentError::NoGithub)?;
        let comment = match github.post_comment(asked, &question.comment()).await {
            Ok(comment) => comment,
            Err(err) => {
                let reason = err.to_string();
                self.events()
                    .emit_async(
                        Line::error(Kind::SessionAskFailed)
                            .work_item(asked)
                            .field("error", &reason),
                    )
                    .await;
                return Err(AgentError::NotPosted { item: asked.clone(), reason });
            }
        };
        let waiting = AwaitingInput {
            asked_at: Timestamp::now(),
            comment_url: comment.html_url.clone(),
            question: question.shortened(AwaitingInput::QUESTION_CAP),
            options: question.options.clone(),
        };
        let (registry, owner, served) =
            (Registry::new(self.store().clone()), record.work_item.clone(), asked.clone());
        let recorded = blocking(move || registry.await_input(&owner, &served, waiting)).await;
        let mut line = Line::info(Kind::SessionAwaitingInput)
            .work_item(asked)
            .field("comment_url", &comment.html_url)
            .field("options", &question.options);
        if let Err(err) = recorded {
            line = line.field("record_error", err.to_string());
        }
        self.events().emit_async(line).await;
        Ok(Asked { asked: asked.clone(), comment_url: comment.html_url })
    }

    /// Pastes the operator's `text` into the live session serving `asked` under a
    /// provenance header, clears its open question, mirrors the reply on `asked`
    /// (self-marked, naming `operator`) and logs `session.reply_sent`. Never spawns or
    /// resumes: refused with no live session, a paused one, or empty text.
    pub async fn reply(
        &self,
        asked: &WorkItemRef,
        text: &str,
        operator: &str,
    ) -> Result<Replied, AgentError> {
        if text.trim().is_empty() {
            return Err(Refusal::EmptyReply.into());
        }
        let record = self.owning_record(asked).await?;
        let served = agent::reply_site(record.as_ref(), asked)?;
        let Some(record) = record else {
            return Err(Refusal::NoSession { asked: asked.clone() }.into());
        };
        let target =
            record.endpoints.get(&served).map(|e| e.tmux_target.clone()).unwrap_or_default();
        let prompt = agent::reply_prompt(text, operator, &record.work_item);
        let (tmux, harness) = (self.tmux().clone(), self.harness().clone());
        let pasted = blocking(move || match tmux.liveness(&target) {
            Ok(Liveness::Live) => session::deliver(&tmux, &*harness, &target, &prompt)
                .map_err(|e| Some(e.to_string())),
            Ok(_) => Err(None),
            Err(err) => Err(Some(err.to_string())),
        })
        .await;
        if let Err(why) = pasted {
            let error = match why {
                None => AgentError::PaneGone { served: served.clone() },
                Some(reason) => AgentError::NotPasted { served: served.clone(), reason },
            };
            self.events()
                .emit_async(
                    Line::warning(Kind::SessionReplyFailed)
                        .work_item(&served)
                        .field("actor", operator)
                        .field("error", error.to_string()),
                )
                .await;
            return Err(error);
        }
        let (registry, owner, endpoint) =
            (Registry::new(self.store().clone()), record.work_item.clone(), served.clone());
        let _ = blocking(move || registry.answer(&owner, &endpoint)).await;
        let mirrored = match self.github() {
            Some(github) => github
                .post_comment(asked, &agent::reply_comment(text, operator))
                .await
                .map(|comment| comment.html_url)
                .map_err(|err| err.to_string()),
            None => Err(AgentError::NoGithub.to_string()),
        };
        let line = Line::info(Kind::SessionReplySent)
            .work_item(&served)
            .field("via", "operator")
            .field("actor", operator);
        let line = match &mirrored {
            Ok(url) => line.field("comment_url", url),
            Err(reason) => line.field("mirror_error", reason),
        };
        self.events().emit_async(line).await;
        Ok(Replied { served, mirrored })
    }

    /// After an answering delivery was pasted into `served`: clears its open question
    /// and logs `session.reply_sent` (via the comment). Called only when the endpoint
    /// had one.
    pub(crate) async fn note_answered(
        &self,
        owner: &WorkItemRef,
        served: &WorkItemRef,
        delivery_id: Option<&str>,
    ) {
        let (registry, owner, endpoint) =
            (Registry::new(self.store().clone()), owner.clone(), served.clone());
        let cleared = blocking(move || registry.answer(&owner, &endpoint)).await;
        if let Ok(Some(_)) = cleared {
            self.events()
                .emit_async(
                    Line::info(Kind::SessionReplySent)
                        .work_item(served)
                        .field("via", "comment")
                        .field("delivery_id", delivery_id),
                )
                .await;
        }
    }

    async fn owning_record(&self, item: &WorkItemRef) -> Result<Option<LocalRecord>, AgentError> {
        let (registry, item) = (Registry::new(self.store().clone()), item.clone());
        blocking(move || registry.record_owning(&item)).await.map_err(AgentError::Registry)
    }
}

/// What [`link_pull_request`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linked {
    /// Recorded now (`session.pr_linked`).
    Linked { work_item: WorkItemRef, pull_request: WorkItemRef },
    /// Already recorded (or the session is closed): nothing written.
    Already { work_item: WorkItemRef, pull_request: WorkItemRef },
}

/// Why [`link_pull_request`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    PullRequest(#[from] loop_core::refs::RefError),
    #[error("{work_item} has no session record on this machine: nothing to link")]
    NoSession { work_item: WorkItemRef },
    #[error("{work_item} cannot be linked to itself")]
    SelfLink { work_item: WorkItemRef },
    #[error("cannot record the pull request")]
    Registry(#[source] RegistryError),
}

impl loop_core::Hint for LinkError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::NoSession { .. } => Some(
                "link from inside the session the-loop started for the work item; \
                 `the-loop sessions list` shows them"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

impl LinkError {
    /// Whether the request itself was wrong (a malformed pull request, a self-link).
    pub fn is_bad_request(&self) -> bool {
        matches!(self, Self::PullRequest(_) | Self::SelfLink { .. })
    }
}

/// Records that `pull_request` (a number or `#n` in `work_item`'s repository, a ref, or
/// a URL) delivers `work_item`, whose session then receives the pull request's events
/// with no closing reference needed, and — when the work item's checkout holds its
/// state file — in that file's `pullRequests` (seed 003 R2; a failure there is
/// `graph.link_failed` and the link stands). Idempotent; refuses a self-link; writes
/// nothing when no session record on this machine owns `work_item` (a pull request's
/// own ref finds the record that lists it). Blocking: file IO.
pub fn link_pull_request(
    store: &StateStore,
    config: &Config,
    work_item: &WorkItemRef,
    pull_request: &str,
) -> Result<Linked, LinkError> {
    let pr = WorkItemRef::parse_pull_request(pull_request, work_item.repo())?;
    let registry = Registry::new(store.clone());
    let record = registry
        .record_owning(work_item)
        .map_err(LinkError::Registry)?
        .ok_or_else(|| LinkError::NoSession { work_item: work_item.clone() })?;
    let owner = record.work_item.clone();
    let linked = registry.link_pull_request(&owner, &pr, Timestamp::now());
    if linked.is_ok()
        && let Some(own) = record.own_endpoint()
        && let Err(err) =
            record_pull_request(config, store.events(), &owner, &own.cwd, &pr, Upstream::Open)
    {
        store.events().emit(
            Line::error(Kind::GraphLinkFailed).work_item(&owner).field("error", err.to_string()),
        );
    }
    match linked {
        Ok(true) => {
            store.events().emit(
                Line::info(Kind::SessionPrLinked)
                    .work_item(&owner)
                    .field("pull_request", pr.to_string())
                    .field("linked_by", "session"),
            );
            Ok(Linked::Linked { work_item: owner, pull_request: pr })
        }
        Ok(false) => Ok(Linked::Already { work_item: owner, pull_request: pr }),
        Err(RegistryError::SelfLink { work_item }) => Err(LinkError::SelfLink { work_item }),
        Err(err) => Err(LinkError::Registry(err)),
    }
}
