//! Crash safety through the real binary (SPEC §8, issue 7): `the-loop start --foreground`
//! hosting the webhook receiver AND the poller (hybrid mode) over the real dispatcher,
//! loop-sim as GitHub (it signs and sends webhooks to the receiver and serves the poller),
//! and real tmux on a private socket directory whose sessions run the stand-in harness.
//!
//! A seeded script posts control commands and a mixed comment stream across 20 labelled
//! issues; the service is SIGKILLed at random points of it (the RNG chooses after which
//! post, how long after it, and how many posts land while the service is down — those
//! reach it only through the poller) and restarted each time. Between phases whose
//! outcome depends on order (a start before the comments it arms, a pause before the
//! comments it holds back) the test waits until every ingress has caught up
//! ([`Rig::catch_up`]: a condition on the journal, the delivery ledger and two quiet poll
//! cycles, never a bare sleep). At the end it asserts, from the stand-ins' own record
//! files and the simulator's state, that every authorized comment on a started, unpaused
//! item reached its session exactly once, nothing unauthorized or self-marked reached
//! one, each control command took effect once, and every state file still parses.
//!
//! The sleeps in the stream only choose the kill points; they synchronise nothing.
//!
//! `THE_LOOP_KILL_SEED` replays a seed's script and kill steps (thread timing differs);
//! `THE_LOOP_KILL_KEEP=<dir>` keeps a copy of the run's files; `THE_LOOP_KILL_REPORT=<file>`
//! appends one JSON line of findings per run before asserting — what `scripts/soak-kill.sh`
//! tallies over many seeds. The 300-comment runs (hybrid and webhooks-only) run in CI;
//! the 1 000-comment soak is ignored (minutes).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use loop_sim::test_support::{
    JsonLines, POLL, Random, last_lines, pastes_logged, read_lines, wait_for_within,
};
use serde_json::Value;

use crate::common::{Cli, ServicePaths, ServiceSite};
use crate::machine::World;

const REPO: &str = World::REPO;
const LABEL: &str = "the-loop: auto-execute";
const SECRET: &str = "kill-test-secret";
const SELF_MARKER: &str = "<!-- the-loop:agent-comment -->";
/// Authorized.
const ANN: &str = "ann";
/// Granted on a few items by `the-loop add-collaborator @bob`.
const BOB: &str = "bob";
/// Never authorized.
const EVE: &str = "eve";
const ITEMS: usize = 20;
/// A hang guard for conditions that must come true, not a timing assertion: longer than
/// the shared one, since a catch-up waits out a whole phase's backlog after restarts.
const PATIENCE: Duration = Duration::from_secs(120);
/// How often a catch-up looks again (each look parses the event log).
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// What each of the 20 items goes through (by index).
mod roles {
    /// Started in phase 1.
    pub fn started(item: usize) -> bool {
        item < 16
    }
    /// `add-collaborator @bob` in phase 1.
    pub fn bob_granted(item: usize) -> bool {
        item < 4
    }
    pub const CLOSED_STARTED: usize = 11;
    pub const PAUSED_THEN_RESUMED: usize = 12;
    pub const PAUSED: usize = 13;
    pub const STOPPED: [usize; 2] = [14, 15];
    /// Never started; closed in phase 3.
    pub const CLOSED_UNSTARTED: [usize; 2] = [18, 19];

    /// Whether an item's session takes input during comment phase `phase` (2, 4 or 6).
    pub fn active(item: usize, phase: u8) -> bool {
        match phase {
            2 => started(item),
            4 => item <= 10,
            _ => item <= 10 || item == PAUSED_THEN_RESUMED,
        }
    }
}

/// One scripted action.
#[derive(Debug, Clone)]
enum Step {
    /// A comment; `token` (`[kN]`) identifies an instruction in what the stand-ins record.
    Comment {
        item: usize,
        author: &'static str,
        body: String,
        token: Option<String>,
        expected: usize,
    },
    Close {
        item: usize,
    },
}

/// The script: phases, each ended by a catch-up.
fn script(random: &mut Random, comments: usize) -> Vec<Vec<Step>> {
    let command = |item: usize, body: &str| Step::Comment {
        item,
        author: ANN,
        body: body.to_owned(),
        token: None,
        expected: 0,
    };
    let mut next_token = 0;
    let mut stream = |random: &mut Random, count: usize, phase: u8| -> Vec<Step> {
        (0..count)
            .map(|_| {
                let item = random.below(ITEMS as u64) as usize;
                next_token += 1;
                let token = format!("[k{next_token}]");
                let active = roles::active(item, phase);
                let (author, body, delivered) = match random.below(10) {
                    0 => (EVE, format!("drive-by {token}"), false),
                    1 => (
                        BOB,
                        format!("collaborator note {token}"),
                        active && roles::bob_granted(item),
                    ),
                    2 => (ANN, format!("agent status {token}\n{SELF_MARKER}"), false),
                    _ => (ANN, format!("please handle {token}"), active),
                };
                Step::Comment {
                    item,
                    author,
                    body,
                    token: Some(token),
                    expected: usize::from(delivered),
                }
            })
            .collect()
    };
    let phase1: Vec<Step> = (0..ITEMS)
        .filter(|&i| roles::started(i))
        .map(|i| command(i, "the-loop start"))
        .chain(
            (0..ITEMS)
                .filter(|&i| roles::bob_granted(i))
                .map(|i| command(i, "the-loop add-collaborator @bob")),
        )
        .collect();
    let phase2 = stream(random, comments * 6 / 10, 2);
    let mut phase3 = vec![
        command(roles::PAUSED_THEN_RESUMED, "the-loop pause"),
        command(roles::PAUSED, "the-loop pause"),
        Step::Close { item: roles::CLOSED_STARTED },
    ];
    phase3.extend(roles::STOPPED.iter().map(|&i| command(i, "the-loop stop")));
    phase3.extend(roles::CLOSED_UNSTARTED.iter().map(|&i| Step::Close { item: i }));
    let phase4 = stream(random, comments / 4, 4);
    let phase5 = vec![command(roles::PAUSED_THEN_RESUMED, "the-loop resume")];
    let rest = comments - comments * 6 / 10 - comments / 4;
    let phase6 = stream(random, rest, 6);
    vec![phase1, phase2, phase3, phase4, phase5, phase6]
}

/// Which ingresses the service runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ingress {
    /// The webhook receiver and the poller (SPEC §8's "both ingresses").
    Hybrid,
    /// The receiver alone: what was not acknowledged is GitHub's to redeliver, so only
    /// acknowledged (202) comments are held to exactly once.
    WebhooksOnly,
}

/// The running world: the simulator, the binary's site, the service process.
struct Rig {
    seed: u64,
    ingress: Ingress,
    world: World,
    cli: Cli,
    root: PathBuf,
    messages: PathBuf,
    launches: PathBuf,
    tmux_dir: PathBuf,
    numbers: Vec<u64>,
    service: Option<Child>,
    /// Each start's output file, in order.
    outputs: Vec<PathBuf>,
}

impl Rig {
    fn new(seed: u64, ingress: Ingress) -> Self {
        let world = World::new();
        let numbers = (0..ITEMS)
            .map(|i| {
                world.sim.open_issue(REPO, ANN, &format!("Task {i}"), &[LABEL]).expect("an issue")
            })
            .collect();
        let mut cli = Cli::new();
        let launches = cli.cwd().join("launches.jsonl");
        // The stand-in also keeps a Claude-shaped transcript where the service looks for
        // Claude's (the in-doubt check after a kill between a paste and its record).
        let claude_dir = cli.cwd().join("claude");
        let quoted = |path: &Path| Value::from(path.display().to_string()).to_string();
        let harness_args = format!(
            ", --launches, {}, --claude-transcripts, {}",
            quoted(&launches),
            quoted(&claude_dir)
        );
        let ServicePaths { root, messages, tmux_dir, port } = ServiceSite {
            sim: &world.sim,
            repo: REPO,
            authorized: ANN,
            polling: ingress == Ingress::Hybrid,
            secret: SECRET,
            routing: "  dedupCacheSize: 8192\n  harnessPlugins:\n    enabled: false\n",
            harness_args: &harness_args,
        }
        .write(&mut cli);
        cli.env("CLAUDE_CONFIG_DIR", &claude_dir);
        world.sim.set_webhook(Some(loop_sim::WebhookTarget {
            url: format!("http://127.0.0.1:{port}/gh-webhook"),
            secret: Some(SECRET.to_owned()),
        }));
        Self {
            seed,
            ingress,
            world,
            cli,
            root,
            messages,
            launches,
            tmux_dir,
            numbers,
            service: None,
            outputs: Vec::new(),
        }
    }

    /// Starts the service and waits until it says it is ready (every ingress listening).
    fn start(&mut self) {
        let output = self.cli.cwd().join(format!("service-{}.out", self.outputs.len()));
        let context = format!("seed {}: ", self.seed);
        self.service = Some(self.cli.start_foreground(&output, PATIENCE, &context));
        self.outputs.push(output);
    }

    /// `kill -9`: no chance to flush, close or clean up.
    fn kill(&mut self) {
        if let Some(mut child) = self.service.take() {
            child.kill().expect("SIGKILL the service");
            child.wait().expect("the killed service is reaped");
        }
    }

    fn up(&self) -> bool {
        self.service.is_some()
    }

    fn post(&self, step: &Step) -> Option<u64> {
        match step {
            Step::Comment { item, author, body, .. } => Some(
                self.world.sim.comment(REPO, self.numbers[*item], author, body).expect("a comment"),
            ),
            Step::Close { item } => {
                self.world.sim.close(REPO, self.numbers[*item], ANN).expect("a close");
                None
            }
        }
    }

    fn events(&self) -> Vec<Value> {
        read_lines(&self.root.join("logs/events.jsonl")).values
    }

    /// Waits until every ingress has caught up: the simulator's webhooks are answered (and
    /// none was sent meanwhile), the journal holds nothing unprocessed, the delivery ledger
    /// nothing in flight, and — with the poller — the last two poll cycles, both begun
    /// after this call, forwarded and spawned nothing with nothing else logged between
    /// them.
    fn catch_up(&self) {
        assert!(self.up(), "catch_up needs the service running");
        let from = self.events().len();
        let what = format!("seed {}: the service to catch up", self.seed);
        wait_for_within(PATIENCE, LOOK_EVERY, &what, || {
            let sent = self.world.sim.deliveries().len();
            let answered = self.world.block_on(async {
                tokio::time::timeout(PATIENCE, self.world.sim.webhooks_settled()).await
            });
            assert!(answered.is_ok(), "{what}: the simulator's webhooks were never answered");
            if self.quiet(from) && self.world.sim.deliveries().len() == sent {
                return Ok(());
            }
            Err(format!(
                "inbox {:?}, in flight {:?}, the event log: {}",
                self.pending(),
                self.in_flight(),
                last_lines(&self.events())
            ))
        });
    }

    fn quiet(&self, from: usize) -> bool {
        if self.pending() != Some(0) || self.in_flight() != Some(0) {
            return false;
        }
        if self.ingress == Ingress::WebhooksOnly {
            // The dispatcher took each processed delivery in before its journal mark, and
            // holds its key in flight until its dispatch ends.
            return true;
        }
        let events = self.events();
        let tail = &events[from.min(events.len())..];
        let cycles: Vec<usize> = tail
            .iter()
            .enumerate()
            .filter(|(_, e)| e["event"] == "poll.cycle")
            .map(|(i, _)| i)
            .collect();
        let [.., first, last] = cycles[..] else { return false };
        let idle = |e: &Value| {
            e["comments_forwarded"].as_u64().unwrap_or(0) == 0
                && e["spawns"].as_u64().unwrap_or(0) == 0
        };
        idle(&tail[first])
            && idle(&tail[last])
            && tail[first..].iter().all(|e| e["event"] == "poll.cycle")
    }

    /// Journal entries not yet processed (`None`: unreadable right now).
    fn pending(&self) -> Option<usize> {
        loop_store::inbox::read_pending(&self.root.join("local/inbox"))
            .ok()
            .map(|c| c.pending.len())
    }

    /// Delivery-ledger keys marked in flight, replaying `local/deliveries.log` (one line
    /// per change; the last line of a key wins; no log yet: none).
    fn in_flight(&self) -> Option<usize> {
        let text = match std::fs::read_to_string(self.root.join("local/deliveries.log")) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Some(0),
            Err(_) => return None,
        };
        let mut marks: BTreeMap<String, String> = BTreeMap::new();
        // A last line without its newline is a write in progress: not counted yet.
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let line: Value = serde_json::from_str(line).ok()?;
            let key = line["key"].as_str()?.to_owned();
            marks.insert(key, line["state"].as_str()?.to_owned());
        }
        Some(marks.values().filter(|state| *state == "inflight").count())
    }

    /// What the stand-ins recorded as submitted, once they recorded at least every
    /// message the event log says was pasted (a paste is recorded after tmux handed it
    /// over).
    fn pasted(&self) -> Vec<String> {
        let expected = pastes_logged(&self.events());
        wait_for_within(PATIENCE, POLL, "the stand-ins to record every paste", || {
            let JsonLines { values, torn } = read_lines(&self.messages);
            assert_eq!(torn, 0, "seed {}: a torn line in the stand-ins' record", self.seed);
            if values.len() >= expected {
                Ok(values.iter().filter_map(|l| l["text"].as_str().map(str::to_owned)).collect())
            } else {
                Err(format!("{} of {expected} recorded", values.len()))
            }
        })
    }

    fn tmux_kill_server(&self) {
        let _ = Command::new("tmux")
            .arg("kill-server")
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .env_remove("TMUX")
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill();
        self.tmux_kill_server();
        // `THE_LOOP_KILL_KEEP=<dir>`: a copy of the run's files (config, state root,
        // records, service output) to read after a failure.
        if let Some(keep) = std::env::var_os("THE_LOOP_KILL_KEEP") {
            let _ = Command::new("cp").arg("-a").arg(self.cli.cwd()).arg(keep).status();
        }
    }
}

/// Every state file under `dir` that does not parse, with the error: a `.json` file, a
/// complete line of a JSON-lines file (`*.jsonl`, the delivery ledger's `deliveries.log`;
/// a last line without its newline is a write cut short, which their readers skip), or
/// a file the store quarantined.
fn corrupt_state_files(dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return bad };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            bad.extend(corrupt_state_files(&path));
        } else if path.file_name().is_some_and(|n| n.to_string_lossy().contains(".corrupt-")) {
            bad.push(format!("{}: quarantined as unparsable", path.display()));
        } else if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if let Err(err) = serde_json::from_str::<Value>(&text) {
                bad.push(format!("{}: {err}", path.display()));
            }
        } else if path.extension().is_some_and(|e| e == "jsonl")
            || path.file_name().is_some_and(|n| n == "deliveries.log")
        {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let complete = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
            for (number, line) in complete.enumerate() {
                if let Err(err) = serde_json::from_str::<Value>(line) {
                    bad.push(format!("{} line {}: {err}", path.display(), number + 1));
                }
            }
        }
    }
    bad
}

/// What one run found, written to `THE_LOOP_KILL_REPORT` and asserted.
#[derive(Debug, Default)]
struct Findings {
    /// Token → (times recorded, times expected, item, author).
    wrong: Vec<(String, usize, usize, usize, &'static str)>,
    launches_per_item: BTreeMap<String, usize>,
    /// Fresh launches no `session.spawned` line names: spawns a kill cut short after
    /// their harness started, replaced by a later spawn.
    launches_cut_short: BTreeMap<String, usize>,
    /// Commands seen only as a consumed replay (their own line lost with its process).
    command_lines_lost: usize,
    /// `session.spawn_recovered` lines per item: a later spawn found a spawn cut short.
    spawns_recovered: BTreeMap<String, usize>,
    /// Keys a restart found in flight that the harness had received (`dispatch.recovered`).
    deliveries_recovered: usize,
    /// Keys a restart found in flight that were delivered again (`dispatch.in_doubt`).
    deliveries_in_doubt: usize,
    announcements_per_item: BTreeMap<usize, usize>,
    commands: BTreeMap<(String, String), usize>,
    rosters: BTreeMap<usize, usize>,
    corrupt: Vec<String>,
    torn_event_lines: usize,
    /// Spawns refused because a harness already ran under the item's tmux name.
    spawns_refused_occupied: usize,
    /// Wrongly counted comments whose key a restart found in flight (`dispatch.abandoned`).
    wrong_after_abandon: usize,
}

/// Plays the script with `comments` comments through `ingress`, killing the service
/// `kills_per_300` (a range) times per 300 comments, then asserts what the module
/// documents. Webhooks only: the kills land in the comment phases only and nothing is
/// posted while the service is down (the order-dependent phases need every control
/// command acknowledged).
fn run(comments: usize, kills_per_300: (u64, u64), ingress: Ingress) {
    let seed = std::env::var("THE_LOOP_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(Random::clock_seed)
        | 1;
    let mut random = Random::new(seed);
    let phases = script(&mut random, comments);
    let eligible: Vec<usize> = phases
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, step)| {
            ingress == Ingress::Hybrid || matches!(step, Step::Comment { token: Some(_), .. })
        })
        .map(|(index, _)| index)
        .collect();
    let scale = comments.div_ceil(300) as u64;
    let kills = (kills_per_300.0 + random.below(kills_per_300.1 - kills_per_300.0 + 1)) * scale;
    let mut kill_at = BTreeSet::new();
    while kill_at.len() < kills as usize {
        kill_at.insert(eligible[random.below(eligible.len() as u64) as usize]);
    }

    let mut rig = Rig::new(seed, ingress);
    rig.start();
    // Every item is seen before the script: its opening is not part of what is tested.
    rig.catch_up();
    let mut ids: BTreeMap<String, u64> = BTreeMap::new();
    let mut log = Vec::new();
    let mut down_for = 0;
    let mut index = 0;
    for phase in &phases {
        for step in phase {
            if !rig.up() && down_for == 0 {
                rig.start();
            }
            if let (Some(id), Step::Comment { token: Some(token), .. }) = (rig.post(step), step) {
                ids.insert(token.clone(), id);
            }
            if !rig.up() {
                down_for -= 1;
            }
            if kill_at.contains(&index) {
                let delay = random.below(300);
                std::thread::sleep(Duration::from_millis(delay));
                if rig.up() {
                    rig.kill();
                    down_for = match ingress {
                        Ingress::Hybrid => random.below(4),
                        Ingress::WebhooksOnly => 0,
                    };
                    log.push(format!(
                        "step {index}: killed {delay} ms after it, down for {down_for} more"
                    ));
                }
            }
            index += 1;
            std::thread::sleep(Duration::from_millis(random.below(30)));
        }
        if !rig.up() {
            rig.start();
        }
        rig.catch_up();
    }

    let findings = findings(&rig, &phases, &ids, &unacknowledged(&rig, &ids));
    report(seed, &log, &findings);
    let context = format!(
        "seed {seed} (THE_LOOP_KILL_SEED={seed} replays it), kills:\n  {}",
        log.join("\n  ")
    );
    assert!(
        findings.wrong.is_empty(),
        "{context}\ncomments delivered the wrong number of times (token, got, expected, item, author): {:#?}\n{}",
        findings.wrong,
        trail(&rig, &findings, &ids)
    );
    let started: Vec<usize> = (0..ITEMS).filter(|&i| roles::started(i)).collect();
    for item in 0..ITEMS {
        let expected = usize::from(started.contains(&item));
        let work_item = format!("github:{REPO}#{}", rig.numbers[item]);
        assert_eq!(
            findings.launches_per_item.get(&work_item).copied().unwrap_or(0),
            expected,
            "{context}\nfresh launches for {work_item}: {:#?}\ncut short: {:#?}",
            findings.launches_per_item,
            findings.launches_cut_short
        );
        if findings.launches_cut_short.contains_key(&work_item) {
            assert!(
                findings.spawns_recovered.contains_key(&work_item),
                "{context}\na spawn of {work_item} was cut short and no later spawn recovered it"
            );
        }
        assert_eq!(
            findings.announcements_per_item.get(&item).copied().unwrap_or(0),
            expected,
            "{context}\nannouncements on item {item}: {:#?}",
            rig.world.sim.comments_by(REPO, rig.numbers[item], rig.world.sim.viewer())
        );
        assert_eq!(
            findings.rosters.get(&item).copied().unwrap_or(0),
            usize::from(roles::bob_granted(item)),
            "{context}\n@bob's roster entries on item {item}"
        );
    }
    let mut expected_commands: BTreeMap<(String, String), usize> = BTreeMap::new();
    for phase in &phases {
        for step in phase {
            if let Step::Comment { item, body, token: None, .. } = step
                && let Some(command) =
                    body.strip_prefix("the-loop ").and_then(|c| c.split(' ').next())
                && !["start", "add-collaborator"].contains(&command)
            {
                *expected_commands
                    .entry((format!("github:{REPO}#{}", rig.numbers[*item]), command.to_owned()))
                    .or_default() += 1;
            }
        }
    }
    assert_eq!(
        findings.commands, expected_commands,
        "{context}\ncontrol.command lines per (item, command)"
    );
    assert!(
        findings.corrupt.is_empty(),
        "{context}\nstate files that do not parse: {:#?}",
        findings.corrupt
    );
    rig.cli.run(["config", "check"]).expect_code(0);
    rig.cli.run(["events", "--json"]).expect_code(0);
}

/// Webhooks only: the tokens of comments whose webhook the service never answered 202
/// (killed before or while it was sent); each may have arrived or not.
fn unacknowledged(rig: &Rig, ids: &BTreeMap<String, u64>) -> BTreeSet<String> {
    if rig.ingress == Ingress::Hybrid {
        return BTreeSet::new();
    }
    let deliveries = rig.world.sim.deliveries();
    ids.keys()
        .filter(|token| {
            !deliveries.iter().any(|d| d.status == Some(202) && d.body.contains(token.as_str()))
        })
        .cloned()
        .collect()
}

/// Reads what happened from the stand-ins' records, the simulator and the state root. A
/// comment in `unacknowledged` must arrive at most as often as expected.
fn findings(
    rig: &Rig,
    phases: &[Vec<Step>],
    ids: &BTreeMap<String, u64>,
    unacknowledged: &BTreeSet<String>,
) -> Findings {
    let pasted = rig.pasted();
    let mut findings = Findings::default();
    for step in phases.iter().flatten() {
        let Step::Comment { item, author, token: Some(token), expected, .. } = step else {
            continue;
        };
        let got = pasted.iter().filter(|text| text.contains(token.as_str())).count();
        let wrong = if unacknowledged.contains(token) { got > *expected } else { got != *expected };
        if wrong {
            findings.wrong.push((token.clone(), got, *expected, *item, author));
        }
    }
    let JsonLines { values: events, torn } = read_lines(&rig.root.join("logs/events.jsonl"));
    // A launch is registered when a `session.spawned` line or a session record names its
    // conversation (the event log is written behind its emitters, so a kill can take a
    // line written just before it; the record is written before the line). A record's
    // temp file a kill left behind (`.<name>.<pid>.<n>.tmp`) was never a record.
    let recorded: Vec<String> = std::fs::read_dir(rig.root.join("local"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|file| file.file_name().to_str().is_some_and(|name| name.ends_with(".json")))
        .filter_map(|file| std::fs::read_to_string(file.path()).ok())
        .filter_map(|text| serde_json::from_str::<Value>(&text).ok())
        .flat_map(|record| {
            let endpoints = record["endpoints"].as_object().cloned().unwrap_or_default();
            endpoints
                .values()
                .filter_map(|e| e["harnessSessionId"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect();
    let spawned: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["event"] == "session.spawned")
        .filter_map(|e| e["harness_session_id"].as_str())
        .chain(recorded.iter().map(String::as_str))
        .collect();
    for launch in read_lines(&rig.launches) {
        let argv: Vec<&str> = launch["argv"]
            .as_array()
            .map(|argv| argv.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(at) = argv.iter().position(|a| *a == "--session-id") else { continue };
        let Some(item) = launch["workItem"].as_str() else { continue };
        let registered = argv.get(at + 1).is_some_and(|id| spawned.contains(id));
        let tally = if registered {
            &mut findings.launches_per_item
        } else {
            &mut findings.launches_cut_short
        };
        *tally.entry(item.to_owned()).or_default() += 1;
    }
    for (item, number) in rig.numbers.iter().enumerate() {
        let announced = rig
            .world
            .sim
            .comments_by(REPO, *number, rig.world.sim.viewer())
            .iter()
            .filter(|c| c.contains("tmux") && c.contains("attach"))
            .count();
        if announced > 0 {
            findings.announcements_per_item.insert(item, announced);
        }
    }
    findings.torn_event_lines = torn;
    for line in events.iter().filter(|e| e["event"] == "control.command") {
        let command = line["command"].as_str().unwrap_or_default().to_owned();
        // A start's effect is its spawn (launches, announcements); a roster command's is
        // its roster entry (a replayed grant logs its line again, by design).
        if command == "start" || command == "add-collaborator" {
            continue;
        }
        let item = line["work_item"].as_str().unwrap_or_default().to_owned();
        *findings.commands.entry((item, command)).or_default() += 1;
    }
    // A command whose `control.command` line a kill took before the log's writer wrote
    // it is consumed on its replay, which logs no second line: it ran once.
    for line in events.iter().filter(|e| e["reason"] == "control-consumed") {
        let command = line["command"].as_str().unwrap_or_default().to_owned();
        if command == "start" || command == "add-collaborator" {
            continue;
        }
        let item = line["work_item"].as_str().unwrap_or_default().to_owned();
        let count = findings.commands.entry((item, command)).or_default();
        if *count == 0 {
            *count = 1;
            findings.command_lines_lost += 1;
        }
    }
    let records = std::fs::read_dir(rig.root.join("portable")).into_iter().flatten().flatten();
    for record in records.filter(|r| r.file_name() != "index.json") {
        let Some(record) = std::fs::read_to_string(record.path())
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        let number = record["ref"].as_str().and_then(|r| r.rsplit('#').next()?.parse::<u64>().ok());
        let Some(item) = rig.numbers.iter().position(|n| Some(*n) == number) else { continue };
        let count = record["collaborators"].to_string().matches("\"bob\"").count();
        if count > 0 {
            findings.rosters.insert(item, count);
        }
    }
    for line in events.iter().filter(|e| e["event"] == "session.spawn_recovered") {
        let item = line["work_item"].as_str().unwrap_or_default().to_owned();
        *findings.spawns_recovered.entry(item).or_default() += 1;
    }
    findings.deliveries_recovered =
        events.iter().filter(|e| e["event"] == "dispatch.recovered").count();
    findings.deliveries_in_doubt =
        events.iter().filter(|e| e["event"] == "dispatch.in_doubt").count();
    findings.spawns_refused_occupied = events
        .iter()
        .filter(|e| e["event"] == "session.spawn_failed")
        .filter(|e| e["error"].as_str().is_some_and(|m| m.contains("already running a harness")))
        .count();
    let abandoned: String = events
        .iter()
        .filter(|e| e["event"] == "dispatch.abandoned")
        .map(|e| e["delivery_ids"].to_string())
        .collect();
    findings.wrong_after_abandon = findings
        .wrong
        .iter()
        .filter_map(|w| ids.get(&w.0))
        .filter(|id| abandoned.contains(&loop_sim::world::node_id("IC", **id)))
        .count();
    findings.corrupt = corrupt_state_files(&rig.root);
    findings.corrupt.extend(orphaned_temp_files(rig));
    findings
}

/// Temp files of writes a killed service never renamed, still in `portable/` or `local/`
/// although a service started after the kill (each start sweeps them).
fn orphaned_temp_files(rig: &Rig) -> Vec<String> {
    let running = rig.service.as_ref().map(Child::id);
    ["portable", "local"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(rig.root.join(dir)).into_iter().flatten().flatten())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with('.') && name.ends_with(".tmp"))
        .filter(|name| {
            let pid = name.rsplit('.').nth(2).and_then(|pid| pid.parse::<u32>().ok());
            pid != running
        })
        .map(|name| format!("{name}: a killed writer's temp file was not swept"))
        .collect()
}

/// The event-log lines naming each wrongly delivered comment, for the diagnosis.
fn trail(rig: &Rig, findings: &Findings, ids: &BTreeMap<String, u64>) -> String {
    let events = rig.events();
    let mut out = String::new();
    for (token, ..) in findings.wrong.iter().take(5) {
        let Some(id) = ids.get(token) else { continue };
        let node = loop_sim::world::node_id("IC", *id);
        out.push_str(&format!("--- {token} ({node})\n"));
        for line in events.iter().filter(|e| e.to_string().contains(&node)) {
            out.push_str(&format!("{line}\n"));
        }
    }
    out
}

/// Appends the run's numbers to `THE_LOOP_KILL_REPORT`, when set.
fn report(seed: u64, log: &[String], findings: &Findings) {
    let Some(path) = std::env::var_os("THE_LOOP_KILL_REPORT") else { return };
    let duplicates = findings.wrong.iter().filter(|w| w.1 > w.2).count();
    let losses = findings.wrong.iter().filter(|w| w.1 < w.2).count();
    let line = serde_json::json!({
        "seed": seed,
        "kills": log.len(),
        "duplicates": duplicates,
        "losses": losses,
        "wrong": findings.wrong.iter().map(|w| format!("{} got {} expected {} (item {}, {})", w.0, w.1, w.2, w.3, w.4)).collect::<Vec<_>>(),
        "commandsLoggedTwice": findings.commands.values().filter(|n| **n > 1).count(),
        "rostersTwice": findings.rosters.values().filter(|n| **n > 1).count(),
        "wrongAfterAbandon": findings.wrong_after_abandon,
        "spawnsRefusedOccupied": findings.spawns_refused_occupied,
        "extraLaunches": findings.launches_per_item.values().filter(|n| **n > 1).count(),
        "spawnsRecovered": findings.spawns_recovered.values().sum::<usize>(),
        "launchesCutShort": findings.launches_cut_short.values().sum::<usize>(),
        "commandLinesLost": findings.command_lines_lost,
        "deliveriesRecovered": findings.deliveries_recovered,
        "deliveriesInDoubt": findings.deliveries_in_doubt,
        "tornEventLines": findings.torn_event_lines,
        "corrupt": findings.corrupt,
    });
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(path).expect("the report file");
    writeln!(file, "{line}").expect("a report line");
}

/// The bounded run (20–40 s on a 2-core machine; docs/operations.md, "Crash safety: how
/// it is tested", for what it found).
#[test]
fn a_service_killed_at_random_points_during_300_comments_delivers_each_authorized_comment_once() {
    run(300, (5, 8), Ingress::Hybrid);
}

/// SPEC §8: 1 000 comments (plus the control commands) through both ingresses, 20–32
/// kills. `scripts/soak-kill.sh` runs it over many seeds.
#[test]
#[ignore = "the SPEC §8 soak (1 000 events, minutes); run by scripts/soak-kill.sh"]
fn soak_a_service_killed_at_random_points_during_1000_comments_delivers_each_authorized_comment_once()
 {
    run(1000, (5, 8), Ingress::Hybrid);
}

/// The receiver alone, killed 5–8 times during the comment phases: every comment it
/// acknowledged (202) reaches its session exactly once (docs/receiver.md: a 202 is in the
/// journal and is processed at the next start).
#[test]
fn a_webhooks_only_service_killed_at_random_points_delivers_each_acknowledged_comment_once() {
    run(300, (5, 8), Ingress::WebhooksOnly);
}
