//! The watcher: every [`LOOK_EVERY`], for each live session, what its hooks spooled
//! since the last look and one look at its pane, through loop-core's transition rule;
//! each change is put in the table ([`super::AgentStates`]) and logged as `agent.state`.
//!
//! A session first seen (a fresh spawn, or every live one after a restart) starts as
//! `starting` and reads its spool from the beginning, so a restart rebuilds where each
//! agent is, an open permission request included. A session no longer live is dropped
//! from the table and its spool removed. What every agent is doing is written to
//! `local/agent/states.json` whenever it changes, for `the-loop status`.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use loop_core::WorkItemRef;
use loop_core::agent_state::{AgentState, PaneLook, Sign, Tracked};
use loop_core::log::{Kind, Line};
use loop_sessions::{Harness, Tmux};
use loop_store::StateStore;
use loop_store::agent_spool::AgentSpool;
use loop_store::agent_states::{AgentRow, AgentStates as AgentStatesFile};
use tokio::sync::broadcast;

use super::AgentStates;

/// How often every live session is looked at.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// What the watcher reads and where it writes.
#[derive(Debug)]
pub struct Watcher {
    pub store: StateStore,
    pub tmux: Arc<Tmux>,
    /// The harness new sessions run: its pane signs read the panes of its sessions.
    pub harness: Arc<dyn Harness>,
    pub states: Arc<AgentStates>,
    /// The config in force (`routing.stallAfterSeconds`).
    pub config: tokio::sync::watch::Receiver<Arc<loop_core::config::Config>>,
    /// Where each change of state is sent (the dispatcher tells the work item).
    pub changes: tokio::sync::mpsc::UnboundedSender<super::Change>,
}

/// What the watcher keeps between looks at one session.
#[derive(Debug)]
struct Seen {
    item: WorkItemRef,
    tracked: Tracked,
    /// Where the next spool read starts.
    spool_at: u64,
    /// The last screen's hash: a different one is output, a sign of life.
    screen: u64,
}

/// One session to look at.
#[derive(Debug, Clone)]
struct Live {
    item: WorkItemRef,
    target: String,
    /// Its harness.
    harness: String,
    /// Whether its harness is the one whose pane signs are known.
    ours: bool,
}

/// Runs until `stop` fires.
pub async fn run(watcher: Watcher, mut stop: broadcast::Receiver<()>) {
    let watcher = Arc::new(watcher);
    let spool = AgentSpool::new(watcher.store.layout().agent_dir());
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut written = None;
    loop {
        let (looked, lines) = {
            let (watcher, spool) = (watcher.clone(), spool.clone());
            let taken = std::mem::take(&mut seen);
            // A look that panicked starts over: the spool is read again from its start.
            tokio::task::spawn_blocking(move || watcher.look_all(&spool, taken))
                .await
                .unwrap_or_default()
        };
        seen = looked;
        for line in lines {
            watcher.store.events().emit_async(line).await;
        }
        let rows = rows(&seen);
        if written.as_ref() != Some(&rows) {
            let (store, agents) = (watcher.store.clone(), rows.clone());
            let states = AgentStatesFile { written_at: Some(Timestamp::now()), agents };
            let write = tokio::task::spawn_blocking(move || store.write_agent_states(&states));
            if let Ok(Ok(())) = write.await {
                written = Some(rows);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            _ = stop.recv() => return,
        }
    }
}

impl Watcher {
    /// One look at every live session (blocking): what is kept for the next, and the
    /// lines to log.
    fn look_all(
        &self,
        spool: &AgentSpool,
        mut seen: HashMap<String, Seen>,
    ) -> (HashMap<String, Seen>, Vec<Line>) {
        let live = self.live();
        let mut lines = Vec::new();
        for gone in seen
            .keys()
            .filter(|t| !live.iter().any(|l| &l.target == *t))
            .cloned()
            .collect::<Vec<_>>()
        {
            seen.remove(&gone);
            self.states.forget(&gone);
            let _ = spool.forget(&gone);
        }
        for stale in self.states.targets() {
            if !seen.contains_key(&stale) {
                self.states.forget(&stale);
            }
        }
        let config = self.config.borrow().clone();
        let stall_after = SignedDuration::from_secs(
            i64::try_from(config.routing.stall_after_seconds).unwrap_or(i64::MAX),
        );
        for session in live {
            let now = Timestamp::now();
            let entry = seen.entry(session.target.clone()).or_insert_with(|| Seen {
                item: session.item.clone(),
                tracked: Tracked::starting(now),
                spool_at: 0,
                screen: 0,
            });
            if let Some(line) = self.look(spool, &session, entry, now, stall_after) {
                lines.push(line);
            }
        }
        (seen, lines)
    }

    /// Every live endpoint's session.
    fn live(&self) -> Vec<Live> {
        let Ok(records) = self.store.live_records() else { return Vec::new() };
        records
            .iter()
            .flat_map(|record| {
                record.endpoints.values().filter(|e| e.is_live()).map(|endpoint| Live {
                    item: record.work_item.clone(),
                    target: endpoint.tmux_target.clone(),
                    harness: endpoint.harness.clone(),
                    ours: endpoint.harness == self.harness.name(),
                })
            })
            .collect()
    }

    /// One session's look: its state moved by what it shows; the `agent.state` line
    /// when it changed.
    fn look(
        &self,
        spool: &AgentSpool,
        session: &Live,
        seen: &mut Seen,
        now: Timestamp,
        stall_after: SignedDuration,
    ) -> Option<Line> {
        let before = seen.tracked.state.clone();
        let mut by = None;
        if let Ok(read) = spool.read_from(&session.target, seen.spool_at) {
            seen.spool_at = read.next;
            for report in read.reports {
                let at = report.at.unwrap_or(now);
                if seen.tracked.observe(&Sign::Hook(report), at) {
                    by = Some("hooks");
                }
            }
        }
        if let Ok(view) = self.tmux.look(&session.target) {
            let look = self.pane_look(session, seen, view.as_ref(), now);
            if seen.tracked.observe(&Sign::Pane(look), now) {
                by = Some("pane");
            }
        }
        if seen.tracked.tick(now, stall_after) {
            by = Some("clock");
        }
        if self.states.seen(&session.target).as_ref() != Some(&seen.tracked) {
            self.states.set(&session.target, &session.harness, seen.tracked.clone());
        }
        let changed = seen.tracked.state != before;
        if changed {
            let (item, target) = (seen.item.clone(), session.target.clone());
            // The receiving side ends only with the service.
            let change = super::Change {
                item,
                target,
                before: before.clone(),
                tracked: seen.tracked.clone(),
            };
            let _ = self.changes.send(change);
        }
        changed.then(|| {
            state_line(&seen.item, &session.target, &seen.tracked.state, by.unwrap_or("pane"))
        })
    }

    fn pane_look(
        &self,
        session: &Live,
        seen: &mut Seen,
        view: Option<&loop_sessions::tmux::PaneView>,
        now: Timestamp,
    ) -> PaneLook {
        let Some(view) = view else { return PaneLook { gone: true, ..PaneLook::default() } };
        let signs = session.ours.then(|| self.harness.pane_signs()).flatten();
        let input_box = session.ours.then(|| self.harness.input_box()).flatten();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        match signs {
            Some(signs) => signs.output(&view.screen, input_box).hash(&mut hasher),
            None => view.screen.hash(&mut hasher),
        }
        let screen = hasher.finish();
        let changed = std::mem::replace(&mut seen.screen, screen) != screen;
        let at_input = input_box.is_some_and(|signs| signs.input_box(&view.screen).is_some());
        PaneLook {
            gone: view.dead,
            shell: view.at_shell(),
            changed,
            at_input,
            dialog: signs.and_then(|signs| signs.dialog(&view.screen)),
            limit: signs.and_then(|signs| signs.limit(&view.screen, now, &zone_of)),
            limit_dialog: signs.is_some_and(|signs| signs.limit_dialog(&view.screen)),
        }
    }
}

/// Every agent as `status` shows it, by work item then session.
fn rows(seen: &HashMap<String, Seen>) -> Vec<AgentRow> {
    let mut rows: Vec<AgentRow> = seen
        .iter()
        .map(|(target, seen)| AgentRow {
            work_item: seen.item.to_string(),
            tmux_target: target.clone(),
            state: seen.tracked.state.name().to_owned(),
            since: seen.tracked.since,
            detail: seen.tracked.in_words(),
            needs_attention: seen.tracked.state.needs_attention(),
        })
        .collect();
    rows.sort_by(|a, b| (&a.work_item, &a.tmux_target).cmp(&(&b.work_item, &b.tmux_target)));
    rows
}

/// The zone a limit notice names, from the system's time-zone database; none named: the
/// machine's own.
pub fn zone_of(name: Option<&str>) -> Option<jiff::tz::TimeZone> {
    match name {
        None => Some(jiff::tz::TimeZone::system()),
        Some(name) => jiff::tz::TimeZone::get(name).ok(),
    }
}

/// The `agent.state` line for `state`.
fn state_line(item: &WorkItemRef, target: &str, state: &AgentState, by: &str) -> Line {
    let line = Line::info(Kind::AgentState)
        .work_item(item)
        .field("tmux_target", target)
        .field("state", state.name())
        .field("seen_by", by);
    match state {
        AgentState::NeedsPermission(asked) => {
            line.field("tool", &asked.tool).field("input", &asked.input)
        }
        AgentState::Limited { until, notice } => {
            let line = line.field("notice", notice);
            match until {
                Some(until) => line.field("until", until.to_string()),
                None => line,
            }
        }
        _ => line,
    }
}
