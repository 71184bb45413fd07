//! The event log's writer thread: the one owner of `events.jsonl` in a long-running
//! process (STYLE §4.2), shared by every component of it — each line carries the
//! `source` of the [`EventLog`](super::EventLog) that emitted it.
//!
//! [`EventLog::with_writer`](super::EventLog::with_writer) starts it; from then on an
//! append is a push onto a bounded queue, so emitting never waits for the disk (only for
//! room, when the disk is [`QUEUE`] lines behind) — except a line recording an effect,
//! whose `emit` flushes (see `records_an_effect` in the parent module). An emitter on an
//! async runtime waits for neither by blocking: [`Writer::poll_append`] and
//! [`Writer::poll_written`] register its task's [`Waker`], which the thread wakes after
//! each batch (no runtime needed here). The thread takes whatever is queued —
//! woken when [`WAKE_AT`] lines wait or someone flushes, else within [`LINGER`] — formats
//! it and appends it to a cached file descriptor opened `O_APPEND` with as few `write(2)`
//! calls as the batch needs, each a run of whole lines, so lines of other processes
//! appending to the same file (CLI verbs, which lock and append directly) never
//! interleave with these.
//!
//! Rotation stays safe across processes. Once per batch the thread `stat`s the path: an
//! inode other than the cached descriptor's (another process rotated) or none (removed)
//! reopens it. A batch that would take the file past the rotation size rotates it under
//! the same sidecar `flock` direct appenders take, after checking that nobody rotated it
//! meanwhile.
//!
//! Nothing emitted is lost on shutdown: [`Writer::flush`] returns once everything queued
//! before it is written (at once when the thread has caught up), and the last [`EventLog`](super::EventLog) clone to go drops the
//! writer, which closes the channel and waits for the thread to write the rest.
//!
//! It never fails a caller: errors go to `tracing` once (the log's `warned` flag).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;

use super::{Line, Rotation, lock_path, rotate};
use crate::error::StoreError;
use crate::lock::LockGuard;

/// Lines that may wait for the thread before an emitter waits for room.
pub(crate) const QUEUE: usize = 4096;

/// Waiting lines that wake the thread at once; fewer are written within [`LINGER`] (or
/// at the next flush), so a steady trickle of lines costs one wake-up per batch, not
/// one per line.
const WAKE_AT: usize = 256;

/// The longest a line waits for the thread when nobody asked for it.
const LINGER: Duration = Duration::from_millis(10);

/// How many bytes one `write(2)` carries at most.
const WRITE_BYTES: usize = 256 * 1024;

/// The sending side, shared by every clone of the log.
#[derive(Debug)]
pub(crate) struct Writer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What emitters and the thread share.
#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// The thread waits here for lines.
    work: Condvar,
    /// Emitters wait here for room or for their flush.
    written: Condvar,
}

/// One line waiting for the thread, with its timestamp and its emitter's `source`.
type Pending = (Line, Timestamp, Arc<str>);

#[derive(Debug, Default)]
struct Queue {
    pending: Vec<Pending>,
    /// Lines queued so far, and of those, written so far (in order).
    queued: u64,
    done: u64,
    /// Someone waits until `done` reaches this.
    flush_to: u64,
    closed: bool,
    /// Async emitters waiting for room or for their line to be written; woken (and
    /// taken out) after each batch.
    wakers: Vec<Waker>,
}

impl Queue {
    fn wait_with(&mut self, waker: &Waker) {
        if !self.wakers.iter().any(|w| w.will_wake(waker)) {
            self.wakers.push(waker.clone());
        }
    }
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Writer {
    /// Starts the thread appending to `path`.
    pub(crate) fn spawn(
        path: PathBuf,
        rotation: Rotation,
        warned: Arc<AtomicBool>,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let served = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("event-log".into()).spawn(move || {
            let pid = std::process::id();
            Appender { path, rotation, warned, pid, file: None, run: Vec::new() }.run(&served);
        })?;
        Ok(Self { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Queues `event` as `source`'s (waits only when [`QUEUE`] lines are already waiting).
    pub(crate) fn append(&self, event: Line, ts: Timestamp, source: &Arc<str>) {
        let mut queue = self.shared.queue();
        while queue.pending.len() >= QUEUE && !queue.closed {
            queue = self.shared.written.wait(queue).unwrap_or_else(PoisonError::into_inner);
        }
        Self::push(&self.shared, &mut queue, (event, ts, Arc::clone(source)));
    }

    /// [`Writer::append`] for an async emitter: queues `line` and returns its number (for
    /// [`Writer::poll_written`]), or hands it back with `waker` registered when the queue
    /// is full.
    pub(crate) fn poll_append(&self, line: Pending, waker: &Waker) -> Result<u64, Pending> {
        let mut queue = self.shared.queue();
        if queue.pending.len() >= QUEUE && !queue.closed {
            queue.wait_with(waker);
            return Err(line);
        }
        Ok(Self::push(&self.shared, &mut queue, line))
    }

    fn push(shared: &Shared, queue: &mut Queue, line: Pending) -> u64 {
        queue.pending.push(line);
        queue.queued += 1;
        // The first line of a batch starts the thread's linger; the WAKE_AT-th ends it.
        if queue.pending.len() == 1 || queue.pending.len() == WAKE_AT {
            shared.work.notify_one();
        }
        queue.queued
    }

    /// [`Writer::flush`] up to line number `line`, for an async emitter: ready once it is
    /// written (or the thread is gone), else the thread is asked to write at once and
    /// `waker` is registered.
    pub(crate) fn poll_written(&self, line: u64, waker: &Waker) -> Poll<()> {
        let mut queue = self.shared.queue();
        if queue.done >= line || queue.closed {
            return Poll::Ready(());
        }
        queue.flush_to = queue.flush_to.max(line);
        queue.wait_with(waker);
        self.shared.work.notify_one();
        Poll::Pending
    }

    /// Returns once everything queued before the call is written (or the thread is gone).
    pub(crate) fn flush(&self) {
        let mut queue = self.shared.queue();
        let target = queue.queued;
        if queue.done >= target {
            return;
        }
        queue.flush_to = queue.flush_to.max(target);
        self.shared.work.notify_one();
        while queue.done < target && !queue.closed {
            queue = self.shared.written.wait(queue).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Writer {
    /// Closes the queue and waits until the thread has written what it held.
    fn drop(&mut self) {
        let wakers = {
            let mut queue = self.shared.queue();
            queue.closed = true;
            std::mem::take(&mut queue.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
        self.shared.work.notify_one();
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the event log's writer thread panicked; some lines may be lost");
        }
    }
}

/// The thread's side: the cached descriptor and where it points.
struct Appender {
    path: PathBuf,
    rotation: Rotation,
    warned: Arc<AtomicBool>,
    pid: u32,
    file: Option<Live>,
    /// The bytes of the next `write(2)`, kept from batch to batch: one buffer for the
    /// thread's life instead of an allocation (of up to [`WRITE_BYTES`]) per batch.
    run: Vec<u8>,
}

/// The open live file.
struct Live {
    file: File,
    dev: u64,
    ino: u64,
    /// Its size as last seen, plus what this thread wrote since.
    size: u64,
}

impl Appender {
    /// Writes what is queued — at once when a flush waits, the queue is closing or
    /// [`WAKE_AT`] lines wait, else after [`LINGER`] — until the queue is closed and empty.
    fn run(mut self, shared: &Shared) {
        let mut taken: Vec<Pending> = Vec::with_capacity(WAKE_AT);
        let mut lines: Vec<Vec<u8>> = Vec::with_capacity(WAKE_AT);
        let mut queue = shared.queue();
        loop {
            if queue.pending.is_empty() {
                if queue.closed {
                    return;
                }
                queue = shared.work.wait(queue).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let urgent =
                queue.closed || queue.flush_to > queue.done || queue.pending.len() >= WAKE_AT;
            if !urgent {
                queue = shared
                    .work
                    .wait_timeout(queue, LINGER)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            std::mem::swap(&mut queue.pending, &mut taken);
            drop(queue);
            lines.extend(
                taken.drain(..).map(|(event, ts, source)| event.render(ts, &source, self.pid)),
            );
            if let Err(err) = self.write_batch(&lines)
                && !self.warned.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(error = %err, "could not append to the event log");
            }
            let count = lines.len() as u64;
            lines.clear();
            queue = shared.queue();
            queue.done += count;
            shared.written.notify_all();
            if !queue.wakers.is_empty() {
                let wakers = std::mem::take(&mut queue.wakers);
                drop(queue);
                wakers.into_iter().for_each(Waker::wake);
                queue = shared.queue();
            }
        }
    }

    /// Appends `lines` in order: checks once where the live file is, then writes runs of
    /// whole lines, rotating in between when the next line would not fit.
    fn write_batch(&mut self, lines: &[Vec<u8>]) -> Result<(), StoreError> {
        self.follow_path()?;
        self.live()?;
        let mut run = std::mem::take(&mut self.run);
        run.reserve(WRITE_BYTES);
        let written = self.write_lines(lines, &mut run);
        run.clear();
        self.run = run;
        written
    }

    /// [`Appender::write_batch`]'s runs, gathered in `run`.
    fn write_lines(&mut self, lines: &[Vec<u8>], run: &mut Vec<u8>) -> Result<(), StoreError> {
        for line in lines {
            let size = self.file.as_ref().map_or(0, |live| live.size) + run.len() as u64;
            if size > 0 && size + line.len() as u64 > self.rotation.max_bytes {
                self.write_run(run)?;
                self.rotate()?;
            } else if run.len() + line.len() > WRITE_BYTES {
                self.write_run(run)?;
            }
            run.extend_from_slice(line);
        }
        self.write_run(run)
    }

    /// One `write(2)` of whole lines (more only if the kernel takes part of it).
    fn write_run(&mut self, run: &mut Vec<u8>) -> Result<(), StoreError> {
        if run.is_empty() {
            return Ok(());
        }
        let failed = StoreError::io("append to", self.path.clone());
        let live = self.live()?;
        live.file.write_all(run).map_err(failed)?;
        live.size += run.len() as u64;
        run.clear();
        Ok(())
    }

    fn live(&mut self) -> Result<&mut Live, StoreError> {
        if self.file.is_none() {
            self.file = Some(open_live(&self.path)?);
        }
        Ok(self.file.as_mut().expect("opened just above"))
    }

    /// Drops the cached descriptor when the path now names another file (rotated by
    /// another process) or none, and refreshes the size others' appends added.
    fn follow_path(&mut self) -> Result<(), StoreError> {
        let Some(live) = self.file.as_mut() else { return Ok(()) };
        match fs::metadata(&self.path) {
            Ok(meta) if meta.dev() == live.dev && meta.ino() == live.ino => {
                live.size = meta.len();
            }
            Ok(_) => self.file = None,
            Err(err) if err.kind() == io::ErrorKind::NotFound => self.file = None,
            Err(err) => return Err(StoreError::io("stat", &self.path)(err)),
        }
        Ok(())
    }

    /// Rotates under the sidecar lock, unless another process already did, then points
    /// the descriptor at the new live file.
    fn rotate(&mut self) -> Result<(), StoreError> {
        let _guard = LockGuard::exclusive(&lock_path(&self.path))?;
        self.follow_path()?;
        let full = self.file.as_ref().is_some_and(|live| live.size > 0);
        if full {
            rotate(&self.path, self.rotation.keep)?;
            self.file = None;
        }
        self.live().map(|_| ())
    }
}

/// Opens (creating) the live file for appending and notes which file it is.
fn open_live(path: &Path) -> Result<Live, StoreError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(StoreError::io("create directory", dir))?;
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(StoreError::io("open", path))?;
    let meta = file.metadata().map_err(StoreError::io("stat", path))?;
    Ok(Live { file, dev: meta.dev(), ino: meta.ino(), size: meta.len() })
}
