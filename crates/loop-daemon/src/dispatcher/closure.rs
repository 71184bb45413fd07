//! The effects of closures and reopenings (reference §5.8; seed 002, issue-329), as
//! [`loop_core::plan::closure`] decides them: the `ended` stamp written (and the item
//! disarmed), and a reopen's stamp cleared before anything else reads the event.
//!
//! Ending sessions and endpoints is `command`'s (`close_session`, `close_endpoint`); the
//! lines of each closure step are rendered from its [`Decision`].

use loop_core::WorkItemRef;
use loop_core::plan::{Context, Decision, Ingress};
use loop_core::record::{Collaborators, Control, Ended};
use loop_store::{Slot, StoreError};

use super::{Dispatcher, blocking};

impl Dispatcher {
    /// Writes the `ended` stamp and disarms the item (control and roster cleared).
    pub(crate) async fn stamp_ended(
        &self,
        item: &WorkItemRef,
        ended: Ended,
    ) -> Result<(), StoreError> {
        let (store, target) = (self.store().clone(), item.clone());
        blocking(move || {
            store.write_section(&target, Some(&ended))?;
            store.write_section::<Control>(&target, None)?;
            store.write_section::<Collaborators>(&target, None)
        })
        .await
        .map(|_| ())
    }

    /// Clears the reopened `item`'s `ended` stamp, if it has one (`work_item.reopened`).
    pub(crate) async fn reopen(&self, item: WorkItemRef, cx: &Context, ingress: Ingress) {
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
