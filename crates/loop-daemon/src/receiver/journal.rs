//! The journal writer: the one thread that owns the inbox (STYLE §4.2), and the sync
//! thread that makes its writes survive a power loss behind it.
//!
//! Request handlers send each verified delivery here and wait for its sequence number;
//! the processor sends `processed` marks. The writer takes everything queued, appends it
//! and hands it to the kernel with one write — from then on a `kill -9` of the process
//! loses none of it (SPEC §8's bar) — then answers the waiting handlers 202 and passes
//! the deliveries on for processing. The `fdatasync` follows behind on the sync thread as
//! a continuous group commit: each sync covers everything written while the previous one
//! ran, and no answer ever waits for one. The rest of the journal's disk work goes there
//! too (`Inbox::take_retired`): a retired segment's sync, a new segment's directory entry
//! and the deletion of finished segments, before the live segment's sync. What an OS crash
//! or power loss within one sync (a few milliseconds) can lose was acknowledged; GitHub
//! keeps every delivery for redelivery and the poller in hybrid mode picks up what it
//! missed. `processed` marks ride along unsynced: a lost mark only means a replay the
//! dispatcher's dedup settles.
//!
//! The writer stops when every sender is gone (the HTTP server has finished its last
//! request and the processor has stopped); it then stops the sync thread and syncs what
//! it was given itself, so nothing acknowledged and no mark is lost on shutdown.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;

use loop_core::log::{Kind, Line};
use loop_store::inbox::{Inbox, Journalled, Receipt, Retired, SegmentSync};
use loop_store::{EventLog, StoreError};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::shutdown::CompletionGuard;

/// The most requests one write covers (bounds the latency of the first in a batch).
const MAX_BATCH: usize = 1024;

/// What the writer is asked to do.
#[derive(Debug)]
pub(crate) enum JournalRequest {
    /// Journal a delivery; `ack` gets its sequence number once the kernel holds it, or
    /// `Err` when it could not be written (the handler answers 503 so GitHub redelivers).
    Receive { receipt: Receipt, ack: oneshot::Sender<Result<u64, ()>> },
    /// The deliveries with these sequence numbers were processed.
    Processed(Vec<u64>),
}

/// Deliveries written but not queued for the processor because its queue was full: they
/// are only in the journal, and the processor reads them back from there.
#[derive(Debug, Default)]
pub(crate) struct Unqueued {
    /// The sequence number after the last delivery written.
    pub written_to: AtomicU64,
    /// Told when a delivery could not be queued (a stored permit if nobody waits).
    pub notice: Notify,
}

/// Starts the writer thread (which starts the sync thread). `to_process` gets each
/// delivery once it is written; when it is full the delivery stays only in the journal
/// and `unqueued` tells the processor, which reads it back from there.
pub(crate) fn spawn_writer(
    mut inbox: Inbox,
    mut requests: mpsc::Receiver<JournalRequest>,
    to_process: mpsc::Sender<Journalled>,
    unqueued: Arc<Unqueued>,
    events: EventLog,
    guard: CompletionGuard,
    depth: Arc<AtomicU64>,
) -> std::io::Result<thread::JoinHandle<()>> {
    let behind = Arc::new(SyncBehind::default());
    let syncer = {
        let behind = Arc::clone(&behind);
        let events = events.clone();
        thread::Builder::new().name("inbox-sync".into()).spawn(move || behind.run(&events))?
    };
    thread::Builder::new().name("inbox-journal".into()).spawn(move || {
        let _guard = guard;
        let mut batch = Vec::with_capacity(64);
        let mut live = None;
        while let Some(first) = requests.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            if commit(&mut inbox, &mut batch, (&to_process, &unqueued), &events, &depth) {
                behind.dirty(&mut inbox, &mut live);
            }
        }
        behind.stop();
        if syncer.join().is_err() {
            tracing::error!("the inbox journal's sync thread panicked");
        }
        if let Err(err) = inbox.sync() {
            tracing::error!(error = %err, "cannot sync the inbox journal at shutdown");
            events.emit(Line::error(Kind::InboxWriteFailed).field("error", err.to_string()));
        }
    })
}

/// Appends and marks a batch, writes it once, then answers and forwards. Whether
/// anything was written (and so needs a sync).
fn commit(
    inbox: &mut Inbox,
    batch: &mut Vec<JournalRequest>,
    (to_process, unqueued): (&mpsc::Sender<Journalled>, &Unqueued),
    events: &EventLog,
    depth: &AtomicU64,
) -> bool {
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
            JournalRequest::Processed(seqs) => {
                for seq in seqs {
                    match inbox.mark_processed(seq) {
                        Ok(()) => {
                            let _ = depth.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                                Some(d.saturating_sub(1))
                            });
                        }
                        Err(err) => {
                            failure.get_or_insert(err);
                        }
                    }
                }
            }
        }
    }
    let flushed = inbox.write();
    if let Err(err) = &flushed {
        tracing::error!(error = %err, "cannot write the inbox journal; deliveries are refused with 503");
    }
    if let Some(err) = failure.as_ref().or(flushed.as_ref().err()) {
        events.emit(Line::error(Kind::InboxWriteFailed).field("error", err.to_string()));
    }
    let mut written_to = None;
    let mut not_queued = false;
    for (entry, ack) in written {
        if flushed.is_err() {
            let _ = ack.send(Err(()));
            continue;
        }
        let _ = ack.send(Ok(entry.seq));
        depth.fetch_add(1, Ordering::Relaxed);
        written_to = Some(entry.seq + 1);
        // Full: the processor reads it back from the journal. Closed: processing is held.
        not_queued |= to_process.try_send(entry).is_err();
    }
    if let Some(written_to) = written_to {
        unqueued.written_to.store(written_to, Ordering::Release);
    }
    if not_queued {
        unqueued.notice.notify_one();
    }
    flushed.is_ok()
}

/// The hand-over between the writer and the sync thread.
#[derive(Debug, Default)]
struct SyncBehind {
    state: Mutex<SyncState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct SyncState {
    /// The live segment, as of the last write.
    segment: Option<Arc<SegmentSync>>,
    /// Segments retired (and the directory) since the sync thread last looked.
    retired: Retired,
    /// Something was written since the sync thread last took the segment.
    dirty: bool,
    stopping: bool,
}

impl SyncBehind {
    /// Called by the writer after a write: there is something to sync. `live` caches the
    /// writer's handle, taken again only when the live segment changed (the retired one
    /// comes with [`Inbox::take_retired`]).
    fn dirty(&self, inbox: &mut Inbox, live: &mut Option<(u64, Arc<SegmentSync>)>) {
        let retired = inbox.take_retired();
        if live.as_ref().is_none_or(|(id, _)| *id != inbox.live_id()) {
            match inbox.live_segment() {
                Ok(segment) => *live = Some((inbox.live_id(), Arc::new(segment))),
                Err(err) => {
                    tracing::error!(error = %err, "cannot hand the live journal segment to the sync thread");
                    return;
                }
            }
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.segment = live.as_ref().map(|(_, segment)| Arc::clone(segment));
        state.retired.absorb(retired);
        state.dirty = true;
        self.wake.notify_one();
    }

    /// Tells the sync thread to finish once what it was handed is synced (the writer
    /// syncs the rest itself).
    fn stop(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).stopping = true;
        self.wake.notify_one();
    }

    /// The sync thread: sync whenever something was written, until stopped with nothing
    /// left.
    fn run(&self, events: &EventLog) {
        let mut failing = false;
        loop {
            let segment = {
                let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                while !state.dirty && !state.stopping {
                    state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
                }
                if !state.dirty {
                    return; // stopping, with everything handed over synced
                }
                state.dirty = false;
                (std::mem::take(&mut state.retired), state.segment.clone())
            };
            let (retired, Some(segment)) = segment else { continue };
            match retired.sync().and_then(|()| segment.sync()) {
                Ok(()) => failing = false,
                Err(err) => report_sync_failure(&err, &mut failing, events),
            }
        }
    }
}

/// A failing sync is said once per run of failures: the deliveries were acknowledged
/// already and stay safe from a crash of the process, not from a power loss.
fn report_sync_failure(err: &StoreError, failing: &mut bool, events: &EventLog) {
    if std::mem::replace(failing, true) {
        return;
    }
    tracing::error!(error = %err, "cannot sync the inbox journal; acknowledged deliveries are not safe from a power loss");
    events.emit(Line::error(Kind::InboxSyncFailed).field("error", err.to_string()));
}
