//! What every crate's integration tests share besides the simulator: how long a test
//! waits before it fails, one way to wait for a condition, one reader of JSON-lines
//! records (the event log, the stand-in's message and launch records) and the count of
//! pastes a log promises, the stand-in binary, a real git repository for a simulated one
//! ([`git_origin`]), and a seeded generator for the kill tests.
//!
//! It lives here because loop-sim is already the test context every test binary links
//! (a dev-dependency of the libraries, a dependency of `the-loop` for `demo`); it needs
//! nothing loop-sim does not already depend on, so it adds no dependency to the product.
//!
//! Waiting is by condition, never by a bare sleep: [`wait_for`] (a blocking test) and
//! [`wait_for_async`] (a test on a tokio runtime) look again every [`POLL`] until the
//! check answers, and after [`PATIENCE`] fail saying what was awaited and what was last
//! seen. The deadline is wall time ([`std::time::Instant`]) so it stays a hang guard on
//! a paused tokio clock too; a test that runs on a paused clock drives its time with
//! `tokio::time::advance` and awaits events, and has no need to poll.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use loop_core::log::Kind;
use serde_json::Value;

/// How long a test waits for something that must happen before it fails: a hang guard
/// for a loaded 2-core machine, never a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(20);

/// Blocks until `check` answers `Ok`, looking every [`POLL`]. `check` answers `Err` with
/// the state it saw; after [`PATIENCE`] this panics with `what` and the last state.
#[track_caller]
pub fn wait_for<T, S: Display>(what: &str, check: impl FnMut() -> Result<T, S>) -> T {
    wait_for_within(PATIENCE, POLL, what, check)
}

/// [`wait_for`] with its own patience and pace, for the waits of a long scenario (held
/// up by a whole backlog, and costly to look at).
#[track_caller]
pub fn wait_for_within<T, S: Display>(
    patience: Duration,
    every: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, S>,
) -> T {
    let waiting = Waiting::new(what, patience);
    loop {
        if let Some(value) = waiting.judge(check()) {
            return value;
        }
        std::thread::sleep(every);
    }
}

/// [`wait_for`] on a tokio runtime: it sleeps between looks without holding a worker.
pub async fn wait_for_async<T, S: Display>(
    what: &str,
    mut check: impl FnMut() -> Result<T, S>,
) -> T {
    let waiting = Waiting::new(what, PATIENCE);
    loop {
        if let Some(value) = waiting.judge(check()) {
            return value;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One wait: what it is for and when it gives up.
struct Waiting<'a> {
    what: &'a str,
    patience: Duration,
    since: Instant,
}

impl<'a> Waiting<'a> {
    fn new(what: &'a str, patience: Duration) -> Self {
        Self { what, patience, since: Instant::now() }
    }

    /// The value once the check answered; `None` to look again; a panic past the deadline.
    #[track_caller]
    fn judge<T, S: Display>(&self, answer: Result<T, S>) -> Option<T> {
        match answer {
            Ok(value) => Some(value),
            Err(state) if self.since.elapsed() >= self.patience => panic!(
                "gave up waiting for {} after {:?}; last seen: {state}",
                self.what, self.patience
            ),
            Err(_) => None,
        }
    }
}

/// A JSON-lines file as a test reads it while something may still be appending to it.
#[derive(Debug, Default)]
pub struct JsonLines {
    /// Every line that parses, in file order.
    pub values: Vec<Value>,
    /// Lines that do not parse (a write cut short by a kill, or still under way).
    pub torn: usize,
}

impl IntoIterator for JsonLines {
    type Item = Value;
    type IntoIter = std::vec::IntoIter<Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.values.into_iter()
    }
}

/// Reads a JSON-lines file (the event log, the stand-in's records); a missing file has
/// no lines.
pub fn read_lines(path: &Path) -> JsonLines {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = JsonLines::default();
    for line in text.lines() {
        match serde_json::from_str(line) {
            Ok(value) => lines.values.push(value),
            Err(_) => lines.torn += 1,
        }
    }
    lines
}

/// The last lines of a log, for the last state a failed wait shows.
pub fn last_lines(values: &[Value]) -> String {
    let tail = &values[values.len().saturating_sub(8)..];
    format!("{} lines, ending {tail:#?}", values.len())
}

/// How many messages the event log `events` says were pasted into a harness: each spawn's
/// and respawn's prompt, and each delivery not already delivered. A harness records a
/// paste after tmux handed it over, so a test waits until its record holds this many.
/// The deliveries of a batch (`dispatch.batched`) are one paste, counted by their lead.
pub fn pastes_logged(events: &[Value]) -> usize {
    let named = |e: &Value, kind: Kind| e["event"] == kind.name();
    let went_with_another: Vec<&Value> = events
        .iter()
        .filter(|e| named(e, Kind::DispatchBatched) && e["lead"] != e["delivery_id"])
        .map(|e| &e["delivery_id"])
        .collect();
    events
        .iter()
        .filter(|e| {
            named(e, Kind::SessionSpawned)
                || named(e, Kind::SessionRespawned)
                || named(e, Kind::GraphAssignmentDelivered)
                || (named(e, Kind::DispatchSucceeded)
                    && e["already_delivered"] != true
                    && !went_with_another.contains(&&e["delivery_id"]))
        })
        .count()
}

/// [`crate::git::serve_repository`] for a test: `repo` served as a real git repository
/// under `root`; returns the base for `routing.workspace.cloneUrls`.
pub fn git_origin(root: &Path, repo: &str) -> String {
    crate::git::serve_repository(root, repo)
        .unwrap_or_else(|err| panic!("serving {repo} under {}: {err}", root.display()))
}

/// The `loop-stand-in` binary, for tests outside loop-sim (Cargo builds a package's
/// binaries only for that package's own tests). A build newer than the stand-in's
/// sources is used as it is (a nested cargo waits for the build lock, which other
/// builds may hold); else it is built once per test run, with the variables Cargo set
/// for the test under way removed, since build scripts watch some of them (ring reruns
/// when `CARGO_MANIFEST_DIR` or `CARGO_PKG_NAME` change, and everything above it with
/// it: each nested build would undo the workspace's, and the other way round). When the
/// build cannot run (another crate of the workspace is mid-edit) an existing binary is
/// used.
pub fn stand_in() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate_dir.join("../../target"));
        let binary = target.join("debug/loop-stand-in");
        let modified = |path: &Path| std::fs::metadata(path).and_then(|meta| meta.modified()).ok();
        let mut sources =
            vec![crate_dir.join("src/stand_in.rs"), crate_dir.join("src/bin/loop-stand-in.rs")];
        let modules = std::fs::read_dir(crate_dir.join("src/stand_in")).into_iter().flatten();
        sources.extend(modules.flatten().map(|entry| entry.path()));
        let fresh = modified(&binary).is_some_and(|built| {
            sources.iter().all(|source| modified(source).is_some_and(|m| m < built))
        });
        if fresh {
            return binary;
        }
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--quiet", "-p", "loop-sim", "--bin", "loop-stand-in"]);
        for (name, _) in std::env::vars_os() {
            let name_text = name.to_string_lossy();
            if ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_PRIMARY_"]
                .iter()
                .any(|prefix| name_text.starts_with(prefix))
            {
                build.env_remove(&name);
            }
        }
        let built = build.status().is_ok_and(|status| status.success());
        assert!(
            built || binary.exists(),
            "building loop-stand-in failed and no earlier build exists at {}",
            binary.display()
        );
        binary
    })
}

/// The real Claude Code CLI, pinned and installed under the target directory by
/// `scripts/install-claude.sh` (once per test run; the script is idempotent and locks,
/// so parallel test binaries share one install). `None` only when npm cannot reach its
/// registry (the script's exit 3): the caller skips with the notice this prints. Any
/// other failure of the install fails the test.
pub fn claude_code() -> Option<&'static Path> {
    static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-claude.sh");
            let output = Command::new("bash")
                .arg(&script)
                .output()
                .unwrap_or_else(|err| panic!("running {}: {err}", script.display()));
            let stderr = String::from_utf8_lossy(&output.stderr);
            match output.status.code() {
                Some(0) => Some(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())),
                Some(3) => {
                    #[allow(clippy::print_stderr, reason = "a skipped test must say so")]
                    {
                        eprintln!("skipped: the real Claude Code is not installed and npm cannot install it: {stderr}");
                    }
                    None
                }
                _ => panic!("{} failed ({}): {stderr}", script.display(), output.status),
            }
        })
        .as_deref()
}

/// A small deterministic generator (xorshift64) for the kill tests' scripts.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    /// A generator seeded with `seed` (made odd: xorshift never leaves zero).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// A seed from the clock, for a run to print and a later run to replay.
    pub fn clock_seed() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64) | 1
    }

    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_lines_keeps_what_parses_and_counts_what_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        assert_eq!(read_lines(&path).values.len(), 0, "a missing file has no lines");
        std::fs::write(&path, "{\"event\":\"a\"}\n{\"event\":\n{\"event\":\"b\"}\n").unwrap();
        let lines = read_lines(&path);
        assert_eq!(lines.torn, 1);
        let names: Vec<_> = lines.into_iter().map(|line| line["event"].clone()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn a_wait_returns_what_the_check_answered_once_it_answers() {
        let mut looks = 0;
        let got = wait_for("the third look", || {
            looks += 1;
            if looks == 3 { Ok(looks) } else { Err(format!("look {looks}")) }
        });
        assert_eq!(got, 3);
    }

    #[test]
    fn a_wait_that_never_comes_names_what_it_waited_for_and_the_last_state() {
        let failed = std::panic::catch_unwind(|| {
            wait_for_within(Duration::ZERO, POLL, "the gate", || Err::<(), _>("still shut"))
        });
        let message = *failed.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("waiting for the gate"), "{message}");
        assert!(message.contains("last seen: still shut"), "{message}");
    }

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let draw = |seed| {
            let mut random = Random::new(seed);
            (0..4).map(|_| random.below(100)).collect::<Vec<_>>()
        };
        assert_eq!(draw(41), draw(41));
        assert_ne!(draw(41), draw(43));
    }
}
