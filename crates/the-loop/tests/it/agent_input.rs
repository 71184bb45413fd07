//! What the agent receives (issue 17, docs/agent-input.md), through the real binary:
//! `the-loop start --foreground` against loop-sim, real tmux on a private socket
//! directory, and the stand-in harness recording every message it is given.
//!
//! - A failing workflow run on the session's pull request is one CI report naming the
//!   failed job and step, the annotation's `path:line`, the log's last line and the run's
//!   URL, within `routing.ci`'s caps and request budget; a pass on the same head is then
//!   one line. The jobs endpoint answering 500 pastes the event's own excerpt instead.
//! - A review with three inline comments is one paste (review body first, each comment
//!   with its anchor), four deliveries done, a redelivery pastes nothing — by webhook and,
//!   separately, found by the poller.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use loop_sim::test_support::{PATIENCE, last_lines, pastes_logged, read_lines, wait_for_within};
use loop_sim::{AnnotationDraft, Fault, FaultKind, JobDraft, ReviewState, Sim, StepDraft};
use serde_json::Value;

use crate::common::{Cli, ServicePaths, ServiceSite};
use crate::machine::World;

const REPO: &str = World::REPO;
const LABEL: &str = "the-loop: auto-execute";
const ANN: &str = "ann";
const SECRET: &str = "agent-input-secret";
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Which ingress brings GitHub's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ingress {
    Webhooks,
    Poller,
}

/// A running service with a live session on issue #1 and its pull request #2.
struct Site {
    world: World,
    cli: Cli,
    root: PathBuf,
    messages: PathBuf,
    tmux_dir: PathBuf,
    port: u16,
    service: Option<Child>,
    pr: u64,
}

impl Site {
    /// Starts the service (`routing` gets `extra` appended), starts issue #1 and opens its
    /// pull request, and waits until both reached the session.
    fn new(ingress: Ingress, extra: &str) -> Self {
        let world = World::new();
        let issue = world.sim.open_issue(REPO, ANN, "Fix the parser", &[LABEL]).expect("an issue");
        let mut cli = Cli::new();
        let ServicePaths { root, messages, tmux_dir, port } = ServiceSite {
            sim: &world.sim,
            repo: REPO,
            authorized: ANN,
            polling: ingress == Ingress::Poller,
            secret: SECRET,
            routing: extra,
            harness_args: "",
        }
        .write(&mut cli);
        let mut site = Self { world, cli, root, messages, tmux_dir, port, service: None, pr: 0 };
        if ingress == Ingress::Webhooks {
            site.world.sim.set_webhook(Some(loop_sim::WebhookTarget {
                url: format!("http://127.0.0.1:{port}/gh-webhook"),
                secret: Some(SECRET.to_owned()),
            }));
        }
        site.start();
        site.world.sim.comment(REPO, issue, ANN, "the-loop start").expect("a start");
        site.wait_for_pastes(1, "the session to be spawned");
        let body = format!("Closes #{issue}");
        // The poller walks labelled items only; a labelled pull request would be two
        // webhooks (opened, labeled), so it is labelled only for the poller.
        let labels: &[&str] = if ingress == Ingress::Poller { &[LABEL] } else { &[] };
        let cycles = site.lines("poll.cycle");
        site.pr = site
            .world
            .sim
            .open_pull_request(REPO, ANN, "Fix", &body, "issue-1", labels)
            .expect("a pull request");
        match ingress {
            Ingress::Webhooks => {
                site.wait_for_pastes(2, "the pull request to reach the session");
            }
            // Two cycles later the poller has seen the pull request's thread for the
            // first time, so what is written there from now on is new.
            Ingress::Poller => {
                site.wait_for_lines("poll.cycle", cycles + 2, |_| true);
            }
        }
        site
    }

    fn lines(&self, kind: &str) -> usize {
        self.events().iter().filter(|e| e["event"] == kind).count()
    }

    fn start(&mut self) {
        let output = self.cli.cwd().join("service.out");
        self.service = Some(self.cli.start_foreground(&output, PATIENCE, ""));
    }

    fn events(&self) -> Vec<Value> {
        read_lines(&self.root.join("logs/events.jsonl")).values
    }

    /// What the stand-in was given, once it holds `n` messages and the event log says
    /// exactly that many were pasted.
    fn wait_for_pastes(&self, n: usize, what: &str) -> Vec<String> {
        wait_for_within(PATIENCE, LOOK_EVERY, what, || {
            let events = self.events();
            let texts: Vec<String> = read_lines(&self.messages)
                .values
                .iter()
                .filter_map(|m| m["text"].as_str().map(str::to_owned))
                .collect();
            if texts.len() >= n && pastes_logged(&events) >= n {
                return Ok(texts);
            }
            Err(format!("{} messages; events: {}", texts.len(), last_lines(&events)))
        })
    }

    /// The lines of `kind` for which `matches` holds, once there are `n` of them.
    fn wait_for_lines(&self, kind: &str, n: usize, matches: impl Fn(&Value) -> bool) -> Vec<Value> {
        wait_for_within(PATIENCE, LOOK_EVERY, &format!("{n} `{kind}` lines"), || {
            let events = self.events();
            let found: Vec<Value> =
                events.iter().filter(|e| e["event"] == kind && matches(e)).cloned().collect();
            if found.len() >= n { Ok(found) } else { Err(last_lines(&events)) }
        })
    }

    /// Posts a delivery the simulator sent once more, exactly as it was (GitHub's
    /// "Redeliver"), and returns the receiver's status line.
    fn redeliver(&self, delivery: &loop_sim::Delivery) -> String {
        use std::io::{Read as _, Write as _};
        let mut stream =
            std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("the receiver");
        let mut request = format!(
            "POST /gh-webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             User-Agent: GitHub-Hookshot/test\r\nX-GitHub-Event: {}\r\nX-GitHub-Delivery: {}\r\n\
             Content-Length: {}\r\nConnection: close\r\n",
            delivery.event,
            delivery.id,
            delivery.body.len()
        );
        if let Some(signature) = &delivery.signature {
            request.push_str(&format!("X-Hub-Signature-256: {signature}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&delivery.body);
        stream.write_all(request.as_bytes()).expect("the redelivery is sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("the receiver answers");
        answer.lines().next().unwrap_or_default().to_owned()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(mut child) = self.service.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("tmux")
            .arg("kill-server")
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .env_remove("TMUX")
            .stderr(Stdio::null())
            .status();
    }
}

fn failing_job() -> JobDraft {
    let mut log = String::new();
    for n in 0..40 {
        log.push_str(&format!(
            "2026-12-01T10:00:{n:02}.0000000Z \u{1b}[32mcompiling crate {n}\u{1b}[0m\n"
        ));
    }
    log.push_str(
        "2026-12-01T10:01:00.0000000Z \u{1b}[31;1merror: test parser::nested failed\u{1b}[0m\n",
    );
    JobDraft {
        name: "test".into(),
        steps: vec![
            StepDraft { name: "checkout".into(), failed: false },
            StepDraft { name: "cargo test".into(), failed: true },
        ],
        annotations: vec![AnnotationDraft {
            path: "src/parser.rs".into(),
            line: 42,
            level: "failure".into(),
            message: "assertion failed: nested".into(),
        }],
        log,
    }
}

/// The requests the CI evidence cost: the run's jobs, annotations, the log and its
/// redirect.
fn ci_requests(sim: &Sim) -> usize {
    sim.requests()
        .records
        .iter()
        .filter(|r| {
            r.endpoint.contains("/actions/")
                || r.endpoint.contains("/check-runs/")
                || r.endpoint.starts_with("/_sim/job-logs/")
        })
        .count()
}

#[test]
fn a_failing_workflow_run_is_one_ci_report_and_a_pass_after_it_one_line() {
    let site = Site::new(
        Ingress::Webhooks,
        "  ci:\n    maxLogLines: 5\n    maxLogBytes: 400\n    maxRequests: 4\n",
    );
    site.world.sim.clear_requests();
    let before = pastes_logged(&site.events());
    let run = site
        .world
        .sim
        .complete_run(REPO, site.pr, ANN, "CI", vec![failing_job()])
        .expect("a failing run");
    let texts = site.wait_for_pastes(before + 1, "the CI report");
    let report = &texts[before];
    assert!(report.contains("\"job\": \"test\""), "{report}");
    assert!(report.contains("\"step\": \"cargo test\""), "{report}");
    assert!(report.contains("src/parser.rs:42 failure: assertion failed: nested"), "{report}");
    assert!(report.contains("error: test parser::nested failed"), "{report}");
    assert!(report.contains(&format!("/octo/app/actions/runs/{run}")), "{report}");
    assert!(!report.contains('\u{1b}'), "no escapes reach the session:\n{report}");
    assert!(!report.contains("2026-12-01T10:"), "no runner timestamps:\n{report}");
    let tail: Value = {
        let json = &report[report.find("```json").expect("a fenced excerpt") + 7..];
        serde_json::from_str(&json[..json.find("```").expect("its end")]).expect("the report")
    };
    let lines = tail["ci"]["failed"][0]["log_tail"].as_array().expect("a log tail");
    assert!(lines.len() <= 5, "{lines:?}");
    assert!(lines.iter().map(|l| l.as_str().unwrap_or_default().len() + 1).sum::<usize>() <= 400);
    let fetched = site.wait_for_lines("ci.fetched", 1, |_| true);
    assert_eq!(fetched[0]["requests"], 4, "{:?}", fetched[0]);
    assert_eq!(ci_requests(&site.world.sim), 4, "{}", site.world.sim.requests());

    site.world.sim.complete_run(REPO, site.pr, ANN, "CI", vec![]).expect("a passing run");
    let texts = site.wait_for_pastes(4, "the pass");
    assert!(
        texts[3].contains("CI passed on")
            && texts[3].contains("after the failure reported earlier"),
        "{}",
        texts[3]
    );
    assert_eq!(ci_requests(&site.world.sim), 4, "a pass reads nothing");
}

#[test]
fn the_jobs_endpoint_failing_pastes_the_events_own_excerpt_and_the_delivery_is_done() {
    let site = Site::new(Ingress::Webhooks, "");
    site.world.sim.inject(Fault {
        kind: FaultKind::ServerError { status: 500 },
        times: 1,
        path_contains: Some("/jobs".into()),
    });
    let before = pastes_logged(&site.events());
    site.world
        .sim
        .complete_run(REPO, site.pr, ANN, "CI", vec![failing_job()])
        .expect("a failing run");
    let texts = site.wait_for_pastes(before + 1, "the excerpt");
    let pasted = &texts[before];
    assert!(pasted.contains("\"workflow_run\": {"), "{pasted}");
    assert!(pasted.contains("\"conclusion\": \"failure\""), "{pasted}");
    assert!(!pasted.contains("log_tail"), "{pasted}");
    let failed = site.wait_for_lines("ci.fetch_failed", 1, |_| true);
    let key = failed[0]["delivery_id"].clone();
    site.wait_for_lines("dispatch.succeeded", 1, |e| e["delivery_id"] == key);
}

/// Reviews the pull request with three inline comments and checks the one paste.
fn review_is_one_paste(site: &Site) {
    let before = pastes_logged(&site.events());
    let inline = [
        ("src/parser.rs", 12, "rename this"),
        ("src/parser.rs", 40, "off by one"),
        ("README.md", 3, "typo"),
    ];
    site.world
        .sim
        .review(
            REPO,
            site.pr,
            ANN,
            ReviewState::ChangesRequested,
            "Three things, see inline",
            &inline,
        )
        .expect("a review");
    site.wait_for_pastes(before + 1, "the review");
    let batched = site.wait_for_lines("dispatch.batched", 4, |_| true);
    let keys: Vec<Value> = batched.iter().map(|e| e["delivery_id"].clone()).collect();
    let done = site.wait_for_lines("dispatch.succeeded", 4, |e| keys.contains(&e["delivery_id"]));
    assert_eq!(done.len(), 4, "each delivery is recorded done on its own");
    assert_eq!(pastes_logged(&site.events()), before + 1, "one paste");
    let texts = site.wait_for_pastes(before + 1, "the review");
    assert_eq!(texts.len(), before + 1, "one message: {texts:#?}");
    let paste = &texts[before];
    let body_at = paste.find("Three things, see inline").unwrap_or_else(|| panic!("{paste}"));
    for (path, line, body) in inline {
        let at = paste.find(body).unwrap_or_else(|| panic!("{body} in {paste}"));
        assert!(body_at < at, "the review body comes first:\n{paste}");
        assert!(paste.contains(&format!("\"at\": \"{path}:{line}\"")), "{paste}");
    }
}

#[test]
fn a_review_with_three_inline_comments_sent_as_four_webhooks_is_one_paste_and_a_redelivery_pastes_nothing()
 {
    let site = Site::new(Ingress::Webhooks, "");
    review_is_one_paste(&site);
    let pastes = pastes_logged(&site.events());
    let delivery = site
        .world
        .sim
        .deliveries()
        .into_iter()
        .rfind(|d| d.event == "pull_request_review_comment")
        .expect("an inline comment's webhook");
    let status = site.redeliver(&delivery);
    assert!(status.contains(" 202 "), "the redelivery is accepted: {status}");
    site.wait_for_lines("dispatch.dropped", 1, |e| {
        e["reason"] == "duplicate-delivery" && e["gh_event"] == "pull_request_review_comment"
    });
    assert_eq!(pastes_logged(&site.events()), pastes, "nothing more was pasted");
}

#[test]
fn a_review_with_three_inline_comments_found_by_the_poller_is_one_paste() {
    let site = Site::new(Ingress::Poller, "");
    review_is_one_paste(&site);
}
