//! The journal writer: the one thread that owns the inbox (STYLE §4.2).
//!
//! Request handlers send each verified delivery here and wait for its sequence number;
//! the processor sends `processed` marks. The writer takes everything queued, appends it,
//! and makes it durable with one `fdatasync` — group commit: each sync covers every
//! delivery that arrived while the previous one was running — then answers the waiting
//! handlers and passes the deliveries on for processing. A handler answers 202 only
//! after the sync that covers its delivery.
//!
//! The writer stops when every sender is gone (the HTTP server has finished its last
//! request and the processor has stopped), after syncing what it was given, so nothing
//! acknowledged and no mark is lost on shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use loop_store::inbox::{Inbox, Journalled, Receipt};
use loop_store::{Event as LogEvent, EventLog};
use tokio::sync::{mpsc, oneshot};

use crate::shutdown::CompletionGuard;

/// The most requests one sync covers (bounds the latency of the first in a batch).
const MAX_BATCH: usize = 1024;

/// What the writer is asked to do.
#[derive(Debug)]
pub(crate) enum JournalRequest {
    /// Journal a delivery; `ack` gets its sequence number once it is durable, or `Err`
    /// when it could not be written (the handler answers 503 so GitHub redelivers).
    Receive { receipt: Receipt, ack: oneshot::Sender<Result<u64, ()>> },
    /// The delivery with this sequence number was processed.
    Processed(u64),
}

/// Starts the writer thread. `to_process` gets each delivery once it is durable; when
/// it is full the delivery stays only in the journal and the processor reads it back
/// from there (it notices the gap in sequence numbers).
pub(crate) fn spawn_writer(
    mut inbox: Inbox,
    mut requests: mpsc::Receiver<JournalRequest>,
    to_process: mpsc::Sender<Journalled>,
    events: EventLog,
    guard: CompletionGuard,
    depth: Arc<AtomicU64>,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new().name("inbox-journal".into()).spawn(move || {
        let _guard = guard;
        let mut batch = Vec::with_capacity(64);
        while let Some(first) = requests.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            commit(&mut inbox, &mut batch, &to_process, &events, &depth);
        }
    })
}

/// Appends and marks a batch, syncs once, then answers and forwards.
fn commit(
    inbox: &mut Inbox,
    batch: &mut Vec<JournalRequest>,
    to_process: &mpsc::Sender<Journalled>,
    events: &EventLog,
    depth: &AtomicU64,
) {
    let mut written = Vec::with_capacity(batch.len());
    let mut failure = None;
    for request in batch.drain(..) {
        match request {
            JournalRequest::Receive { receipt, ack } => match inbox.append(receipt) {
                Ok(entry) => written.push((entry, ack)),
                Err(err) => {
                    let _ = ack.send(Err(()));
                    failure.get_or_insert(err);
                }
            },
            JournalRequest::Processed(seq) => match inbox.mark_processed(seq) {
                Ok(()) => {
                    let _ = depth.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                        Some(d.saturating_sub(1))
                    });
                }
                Err(err) => {
                    failure.get_or_insert(err);
                }
            },
        }
    }
    let synced = inbox.sync();
    if let Err(err) = &synced {
        tracing::error!(error = %err, "cannot sync the inbox journal; deliveries are refused with 503");
    }
    if let Some(err) = failure.as_ref().or(synced.as_ref().err()) {
        events.emit(LogEvent::error("inbox.write_failed").field("error", err.to_string()));
    }
    for (entry, ack) in written {
        if synced.is_err() {
            let _ = ack.send(Err(()));
            continue;
        }
        let _ = ack.send(Ok(entry.seq));
        depth.fetch_add(1, Ordering::Relaxed);
        // Full: the processor reads it back from the journal. Closed: processing is held.
        let _ = to_process.try_send(entry);
    }
}
