//! Dispatch latency (SPEC §7, issue 6; budget p50 ≤ 5 ms, p99 ≤ 10 ms): a signed
//! `issue_comment` webhook POSTed to the real receiver → judged → dispatched → pasted into
//! a live session → recorded by the stand-in harness. Run with `scripts/bench-dispatch.sh`
//! (it builds the stand-in in release and names it in `LOOP_STAND_IN`) or `cargo bench -p
//! loop-daemon --bench dispatch`.
//!
//! Two worlds side by side, each one labelled issue on a simulated GitHub, started (`the-loop
//! start`), so its session runs the stand-in in a private tmux server: one session in a
//! plain working directory (no graph), one in a clone of the issue's repository (served as
//! a real git repository) that drives the process graph, moved by an `execute` to
//! `brainstorming` — an agent node, whose exit gate every comment is judged by after its
//! delivery (the state file read, the gate, the write under its lock). Then 200 comments
//! by the authorized user into each, alternating, one at a time, each timed from the start
//! of its POST until the stand-in's record holds it. Reactions are off: they are
//! best-effort calls that never delay a paste, and the simulator would only add noise. The
//! load average is printed before and after: on a shared machine the tail is scheduling.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::{Read, Seek, SeekFrom, Write};
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

/// Where a world's session works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Site {
    /// `routing.spawnWorkdir`: no checkout, so no graph (one `stat` per delivery).
    Workdir,
    /// A clone of the issue's repository, driving its graph.
    Checkout,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let before = load_average();
    let samples = runtime.block_on(run());
    let after = load_average();
    let medians: Vec<f64> = samples.iter().map(|(site, samples)| report(*site, samples)).collect();
    println!(
        "graph-driven / no graph: p50 ratio {:.2}; load average {before} before, {after} after",
        medians[1] / medians[0]
    );
}

async fn run() -> Vec<(Site, Vec<Duration>)> {
    let stand_in = std::env::var_os("LOOP_STAND_IN").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/loop-stand-in")
    });
    assert!(stand_in.exists(), "{} is missing: run scripts/bench-dispatch.sh", stand_in.display());
    let worlds =
        [World::open(Site::Workdir, &stand_in).await, World::open(Site::Checkout, &stand_in).await];
    let mut samples = [Vec::with_capacity(SAMPLES), Vec::with_capacity(SAMPLES)];
    for n in 0..WARM_UP + SAMPLES {
        for (world, samples) in worlds.iter().zip(&mut samples) {
            let took = world.comment(10_000 + n as u64).await;
            if n >= WARM_UP {
                samples.push(took);
            }
        }
    }
    let [plain, graph] = samples;
    vec![(Site::Workdir, plain), (Site::Checkout, graph)]
}

/// A simulated GitHub with one started issue, and the receiver and dispatcher on it.
struct World {
    _dir: tempfile::TempDir,
    _sim: Sim,
    addr: SocketAddr,
    record: PathBuf,
    tmux_socket: PathBuf,
    number: u64,
}

impl World {
    async fn open(site: Site, stand_in: &Path) -> World {
        let dir = tempfile::tempdir().expect("a temp dir");
        let root = dir.path();
        let sim = Sim::start().await.expect("the simulator starts");
        sim.create_repo(REPO).expect("a repo");
        for dir in ["work", "scratch"] {
            std::fs::create_dir_all(root.join(dir)).expect("a directory");
        }
        let workspace = match site {
            Site::Workdir => String::new(),
            Site::Checkout => {
                let base = loop_sim::git::serve_repository(&root.join("origins"), REPO)
                    .expect("a served repository");
                format!(
                    "  workspace:\n    root: {}\n    strategy: clone\n    cloneUrls:\n      - host: github.com\n        base: {base}\n",
                    root.join("workspaces").display()
                )
            }
        };
        let config_path = root.join("cli-config.yaml");
        std::fs::write(
            &config_path,
            format!(
                "state:\n  root: {state}\nintegrations:\n  github:\n    api:\n      baseUrl: {base}\nrouting:\n  enabled: true\n  authorizedUsers: [{OWNER}]\n  spawnWorkdir: {work}\n  reactions:\n    enabled: false\n{workspace}",
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
        let tokens =
            TokenSource::new("github.com", &[], [("GITHUB_TOKEN".to_owned(), "t".to_owned())]);
        let tmux_socket = root.join("tmux.sock");
        let mut tmux =
            TmuxSettings::new(TmuxSocket::Path(tmux_socket.clone()), root.join("scratch"));
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

        let number = sim
            .open_issue(REPO, OWNER, "Benchmark", &["the-loop: auto-execute"])
            .expect("an issue");
        sim.comment(REPO, number, OWNER, "the-loop start").expect("a start");
        wait_for_text(&record, 0, "the-loop auto-execute").await;
        if site == Site::Checkout {
            // Phase selection answered with the default: the item moves to its first
            // phase, an agent node.
            wait_for_text(&record, 0, "you are now at node `phase-selection`").await;
            sim.comment(REPO, number, OWNER, "the-loop execute").expect("an execute");
            wait_for_text(&record, 0, "you are now at node `brainstorming`").await;
        }
        // Whatever the set-up still has in flight lands before the first sample.
        tokio::time::sleep(Duration::from_millis(500)).await;
        sim.set_webhook(None);
        World { _dir: dir, _sim: sim, addr, record, tmux_socket, number }
    }

    /// Posts comment `id` and waits until the stand-in recorded it; the time it took.
    async fn comment(&self, id: u64) -> Duration {
        let body = comment(self.number, id);
        let from = std::fs::metadata(&self.record).map_or(0, |meta| meta.len());
        let started = Instant::now();
        post(self.addr, &format!("bench-{id}"), &body).await;
        wait_for_text(&self.record, from, &format!("instruction {id}")).await;
        started.elapsed()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.tmux_socket)
            .arg("kill-server")
            .status();
    }
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

/// Polls the stand-in's record every 100 µs until what it holds past byte `from` contains
/// `needle` (30 s at most), on a thread of its own: tokio's timer ticks in milliseconds
/// and would round every sample up.
async fn wait_for_text(record: &Path, from: u64, needle: &str) {
    let (record, needle) = (record.to_owned(), needle.to_owned());
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut held = Vec::new();
        loop {
            held.clear();
            if let Ok(mut file) = std::fs::File::open(&record) {
                let _ = file.seek(SeekFrom::Start(from)).and_then(|_| file.read_to_end(&mut held));
            }
            if String::from_utf8_lossy(&held).contains(&needle) {
                return;
            }
            assert!(Instant::now() < deadline, "the harness never recorded {needle:?}");
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

/// Prints one world's p50/p99/max and returns its p50 in milliseconds.
fn report(site: Site, samples: &[Duration]) -> f64 {
    let mut samples = samples.to_vec();
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let what = match site {
        Site::Workdir => "no graph (a working directory)",
        Site::Checkout => "graph-driven checkout (at an agent node)",
    };
    println!(
        "webhook POST -> message recorded by the stand-in, {what}, {} samples: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (budget p50 <= 5 ms, p99 <= 10 ms)",
        samples.len(),
        ms(at(0.50)),
        ms(at(0.99)),
        ms(at(1.0)),
    );
    ms(at(0.50))
}
