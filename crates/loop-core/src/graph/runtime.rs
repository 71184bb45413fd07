//! The runtime's verbs as pure functions over the state file: [`start`] (a spawn enters
//! the start node), [`advance`] (an event crosses one node boundary), [`complete`] (the
//! session's claim). Each mutates the [`WorkItemState`] it is handed and returns a
//! [`Report`]: the event-log lines and the entry effects to carry out. The caller saves
//! the state before it carries out the effects, so a crash in between leaves the pointer
//! where the effects say it is, and a retry re-runs only what is idempotent.
//!
//! The one rule (docs/process-graph.md): nothing moves the pointer but an exit chain that
//! evaluated. A wait parks, a block records its messages (and escalates when it repeats
//! or the node has used its attempts), a pass takes the declared edge for the outcome.

use jiff::Timestamp;
use serde_json::json;

use crate::log::{Kind, Line};

use super::hooks::{self, Effect, GateFacts, GateInput, Selection, Status, Verdict};
use super::model::{Actor, Hook, Loop, Node};
use super::state::{Completion, Parked, WorkItemState};
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
/// assignments) and the execute keyword (for the checklist).
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    pub work_item: &'a crate::WorkItemRef,
    pub id: &'a str,
    pub execute_keyword: &'a str,
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
    let record = state.nodes.entry(node.id.clone()).or_default();
    record.entered_at.get_or_insert(now);
    record.attempts += 1;
    record.outcome.clear();
    record.exited_at = None;
    record.last_block = None;
    state.current_node = node.id.clone();
    state.parked = None;
    let at = now.strftime("%Y-%m-%d %H:%M UTC").to_string();
    report.effects.extend(hooks::entry_effects(node, graph, item.id, &at, item.execute_keyword));
    if node.actor == Actor::Human {
        report.messages.push(format!("`{}` waits for a human decision", node.id));
    }
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
        let item =
            Item { work_item: &reference, id: "issue-15", execute_keyword: "the-loop execute" };
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
        let item =
            Item { work_item: &reference, id: "issue-15", execute_keyword: "the-loop execute" };
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
        let item = Item { work_item: &reference, id: "issue-15", execute_keyword: "x" };
        let again = start(LoopName::WorkItem.graph(), &mut state, item, now());
        assert_eq!((again.step, again.changed), (Step::AlreadyStarted, false));
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
        let item =
            Item { work_item: &reference, id: "issue-15", execute_keyword: "the-loop execute" };
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
        let item =
            Item { work_item: &reference, id: "issue-15", execute_keyword: "the-loop execute" };
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
}
