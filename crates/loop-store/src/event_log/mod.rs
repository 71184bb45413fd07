//! The event log, `logs/events.jsonl`: the append-only audit trail of every decision.
//!
//! One compact JSON object per line: `ts` (UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`), `source` (the
//! emitting process: `gh-webhook`, `poll`, `cli`, …), `event` (dot-namespaced type),
//! `level` (`debug|info|warning|error`), `pid`, then the event's fields with nulls omitted.
//!
//! Appends are safe across threads and processes. A short-lived process (a CLI verb)
//! appends directly: each append takes an exclusive `flock` on the sidecar
//! `events.jsonl.lock`, rotates if the line would push the file past
//! [`Rotation::max_bytes`], and writes the whole line with one `write` in append mode. A
//! long-running one (the service) calls [`EventLog::with_writer`] once: its appends go
//! over a channel to one writer thread holding the file open ([`writer`]), which writes
//! whole lines in batches and takes the same lock only to rotate. Either way no line is
//! ever interleaved with another and rotation never loses one. Rotation renames
//! `events.jsonl` → `.1` → `.2` … keeping [`Rotation::keep`] old files.
//!
//! One writer per process: every component of it (receiver, poller, dispatcher) logs
//! through [`EventLog::for_source`] of the one log, which shares the writer and stamps
//! the component's own `source`. Code on an async runtime emits with
//! [`EventLog::emit_async`], which waits for room and for an effect's line without
//! blocking the runtime's thread; code on a blocking thread uses [`EventLog::emit`].
//!
//! Emission is best-effort: a failure to append is reported through `tracing` once and
//! swallowed, because the log must never be what fails a delivery. A disabled log
//! (`eventLog.enabled: false`) emits nothing.
//!
//! Reading (across rotated files, tolerant of partial lines) is in [`read`]; filtering in
//! [`filter`].

pub mod filter;
pub mod read;
mod writer;

use std::fs::{self, OpenOptions};
use std::future::Future;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use jiff::Timestamp;
pub use loop_core::log::{Level, Line, format_ts};

use crate::error::StoreError;
use crate::json_file::{self, QuarantineReport};
use crate::lock::LockGuard;

/// How big the live file may grow and how many rotated files are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The live file is rotated before a line would take it past this size.
    pub max_bytes: u64,
    /// How many rotated files (`.1` newest … `.keep` oldest) are kept.
    pub keep: usize,
}

impl Rotation {
    /// 10 MiB per file, five old files: about 60 MiB of history at most.
    pub const DEFAULT: Rotation = Rotation { max_bytes: 10 * 1024 * 1024, keep: 5 };
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation::DEFAULT
    }
}

/// Where events go, and as which source. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventLog {
    /// `None` when the log is disabled.
    path: Option<PathBuf>,
    /// What every line it emits names as its emitter (`gh-webhook`, `poll`, `cli`, …).
    source: Arc<str>,
    rotation: Rotation,
    /// Set once a failed append was reported, so a broken disk warns once, not per event.
    warned: Arc<AtomicBool>,
    /// The writer thread appends go to, once [`EventLog::with_writer`] started one; shared
    /// by every clone and [`EventLog::for_source`] view, the last of which to go stops it
    /// after it wrote everything.
    writer: Option<Arc<writer::Writer>>,
}

impl EventLog {
    /// A log appending to `path`, stamping every line with `source`.
    pub fn new(path: impl Into<PathBuf>, source: &str) -> Self {
        Self {
            path: Some(path.into()),
            source: Arc::from(source),
            rotation: Rotation::DEFAULT,
            warned: Arc::new(AtomicBool::new(false)),
            writer: None,
        }
    }

    /// A log that emits nothing (`eventLog.enabled: false`).
    pub fn disabled() -> Self {
        Self {
            path: None,
            source: Arc::from(""),
            rotation: Rotation::DEFAULT,
            warned: Arc::new(AtomicBool::new(false)),
            writer: None,
        }
    }

    /// Sets the rotation (before [`EventLog::with_writer`], which takes it along).
    pub fn with_rotation(mut self, rotation: Rotation) -> Self {
        self.rotation = rotation;
        self
    }

    /// Sends this log's appends (and its clones' and views') to a writer thread of their
    /// own, for a long-running process: emitting no longer waits for the disk, and the file
    /// stays open. [`EventLog::flush`] waits for what was emitted; the last clone dropped
    /// waits too. If the thread cannot start, appends stay direct (reported through
    /// `tracing`). Call it once per process, then hand out [`EventLog::for_source`] views.
    pub fn with_writer(mut self) -> Self {
        let Some(path) = self.path.clone() else { return self };
        match writer::Writer::spawn(path, self.rotation, Arc::clone(&self.warned)) {
            Ok(writer) => self.writer = Some(Arc::new(writer)),
            Err(err) => {
                tracing::warn!(error = %err, "cannot start the event log's writer thread; appending directly");
            }
        }
        self
    }

    /// The same log (file, rotation, writer thread) stamping its lines with `source`: how
    /// each component of a process gets its own name on the one writer.
    pub fn for_source(&self, source: &str) -> Self {
        Self { source: Arc::from(source), ..self.clone() }
    }

    /// Returns once every line emitted before the call is in the file (at once for a log
    /// without a writer thread, whose appends are written when they return).
    pub fn flush(&self) {
        if let Some(writer) = &self.writer {
            writer.flush();
        }
    }

    /// The live file, `None` when disabled.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Appends `event` now; failures are reported once through `tracing` and swallowed.
    /// With a writer thread it is queued and written behind the caller, except a line that
    /// records an effect ([`Line::records_an_effect`]), which is written before this returns.
    pub fn emit(&self, event: Line) {
        if self.path.is_none() {
            return;
        }
        if let Some(writer) = &self.writer {
            let wait = event.records_an_effect();
            writer.append(event, Timestamp::now(), &self.source);
            if wait {
                writer.flush();
            }
            return;
        }
        self.append_directly(&event);
    }

    /// [`EventLog::emit`] for code on an async runtime: the future resolves once the line
    /// is queued and, when it records an effect, written — waiting for either without
    /// blocking the thread (the writer thread wakes the task). A log without a writer
    /// thread appends on the calling thread, as `emit` does: a process that runs a runtime
    /// gives its log a writer.
    pub fn emit_async(&self, event: Line) -> Emit<'_> {
        Emit { log: self, line: Some((event, Timestamp::now())), written: None }
    }

    /// Appends on the calling thread; a failure is reported once through `tracing`.
    fn append_directly(&self, event: &Line) {
        if let Err(err) = self.append(event, Timestamp::now())
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(error = %err, event = event.name(), "could not append to the event log");
        }
    }

    /// Appends `event` stamped `ts`, rotating first when the live file is full. With a
    /// writer thread it is queued (failures then go to `tracing`, as for [`EventLog::emit`]).
    pub fn append(&self, event: &Line, ts: Timestamp) -> Result<(), StoreError> {
        let Some(path) = &self.path else { return Ok(()) };
        if let Some(writer) = &self.writer {
            writer.append(event.clone(), ts, &self.source);
            return Ok(());
        }
        let line = event.render(ts, &self.source, std::process::id());
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(StoreError::io("create directory", dir))?;
        }
        let _guard = LockGuard::exclusive(&lock_path(path))?;
        let size = match fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(err) if err.kind() == io::ErrorKind::NotFound => 0,
            Err(err) => return Err(StoreError::io("stat", path)(err)),
        };
        if size > 0 && size + line.len() as u64 > self.rotation.max_bytes {
            rotate(path, self.rotation.keep)?;
        }
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(StoreError::io("open", path))?;
        file.write_all(&line).map_err(StoreError::io("append to", path))
    }
}

/// What [`EventLog::emit_async`] returns: ready once its line is queued and, for a line
/// that records an effect, in the file.
#[derive(Debug)]
#[must_use = "the line is emitted only when the future is awaited"]
pub struct Emit<'a> {
    log: &'a EventLog,
    /// The line, until the writer's queue took it.
    line: Option<(Line, Timestamp)>,
    /// The queued line's number, while waiting for it to be written.
    written: Option<u64>,
}

impl Future for Emit<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let log = this.log;
        if log.path.is_none() {
            return Poll::Ready(());
        }
        let Some(writer) = &log.writer else {
            if let Some((line, _)) = this.line.take() {
                log.append_directly(&line);
            }
            return Poll::Ready(());
        };
        if let Some((line, ts)) = this.line.take() {
            let effect = line.records_an_effect();
            match writer.poll_append((line, ts, Arc::clone(&log.source)), cx.waker()) {
                Ok(number) if effect => this.written = Some(number),
                Ok(_) => return Poll::Ready(()),
                Err((line, ts, _)) => {
                    this.line = Some((line, ts));
                    return Poll::Pending;
                }
            }
        }
        match this.written {
            Some(number) => writer.poll_written(number, cx.waker()),
            None => Poll::Ready(()),
        }
    }
}

/// `events.jsonl.lock`, beside the log.
fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// `events.jsonl.<n>`; `n = 0` is the live file.
pub(crate) fn rotated_path(path: &Path, n: usize) -> PathBuf {
    if n == 0 {
        return path.to_owned();
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{n}"));
    path.with_file_name(name)
}

/// Shifts `.n` → `.n+1` (dropping the oldest beyond `keep`) and the live file → `.1`.
/// Called with the append lock held.
fn rotate(path: &Path, keep: usize) -> Result<(), StoreError> {
    if keep == 0 {
        return json_file::remove(path);
    }
    json_file::remove(&rotated_path(path, keep))?;
    for n in (1..keep).rev() {
        let from = rotated_path(path, n);
        match fs::rename(&from, rotated_path(path, n + 1)) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(StoreError::io("rotate", from)(err)),
        }
    }
    fs::rename(path, rotated_path(path, 1)).map_err(StoreError::io("rotate", path))
}

/// A state file that did not parse and was moved aside is an error line,
/// `state.quarantined`, naming both paths and the parse error.
impl QuarantineReport for EventLog {
    fn quarantined(&self, path: &Path, moved_to: &Path, error: &str) {
        self.emit(
            Line::error(loop_core::log::Kind::StateQuarantined)
                .field("path", path.display().to_string())
                .field("moved_to", moved_to.display().to_string())
                .field("error", error),
        );
    }
}

#[cfg(test)]
mod tests {
    use loop_core::log::Kind;

    use super::*;

    #[test]
    fn a_disabled_log_writes_nothing() {
        let log = EventLog::disabled();
        log.append(&Line::info(Kind::WebhookReceived), Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(log.path(), None);
    }

    #[test]
    fn a_quarantine_is_logged_as_an_error_line_naming_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let log = EventLog::new(&path, "test");
        log.quarantined(Path::new("a.json"), Path::new("a.json.corrupt-1"), "EOF at line 1");
        let logged = fs::read_to_string(&path).unwrap();
        for part in [
            "\"event\":\"state.quarantined\"",
            "\"level\":\"error\"",
            "\"path\":\"a.json\"",
            "\"moved_to\":\"a.json.corrupt-1\"",
            "\"error\":\"EOF at line 1\"",
        ] {
            assert!(logged.contains(part), "{part} in {logged}");
        }
    }
}
