//! [`Sim`], the handle tests and scripts hold on a running simulated GitHub: it starts
//! the server on a bound listener, scripts the world in Rust (the twin of `/_sim/`),
//! reads back what the-loop did, and stops the server when dropped. Webhooks caused by an
//! action are sent in order by one emitter task.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::request_log::RequestLog;
use crate::webhook::{self, Delivery, WebhookTarget};
use crate::world::{Action, InlineDraft, JobDraft, Outcome, ReviewState, World, WorldError};

use super::github::github;
use super::scripting;
use super::{Bucket, Fault, SimSettings, SimState, lock};

/// A running simulated GitHub.
#[derive(Debug)]
pub struct Sim {
    state: Arc<SimState>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Sim {
    /// Serves on `listener` (bind `127.0.0.1:0` in tests).
    pub async fn serve(listener: TcpListener, settings: SimSettings) -> std::io::Result<Sim> {
        let addr = listener.local_addr()?;
        // reqwest (for webhooks) is built without a bundled crypto provider.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(std::io::Error::other)?;
        let (outbox, inbox) = mpsc::unbounded_channel();
        let (settled_tx, settled) = watch::channel(0);
        let now = Timestamp::now();
        let state = Arc::new(SimState {
            base: format!("http://{addr}"),
            world: Mutex::new(World::new(now)),
            log: Mutex::default(),
            graphql_requests: Mutex::default(),
            faults: Mutex::default(),
            buckets: Mutex::new(BTreeMap::from([
                ("core", Bucket::fresh(settings.rate_limit, now)),
                ("graphql", Bucket::fresh(settings.rate_limit, now)),
            ])),
            webhook: Mutex::default(),
            deliveries: Mutex::default(),
            outbox,
            settled,
            settings,
        });
        tokio::spawn(emit(Arc::downgrade(&state), http, inbox, settled_tx));
        let app = scripting::routes().fallback(github).with_state(state.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(err) = serving.await {
                tracing::error!(%err, "simulated GitHub stopped");
            }
        });
        Ok(Sim { state, addr, stop: Some(stop), server: Some(server) })
    }

    /// Serves on a fresh `127.0.0.1` port with default settings.
    pub async fn start() -> std::io::Result<Sim> {
        Self::serve(TcpListener::bind("127.0.0.1:0").await?, SimSettings::default()).await
    }

    /// The REST base URL, github.com layout (`http://127.0.0.1:PORT`): what
    /// `integrations.github.api.baseUrl` is set to.
    pub fn url(&self) -> String {
        self.state.base.clone()
    }

    /// The REST base URL in the Enterprise layout (`http://127.0.0.1:PORT/api/v3`).
    pub fn enterprise_url(&self) -> String {
        format!("{}/api/v3", self.state.base)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Applies a user action (the Rust twin of `POST /_sim/actions`).
    pub fn act(&self, action: Action) -> Result<Outcome, WorldError> {
        self.state.act(action)
    }

    pub fn create_repo(&self, repo: &str) -> Result<(), WorldError> {
        self.act(Action::CreateRepo { repo: repo.to_owned() }).map(drop)
    }

    /// Opens an issue; returns its number.
    pub fn open_issue(
        &self,
        repo: &str,
        author: &str,
        title: &str,
        labels: &[&str],
    ) -> Result<u64, WorldError> {
        let action = Action::OpenIssue {
            repo: repo.to_owned(),
            author: author.to_owned(),
            title: title.to_owned(),
            body: String::new(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        };
        Ok(self.act(action)?.number.unwrap_or_default())
    }

    /// Opens a pull request from `head_ref`; `Closes #N` in `body` links issue N.
    pub fn open_pull_request(
        &self,
        repo: &str,
        author: &str,
        title: &str,
        body: &str,
        head_ref: &str,
        labels: &[&str],
    ) -> Result<u64, WorldError> {
        let action = Action::OpenPullRequest {
            repo: repo.to_owned(),
            author: author.to_owned(),
            title: title.to_owned(),
            body: body.to_owned(),
            head_ref: head_ref.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        };
        Ok(self.act(action)?.number.unwrap_or_default())
    }

    /// Comments on an issue or pull request's conversation; returns the comment id.
    pub fn comment(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        body: &str,
    ) -> Result<u64, WorldError> {
        let action = Action::Comment {
            repo: repo.to_owned(),
            number,
            author: author.to_owned(),
            body: body.to_owned(),
        };
        Ok(self.act(action)?.id.unwrap_or_default())
    }

    /// Replaces conversation comment `id`'s body (a checklist ticked in GitHub's UI).
    pub fn edit_comment(
        &self,
        repo: &str,
        id: u64,
        actor: &str,
        body: &str,
    ) -> Result<(), WorldError> {
        let action = Action::EditComment {
            repo: repo.to_owned(),
            id,
            actor: actor.to_owned(),
            body: body.to_owned(),
        };
        self.act(action).map(|_| ())
    }

    pub fn label(
        &self,
        repo: &str,
        number: u64,
        actor: &str,
        label: &str,
    ) -> Result<(), WorldError> {
        let action = Action::Label {
            repo: repo.to_owned(),
            number,
            actor: actor.to_owned(),
            label: label.to_owned(),
        };
        self.act(action).map(drop)
    }

    /// Completes a GitHub Actions run of `workflow` on pull request `number`'s head, with
    /// `jobs` (it failed when one of their steps did); returns the run id.
    pub fn complete_run(
        &self,
        repo: &str,
        number: u64,
        actor: &str,
        workflow: &str,
        jobs: Vec<JobDraft>,
    ) -> Result<u64, WorldError> {
        let action = Action::CompleteRun {
            repo: repo.to_owned(),
            number,
            actor: actor.to_owned(),
            workflow: workflow.to_owned(),
            jobs,
        };
        Ok(self.act(action)?.id.unwrap_or_default())
    }

    /// Reviews a pull request with inline comments `(path, line, body)`; returns the review id.
    pub fn review(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        state: ReviewState,
        body: &str,
        inline: &[(&str, u64, &str)],
    ) -> Result<u64, WorldError> {
        let action = Action::Review {
            repo: repo.to_owned(),
            number,
            author: author.to_owned(),
            state,
            body: body.to_owned(),
            comments: inline
                .iter()
                .map(|(path, line, body)| InlineDraft {
                    path: (*path).to_owned(),
                    line: *line,
                    body: (*body).to_owned(),
                })
                .collect(),
        };
        Ok(self.act(action)?.id.unwrap_or_default())
    }

    pub fn merge(&self, repo: &str, number: u64, actor: &str) -> Result<(), WorldError> {
        self.act(Action::Merge { repo: repo.to_owned(), number, actor: actor.to_owned() }).map(drop)
    }

    pub fn close(&self, repo: &str, number: u64, actor: &str) -> Result<(), WorldError> {
        self.act(Action::Close {
            repo: repo.to_owned(),
            number,
            actor: actor.to_owned(),
            reason: None,
        })
        .map(drop)
    }

    /// A snapshot of the whole world (what the-loop wrote included).
    pub fn world(&self) -> World {
        lock(&self.state.world).clone()
    }

    /// The conversation comments of `repo#number` by `author`, oldest first.
    pub fn comments_by(&self, repo: &str, number: u64, author: &str) -> Vec<String> {
        let world = lock(&self.state.world);
        world
            .item(repo, number)
            .map(|item| {
                item.comments
                    .iter()
                    .filter(|c| c.author == author)
                    .map(|c| c.body.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The login API tokens act as.
    pub fn viewer(&self) -> &str {
        &self.state.settings.viewer
    }

    pub fn inject(&self, fault: Fault) {
        lock(&self.state.faults).push_back(fault);
    }

    /// The requests answered since start or the last [`Sim::clear_requests`].
    pub fn requests(&self) -> RequestLog {
        lock(&self.state.log).clone()
    }

    /// The bodies (`{"query", "variables"}`) of the GraphQL requests answered so far.
    pub fn graphql_requests(&self) -> Vec<Value> {
        lock(&self.state.graphql_requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.state.log).records.clear();
    }

    /// Sends webhooks for every later change to `target` (or stops, with `None`).
    pub fn set_webhook(&self, target: Option<WebhookTarget>) {
        *lock(&self.state.webhook) = target;
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.state.deliveries).clone()
    }

    /// Resolves once every delivery queued so far has been answered or has failed.
    pub async fn webhooks_settled(&self) {
        let queued = lock(&self.state.deliveries).len();
        let mut settled = self.state.settled.clone();
        // The sender lives in the emitter, which lives as long as the state we hold.
        let _ = settled.wait_for(|done| *done >= queued).await;
    }

    /// Sets the requests per rate-limit window (REST and GraphQL) and starts a new window.
    pub fn set_rate_limit(&self, limit: u64) {
        let now = self.state.now();
        for bucket in lock(&self.state.buckets).values_mut() {
            *bucket = Bucket::fresh(limit, now);
        }
    }

    /// Starts a new rate-limit window, as GitHub does at `x-ratelimit-reset`.
    pub fn reset_rate_limit(&self) {
        let now = self.state.now();
        for bucket in lock(&self.state.buckets).values_mut() {
            *bucket = Bucket::fresh(bucket.limit, now);
        }
    }

    /// Requests left in the REST window.
    pub fn rate_limit_remaining(&self) -> u64 {
        lock(&self.state.buckets).get("core").map_or(0, |b| b.limit.saturating_sub(b.used))
    }

    /// Stops serving and waits for the server task to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Sends queued deliveries in order until the state is gone.
async fn emit(
    state: std::sync::Weak<SimState>,
    http: reqwest::Client,
    mut inbox: mpsc::UnboundedReceiver<usize>,
    settled: watch::Sender<usize>,
) {
    while let Some(index) = inbox.recv().await {
        let Some(state) = state.upgrade() else { return };
        let target = lock(&state.webhook).clone();
        let delivery = lock(&state.deliveries).get(index).cloned();
        let result = match (target, delivery) {
            (Some(target), Some(delivery)) => webhook::send(&http, &target, &delivery).await,
            _ => Err("the webhook was removed before delivery".to_owned()),
        };
        if let Some(delivery) = lock(&state.deliveries).get_mut(index) {
            match result {
                Ok(status) => delivery.status = Some(status),
                Err(error) => delivery.error = Some(error),
            }
        }
        settled.send_modify(|done| *done = (*done).max(index + 1));
    }
}
