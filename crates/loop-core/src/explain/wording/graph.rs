//! The sentences of the process graph (`graph.*`): entering it, each gate's verdict,
//! parking, escalation, forced moves and declared skips.

use super::{done, error, failed, noted, reason, unworded};
use crate::explain::fields::{field, items, strings, text};
use crate::explain::{Mark, Record, Stage};
use crate::log::Kind;

/// A line of this family in words; any other kind is [`unworded`].
pub(super) fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    match kind {
        Kind::GraphStarted => done(format!(
            "entered {}'s process graph ({}) at `{}`",
            items(record),
            field(record, "loop"),
            field(record, "node")
        )),
        Kind::GraphAdvanced => done(format!(
            "the gate of `{}` gave `{}`: {} moved to `{}`{}",
            field(record, "from"),
            field(record, "outcome"),
            items(record),
            field(record, "to"),
            match strings(record, "skipped").collect::<Vec<_>>() {
                skipped if skipped.is_empty() => String::new(),
                skipped => format!(", past {} (declared away)", skipped.join(", ")),
            }
        )),
        Kind::GraphParked => noted(
            Stage::Outcome,
            format!("`{}` waits: {}", field(record, "node"), field(record, "reason")),
        ),
        Kind::GraphBlocked => failed(
            Stage::Outcome,
            format!(
                "the gate of `{}` blocked: {}",
                field(record, "node"),
                field(record, "messages")
            ),
        ),
        Kind::GraphEscalated => failed(
            Stage::Outcome,
            format!(
                "the gate of `{}` blocked again ({} attempts): escalated to a human — {}",
                field(record, "node"),
                field(record, "attempts"),
                field(record, "messages")
            ),
        ),
        Kind::GraphNoEdge => failed(
            Stage::Outcome,
            format!(
                "`{}` passed with `{}`, but the loop declares no edge for it: parked for a human",
                field(record, "node"),
                field(record, "outcome")
            ),
        ),
        Kind::GraphCompleted => done(format!(
            "{} reached `{}`: its process is complete",
            items(record),
            field(record, "node")
        )),
        Kind::GraphLinkFailed => failed(
            Stage::Outcome,
            format!(
                "the process graph could not be driven (the event was still delivered): {}",
                error(record)
            ),
        ),
        Kind::GraphChoiceRefused => noted(
            Stage::Outcome,
            format!(
                "the state file's {} is not what the operator offers: the operator's default was used",
                field(record, "refused")
            ),
        ),
        Kind::GraphSkipped => match text(record, "warning") {
            Some(warning) => failed(Stage::Outcome, warning.to_owned()),
            None => noted(
                Stage::Outcome,
                format!("the process graph was not driven: {}", reason(record)),
            ),
        },
        Kind::GraphForced => done(format!(
            "{} forced {} from `{}` to `{}` past its gates ({}): the pointer moved, no verdict was forged",
            field(record, "actor"),
            items(record),
            field(record, "from"),
            field(record, "to"),
            field(record, "reason")
        )),
        Kind::GraphSkipsDeclared => done(format!(
            "{} declared {} skipped for {} ({}): the walk passes them when it reaches them",
            field(record, "actor"),
            strings(record, "nodes").map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            items(record),
            field(record, "reason")
        )),
        Kind::GraphSkipsRejected => noted(
            Stage::Outcome,
            format!(
                "refused to declare `{}` skipped: {}",
                field(record, "token"),
                field(record, "why")
            ),
        ),
        Kind::GraphAssignmentDelivered => {
            done(format!("pasted the `{}` assignment into the session", field(record, "node")))
        }
        Kind::GraphAssignmentFailed => failed(
            Stage::Outcome,
            format!(
                "could not paste the `{}` assignment: {}",
                field(record, "node"),
                error(record)
            ),
        ),
        Kind::GraphHookDegraded => noted(
            Stage::Outcome,
            format!(
                "hook `{}` degraded (the gate's verdict stands): {}",
                field(record, "hook"),
                error(record)
            ),
        ),
        other => unworded(other.name(), record),
    }
}
