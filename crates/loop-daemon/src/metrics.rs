//! `GET /metrics`: the service's numbers in the Prometheus text exposition format
//! (version 0.0.4), for a scraper on the receiver's port (SPEC §6).
//!
//! [`Metrics`] is a small registry the service's parts share (cheap to clone). Every
//! delivery is counted once, by whoever ends it: the receiver's front door counts what it
//! refuses before journalling (`rejected`: bad signature, invalid payload, too large), the
//! judging both ingresses share counts what it drops (`dropped`: event filter,
//! self-authored, undeclared repository, unauthorized actor, …, [`Metrics::delivery`]
//! beside the event-log line), and the dispatcher counts each decided delivery
//! ([`Metrics::decision`]); the reasons are the event log's. The dispatcher also times
//! each dispatch ([`Metrics::dispatch_latency`]); the poller times each cycle
//! ([`Metrics::poll_cycle`]); the GitHub clients are sampled at scrape time (requests by
//! status, 304s included, and the rate limit remaining — [`Metrics::watch_github`]); live
//! sessions is a gauge the service sets; the inbox's depth and processing lag are the
//! receiver's own counts, read at scrape ([`Metrics::watch_inbox`]). Deliveries held
//! while their agent cannot take them are counted when held and when let through
//! ([`Metrics::held`], [`Metrics::released`]); the harnesses cut off by a usage limit are
//! read from the agents' states at scrape ([`Metrics::watch_agents`]). Rendering never
//! fails and never blocks on IO.
//!
//! It decides nothing and reads no file; names follow Prometheus conventions
//! (`the_loop_` prefix, `_total` counters, `_seconds` histograms). The families live in a
//! `prometheus-client` registry that encodes them: what the service records is a metric
//! of that crate, what is sampled at scrape time is a [`Collector`]. A family with no
//! series yet is left out of the exposition (no `# HELP`/`# TYPE` without a sample).

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use loop_github::GithubClient;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, prometheus_text,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use loop_core::plan::{Decision, LedgerEffect};

/// The content type of the text exposition format (version 0.0.4).
pub const CONTENT_TYPE_TEXT: &str = prometheus_text::CONTENT_TYPE;

/// Bucket bounds of the dispatch-latency histogram, seconds (a paste is milliseconds; a
/// spawn with a checkout can take many seconds).
const DISPATCH_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Bucket bounds of the poll-cycle histogram, seconds.
const POLL_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// The shared registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Encodes every family below and the [`Sampled`] ones, in that order, at each scrape.
    registry: Registry,
    /// Decided deliveries by (outcome, reason).
    deliveries: Family<DeliveryLabels, Counter>,
    dispatch: Histogram,
    poll: Histogram,
    live_sessions: Gauge<u64, AtomicU64>,
    /// Held deliveries and spawns by why.
    held: Family<HeldLabels, Counter>,
    released: Counter,
    /// Read by the registry's collector at each scrape.
    sampled: Arc<Sampled>,
}

/// The labels of `the_loop_deliveries_held_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HeldLabels {
    reason: &'static str,
}

/// The labels of `the_loop_deliveries_total`, in that order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DeliveryLabels {
    outcome: &'static str,
    reason: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let deliveries = Family::<DeliveryLabels, Counter>::default();
        let dispatch = Histogram::new(DISPATCH_BUCKETS.iter().copied());
        let poll = Histogram::new(POLL_BUCKETS.iter().copied());
        let live_sessions = Gauge::<u64, AtomicU64>::default();
        let (held, released) = (Family::<HeldLabels, Counter>::default(), Counter::default());
        let sampled = Arc::new(Sampled::default());
        // The registry ends each help text registered here with a full stop, and adds
        // `_total` to a counter's name.
        let mut registry = Registry::default();
        registry.register(
            "the_loop_deliveries",
            "Deliveries by outcome (rejected, dropped, refused, done, failed, duplicate) and reason, as the event log words it",
            deliveries.clone(),
        );
        registry.register(
            "the_loop_dispatch_latency_seconds",
            "Time from a work item's worker picking a dispatch up to its outcome (paste, spawn, respawn)",
            dispatch.clone(),
        );
        registry.register(
            "the_loop_poll_cycle_duration_seconds",
            "Duration of one poll cycle",
            poll.clone(),
        );
        registry.register(
            "the_loop_live_sessions",
            "Work items with a live (active or paused) agent session",
            live_sessions.clone(),
        );
        registry.register(
            "the_loop_deliveries_held",
            "Deliveries and spawns held because their agent could not take them (a permission dialog, a usage limit), by why",
            held.clone(),
        );
        registry.register(
            "the_loop_deliveries_released",
            "Held deliveries and spawns let through once their agent could take them",
            released.clone(),
        );
        registry.register_collector(Box::new(Arc::clone(&sampled)));
        let inner =
            Inner { registry, deliveries, dispatch, poll, live_sessions, held, released, sampled };
        Self { inner: Arc::new(inner) }
    }

    /// Counts one decided delivery under its outcome and reason (the decision's reason
    /// code, e.g. `awaiting-start`, `unauthorized-actor`, `delivered`).
    pub fn delivery(&self, outcome: Outcome, reason: &str) {
        let labels = DeliveryLabels { outcome: outcome.as_str(), reason: reason.to_owned() };
        self.inner.deliveries.get_or_create(&labels).inc();
    }

    /// Counts a dispatcher decision by what it did to the delivery: `refused` (a rule
    /// said no on purpose: spawn policy, awaiting start, paused, out of scope, a refused
    /// command, no work item — whether the ledger releases the key for a later retry or
    /// not), `done` (acted on: delivered, spawned, closed, executed), `failed` (an
    /// attempt that went wrong, released for a retry), `duplicate`; a step that leaves the
    /// delivery in flight (queued) is not counted.
    pub fn decision(&self, decision: &Decision) {
        let outcome = match decision.ledger() {
            _ if is_refusal(decision) => Outcome::Refused,
            LedgerEffect::Untouched if *decision == Decision::Duplicate => Outcome::Duplicate,
            LedgerEffect::Untouched => return,
            LedgerEffect::Keep | LedgerEffect::Settle(_) => Outcome::Done,
            LedgerEffect::Release => Outcome::Failed,
        };
        self.delivery(outcome, decision_reason(decision));
    }

    /// How long one dispatch took, from its work item's worker picking it up (waiting
    /// for a concurrency permit included) to its outcome.
    pub fn dispatch_latency(&self, took: Duration) {
        self.inner.dispatch.observe(took.as_secs_f64());
    }

    /// How long one poll cycle took.
    pub fn poll_cycle(&self, took: Duration) {
        self.inner.poll.observe(took.as_secs_f64());
    }

    /// Samples `client`'s answers by status and rate limits at every scrape.
    pub fn watch_github(&self, client: GithubClient) {
        lock(&self.inner.sampled.github).push(client);
    }

    pub fn set_live_sessions(&self, sessions: u64) {
        self.inner.live_sessions.set(sessions);
    }

    /// Counts a delivery or spawn held, with why (`dispatch.held`'s reason).
    pub fn held(&self, reason: &'static str) {
        self.inner.held.get_or_create(&HeldLabels { reason }).inc();
    }

    /// Counts a held delivery or spawn let through.
    pub fn released(&self) {
        self.inner.released.inc();
    }

    /// Reports how many harnesses a usage limit cuts off, from `agents`, at every scrape.
    pub fn watch_agents(&self, agents: Arc<crate::agent_state::AgentStates>) {
        *lock(&self.inner.sampled.agents) = Some(agents);
    }

    /// Reports the receiver's inbox (`Receiver::inbox`) at every scrape: its depth and
    /// how far processing is behind.
    pub fn watch_inbox(&self, inbox: Arc<InboxGauges>) {
        *lock(&self.inner.sampled.inbox) = Some(inbox);
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail, and nothing registered has a shape the text
        // format refuses (a native-only histogram); should that change, say so and
        // serve what was encoded rather than fail the scrape.
        if let Err(fmt::Error) = prometheus_text::encode(&mut out, &self.inner.registry) {
            tracing::error!("the metrics could not all be encoded");
        }
        out
    }

    /// A router answering `GET /metrics`, to merge into the receiver's.
    pub fn router(&self) -> Router {
        let metrics = self.clone();
        Router::new().route(
            "/metrics",
            get(move || {
                let body = metrics.render();
                async move { ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], body).into_response() }
            }),
        )
    }
}

/// What is read from other parts of the service at scrape time rather than recorded: the
/// GitHub clients' own counts and the receiver's inbox depth.
#[derive(Debug, Default)]
struct Sampled {
    github: Mutex<Vec<GithubClient>>,
    /// The receiver's inbox, once watched.
    inbox: Mutex<Option<Arc<InboxGauges>>>,
    /// The agents' states, once watched.
    agents: Mutex<Option<Arc<crate::agent_state::AgentStates>>>,
}

/// What the receiver keeps current about its inbox journal, read at scrape time: the
/// journal writer counts deliveries in and marks out, the processor says which delivery
/// it is at.
#[derive(Debug, Default)]
pub struct InboxGauges {
    /// Journalled deliveries without a `processed` mark (a delivery whose job the
    /// dispatcher still runs included).
    depth: AtomicU64,
    /// When the oldest delivery the processor has not finished arrived, in milliseconds
    /// since the Unix epoch; 0 when it has caught up.
    oldest_waiting_ms: AtomicI64,
}

impl InboxGauges {
    /// Gauges for a journal that holds `pending` unprocessed deliveries.
    pub fn new(pending: u64) -> Self {
        Self { depth: AtomicU64::new(pending), oldest_waiting_ms: AtomicI64::new(0) }
    }

    pub fn depth(&self) -> u64 {
        self.depth.load(Ordering::Relaxed)
    }

    /// The journal holds `pending` unprocessed deliveries now.
    pub fn set_depth(&self, pending: u64) {
        self.depth.store(pending, Ordering::Relaxed);
    }

    /// The processor is at a delivery that arrived at `received_at` (`None`: it has
    /// caught up).
    pub fn processing_at(&self, received_at: Option<jiff::Timestamp>) {
        // A timestamp at the epoch itself would read as "caught up": a millisecond off.
        let ms = received_at.map_or(0, |at| at.as_millisecond().max(1));
        self.oldest_waiting_ms.store(ms, Ordering::Relaxed);
    }

    /// How long the oldest delivery the processor has not finished has waited, in
    /// seconds (0 when it has caught up).
    fn lag_seconds(&self, now: jiff::Timestamp) -> f64 {
        match self.oldest_waiting_ms.load(Ordering::Relaxed) {
            0 => 0.0,
            ms => (now.as_millisecond() - ms).max(0) as f64 / 1000.0,
        }
    }
}

impl Collector for Sampled {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        // Help texts here are written as given (no full stop is added).
        let clients = lock(&self.github).clone();
        family(
            &mut encoder,
            "the_loop_github_requests",
            "GitHub API answers by host and HTTP status (304: answered from the cache, free of rate limit).",
            clients.iter().flat_map(|client| {
                client.answers_by_status().into_iter().map(|(status, count)| {
                    (
                        [("host", client.host().to_owned()), ("status", status.to_string())],
                        ConstCounter::new(count),
                    )
                })
            }),
        )?;
        family(
            &mut encoder,
            "the_loop_github_rate_limit_remaining",
            "Requests left in each GitHub rate-limit bucket, as GitHub last reported.",
            clients.iter().flat_map(|client| {
                client.rate_limits().into_iter().map(|(resource, limit)| {
                    let labels = [
                        ("host", client.host().to_owned()),
                        ("resource", resource.as_str().to_owned()),
                    ];
                    (labels, ConstGauge::new(limit.remaining))
                })
            }),
        )?;
        if let Some(agents) = lock(&self.agents).clone() {
            let metric = encoder.encode_descriptor(
                "the_loop_limited_harnesses",
                "Harnesses (their accounts on this machine) cut off by a usage limit until their agent is woken.",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(agents.limited_harnesses() as u64).encode(metric)?;
        }
        // Only with a receiver: a made-up 0 would read as "nothing waiting".
        if let Some(inbox) = lock(&self.inbox).clone() {
            let metric = encoder.encode_descriptor(
                "the_loop_inbox_depth",
                "Journalled webhook deliveries not yet processed.",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(inbox.depth()).encode(metric)?;
            let metric = encoder.encode_descriptor(
                "the_loop_inbox_lag_seconds",
                "Age of the oldest journalled webhook delivery the processor has not finished (0: caught up).",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(inbox.lag_seconds(jiff::Timestamp::now())).encode(metric)?;
        }
        Ok(())
    }
}

/// Encodes one labelled family, or nothing if it has no series.
fn family<M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = ([(&'static str, String); 2], M)>,
) -> Result<(), fmt::Error> {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, M::TYPE)?;
    for (labels, value) in series {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Whether `decision` is a rule refusing the delivery on purpose: never a failure, even
/// when the ledger releases its key so that a later event may arm the item.
fn is_refusal(decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::NoWorkItem { .. }
            | Decision::OutOfScope { .. }
            | Decision::Ambiguous { .. }
            | Decision::Rejected { .. }
            | Decision::SpawnRefused { .. }
            | Decision::SessionPaused { .. }
    )
}

/// A decision's reason label.
fn decision_reason(decision: &Decision) -> &'static str {
    match decision {
        Decision::Duplicate => "duplicate-delivery",
        Decision::NoWorkItem { reason } => reason,
        Decision::OutOfScope { refusal, .. } => refusal.reason(),
        Decision::Ambiguous { .. } => "control-ambiguous",
        Decision::Rejected { rejection, .. } => rejection.reason(),
        Decision::Executed { .. } | Decision::RosterEdited { .. } => "control-executed",
        Decision::ControlConsumed { .. } => "control-consumed",
        Decision::HandedToGraph { .. } => "handed-to-graph",
        Decision::SpawnRefused { refusal } => refusal.reason(),
        Decision::SessionPaused { .. } => "session-paused",
        Decision::AlreadyProcessed { .. } => "already-processed",
        Decision::Queued { .. } => "queued",
        Decision::AwaitingSpawn { .. } => "awaiting-spawn",
        Decision::AwaitingQueue { .. } => "awaiting-queue",
        Decision::Closed { reason }
        | Decision::AutoClosed { reason, .. }
        | Decision::KeptOpen { reason, .. } => reason,
        Decision::Ended { .. } => "ended",
        Decision::StampFailed { .. } => "stamp-failed",
        Decision::CleanupDeferred { .. } => "cleanup-deferred",
        Decision::Reopened { .. } => "reopened",
        Decision::Delivered { .. } => "delivered",
        Decision::Respawned { .. } => "respawned",
        Decision::Spawned { .. } => "spawned",
        Decision::SpawnFailed { .. } => "spawn-failed",
        Decision::SessionVanished { .. } => "session-vanished",
        Decision::SessionOccupied { .. } => "session-occupied",
        Decision::Failed { .. } => "dispatch-failed",
        Decision::TimedOut { .. } => "timed-out",
        Decision::ShuttingDown { .. } => "shutting-down",
    }
}

/// How a delivery ended: refused at the front door, dropped by the judging, or as the
/// delivery ledger sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Refused by the receiver before it was journalled (`webhook.rejected`).
    Rejected,
    /// Dropped by the event filter or the judging (`routing.dropped`,
    /// `dispatch.dropped`), before the dispatcher saw it.
    Dropped,
    /// Acted on and kept: delivered, spawned, closed, executed.
    Done,
    /// Refused on purpose by a rule (spawn policy, awaiting start, paused, out of scope,
    /// a refused command): what the operator configured, not a fault.
    Refused,
    /// An attempt that went wrong, released for a retry.
    Failed,
    /// Already taken in by either ingress.
    Duplicate,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::Dropped => "dropped",
            Self::Done => "done",
            Self::Refused => "refused",
            Self::Failed => "failed",
            Self::Duplicate => "duplicate",
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_deliveries_and_limited_harnesses_are_counted() {
        use loop_core::agent_state::{AgentState, Tracked};
        let metrics = Metrics::new();
        assert!(!metrics.render().contains("the_loop_limited_harnesses"), "not watched yet");
        let agents = Arc::new(crate::agent_state::AgentStates::default());
        metrics.watch_agents(agents.clone());
        assert!(metrics.render().contains("the_loop_limited_harnesses 0\n"));
        let now = jiff::Timestamp::now();
        let limited = Tracked {
            state: AgentState::Limited { until: Some(now), notice: "limit".into() },
            ..Tracked::starting(now)
        };
        agents.set("loop-a-1", "claude", limited.clone());
        agents.set("loop-a-2", "claude", limited);
        metrics.held("the agent is cut off by a usage limit");
        metrics.held("the agent is cut off by a usage limit");
        metrics.released();
        let text = metrics.render();
        assert!(text.contains("the_loop_limited_harnesses 1\n"), "one account: {text}");
        assert!(
            text.contains("the_loop_deliveries_held_total{reason=\"the agent is cut off by a usage limit\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("the_loop_deliveries_released_total 1\n"), "{text}");
        agents.woken("loop-a-1", now);
        agents.woken("loop-a-2", now);
        assert!(metrics.render().contains("the_loop_limited_harnesses 0\n"));
    }

    #[test]
    fn deliveries_are_counted_by_outcome_and_reason() {
        let metrics = Metrics::new();
        metrics.delivery(Outcome::Done, "delivered");
        metrics.delivery(Outcome::Done, "delivered");
        metrics.delivery(Outcome::Refused, "awaiting-start");
        metrics.delivery(Outcome::Duplicate, "duplicate-delivery");
        let text = metrics.render();
        assert!(
            text.contains("the_loop_deliveries_total{outcome=\"done\",reason=\"delivered\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "the_loop_deliveries_total{outcome=\"refused\",reason=\"awaiting-start\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "the_loop_deliveries_total{outcome=\"duplicate\",reason=\"duplicate-delivery\"} 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn dispatcher_decisions_count_by_ledger_effect_and_in_flight_steps_do_not() {
        let metrics = Metrics::new();
        let item: loop_core::WorkItemRef = "github:octo/app#1".parse().unwrap();
        metrics.decision(&Decision::Closed { reason: "issue-closed" });
        metrics.decision(&Decision::Reopened { item: item.clone(), ingress: "poll" });
        metrics.decision(&Decision::SpawnRefused {
            refusal: loop_core::control::SpawnRefusal::AwaitingStart,
        });
        metrics.decision(&Decision::Queued { item, spawn: false });
        metrics.decision(&Decision::Duplicate);
        let text = metrics.render();
        assert!(text.contains("{outcome=\"done\",reason=\"issue-closed\"} 1\n"), "{text}");
        assert!(!text.contains("reopened"), "a closure's steps are not deliveries: {text}");
        assert!(text.contains("{outcome=\"refused\",reason=\"awaiting-start\"} 1\n"), "{text}");
        assert!(
            text.contains("{outcome=\"duplicate\",reason=\"duplicate-delivery\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("queued"), "{text}");
    }

    /// A rule refusing a delivery on purpose is what the operator configured: the
    /// `failed` alert must not fire on it, whatever the ledger does with the key.
    #[test]
    fn every_deliberate_refusal_counts_as_refused_under_its_reason_never_failed() {
        use loop_core::control::{Command, Rejection, SpawnRefusal};
        use loop_core::guards::ScopeRefusal;
        let item: loop_core::WorkItemRef = "github:octo/app#1".parse().unwrap();
        let refusals = [
            (Decision::SpawnRefused { refusal: SpawnRefusal::SpawnPolicy }, "spawn-policy"),
            (Decision::SpawnRefused { refusal: SpawnRefusal::AwaitingStart }, "awaiting-start"),
            (
                Decision::SpawnRefused { refusal: SpawnRefusal::CollaboratorNoSpawn },
                "collaborator-no-spawn",
            ),
            (Decision::SpawnRefused { refusal: SpawnRefusal::NoWorkItem }, "no-work-item"),
            (Decision::SessionPaused { item: item.clone() }, "session-paused"),
            (
                Decision::Rejected {
                    command: Command::Stop,
                    rejection: Rejection::UnauthorizedActor,
                    target: Some(item.clone()),
                },
                "unauthorized-actor",
            ),
            (
                Decision::OutOfScope {
                    refusal: ScopeRefusal::Unaddressed,
                    instance: None,
                    command: None,
                },
                "unaddressed",
            ),
            (
                Decision::Ambiguous { commands: vec![Command::Stop, Command::Start] },
                "control-ambiguous",
            ),
            (Decision::NoWorkItem { reason: "no-target" }, "no-target"),
        ];
        for (decision, reason) in refusals {
            let metrics = Metrics::new();
            metrics.decision(&decision);
            let text = metrics.render();
            assert!(
                text.contains(&format!(
                    "the_loop_deliveries_total{{outcome=\"refused\",reason=\"{reason}\"}} 1\n"
                )),
                "{decision:?}: {text}"
            );
            assert!(!text.contains("outcome=\"failed\""), "{decision:?}: {text}");
        }
        // What went wrong still counts as failed.
        let metrics = Metrics::new();
        metrics.decision(&Decision::SpawnFailed { item, error: "no harness".into() });
        assert!(metrics.render().contains("{outcome=\"failed\",reason=\"spawn-failed\"} 1\n"));
    }

    #[test]
    fn a_histogram_is_cumulative_and_its_inf_bucket_is_the_count() {
        let metrics = Metrics::new();
        metrics.dispatch_latency(Duration::from_micros(500));
        metrics.dispatch_latency(Duration::from_millis(7));
        metrics.dispatch_latency(Duration::from_secs(100));
        let text = metrics.render();
        assert!(
            text.contains("the_loop_dispatch_latency_seconds_bucket{le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("the_loop_dispatch_latency_seconds_bucket{le=\"0.01\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("the_loop_dispatch_latency_seconds_bucket{le=\"60\"} 2\n"), "{text}");
        assert!(
            text.contains("the_loop_dispatch_latency_seconds_bucket{le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("the_loop_dispatch_latency_seconds_count 3\n"), "{text}");
    }

    #[test]
    fn a_family_without_series_is_left_out() {
        let text = Metrics::new().render();
        assert!(!text.contains("the_loop_deliveries_total"), "{text}");
        assert!(!text.contains("the_loop_github_"), "{text}");
        assert!(!text.contains("the_loop_inbox_"), "no receiver, no made-up 0: {text}");
        assert!(text.contains("# TYPE the_loop_live_sessions gauge\nthe_loop_live_sessions 0\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new();
        metrics.delivery(Outcome::Failed, "a \"quoted\"\\ne\nline");
        assert!(metrics.render().contains(r#"reason="a \"quoted\"\\ne\nline""#));
    }

    #[test]
    fn the_exposition_parses_as_prometheus_text() {
        let metrics = Metrics::new();
        metrics.delivery(Outcome::Done, "closed");
        metrics.poll_cycle(Duration::from_millis(300));
        metrics.set_live_sessions(2);
        let inbox = Arc::new(InboxGauges::new(5));
        inbox.processing_at(Some(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3)));
        metrics.watch_inbox(inbox);
        let text = metrics.render();
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
            .expect("valid exposition");
        let value =
            |name: &str| scrape.samples.iter().find(|s| s.metric == name).map(|s| s.value.clone());
        assert!(
            matches!(value("the_loop_live_sessions"), Some(prometheus_parse::Value::Gauge(v)) if v == 2.0)
        );
        assert!(
            matches!(value("the_loop_inbox_depth"), Some(prometheus_parse::Value::Gauge(v)) if v == 5.0)
        );
        assert!(
            matches!(value("the_loop_inbox_lag_seconds"), Some(prometheus_parse::Value::Gauge(v)) if (3.0..10.0).contains(&v))
        );
        assert!(
            matches!(value("the_loop_deliveries_total"), Some(prometheus_parse::Value::Counter(v)) if v == 1.0)
        );
        assert!(matches!(
            value("the_loop_poll_cycle_duration_seconds"),
            Some(prometheus_parse::Value::Histogram(_))
        ));
        // Every non-comment line is `name{labels} value`, every family has HELP and TYPE.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(series.starts_with("the_loop_"), "{line}");
        }
        assert_eq!(text.matches("# HELP ").count(), text.matches("# TYPE ").count());
    }
}
