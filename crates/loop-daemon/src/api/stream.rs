//! `GET /api/v1/stream`: the event log as Server-Sent Events (docs/control-plane.md,
//! "The stream").
//!
//! Every process of this machine appends to the event log — the service's writer, each
//! CLI verb — so the file is the one place all of it meets. One tail per process reads
//! it ([`Hub`]): a thread, started by the first subscriber and ended with the last,
//! that reads what was appended every [`TICK`] and sends each whole line, once, to a
//! `broadcast` channel every subscriber listens on; eight subscribers cost one read.
//!
//! A line's frame is `id: <offset>` — the byte offset just *after* the line, so a client
//! quoting it back as `Last-Event-ID` is served what came next — `event: log` and the
//! line itself as `data:`. A subscriber joins under the tail's lock: it gets the offset
//! up to which the tail has sent (its replay's end) and a receiver for every later
//! line, so a resume replays `[Last-Event-ID, that offset)` from the file, then the
//! live lines, with no gap and no overlap. What cannot be honoured is a `desync` frame
//! (the client refetches): a cursor past the file's end, not at a line's end or in a
//! file rotated since (`truncated`), more than [`REPLAY_WINDOW`] behind
//! (`replay-window`), a subscriber too slow for the channel (`queue-overflow`).
//!
//! `api.request` and `mcp.call` lines are never streamed: a page refreshing on each
//! frame would otherwise answer its own requests forever. Refusals — the stream off,
//! a bad filter or cursor, [`StreamConfig::max_subscribers`] open already (503 with
//! `Retry-After`) — are decided before the response starts, so they are ordinary JSON.

use std::convert::Infallible;
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use loop_core::config::StreamConfig;
use loop_core::log::{Kind, Line};
use loop_store::EventLog;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::transcript_watch::{self, Transcripts};
use super::{ApiError, ApiState, Params, work_item};

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(subscribe))
}

/// How often the tail looks for appended lines while someone listens.
pub const TICK: Duration = Duration::from_millis(100);

/// How far behind the live end a resume may start; further is a `desync`
/// (`replay-window`): a few thousand lines, more than a reconnect misses, and a bounded
/// read.
pub const REPLAY_WINDOW: u64 = 256 * 1024;

/// Frames the channel holds for the slowest subscriber before it has missed some.
const BACKLOG: usize = 1024;

/// The most bytes of one line the tail holds while waiting for its newline; a longer
/// one is dropped (the next newline resynchronises).
const MAX_LINE: usize = 1024 * 1024;

/// The most `workItem` (or `transcript`) refs one subscriber may name.
const MAX_FILTER: usize = 64;

/// What `retry:` tells `EventSource` to wait before reconnecting, in milliseconds.
const RETRY_MS: u32 = 3000;

/// Seconds a refused subscriber is told to wait (`Retry-After`).
const RETRY_AFTER_SECS: &str = "5";

/// Lines never streamed (see the module docs).
const NEVER_STREAMED: [Kind; 2] = [Kind::ApiRequest, Kind::McpCall];

/// The process's one tail of the event log and its subscribers. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Hub(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    /// The event log file; `None` when the log is off (`eventLog.enabled: false`).
    path: Option<PathBuf>,
    config: StreamConfig,
    /// The tail sends every streamed line here; each subscriber holds a receiver.
    live: broadcast::Sender<Arc<Frame>>,
    /// Where the tail stands. The tail sends a batch and moves the mark under this lock;
    /// a subscriber reads the mark and subscribes under it (no `.await` while held).
    mark: Mutex<Mark>,
    /// Subscribers connected now.
    open: AtomicUsize,
    /// Cancelled when the control plane stops: subscribers end, the tail returns.
    stop: CancellationToken,
    /// `stream.*` lines, as source `api`.
    events: EventLog,
}

/// The tail's position.
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    /// Whether the tail thread runs (it ends when the last subscriber has gone).
    running: bool,
    /// The file it reads, and the end of the last whole line it sent from it.
    file: FileId,
    sent: u64,
}

/// A file's identity (`st_dev`, `st_ino`): a rotated log is another file under the
/// same name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FileId(u64, u64);

impl FileId {
    fn of(meta: &fs::Metadata) -> Self {
        Self(meta.dev(), meta.ino())
    }
}

/// One frame, encoded once for every subscriber.
#[derive(Debug)]
enum Frame {
    /// An event-log line: the work items it names (for the `workItem` filter) and its
    /// `id:/event: log/data:` text.
    Log { work_items: Vec<String>, wire: Bytes },
    /// The log was truncated under the tail: every subscriber refetches.
    Desync(&'static str),
}

impl Hub {
    /// The hub for `events`'s file (its `stream.*` lines go to `events`), as `config`
    /// says (read at start, like every `service` key).
    pub fn new(events: EventLog, config: StreamConfig) -> Self {
        let (live, _) = broadcast::channel(BACKLOG);
        Self(Arc::new(Shared {
            path: events.path().map(Path::to_owned),
            config,
            live,
            mark: Mutex::new(Mark::default()),
            open: AtomicUsize::new(0),
            stop: CancellationToken::new(),
            events,
        }))
    }

    /// Ends every subscriber and the tail (the control plane is stopping).
    pub fn stop(&self) {
        self.0.stop.cancel();
    }

    fn mark(&self) -> MutexGuard<'_, Mark> {
        // A panic while holding the mark cannot leave it half-written (two plain fields
        // written together); keep going with it.
        self.0.mark.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place among the subscribers, or `None` at capacity.
    fn admit(&self) -> Option<Slot> {
        let max = self.0.config.max_subscribers as usize;
        self.0
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()
            .map(|_| Slot(Arc::clone(&self.0)))
    }

    /// Joins the live lines: a receiver of every line the tail sends from now on, and the
    /// mark up to which it has sent (starting the tail, at the file's end, if it was
    /// not running).
    fn join(&self, path: &Path) -> (broadcast::Receiver<Arc<Frame>>, Mark) {
        let mut mark = self.mark();
        if !mark.running {
            let (file, size) = match fs::metadata(path) {
                Ok(meta) => (FileId::of(&meta), meta.len()),
                Err(_) => (FileId::default(), 0),
            };
            let tail = Tail::new(path.to_owned(), file, size);
            let hub = self.clone();
            match std::thread::Builder::new()
                .name("stream-tail".into())
                .spawn(move || hub.run_tail(tail))
            {
                Ok(_) => *mark = Mark { running: true, file, sent: size },
                Err(err) => tracing::warn!(error = %err, "cannot start the stream's tail"),
            }
        }
        (self.0.live.subscribe(), *mark)
    }

    /// The tail thread: every [`TICK`], what was appended goes to the subscribers; it
    /// returns once none is left or the control plane stops.
    fn run_tail(&self, mut tail: Tail) {
        loop {
            std::thread::sleep(TICK);
            let frames = tail.read();
            let mut mark = self.mark();
            for frame in frames {
                // No receiver left is the exit below, not an error.
                let _ = self.0.live.send(frame);
            }
            mark.file = tail.file;
            mark.sent = tail.sent();
            if self.0.live.receiver_count() == 0 || self.0.stop.is_cancelled() {
                mark.running = false;
                return;
            }
        }
    }
}

/// A subscriber's place; dropping it frees it.
#[derive(Debug)]
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Reads whole lines appended to the log since the last read, following a rotation.
#[derive(Debug)]
struct Tail {
    path: PathBuf,
    /// The file being read (kept open, so a rotated file's last lines are still read).
    handle: Option<File>,
    file: FileId,
    /// How far into `file` it has read, and the start of a line still incomplete there.
    read: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf, file: FileId, at: u64) -> Self {
        let handle =
            File::open(&path).ok().filter(|h| h.metadata().is_ok_and(|m| FileId::of(&m) == file));
        Self { path, handle, file, read: at, partial: Vec::new() }
    }

    /// The end of the last whole line read.
    fn sent(&self) -> u64 {
        self.read - self.partial.len() as u64
    }

    /// The frames of the lines appended since the last read.
    fn read(&mut self) -> Vec<Arc<Frame>> {
        let mut frames = Vec::new();
        let Ok(meta) = fs::metadata(&self.path) else { return frames };
        let now = FileId::of(&meta);
        if now != self.file || self.handle.is_none() {
            // Rotated (or created): the old file's last lines first, then the new one.
            self.read_to_end(&mut frames);
            self.handle = File::open(&self.path).ok();
            self.file = now;
            self.read = 0;
            self.partial.clear();
        } else if meta.len() < self.read {
            // Truncated in place: what was between is gone, and so is the offsets' meaning.
            self.read = 0;
            self.partial.clear();
            frames.push(Arc::new(Frame::Desync("truncated")));
        }
        self.read_to_end(&mut frames);
        frames
    }

    fn read_to_end(&mut self, frames: &mut Vec<Arc<Frame>>) {
        let Some(handle) = &self.handle else { return };
        let mut chunk = vec![0; 256 * 1024];
        loop {
            match handle.read_at(&mut chunk, self.read) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let start = self.read - self.partial.len() as u64;
                    self.read += n as u64;
                    self.partial.extend_from_slice(&chunk[..n]);
                    let whole = self.partial.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                    frames.extend(log_frames(&self.partial[..whole], start));
                    self.partial.drain(..whole);
                    if self.partial.len() > MAX_LINE {
                        tracing::warn!(
                            bytes = self.partial.len(),
                            "dropping an event-log line without its newline"
                        );
                        self.partial.clear();
                    }
                }
            }
        }
    }
}

/// The frames of the whole lines in `bytes`, which start at offset `start` of the file:
/// blank, unparsable and never-streamed lines are skipped.
fn log_frames(bytes: &[u8], start: u64) -> Vec<Arc<Frame>> {
    let mut frames = Vec::new();
    let mut end = start;
    for raw in bytes.split_inclusive(|&b| b == b'\n') {
        end += raw.len() as u64;
        if raw.last() != Some(&b'\n') {
            break;
        }
        let line = raw.trim_ascii();
        if let Some(frame) = log_frame(line, end) {
            frames.push(Arc::new(frame));
        }
    }
    frames
}

/// The fields of a line the stream looks at.
#[derive(Deserialize)]
struct Peek {
    event: Option<Value>,
    work_item: Option<Value>,
    work_items: Option<Value>,
}

fn log_frame(line: &[u8], end: u64) -> Option<Frame> {
    // An object only (serde would read a struct from an array too).
    if line.first() != Some(&b'{') {
        return None;
    }
    let peek: Peek = serde_json::from_slice(line).ok()?;
    let event = peek.event.as_ref().and_then(Value::as_str).unwrap_or_default();
    if NEVER_STREAMED.iter().any(|kind| kind.name() == event) {
        return None;
    }
    let mut work_items: Vec<String> =
        peek.work_item.as_ref().and_then(Value::as_str).map(str::to_owned).into_iter().collect();
    if let Some(Value::Array(items)) = &peek.work_items {
        work_items.extend(items.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    let mut wire = Vec::with_capacity(line.len() + 40);
    wire.extend_from_slice(format!("id: {end}\nevent: log\ndata: ").as_bytes());
    wire.extend_from_slice(line);
    wire.extend_from_slice(b"\n\n");
    Some(Frame::Log { work_items, wire: Bytes::from(wire) })
}

fn desync_frame(reason: &str, cursor: Option<u64>) -> Bytes {
    let data = match cursor {
        Some(cursor) => json!({"reason": reason, "cursor": cursor}),
        None => json!({"reason": reason}),
    };
    Bytes::from(format!("event: desync\ndata: {data}\n\n"))
}

const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// What one subscriber asked for.
#[derive(Debug, Default)]
struct Ask {
    /// Only lines naming one of these (empty: all).
    work_items: Vec<String>,
    /// Work items whose transcripts the client watches (`transcript` frames).
    transcripts: Vec<String>,
    /// `Last-Event-ID`.
    cursor: Option<u64>,
}

impl Ask {
    /// What the query and `Last-Event-ID` ask, or the refusal and its `stream.refused`
    /// reason (`bad-filter`, `bad-cursor`).
    fn read(
        pairs: Vec<(String, String)>,
        headers: &HeaderMap,
    ) -> Result<Self, (&'static str, ApiError)> {
        let mut ask = Self::filters(pairs).map_err(|err| ("bad-filter", err))?;
        ask.cursor = cursor(headers).map_err(|err| ("bad-cursor", err))?;
        Ok(ask)
    }

    fn filters(pairs: Vec<(String, String)>) -> Result<Self, ApiError> {
        let mut ask = Self::default();
        for (key, value) in pairs {
            let list = match key.as_str() {
                "workItem" => &mut ask.work_items,
                "transcript" => &mut ask.transcripts,
                _ => return Err(ApiError::bad_request(format!("unknown query parameter `{key}`"))),
            };
            list.push(work_item(&value)?.to_string());
            if list.len() > MAX_FILTER {
                return Err(ApiError::bad_request(format!(
                    "`{key}` takes at most {MAX_FILTER} refs"
                )));
            }
        }
        Ok(ask)
    }

    fn wants(&self, frame: &Frame) -> bool {
        match frame {
            Frame::Log { work_items, .. } => {
                self.work_items.is_empty() || work_items.iter().any(|w| self.work_items.contains(w))
            }
            Frame::Desync(_) => true,
        }
    }
}

const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// `Last-Event-ID`, a byte offset, if sent.
fn cursor(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(LAST_EVENT_ID) else { return Ok(None) };
    let text = value.to_str().unwrap_or_default().trim();
    let cursor = text.parse().ok().filter(|_| text.bytes().all(|b| b.is_ascii_digit()));
    cursor.map(Some).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`Last-Event-ID` must be a byte offset (an integer ≥ 0), got {:?}",
            String::from_utf8_lossy(value.as_bytes())
        ))
    })
}

/// The event log as Server-Sent Events: `log` frames (`id:` the offset after the line,
/// quote it back as `Last-Event-ID` to resume), `desync` frames (refetch everything),
/// `transcript` frames for the transcripts asked for, and `: keep-alive` comments; never
/// `api.request` or `mcp.call`.
#[utoipa::path(get, path = "/api/v1/stream", tag = "events",
    params(
        ("workItem" = Option<Vec<super::openapi::WorkItemRef>>, Query, explode = true, description = "Only lines naming one of these work items (at most 64)"),
        ("transcript" = Option<Vec<super::openapi::WorkItemRef>>, Query, explode = true, description = "Work items whose Claude Code transcripts the client watches: a `transcript` frame `{ref, totalLines}` each time one grows (at most 64)"),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this frame's id (a byte offset)"),
    ),
    responses(
        (status = 200, description = "The stream, until the client or the service goes", content_type = "text/event-stream", body = String),
        (status = 400, description = "A malformed ref or `Last-Event-ID`, an unknown parameter, too many refs", body = Detail),
        (status = 404, description = "The stream (or the event log) is off", body = Detail),
        (status = 503, description = "`service.stream.maxSubscribers` clients are connected already", body = Detail,
            headers(("Retry-After" = u32, description = "Seconds to wait"))),
    ))]
async fn subscribe(
    State(state): State<ApiState>,
    headers: HeaderMap,
    Params(pairs): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let hub = state.stream;
    let refused = |reason: &str| {
        hub.0.events.emit(Line::info(Kind::StreamRefused).field("reason", reason));
    };
    let path = match (&hub.0.path, hub.0.config.enabled) {
        (Some(path), true) => path.clone(),
        (None, true) => {
            refused("disabled");
            return Err(ApiError::not_found(
                "the event log is off (`eventLog.enabled: false`): there is nothing to stream",
            ));
        }
        (_, false) => {
            refused("disabled");
            return Err(ApiError::not_found(
                "this service does not serve the stream (`service.stream.enabled: false`)",
            ));
        }
    };
    let ask = Ask::read(pairs, &headers).map_err(|(reason, err)| {
        refused(reason);
        err
    })?;
    let Some(slot) = hub.admit() else {
        hub.0.events.emit(
            Line::info(Kind::StreamRefused)
                .field("reason", "at-capacity")
                .field("subscribers", hub.0.open.load(Ordering::Acquire)),
        );
        let detail = format!(
            "{} stream clients are connected already (`service.stream.maxSubscribers`)",
            hub.0.config.max_subscribers
        );
        let mut refusal = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, detail).into_response();
        refusal
            .headers_mut()
            .insert(RETRY_AFTER, axum::http::HeaderValue::from_static(RETRY_AFTER_SECS));
        return Ok(refusal);
    };
    let (live, mark) = hub.join(&path);
    hub.0.events.emit(
        Line::info(Kind::StreamSubscribed)
            .field("subscribers", hub.0.open.load(Ordering::Acquire))
            // Not `work_items`: the line is about the client, not about those items (so it
            // neither passes their filter nor shows in their trail).
            .field("watching", (!ask.work_items.is_empty()).then(|| ask.work_items.clone()))
            .field("transcripts", (!ask.transcripts.is_empty()).then(|| ask.transcripts.clone()))
            .field("cursor", ask.cursor),
    );
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let transcripts =
        Transcripts::new(state.store.clone(), state.claude_projects.clone(), &ask.transcripts);
    let subscriber = Subscriber { hub: hub.clone(), ask, transcripts, tx, frames: 0, _slot: slot };
    tokio::spawn(subscriber.run(path, live, mark));
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    Ok((
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
            (CONNECTION, "keep-alive"),
            (HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        body,
    )
        .into_response())
}

/// One connection's feed: its replay, then the live lines it wants and keep-alives.
#[derive(Debug)]
struct Subscriber {
    hub: Hub,
    ask: Ask,
    /// The transcripts it watches (`None`: none).
    transcripts: Option<Transcripts>,
    /// To the response body; closed when the client goes away.
    tx: mpsc::Sender<Bytes>,
    /// Frames sent (`stream.disconnected`).
    frames: u64,
    _slot: Slot,
}

/// Why a feed ended.
#[derive(Debug)]
enum Ended {
    Client,
    Shutdown,
}

impl Subscriber {
    async fn run(mut self, path: PathBuf, live: broadcast::Receiver<Arc<Frame>>, mark: Mark) {
        let ended = self.feed(path, live, mark).await;
        let reason = match ended {
            Ended::Client => "client",
            Ended::Shutdown => "shutdown",
        };
        self.hub.0.events.emit(
            Line::info(Kind::StreamDisconnected)
                .field("frames", self.frames)
                .field("reason", reason),
        );
    }

    async fn feed(
        &mut self,
        path: PathBuf,
        mut live: broadcast::Receiver<Arc<Frame>>,
        mark: Mark,
    ) -> Ended {
        let replay = match self.ask.cursor {
            Some(cursor) => {
                let read = tokio::task::spawn_blocking(move || replay(&path, cursor, mark)).await;
                Some(read.unwrap_or(Err("truncated")))
            }
            None => None,
        };
        if let Some(Err(reason)) = &replay {
            self.hub.0.events.emit(
                Line::info(Kind::StreamDesync)
                    .field("reason", *reason)
                    .field("cursor", self.ask.cursor),
            );
            if let Err(ended) = self.put(desync_frame(reason, self.ask.cursor)).await {
                return ended;
            }
        }
        if let Err(ended) = self.put(Bytes::from(format!("retry: {RETRY_MS}\n\n"))).await {
            return ended;
        }
        for frame in replay.and_then(Result::ok).unwrap_or_default() {
            if let Err(ended) = self.offer(&frame).await {
                return ended;
            }
        }
        let keep_alive = Duration::from_secs(self.hub.0.config.keep_alive_seconds);
        let stop = self.hub.0.stop.clone();
        let mut look = tokio::time::interval(transcript_watch::TICK);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let idle = tokio::time::sleep(keep_alive);
        tokio::pin!(idle);
        loop {
            let before = self.frames;
            let next = tokio::select! {
                () = stop.cancelled() => return Ended::Shutdown,
                () = self.tx.closed() => return Ended::Client,
                () = &mut idle => None,
                next = live.recv() => Some(next),
                _ = look.tick(), if self.transcripts.is_some() => {
                    if let Err(ended) = self.look_at_transcripts().await {
                        return ended;
                    }
                    if self.frames != before {
                        idle.as_mut().reset(tokio::time::Instant::now() + keep_alive);
                    }
                    continue;
                }
            };
            let sent = match next {
                None => self.put(Bytes::from_static(KEEP_ALIVE)).await,
                Some(Ok(frame)) => self.offer(&frame).await,
                Some(Err(broadcast::error::RecvError::Lagged(_))) => {
                    // Too slow for the channel: skip to the live end and say so once.
                    live = live.resubscribe();
                    self.hub
                        .0
                        .events
                        .emit(Line::info(Kind::StreamDesync).field("reason", "queue-overflow"));
                    self.put(desync_frame("queue-overflow", None)).await
                }
                Some(Err(broadcast::error::RecvError::Closed)) => return Ended::Shutdown,
            };
            if let Err(ended) = sent {
                return ended;
            }
            // A keep-alive comes after `keep_alive` of silence, not of any frame.
            if self.frames != before {
                idle.as_mut().reset(tokio::time::Instant::now() + keep_alive);
            }
        }
    }

    /// Sends a `transcript` frame for each watched transcript that grew.
    async fn look_at_transcripts(&mut self) -> Result<(), Ended> {
        let Some(mut transcripts) = self.transcripts.take() else { return Ok(()) };
        let looked = tokio::task::spawn_blocking(move || {
            let frames = transcripts.look();
            (transcripts, frames)
        })
        .await;
        // A look that panicked watches nothing more; the log frames go on.
        let Ok((transcripts, frames)) = looked else { return Ok(()) };
        self.transcripts = Some(transcripts);
        for frame in frames {
            self.put(frame).await?;
        }
        Ok(())
    }

    /// Sends `frame` if this subscriber wants it.
    async fn offer(&mut self, frame: &Frame) -> Result<(), Ended> {
        if !self.ask.wants(frame) {
            return Ok(());
        }
        match frame {
            Frame::Log { wire, .. } => self.put(wire.clone()).await,
            Frame::Desync(reason) => self.put(desync_frame(reason, None)).await,
        }
    }

    async fn put(&mut self, bytes: Bytes) -> Result<(), Ended> {
        let sent = tokio::select! {
            () = self.hub.0.stop.cancelled() => return Err(Ended::Shutdown),
            sent = self.tx.send(bytes) => sent,
        };
        sent.map_err(|_| Ended::Client)?;
        self.frames += 1;
        Ok(())
    }
}

/// The frames of the lines of `path` from `cursor` up to `mark`, or why that cannot be
/// honoured (the `desync` reason).
fn replay(path: &Path, cursor: u64, mark: Mark) -> Result<Vec<Arc<Frame>>, &'static str> {
    if cursor > mark.sent {
        return Err("truncated");
    }
    if mark.sent - cursor > REPLAY_WINDOW {
        return Err("replay-window");
    }
    if cursor == mark.sent {
        return Ok(Vec::new());
    }
    let file = File::open(path).map_err(|_| "truncated")?;
    let same = file.metadata().is_ok_and(|meta| FileId::of(&meta) == mark.file);
    // A cursor must be a line's end: the byte before it a newline (the start is 0).
    let from = cursor.saturating_sub(1);
    let mut bytes = vec![0; (mark.sent - from) as usize];
    let read = file.read_exact_at(&mut bytes, from).is_ok();
    let at_line_end = cursor == 0 || bytes.first() == Some(&b'\n');
    if !same || !read || !at_line_end {
        return Err("truncated");
    }
    let skip = usize::from(cursor > 0);
    Ok(log_frames(&bytes[skip..], cursor))
}
