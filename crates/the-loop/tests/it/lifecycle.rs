//! `start` (detached), `status`, `stop`, `restart` through the real binary: the service
//! runs in its own session with its output in `<root>/logs/service.out`; liveness is the
//! pidfile lock; a stale pidfile neither blocks a start nor gets its pid signalled.
//!
//! Every site stops its service when dropped, so a failed assertion leaves no process.

use loop_sim::test_support::{PATIENCE, wait_for};
use std::path::PathBuf;
use std::process::{Child, Command};

use crate::common::{Cli, Run};
use crate::machine::World;

const SECRET_ENV: &str = "THE_LOOP_GH_WEBHOOK_SECRET";

/// A private cwd whose config enables the receiver on `port`; stops its service on drop.
struct Site {
    cli: Cli,
    root: PathBuf,
}

impl Site {
    /// The receiver on a port the OS just handed out and released (the config refuses 0).
    fn new() -> Self {
        let port = crate::common::free_port();
        Self::on_port(port)
    }

    fn on_port(port: u16) -> Self {
        let mut cli = Cli::new();
        let root = cli.cwd().join("state");
        cli.write(
            ".the-loop/cli-config.yaml",
            &format!(
                "state:\n  root: {}\nrouting:\n  authorizedUsers: [octocat]\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\nservice:\n  enabled: false\n",
                root.display()
            ),
        );
        cli.env(SECRET_ENV, "lifecycle-secret");
        Self { cli, root }
    }

    fn run(&self, args: &[&str]) -> Run {
        self.cli.run(args)
    }

    fn pidfile(&self) -> PathBuf {
        self.root.join("gh-webhook.pid")
    }

    /// The pid `status --json` reports for the receiver.
    fn receiver_pid(&self) -> Option<u32> {
        let run = self.run(&["status", "--json"]);
        let status: serde_json::Value =
            serde_json::from_str(&run.stdout).expect("status --json is JSON");
        status["services"][0]["pid"].as_u64().map(|pid| pid as u32)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.cli.run(["stop", "--timeout", "10"]);
    }
}

/// Whether `pid` is gone (or a zombie nobody reaped yet: it runs nothing).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[track_caller]
fn wait_until_gone(pid: u32) {
    wait_for(
        &format!("pid {pid} to end"),
        || if gone(pid) { Ok(()) } else { Err("still running") },
    );
}

#[test]
fn start_detaches_status_says_running_a_second_start_names_the_pid_and_stop_ends_it() {
    let site = Site::new();
    site.run(&["start"]).expect_code(0).expect_stderr("started the service (pid");
    let pid = site.receiver_pid().expect("the receiver runs after start returns");
    site.run(&["status"])
        .expect_code(0)
        .expect_stdout(&format!("gh-webhook  running (pid {pid}) [enabled]"));
    site.run(&["start"])
        .expect_code(1)
        .expect_stderr("already running")
        .expect_stderr(&format!("pid {pid}"));

    site.run(&["stop"]).expect_code(0).expect_stderr(&format!("gh-webhook  stopped (pid {pid})"));
    site.run(&["status"]).expect_code(1).expect_stdout("gh-webhook  stopped [enabled]");
    wait_until_gone(pid);
    let log = std::fs::read_to_string(site.root.join("logs/service.out")).expect("the service log");
    assert!(log.contains("receiving webhooks at"), "{log}");
    assert!(log.contains("the service stopped"), "a clean stop on TERM:\n{log}");
}

#[test]
fn the_detached_service_runs_in_a_session_of_its_own() {
    let site = Site::new();
    site.run(&["start"]).expect_code(0);
    let pid = site.receiver_pid().expect("running");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the service's stat");
    // Fields after the command name: state ppid pgrp session …
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    assert_eq!(fields[3], pid.to_string(), "it leads its own session: {stat}");
}

#[test]
fn a_stale_pidfile_blocks_nothing_and_its_pid_is_never_signalled() {
    let site = Site::new();
    std::fs::create_dir_all(&site.root).unwrap();
    // A pidfile nobody holds, naming a live process: this test.
    std::fs::write(site.pidfile(), format!("{}\n", std::process::id())).unwrap();
    site.run(&["status"]).expect_code(1).expect_stdout("gh-webhook  stopped");
    site.run(&["stop"]).expect_code(0).expect_stderr("gh-webhook  not running");
    site.run(&["start"]).expect_code(0);
    let pid = site.receiver_pid().expect("running despite the stale file");
    assert_ne!(pid, std::process::id());
    site.run(&["stop"]).expect_code(0);
}

#[test]
fn stop_gives_up_with_exit_1_on_a_holder_that_outlives_the_timeout() {
    let site = Site::new();
    std::fs::create_dir_all(&site.root).unwrap();
    // `flock` holds the lock and runs a shell that ignores TERM, writing its own pid.
    let mut holder: Child = Command::new("flock")
        .arg("-n")
        .arg(site.pidfile())
        .args(["sh", "-c", "trap '' TERM; echo $$ > \"$0\"; exec sleep 600"])
        .arg(site.pidfile())
        .spawn()
        .expect("flock(1) runs");
    let pid: u32 = wait_for("the holder to write its pid", || {
        let text = std::fs::read_to_string(site.pidfile()).unwrap_or_default();
        text.trim().parse().map_err(|_| format!("the pidfile holds {text:?}"))
    });
    site.run(&["stop", "--timeout", "1"])
        .expect_code(1)
        .expect_stderr(&format!("still running (pid {pid}) after 1s"));
    site.run(&["status"]).expect_code(0).expect_stdout(&format!("running (pid {pid})"));
    site.run(&["start"]).expect_code(1).expect_stderr("already running");

    let sleeper = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process(sleeper, rustix::process::Signal::KILL).expect("kill the holder");
    let _ = holder.wait();
    site.run(&["status"]).expect_code(1);
}

#[test]
fn a_start_that_fails_in_the_child_reports_its_output_and_the_log_path() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let site = Site::on_port(taken.local_addr().unwrap().port());
    site.run(&["start"])
        .expect_code(1)
        .expect_stderr("the service did not start")
        .expect_stderr("cannot listen on 127.0.0.1")
        .expect_stderr("logs/service.out");
    site.run(&["status"]).expect_code(1);
}

#[test]
fn start_refuses_a_misconfigured_ingress_before_spawning_anything() {
    let mut site = Site::new();
    site.cli.unset(SECRET_ENV);
    site.run(&["start"]).expect_code(2).expect_stderr(SECRET_ENV);
    assert!(!site.root.join("logs/service.out").exists(), "nothing was spawned");
    site.run(&["status"]).expect_code(1).expect_stdout("misconfigured");
}

#[test]
fn restart_replaces_the_running_service() {
    let site = Site::new();
    site.run(&["start"]).expect_code(0);
    let first = site.receiver_pid().expect("running");
    site.run(&["restart"]).expect_code(0).expect_stderr("stopping:").expect_stderr("starting:");
    let second = site.receiver_pid().expect("running again");
    assert_ne!(first, second);
    wait_until_gone(first);
}

#[test]
fn status_json_reports_each_ingress_and_the_verdict() {
    let site = Site::new();
    let run = site.run(&["status", "--json"]);
    run.expect_code(1);
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(status["ok"], false);
    assert_eq!(status["services"][0]["service"], "gh-webhook");
    assert_eq!(status["services"][0]["state"], "stopped");
    assert_eq!(status["services"][1]["service"], "poller");
    assert_eq!(status["services"][1]["state"], "disabled");
}

#[test]
fn one_service_hosts_the_receiver_and_the_poller_and_status_shows_the_last_cycle() {
    let world = World::new();
    let sim = &world.sim;
    let port = crate::common::free_port();
    let mut site = Site::on_port(port);
    site.cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "state:\n  root: {}\nrepositories: [octo/app]\nrouting:\n  authorizedUsers: [octocat]\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\nservice:\n  enabled: false\npolling:\n  enabled: true\n  intervalSeconds: 1\nintegrations:\n  github:\n    api:\n      baseUrl: {}\n",
            site.root.display(),
            sim.url()
        ),
    );
    site.cli.env("GH_TOKEN", "test-token");
    site.run(&["start"]).expect_code(0).expect_stderr("gh-webhook, poller");
    let status = wait_for("a poll cycle in the status", || {
        let run = site.run(&["status", "--json"]);
        let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        if status["services"][1]["lastCycleAt"].is_null() { Err(run) } else { Ok(status) }
    });
    assert_eq!(status["ok"], true);
    let (receiver, poller) = (&status["services"][0]["pid"], &status["services"][1]["pid"]);
    assert!(receiver.is_u64() && receiver == poller, "one process hosts both: {status}");
    site.run(&["status"]).expect_code(0).expect_stdout("last cycle: ");
    let metrics = http_get(port, "/metrics");
    assert!(!metrics.contains("the_loop_poll_cycle_duration_seconds_count 0\n"), "{metrics}");
    assert!(
        metrics.contains("the_loop_github_requests_total{host=\"github.com\",status=\"200\"}"),
        "{metrics}"
    );
    site.run(&["stop"]).expect_code(0).expect_stderr("poller      stopped");
    site.run(&["status"]).expect_code(1).expect_stdout("before it stopped");
}

/// `GET path` on 127.0.0.1:`port`; the whole answer (status line, headers, body).
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn the_service_answers_metrics_on_the_receivers_port_and_counts_decided_deliveries() {
    let port = crate::common::free_port();
    let site = Site::on_port(port);
    site.cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "state:\n  root: {}\nrouting:\n  enabled: true\n  authorizedUsers: [octocat]\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\nservice:\n  enabled: false\n",
            site.root.display()
        ),
    );
    site.run(&["start"]).expect_code(0);
    // A comment by an authorized user on an issue without the label: refused by the
    // spawn policy (released: a later label may arm it), which is no failure.
    let body = serde_json::json!({
        "action": "created",
        "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
        "issue": {"number": 7, "title": "A bug", "labels": [], "html_url": "https://github.com/octo/app/issues/7"},
        "comment": {"id": 1, "node_id": "IC_1", "body": "hello", "user": {"login": "octocat"}},
        "sender": {"login": "octocat"}
    })
    .to_string();
    let post = |delivery: &str, signature: &str| {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        write!(
            stream,
            "POST /gh-webhook HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {delivery}\r\nX-Hub-Signature-256: {signature}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    // Refused at the front door: counted as rejected, never judged.
    let forged = loop_sim::webhook::sign(b"not-the-secret", body.as_bytes());
    let answer = post("m-0", &forged);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let answer = post("m-1", &loop_sim::webhook::sign(b"lifecycle-secret", body.as_bytes()));
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let metrics = wait_for("the accepted delivery to be counted and processed", || {
        let answer = http_get(port, "/metrics");
        // Counted, and marked processed in the journal.
        if answer.contains("the_loop_deliveries_total{outcome=\"refused\"")
            && answer.contains("the_loop_inbox_depth 0\n")
        {
            Ok(answer)
        } else {
            Err(answer)
        }
    });
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    assert!(
        metrics
            .contains("the_loop_deliveries_total{outcome=\"refused\",reason=\"spawn-policy\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("outcome=\"failed\""), "{metrics}");
    assert!(
        metrics.contains(
            "the_loop_deliveries_total{outcome=\"rejected\",reason=\"invalid-signature\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("# TYPE the_loop_dispatch_latency_seconds histogram"), "{metrics}");
    assert!(metrics.contains("the_loop_live_sessions 0"), "{metrics}");
    site.run(&["explain", "m-1"])
        .expect_code(0)
        .expect_stdout("=> refused: dropped: no live session, and the work item is not armed");
}

/// The acceptance path, through the binary only: `config init` → edit → `start` →
/// `status` 0 → simulated GitHub activity → `explain` names why a comment was refused →
/// `stop` → `status` 1 → no process left.
#[test]
fn from_config_init_to_a_refused_comment_explained_and_nothing_left_running() {
    let world = World::new();
    let sim = &world.sim;
    let issue = sim.open_issue("octo/app", "octocat", "A bug", &[]).unwrap();
    let port = crate::common::free_port();
    let site = Site::on_port(port);
    std::fs::remove_file(site.cli.cwd().join(".the-loop/cli-config.yaml")).unwrap();
    site.run(&["config", "init"]).expect_code(0);
    // The edit an operator makes: the state root, who may act, the receiver's port.
    site.cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "version: \"0.5.0\"\nstate:\n  root: {}\nrepositories: [octo/app]\nrouting:\n  enabled: true\n  authorizedUsers: [octocat]\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\nservice:\n  enabled: false\nintegrations:\n  github:\n    api:\n      baseUrl: {}\n",
            site.root.display(),
            sim.url()
        ),
    );
    site.run(&["config", "check"]).expect_code(0);
    site.run(&["start"]).expect_code(0);
    site.run(&["status"]).expect_code(0);
    let pid = site.receiver_pid().expect("running");

    sim.set_webhook(Some(loop_sim::WebhookTarget {
        url: format!("http://127.0.0.1:{port}/gh-webhook"),
        secret: Some("lifecycle-secret".to_owned()),
    }));
    sim.comment("octo/app", issue, "mallory", "the-loop start").unwrap();
    world.block_on(sim.webhooks_settled());
    let delivery = sim
        .deliveries()
        .into_iter()
        .rev()
        .find(|d| d.event == "issue_comment")
        .expect("a delivery");
    let run = wait_for("the refusal in the event log", || {
        let run = site.run(&["explain", &delivery.id]);
        if run.stdout.contains("=> refused") { Ok(run) } else { Err(run) }
    });
    run.expect_stdout("@mallory is not in `routing.authorizedUsers`");

    site.run(&["stop"]).expect_code(0);
    site.run(&["status"]).expect_code(1);
    wait_until_gone(pid);
}

#[test]
fn int_stops_a_foreground_service_hosting_both_ingresses_cleanly() {
    let world = World::new();
    let sim = &world.sim;
    let port = crate::common::free_port();
    let mut site = Site::on_port(port);
    site.cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "state:\n  root: {}\nrepositories: [octo/app]\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\nservice:\n  enabled: false\npolling:\n  enabled: true\nintegrations:\n  github:\n    api:\n      baseUrl: {}\n",
            site.root.display(),
            sim.url()
        ),
    );
    site.cli.env("GH_TOKEN", "test-token");
    let log = site.cli.cwd().join("foreground.out");
    let mut child = site.cli.start_foreground(&log, PATIENCE, "");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("send INT");
    let status = child.wait().expect("the service exits");
    let output = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{output}");
    assert!(
        output.contains("webhook receiver stopped") && output.contains("the service stopped"),
        "{output}"
    );
    assert!(
        !site.root.join("gh-webhook.pid").exists() && !site.root.join("poll.pid").exists(),
        "locks released"
    );
}
