//! `the-loop start --foreground`: the real binary as a service process — nothing enabled,
//! the pidfile lock, TERM (idle and busy), and `kill -9` between the 202 and processing.
//!
//! The crash test holds processing with the hidden `--hold-processing` flag, so the kill
//! lands deterministically after the delivery was journalled and acknowledged and before
//! anything processed it; no test relies on timing.

use loop_sim::test_support::{PATIENCE, last_lines, read_lines, wait_for};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use crate::common::Cli;

const SECRET: &str = "start-test-secret";
const SECRET_ENV: &str = "THE_LOOP_GH_WEBHOOK_SECRET";

/// A test site: a private cwd with a config enabling the receiver on a free port.
///
/// The config refuses port 0, so the port is one the OS just handed out on
/// `127.0.0.1:0` and released; the service prints the address it bound.
fn site() -> (Cli, PathBuf) {
    site_taking(None)
}

/// [`site`] with the inbox's ceiling at `inbox_max_deliveries` (the default otherwise).
fn site_taking(inbox_max_deliveries: Option<usize>) -> (Cli, PathBuf) {
    let mut cli = Cli::new();
    let root = cli.cwd().join("state");
    let port = crate::common::free_port();
    let ceiling =
        inbox_max_deliveries.map_or_else(String::new, |n| format!("    inboxMaxDeliveries: {n}\n"));
    cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "state:\n  root: {}\nrouting:\n  authorizedUsers: [octocat]\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\n{ceiling}service:\n  enabled: false\n",
            root.display()
        ),
    );
    cli.env(SECRET_ENV, SECRET);
    (cli, root)
}

/// A running `the-loop start --foreground`, its address read from its stderr.
struct Service {
    child: Child,
    addr: SocketAddr,
    /// Everything it wrote to stderr so far (a thread keeps draining the pipe).
    stderr: Arc<Mutex<String>>,
    /// The draining thread; it ends when the process closes stderr (at exit).
    drain: std::thread::JoinHandle<()>,
}

impl Service {
    fn start(cli: &Cli, extra: &[&str]) -> Self {
        let mut args = vec!["start", "--foreground"];
        args.extend_from_slice(extra);
        let mut child = cli
            .command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the built the-loop binary starts");
        let pipe = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = Arc::clone(&stderr);
        let drain = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("receiving webhooks at http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = tx.send(addr);
                }
                seen.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let Ok(addr) = rx.recv_timeout(PATIENCE) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the service never said where it listens:\n{}", stderr.lock().unwrap());
        };
        Self { child, addr: addr.parse().expect("a socket address"), stderr, drain }
    }

    /// POSTs a signed `issue_comment` delivery; returns the HTTP status.
    fn deliver(&self, delivery_id: &str) -> u16 {
        let body = serde_json::json!({
            "action": "created",
            "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
            "issue": {"number": 7, "title": "A bug", "labels": []},
            "comment": {"id": 1, "node_id": "IC_1", "body": "hello", "user": {"login": "octocat"}},
            "sender": {"login": "octocat"}
        })
        .to_string();
        let signature = loop_sim::webhook::sign(SECRET.as_bytes(), body.as_bytes());
        let mut stream = TcpStream::connect(self.addr).expect("connect to the receiver");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let request = format!(
            "POST /gh-webhook HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {delivery_id}\r\nX-Hub-Signature-256: {signature}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    /// Sends SIGTERM and waits for the process to exit.
    fn terminate(mut self) -> (ExitStatus, String) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("a live pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send TERM");
        let status = self.child.wait().expect("the service exits");
        let _ = self.drain.join();
        let stderr = self.stderr.lock().unwrap().clone();
        (status, stderr)
    }

    /// `kill -9`: no chance to flush, close or clean up.
    fn kill(mut self) {
        self.child.kill().expect("send SIGKILL");
        let _ = self.child.wait();
    }
}

/// Event-log lines named `name` with this delivery id.
fn lines(root: &Path, name: &str, delivery_id: &str) -> usize {
    read_lines(&root.join("logs/events.jsonl"))
        .into_iter()
        .filter(|e| e["event"] == name && e["delivery_id"] == delivery_id)
        .count()
}

/// Waits until the event log holds a `name` line for the delivery.
#[track_caller]
fn wait_for_line(root: &Path, name: &str, delivery_id: &str) {
    wait_for(&format!("a `{name}` line for {delivery_id}"), || {
        let events = read_lines(&root.join("logs/events.jsonl")).values;
        if events.iter().any(|e| e["event"] == name && e["delivery_id"] == delivery_id) {
            Ok(())
        } else {
            Err(last_lines(&events))
        }
    });
}

/// How many `name` lines each delivery id has in the event log.
fn lines_by_delivery(root: &Path, name: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for event in read_lines(&root.join("logs/events.jsonl")) {
        if event["event"] == name
            && let Some(id) = event["delivery_id"].as_str()
        {
            *counts.entry(id.to_owned()).or_default() += 1;
        }
    }
    counts
}

fn pending(root: &Path) -> usize {
    loop_store::inbox::read_pending(&root.join("local/inbox")).unwrap().pending.len()
}

#[test]
fn start_with_nothing_enabled_says_so_and_exits_2() {
    let cli = Cli::new();
    cli.run(["start", "--foreground"])
        .expect_code(2)
        .expect_stderr("nothing to start")
        .expect_stderr("webhooks.ghWebhook.enabled: true");
}

#[test]
fn a_control_plane_beyond_loopback_needs_exposed_and_a_token_or_start_refuses() {
    let (cli, root) = site();
    let config = |service: &str| {
        format!(
            "state:\n  root: {}\nwebhooks:\n  ghWebhook:\n    enabled: true\nservice:\n{service}",
            root.display()
        )
    };
    cli.write(".the-loop/cli-config.yaml", &config("  host: 0.0.0.0\n"));
    cli.run(["start", "--foreground"])
        .expect_code(2)
        .expect_stderr("service.host: `0.0.0.0` is beyond loopback");
    cli.write(".the-loop/cli-config.yaml", &config("  host: 0.0.0.0\n  exposed: true\n"));
    cli.run(["start", "--foreground"])
        .expect_code(2)
        .expect_stderr("without a token: the variable `THE_LOOP_SERVICE_TOKEN` is empty or missing")
        .expect_stderr("hint: export `THE_LOOP_SERVICE_TOKEN`");
}

#[test]
fn start_without_a_secret_refuses_and_names_the_variable() {
    let (mut cli, _) = site();
    cli.unset(SECRET_ENV);
    cli.run(["start", "--foreground"])
        .expect_code(2)
        .expect_stderr(SECRET_ENV)
        .expect_stderr("allowUnsigned: true");
}

#[test]
fn a_second_receiver_is_refused_naming_the_holder_and_term_stops_the_first_cleanly() {
    let (cli, root) = site();
    let first = Service::start(&cli, &[]);
    let pid = first.child.id();
    cli.run(["start", "--foreground"])
        .expect_code(1)
        .expect_stderr("already running")
        .expect_stderr(&format!("pid {pid}"));
    assert_eq!(first.deliver("t-1"), 202);
    wait_for_line(&root, "routing.routed", "t-1");
    let (status, stderr) = first.terminate();
    assert_eq!(status.code(), Some(0), "TERM is a clean stop:\n{stderr}");
    assert!(stderr.contains("webhook receiver stopped"), "{stderr}");
    assert!(!root.join("gh-webhook.pid").exists(), "the pidfile is released");
    // The lock is free again.
    let again = Service::start(&cli, &[]);
    assert_eq!(again.terminate().0.code(), Some(0));
}

/// An idle service stops on TERM with nothing left waiting: no part of it is given up
/// on (how long the stop takes is measured by `scripts/bench-receiver.sh`).
#[test]
fn an_idle_service_stops_on_term_without_waiting_out_its_grace() {
    let (cli, root) = site();
    let service = Service::start(&cli, &[]);
    assert_eq!(service.deliver("idle-1"), 202);
    wait_for_line(&root, "routing.routed", "idle-1");
    wait_for("the delivery to be marked processed", || match pending(&root) {
        0 => Ok(()),
        n => Err(format!("{n} pending")),
    });
    let (status, stderr) = service.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("did not stop in time"), "{stderr}");
    assert!(!stderr.contains("still in flight"), "{stderr}");
    assert!(stderr.contains("webhook receiver stopped"), "{stderr}");
    assert_eq!(pending(&root), 0, "nothing is left to replay");
}

#[test]
fn kill_9_between_the_202_and_processing_loses_nothing_and_processes_once() {
    let (cli, root) = site();
    let held = Service::start(&cli, &["--hold-processing"]);
    assert_eq!(held.deliver("k-1"), 202);
    assert_eq!(pending(&root), 1, "the 202 came after the journal held it");
    held.kill();
    assert_eq!(lines(&root, "webhook.received", "k-1"), 0, "killed before processing");

    let restarted = Service::start(&cli, &[]);
    wait_for_line(&root, "routing.routed", "k-1");
    let (status, stderr) = restarted.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("replaying 1 journalled deliveries"), "{stderr}");
    assert_eq!(pending(&root), 0, "marked processed before the clean stop");

    // A further restart has nothing to replay.
    let again = Service::start(&cli, &[]);
    let (_, stderr) = again.terminate();
    assert!(!stderr.contains("replaying"), "{stderr}");
    assert_eq!(lines(&root, "webhook.received", "k-1"), 1, "processed exactly once");
    assert_eq!(lines(&root, "routing.routed", "k-1"), 1);
}

/// A busy service stops on TERM: the delivery in flight finishes, the rest stay in the
/// journal, and the next start processes them — none lost, none processed twice. (How
/// long the stop takes is for `scripts/bench-receiver.sh`; the busy part is a backlog
/// replayed at start, journalled beforehand by a service holding its processing.)
#[test]
fn a_busy_service_stops_on_term_and_the_next_start_processes_the_rest_once() {
    const BACKLOG: usize = 2000;
    // Above the default ceiling: a backlog the stop surely interrupts.
    let (cli, root) = site_taking(Some(BACKLOG));
    let held = Service::start(&cli, &["--hold-processing"]);
    let ids: Vec<String> = (0..BACKLOG).map(|n| format!("busy-{n}")).collect();
    for id in &ids {
        assert_eq!(held.deliver(id), 202, "{id}");
    }
    assert_eq!(held.terminate().0.code(), Some(0));
    assert_eq!(pending(&root), BACKLOG);

    let busy = Service::start(&cli, &[]);
    wait_for_line(&root, "webhook.received", &ids[0]);
    let (status, stderr) = busy.terminate();
    assert_eq!(status.code(), Some(0), "TERM is a clean stop:\n{stderr}");
    assert!(!stderr.contains("did not stop in time"), "{stderr}");
    let left = pending(&root);
    assert!(left > 0, "TERM came while the backlog was being processed");
    let processed = lines_by_delivery(&root, "webhook.received");
    assert!(processed.values().all(|n| *n == 1), "each processed once before the stop");
    assert_eq!(processed.len() + left, BACKLOG, "each delivery processed or still journalled");

    let next = Service::start(&cli, &[]);
    wait_for("the rest to be processed", || match pending(&root) {
        0 => Ok(()),
        n => Err(format!("{n} pending")),
    });
    let (status, stderr) = next.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("replaying {left} journalled deliveries")), "{stderr}");
    let processed = lines_by_delivery(&root, "webhook.received");
    for id in &ids {
        assert_eq!(processed.get(id), Some(&1), "{id} processed exactly once");
    }
}
