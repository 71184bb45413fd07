//! The runtime's verbs as pure functions over the state file: [`start`] (a spawn enters
//! the start node), [`advance`] (an event crosses one node boundary), [`complete`] (the
//! session's claim), and the operator's two: [`force`] (move the pointer past a gate)
//! and [`skip`] (declare nodes ahead away). Each mutates the [`WorkItemState`] it is handed and returns a
//! [`Report`]: the event-log lines and the entry effects to carry out. The caller saves
//! the state before it carries out the effects, so a crash in between leaves the pointer
//! where the effects say it is, and a retry re-runs only what is idempotent.
//!
//! The one rule (docs/process-graph.md): nothing moves the pointer but an exit chain that
//! evaluated. A wait parks, a block records its messages (and escalates when it repeats
//! or the node has used its attempts), a pass takes the declared edge for the outcome.
//! The operator's override is the one exception, and it says so: a force moves the
//! pointer and forges no verdict (the node left keeps no outcome, the node entered is
//! marked `forced`, `forced[]` records who, why and what was bypassed), and a skip is a
//! plan for nodes ahead, never an amnesty for one reached.

use jiff::Timestamp;
use serde_json::json;

use crate::log::{Kind, Line};

use super::hooks::{self, Effect, GateFacts, GateInput, Selection, Status, Verdict};
use super::model::{Actor, Hook, Loop, Node};
use super::state::{Completion, Feedback, Parked, WorkItemState};
use crate::login::Login;

/// What one verb did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub step: Step,
    /// The gate's messages (block or wait reasons), for the caller and the prompt.
    pub messages: Vec<String>,
    pub lines: Vec<Line>,
    /// The entry chain of the node entered, in order.
    pub effects: Vec<Effect>,
    /// Whether the state changed (and must be saved).
    pub changed: bool,
}

/// Where a verb left the pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Already entered: start is idempotent.
    AlreadyStarted,
    Started {
        node: String,
    },
    Advanced {
        from: String,
        to: String,
        outcome: String,
    },
    Parked {
        node: String,
    },
    Blocked {
        node: String,
    },
    Escalated {
        node: String,
    },
    /// A pass with no declared edge for its outcome.
    NoEdge {
        node: String,
        outcome: String,
    },
    /// At a terminal node: nothing to advance.
    Terminal {
        node: String,
    },
    /// `complete` refused: the graph was never entered.
    NotStarted,
    /// `complete` for a node the pointer already left: nothing to do.
    AlreadyPast {
        node: String,
    },
    /// `complete` for a node the pointer has not reached.
    NotCurrent {
        node: String,
        current: String,
    },
}

impl Report {
    fn new(step: Step) -> Self {
        Self { step, messages: Vec::new(), lines: Vec::new(), effects: Vec::new(), changed: false }
    }
}

/// The work item the verbs run for: its ref (for lines), its spec id (`issue-<N>`, for
/// assignments), the execute keyword (for the checklist), and whether its session's
/// harness has the-loop's plugin (an assignment then names the node's command; without
/// it, the command's instructions are inline).
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    pub work_item: &'a crate::WorkItemRef,
    pub id: &'a str,
    pub execute_keyword: &'a str,
    pub plugin: bool,
}

/// Enters the start node unless the graph was entered already, and runs its entry chain.
pub fn start(graph: &Loop, state: &mut WorkItemState, item: Item<'_>, now: Timestamp) -> Report {
    if state.entered() {
        return Report::new(Step::AlreadyStarted);
    }
    state.loop_name = graph.name.clone();
    let node = graph.start_node();
    let mut report = Report::new(Step::Started { node: node.id.clone() });
    enter(graph, state, node, item, now, &mut report);
    report.changed = true;
    report.lines.insert(
        0,
        Line::info(Kind::GraphStarted)
            .work_item(item.work_item)
            .field("loop", &graph.name)
            .field("node", &node.id),
    );
    report
}

/// Crosses one boundary: evaluates the current node's exit chain with `input`.
pub fn advance(
    graph: &Loop,
    state: &mut WorkItemState,
    item: Item<'_>,
    input: &GateInput<'_>,
    facts: &dyn GateFacts,
    now: Timestamp,
) -> Report {
    let Some(node) = graph.node(&state.current_node) else {
        return Report::new(Step::NotStarted);
    };
    if node.terminal {
        return Report::new(Step::Terminal { node: node.id.clone() });
    }
    let decided = state.decisions.contains_key(&node.id);
    let verdicts = chain(graph, node, decided, input, facts);
    let line = |kind: Kind| Line::info(kind).work_item(item.work_item).field("node", &node.id);
    let stopped = verdicts.iter().find(|v| !matches!(v.status, Status::Pass | Status::Skip));
    let messages: Vec<String> = stopped.map(|v| v.messages.clone()).unwrap_or_default();
    match stopped.map(|v| (&v.status, v.hook)) {
        Some((Status::Wait, hook)) => {
            let reason = messages.join("; ");
            let mut report = Report::new(Step::Parked { node: node.id.clone() });
            let parked = Parked { node: node.id.clone(), reason: reason.clone(), since: now };
            report.changed = state.parked.as_ref().map(|p| (&p.node, &p.reason))
                != Some((&parked.node, &parked.reason));
            if report.changed {
                state.parked = Some(parked);
                report.lines.push(
                    line(Kind::GraphParked).field("hook", hook.name()).field("reason", reason),
                );
            }
            report.messages = messages;
            report
        }
        Some((_, hook)) => {
            let record = state.nodes.entry(node.id.clone()).or_default();
            let repeated = record.last_block.as_ref() == Some(&messages);
            let escalated = repeated || record.attempts >= node.max_attempts;
            record.last_block = Some(messages.clone());
            let (step, kind) = if escalated {
                (Step::Escalated { node: node.id.clone() }, Kind::GraphEscalated)
            } else {
                (Step::Blocked { node: node.id.clone() }, Kind::GraphBlocked)
            };
            let mut report = Report::new(step);
            report.lines.push(
                Line::warning(kind)
                    .work_item(item.work_item)
                    .field("node", &node.id)
                    .field("hook", hook.name())
                    .field("messages", &messages)
                    .field("attempts", record.attempts),
            );
            report.messages = messages;
            // The same block again changes nothing to save: every comment at a blocked
            // node is judged, and it must not cost the delivery a write.
            report.changed = !repeated;
            report
        }
        None => {
            let outcome = verdicts
                .iter()
                .rev()
                .find_map(|v| v.outcome.clone())
                .unwrap_or_else(|| "pass".to_owned());
            let decided =
                verdicts.iter().find_map(|v| v.decision.as_ref().zip(v.selection.as_ref()));
            let confirmation = decided.map(|(by, selection)| {
                record_selection(state, &node.id, by, selection, now);
                Effect::Comment {
                    hook: Hook::ClassifyPhaseSelection,
                    body: selection.confirmation(graph, by),
                }
            });
            for (into, given) in verdicts.iter().filter_map(|v| v.feedback.as_ref()) {
                record_feedback(state, &node.id, into, &outcome, given, now);
            }
            let mut report = pass(graph, state, node, &outcome, item, now);
            report.effects.splice(0..0, confirmation);
            report
        }
    }
}

/// The session's claim that `node` (default: the current one) is done; then the gate
/// judges it — the claim itself carries no verdict.
pub fn complete(
    graph: &Loop,
    state: &mut WorkItemState,
    item: Item<'_>,
    node: Option<&str>,
    by: &str,
    facts: &dyn GateFacts,
    now: Timestamp,
) -> Report {
    if !state.entered() {
        return Report::new(Step::NotStarted);
    }
    let claimed = node.unwrap_or(&state.current_node).to_owned();
    if claimed != state.current_node {
        let past = state.nodes.get(&claimed).is_some_and(|n| n.exited_at.is_some());
        return Report::new(if past {
            Step::AlreadyPast { node: claimed }
        } else {
            Step::NotCurrent { node: claimed, current: state.current_node.clone() }
        });
    }
    state.completions.insert(claimed, Completion { at: now, by: by.to_owned() });
    let input = GateInput {
        comments: &[],
        authorized: &[],
        execute_keyword: item.execute_keyword,
        checklist: None,
    };
    let mut report = advance(graph, state, item, &input, facts, now);
    report.changed = true;
    report
}

/// Records what the reviewers said at `node` about `into`, each comment once (a gate
/// judged again with the same comments does not record them twice).
fn record_feedback(
    state: &mut WorkItemState,
    node: &str,
    into: &str,
    outcome: &str,
    given: &[(Login, String)],
    now: Timestamp,
) {
    for (by, body) in given {
        let text: String = body.chars().take(Feedback::TEXT_CAP).collect();
        let known = state
            .feedback
            .iter()
            .any(|f| f.node == node && f.into == into && f.by == by.as_str() && f.text == text);
        if !known {
            state.feedback.push(Feedback {
                node: node.to_owned(),
                into: into.to_owned(),
                outcome: outcome.to_owned(),
                by: by.as_str().to_owned(),
                at: now,
                text,
            });
        }
    }
}

/// Records an authorized selection: the decision with its provenance, and each phase it
/// declared away or opted into (which the walk then honours).
fn record_selection(
    state: &mut WorkItemState,
    node: &str,
    by: &Login,
    selection: &Selection,
    now: Timestamp,
) {
    let provenance = json!({"via": selection.via, "by": by.as_str(), "at": now});
    state.decisions.insert(
        node.to_owned(),
        json!({"at": now, "via": "comment", "by": by.as_str(), "ticks": selection.via,
            "skips": selection.skips, "optIns": selection.opt_ins}),
    );
    for id in &selection.skips {
        state.skips.insert(id.clone(), provenance.clone());
    }
    for id in &selection.opt_ins {
        state.opt_ins.insert(id.clone(), provenance.clone());
    }
}

fn chain(
    graph: &Loop,
    node: &Node,
    decided: bool,
    input: &GateInput<'_>,
    facts: &dyn GateFacts,
) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for call in &node.exit {
        let verdict = hooks::judge(call, graph, node, decided, input, facts);
        let stop = !matches!(verdict.status, Status::Pass | Status::Skip);
        verdicts.push(verdict);
        if stop {
            break;
        }
    }
    verdicts
}

/// Leaves `node` on `outcome`: takes the declared edge, walks past nodes declared away
/// (a declared skip, or an opt-in nobody selected), enters the target.
fn pass(
    graph: &Loop,
    state: &mut WorkItemState,
    node: &Node,
    outcome: &str,
    item: Item<'_>,
    now: Timestamp,
) -> Report {
    exit(state, &node.id, outcome, now);
    state.parked = None;
    let Some(mut to) = graph.edge(&node.id, outcome) else {
        state.parked = Some(Parked {
            node: node.id.clone(),
            reason: format!("no declared edge from `{}` on `{outcome}`", node.id),
            since: now,
        });
        let mut report =
            Report::new(Step::NoEdge { node: node.id.clone(), outcome: outcome.to_owned() });
        report.lines.push(
            Line::warning(Kind::GraphNoEdge)
                .work_item(item.work_item)
                .field("node", &node.id)
                .field("outcome", outcome),
        );
        report.changed = true;
        return report;
    };
    let mut skipped = Vec::new();
    while let Some(next) = graph.node(to).filter(|n| declared_away(state, n)) {
        exit(state, &next.id, "skipped", now);
        skipped.push(next.id.clone());
        match graph.edge(&next.id, "skipped") {
            Some(after) => to = after,
            None => break,
        }
    }
    let target = match graph.node(to) {
        Some(target) => target,
        None => unreachable!("compile refuses an edge to an undeclared node"),
    };
    let mut report = Report::new(Step::Advanced {
        from: node.id.clone(),
        to: target.id.clone(),
        outcome: outcome.to_owned(),
    });
    report.lines.push(
        Line::info(Kind::GraphAdvanced)
            .work_item(item.work_item)
            .field("from", &node.id)
            .field("to", &target.id)
            .field("outcome", outcome)
            .field("skipped", &skipped),
    );
    enter(graph, state, target, item, now, &mut report);
    if target.terminal {
        report.lines.push(
            Line::info(Kind::GraphCompleted).work_item(item.work_item).field("node", &target.id),
        );
    }
    report.changed = true;
    report
}

/// A node the walk passes by: declared skipped (and skippable, so the agent-writable
/// file cannot skip a required node), or opt-in and not selected.
fn declared_away(state: &WorkItemState, node: &Node) -> bool {
    (node.skippable && state.skips.contains_key(&node.id))
        || (node.opt_in && !state.opt_ins.contains_key(&node.id))
}

fn exit(state: &mut WorkItemState, node: &str, outcome: &str, now: Timestamp) {
    let record = state.nodes.entry(node.to_owned()).or_default();
    record.outcome = outcome.to_owned();
    record.exited_at = Some(now);
}

fn enter(
    graph: &Loop,
    state: &mut WorkItemState,
    node: &Node,
    item: Item<'_>,
    now: Timestamp,
    report: &mut Report,
) {
    arrive(state, &node.id, now);
    let at = now.strftime("%Y-%m-%d %H:%M UTC").to_string();
    report.effects.extend(hooks::entry_effects(
        node,
        graph,
        item.id,
        &at,
        item.execute_keyword,
        item.plugin,
    ));
    if node.actor == Actor::Human {
        report.messages.push(format!("`{}` waits for a human decision", node.id));
    }
}

/// Puts the pointer at `node`: a new attempt there, nothing parked.
fn arrive(state: &mut WorkItemState, node: &str, now: Timestamp) {
    let record = state.nodes.entry(node.to_owned()).or_default();
    record.entered_at.get_or_insert(now);
    record.attempts += 1;
    record.outcome.clear();
    record.exited_at = None;
    record.last_block = None;
    state.current_node = node.to_owned();
    state.parked = None;
}

/// Why an operator's verb was refused; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("a reason is required: an unexplained override is refused")]
    NoReason,
    #[error("name at least one node or skip set to declare skipped")]
    NothingNamed,
    #[error("`{node}` is not a node of {graph}")]
    UnknownNode { node: String, graph: String, known: Vec<String> },
}

impl crate::hint::Hint for Refused {
    fn hint(&self) -> Option<String> {
        Some(match self {
            Refused::NoReason => {
                "say why in the reason: it is recorded in the state file and posted on the work item"
                    .to_owned()
            }
            Refused::NothingNamed => "name skippable nodes or skip sets (`the-loop graph check` lists the nodes)".to_owned(),
            Refused::UnknownNode { known, .. } => format!("its nodes: {}", known.join(", ")),
        })
    }
}

/// What a force did: the pointer moved from `from` to `to`.
#[derive(Debug, Clone, PartialEq)]
pub struct Forced {
    pub from: String,
    pub to: String,
    pub reason: String,
    /// What the move bypasses: an undeclared edge, a required gate never passed.
    pub warnings: Vec<String>,
    pub lines: Vec<Line>,
    /// The audit comment to post on the work item (self-marked by the poster).
    pub audit: String,
    /// What entering `to` does, as any move into it: its entry chain's label,
    /// assignment, comments.
    pub effects: Vec<Effect>,
}

/// The operator's override (`the-loop graph force`, `POST /api/v1/graph/force`): moves
/// the pointer to `to`, whatever the gates say, and forges no verdict — the node left
/// keeps the outcome it had (none), the node entered is marked `forced`, and `forced[]`
/// records who moved it, why, and what was bypassed. `to` is entered as any move enters
/// a node: its entry chain runs (its `loop:*` label, the assignment pasted into the
/// session), after the audit comment that says why. A graph never entered is forced
/// from its start node.
pub fn force(
    graph: &Loop,
    state: &mut WorkItemState,
    item: Item<'_>,
    to: &str,
    reason: &str,
    by: &str,
    now: Timestamp,
) -> Result<Forced, Refused> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Refused::NoReason);
    }
    let Some(target) = graph.node(to) else { return Err(unknown(graph, to)) };
    let from = if state.entered() { state.current_node.clone() } else { graph.start.clone() };
    let warnings = bypassed(graph, state, &from, &target.id);
    if state.loop_name.is_empty() {
        state.loop_name = graph.name.clone();
    }
    if state.entered() && from != target.id {
        // Left, with no outcome: its gate never passed and the file does not say it did.
        state.nodes.entry(from.clone()).or_default().exited_at = Some(now);
    }
    arrive(state, &target.id, now);
    state.nodes.entry(target.id.clone()).or_default().forced = true;
    state.forced.push(json!({"from": from, "to": target.id, "reason": reason, "actor": by,
        "at": now, "warnings": warnings}));
    let line = Line::warning(Kind::GraphForced)
        .work_item(item.work_item)
        .field("from", &from)
        .field("to", &target.id)
        .field("actor", by)
        .field("reason", reason)
        .field("warnings", &warnings);
    let bullets: String = warnings.iter().map(|w| format!("\n- ⚠️ {w}")).collect();
    let audit = format!(
        "**Forced transition:** `{from}` → `{to}` by {by}\n\n**Reason:** {reason}{bullets}\n\n\
         This moved the pointer only. The gate of `{from}` keeps its real verdict, and `{to}` \
         is marked forced in `the-loop graph check`.",
        to = target.id
    );
    let at = now.strftime("%Y-%m-%d %H:%M UTC").to_string();
    let effects =
        hooks::entry_effects(target, graph, item.id, &at, item.execute_keyword, item.plugin);
    Ok(Forced {
        from,
        to: target.id.clone(),
        reason: reason.to_owned(),
        warnings,
        lines: vec![line],
        audit,
        effects,
    })
}

/// What forcing from `from` to `to` goes around: an edge the loop does not declare, and
/// each required node whose gate it leaves unpassed (`from` itself, and the nodes
/// declared between the two on a forward move).
fn bypassed(graph: &Loop, state: &WorkItemState, from: &str, to: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    if !graph.edges.iter().any(|e| e.from == from && e.to == to) {
        warnings.push(format!(
            "`{from}` → `{to}` is not a declared edge: the item is deliberately outside its loop's model"
        ));
    }
    if from == to {
        return warnings;
    }
    let at = |id: &str| graph.nodes.iter().position(|n| n.id == id);
    // A pointer the file names but the loop does not have bypasses nothing it declares.
    let Some(start) = at(from) else { return warnings };
    let end = at(to).unwrap_or(start);
    let passed = |id: &str| state.nodes.get(id).is_some_and(|r| !r.outcome.is_empty());
    let between = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(n, node)| *n == start || (start < *n && *n < end && !passed(&node.id)));
    for (_, node) in between.filter(|(_, node)| node.required) {
        warnings.push(format!(
            "`{}` is required: this force bypasses a gate the process treats as mandatory",
            node.id
        ));
    }
    warnings
}

fn unknown(graph: &Loop, node: &str) -> Refused {
    Refused::UnknownNode {
        node: node.to_owned(),
        graph: graph.name.clone(),
        known: graph.nodes.iter().map(|n| n.id.clone()).collect(),
    }
}

/// A token a skip declaration refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub token: String,
    pub why: String,
}

/// What a skip declaration did.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// The nodes now declared skipped, in the order named.
    pub declared: Vec<String>,
    pub rejected: Vec<Rejection>,
    pub reason: String,
    /// What did not happen as it should have; empty here, the audit comment's failure
    /// where it is carried out.
    pub warnings: Vec<String>,
    pub lines: Vec<Line>,
    /// The audit comment to post (when anything was declared).
    pub audit: Option<String>,
}

/// The operator's skip declaration (`the-loop graph skip`, `POST /api/v1/graph/skip`):
/// each of `tokens` — a skippable node or a skip set's name — is recorded in `skips` with
/// its provenance (`via`, `token`, `by`, `reason`, `at`), and the walk passes it when it
/// gets there. Refused per token: anything outside the loop's skip vocabulary (a required
/// node is not in it), and a node the pointer is at, has entered, or has left behind — a
/// skip is a plan, not an amnesty. A node already declared keeps its first provenance.
#[allow(clippy::too_many_arguments)]
pub fn skip(
    graph: &Loop,
    state: &mut WorkItemState,
    item: Item<'_>,
    tokens: &[String],
    reason: &str,
    by: &str,
    via: &str,
    now: Timestamp,
) -> Result<Declared, Refused> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Refused::NoReason);
    }
    let tokens: Vec<&str> = tokens.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).collect();
    if tokens.is_empty() {
        return Err(Refused::NothingNamed);
    }
    let current = graph.nodes.iter().position(|n| n.id == state.current_node);
    let (mut declared, mut rejected) = (Vec::<String>::new(), Vec::new());
    for token in tokens {
        let named: Vec<&Node> = match graph.skip_sets.iter().find(|(set, _)| set == token) {
            Some((_, members)) => members.iter().filter_map(|id| graph.node(id)).collect(),
            None => match graph.node(token) {
                Some(node) if node.skippable => vec![node],
                Some(_) => {
                    let why = "not skippable: it always runs".to_owned();
                    rejected.push(Rejection { token: token.to_owned(), why });
                    continue;
                }
                None => {
                    let why = format!("not a node or skip set of {}", graph.name);
                    rejected.push(Rejection { token: token.to_owned(), why });
                    continue;
                }
            },
        };
        for node in named {
            let n = graph.nodes.iter().position(|other| other.id == node.id);
            let reached = state.nodes.get(&node.id).is_some_and(|r| r.entered_at.is_some())
                || current.is_some_and(|c| n.is_some_and(|n| n <= c));
            if reached {
                let why = "already entered or behind the pointer: a skip is a plan, not an amnesty";
                rejected.push(Rejection { token: node.id.clone(), why: why.to_owned() });
                continue;
            }
            if declared.contains(&node.id) {
                continue;
            }
            if !state.skips.contains_key(&node.id) {
                state.skips.insert(
                    node.id.clone(),
                    json!({"via": via, "token": token, "by": by, "reason": reason, "at": now}),
                );
            }
            declared.push(node.id.clone());
        }
    }
    if !declared.is_empty() && state.loop_name.is_empty() {
        state.loop_name = graph.name.clone();
    }
    let mut lines = Vec::new();
    if !declared.is_empty() {
        lines.push(
            Line::info(Kind::GraphSkipsDeclared)
                .work_item(item.work_item)
                .field("via", via)
                .field("actor", by)
                .field("reason", reason)
                .field("nodes", &declared),
        );
    }
    for rejection in &rejected {
        lines.push(
            Line::warning(Kind::GraphSkipsRejected)
                .work_item(item.work_item)
                .field("token", &rejection.token)
                .field("via", via)
                .field("why", &rejection.why),
        );
    }
    let audit = (!declared.is_empty()).then(|| {
        let nodes: Vec<String> = declared.iter().map(|id| format!("`{id}`")).collect();
        format!(
            "**Declared skips:** {} declared skipped by {by}\n\n**Reason:** {reason}\n\n\
             A declaration, not a verdict: `the-loop graph check` reports each as skipped, \
             the nodes that are not skippable still run, and the walk passes the named \
             ones when it reaches them.",
            nodes.join(", ")
        )
    });
    Ok(Declared {
        declared,
        rejected,
        reason: reason.to_owned(),
        warnings: Vec::new(),
        lines,
        audit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::LoopName;
    use crate::graph::hooks::{Comment, Files};
    use crate::login::Login;

    fn now() -> Timestamp {
        "2026-12-01T10:00:00Z".parse().unwrap()
    }

    fn work_item() -> crate::WorkItemRef {
        "github:octo/app#15".parse().unwrap()
    }

    fn run(
        graph: LoopName,
        state: &mut WorkItemState,
        comments: &[Comment],
        files: &Files,
    ) -> Report {
        let reference = work_item();
        let item = Item {
            work_item: &reference,
            id: "issue-15",
            execute_keyword: "the-loop execute",
            plugin: true,
        };
        let authorized: Vec<Login> = vec!["ann".parse().unwrap()];
        let input = GateInput {
            comments,
            authorized: &authorized,
            execute_keyword: "the-loop execute",
            checklist: None,
        };
        advance(graph.graph(), state, item, &input, files, now())
    }

    fn started(graph: LoopName) -> (WorkItemState, Report) {
        let mut state = WorkItemState::new("github:octo/app#15", "");
        let reference = work_item();
        let item = Item {
            work_item: &reference,
            id: "issue-15",
            execute_keyword: "the-loop execute",
            plugin: true,
        };
        let report = start(graph.graph(), &mut state, item, now());
        (state, report)
    }

    fn said(body: &str) -> Comment {
        Comment { author: "ann".parse().unwrap(), body: body.to_owned(), self_authored: false }
    }

    #[test]
    fn start_enters_the_start_node_once_and_runs_its_entry_chain() {
        let (mut state, report) = started(LoopName::WorkItem);
        assert_eq!(report.step, Step::Started { node: "phase-selection".into() });
        assert_eq!(state.current_node, "phase-selection");
        assert_eq!(state.loop_name, "pdlc-work-item-loop");
        assert!(
            matches!(&report.effects[0], Effect::PhaseLabel { phase } if phase == "phase-selection")
        );
        assert!(report.effects.iter().any(
            |e| matches!(e, Effect::Checklist { body } if body.contains(hooks::CHECKLIST_MARKER))
        ));
        assert!(report.effects.iter().any(|e| matches!(e, Effect::Assignment { .. })));
        let reference = work_item();
        let item =
            Item { work_item: &reference, id: "issue-15", execute_keyword: "x", plugin: true };
        let again = start(LoopName::WorkItem.graph(), &mut state, item, now());
        assert_eq!((again.step, again.changed), (Step::AlreadyStarted, false));
    }

    #[test]
    fn an_approval_gate_records_each_reviewers_words_into_the_state_file_once() {
        let mut state = WorkItemState::new("github:octo/app#15", "pdlc-work-item-loop");
        state.current_node = "design-approval".into();
        let none = Files(vec![]);
        let outsider = Comment {
            author: "mallory".parse().unwrap(),
            body: "approved".into(),
            self_authored: false,
        };
        let given = [outsider, said("approved, but nit: name the cache `Ledger`")];
        let moved = run(LoopName::WorkItem, &mut state, &given, &none);
        assert!(
            matches!(moved.step, Step::Advanced { ref outcome, .. } if outcome == "approved-with-comments")
        );
        let recorded: Vec<(&str, &str, &str)> = state
            .feedback
            .iter()
            .map(|f| (f.into.as_str(), f.by.as_str(), f.outcome.as_str()))
            .collect();
        assert_eq!(
            recorded,
            [
                ("design.md", "ann", "approved-with-comments"),
                ("testing-plan.md", "ann", "approved-with-comments")
            ],
            "every `record-feedback` of the chain, the authorized reviewer only"
        );
        assert!(state.feedback[0].text.contains("`Ledger`"));
        // Judged again with the same comment (it came back to the same gate): not twice.
        state.current_node = "design-approval".into();
        run(LoopName::WorkItem, &mut state, &given, &none);
        assert_eq!(state.feedback.len(), 2);
    }

    #[test]
    fn execute_at_phase_selection_moves_to_the_first_selected_phase_past_unselected_opt_ins() {
        let (mut state, _) = started(LoopName::WorkItem);
        let none = Files(vec![]);
        let waiting = run(LoopName::WorkItem, &mut state, &[said("looks fine")], &none);
        assert_eq!(waiting.step, Step::Parked { node: "phase-selection".into() });
        assert_eq!(state.current_node, "phase-selection", "a wait never moves the pointer");

        let moved = run(LoopName::WorkItem, &mut state, &[said("the-loop execute")], &none);
        assert_eq!(
            moved.step,
            Step::Advanced {
                from: "phase-selection".into(),
                to: "brainstorming".into(),
                outcome: "selected".into()
            }
        );
        assert!(state.decisions.contains_key("phase-selection"));
        assert!(
            matches!(&moved.effects[0], Effect::Comment { body, .. } if body.contains("Phase selection recorded") && body.contains("by @ann")),
            "the confirmation first: {:?}",
            moved.effects
        );
        assert!(
            matches!(&moved.effects[1], Effect::PhaseLabel { phase } if phase == "brainstorming")
        );
    }

    #[test]
    fn a_comment_at_a_blocked_node_escalates_and_the_same_block_again_saves_nothing() {
        let (mut state, _) = started(LoopName::WorkItem);
        run(LoopName::WorkItem, &mut state, &[said("the-loop execute")], &Files(vec![]));
        let first = run(LoopName::WorkItem, &mut state, &[said("also X")], &Files(vec![]));
        assert_eq!(
            (first.step, first.changed),
            (Step::Blocked { node: "brainstorming".into() }, true)
        );
        let saved = state.clone();
        let again = run(LoopName::WorkItem, &mut state, &[said("and Y")], &Files(vec![]));
        assert_eq!(again.step, Step::Escalated { node: "brainstorming".into() });
        assert!(!again.changed, "nothing to save");
        assert_eq!(state, saved);
    }

    #[test]
    fn a_claim_with_the_artifact_missing_blocks_then_escalates_when_repeated_and_a_valid_one_advances()
     {
        let (mut state, _) = started(LoopName::WorkItem);
        run(LoopName::WorkItem, &mut state, &[said("the-loop execute")], &Files(vec![]));
        let reference = work_item();
        let item = Item {
            work_item: &reference,
            id: "issue-15",
            execute_keyword: "the-loop execute",
            plugin: true,
        };
        let graph = LoopName::WorkItem.graph();
        let blocked = complete(graph, &mut state, item, None, "agent", &Files(vec![]), now());
        assert_eq!(blocked.step, Step::Blocked { node: "brainstorming".into() });
        assert_eq!(blocked.messages, ["brainstorm.md is missing from the spec folder"]);
        let again = complete(graph, &mut state, item, None, "agent", &Files(vec![]), now());
        assert_eq!(again.step, Step::Escalated { node: "brainstorming".into() });
        assert_eq!(state.current_node, "brainstorming", "escalation leaves the pointer");

        let good =
            "---\nstatus: approved\n---\n## Problem / opportunity\nx\n## Open questions\nnone\n";
        let files = Files(vec![("brainstorm.md", good)]);
        let advanced = complete(graph, &mut state, item, None, "agent", &files, now());
        assert_eq!(
            advanced.step,
            Step::Advanced {
                from: "brainstorming".into(),
                to: "requirements-definition".into(),
                outcome: "pass".into()
            }
        );
        let past = complete(graph, &mut state, item, Some("brainstorming"), "agent", &files, now());
        assert_eq!(past.step, Step::AlreadyPast { node: "brainstorming".into() });
        let ahead = complete(graph, &mut state, item, Some("design"), "agent", &files, now());
        assert!(matches!(ahead.step, Step::NotCurrent { .. }));
    }

    #[test]
    fn the_adhoc_loop_goes_from_work_to_review_to_complete_on_done() {
        let (mut state, report) = started(LoopName::AdHoc);
        assert!(
            matches!(&report.effects[0], Effect::PhaseLabel { phase } if phase == "implementation")
        );
        let reference = work_item();
        let item = Item {
            work_item: &reference,
            id: "issue-15",
            execute_keyword: "the-loop execute",
            plugin: true,
        };
        let none = Files(vec![]);
        let claimed =
            complete(LoopName::AdHoc.graph(), &mut state, item, None, "agent", &none, now());
        assert_eq!(
            claimed.step,
            Step::Advanced { from: "work".into(), to: "review".into(), outcome: "pass".into() }
        );
        let done = run(LoopName::AdHoc, &mut state, &[said("done, thanks")], &none);
        assert_eq!(
            done.step,
            Step::Advanced { from: "review".into(), to: "complete".into(), outcome: "done".into() }
        );
        assert!(done.lines.iter().any(|l| l.kind() == Kind::GraphCompleted));
        assert!(matches!(&done.effects[0], Effect::PhaseLabel { phase } if phase == "complete"));
        assert_eq!(
            run(LoopName::AdHoc, &mut state, &[said("more")], &none).step,
            Step::Terminal { node: "complete".into() }
        );
    }

    #[test]
    fn a_contribution_without_a_goal_waits_at_goal_definition_blocked_by_the_stub() {
        let (mut state, report) = started(LoopName::Contribution);
        assert_eq!(report.step, Step::Started { node: "goal-definition".into() });
        let blocked = run(LoopName::Contribution, &mut state, &[said("Goal: x")], &Files(vec![]));
        assert!(matches!(blocked.step, Step::Blocked { .. }), "{:?}", blocked.step);
        assert_eq!(state.current_node, "goal-definition");
    }

    #[test]
    fn an_execute_reply_carrying_ticks_records_them_and_the_walk_honours_them() {
        let (mut state, _) = started(LoopName::WorkItem);
        let reply = "the-loop execute\n- [ ] brainstorming\n- [ ] requirements-definition";
        let moved = run(LoopName::WorkItem, &mut state, &[said(reply)], &Files(vec![]));
        assert!(
            matches!(&moved.step, Step::Advanced { to, .. } if to == "requirements-approval"),
            "{:?}",
            moved.step
        );
        assert_eq!(state.skips["brainstorming"]["via"], "reply");
        assert_eq!(state.decisions["phase-selection"]["skips"][1], "requirements-definition");
    }

    #[test]
    fn declared_skips_count_only_for_skippable_nodes() {
        let (mut state, _) = started(LoopName::WorkItem);
        state.skips.insert("brainstorming".into(), json!({"via": "comment"}));
        state.skips.insert("phase-selection".into(), json!({"via": "forged"}));
        let moved =
            run(LoopName::WorkItem, &mut state, &[said("the-loop execute")], &Files(vec![]));
        assert_eq!(
            moved.step,
            Step::Advanced {
                from: "phase-selection".into(),
                to: "requirements-definition".into(),
                outcome: "selected".into()
            }
        );
        assert_eq!(state.nodes["brainstorming"].outcome, "skipped");
    }

    fn operator_item(reference: &crate::WorkItemRef) -> Item<'_> {
        Item {
            work_item: reference,
            id: "issue-15",
            execute_keyword: "the-loop execute",
            plugin: true,
        }
    }

    #[test]
    fn a_force_moves_the_pointer_marks_the_node_entered_and_forges_no_verdict() {
        let (mut state, _) = started(LoopName::WorkItem);
        let reference = work_item();
        let graph = LoopName::WorkItem.graph();
        let item = operator_item(&reference);
        assert_eq!(
            force(graph, &mut state, item, "design", "  ", "ann", now()),
            Err(Refused::NoReason)
        );
        assert!(matches!(
            force(graph, &mut state, item, "nowhere", "why", "ann", now()),
            Err(Refused::UnknownNode { .. })
        ));
        assert_eq!(state.current_node, "phase-selection", "a refusal changes nothing");

        let forced =
            force(graph, &mut state, item, "design", "spec agreed offline", "ann", now()).unwrap();
        assert_eq!((forced.from.as_str(), forced.to.as_str()), ("phase-selection", "design"));
        assert_eq!(state.current_node, "design");
        assert!(state.nodes["design"].forced);
        assert_eq!(state.nodes["phase-selection"].outcome, "", "no verdict forged");
        assert!(state.nodes["phase-selection"].exited_at.is_some());
        assert!(
            forced.warnings.iter().any(|w| w.contains("not a declared edge")),
            "{:?}",
            forced.warnings
        );
        assert!(forced.warnings.iter().any(|w| w.contains("`phase-selection` is required")));
        let record = &state.forced[0];
        assert_eq!(
            (&record["from"], &record["to"], &record["actor"], &record["reason"]),
            (
                &json!("phase-selection"),
                &json!("design"),
                &json!("ann"),
                &json!("spec agreed offline")
            )
        );
        assert_eq!(forced.lines[0].kind(), Kind::GraphForced);
        assert!(forced.audit.contains("`phase-selection` → `design` by ann"), "{}", forced.audit);
        // The node left cannot be claimed any more; the forced one is judged as usual.
        let files = Files(vec![]);
        let past = complete(graph, &mut state, item, Some("phase-selection"), "x", &files, now());
        assert_eq!(past.step, Step::AlreadyPast { node: "phase-selection".into() });
        let context = crate::graph::context::node_checks(graph, Some(&state));
        assert!(context.iter().any(|row| row.node == "design" && row.forced));
    }

    #[test]
    fn a_skip_declares_nodes_ahead_and_refuses_what_is_reached_or_not_skippable() {
        let (mut state, _) = started(LoopName::WorkItem);
        run(LoopName::WorkItem, &mut state, &[said("the-loop execute")], &Files(vec![]));
        assert_eq!(state.current_node, "brainstorming");
        let reference = work_item();
        let graph = LoopName::WorkItem.graph();
        let item = operator_item(&reference);
        let tokens = |list: &[&str]| list.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            skip(graph, &mut state, item, &tokens(&[" "]), "why", "ann", "cli", now()),
            Err(Refused::NothingNamed)
        );
        let declared = skip(
            graph,
            &mut state,
            item,
            &tokens(&["review-chain", "brainstorming", "phase-selection", "bogus"]),
            "a one-line fix",
            "ann",
            "cli",
            now(),
        )
        .unwrap();
        assert_eq!(
            declared.declared,
            [
                "self-review",
                "critic-review",
                "security-review",
                "evidence",
                "capability-docs",
                "reviewer-briefing"
            ]
        );
        let refused: Vec<(&str, &str)> =
            declared.rejected.iter().map(|r| (r.token.as_str(), r.why.as_str())).collect();
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[0].0 == "brainstorming" && refused[0].1.contains("not an amnesty"));
        assert!(refused[1].0 == "phase-selection" && refused[1].1.contains("not skippable"));
        assert!(refused[2].0 == "bogus" && refused[2].1.contains("not a node or skip set"));
        assert_eq!(state.skips["security-review"]["token"], "review-chain");
        assert_eq!(state.skips["security-review"]["via"], "cli");
        assert_eq!(state.skips["security-review"]["reason"], "a one-line fix");
        let kinds: Vec<Kind> = declared.lines.iter().map(Line::kind).collect();
        assert_eq!(kinds[0], Kind::GraphSkipsDeclared);
        assert_eq!(kinds[1..], [Kind::GraphSkipsRejected; 3]);
        assert!(declared.audit.as_deref().is_some_and(|a| a.contains("`evidence`")));

        // Only rejections: nothing declared, no comment.
        let none = skip(graph, &mut state, item, &tokens(&["bogus"]), "x", "ann", "cli", now());
        let none = none.unwrap();
        assert!(none.declared.is_empty() && none.audit.is_none());
    }
}
