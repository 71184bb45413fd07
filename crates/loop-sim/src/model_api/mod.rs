//! A stand-in for Anthropic's Messages API, so the real Claude Code CLI can run in tests
//! with `ANTHROPIC_BASE_URL` pointing here: scripted answers per turn, realistic usage,
//! and a log of every request it made.
//!
//! It answers the endpoints Claude Code 2.1.197 calls (docs/simulator.md, "The model
//! stand-in", lists what it was seen to send): `HEAD /`, `POST /v1/messages` streamed or
//! whole, `POST /v1/messages/count_tokens`, with Anthropic's shapes, error bodies and
//! `request-id`s. Turns (requests offering tools) are answered by a script of [`Rule`]s
//! or a default echo; side requests (title, quota probe) apart, without using the
//! script. Rules are added in Rust ([`ModelApi::script`]) or over HTTP
//! (`POST /_stand-in/rules`) by a process that did not start the server.
//!
//! Test infrastructure, like the rest of loop-sim; it keeps nothing on disk.
//!
//! Layout:
//! - [`request`]: what a request body asks (turn or side, last user message,
//!   conversation), or why it is refused.
//! - [`script`]: rules and the book of their use.
//! - [`reply`]: what a rule answers.
//! - [`model`]: the decision for one request.
//! - [`usage`]: token counters and the estimate.
//! - [`wire`]: Anthropic's JSON and stream shapes and ids.
//! - [`log`]: the request log.
//! - `http`: the axum router carrying decisions out.

mod http;
pub mod log;
pub mod model;
pub mod reply;
pub mod request;
pub mod script;
pub mod usage;
pub mod wire;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub use log::{ModelRequest, RequestKind, SelectedHeaders, total_usage};
pub use model::AnsweredBy;
pub use reply::{LimitWindow, Reply, ReplyKind, StopReason};
pub use request::{Side, ToolResult};
pub use script::{Matcher, Rule, RuleStatus, ScriptError, Times};
pub use usage::Usage;

use http::{Shared, lock};
use model::StandInModel;
use wire::Ids;

/// A running stand-in model: what tests hold. Dropping it stops the server.
#[derive(Debug)]
pub struct ModelApi {
    shared: Arc<Shared>,
    addr: SocketAddr,
    /// Tells the server task to stop; the task holds the receiver.
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl ModelApi {
    /// Serves on `listener` (bind `127.0.0.1:0` in tests).
    pub async fn serve(listener: TcpListener) -> std::io::Result<ModelApi> {
        let addr = listener.local_addr()?;
        let clock = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let shared = Arc::new(Shared {
            ids: Ids::new(clock ^ (u64::from(addr.port()) << 32)),
            model: Mutex::new(StandInModel::default()),
            log: Mutex::default(),
        });
        let app = http::router(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(err) = serving.await {
                tracing::error!(%err, "model stand-in stopped");
            }
        });
        Ok(ModelApi { shared, addr, stop: Some(stop), server: Some(server) })
    }

    /// Serves on a fresh `127.0.0.1` port.
    pub async fn start() -> std::io::Result<ModelApi> {
        Self::serve(TcpListener::bind("127.0.0.1:0").await?).await
    }

    /// `http://127.0.0.1:PORT`: what `ANTHROPIC_BASE_URL` is set to.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Adds `rule` after the others (the Rust twin of `POST /_stand-in/rules`); returns
    /// its index, which the log's [`AnsweredBy::Rule`] names.
    pub fn script(&self, rule: Rule) -> Result<usize, ScriptError> {
        lock(&self.shared.model).script.add(rule)
    }

    /// Limits the account until `resets_at`: every turn till then is refused with a
    /// subscriber's session limit, whatever the script says; side requests still answer.
    pub fn limit_until(&self, resets_at: jiff::Timestamp) {
        lock(&self.shared.model).limit = Some((resets_at.as_second(), LimitWindow::FiveHour));
    }

    /// Removes every rule (and forgets sequences under way).
    pub fn clear_rules(&self) {
        lock(&self.shared.model).script.clear();
    }

    /// The rules and how far each has been used.
    pub fn rules(&self) -> Vec<RuleStatus> {
        lock(&self.shared.model).script.rules()
    }

    /// Forgets what each conversation has cached, so the next requests write it again.
    pub fn clear_cache(&self) {
        lock(&self.shared.model).cache.clear();
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.shared.log).clone()
    }

    /// The turns answered so far, in order.
    pub fn turns(&self) -> Vec<ModelRequest> {
        self.requests().into_iter().filter(ModelRequest::is_turn).collect()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.log).clear();
    }

    /// Waits until `check` finds what it looks for in the log (looking every
    /// [`POLL`](crate::test_support::POLL)); after
    /// [`PATIENCE`](crate::test_support::PATIENCE) panics with `what` and the log's tail.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        mut check: impl FnMut(&[ModelRequest]) -> Option<T>,
    ) -> T {
        crate::test_support::wait_for_async(what, || {
            let log = self.requests();
            check(&log).ok_or_else(|| summary(&log))
        })
        .await
    }

    /// Waits until `n` turns have been answered; returns them all.
    pub async fn wait_for_turns(&self, n: usize) -> Vec<ModelRequest> {
        self.wait_for(&format!("{n} turns"), |log| {
            let turns: Vec<ModelRequest> = log.iter().filter(|r| r.is_turn()).cloned().collect();
            (turns.len() >= n).then_some(turns)
        })
        .await
    }

    /// Stops accepting, lets answers under way finish, and waits for the server to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for ModelApi {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The log as a failed wait shows it: a line per request, the last 12.
fn summary(log: &[ModelRequest]) -> String {
    let mut out = format!("{} requests", log.len());
    for r in &log[log.len().saturating_sub(12)..] {
        let text = r.user_text.as_deref().unwrap_or_default();
        let first: String = text.lines().next().unwrap_or_default().chars().take(60).collect();
        let _ = write!(out, "\n  {} {} {:?} {} {first:?}", r.method, r.path, r.kind, r.status);
    }
    out
}
