//! The processor task: feeds journalled deliveries to the [`Intake`] one at a time, in
//! journal order, after their 202 was sent, and marks each processed.
//!
//! At start it replays what the journal still held. It then takes deliveries from the
//! journal writer; when the writer could not queue one (the processor was behind), the
//! sequence numbers show a gap and the missing deliveries are read back from the journal,
//! so memory stays bounded however far behind it falls. Processing runs on one dedicated
//! thread (it reads records and appends to the event log): one thread, not the blocking
//! pool, so the allocator keeps one arena for it and memory stays flat under load. On
//! shutdown it finishes the delivery in flight and stops; the rest stay journalled for
//! the next start.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use loop_store::inbox::{self, Journalled};
use loop_store::{Event as LogEvent, EventLog};
use tokio::sync::mpsc;

use super::intake::Intake;
use super::journal::JournalRequest;
use crate::shutdown::{CompletionGuard, Shutdown};

/// How many deliveries one read-back from the journal brings into memory.
const READ_BACK_BATCH: usize = 1024;

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
    /// `processed` marks go back to the writer.
    pub journal: mpsc::Sender<JournalRequest>,
    pub inbox_dir: PathBuf,
    pub events: EventLog,
    /// Runs the blocking work.
    pub worker: Worker,
}

/// The processor thread's nice value: processing is behind the 202 and may wait.
const PROCESSOR_NICE: i32 = 10;

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
        std::thread::Builder::new().name("inbox-processor".into()).spawn(move || {
            // Background work: on Linux a thread has its own nice value, so this yields
            // the cores to the threads answering requests. Best effort.
            if let Err(err) = rustix::process::setpriority_process(None, PROCESSOR_NICE) {
                tracing::debug!(error = %err, "cannot lower the processor thread's priority");
            }
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
            if item.seq > expected {
                // The writer could not queue some: catch up from the journal, in order,
                // a bounded batch at a time, until the queue's deliveries are next.
                while expected < item.seq {
                    let missed = self.read_back(expected).await;
                    if missed.is_empty() {
                        break; // unreadable; the next start replays what is left
                    }
                    for missed in missed {
                        if shutdown.signalled() {
                            return;
                        }
                        expected = missed.seq + 1;
                        self.process(missed).await;
                    }
                }
            }
            if item.seq < expected {
                continue; // already read back from the journal
            }
            if shutdown.signalled() {
                return;
            }
            expected = item.seq + 1;
            self.process(item).await;
        }
    }

    /// Processes one delivery on the processing thread, waits until its event-log lines
    /// are written, then marks it. A delivery whose processing panics is reported and
    /// marked too: replaying it would panic again.
    async fn process(&mut self, item: Journalled) {
        let seq = item.seq;
        let pipeline = Arc::clone(&self.pipeline);
        let events = self.events.clone();
        let finished = self
            .worker
            .run(move || {
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
                // Its lines are in the log before it is marked processed.
                events.flush();
            })
            .await;
        if finished.is_none() {
            tracing::error!("the processing thread was lost");
        }
        let _ = self.journal.send(JournalRequest::Processed(seq)).await;
    }

    /// The next journalled deliveries from sequence number `from` on (a bounded batch).
    async fn read_back(&self, from: u64) -> Vec<Journalled> {
        let dir = self.inbox_dir.clone();
        match self.worker.run(move || inbox::read_from(&dir, from, READ_BACK_BATCH)).await {
            Some(Ok(missed)) => missed,
            Some(Err(err)) => {
                tracing::error!(error = %err, "cannot read deliveries back from the inbox journal");
                Vec::new()
            }
            None => {
                tracing::error!("the processing thread was lost");
                Vec::new()
            }
        }
    }
}
