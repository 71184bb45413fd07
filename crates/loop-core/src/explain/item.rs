//! A work item's current records ([`ItemState`], read by the caller) and what they say:
//! arming, sessions, the poll ledger, collaborators, the end.

use serde_json::Value;

use super::DeliveryTrail;
use crate::WorkItemRef;
use crate::record::{Collaborators, Control, Ended, EndpointStatus, LocalRecord, PollLedger};

/// A work item's current records, as the caller read them.
#[derive(Debug, Clone, Default)]
pub struct ItemState {
    pub control: Option<Control>,
    pub session: Option<LocalRecord>,
    pub ledger: Option<PollLedger>,
    pub ended: Option<Ended>,
    pub collaborators: Option<Collaborators>,
}

impl ItemState {
    /// Whether any record holds something about the item.
    pub fn known(&self) -> bool {
        self.control.is_some()
            || self.session.is_some()
            || self.ledger.is_some()
            || self.ended.is_some()
    }

    /// The records as JSON: `{control, session, poll, ended, collaborators}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "control": self.control,
            "session": self.session,
            "poll": self.ledger,
            "ended": self.ended,
            "collaborators": self.collaborators,
        })
    }
}

/// Everything `explain` says about a work item, as `explain --json` and
/// `GET /api/v1/explain` print it: `{workItem, state, summary, deliveries}`.
pub fn item_explanation(item: &WorkItemRef, state: &ItemState, trails: &[DeliveryTrail]) -> Value {
    serde_json::json!({
        "workItem": item.to_string(),
        "state": state.to_json(),
        "summary": describe_item(state),
        "deliveries": trails,
    })
}

/// A work item's records in words: arming, session, ledger, collaborators, ended.
pub fn describe_item(state: &ItemState) -> Vec<String> {
    let mut lines = Vec::new();
    lines.push(match &state.control {
        None => "arming: no command recorded — nothing spawns until an authorized `the-loop start`"
            .to_owned(),
        Some(control) => {
            let by = control.actor.as_ref().map(|a| format!(" by @{a}")).unwrap_or_default();
            let armed =
                if crate::control::is_armed(Some(control.command)) { "armed" } else { "not armed" };
            let source = control.source.name();
            format!(
                "arming: {armed} — last command `{}`{by} ({source}) at {}",
                control.command.name(),
                control.requested_at
            )
        }
    });
    match &state.session {
        None => lines.push("session: none on this machine".to_owned()),
        Some(record) => {
            for (endpoint, handle) in &record.endpoints {
                let status = match handle.status {
                    EndpointStatus::Active => "active",
                    EndpointStatus::Paused => "paused",
                    EndpointStatus::Closed => "closed",
                };
                let tmux = if handle.tmux_target.is_empty() {
                    "no tmux session".to_owned()
                } else {
                    format!("tmux `{}`", handle.tmux_target)
                };
                let whose = if *endpoint == record.work_item {
                    "session".to_owned()
                } else {
                    format!("session for {endpoint}")
                };
                lines.push(format!(
                    "{whose}: {status}, {} in {tmux}, {} deliveries remembered{}",
                    handle.harness,
                    handle.recent_deliveries.len(),
                    handle
                        .last_event_at
                        .map(|t| format!(", last event at {t}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    if let Some(ledger) = &state.ledger {
        let pending = ledger.comments.comment_attempts.len();
        let gave_up = ledger.comments.gave_up.as_ref().map_or(0, |g| g.comments.len());
        let spawn = ledger.spawn.as_ref().map_or_else(String::new, |s| {
            format!(", spawn attempts {}{}", s.attempts, if s.gave_up { " (gave up)" } else { "" })
        });
        lines.push(format!(
            "poll ledger: {} comment(s) seen, {pending} awaiting a retry, {gave_up} given up{spawn}",
            ledger.comments.seen_comments.len()
        ));
    }
    if let Some(collaborators) = state.collaborators.as_ref().filter(|c| !c.users.is_empty()) {
        let names: Vec<String> =
            collaborators.users.iter().map(|c| format!("@{}", c.login)).collect();
        lines.push(format!("collaborators (input only): {}", names.join(", ")));
    }
    if let Some(ended) = &state.ended {
        let by = ended.actor.as_ref().map(|a| format!(" by @{a}")).unwrap_or_default();
        lines.push(format!(
            "ended: {} {}{by} at {} (seen by {})",
            ended.kind, ended.state, ended.at, ended.source
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_with_no_records_is_said_to_be_unarmed_and_sessionless() {
        let lines = describe_item(&ItemState::default());
        assert!(lines[0].starts_with("arming: no command recorded"), "{lines:?}");
        assert_eq!(lines[1], "session: none on this machine");
    }
}
