//! A receiver under test: its own temp state root and config file, a port-0 listener, a
//! [`Dispatch`] that hands every judged event to the test, and a plain HTTP/1.1 client.

use loop_daemon::config_source::ConfigSource;
use loop_daemon::live_config::{Hosted, LiveConfig};
use loop_daemon::receiver::{Dispatch, Judged, Receiver, Secret};
use loop_sim::test_support::{PATIENCE, read_lines};
use loop_store::{EventLog, StateLayout, StateStore};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub const SECRET: &str = "test-secret";

/// Hands judged events to the test.
#[derive(Debug)]
pub struct ToTest(pub mpsc::UnboundedSender<Judged>);

impl Dispatch for ToTest {
    fn dispatch(&self, judged: Judged) {
        let _ = self.0.send(judged);
    }
}

/// A temp directory with a config file and a state root.
#[derive(Debug)]
pub struct Site {
    pub dir: tempfile::TempDir,
}

impl Site {
    /// `extra` is YAML appended to a config that sets the state root and authorizes `octocat`.
    pub fn new(extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let site = Self { dir };
        site.write_config(extra);
        site
    }

    pub fn write_config(&self, extra: &str) {
        let text = format!(
            "state:\n  root: {root}\nrouting:\n  authorizedUsers: [octocat]\n{extra}",
            root = self.root().display()
        );
        std::fs::write(self.config_path(), text).expect("the config file");
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("cli-config.yaml")
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn layout(&self) -> StateLayout {
        StateLayout::new(self.root())
    }

    /// A receiver over this site, not yet running.
    pub fn receiver(
        &self,
        secret: Option<&str>,
    ) -> Result<Receiver, loop_daemon::receiver::ReceiverError> {
        let store = StateStore::new(self.layout(), EventLog::disabled());
        standalone_receiver(&self.config_path(), &store, Secret::from_value(secret))
    }

    /// Every event-log line, parsed.
    pub fn events(&self) -> Vec<Value> {
        read_lines(self.layout().event_log()).values
    }

    /// The lines named `name`.
    pub fn events_named(&self, name: &str) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["event"] == name).collect()
    }

    pub fn inbox_dir(&self) -> PathBuf {
        self.layout().inbox_dir()
    }
}

/// A receiver hosted alone in its process, as a test runs one: the process's one event
/// log writer and its config file, reloads described as a receiver's. It shares
/// `store`'s caches, live view and read counts, as the service's receiver shares the
/// dispatcher's.
pub fn standalone_receiver(
    config_path: &Path,
    store: &StateStore,
    secret: Option<Secret>,
) -> Result<Receiver, loop_daemon::receiver::ReceiverError> {
    let events = EventLog::new(store.layout().event_log(), "gh-webhook").with_writer();
    let (source, _) = ConfigSource::open(config_path).expect("the config loads");
    let hosted = Hosted { receiver: true, unsigned: secret.is_none(), poller: false };
    let config = LiveConfig::new(source, events.clone(), hosted);
    Receiver::new(config, store.reporting_to(events), secret)
}

/// A running receiver.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    pub judged: mpsc::UnboundedReceiver<Judged>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), loop_daemon::receiver::ReceiverError>>,
}

impl Running {
    /// Starts `receiver` on port 0 with judged events handed to the test.
    pub async fn start(receiver: Receiver) -> Self {
        let (tx, judged) = mpsc::unbounded_channel();
        Self::serve(receiver.with_dispatch(Arc::new(ToTest(tx))), judged).await
    }

    /// Starts `receiver` on port 0 with its own `dispatch` ([`Running::next_judged`]
    /// then sees nothing).
    pub async fn start_with(receiver: Receiver, dispatch: Arc<dyn Dispatch>) -> Self {
        let (_, judged) = mpsc::unbounded_channel();
        Self::serve(receiver.with_dispatch(dispatch), judged).await
    }

    async fn serve(receiver: Receiver, judged: mpsc::UnboundedReceiver<Judged>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port 0");
        let addr = listener.local_addr().expect("a bound address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(receiver.run(listener, async move {
            let _ = stopped.await;
        }));
        Self { addr, judged, stop: Some(stop), task }
    }

    /// The next judged event.
    pub async fn next_judged(&mut self) -> Judged {
        tokio::time::timeout(PATIENCE, self.judged.recv())
            .await
            .expect("a judged event in time")
            .expect("the receiver is running")
    }

    /// Stops the receiver and waits for it to return.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(PATIENCE, &mut self.task).await.expect("it stops");
        result.expect("the task ran").expect("a clean stop");
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        request(self.addr, "POST", path, headers, body).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        request(self.addr, "GET", path, &[], b"").await
    }

    /// POSTs a delivery signed with [`SECRET`].
    pub async fn deliver(&self, event: &str, id: Option<&str>, body: &str) -> Answer {
        let signature = loop_sim::webhook::sign(SECRET.as_bytes(), body.as_bytes());
        let mut headers =
            vec![("X-GitHub-Event", event), ("X-Hub-Signature-256", signature.as_str())];
        if let Some(id) = id {
            headers.push(("X-GitHub-Delivery", id));
        }
        self.post("/gh-webhook", &headers, body.as_bytes()).await
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// One HTTP/1.1 request with `Connection: close`, read to the end; `Host` is `addr`
/// unless `headers` name one.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let method = method.to_owned();
    let path = path.to_owned();
    let headers: Vec<(String, String)> =
        headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let body = body.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).expect("connect to the receiver");
        stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {addr}\r\n"));
        }
        for (name, value) in &headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("send the head");
        // A receiver may answer 413 before reading the whole body and close.
        let _ = stream.write_all(&body);
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        Answer { status, head: head.to_owned(), body: body.to_owned() }
    })
    .await
    .expect("the request thread")
}

/// An `issue_comment` payload on `octo/app#number` by `author`.
pub fn issue_comment(repo: &str, number: u64, author: &str, body: &str) -> String {
    serde_json::json!({
        "action": "created",
        "repository": {"full_name": repo, "html_url": format!("https://github.com/{repo}")},
        "issue": {"number": number, "title": "A bug", "state": "open", "labels": [],
                  "html_url": format!("https://github.com/{repo}/issues/{number}"),
                  "user": {"login": author}},
        "comment": {"id": 1001, "node_id": "IC_kwDO1001", "body": body,
                    "user": {"login": author},
                    "html_url": format!("https://github.com/{repo}/issues/{number}#issuecomment-1001")},
        "sender": {"login": author}
    })
    .to_string()
}

/// Whether `dir` holds a journal with deliveries still pending.
pub fn pending_in(dir: &Path) -> usize {
    loop_store::inbox::read_pending(dir).expect("the journal reads").pending.len()
}
