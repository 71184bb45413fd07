//! One line of the event log as a value: its [`Kind`] (the `event` field), its level and
//! its fields.
//!
//! [`Kind`] is the whole vocabulary: every line any producer writes (dispatcher, jobs,
//! commands, poller, receiver, operator, CLI) is of one of its variants, `explain` has a
//! sentence for each, and each variant says whether it records an effect — such a line
//! must be on disk before the emitter moves on ([`Line::records_an_effect`]). Decisions
//! render their own lines (the line is derived from the value, so `explain` cannot
//! disagree with what happened); loop-store writes them.
//!
//! Rendering takes the timestamp, the emitting process's name and its pid as arguments:
//! nothing here reads a clock.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::WorkItemRef;

/// Whether a line of a kind records an effect on a work item (a command executed, a
/// session started or ended, a checkout prepared or removed) or is part of the routine
/// trail (receipt, routing, queueing, reactions, the poller's cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Written before the emitter moves on, so a `kill -9` right after the effect cannot
    /// take its line.
    Effect,
    /// The volume; may trail its emitter by a few milliseconds.
    Trail,
}

macro_rules! kinds {
    ($($variant:ident = $name:literal, $weight:ident;)*) => {
        /// Every type of event-log line, named as the `event` field writes it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $($variant,)*
        }

        impl Kind {
            /// Every kind, in the order of the table.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// The `event` field's text.
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name,)*
                }
            }

            /// The kind a line's `event` field names; `None` for a name this version
            /// does not write (another version's line, or a hand-written one).
            pub fn from_name(name: &str) -> Option<Kind> {
                match name {
                    $($name => Some(Kind::$variant),)*
                    _ => None,
                }
            }

            /// Whether its lines record an effect or are the routine trail.
            pub fn weight(self) -> Weight {
                match self {
                    $(Kind::$variant => Weight::$weight,)*
                }
            }
        }
    };
}

kinds! {
    AgentState = "agent.state", Trail;
    AgentWakeFailed = "agent.wake_failed", Effect;
    AgentWoken = "agent.woken", Effect;
    ApiRequest = "api.request", Trail;
    ApiStarted = "api.started", Trail;
    ApiStopped = "api.stopped", Trail;
    CiFetchFailed = "ci.fetch_failed", Trail;
    CiFetched = "ci.fetched", Trail;
    CleanupDeferred = "cleanup.deferred", Effect;
    ConfigReloadFailed = "config.reload_failed", Trail;
    ConfigReloaded = "config.reloaded", Trail;
    ControlAmbiguous = "control.ambiguous", Effect;
    ControlAnnounceFailed = "control.announce_failed", Effect;
    ControlAnnounced = "control.announced", Effect;
    ControlCommand = "control.command", Effect;
    ControlRecordFailed = "control.record_failed", Effect;
    ControlRejected = "control.rejected", Effect;
    DispatchAbandoned = "dispatch.abandoned", Trail;
    DispatchAwaitingQueue = "dispatch.awaiting_queue", Trail;
    DispatchAwaitingSpawn = "dispatch.awaiting_spawn", Trail;
    DispatchBatched = "dispatch.batched", Trail;
    DispatchDecided = "dispatch.decided", Trail;
    DispatchDropped = "dispatch.dropped", Trail;
    DispatchError = "dispatch.error", Trail;
    DispatchFailed = "dispatch.failed", Trail;
    DispatchInDoubt = "dispatch.in_doubt", Trail;
    DispatchLedgerWriteFailed = "dispatch.ledger_write_failed", Trail;
    DispatchHeld = "dispatch.held", Effect;
    DispatchQueued = "dispatch.queued", Trail;
    DispatchRecovered = "dispatch.recovered", Trail;
    DispatchSucceeded = "dispatch.succeeded", Trail;
    GraphAdvanced = "graph.advanced", Effect;
    GraphAssignmentDelivered = "graph.assignment_delivered", Effect;
    GraphAssignmentFailed = "graph.assignment_failed", Effect;
    GraphBlocked = "graph.blocked", Effect;
    GraphChoiceRefused = "graph.choice_refused", Trail;
    GraphCompleted = "graph.completed", Effect;
    GraphEscalated = "graph.escalated", Effect;
    GraphForced = "graph.forced", Effect;
    GraphHookDegraded = "graph.hook_degraded", Effect;
    GraphLinkFailed = "graph.link_failed", Effect;
    GraphNoEdge = "graph.no_edge", Effect;
    GraphParked = "graph.parked", Effect;
    GraphSkipped = "graph.skipped", Trail;
    GraphSkipsDeclared = "graph.skips_declared", Effect;
    GraphSkipsRejected = "graph.skips_rejected", Trail;
    GraphStarted = "graph.started", Effect;
    HarnessPluginFailed = "harness.plugin_failed", Effect;
    HarnessPluginRegistered = "harness.plugin_registered", Effect;
    InboxFull = "inbox.full", Trail;
    InboxReplaying = "inbox.replaying", Trail;
    InboxResumed = "inbox.resumed", Trail;
    InboxSyncFailed = "inbox.sync_failed", Trail;
    InboxTornTail = "inbox.torn_tail", Trail;
    InboxWriteFailed = "inbox.write_failed", Trail;
    McpCall = "mcp.call", Trail;
    PollAttemptsReleased = "poll.attempts_released", Trail;
    PollClosureDetected = "poll.closure_detected", Trail;
    PollCommentFailed = "poll.comment_failed", Trail;
    PollCommentForwarded = "poll.comment_forwarded", Trail;
    PollCommentSettled = "poll.comment_settled", Trail;
    PollCycle = "poll.cycle", Trail;
    PollGiveupReportFailed = "poll.giveup_report_failed", Trail;
    PollGiveupReported = "poll.giveup_reported", Trail;
    PollItemError = "poll.item_error", Trail;
    PollLinkageFallback = "poll.linkage_fallback", Trail;
    PollProviderError = "poll.provider_error", Trail;
    PollRearmed = "poll.rearmed", Trail;
    PollScopeDegraded = "poll.scope_degraded", Trail;
    PollScopeError = "poll.scope_error", Trail;
    PollScopeRecovered = "poll.scope_recovered", Trail;
    PollSpawnFailed = "poll.spawn_failed", Trail;
    PollUnauthorized = "poll.unauthorized", Trail;
    PollerBlocked = "poller.blocked", Trail;
    PollerStarted = "poller.started", Trail;
    PollerStopped = "poller.stopped", Trail;
    ReactionAdded = "reaction.added", Trail;
    ReactionFailed = "reaction.failed", Trail;
    ReactionShed = "reaction.shed", Trail;
    RegistryUnreadable = "registry.unreadable", Trail;
    RoutingCollaborator = "routing.collaborator", Trail;
    RoutingDropped = "routing.dropped", Trail;
    RoutingLinkageDropped = "routing.linkage_dropped", Trail;
    RoutingRouted = "routing.routed", Trail;
    ServerStarted = "server.started", Trail;
    ServerStopped = "server.stopped", Trail;
    SessionAgentNotice = "session.agent_notice", Effect;
    SessionAgentNoticeFailed = "session.agent_notice_failed", Effect;
    SessionAnnounceFailed = "session.announce_failed", Effect;
    SessionAnnounced = "session.announced", Effect;
    SessionAskFailed = "session.ask_failed", Effect;
    SessionAutoclosed = "session.autoclosed", Effect;
    SessionAwaitingInput = "session.awaiting_input", Effect;
    SessionCleaned = "session.cleaned", Effect;
    SessionClosed = "session.closed", Effect;
    SessionHarnessTerminated = "session.harness_terminated", Effect;
    SessionKeptOpen = "session.kept_open", Effect;
    SessionLinkFailed = "session.link_failed", Effect;
    SessionPaused = "session.paused", Effect;
    SessionPrClosed = "session.pr_closed", Effect;
    SessionPrLinked = "session.pr_linked", Effect;
    SessionPrSessionDeclined = "session.pr_session_declined", Effect;
    SessionPrSpawned = "session.pr_spawned", Effect;
    SessionReplyFailed = "session.reply_failed", Effect;
    SessionReplySent = "session.reply_sent", Effect;
    SessionReset = "session.reset", Effect;
    SessionRespawnAverted = "session.respawn_averted", Effect;
    SessionRespawned = "session.respawned", Effect;
    SessionResumeFailed = "session.resume_failed", Effect;
    SessionResumed = "session.resumed", Effect;
    SessionRetained = "session.retained", Effect;
    SessionSpawnFailed = "session.spawn_failed", Effect;
    SessionSpawnMarkerLeft = "session.spawn_marker_left", Effect;
    SessionSpawnRecovered = "session.spawn_recovered", Effect;
    SessionSpawned = "session.spawned", Effect;
    SessionTmuxKilled = "session.tmux_killed", Effect;
    SessionTouchFailed = "session.touch_failed", Effect;
    SessionUpdateFailed = "session.update_failed", Effect;
    SessionWorkItemMissing = "session.work_item_missing", Effect;
    StateLegacyAdopted = "state.legacy_adopted", Trail;
    StateQuarantined = "state.quarantined", Trail;
    StreamDesync = "stream.desync", Trail;
    StreamDisconnected = "stream.disconnected", Trail;
    StreamRefused = "stream.refused", Trail;
    StreamSubscribed = "stream.subscribed", Trail;
    WebhookReceived = "webhook.received", Trail;
    WebhookRejected = "webhook.rejected", Trail;
    WorkItemEnded = "work_item.ended", Effect;
    WorkItemPullRequestEnded = "work_item.pull_request_ended", Effect;
    WorkItemReopened = "work_item.reopened", Effect;
    WorkItemStampFailed = "work_item.stamp_failed", Effect;
    WorkspaceCleanFailed = "workspace.clean_failed", Effect;
    WorkspaceCleaned = "workspace.cleaned", Effect;
    WorkspacePrepared = "workspace.prepared", Effect;
    WorkspaceTrustFailed = "workspace.trust_failed", Effect;
    WorkspaceTrusted = "workspace.trusted", Effect;
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// How loud a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

impl Level {
    /// The level a line's `level` field names (`debug`, `info`, `warning`, `error`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "debug" => Some(Self::Debug),
            "info" => Some(Self::Info),
            "warning" => Some(Self::Warning),
            "error" => Some(Self::Error),
            _ => None,
        }
    }
}

/// One line to append: a type, a level and its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    kind: Kind,
    level: Level,
    fields: Map<String, Value>,
}

impl Line {
    pub fn new(level: Level, kind: Kind) -> Self {
        Self { kind, level, fields: Map::new() }
    }

    pub fn debug(kind: Kind) -> Self {
        Self::new(Level::Debug, kind)
    }

    pub fn info(kind: Kind) -> Self {
        Self::new(Level::Info, kind)
    }

    pub fn warning(kind: Kind) -> Self {
        Self::new(Level::Warning, kind)
    }

    pub fn error(kind: Kind) -> Self {
        Self::new(Level::Error, kind)
    }

    /// Adds a field; a value that encodes as `null` is omitted.
    pub fn field(mut self, key: &str, value: impl Serialize) -> Self {
        match serde_json::to_value(value) {
            Ok(Value::Null) | Err(_) => {}
            Ok(value) => {
                self.fields.insert(key.to_owned(), value);
            }
        }
        self
    }

    /// Adds `work_item`, the field `events --work-item` filters on.
    pub fn work_item(self, item: &WorkItemRef) -> Self {
        self.field("work_item", item.to_string())
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    pub fn level(&self) -> Level {
        self.level
    }

    /// The value of field `key`, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// Whether the line records an effect ([`Weight::Effect`]) or something going wrong
    /// (a warning or an error, whatever its kind). A process that writes behind its
    /// emitters writes such a line before `emit` returns.
    pub fn records_an_effect(&self) -> bool {
        self.level >= Level::Warning || self.kind.weight() == Weight::Effect
    }

    /// The line as written: envelope first (`ts`, `source`, `event`, `level`, `pid`), then
    /// the fields, newline-terminated.
    pub fn render(&self, ts: Timestamp, source: &str, pid: u32) -> Vec<u8> {
        let mut object = Map::new();
        object.insert("ts".into(), Value::String(format_ts(ts)));
        object.insert("source".into(), Value::String(source.to_owned()));
        object.insert("event".into(), Value::String(self.kind.name().to_owned()));
        object.insert(
            "level".into(),
            serde_json::to_value(self.level).unwrap_or(Value::String("info".into())),
        );
        object.insert("pid".into(), Value::from(pid));
        for (key, value) in &self.fields {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
        let mut line = Value::Object(object).to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

/// The envelope's timestamp: RFC 3339 UTC with milliseconds, `2026-11-29T16:27:45.123Z`.
pub fn format_ts(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_the_envelope_first_and_omits_nulls() {
        let ts: Timestamp = "2026-11-29T16:27:45.1234Z".parse().unwrap();
        let line =
            Line::warning(Kind::PollItemError).field("reason", "x").field("actor", None::<String>);
        let text = String::from_utf8(line.render(ts, "poll", 42)).unwrap();
        assert_eq!(
            text,
            "{\"ts\":\"2026-11-29T16:27:45.123Z\",\"source\":\"poll\",\"event\":\"poll.item_error\",\"level\":\"warning\",\"pid\":42,\"reason\":\"x\"}\n"
        );
    }

    #[test]
    fn a_whole_second_timestamp_still_has_milliseconds() {
        assert_eq!(format_ts("2026-01-02T03:04:05Z".parse().unwrap()), "2026-01-02T03:04:05.000Z");
    }

    #[test]
    fn warnings_and_effect_kinds_are_effects_and_routing_lines_are_not() {
        assert!(Line::info(Kind::SessionSpawned).records_an_effect());
        assert!(Line::warning(Kind::RoutingDropped).records_an_effect());
        assert!(!Line::info(Kind::RoutingRouted).records_an_effect());
    }

    #[test]
    fn every_kind_reads_back_from_its_name_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for kind in Kind::ALL {
            assert_eq!(Kind::from_name(kind.name()), Some(*kind));
            assert!(seen.insert(kind.name()), "{kind} twice");
            let (family, rest) = kind.name().split_once('.').expect("family.name");
            assert!(!family.is_empty() && !rest.is_empty(), "{kind}");
        }
        assert_eq!(Kind::from_name("brand.new"), None);
    }
}
