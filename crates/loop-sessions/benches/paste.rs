//! Event text in → message recorded by the stand-in harness: p50 / p99 over 200
//! deliveries into one live session on a private tmux server (SPEC §7 budget: ≤ 5 ms p50,
//! ≤ 10 ms p99). Run with `scripts/bench-paste.sh` (or `cargo bench -p loop-sessions
//! --bench paste` after building `loop-stand-in`); the stand-in binary is taken from
//! `LOOP_STAND_IN` or `target/release/loop-stand-in`.
//!
//! Each sample is timed from the call to `Tmux::deliver` until the stand-in's record file
//! has grown by one line, polled every 50 µs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loop_sessions::{SessionSite, Tmux, TmuxSettings, TmuxSocket};

const SAMPLES: usize = 200;
const WARM_UP: usize = 10;

fn main() {
    let stand_in = std::env::var_os("LOOP_STAND_IN").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/loop-stand-in")
    });
    assert!(
        stand_in.exists(),
        "build the stand-in first: cargo build --release -p loop-sim --bin loop-stand-in"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).expect("scratch dir");
    let socket = dir.path().join("tmux.sock");
    let mut settings = TmuxSettings::new(TmuxSocket::Path(socket.clone()), scratch);
    settings.config_file = Some(PathBuf::from("/dev/null"));
    let tmux = Tmux::new(settings);
    let record = dir.path().join("messages.jsonl");
    let argv =
        vec![stand_in.display().to_string(), "--record".into(), record.display().to_string()];
    let target = "loop-github-octo-bench-1";
    let site = SessionSite {
        target: target.to_owned(),
        cwd: dir.path().to_owned(),
        work_item: None,
        instance: None,
    };
    tmux.spawn(&site, &argv).expect("spawn");
    assert!(tmux.await_input_ready(target, Duration::from_secs(10)).expect("probe"));

    let text = "A comment from octocat on github:octo/bench#1:\n\nPlease look at `parse()` — \"it fails\" on $(inputs).\n";
    let mut samples = Vec::with_capacity(SAMPLES);
    for n in 0..WARM_UP + SAMPLES {
        let before = line_count(&record);
        let start = Instant::now();
        tmux.deliver(target, text).expect("delivered");
        while line_count(&record) == before {
            std::thread::sleep(Duration::from_micros(50));
            assert!(start.elapsed() < Duration::from_secs(10), "delivery {n} never arrived");
        }
        if n >= WARM_UP {
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    let report = format!(
        "paste delivery (event text in -> recorded by stand-in), {SAMPLES} samples: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms\n",
        ms(pct(0.50)),
        ms(pct(0.99)),
        ms(samples[samples.len() - 1]),
    );
    std::io::Write::write_all(&mut std::io::stdout(), report.as_bytes()).expect("stdout");
    let _ = std::process::Command::new("tmux").arg("-S").arg(&socket).arg("kill-server").status();
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn line_count(path: &Path) -> usize {
    std::fs::read(path).map(|bytes| bytes.iter().filter(|&&b| b == b'\n').count()).unwrap_or(0)
}
