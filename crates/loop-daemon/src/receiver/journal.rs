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

use loop_core::config::Config;
use loop_core::log::{Kind, Line};
use loop_store::inbox::{Inbox, Journalled, Receipt, Retired, SegmentSync};
use loop_store::{EventLog, StoreError};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::metrics::InboxGauges;
use crate::shutdown::CompletionGuard;

/// The most requests one write covers (bounds the latency of the first in a batch).
const MAX_BATCH: usize = 1024;

/// What the writer is asked to do.
#[derive(Debug)]
pub(crate) enum JournalRequest {
    /// Journal a delivery; `ack` gets its sequence number once the kernel holds it, or
    /// why it was not taken (the handler answers 503 so GitHub records a failed delivery
    /// that can be redelivered).
    Receive { receipt: Receipt, ack: oneshot::Sender<Result<u64, Unaccepted>> },
    /// The deliveries with these sequence numbers were processed.
    Processed(Vec<u64>),
}

/// Why a delivery was not journalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unaccepted {
    /// The inbox is at its ceiling (`webhooks.ghWebhook.inboxMaxDeliveries`,
    /// `inboxMaxBytes`) until processing catches up.
    Full,
    /// The journal cannot be written (a full or read-only disk, an IO error).
    Unwritable,
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

/// Everything the writer thread owns.
#[derive(Debug)]
pub(crate) struct Writer {
    pub inbox: Inbox,
    pub requests: mpsc::Receiver<JournalRequest>,
    /// Gets each delivery once it is written; when it is full the delivery stays only in
    /// the journal and `unqueued` tells the processor, which reads it back from there.
    pub to_process: mpsc::Sender<Journalled>,
    pub unqueued: Arc<Unqueued>,
    pub events: EventLog,
    /// Where the depth is published after every write.
    pub gauges: Arc<InboxGauges>,
    /// The config in force: the inbox's ceiling.
    pub config: watch::Receiver<Arc<Config>>,
}

/// Starts the writer thread (which starts the sync thread); it holds `guard` until it
/// has synced what it was given.
pub(crate) fn spawn_writer(
    writer: Writer,
    guard: CompletionGuard,
) -> std::io::Result<thread::JoinHandle<()>> {
    let Writer { mut inbox, mut requests, to_process, unqueued, events, gauges, config } = writer;
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
        let mut refusing = Refusing::default();
        while let Some(first) = requests.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            let ceiling = Ceiling::of(&config.borrow());
            let sink = (&to_process, &*unqueued);
            if commit(&mut inbox, &mut batch, sink, ceiling, &mut refusing, &events) {
                behind.dirty(&mut inbox, &mut live);
            }
            gauges.set_depth(inbox.pending() as u64);
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

/// The inbox's ceiling, from the config in force.
#[derive(Debug, Clone, Copy)]
struct Ceiling {
    deliveries: u64,
    bytes: u64,
}

impl Ceiling {
    fn of(config: &Config) -> Self {
        let gh = &config.webhooks.gh_webhook;
        Self { deliveries: gh.inbox_max_deliveries, bytes: gh.inbox_max_bytes }
    }

    /// Whether `inbox` is full. Once it is, it takes deliveries again only below 90 % of
    /// the ceiling, so a receiver at the edge does not flip with every delivery.
    fn is_full(self, inbox: &Inbox, refusing: bool) -> bool {
        let room = |limit: u64| if refusing { limit - limit / 10 } else { limit };
        inbox.pending() as u64 >= room(self.deliveries) || inbox.pending_bytes() >= room(self.bytes)
    }
}

/// Whether the writer is refusing deliveries, why, and how many it refused: said once
/// when it starts and once when it ends.
#[derive(Debug, Default)]
struct Refusing {
    why: Option<Unaccepted>,
    refused: u64,
}

impl Refusing {
    /// One more delivery refused; the first of a run says why.
    fn refuse(
        &mut self,
        why: Unaccepted,
        inbox: &Inbox,
        error: Option<&StoreError>,
        events: &EventLog,
    ) {
        self.refused += 1;
        if self.why.replace(why) == Some(why) {
            return;
        }
        match (why, error) {
            (Unaccepted::Full, _) => {
                tracing::warn!(
                    deliveries = inbox.pending(),
                    bytes = inbox.pending_bytes(),
                    "the inbox journal is at its ceiling; answering 503 until processing catches up"
                );
                events.emit(
                    Line::warning(Kind::InboxFull)
                        .field("deliveries", inbox.pending())
                        .field("bytes", inbox.pending_bytes()),
                );
            }
            (Unaccepted::Unwritable, error) => {
                let error = error.map_or_else(String::new, ToString::to_string);
                tracing::error!(error = %error, "cannot write the inbox journal; answering 503 until it can be written again");
                events.emit(Line::error(Kind::InboxWriteFailed).field("error", error));
            }
        }
    }

    /// A delivery was journalled: a run of refusals has ended.
    fn accepted(&mut self, events: &EventLog) {
        if self.why.take().is_some() {
            let refused = std::mem::take(&mut self.refused);
            tracing::info!(refused, "the inbox journal takes deliveries again");
            events.emit(Line::info(Kind::InboxResumed).field("refused", refused));
        }
    }
}

/// Marks and appends a batch (marks first: they make room), writes it once, then answers
/// and forwards. Above the ceiling a delivery is refused without being written; when the
/// write fails every delivery of the batch is refused, the journal's receipts are as
/// before it and its marks wait for the next write that succeeds (nothing processed is
/// replayed). Whether anything was written (and so needs a sync).
fn commit(
    inbox: &mut Inbox,
    batch: &mut Vec<JournalRequest>,
    (to_process, unqueued): (&mpsc::Sender<Journalled>, &Unqueued),
    ceiling: Ceiling,
    refusing: &mut Refusing,
    events: &EventLog,
) -> bool {
    let mut receipts = Vec::with_capacity(batch.len());
    for request in batch.drain(..) {
        match request {
            JournalRequest::Receive { receipt, ack } => receipts.push((receipt, ack)),
            JournalRequest::Processed(seqs) => {
                for seq in seqs {
                    inbox.mark_processed(seq);
                }
            }
        }
    }
    let mut written = Vec::with_capacity(receipts.len());
    for (receipt, ack) in receipts {
        if ceiling.is_full(inbox, refusing.why == Some(Unaccepted::Full)) {
            refusing.refuse(Unaccepted::Full, inbox, None, events);
            let _ = ack.send(Err(Unaccepted::Full));
            continue;
        }
        match inbox.append(receipt) {
            Ok(entry) => written.push((entry, ack)),
            Err(err) => {
                refusing.refuse(Unaccepted::Unwritable, inbox, Some(&err), events);
                let _ = ack.send(Err(Unaccepted::Unwritable));
            }
        }
    }
    if let Err(err) = inbox.write() {
        // Only deliveries count as refused: a batch of marks alone waits for the next.
        for (_, ack) in written {
            refusing.refuse(Unaccepted::Unwritable, inbox, Some(&err), events);
            let _ = ack.send(Err(Unaccepted::Unwritable));
        }
        return false;
    }
    let mut written_to = None;
    let mut not_queued = false;
    for (entry, ack) in written {
        refusing.accepted(events);
        let _ = ack.send(Ok(entry.seq));
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
    true
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
