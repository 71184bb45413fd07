//! `GET /api/v1/stream` against the real service, read by a real HTTP client as a
//! browser's `EventSource` reads it; lines are appended by another writer, as a CLI
//! verb appends them.

use jiff::Timestamp;
use loop_core::log::{Kind, Line};
use loop_sim::test_support::{PATIENCE, POLL};
use loop_store::EventLog;
use serde_json::Value;

use crate::api::{ApiService, json};

/// One frame of the stream: its fields, or a comment.
#[derive(Debug, Clone, Default)]
struct Frame {
    id: Option<u64>,
    event: Option<String>,
    data: Option<String>,
    retry: Option<String>,
    comment: Option<String>,
}

impl Frame {
    fn line(&self) -> Value {
        serde_json::from_str(self.data.as_deref().unwrap_or_default()).expect("data is JSON")
    }
}

/// An open stream.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(api: &ApiService, query: &str, last_event_id: Option<u64>) -> reqwest::Response {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut request = reqwest::Client::new()
            .get(format!("http://{}/api/v1/stream{query}", api.addr))
            .header("Accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        request.send().await.expect("the stream answers")
    }

    async fn connect(api: &ApiService, query: &str, last_event_id: Option<u64>) -> Self {
        let response = Self::open(api, query, last_event_id).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        assert_eq!(response.headers()["cache-control"], "no-cache");
        Self { response, buffer: String::new() }
    }

    async fn next(&mut self) -> Frame {
        loop {
            if let Some((block, rest)) = self.buffer.split_once("\n\n") {
                let mut frame = Frame::default();
                for line in block.lines() {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                    match field {
                        "" => frame.comment = Some(value),
                        "id" => frame.id = Some(value.parse().expect("an offset")),
                        "event" => frame.event = Some(value),
                        "data" => frame.data = Some(value),
                        "retry" => frame.retry = Some(value),
                        other => panic!("an unknown field {other:?} in {block:?}"),
                    }
                }
                self.buffer = rest.to_owned();
                return frame;
            }
            let chunk = tokio::time::timeout(PATIENCE, self.response.chunk())
                .await
                .expect("a frame in time")
                .expect("the stream reads")
                .expect("the stream stays open");
            self.buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// The `log` frames up to the one whose line has `marker`, in order (within
    /// [`PATIENCE`] in all: keep-alives would keep a wait frame by frame going for ever).
    async fn logs_until(&mut self, marker: &str) -> Vec<Frame> {
        let logs = async {
            let mut logs = Vec::new();
            loop {
                let frame = self.next().await;
                if frame.event.as_deref() != Some("log") {
                    continue;
                }
                let last = frame.line()["marker"] == marker;
                logs.push(frame);
                if last {
                    return logs;
                }
            }
        };
        tokio::time::timeout(PATIENCE, logs).await.unwrap_or_else(|_| panic!("{marker:?} in time"))
    }
}

/// Returns once the hub has broadcast every line written before the call: a line
/// naming `item` appended now reaches `probe` (a stream filtered on `item`). A probe
/// that lags behind a tail catching up is told so (`desync`, and the line may be
/// skipped): it tries again with a new line.
async fn caught_up(probe: &mut Sse, log: &EventLog, item: &str) {
    for round in 0.. {
        let marker = format!("caught-up-{round}");
        append(log, &marker, Some(item));
        loop {
            let frame = probe.next().await;
            match frame.event.as_deref() {
                Some("desync") => break,
                Some("log") if frame.line()["marker"] == marker.as_str() => return,
                _ => {}
            }
        }
    }
}

/// Another process's writer on the service's event log.
fn writer(api: &ApiService) -> EventLog {
    EventLog::new(api.site.layout().event_log(), "cli")
}

fn append(log: &EventLog, marker: &str, item: Option<&str>) {
    let mut line = Line::info(Kind::ConfigReloaded).field("marker", marker);
    if let Some(item) = item {
        line = line.field("work_item", item);
    }
    log.append(&line, Timestamp::now()).expect("appended");
}

/// The lines of the event log after byte `from`, with the offset after each, as the
/// stream must carry them (never `api.request` or `mcp.call`).
fn streamable_after(api: &ApiService, from: u64) -> Vec<(u64, Value)> {
    let text = std::fs::read(api.site.layout().event_log()).expect("the log");
    let mut end = 0u64;
    let mut lines = Vec::new();
    for line in text.split_inclusive(|&b| b == b'\n') {
        end += line.len() as u64;
        let value: Value = serde_json::from_slice(line).expect("a JSON line");
        if end > from && !["api.request", "mcp.call"].contains(&value["event"].as_str().unwrap()) {
            lines.push((end, value));
        }
    }
    lines
}

fn ids_and_lines(frames: &[Frame]) -> Vec<(u64, Value)> {
    frames.iter().map(|f| (f.id.expect("a log frame has an id"), f.line())).collect()
}

#[tokio::test]
async fn lines_arrive_live_with_their_offsets_and_api_requests_never_do() {
    let api = ApiService::start("", None).await;
    let mut stream = Sse::connect(&api, "", None).await;
    assert_eq!(stream.next().await.retry.as_deref(), Some("3000"));
    let log = writer(&api);
    append(&log, "one", None);
    log.append(&Line::info(Kind::ApiRequest).field("marker", "audit"), Timestamp::now())
        .expect("appended");
    let events = api.get("/api/v1/events", &[]).await;
    assert_eq!(events.status, 200);
    append(&log, "two", Some("github:octo/app#7"));
    let frames = stream.logs_until("two").await;

    let markers: Vec<Value> =
        frames.iter().map(|f| f.line()["marker"].clone()).filter(|m| !m.is_null()).collect();
    assert_eq!(markers, ["one", "two"], "{frames:#?}");
    assert!(frames.iter().all(|f| f.line()["event"] != "api.request"), "{frames:#?}");
    // Each id is the offset just after its line in the file, and the frames are the
    // file's streamable lines in order.
    let first = frames[0].id.unwrap() - 1;
    let expected: Vec<(u64, Value)> =
        streamable_after(&api, first).into_iter().take(frames.len()).collect();
    assert_eq!(ids_and_lines(&frames), expected);
    drop(stream);
    let site = api.stop().await;
    assert_eq!(site.events_named("stream.subscribed").len(), 1);
    assert_eq!(site.events_named("stream.disconnected").len(), 1);
}

#[tokio::test]
async fn a_resume_from_an_id_gets_exactly_the_lines_after_it_then_the_live_ones() {
    let api = ApiService::start("", None).await;
    let log = writer(&api);
    let mut first = Sse::connect(&api, "", None).await;
    for n in 1..=5 {
        append(&log, &format!("a{n}"), None);
    }
    let seen = first.logs_until("a5").await;
    let cursor = seen.iter().find(|f| f.line()["marker"] == "a3").and_then(|f| f.id).unwrap();
    drop(first);
    // Missed while away, and written while the second connection opens.
    for n in 1..=3 {
        append(&log, &format!("b{n}"), None);
    }
    let busy = {
        let log = log.clone();
        tokio::task::spawn_blocking(move || {
            for n in 1..=300 {
                append(&log, &format!("c{n}"), None);
            }
        })
    };
    let mut second = Sse::connect(&api, "", Some(cursor)).await;
    busy.await.expect("the writer");
    append(&log, "end", None);
    let resumed = second.logs_until("end").await;

    let expected: Vec<(u64, Value)> =
        streamable_after(&api, cursor).into_iter().take(resumed.len()).collect();
    assert_eq!(ids_and_lines(&resumed), expected, "no gap, no overlap");
    assert_eq!(resumed[0].line()["marker"], "a4");
    assert_eq!(resumed.last().unwrap().line()["marker"], "end");
    drop(second);
    api.stop().await;
}

#[tokio::test]
async fn the_work_item_filter_passes_only_lines_naming_the_item() {
    let api = ApiService::start("", None).await;
    let log = writer(&api);
    let mut stream = Sse::connect(&api, "?workItem=github:octo/app%237", None).await;
    append(&log, "other", Some("github:octo/app#8"));
    append(&log, "plain", None);
    let both = Line::info(Kind::ConfigReloaded)
        .field("marker", "listed")
        .field("work_items", vec!["github:octo/app#1", "github:octo/app#7"]);
    log.append(&both, Timestamp::now()).expect("appended");
    append(&log, "own", Some("github:octo/app#7"));
    let frames = stream.logs_until("own").await;
    let markers: Vec<Value> = frames.iter().map(|f| f.line()["marker"].clone()).collect();
    assert_eq!(markers, ["listed", "own"]);
    drop(stream);
    api.stop().await;
}

#[tokio::test]
async fn a_cursor_that_cannot_be_honoured_is_a_desync_and_a_malformed_one_a_400() {
    let api = ApiService::start("", None).await;
    let mut past = Sse::connect(&api, "", Some(1 << 40)).await;
    let desync = past.next().await;
    assert_eq!(desync.event.as_deref(), Some("desync"));
    assert_eq!(desync.line()["reason"], "truncated");
    assert_eq!(desync.line()["cursor"], 1u64 << 40);
    assert_eq!(past.next().await.retry.as_deref(), Some("3000"));
    drop(past);
    // Not a line's end: the middle of the first line.
    let mut middle = Sse::connect(&api, "", Some(3)).await;
    assert_eq!(middle.next().await.line()["reason"], "truncated");
    drop(middle);

    for (query, header) in [("", "-1"), ("", "12abc"), ("?workItem=octo", "0"), ("?since=1", "0")] {
        let refused =
            api.get(&format!("/api/v1/stream{query}"), &[("Last-Event-ID", header)]).await;
        assert_eq!(refused.status, 400, "{query} {header}: {}", refused.body);
        assert!(json(&refused)["detail"].is_string());
    }
    let site = api.stop().await;
    let reasons: Vec<Value> =
        site.events_named("stream.refused").iter().map(|l| l["reason"].clone()).collect();
    assert_eq!(reasons, ["bad-cursor", "bad-cursor", "bad-filter", "bad-filter"]);
    assert_eq!(site.events_named("stream.desync").len(), 2);
}

#[tokio::test]
async fn one_subscriber_past_the_cap_is_answered_503_with_retry_after() {
    let api = ApiService::start("service:\n  stream:\n    maxSubscribers: 1\n", None).await;
    let mut open = Sse::connect(&api, "", None).await;
    assert!(open.next().await.retry.is_some());
    let refused = api.get("/api/v1/stream", &[]).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.head.to_ascii_lowercase().contains("retry-after: 5"), "{}", refused.head);
    assert!(json(&refused)["detail"].as_str().unwrap().contains("maxSubscribers"));
    // The place is free again once the client has gone.
    drop(open);
    let freed = tokio::time::timeout(PATIENCE, async {
        while Sse::open(&api, "", None).await.status() != 200 {
            tokio::time::sleep(POLL).await;
        }
    });
    freed.await.expect("the place is free again");
    let site = api.stop().await;
    assert!(site.events_named("stream.refused").iter().any(|l| l["reason"] == "at-capacity"));
}

#[tokio::test]
async fn a_disabled_stream_is_a_404() {
    let api = ApiService::start("service:\n  stream:\n    enabled: false\n", None).await;
    let answer = api.get("/api/v1/stream", &[]).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert!(json(&answer)["detail"].as_str().unwrap().contains("service.stream.enabled"));
    api.stop().await;
}

#[tokio::test]
async fn an_idle_stream_gets_keep_alive_comments() {
    let api = ApiService::start("service:\n  stream:\n    keepAliveSeconds: 1\n", None).await;
    let mut stream = Sse::connect(&api, "", None).await;
    loop {
        if stream.next().await.comment.as_deref() == Some("keep-alive") {
            break;
        }
    }
    drop(stream);
    api.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_told_to_refetch_and_then_follows_the_live_end() {
    let api = ApiService::start("", None).await;
    let mut stalled = Sse::connect(&api, "", None).await;
    let log = writer(&api);
    // Far more than the channel and the sockets hold while nobody reads (and past a
    // rotation of the 10 MiB log).
    let padding = "x".repeat(1024);
    let flood = {
        let log = log.clone();
        tokio::task::spawn_blocking(move || {
            for n in 0..12_000 {
                let line =
                    Line::info(Kind::ConfigReloaded).field("n", n).field("padding", &padding);
                log.append(&line, Timestamp::now()).expect("appended");
            }
        })
    };
    flood.await.expect("the flood");
    // The hub's tail may still be behind the writer (a loaded machine); once it has
    // broadcast the whole flood, the stalled subscriber cannot have taken it all.
    let mut probe = Sse::connect(&api, "?workItem=github:octo/app%237", None).await;
    tokio::time::timeout(PATIENCE, caught_up(&mut probe, &log, "github:octo/app#7"))
        .await
        .expect("the hub's tail catches up with the flood");
    drop(probe);
    // What it missed is gone (the desync says so); what comes after reaches it.
    let desync = tokio::time::timeout(PATIENCE, async {
        loop {
            let frame = stalled.next().await;
            if frame.event.as_deref() == Some("desync") {
                return frame;
            }
        }
    });
    let desync = desync.await.expect("a desync in time");
    assert_eq!(desync.line()["reason"], "queue-overflow");
    append(&log, "after", None);
    stalled.logs_until("after").await;
    drop(stalled);
    let site = api.stop().await;
    // The log rotated during the flood: read the old files too.
    let lines = loop_store::event_log::read::read_all(site.layout().event_log()).expect("the log");
    assert!(
        lines.iter().any(|l| l.event() == "stream.desync" && l.0["reason"] == "queue-overflow"),
        "stream.desync is logged"
    );
}

#[tokio::test]
async fn a_watched_transcript_that_grows_is_a_transcript_frame_counting_its_lines() {
    let api = ApiService::start("service:\n  stream:\n    keepAliveSeconds: 1\n", None).await;
    let cwd = api.site.dir.path().join("checkout");
    let record = crate::api::session(loop_core::record::EndpointStatus::Active, &cwd);
    crate::api::store(&api.site).save_local_record(&record).expect("the session");
    let dir = api
        .site
        .dir
        .path()
        .join("home/.claude/projects")
        .join(loop_sessions::harness::claude_project_dir_name(&cwd));
    std::fs::create_dir_all(&dir).expect("the projects dir");
    let path = dir.join("conv-1.jsonl");
    std::fs::write(&path, "{\"type\":\"user\"}\n").expect("the transcript");
    let mut written = 1u64;
    let append = |n: u64| {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open");
        writeln!(file, "{{\"type\":\"assistant\",\"n\":{n}}}").expect("appended");
    };

    let mut stream = Sse::connect(&api, "?transcript=github:octo/app%237", None).await;
    // Grows until a frame says so (the first look is a baseline, whenever it happens).
    let mut told = None;
    for _ in 0..20 {
        written += 1;
        append(written);
        loop {
            let frame = stream.next().await;
            match frame.event.as_deref() {
                Some("transcript") => {
                    assert_eq!(frame.id, None, "a transcript frame moves no cursor");
                    told = Some(frame.line());
                    break;
                }
                _ if frame.comment.as_deref() == Some("keep-alive") => break,
                _ => {}
            }
        }
        if told.is_some() {
            break;
        }
    }
    let told = told.expect("a transcript frame");
    assert_eq!(told["ref"], "github:octo/app#7");
    // Every growth is a frame: the last one counts every line, as the route does.
    let mut last = told["totalLines"].as_u64().expect("a count");
    for _ in 0..20 {
        if last == written {
            break;
        }
        let frame = stream.next().await;
        if frame.event.as_deref() == Some("transcript") {
            last = frame.line()["totalLines"].as_u64().expect("a count");
        }
    }
    assert_eq!(last, written);
    let read = json(&api.get("/api/v1/sessions/transcript?ref=github:octo/app%237", &[]).await);
    assert_eq!(read["totalLines"], written);
    drop(stream);
    api.stop().await;
}
