//! Closures and reopenings (reference §5.8; seed 002, issue-329): a close never spawns
//! and is never pasted. It ends exactly the object that closed — matched by repository
//! and number — stamps `ended` on a work item this machine tracks and disarms it, ends
//! its live session, and cleans up only when a named authorized actor closed it
//! (otherwise `cleanup.deferred`). A pull request closing ends only its own endpoint; the
//! work item it delivers stays open (`session.kept_open`). A reopen clears the stamp
//! before anything else reads the event.
//!
//! Each step's outcome is a [`Decision`] recorded like every other (its line rendered by
//! [`Decision::lines`]); the session effects themselves (`session.closed`, tmux,
//! checkouts, `session.cleaned`) are logged by the functions that carry them out.

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::event::{Event, EventKind};
use loop_core::record::{Collaborators, Control, Ended};
use loop_store::Slot;

use super::decision::{Context, Decision};
use super::records::Snapshot;
use super::{Dispatcher, blocking};
use crate::pipeline::Ingress;

impl Dispatcher {
    /// Handles a close event against the live records matching `refs`. `Err` when the
    /// `ended` stamp could not be written (logged too).
    pub(crate) async fn end_closed(
        &self,
        event: &Event,
        cx: &Context,
        ingress: Ingress,
        registry: &Snapshot,
        refs: &[WorkItemRef],
    ) -> Result<(), String> {
        let Some(closed) = event.closed_item() else { return Ok(()) };
        let merged = event.entity.as_ref().and_then(|e| e.merged).unwrap_or(false);
        let is_pr = event.kind == EventKind::PullRequest;
        let reason = close_reason(event);
        let closed_as = if merged { "merged" } else { "closed" };
        let config = self.config();
        let closer = event.actor.login().cloned();
        let authorized =
            closer.as_ref().filter(|login| config.routing.authorized_users.contains(login));
        let mut owned_elsewhere = false;
        let mut session_ended = false;
        for record in registry.matches(refs) {
            if record.work_item == closed {
                self.close_session(record).await;
                session_ended = true;
                let decision = Decision::AutoClosed { item: closed.clone(), reason, merged };
                self.record(&decision, cx).await;
            } else if record.endpoints.contains_key(&closed) {
                owned_elsewhere = true;
                self.close_endpoint(record, &closed).await;
                let decision = Decision::KeptOpen {
                    owner: record.work_item.clone(),
                    pull_request: closed.clone(),
                    state: closed_as,
                    reason,
                };
                self.record(&decision, cx).await;
            }
        }
        if owned_elsewhere {
            return Ok(());
        }
        let tracked = session_ended || registry.record(&closed).is_some() || {
            let (store, item) = (self.store().clone(), closed.clone());
            matches!(blocking(move || store.load_portable_record(&item)).await, Ok(Some(_)))
        };
        if !tracked {
            return Ok(());
        }
        let kind = if is_pr { "pull-request" } else { "issue" };
        let ended = Ended {
            state: closed_as.to_owned(),
            kind: kind.to_owned(),
            reason: None,
            at: Timestamp::now(),
            source: ingress.source().to_owned(),
            actor: closer.clone(),
        };
        let stamped = Decision::Ended {
            item: closed.clone(),
            state: closed_as,
            kind,
            ingress: ingress.source(),
            actor: closer.clone(),
        };
        self.stamp_ended(&closed, ended, stamped, cx).await?;
        if !session_ended {
            return Ok(());
        }
        match authorized {
            Some(actor) => {
                self.cleanup(&closed, Some(actor), "close-event").await;
            }
            None => {
                let decision = Decision::CleanupDeferred { item: closed, actor: closer, closed_as };
                self.record(&decision, cx).await;
            }
        }
        Ok(())
    }

    /// Writes the `ended` stamp and disarms the item (control and roster cleared);
    /// records `stamped` once written.
    async fn stamp_ended(
        &self,
        item: &WorkItemRef,
        ended: Ended,
        stamped: Decision,
        cx: &Context,
    ) -> Result<(), String> {
        let (store, target) = (self.store().clone(), item.clone());
        let written = blocking(move || {
            store.write_section(&target, Some(&ended))?;
            store.write_section::<Control>(&target, None)?;
            store.write_section::<Collaborators>(&target, None)
        })
        .await;
        match written {
            Ok(_) => {
                self.record(&stamped, cx).await;
                Ok(())
            }
            Err(err) => {
                let error = err.to_string();
                let failed = Decision::StampFailed { item: item.clone(), error: error.clone() };
                self.record(&failed, cx).await;
                Err(format!("could not stamp `{item}` ended: {error}"))
            }
        }
    }

    /// For an `issues`/`pull_request` reopen, clears the `ended` stamp of the reopened
    /// item, if it has one (`work_item.reopened`).
    pub(crate) async fn reopen(&self, event: &Event, cx: &Context, ingress: Ingress) {
        let reopened = matches!(event.kind, EventKind::Issues | EventKind::PullRequest)
            && event.action.as_deref() == Some("reopened");
        let item = event
            .repository
            .as_ref()
            .zip(event.entity.as_ref().and_then(|e| e.number))
            .map(|(repo, number)| repo.item(number));
        let (true, Some(item)) = (reopened, item) else { return };
        let (store, stamped) = (self.store().clone(), item.clone());
        let cleared = blocking(move || match store.read_section::<Ended>(&stamped)? {
            Slot::Present(_) => store.write_section::<Ended>(&stamped, None).map(|_| true),
            Slot::Absent | Slot::Tombstone => Ok(false),
        })
        .await;
        let decision = match cleared {
            Ok(false) => return,
            Ok(true) => Decision::Reopened { item, ingress: ingress.source() },
            Err(err) => Decision::StampFailed { item, error: err.to_string() },
        };
        self.record(&decision, cx).await;
    }
}

/// The reason a close event gives (reference §5.8): `issue-closed`, `pr-merged` or
/// `pr-closed`.
pub(crate) fn close_reason(event: &Event) -> &'static str {
    let merged = event.entity.as_ref().and_then(|e| e.merged).unwrap_or(false);
    match (event.kind == EventKind::PullRequest, merged) {
        (false, _) => "issue-closed",
        (true, true) => "pr-merged",
        (true, false) => "pr-closed",
    }
}
