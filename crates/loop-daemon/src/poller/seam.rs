//! The narrow seam between the poller and the dispatcher.
//!
//! The poller never decides what an event means: it hands each polled comment, presence
//! and closure to the same pipeline the webhook receiver feeds, and reads back, locally,
//! what became of each delivery (keyed by the event's cross-ingress dedup key). This trait
//! is all the poller needs from that pipeline; the daemon implements it over the
//! dispatcher, and tests over an in-memory stand-in.
//!
//! Nothing here talks to GitHub or touches the state root.

use std::future::Future;

use loop_core::WorkItemRef;
use loop_core::event::Event;
use loop_core::poll::DeliveryStatus;
use loop_store::StoreError;

/// What the dispatcher did with an event when it was handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatched {
    /// Accepted for delivery; its outcome is read on a later cycle through
    /// [`Pipeline::status`].
    Enqueued,
    /// Finished on purpose at once (`awaiting-start`, `control-executed`, …): no attempt
    /// is spent and nothing will be retried.
    Settled(String),
    /// Could not be accepted; the key was released and the attempt is spent.
    Failed(String),
}

/// Why a confirmed closure was not recorded: its `ended` stamp could not be written.
#[derive(Debug, thiserror::Error)]
#[error("could not stamp `{item}` ended: {store}")]
pub struct StampFailed {
    pub item: WorkItemRef,
    pub store: StoreError,
}

/// The dispatcher as the poller sees it.
pub trait Pipeline: Send + Sync {
    /// Hands a polled event to the pipeline both ingresses share.
    fn dispatch(&self, event: Event) -> impl Future<Output = Dispatched> + Send;

    /// What the pipeline knows about the delivery whose dedup key is `key` (the text of
    /// [`DedupKey`](loop_core::event::DedupKey)) for the item's `refs`: done (an endpoint
    /// of one of them delivered it), settled, in flight or unknown. Local only; never a
    /// GitHub call.
    fn status(
        &self,
        key: &str,
        refs: &[WorkItemRef],
    ) -> impl Future<Output = DeliveryStatus> + Send;

    /// The synchronous close path for a closure the poller confirmed: closes the live
    /// session if any, stamps `ended`, clears `control` and `collaborators`. Returns once
    /// the stamp is durable; an error leaves the poll ledger in place (asked again).
    fn close(&self, event: Event) -> impl Future<Output = Result<(), StampFailed>> + Send;
}
