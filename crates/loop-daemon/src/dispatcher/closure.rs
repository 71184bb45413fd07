//! Closures and reopenings (reference §5.8; seed 002, issue-329): a close never spawns
//! and is never pasted. It ends exactly the object that closed — matched by repository
//! and number — stamps `ended` on a work item this machine tracks and disarms it, ends
//! its live session, and cleans up only when a named authorized actor closed it
//! (otherwise `cleanup.deferred`). A pull request closing ends only its own endpoint; the
//! work item it delivers stays open (`session.kept_open`). A reopen clears the stamp
//! before anything else reads the event.

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::event::{Event, EventKind};
use loop_core::login::Login;
use loop_core::record::{Collaborators, Control, Ended};
use loop_store::{Event as Line, Slot};

use super::decision::Context;
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
        let reason = match (is_pr, merged) {
            (false, _) => "issue-closed",
            (true, true) => "pr-merged",
            (true, false) => "pr-closed",
        };
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
                self.events().emit(
                    Line::info("session.autoclosed")
                        .work_item(&closed)
                        .field("reason", reason)
                        .field("merged", merged)
                        .field("delivery_id", &cx.delivery_id),
                );
            } else if record.endpoints.contains_key(&closed) {
                owned_elsewhere = true;
                self.close_endpoint(record, &closed).await;
                self.events().emit(
                    Line::info("work_item.pull_request_ended")
                        .work_item(&record.work_item)
                        .field("pull_request", closed.to_string())
                        .field("state", closed_as),
                );
                self.events().emit(
                    Line::info("session.kept_open")
                        .work_item(&record.work_item)
                        .field("reason", reason)
                        .field("closed_ref", closed.to_string())
                        .field("delivery_id", &cx.delivery_id),
                );
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
        let ended = Ended {
            state: closed_as.to_owned(),
            kind: if is_pr { "pull-request" } else { "issue" }.to_owned(),
            reason: None,
            at: Timestamp::now(),
            source: ingress.source().to_owned(),
            actor: closer.clone(),
        };
        self.stamp_ended(&closed, ended, cx).await?;
        if !session_ended {
            return Ok(());
        }
        match authorized {
            Some(actor) => {
                self.cleanup(&closed, Some(actor), "close-event").await;
            }
            None => self.events().emit(
                Line::info("cleanup.deferred")
                    .work_item(&closed)
                    .field(
                        "reason",
                        if closer.is_some() { "unauthorized-actor" } else { "no-actor" },
                    )
                    .field("actor", closer.as_ref().map(Login::as_str))
                    .field("closed_as", closed_as)
                    .field("delivery_id", &cx.delivery_id),
            ),
        }
        Ok(())
    }

    /// Writes the `ended` stamp and disarms the item (control and roster cleared).
    async fn stamp_ended(
        &self,
        item: &WorkItemRef,
        ended: Ended,
        cx: &Context,
    ) -> Result<(), String> {
        let line = Line::info("work_item.ended")
            .work_item(item)
            .field("state", &ended.state)
            .field("kind", &ended.kind)
            .field("ingress", &ended.source)
            .field("actor", ended.actor.as_ref().map(Login::as_str))
            .field("delivery_id", &cx.delivery_id);
        let (store, stamped) = (self.store().clone(), item.clone());
        let written = blocking(move || {
            store.write_section(&stamped, Some(&ended))?;
            store.write_section::<Control>(&stamped, None)?;
            store.write_section::<Collaborators>(&stamped, None)
        })
        .await;
        match written {
            Ok(_) => {
                self.events().emit(line);
                Ok(())
            }
            Err(err) => {
                self.events().emit(
                    Line::error("work_item.stamp_failed")
                        .work_item(item)
                        .field("error", err.to_string()),
                );
                Err(format!("could not stamp `{item}` ended: {err}"))
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
        match cleared {
            Ok(false) => {}
            Ok(true) => self.events().emit(
                Line::info("work_item.reopened")
                    .work_item(&item)
                    .field("ingress", ingress.source())
                    .field("delivery_id", &cx.delivery_id),
            ),
            Err(err) => self.events().emit(
                Line::error("work_item.stamp_failed")
                    .work_item(&item)
                    .field("error", err.to_string()),
            ),
        }
    }
}
