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
//! sessions is a gauge the service sets; the inbox depth is the receiver's own count,
//! read at scrape ([`Metrics::watch_inbox`]). Rendering never fails and never
//! blocks on IO.
//!
//! It decides nothing and reads no file; names follow Prometheus conventions
//! (`the_loop_` prefix, `_total` counters, `_seconds` histograms).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use loop_github::GithubClient;

use loop_core::plan::{Decision, LedgerEffect};

/// The content type of the text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Bucket bounds of the dispatch-latency histogram, seconds (a paste is milliseconds; a
/// spawn with a checkout can take many seconds).
const DISPATCH_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Bucket bounds of the poll-cycle histogram, seconds.
const POLL_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// The shared registry.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Decided deliveries by (outcome, reason).
    deliveries: Mutex<BTreeMap<(&'static str, String), u64>>,
    dispatch: Histogram,
    poll: Histogram,
    github: Mutex<Vec<GithubClient>>,
    live_sessions: AtomicU64,
    /// The receiver's count, once watched.
    inbox_depth: Mutex<Option<Arc<AtomicU64>>>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one decided delivery under its outcome and reason (the decision's reason
    /// code, e.g. `awaiting-start`, `unauthorized-actor`, `delivered`).
    pub fn delivery(&self, outcome: Outcome, reason: &str) {
        *lock(&self.inner.deliveries).entry((outcome.as_str(), reason.to_owned())).or_insert(0) +=
            1;
    }

    /// Counts a dispatcher decision by what it did to the delivery: `done` (kept:
    /// delivered, spawned, closed, executed), `settled` (refused on purpose, with its
    /// reason), `failed` (released for a retry), `duplicate`; a step that leaves the
    /// delivery in flight (queued) is not counted.
    pub fn decision(&self, decision: &Decision) {
        let outcome = match decision.ledger() {
            LedgerEffect::Untouched if *decision == Decision::Duplicate => Outcome::Duplicate,
            LedgerEffect::Untouched => return,
            LedgerEffect::Keep => Outcome::Done,
            LedgerEffect::Settle(reason) => return self.delivery(Outcome::Settled, reason),
            LedgerEffect::Release => Outcome::Failed,
        };
        self.delivery(outcome, decision_reason(decision));
    }

    /// How long one dispatch took, from its work item's worker picking it up (waiting
    /// for a concurrency permit included) to its outcome.
    pub fn dispatch_latency(&self, took: Duration) {
        self.inner.dispatch.observe(took, DISPATCH_BUCKETS);
    }

    /// How long one poll cycle took.
    pub fn poll_cycle(&self, took: Duration) {
        self.inner.poll.observe(took, POLL_BUCKETS);
    }

    /// Samples `client`'s answers by status and rate limits at every scrape.
    pub fn watch_github(&self, client: GithubClient) {
        lock(&self.inner.github).push(client);
    }

    pub fn set_live_sessions(&self, sessions: u64) {
        self.inner.live_sessions.store(sessions, Ordering::Relaxed);
    }

    /// Reports the receiver's count of journalled deliveries not yet processed
    /// (`Receiver::inbox_depth`) at every scrape.
    pub fn watch_inbox(&self, depth: Arc<AtomicU64>) {
        *lock(&self.inner.inbox_depth) = Some(depth);
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        family(
            &mut out,
            "the_loop_deliveries_total",
            "counter",
            "Deliveries by outcome (rejected, dropped, done, settled, failed, duplicate) and reason, as the event log words it.",
        );
        for ((outcome, reason), count) in lock(&self.inner.deliveries).iter() {
            sample(
                &mut out,
                "the_loop_deliveries_total",
                &[("outcome", outcome), ("reason", reason)],
                *count as f64,
            );
        }
        family(
            &mut out,
            "the_loop_dispatch_latency_seconds",
            "histogram",
            "Time from a work item's worker picking a dispatch up to its outcome (paste, spawn, respawn).",
        );
        self.inner.dispatch.render(&mut out, "the_loop_dispatch_latency_seconds", DISPATCH_BUCKETS);
        family(
            &mut out,
            "the_loop_poll_cycle_duration_seconds",
            "histogram",
            "Duration of one poll cycle.",
        );
        self.inner.poll.render(&mut out, "the_loop_poll_cycle_duration_seconds", POLL_BUCKETS);

        let clients = lock(&self.inner.github).clone();
        family(
            &mut out,
            "the_loop_github_requests_total",
            "counter",
            "GitHub API answers by host and HTTP status (304: answered from the cache, free of rate limit).",
        );
        for client in &clients {
            for (status, count) in client.answers_by_status() {
                let status = status.to_string();
                sample(
                    &mut out,
                    "the_loop_github_requests_total",
                    &[("host", client.host()), ("status", &status)],
                    count as f64,
                );
            }
        }
        family(
            &mut out,
            "the_loop_github_rate_limit_remaining",
            "gauge",
            "Requests left in each GitHub rate-limit bucket, as GitHub last reported.",
        );
        for client in &clients {
            for (resource, limit) in client.rate_limits() {
                sample(
                    &mut out,
                    "the_loop_github_rate_limit_remaining",
                    &[("host", client.host()), ("resource", resource.as_str())],
                    limit.remaining as f64,
                );
            }
        }
        family(
            &mut out,
            "the_loop_live_sessions",
            "gauge",
            "Work items with a live (active or paused) agent session.",
        );
        sample(
            &mut out,
            "the_loop_live_sessions",
            &[],
            self.inner.live_sessions.load(Ordering::Relaxed) as f64,
        );
        // Only with a receiver: a made-up 0 would read as "nothing waiting".
        if let Some(depth) =
            lock(&self.inner.inbox_depth).as_ref().map(|d| d.load(Ordering::Relaxed))
        {
            family(
                &mut out,
                "the_loop_inbox_depth",
                "gauge",
                "Journalled webhook deliveries not yet processed.",
            );
            sample(&mut out, "the_loop_inbox_depth", &[], depth as f64);
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
    /// Refused on purpose (never retried).
    Settled,
    /// Failed and released for a retry.
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
            Self::Settled => "settled",
            Self::Failed => "failed",
            Self::Duplicate => "duplicate",
        }
    }
}

/// A cumulative histogram: one count per bucket bound (observations ≤ the bound), plus
/// the overall count and sum.
#[derive(Debug, Default)]
struct Histogram {
    state: Mutex<HistogramState>,
}

#[derive(Debug, Default)]
struct HistogramState {
    /// Observations per bucket (not cumulative), one more than the bounds (+Inf).
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&self, took: Duration, bounds: &[f64]) {
        let seconds = took.as_secs_f64();
        let mut state = lock(&self.state);
        if state.buckets.len() != bounds.len() + 1 {
            state.buckets = vec![0; bounds.len() + 1];
        }
        let at = bounds.iter().position(|bound| seconds <= *bound).unwrap_or(bounds.len());
        state.buckets[at] += 1;
        state.count += 1;
        state.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, bounds: &[f64]) {
        let state = lock(&self.state);
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (at, bound) in bounds.iter().enumerate() {
            cumulative += state.buckets.get(at).copied().unwrap_or(0);
            sample(out, &bucket, &[("le", &bound.to_string())], cumulative as f64);
        }
        sample(out, &bucket, &[("le", "+Inf")], state.count as f64);
        sample(out, &format!("{name}_sum"), &[], state.sum);
        sample(out, &format!("{name}_count"), &[], state.count as f64);
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        let labels: Vec<String> =
            labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
        let _ = write!(out, "{{{}}}", labels.join(","));
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the format wants it: `\`, `"` and newlines escaped.
fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_are_counted_by_outcome_and_reason() {
        let metrics = Metrics::new();
        metrics.delivery(Outcome::Done, "delivered");
        metrics.delivery(Outcome::Done, "delivered");
        metrics.delivery(Outcome::Settled, "awaiting-start");
        metrics.delivery(Outcome::Duplicate, "duplicate-delivery");
        let text = metrics.render();
        assert!(
            text.contains("the_loop_deliveries_total{outcome=\"done\",reason=\"delivered\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "the_loop_deliveries_total{outcome=\"settled\",reason=\"awaiting-start\"} 1\n"
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
        assert!(text.contains("{outcome=\"settled\",reason=\"awaiting-start\"} 1\n"), "{text}");
        assert!(
            text.contains("{outcome=\"duplicate\",reason=\"duplicate-delivery\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("queued"), "{text}");
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
        metrics.watch_inbox(Arc::new(AtomicU64::new(5)));
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
