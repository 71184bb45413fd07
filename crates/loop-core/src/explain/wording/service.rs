//! The sentences of the service around the work: config reloads (`config.*`), the
//! receiver and the control plane starting and stopping (`server.*`, `api.*`), stream
//! clients (`stream.*`) and the state root's own events (`registry.*`, `state.*`).

use super::{error, failed, noted, unworded};
use crate::explain::fields::{field, items, text};
use crate::explain::{Mark, Record, Stage};
use crate::log::Kind;

/// A line of this family in words; any other kind is [`unworded`].
pub(super) fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    match kind {
        Kind::ConfigReloaded => noted(
            Stage::Outcome,
            match text(record, "detail") {
                Some(detail) => format!("the config file changed and was reloaded: {detail}"),
                None => "the config file changed and was reloaded".to_owned(),
            },
        ),
        Kind::ConfigReloadFailed => failed(
            Stage::Outcome,
            format!(
                "the changed config file `{}` was refused, the previous one stays in force: {}",
                field(record, "path"),
                error(record)
            ),
        ),
        Kind::ServerStarted => noted(
            Stage::Outcome,
            format!(
                "the webhook receiver started on {}:{}{}",
                field(record, "host"),
                field(record, "port"),
                field(record, "path")
            ),
        ),
        Kind::ServerStopped => noted(Stage::Outcome, "the webhook receiver stopped".to_owned()),
        Kind::ApiStarted => noted(
            Stage::Outcome,
            format!(
                "the control plane started on http://{}:{}",
                field(record, "host"),
                field(record, "port")
            ),
        ),
        Kind::ApiStopped => noted(Stage::Outcome, "the control plane stopped".to_owned()),
        Kind::ApiRequest => noted(
            Stage::Outcome,
            format!(
                "{} {} answered {}",
                field(record, "method"),
                field(record, "path"),
                field(record, "status")
            ),
        ),
        Kind::StreamSubscribed => noted(
            Stage::Outcome,
            format!("a stream client connected ({} open)", field(record, "subscribers")),
        ),
        Kind::StreamRefused => noted(
            Stage::Outcome,
            format!("a stream client was refused ({})", field(record, "reason")),
        ),
        Kind::StreamDesync => noted(
            Stage::Outcome,
            format!("a stream client was told to refetch ({})", field(record, "reason")),
        ),
        Kind::StreamDisconnected => noted(
            Stage::Outcome,
            format!(
                "a stream client went away after {} frames ({})",
                field(record, "frames"),
                field(record, "reason")
            ),
        ),
        Kind::RegistryUnreadable => failed(
            Stage::Outcome,
            format!("the session records could not be listed (read as none): {}", error(record)),
        ),
        Kind::StateLegacyAdopted => noted(
            Stage::Outcome,
            format!(
                "read {}'s `{}` forward from the reference's layout",
                items(record),
                field(record, "section")
            ),
        ),
        Kind::StateQuarantined => failed(
            Stage::Outcome,
            format!(
                "`{}` did not parse and was moved aside to `{}`: {}",
                field(record, "path"),
                field(record, "moved_to"),
                error(record)
            ),
        ),
        other => unworded(other.name(), record),
    }
}
