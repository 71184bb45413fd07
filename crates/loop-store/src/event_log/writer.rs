//! The event log's writer thread: the one owner of `events.jsonl` in a long-running
//! process (STYLE §4.2).
//!
//! [`EventLog::with_writer`](super::EventLog::with_writer) starts it; from then on an
//! append is a message on a bounded channel, so emitting never waits for the disk (only
//! for room in the channel, when the disk is [`QUEUE`] lines behind). The thread drains
//! whatever is queued, formats it and appends it to a cached file descriptor opened
//! `O_APPEND` with as few `write(2)` calls as the batch needs — each a run of whole lines,
//! so lines of other processes appending to the same file (CLI verbs, which lock and
//! append directly) never interleave with these.
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use jiff::Timestamp;

use super::{Event, Rotation, lock_path, rotate};
use crate::error::StoreError;
use crate::lock::LockGuard;

/// Lines that may wait for the thread before an emitter waits for room.
pub(crate) const QUEUE: usize = 4096;

/// How many bytes one `write(2)` carries at most.
const WRITE_BYTES: usize = 256 * 1024;

/// What the thread is sent.
enum Message {
    Append(Event, Timestamp),
    /// Answered once everything sent before it is written.
    Flush(SyncSender<()>),
}

/// The sending side, shared by every clone of the log.
#[derive(Debug)]
pub(crate) struct Writer {
    /// Taken (closing the channel) when the writer is dropped.
    queue: Mutex<Option<SyncSender<Message>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Lines handed to the channel so far.
    queued: AtomicU64,
    /// Lines the thread has written so far (in channel order), so a flush with nothing
    /// outstanding costs two atomic loads.
    written: Arc<AtomicU64>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Append(event, _) => write!(f, "Append({})", event.name()),
            Self::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl Writer {
    /// Starts the thread appending to `path` as `source`.
    pub(crate) fn spawn(
        path: PathBuf,
        source: String,
        rotation: Rotation,
        warned: Arc<AtomicBool>,
    ) -> io::Result<Self> {
        let (queue, messages) = sync_channel(QUEUE);
        let written = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&written);
        let thread = std::thread::Builder::new().name("event-log".into()).spawn(move || {
            Appender { path, source, rotation, warned, pid: std::process::id(), file: None }
                .run(&messages, &counted);
        })?;
        Ok(Self {
            queue: Mutex::new(Some(queue)),
            thread: Mutex::new(Some(thread)),
            queued: AtomicU64::new(0),
            written,
        })
    }

    /// Queues `event` (waits only when [`QUEUE`] lines are already waiting).
    pub(crate) fn append(&self, event: Event, ts: Timestamp) {
        if let Some(queue) = self.sender() {
            self.queued.fetch_add(1, Ordering::AcqRel);
            let _ = queue.send(Message::Append(event, ts));
        }
    }

    /// Returns once everything queued before the call is written (or the thread is gone).
    pub(crate) fn flush(&self) {
        if self.written.load(Ordering::Acquire) >= self.queued.load(Ordering::Acquire) {
            return;
        }
        let Some(queue) = self.sender() else { return };
        let (done, written) = sync_channel(1);
        if queue.send(Message::Flush(done)).is_ok() {
            let _ = written.recv();
        }
    }

    fn sender(&self) -> Option<SyncSender<Message>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for Writer {
    /// Closes the channel and waits until the thread has written what it held.
    fn drop(&mut self) {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).take();
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
    source: String,
    rotation: Rotation,
    warned: Arc<AtomicBool>,
    pid: u32,
    file: Option<Live>,
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
    fn run(mut self, messages: &Receiver<Message>, written: &AtomicU64) {
        let mut lines: Vec<Vec<u8>> = Vec::with_capacity(256);
        let mut flushes = Vec::new();
        while let Ok(first) = messages.recv() {
            let mut next = Some(first);
            while let Some(message) = next {
                match message {
                    Message::Append(event, ts) => {
                        lines.push(event.line(ts, &self.source, self.pid));
                    }
                    Message::Flush(done) => flushes.push(done),
                }
                next = if lines.len() < 4096 { messages.try_recv().ok() } else { None };
            }
            if !lines.is_empty()
                && let Err(err) = self.write_batch(&lines)
                && !self.warned.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(error = %err, "could not append to the event log");
            }
            written.fetch_add(lines.len() as u64, Ordering::AcqRel);
            lines.clear();
            for done in flushes.drain(..) {
                let _ = done.send(());
            }
        }
    }

    /// Appends `lines` in order: checks once where the live file is, then writes runs of
    /// whole lines, rotating in between when the next line would not fit.
    fn write_batch(&mut self, lines: &[Vec<u8>]) -> Result<(), StoreError> {
        self.follow_path()?;
        self.live()?;
        let mut run: Vec<u8> =
            Vec::with_capacity(WRITE_BYTES.min(lines.iter().map(Vec::len).sum()));
        for line in lines {
            let size = self.file.as_ref().map_or(0, |live| live.size) + run.len() as u64;
            if size > 0 && size + line.len() as u64 > self.rotation.max_bytes {
                self.write_run(&mut run)?;
                self.rotate()?;
            } else if run.len() + line.len() > WRITE_BYTES {
                self.write_run(&mut run)?;
            }
            run.extend_from_slice(line);
        }
        self.write_run(&mut run)
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
