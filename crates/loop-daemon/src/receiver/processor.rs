//! The processor task: feeds journalled deliveries to the [`Pipeline`] one at a time, in
//! journal order, after their 202 was sent, and marks each processed.
//!
//! At start it replays what the journal still held. It then takes deliveries from the
//! journal writer; when the writer could not queue one (the processor was behind), the
//! sequence numbers show a gap and the missing deliveries are read back from the journal,
//! so memory stays bounded however far behind it falls. Processing runs on a blocking
//! thread (it reads records and appends to the event log). On shutdown it finishes the
//! delivery in flight and stops; the rest stay journalled for the next start.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use loop_store::inbox::{self, Journalled};
use loop_store::{Event as LogEvent, EventLog};
use tokio::sync::mpsc;

use super::journal::JournalRequest;
use super::pipeline::Pipeline;
use crate::shutdown::{CompletionGuard, Shutdown};

/// Everything the processor task owns.
#[derive(Debug)]
pub(crate) struct Processor {
    /// Locked only on the blocking thread that processes one delivery, never across an
    /// `.await`.
    pub pipeline: Arc<Mutex<Pipeline>>,
    /// Deliveries journalled before this start, oldest first.
    pub backlog: Vec<Journalled>,
    /// The first sequence number the writer will hand out in this run.
    pub next_seq: u64,
    /// Fed by the journal writer; `try_send` there, so a full queue leaves a gap.
    pub deliveries: mpsc::Receiver<Journalled>,
    /// `processed` marks go back to the writer.
    pub journal: mpsc::Sender<JournalRequest>,
    pub inbox_dir: PathBuf,
    pub events: EventLog,
}

impl Processor {
    pub(crate) async fn run(mut self, mut shutdown: Shutdown, _guard: CompletionGuard) {
        let backlog = std::mem::take(&mut self.backlog);
        if !backlog.is_empty() {
            self.events.emit(LogEvent::info("inbox.replaying").field("count", backlog.len()));
        }
        for item in backlog {
            if shutdown.signalled() {
                return;
            }
            self.process(item).await;
        }
        let mut expected = self.next_seq;
        loop {
            let item = tokio::select! {
                biased;
                () = shutdown.recv() => return,
                item = self.deliveries.recv() => item,
            };
            let Some(item) = item else { return };
            if item.seq < expected {
                continue; // already read back from the journal
            }
            if item.seq > expected {
                for missed in self.read_back(expected..item.seq).await {
                    if shutdown.signalled() {
                        return;
                    }
                    self.process(missed).await;
                }
            }
            expected = item.seq + 1;
            if shutdown.signalled() {
                return;
            }
            self.process(item).await;
        }
    }

    /// Processes one delivery on a blocking thread, then marks it. A delivery whose
    /// processing panics is reported and marked too: replaying it would panic again.
    async fn process(&mut self, item: Journalled) {
        let seq = item.seq;
        let pipeline = Arc::clone(&self.pipeline);
        let events = self.events.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut pipeline = pipeline.lock().unwrap_or_else(PoisonError::into_inner);
            if catch_unwind(AssertUnwindSafe(|| pipeline.process(&item))).is_err() {
                events.emit(
                    LogEvent::error("dispatch.error")
                        .field("error", "processing panicked")
                        .field("gh_event", &item.receipt.event)
                        .field("delivery_id", &item.receipt.delivery_id)
                        .field("will_retry", false),
                );
            }
        })
        .await;
        if let Err(err) = joined {
            tracing::error!(error = %err, "the processing thread was lost");
        }
        let _ = self.journal.send(JournalRequest::Processed(seq)).await;
    }

    /// The journalled deliveries with sequence numbers in `range` (the processor's gap).
    async fn read_back(&self, range: std::ops::Range<u64>) -> Vec<Journalled> {
        let dir = self.inbox_dir.clone();
        match tokio::task::spawn_blocking(move || inbox::read_pending(&dir)).await {
            Ok(Ok(contents)) => {
                contents.pending.into_iter().filter(|item| range.contains(&item.seq)).collect()
            }
            Ok(Err(err)) => {
                tracing::error!(error = %err, "cannot read deliveries back from the inbox journal");
                Vec::new()
            }
            Err(err) => {
                tracing::error!(error = %err, "the journal read-back thread was lost");
                Vec::new()
            }
        }
    }
}
