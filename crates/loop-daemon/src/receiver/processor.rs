//! The processor task: feeds journalled deliveries to the [`Intake`] one at a time, in
//! journal order, after their 202 was sent, and marks them processed — in batches: what
//! is queued when the thread is free goes over at once, and its marks go back together.
//!
//! At start it replays what the journal still held. It then takes deliveries from the
//! journal writer; when the writer could not queue one (the processor was behind), the
//! sequence numbers show a gap — or, with nothing queued after it, the writer says so —
//! and the missing deliveries are read back from the journal, so memory stays bounded
//! however far behind it falls. Processing runs on one dedicated
//! thread (it reads records and appends to the event log): one thread, not the blocking
//! pool, so the allocator keeps one arena for it and memory stays flat under load. On
//! shutdown it finishes the delivery in flight and stops; the rest stay journalled for
//! the next start.
//!
//! A delivery the dispatcher queued work for is not marked here: [`InboxMarks`] hands its
//! mark to the dispatcher, which sends it when the last of its jobs ends, so a `kill -9`
//! between the hand-over and the paste leaves it in the journal to be replayed
//! (docs/receiver.md, "Processed marks").

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use loop_core::log::{Kind, Line};
use loop_store::EventLog;
use loop_store::inbox::{self, Journalled};
use tokio::sync::mpsc;

use super::intake::Intake;
use super::journal::{JournalRequest, Unqueued};
use crate::metrics::InboxGauges;
use crate::shutdown::{CompletionGuard, Shutdown};

/// Who writes a delivery's `processed` mark: the processor once `dispatch` returned,
/// unless the dispatcher queued jobs for it ([`InboxMarks::hold`]); then the dispatcher,
/// when the last of them ends ([`InboxMarks::release`]). A job abandoned at shutdown is
/// never released: its delivery stays in the journal and is replayed at the next start.
#[derive(Debug)]
pub struct InboxMarks {
    /// Weak: the dispatcher outlives the receiver, and a strong sender held here would
    /// keep the journal writer from ever seeing its last sender go at shutdown.
    journal: mpsc::WeakSender<JournalRequest>,
    /// Sequence number → jobs still running, and whether the processor has passed it on.
    held: Mutex<HashMap<u64, Held>>,
}

#[derive(Debug, Default)]
struct Held {
    jobs: usize,
    passed_on: bool,
}

impl InboxMarks {
    pub(crate) fn new(journal: &mpsc::Sender<JournalRequest>) -> Self {
        Self { journal: journal.downgrade(), held: Mutex::default() }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A job was queued for delivery `seq` (called while `dispatch` runs).
    pub fn hold(&self, seq: u64) {
        self.held().entry(seq).or_default().jobs += 1;
    }

    /// A job for delivery `seq` ended (its decision recorded). The last one sends the
    /// mark once the processor has passed the delivery on, waiting for room in the
    /// journal writer's queue: a mark left out would keep the delivery pending — its
    /// segment and every later one on disk, the depth and lag gauges up — until the next
    /// start. Only a stopped receiver does not take it (the delivery is then replayed at
    /// the next start and found done by the dispatcher's ledger).
    pub async fn release(&self, seq: u64) {
        {
            let mut held = self.held();
            let Some(entry) = held.get_mut(&seq) else { return };
            entry.jobs = entry.jobs.saturating_sub(1);
            if entry.jobs > 0 || !entry.passed_on {
                return;
            }
            held.remove(&seq);
        }
        if let Some(journal) = self.journal.upgrade() {
            let _ = journal.send(JournalRequest::Processed(vec![seq])).await;
        }
    }

    /// Whether the processor marks `seq` itself now: no job is held for it, or every
    /// held job already ended. Otherwise the dispatcher sends the mark.
    fn marks_now(&self, seq: u64) -> bool {
        let mut held = self.held();
        match held.get_mut(&seq) {
            Some(entry) if entry.jobs > 0 => {
                entry.passed_on = true;
                false
            }
            Some(_) => {
                held.remove(&seq);
                true
            }
            None => true,
        }
    }
}

/// How many deliveries one read-back from the journal brings into memory (about 1 MB of
/// GitHub-sized bodies: the processor's memory stays flat however long the backlog).
const READ_BACK_BATCH: usize = 128;

/// The most deliveries handed to the processing thread at once (their marks and
/// event-log flush are per batch, so a busy processor does not wait on a thread hand-over
/// per delivery).
const BATCH: usize = 128;

/// Everything the processor task owns.
#[derive(Debug)]
pub(crate) struct Processor {
    /// Locked only on the blocking thread that processes one delivery, never across an
    /// `.await`.
    pub pipeline: Arc<Mutex<Intake>>,
    /// Deliveries journalled before this start, oldest first.
    pub backlog: Vec<Journalled>,
    /// The first sequence number the writer will hand out in this run.
    pub next_seq: u64,
    /// Fed by the journal writer; `try_send` there, so a full queue leaves a gap.
    pub deliveries: mpsc::Receiver<Journalled>,
    /// Says when the writer left a delivery in the journal only.
    pub unqueued: Arc<Unqueued>,
    /// `processed` marks go back to the writer.
    pub journal: mpsc::Sender<JournalRequest>,
    /// Which marks the dispatcher sends instead.
    pub marks: Arc<InboxMarks>,
    pub inbox_dir: PathBuf,
    pub events: EventLog,
    /// Where it says which delivery it is at (the processing lag).
    pub gauges: Arc<InboxGauges>,
    /// Runs the blocking work.
    pub worker: Worker,
}

/// A job for the processing thread.
type Job = Box<dyn FnOnce() + Send>;

/// The processing thread: runs one job at a time, in order, until dropped.
#[derive(Debug)]
pub(crate) struct Worker {
    /// The thread holds the receiving end and ends when this is dropped.
    jobs: std::sync::mpsc::Sender<Job>,
}

impl Worker {
    pub(crate) fn spawn() -> std::io::Result<Self> {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        // At the receiver's own priority: processing that yields to intake falls behind
        // whenever the cores are busy, and the backlog then grows to the inbox's ceiling
        // (docs/performance.md, "Webhook receiver end to end").
        std::thread::Builder::new().name("inbox-processor".into()).spawn(move || {
            for job in queue {
                job();
            }
        })?;
        Ok(Self { jobs })
    }

    /// Runs `work` on the thread and waits for its result (`None` if the thread is gone).
    async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(work());
        });
        self.jobs.send(job).ok()?;
        result.await.ok()
    }
}

impl Processor {
    pub(crate) async fn run(mut self, mut shutdown: Shutdown, _guard: CompletionGuard) {
        let stop = Arc::new(AtomicBool::new(false));
        let mut backlog = std::mem::take(&mut self.backlog);
        if !backlog.is_empty() {
            self.events.emit(Line::info(Kind::InboxReplaying).field("count", backlog.len()));
        }
        while !backlog.is_empty() {
            let rest = backlog.split_off(backlog.len().min(BATCH));
            let batch = std::mem::replace(&mut backlog, rest);
            // The backlog precedes this run's sequence numbers: nothing to read back.
            if self.process(batch, None, 0, &stop, &mut shutdown).await.is_none() {
                return;
            }
        }
        let mut expected = self.next_seq;
        loop {
            let mut batch = tokio::select! {
                biased;
                () = shutdown.recv() => return,
                item = self.deliveries.recv() => match item {
                    Some(item) => vec![item],
                    None => return,
                },
                () = self.unqueued.notice.notified() => {
                    // Nothing queued, but the writer left deliveries in the journal only.
                    if expected >= self.unqueued.written_to.load(Ordering::Acquire) {
                        continue;
                    }
                    let (dir, from) = (self.inbox_dir.clone(), expected);
                    match self.worker.run(move || read_from(&dir, from)).await {
                        Some(missed) if !missed.is_empty() => missed,
                        _ => continue, // unreadable; the next start replays what is left
                    }
                }
            };
            while batch.len() < BATCH {
                match self.deliveries.try_recv() {
                    Ok(item) => batch.push(item),
                    Err(_) => break,
                }
            }
            // A job stops after one read-back, so marks go back as it catches up; the
            // rest of the batch follows in the next.
            loop {
                let read_back = Some(self.inbox_dir.clone());
                match self.process(batch, read_back, expected, &stop, &mut shutdown).await {
                    Some((next, rest)) if rest.is_empty() => {
                        expected = next;
                        break;
                    }
                    Some((next, rest)) => (expected, batch) = (next, rest),
                    None => return,
                }
            }
            if expected < self.unqueued.written_to.load(Ordering::Acquire) {
                // Still behind: look again once the queue is empty.
                self.unqueued.notice.notify_one();
            }
        }
    }

    /// Processes a batch on the processing thread, in journal order, then marks what was
    /// processed; its event-log lines are written before the marks. With `read_back`, the
    /// deliveries the writer could not queue (a gap between `expected` and the next
    /// sequence number) are read back from the journal first: one bounded read-back per
    /// call, after which the unprocessed rest of the batch comes back for the next call. A
    /// delivery whose processing panics is reported and marked too: replaying it would
    /// panic again. On shutdown the delivery in flight finishes and the rest stay
    /// journalled. The sequence number expected next comes back with the rest, `None` to
    /// stop.
    async fn process(
        &mut self,
        mut batch: Vec<Journalled>,
        read_back: Option<PathBuf>,
        expected: u64,
        stop: &Arc<AtomicBool>,
        shutdown: &mut Shutdown,
    ) -> Option<(u64, Vec<Journalled>)> {
        let pipeline = Arc::clone(&self.pipeline);
        let events = self.events.clone();
        let stopping = Arc::clone(stop);
        let marks = Arc::clone(&self.marks);
        let gauges = Arc::clone(&self.gauges);
        let job = self.worker.run(move || {
            let mut pipeline = pipeline.lock().unwrap_or_else(PoisonError::into_inner);
            pipeline.refresh();
            let mut processed = Vec::with_capacity(batch.len());
            let mut expected = expected;
            let mut process = |item: &Journalled, processed: &mut Vec<u64>| {
                gauges.processing_at(Some(item.receipt.received_at));
                if catch_unwind(AssertUnwindSafe(|| pipeline.process(item))).is_err() {
                    events.emit(
                        Line::error(Kind::DispatchError)
                            .field("error", "processing panicked")
                            .field("gh_event", &item.receipt.event)
                            .field("delivery_id", &item.receipt.delivery_id)
                            .field("will_retry", false),
                    );
                }
                if marks.marks_now(item.seq) {
                    processed.push(item.seq);
                }
            };
            let mut at = 0;
            while let Some(item) = batch.get(at) {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                if let Some(dir) = &read_back
                    && expected < item.seq
                {
                    if !processed.is_empty() {
                        break; // a read-back starts a call of its own
                    }
                    let missed = read_from(dir, expected);
                    if missed.is_empty() {
                        // Unreadable: the next start replays what is left.
                        expected = item.seq;
                    }
                    for missed in missed {
                        if stopping.load(Ordering::Relaxed) {
                            break;
                        }
                        expected = missed.seq + 1;
                        process(&missed, &mut processed);
                    }
                    continue;
                }
                at += 1;
                if item.seq < expected {
                    continue; // already read back from the journal
                }
                expected = item.seq + 1;
                process(item, &mut processed);
            }
            events.flush();
            let rest = batch.split_off(at);
            (processed, expected, rest)
        });
        tokio::pin!(job);
        let finished = tokio::select! {
            biased;
            finished = &mut job => finished,
            () = shutdown.recv() => {
                // Let the delivery in flight finish; the rest stay journalled.
                stop.store(true, Ordering::Relaxed);
                job.await
            }
        };
        let Some((processed, next, rest)) = finished else {
            tracing::error!("the processing thread was lost");
            return None;
        };
        let _ = self.journal.send(JournalRequest::Processed(processed)).await;
        if rest.is_empty() && next >= self.unqueued.written_to.load(Ordering::Acquire) {
            self.gauges.processing_at(None); // caught up
        }
        (!stop.load(Ordering::Relaxed)).then_some((next, rest))
    }
}

/// The next journalled deliveries from sequence number `from` on (a bounded batch; none
/// when the journal cannot be read).
fn read_from(dir: &std::path::Path, from: u64) -> Vec<Journalled> {
    inbox::read_from(dir, from, READ_BACK_BATCH).unwrap_or_else(|err| {
        tracing::error!(error = %err, "cannot read deliveries back from the inbox journal");
        Vec::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks() -> (InboxMarks, mpsc::Receiver<JournalRequest>) {
        let (journal, sent) = mpsc::channel(8);
        // The receiver's own sender stays alive for as long as the test looks.
        let marks = InboxMarks::new(&journal);
        std::mem::forget(journal);
        (marks, sent)
    }

    fn sent(rx: &mut mpsc::Receiver<JournalRequest>) -> Vec<u64> {
        let mut seqs = Vec::new();
        while let Ok(JournalRequest::Processed(some)) = rx.try_recv() {
            seqs.extend(some);
        }
        seqs
    }

    #[test]
    fn a_delivery_with_no_jobs_is_marked_by_the_processor() {
        let (marks, mut rx) = marks();
        assert!(marks.marks_now(1));
        assert!(sent(&mut rx).is_empty());
    }

    #[tokio::test]
    async fn a_queued_delivery_is_marked_when_its_last_job_ends() {
        let (marks, mut rx) = marks();
        marks.hold(7);
        marks.hold(7);
        assert!(!marks.marks_now(7), "the dispatcher marks it");
        marks.release(7).await;
        assert!(sent(&mut rx).is_empty(), "one job still runs");
        marks.release(7).await;
        assert_eq!(sent(&mut rx), [7]);
    }

    #[tokio::test]
    async fn a_mark_waits_for_room_in_the_journal_writers_queue() {
        let (marks, mut rx) = marks();
        for _ in 0..8 {
            let filler = marks.journal.upgrade().expect("the test keeps the writer's sender");
            filler.try_send(JournalRequest::Processed(vec![1])).expect("room for the filler");
        }
        marks.hold(9);
        assert!(!marks.marks_now(9));
        let mut release = std::pin::pin!(marks.release(9));
        assert!(poll_once(release.as_mut()).is_pending(), "the queue is full");
        assert!(matches!(rx.recv().await, Some(JournalRequest::Processed(_))));
        release.await;
        assert_eq!(sent(&mut rx).last(), Some(&9), "the mark went once there was room");
    }

    /// Polls `future` once, with a waker that does nothing.
    fn poll_once<F: std::future::Future>(
        future: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        future.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    #[tokio::test]
    async fn jobs_ending_before_the_processor_passes_on_leave_the_mark_to_it_once() {
        let (marks, mut rx) = marks();
        marks.hold(3);
        marks.release(3).await;
        assert!(marks.marks_now(3));
        assert!(sent(&mut rx).is_empty(), "not marked twice");
        assert!(marks.marks_now(3), "forgotten once marked");
    }

    #[test]
    fn a_job_that_never_ends_leaves_its_delivery_unmarked() {
        let (marks, mut rx) = marks();
        marks.hold(4);
        assert!(!marks.marks_now(4));
        assert!(sent(&mut rx).is_empty());
    }
}
