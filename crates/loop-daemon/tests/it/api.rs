//! The control plane against the real service: `Service::from_config` in serve mode
//! with the receiver and the API each on a port-0 listener, talked to over real HTTP.

use std::net::SocketAddr;

use loop_daemon::api::ApiToken;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::receiver::Secret;
use loop_daemon::service::{Environment, Misconfiguration, Mode, Service, ServiceError};
use loop_sim::test_support::PATIENCE;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::common::{Answer, SECRET, Site, request};

/// A running service whose control plane answers at `addr`.
pub struct ApiService {
    pub site: Site,
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<loop_daemon::service::Stopped, ServiceError>>,
}

/// The service's environment for `site`: its listeners on port 0, the webhook secret and
/// `token` as the control plane's.
async fn environment(site: &Site, token: Option<&str>) -> Environment {
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    Environment {
        home: site.dir.path().join("home"),
        scratch_dir: site.dir.path().to_owned(),
        tmux_socket: Some(site.dir.path().join("tmux.sock")),
        secret: Secret::from_value(Some(SECRET)),
        listener: Some(bind().await.expect("port 0")),
        api_listener: Some(bind().await.expect("port 0")),
        api_token: ApiToken::from_value(token),
        ..Environment::default()
    }
}

/// Builds the service `site`'s config describes, in serve mode.
async fn build(site: &Site, token: Option<&str>) -> Result<Service, ServiceError> {
    let (source, _) = ConfigSource::open(site.config_path()).expect("the config loads");
    Service::from_config(
        source,
        environment(site, token).await,
        Mode::Serve { hold_processing: false },
    )
    .await
}

impl ApiService {
    pub async fn start(extra: &str, token: Option<&str>) -> Self {
        let site = Site::new(&format!("webhooks:\n  ghWebhook:\n    enabled: true\n{extra}"));
        let service = build(&site, token).await.expect("the service builds");
        let url = service.api_url().expect("the control plane is enabled");
        let addr = url.trim_start_matches("http://").parse().expect("an address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(service.run(
            async move {
                let _ = stopped.await;
            },
            |_| {},
        ));
        Self { site, addr, stop: Some(stop), task }
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        request(self.addr, "GET", path, headers, b"").await
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        request(self.addr, "POST", path, &all, body.as_bytes()).await
    }

    /// Stops the service and waits for it; every line it wrote is in the log then.
    pub async fn stop(mut self) -> Site {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let stopped = tokio::time::timeout(PATIENCE, &mut self.task).await.expect("it stops");
        stopped.expect("the task ran").expect("a clean stop");
        self.site
    }
}

/// The body as JSON.
pub fn json(answer: &Answer) -> Value {
    serde_json::from_str(&answer.body)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {} {}", answer.head, answer.body))
}

#[tokio::test]
async fn health_answers_ok_with_the_version_and_is_not_audited() {
    let api = ApiService::start("", None).await;
    let answer = api.get("/api/v1/health", &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(json(&answer)["status"], "ok");
    assert_eq!(json(&answer)["version"], env!("CARGO_PKG_VERSION"));
    let missing = api.get("/api/v1/no-such-route", &[]).await;
    assert_eq!(missing.status, 404);
    assert!(json(&missing)["detail"].is_string(), "{}", missing.body);
    let site = api.stop().await;
    let requests = site.events_named("api.request");
    assert_eq!(requests.len(), 1, "health is not audited: {requests:#?}");
    assert_eq!(requests[0]["path"], "/api/v1/no-such-route");
    assert_eq!(requests[0]["status"], 404);
    assert_eq!(requests[0]["source"], "api");
    assert_eq!(site.events_named("api.started").len(), 1);
    assert_eq!(site.events_named("api.stopped").len(), 1);
}

#[tokio::test]
async fn a_request_addressed_to_another_host_is_refused_on_loopback() {
    let api = ApiService::start("", None).await;
    let rebound = api.get("/api/v1/health", &[("Host", "evil.example:4114")]).await;
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    assert!(json(&rebound)["detail"].as_str().unwrap().contains("evil.example"));
    for host in ["localhost:4114", "127.0.0.1", "[::1]:4114"] {
        assert_eq!(api.get("/api/v1/health", &[("Host", host)]).await.status, 200, "{host}");
    }
    api.stop().await;
}

#[tokio::test]
async fn a_cross_origin_post_is_refused_and_the_own_origin_or_a_listed_one_is_not() {
    let api = ApiService::start(
        "service:\n  cors:\n    allowOrigins: [\"https://board.example\"]\n",
        None,
    )
    .await;
    let own = format!("http://{}", api.addr);
    let foreign = api.post("/api/v1/health", &[("Origin", "https://evil.example")], "{}").await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert!(json(&foreign)["detail"].as_str().unwrap().contains("https://evil.example"));
    // Past the Origin check, the route itself answers (health takes no POST).
    for origin in [own.as_str(), "https://board.example"] {
        let passed = api.post("/api/v1/health", &[("Origin", origin)], "{}").await;
        assert_eq!(passed.status, 405, "{origin}: {}", passed.body);
    }
    let read = api.get("/api/v1/health", &[("Origin", "https://board.example")]).await;
    assert!(
        read.head
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: https://board.example"),
        "{}",
        read.head
    );
    let unlisted = api.get("/api/v1/health", &[("Origin", "https://evil.example")]).await;
    assert!(!unlisted.head.to_ascii_lowercase().contains("access-control-allow-origin"));
    api.stop().await;
}

#[tokio::test]
async fn with_a_token_every_route_but_health_needs_it() {
    let api = ApiService::start("", Some("s3cret-token")).await;
    assert_eq!(api.get("/api/v1/health", &[]).await.status, 200);
    let none = api.get("/api/v1/no-such-route", &[]).await;
    assert_eq!(none.status, 401, "{}", none.body);
    assert!(none.head.to_ascii_lowercase().contains("www-authenticate: bearer"), "{}", none.head);
    let wrong = api.get("/api/v1/no-such-route", &[("Authorization", "Bearer s3cret")]).await;
    assert_eq!(wrong.status, 401);
    let right = api.get("/api/v1/no-such-route", &[("Authorization", "Bearer s3cret-token")]).await;
    assert_eq!(right.status, 404, "past the token, the route answers");
    api.stop().await;
}

#[tokio::test]
async fn binding_beyond_loopback_without_a_token_is_refused_at_boot() {
    let site = Site::new(
        "webhooks:\n  ghWebhook:\n    enabled: true\nservice:\n  host: 0.0.0.0\n  exposed: true\n",
    );
    let Err(ServiceError::Misconfigured(problems)) = build(&site, None).await else {
        panic!("an exposed control plane without a token starts");
    };
    assert!(matches!(problems[..], [Misconfiguration::Api(_)]), "{problems:?}");
    assert!(problems[0].to_string().contains("THE_LOOP_SERVICE_TOKEN"), "{}", problems[0]);
    assert!(problems[0].hint().unwrap().contains("service.host: 127.0.0.1"));
    // With the token it starts (listening on the test's own loopback listener).
    let service = build(&site, Some("a-long-token")).await.expect("with a token it builds");
    service.close().await;
}

pub const ITEM: &str = "github:octo/app#7";

/// The site's store, for a test to write records before the service reads them.
pub fn store(site: &Site) -> loop_store::StateStore {
    loop_store::StateStore::new(site.layout(), loop_store::EventLog::disabled())
}

/// A session record for [`ITEM`] whose own endpoint is `status`, Claude conversation
/// `conversation` in `cwd`, with one PR endpoint.
pub fn session(
    status: loop_core::record::EndpointStatus,
    cwd: &std::path::Path,
) -> loop_core::record::LocalRecord {
    let item: loop_core::WorkItemRef = ITEM.parse().unwrap();
    let endpoint = loop_core::record::Endpoint {
        harness: "claude".into(),
        harness_session_id: Some("conv-1".into()),
        cwd: cwd.to_owned(),
        tmux_target: item.tmux_session(),
        status,
        recent_deliveries: vec!["d-1".into()],
        created_at: jiff::Timestamp::UNIX_EPOCH,
        last_event_at: None,
        model: None,
        effort: None,
        harness_args: Vec::new(),
        awaiting_input: None,
        graph_warning: None,
    };
    let mut record = loop_core::record::LocalRecord::new(item.clone());
    record.endpoints.insert(item, endpoint.clone());
    record.endpoints.insert("github:octo/lib#3".parse().unwrap(), endpoint);
    record
}

pub fn control(command: loop_core::control::Command) -> loop_core::record::Control {
    loop_core::record::Control {
        command,
        source: loop_core::record::ControlSource::Comment,
        actor: Some("octocat".parse().unwrap()),
        requested_at: jiff::Timestamp::UNIX_EPOCH,
        note: None,
        instance: None,
        delivery_id: None,
    }
}

#[tokio::test]
async fn work_items_list_the_portable_records_and_one_refuses_a_bad_or_unknown_ref() {
    let api = ApiService::start("", None).await;
    let item: loop_core::WorkItemRef = ITEM.parse().unwrap();
    store(&api.site)
        .write_section(&item, Some(&control(loop_core::control::Command::Start)))
        .unwrap();
    let listed = json(&api.get("/api/v1/work-items", &[]).await);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");
    assert_eq!(listed[0]["ref"], ITEM);
    assert_eq!(listed[0]["control"]["command"], "start");
    let one = api.get("/api/v1/work-items/one?ref=github:octo/app%237", &[]).await;
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(json(&one)["control"]["actor"], "octocat");
    let malformed = api.get("/api/v1/work-items/one?ref=octo", &[]).await;
    assert_eq!(malformed.status, 400, "{}", malformed.body);
    assert!(json(&malformed)["detail"].as_str().unwrap().contains("`octo`"));
    let unknown = api.get("/api/v1/work-items/one?ref=github:octo/app%2399", &[]).await;
    assert_eq!(unknown.status, 404);
    let missing = api.get("/api/v1/work-items/one", &[]).await;
    assert_eq!(missing.status, 422, "{}", missing.body);
    // Armed, with no session here: it needs the operator.
    let attention = json(&api.get("/api/v1/attention", &[]).await);
    assert_eq!(attention[0]["kind"], "armed-without-session", "{attention:#}");
    assert_eq!(attention[0]["workItem"], ITEM);
    api.stop().await;
}

#[tokio::test]
async fn sessions_list_in_the_reference_shape_and_their_transcript_is_read_safely() {
    let api = ApiService::start("", None).await;
    let cwd = api.site.dir.path().join("work");
    store(&api.site)
        .save_local_record(&session(loop_core::record::EndpointStatus::Active, &cwd))
        .unwrap();
    let listed = json(&api.get("/api/v1/sessions", &[]).await);
    let row = &listed[0];
    assert_eq!(row["ref"], ITEM, "{listed:#}");
    assert_eq!(row["workItem"]["owner"], "octo");
    assert_eq!(row["workItem"]["number"], 7);
    assert_eq!(row["status"], "active");
    assert_eq!(row["harnessSessionId"], "conv-1");
    // The service's own tmux server: its socket, then the exact session.
    let socket = api.site.dir.path().join("tmux.sock");
    let attach = row["attach"].as_str().unwrap();
    assert!(attach.starts_with("tmux -S "), "{attach}");
    assert!(attach.contains(&socket.display().to_string()), "{attach}");
    assert!(attach.ends_with(" attach-session -t =loop-github-octo-app-7"), "{attach}");
    assert_eq!(row["pullRequests"][0]["ref"], "github:octo/lib#3");
    assert_eq!(row["control"], Value::Null);
    assert_eq!(json(&api.get("/api/v1/sessions?status=paused", &[]).await), serde_json::json!([]));
    assert_eq!(api.get("/api/v1/sessions?status=sleeping", &[]).await.status, 422);
    assert_eq!(api.get("/api/v1/sessions/one?ref=github:octo/app%237", &[]).await.status, 200);
    assert_eq!(api.get("/api/v1/sessions/one?ref=github:octo/app%2399", &[]).await.status, 404);
    assert_eq!(api.get("/api/v1/sessions/one?ref=nope", &[]).await.status, 400);

    // No file yet: 404. Then the transcript under `$HOME/.claude/projects`.
    let path = "/api/v1/sessions/transcript?ref=github:octo/app%237&tail=2";
    assert_eq!(api.get(path, &[]).await.status, 404);
    let dir = std::path::Path::new(".claude/projects")
        .join(loop_sessions::harness::claude_project_dir_name(&cwd));
    let dir = api.site.dir.path().join("home").join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("conv-1.jsonl"),
        "{\"type\":\"user\"}\nnot json\n{\"type\":\"assistant\"}\n",
    )
    .unwrap();
    let transcript = api.get(path, &[]).await;
    assert_eq!(transcript.status, 200, "{}", transcript.body);
    let transcript = json(&transcript);
    assert_eq!(transcript["totalLines"], 3);
    assert_eq!(transcript["truncated"], true);
    assert_eq!(transcript["entries"][0]["malformed"], "not json");
    assert_eq!(transcript["entries"][1]["type"], "assistant");
    api.stop().await;
}

#[tokio::test]
async fn a_transcript_outside_the_projects_root_is_never_read() {
    let api = ApiService::start("", None).await;
    let cwd = api.site.dir.path().join("work");
    let mut record = session(loop_core::record::EndpointStatus::Active, &cwd);
    for endpoint in record.endpoints.values_mut() {
        endpoint.harness_session_id = Some("../../../secret".into());
    }
    store(&api.site).save_local_record(&record).unwrap();
    std::fs::write(api.site.dir.path().join("secret.jsonl"), "{\"leak\":true}\n").unwrap();
    let answer = api.get("/api/v1/sessions/transcript?ref=github:octo/app%237", &[]).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert!(!answer.body.contains("leak"));
    api.stop().await;
}

#[tokio::test]
async fn control_pauses_through_the_operator_verbs_and_the_paused_session_needs_you() {
    let api = ApiService::start("", None).await;
    let cwd = api.site.dir.path().join("work");
    store(&api.site)
        .save_local_record(&session(loop_core::record::EndpointStatus::Active, &cwd))
        .unwrap();
    let body = format!(r#"{{"ref": "{ITEM}", "verb": "pause", "comment": false}}"#);
    let paused = api.post("/api/v1/sessions/control", &[], &body).await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    let paused = json(&paused);
    assert_eq!(paused["effect"], "paused", "{paused:#}");
    assert_eq!(paused["exitCode"], 0);
    let shown = json(&api.get("/api/v1/sessions/one?ref=github:octo/app%237", &[]).await);
    assert_eq!(shown["status"], "paused");
    assert_eq!(shown["control"]["command"], "pause");
    assert_eq!(shown["control"]["source"], "api", "the control plane is its own source");
    let attention = json(&api.get("/api/v1/attention", &[]).await);
    assert_eq!(attention[0]["kind"], "session-paused", "{attention:#}");
    assert!(attention[0]["detail"].as_str().unwrap().contains("last control: pause"));

    let again = json(&api.post("/api/v1/sessions/control", &[], &body).await);
    assert_eq!((again["effect"].as_str(), again["exitCode"].as_i64()), (Some("noop"), Some(1)));
    let verb = format!(r#"{{"ref": "{ITEM}", "verb": "explode"}}"#);
    assert_eq!(api.post("/api/v1/sessions/control", &[], &verb).await.status, 400);
    let bad_ref = r#"{"ref": "octo", "verb": "pause"}"#;
    assert_eq!(api.post("/api/v1/sessions/control", &[], bad_ref).await.status, 400);
    let shapeless = r#"{"verb": "pause"}"#;
    assert_eq!(api.post("/api/v1/sessions/control", &[], shapeless).await.status, 422);
    let not_json = api.post("/api/v1/sessions/control", &[], "{").await;
    assert_eq!(not_json.status, 400, "{}", not_json.body);
    let foreign =
        api.post("/api/v1/sessions/control", &[("Origin", "https://evil.example")], &body).await;
    assert_eq!(foreign.status, 403);
    let huge = format!(r#"{{"ref": "{ITEM}", "verb": "{}"}}"#, "x".repeat(100_000));
    assert_eq!(api.post("/api/v1/sessions/control", &[], &huge).await.status, 413);

    let close = format!(r#"{{"ref": "{ITEM}", "keepTmux": true}}"#);
    let closed = json(&api.post("/api/v1/sessions/close", &[], &close).await);
    assert_eq!(closed["closed"], true, "{closed:#}");
    let twice = json(&api.post("/api/v1/sessions/close", &[], &close).await);
    assert_eq!((twice["closed"].as_bool(), twice["exitCode"].as_i64()), (Some(false), Some(1)));
    let site = api.stop().await;
    let audited = site.events_named("api.request");
    assert!(audited.iter().any(|l| l["path"] == "/api/v1/sessions/control" && l["status"] == 403));
    let commands = site.events_named("control.command");
    assert!(!commands.is_empty() && commands.iter().all(|l| l["source"] == "api"), "{commands:#?}");
}

#[tokio::test]
async fn events_filter_by_type_item_level_and_limit_and_explain_tells_the_trail() {
    let api = ApiService::start("", None).await;
    let item: loop_core::WorkItemRef = ITEM.parse().unwrap();
    let log = loop_store::EventLog::new(api.site.layout().event_log(), "test");
    log.emit(loop_core::log::Line::info(loop_core::log::Kind::SessionPaused).work_item(&item));
    log.emit(
        loop_core::log::Line::error(loop_core::log::Kind::DispatchError)
            .work_item(&item)
            .field("delivery_id", "d-9")
            .field("error", "boom"),
    );
    let events =
        json(&api.get("/api/v1/events?type=session.*&workItem=github:octo/app%237", &[]).await);
    assert_eq!(events.as_array().map(Vec::len), Some(1), "{events:#}");
    assert_eq!(events[0]["event"], "session.paused");
    let errors = json(&api.get("/api/v1/events?level=error", &[]).await);
    assert_eq!(errors.as_array().map(Vec::len), Some(1), "{errors:#}");
    let by_delivery = json(&api.get("/api/v1/events?deliveryId=d-9&source=test", &[]).await);
    assert_eq!(by_delivery[0]["event"], "dispatch.error");
    let last = json(&api.get("/api/v1/events?type=*&limit=1", &[]).await);
    assert_eq!(last.as_array().map(Vec::len), Some(1));
    for bad in ["level=loud", "since=yesterday", "limit=-1", "workItem=octo", "colour=red"] {
        let answer = api.get(&format!("/api/v1/events?{bad}"), &[]).await;
        assert_eq!(answer.status, 400, "{bad}: {}", answer.body);
    }
    let types = json(&api.get("/api/v1/events/types", &[]).await);
    assert!(types["api.request"].is_string() && types["session.paused"].is_string());

    let explained = json(&api.get("/api/v1/explain?subject=github:octo/app%237", &[]).await);
    assert_eq!(explained["workItem"], ITEM, "{explained:#}");
    assert!(explained["deliveries"].as_array().is_some_and(|d| !d.is_empty()));
    let delivery = json(&api.get("/api/v1/explain?subject=d-9", &[]).await);
    assert_eq!(delivery["delivery"], "d-9", "{delivery:#}");
    assert_eq!(api.get("/api/v1/explain?subject=d-404", &[]).await.status, 404);
    assert_eq!(api.get("/api/v1/explain?subject=github:octo/app%2399", &[]).await.status, 404);
    assert_eq!(api.get("/api/v1/explain?subject=github:octo%231", &[]).await.status, 400);
    let attention = json(&api.get("/api/v1/attention", &[]).await);
    assert!(
        attention.as_array().unwrap().iter().any(|r| r["kind"] == "recent-error"),
        "{attention:#}"
    );
    api.stop().await;
}

#[tokio::test]
async fn daemons_config_and_schema_describe_the_running_service() {
    let api = ApiService::start("", None).await;
    let daemons = json(&api.get("/api/v1/daemons", &[]).await);
    let receiver =
        daemons.as_array().unwrap().iter().find(|d| d["daemon"] == "gh-webhook").unwrap();
    assert_eq!(receiver["running"], true, "{daemons:#}");
    assert_eq!(receiver["pid"], std::process::id());
    let poller = daemons.as_array().unwrap().iter().find(|d| d["daemon"] == "poller").unwrap();
    assert_eq!(poller["running"], false);
    let config = json(&api.get("/api/v1/config", &[]).await);
    assert_eq!(config["exists"], true);
    assert_eq!(config["path"], api.site.config_path().display().to_string());
    assert_eq!(config["config"]["webhooks"]["ghWebhook"]["enabled"], true);
    assert_eq!(config["config"]["service"]["port"], 4114);
    let schema = json(&api.get("/api/v1/config/schema", &[]).await);
    assert_eq!(schema["properties"]["service"]["properties"]["host"]["default"], "127.0.0.1");
    api.stop().await;
}

#[tokio::test]
async fn an_open_question_of_the_agent_needs_you_until_it_is_answered() {
    let api = ApiService::start("", None).await;
    let cwd = api.site.dir.path().join("work");
    let mut record = session(loop_core::record::EndpointStatus::Active, &cwd);
    let item: loop_core::WorkItemRef = ITEM.parse().unwrap();
    if let Some(own) = record.endpoints.get_mut(&item) {
        own.awaiting_input = Some(loop_core::record::AwaitingInput {
            asked_at: jiff::Timestamp::UNIX_EPOCH,
            comment_url: "https://github.com/octo/app/issues/7#issuecomment-1".into(),
            question: "Which parser?".into(),
            options: Vec::new(),
        });
    }
    store(&api.site).save_local_record(&record).unwrap();
    let attention = json(&api.get("/api/v1/attention", &[]).await);
    assert_eq!(attention[0]["kind"], "awaiting-input", "{attention:#}");
    assert_eq!(attention[0]["detail"], "Which parser?");
    if let Some(own) = record.endpoints.get_mut(&item) {
        own.awaiting_input = None;
    }
    store(&api.site).save_local_record(&record).unwrap();
    // What is left is the watcher's: these records have no tmux session, so their agents
    // read as exited (docs/agent-states.md).
    let attention = json(&api.get("/api/v1/attention", &[]).await);
    let kinds: Vec<&str> =
        attention.as_array().unwrap().iter().flat_map(|r| r["kind"].as_str()).collect();
    assert!(kinds.iter().all(|k| *k == "agent-waiting"), "{attention:#}");
    api.stop().await;
}

#[tokio::test]
async fn usage_is_summed_once_per_message_and_priced_by_the_table_or_unknown() {
    let pricing = "pricing:\n  models:\n    stand-in: {inputPerMTok: 2, outputPerMTok: 10, cacheWritePerMTok: 1, cacheReadPerMTok: 0.5}\n";
    let api = ApiService::start(pricing, None).await;
    let cwd = api.site.dir.path().join("work");
    store(&api.site)
        .save_local_record(&session(loop_core::record::EndpointStatus::Active, &cwd))
        .unwrap();
    store(&api.site)
        .write_section(&ITEM.parse().unwrap(), Some(&control(loop_core::control::Command::Start)))
        .unwrap();
    let one = "/api/v1/sessions/one?ref=github:octo/app%237";
    assert_eq!(json(&api.get(one, &[]).await)["usage"], Value::Null, "no transcript yet");

    let dir = std::path::Path::new(".claude/projects")
        .join(loop_sessions::harness::claude_project_dir_name(&cwd));
    let dir = api.site.dir.path().join("home").join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let line = |id: &str, model: &str, input: u64, output: u64| {
        let usage = serde_json::json!({"input_tokens": input, "output_tokens": output,
            "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000});
        let message = serde_json::json!({"id": id, "model": model, "usage": usage});
        format!("{}\n", serde_json::json!({"type": "assistant", "message": message}))
    };
    // One reply written as two lines (its usage repeated), another reply, a bad line.
    let transcript = dir.join("conv-1.jsonl");
    let written = [line("m1", "stand-in-1", 100, 10), line("m1", "stand-in-1", 100, 10)];
    std::fs::write(&transcript, written.concat() + "not json\n" + &line("m2", "stand-in-1", 50, 5))
        .unwrap();
    let expected = serde_json::json!({"inputTokens": 150, "outputTokens": 15,
        "cacheWriteTokens": 2000, "cacheReadTokens": 4000,
        "costUsd": (150.0 * 2.0 + 15.0 * 10.0 + 2000.0 + 4000.0 * 0.5) / 1e6});
    let row = json(&api.get(one, &[]).await);
    assert_eq!(row["usage"], expected, "{row:#}");
    assert_eq!(row["pullRequests"][0]["usage"], expected, "the same session serves the PR");
    let item = json(&api.get("/api/v1/work-items/one?ref=github:octo/app%237", &[]).await);
    assert_eq!(item["usage"], expected, "one transcript, counted once: {item:#}");
    let listed = json(&api.get("/api/v1/work-items", &[]).await);
    assert_eq!(listed[0]["usage"], expected, "{listed:#}");

    // A model the table does not price: its tokens count, the cost is unknown.
    let mut file = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
    std::io::Write::write_all(&mut file, line("m3", "other-model", 1, 1).as_bytes()).unwrap();
    let listed = json(&api.get("/api/v1/work-items", &[]).await);
    assert_eq!(listed[0]["usage"]["inputTokens"], 151, "{listed:#}");
    assert_eq!(listed[0]["usage"]["costUsd"], Value::Null, "{listed:#}");
    api.stop().await;
}
