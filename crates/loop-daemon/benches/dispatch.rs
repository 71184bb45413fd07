//! Dispatch latency (SPEC §7, issue 6; budget p50 ≤ 5 ms, p99 ≤ 10 ms): a signed
//! `issue_comment` webhook POSTed to the real receiver → judged → dispatched → pasted into
//! a live session → recorded by the stand-in harness. Run with `scripts/bench-dispatch.sh` (it builds the stand-in in
//! release and names it in `LOOP_STAND_IN`) or `cargo bench -p loop-daemon --bench
//! dispatch`.
//!
//! The world: one labelled issue on the simulated GitHub, started (`the-loop start`), so
//! its session runs the stand-in in a private tmux server. Then 200 comments by the
//! authorized user, one at a time, each timed from the start of its POST until the
//! stand-in's record holds it. Reactions are off: they are best-effort calls that never
//! delay a paste, and the simulator would only add noise. The load average is printed
//! before and after: on a shared machine the tail is scheduling.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::{Dispatcher, DispatcherParts};
use loop_daemon::live_config::{Hosted, LiveConfig};
use loop_daemon::receiver::{Receiver, Secret};
use loop_github::{GithubClient, GithubSettings, TokenSource};
use loop_sessions::{CommandHarness, Tmux, TmuxSettings, TmuxSocket};
use loop_sim::{Sim, WebhookTarget};
use loop_store::{EventLog, StateLayout, StateStore};

const SAMPLES: usize = 200;
const WARM_UP: usize = 10;
const REPO: &str = "octo/app";
const OWNER: &str = "octocat";
const SECRET: &str = "bench-secret";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let before = load_average();
    let samples = runtime.block_on(run());
    report(samples, &before, &load_average());
}

async fn run() -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path();
    let stand_in = std::env::var_os("LOOP_STAND_IN").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/loop-stand-in")
    });
    assert!(stand_in.exists(), "{} is missing: run scripts/bench-dispatch.sh", stand_in.display());
    let sim = Sim::start().await.expect("the simulator starts");
    sim.create_repo(REPO).expect("a repo");
    for dir in ["work", "scratch"] {
        std::fs::create_dir_all(root.join(dir)).expect("a directory");
    }
    let config_path = root.join("cli-config.yaml");
    std::fs::write(
        &config_path,
        format!(
            "state:\n  root: {state}\nintegrations:\n  github:\n    api:\n      baseUrl: {base}\nrouting:\n  enabled: true\n  authorizedUsers: [{OWNER}]\n  spawnWorkdir: {work}\n  reactions:\n    enabled: false\n",
            state = root.join("state").display(),
            base = sim.url(),
            work = root.join("work").display(),
        ),
    )
    .expect("the config");
    let (source, _) = ConfigSource::open(&config_path).expect("the config loads");
    let layout = StateLayout::new(root.join("state"));
    // The process's one writer, as the service has it.
    let events = EventLog::new(layout.event_log(), "gh-webhook").with_writer();
    let store = StateStore::new(layout.clone(), events);
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(sim.url());
    let tokens = TokenSource::new("github.com", &[], [("GITHUB_TOKEN".to_owned(), "t".to_owned())]);
    let mut tmux =
        TmuxSettings::new(TmuxSocket::Path(root.join("tmux.sock")), root.join("scratch"));
    tmux.config_file = Some(PathBuf::from("/dev/null"));
    let record = root.join("messages.jsonl");
    let harness = CommandHarness {
        name: "stand-in".into(),
        fresh: vec![
            stand_in.display().to_string(),
            "--record".into(),
            record.display().to_string(),
            "--session-id".into(),
            "{session_id}".into(),
        ],
        resume: None,
        transcript: Some(record.display().to_string()),
    };
    let dispatcher = Dispatcher::open(DispatcherParts {
        config: source.current().clone(),
        store: store.clone(),
        github: Some(GithubClient::new(settings, tokens).expect("a client")),
        tmux: Arc::new(Tmux::new(tmux)),
        harness: Arc::new(harness),
        claude_files: None,
        plugin: None,
    })
    .await
    .expect("the dispatcher opens");
    let hosted = Hosted { receiver: true, ..Hosted::default() };
    let receiver = Receiver::new(
        LiveConfig::new(source, store.events().clone(), hosted),
        store.clone(),
        Secret::from_value(Some(SECRET)),
    )
    .expect("the receiver opens")
    .with_dispatch(Arc::new(dispatcher.clone()))
    .with_existence(Arc::new(dispatcher.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port 0");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(receiver.run(listener, std::future::pending()));
    sim.set_webhook(Some(WebhookTarget {
        url: format!("http://{addr}/gh-webhook"),
        secret: Some(SECRET.to_owned()),
    }));

    let number =
        sim.open_issue(REPO, OWNER, "Benchmark", &["the-loop: auto-execute"]).expect("an issue");
    sim.comment(REPO, number, OWNER, "the-loop start").expect("a start");
    wait_for_lines(&record, 1).await;
    sim.set_webhook(None);

    let mut samples = Vec::with_capacity(SAMPLES);
    for n in 0..WARM_UP + SAMPLES {
        let body = comment(number, 10_000 + n as u64);
        let started = Instant::now();
        post(addr, &format!("bench-{n}"), &body).await;
        wait_for_lines(&record, n + 2).await;
        if n >= WARM_UP {
            samples.push(started.elapsed());
        }
    }
    let _ = std::process::Command::new("tmux")
        .arg("-S")
        .arg(root.join("tmux.sock"))
        .arg("kill-server")
        .status();
    samples
}

/// An `issue_comment` delivery by the authorized user, shaped like GitHub's.
fn comment(number: u64, id: u64) -> String {
    serde_json::json!({
        "action": "created",
        "repository": {"full_name": REPO, "html_url": format!("https://github.com/{REPO}")},
        "issue": {"number": number, "title": "Benchmark", "state": "open",
                  "labels": [{"name": "the-loop: auto-execute"}],
                  "html_url": format!("https://github.com/{REPO}/issues/{number}"),
                  "user": {"login": OWNER}},
        "comment": {"id": id, "node_id": format!("IC_bench{id}"), "body": format!("instruction {id}"),
                    "user": {"login": OWNER},
                    "html_url": format!("https://github.com/{REPO}/issues/{number}#issuecomment-{id}")},
        "sender": {"login": OWNER},
    })
    .to_string()
}

/// POSTs a signed delivery and reads the answer.
async fn post(addr: SocketAddr, id: &str, body: &str) {
    let signature = loop_sim::webhook::sign(SECRET.as_bytes(), body.as_bytes());
    let request = format!(
        "POST /gh-webhook HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {id}\r\nX-Hub-Signature-256: {signature}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).expect("the receiver listens");
        stream.write_all(request.as_bytes()).expect("sent");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    })
    .await
    .expect("the request thread");
}

/// Polls the stand-in's record every 100 µs until it holds `lines` messages (30 s at
/// most), on a thread of its own: tokio's timer ticks in milliseconds and would round every
/// sample up.
async fn wait_for_lines(record: &Path, lines: usize) {
    let record = record.to_owned();
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let held = std::fs::read(&record)
                .map_or(0, |bytes| bytes.iter().filter(|b| **b == b'\n').count());
            if held >= lines {
                return;
            }
            assert!(Instant::now() < deadline, "the harness recorded {held} of {lines} messages");
            std::thread::sleep(Duration::from_micros(100));
        }
    })
    .await
    .expect("the polling thread");
}

/// `/proc/loadavg`'s three averages ("?" where it cannot be read).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "?".to_owned(),
        |text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

fn report(mut samples: Vec<Duration>, load_before: &str, load_after: &str) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "webhook POST -> message recorded by the stand-in, {} samples: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (budget p50 <= 5 ms, p99 <= 10 ms); load average {load_before} before, {load_after} after",
        samples.len(),
        ms(at(0.50)),
        ms(at(0.99)),
        ms(at(1.0)),
    );
}
