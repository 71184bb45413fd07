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
