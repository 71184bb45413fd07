//! The `$graph_context` block every prompt carries (seed 002, issue-148/273): where the
//! work item stands — node, phase, status, the gate's messages, the node's command and the
//! claim instruction. Before the start node is entered (a spawn prompt is rendered before
//! the spawn enters it) the block names the start node as `pending` and forbids beginning
//! a phase before its assignment arrives. No graph at all renders nothing: the caller
//! passes `None` and the prompt is otherwise unchanged.

use super::model::{Actor, Loop};
use super::state::WorkItemState;

/// A node's status as a prompt states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not entered yet.
    Pending,
    InProgress,
    /// A human gate with nothing decisive yet.
    Waiting,
    Parked,
    Blocked,
    /// Blocked with its attempts used up.
    Escalated,
    /// A terminal node.
    Complete,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in-progress",
            Status::Waiting => "waiting",
            Status::Parked => "parked",
            Status::Blocked => "blocked",
            Status::Escalated => "escalated",
            Status::Complete => "complete",
        }
    }
}

/// The status of the node `state` is at (the start node when never entered).
pub fn status(graph: &Loop, state: &WorkItemState) -> Status {
    let Some(node) = graph.node(&state.current_node) else { return Status::Pending };
    let record = state.nodes.get(&node.id);
    if node.terminal {
        return Status::Complete;
    }
    if record.and_then(|r| r.last_block.as_ref()).is_some_and(|b| !b.is_empty()) {
        let used = record.is_some_and(|r| r.attempts >= node.max_attempts);
        return if used { Status::Escalated } else { Status::Blocked };
    }
    match (&state.parked, node.actor) {
        (Some(_), Actor::Human) => Status::Waiting,
        (Some(_), _) => Status::Parked,
        _ => Status::InProgress,
    }
}

/// Renders the block for work item `id` (`issue-<N>`) walking `graph`; `plugin`: the
/// session's harness has the-loop's plugin, so the node's command is named as a slash
/// command (without it, the assignment carries the instructions and the block says so).
pub fn render(graph: &Loop, state: Option<&WorkItemState>, id: &str, plugin: bool) -> String {
    let entered = state.filter(|s| graph.node(&s.current_node).is_some());
    let node =
        entered.and_then(|s| graph.node(&s.current_node)).unwrap_or_else(|| graph.start_node());
    let status = entered.map_or(Status::Pending, |s| status(graph, s));
    let mut out = format!("## Process graph\n\nLoop `{}`, node `{}`", graph.name, node.id);
    if let Some(phase) = &node.phase {
        out.push_str(&format!(", phase `{phase}`"));
    }
    out.push_str(&format!(" ({} node), status: {}.\n", node.actor.as_str(), status.as_str()));
    if status == Status::Pending {
        out.push_str(
            "Not entered yet: do not start a phase, write artifacts, set labels or open a pull \
request before this node's assignment arrives. If no assignment arrives, say so on the work \
item.\n",
        );
        if node.actor == Actor::Human {
            out.push_str("This first node is a human's decision: wait for it.\n");
        }
        return out;
    }
    if let Some(state) = entered {
        let block = state.nodes.get(&node.id).and_then(|r| r.last_block.as_ref());
        for message in block.into_iter().flatten() {
            out.push_str(&format!("- gate: {message}\n"));
        }
        if let Some(parked) = state.parked.as_ref().filter(|p| p.node == node.id) {
            out.push_str(&format!("- waiting: {}\n", parked.reason));
        }
    }
    match (&node.command, plugin) {
        (Some(command), true) => {
            out.push_str(&format!("Command for this node: `/the-loop:{command} {id}`.\n"))
        }
        (Some(command), false) => out.push_str(&format!(
            "This node's instructions (the `{command}` command) are in its assignment.\n"
        )),
        (None, _) => {}
    }
    match (node.actor, status) {
        (_, Status::Complete) => out.push_str("The process is complete.\n"),
        (Actor::Agent, _) => out.push_str(&format!(
            "When this node's work is done, run `the-loop graph complete` (in this session it \
names {id}'s work item); its gate decides.\n"
        )),
        _ => out.push_str("This node is a human's decision: do not claim it.\n"),
    }
    out
}

/// One node as `check` reports it (the control plane's `graph/check` rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCheck {
    pub node: String,
    pub status: NodeStatus,
    /// What its exit chain gave when it was left; `""` otherwise.
    pub outcome: String,
    /// The current node's gate messages: the last block's, or why it waits.
    pub messages: Vec<String>,
    pub forced: bool,
    pub attempts: u32,
}

/// Where a node stands in a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Left with an outcome of its gate's.
    Passed,
    /// Left as declared skipped, or declared away and not reached yet.
    Skipped,
    /// The node the item is at.
    At(Status),
    NotReached,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Passed => "pass",
            NodeStatus::Skipped => "skipped",
            NodeStatus::At(status) => status.as_str(),
            NodeStatus::NotReached => "not-reached",
        }
    }
}

/// Every node of `graph` in declaration order, as `state` has it.
pub fn node_checks(graph: &Loop, state: Option<&WorkItemState>) -> Vec<NodeCheck> {
    let current = state.map(|s| s.current_node.as_str()).unwrap_or_default();
    let declared_away = |node: &super::model::Node| {
        state.is_some_and(|s| {
            (node.skippable && s.skips.contains_key(&node.id))
                || (node.opt_in && !s.opt_ins.contains_key(&node.id))
        })
    };
    graph
        .nodes
        .iter()
        .map(|node| {
            let record = state.and_then(|s| s.nodes.get(&node.id));
            let outcome = record.map(|r| r.outcome.clone()).unwrap_or_default();
            let (status, messages) = match (state, record) {
                (Some(s), _) if node.id == current => {
                    let block = record.and_then(|r| r.last_block.clone()).unwrap_or_default();
                    let waiting = s.parked.iter().filter(|p| p.node == node.id);
                    let messages = block.into_iter().chain(waiting.map(|p| p.reason.clone()));
                    (NodeStatus::At(status(graph, s)), messages.collect())
                }
                (_, Some(_)) if outcome == "skipped" => (NodeStatus::Skipped, Vec::new()),
                (_, Some(_)) if !outcome.is_empty() => (NodeStatus::Passed, Vec::new()),
                _ if declared_away(node) => (NodeStatus::Skipped, Vec::new()),
                _ => (NodeStatus::NotReached, Vec::new()),
            };
            NodeCheck {
                node: node.id.clone(),
                status,
                outcome,
                messages,
                forced: record.is_some_and(|r| r.forced),
                attempts: record.map_or(0, |r| r.attempts),
            }
        })
        .collect()
}

/// The work-items listing's `graph` section for a work item whose state file is `state`
/// (reference §1.4: `{loop, workItem, sessionPerPr?, nodes[{id, phase, skipped,
/// selectable, optIn}]}`), derived — never stored (seed 003 R4): the compiled loop, with
/// `skipped` for each node the walk passes or passed by (a declared skip, an opt-in
/// nobody selected). It adds where the item is: `currentNode` and its `phase` (the
/// `loop:<phase>` label's suffix, `null` for a node without one), and the reviewers'
/// feedback its gates recorded (`feedback`, when any).
pub fn listing(graph: &Loop, state: &WorkItemState, id: &str) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = graph
        .nodes
        .iter()
        .zip(node_checks(graph, Some(state)))
        .map(|(node, row)| {
            serde_json::json!({
                "id": node.id,
                "phase": node.phase,
                "skipped": row.status == NodeStatus::Skipped,
                "selectable": node.skippable,
                "optIn": node.opt_in,
            })
        })
        .collect();
    let phase = graph.node(&state.current_node).and_then(|n| n.phase.clone());
    let mut section = serde_json::json!({
        "loop": graph.name,
        "workItem": id,
        "currentNode": state.current_node,
        "phase": phase,
        "nodes": nodes,
    });
    for (key, value) in [("sessionPerPr", &state.session_per_pr), ("surface", &state.surface)] {
        if !value.is_empty() {
            section[key] = serde_json::Value::from(value.as_str());
        }
    }
    if !state.feedback.is_empty() {
        section["feedback"] = serde_json::json!(state.feedback);
    }
    section
}

/// `the-loop graph check`: every node of `graph` in declaration order — where the item
/// is, what each passed node gave, every gate hook and which of them Tier 0 only stubs —
/// and whether anything up to the current node is unsatisfied (a block there).
pub fn check(graph: &Loop, state: Option<&WorkItemState>) -> (String, bool) {
    use super::model::{Hook, Support};
    let current = state.map(|s| s.current_node.as_str()).unwrap_or_default();
    let mut out = format!("{}\n", graph.name);
    let mut stubs: Vec<Hook> = Vec::new();
    for (node, row) in graph.nodes.iter().zip(node_checks(graph, state)) {
        let mark = if node.id == current { "→" } else { " " };
        let result = match row.status {
            NodeStatus::Passed | NodeStatus::Skipped if !row.outcome.is_empty() => row.outcome,
            NodeStatus::At(status) => status.as_str().to_owned(),
            _ => "not reached yet".to_owned(),
        };
        let gates: Vec<&str> = node.exit.iter().map(|c| c.hook.name()).collect();
        let forced = if row.forced { " (forced)" } else { "" };
        out.push_str(&format!(
            "{mark} {:<22} {:<6} {result}{forced}",
            node.id,
            node.actor.as_str()
        ));
        if !gates.is_empty() {
            out.push_str(&format!("  [{}]", gates.join(", ")));
        }
        out.push('\n');
        for call in node.entry.iter().chain(&node.exit) {
            if call.hook.support() != Support::Implemented && !stubs.contains(&call.hook) {
                stubs.push(call.hook);
            }
        }
    }
    if !stubs.is_empty() {
        out.push_str("\nnot implemented in this version (Tier 0):\n");
        for hook in stubs {
            let what = match hook.support() {
                Support::StubBlocks => "blocks: it would decide an outcome",
                _ => "skips: it only adds strictness",
            };
            out.push_str(&format!("  {hook}: {what}\n"));
        }
    }
    let blocked = state
        .and_then(|s| s.nodes.get(&s.current_node))
        .is_some_and(|r| r.last_block.as_ref().is_some_and(|b| !b.is_empty()));
    (out, !blocked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::LoopName;

    #[test]
    fn an_unentered_item_renders_the_start_node_pending_with_the_rule() {
        let text = render(LoopName::WorkItem.graph(), None, "issue-15", true);
        assert!(
            text.contains(
                "node `phase-selection`, phase `phase-selection` (human node), status: pending"
            ),
            "{text}"
        );
        assert!(text.contains("do not start a phase"), "{text}");
        assert!(text.contains("human's decision"), "{text}");
    }

    #[test]
    fn an_agent_node_names_its_command_and_the_claim() {
        let mut state = WorkItemState::new("github:o/r#15", "pdlc-adhoc-loop");
        state.current_node = "work".into();
        state.nodes.insert("work".into(), Default::default());
        let text = render(LoopName::AdHoc.graph(), Some(&state), "issue-15", true);
        assert!(text.contains("status: in-progress"), "{text}");
        assert!(text.contains("`/the-loop:do-task issue-15`"), "{text}");
        assert!(text.contains("`the-loop graph complete`"), "{text}");
        let without = render(LoopName::AdHoc.graph(), Some(&state), "issue-15", false);
        assert!(!without.contains("/the-loop:"), "no plugin, no slash command: {without}");
        assert!(without.contains("the `do-task` command) are in its assignment"), "{without}");
    }

    #[test]
    fn check_lists_every_node_and_the_stubs_and_fails_on_a_block() {
        let mut state = WorkItemState::new("github:o/r#15", "pdlc-contribution-loop");
        state.current_node = "goal-definition".into();
        let (text, ok) = check(LoopName::Contribution.graph(), Some(&state));
        assert!(ok, "{text}");
        assert!(text.contains("→ goal-definition"), "{text}");
        assert!(text.contains("classify-goal: blocks"), "{text}");
        assert!(text.contains("lint-artifacts: skips"), "{text}");
        state.nodes.entry("goal-definition".into()).or_default().last_block =
            Some(vec!["x".into()]);
        assert!(!check(LoopName::Contribution.graph(), Some(&state)).1);
    }

    #[test]
    fn node_checks_say_what_was_passed_skipped_and_where_the_item_waits() {
        let mut state = WorkItemState::new("github:o/r#15", "pdlc-work-item-loop");
        state.current_node = "requirements-definition".into();
        for (id, outcome) in [("phase-selection", "selected"), ("brainstorming", "skipped")] {
            state.nodes.entry(id.into()).or_default().outcome = outcome.into();
        }
        state.skips.insert("design".into(), serde_json::json!({"via": "ticks"}));
        let record = state.nodes.entry("requirements-definition".into()).or_default();
        record.attempts = 2;
        record.last_block = Some(vec!["requirements.md is missing".into()]);
        let rows = node_checks(LoopName::WorkItem.graph(), Some(&state));
        let row = |id: &str| rows.iter().find(|r| r.node == id).expect("a row");
        assert_eq!(row("phase-selection").status, NodeStatus::Passed);
        assert_eq!(row("phase-selection").outcome, "selected");
        assert_eq!(row("brainstorming").status, NodeStatus::Skipped);
        let at = row("requirements-definition");
        assert_eq!((at.status, at.attempts), (NodeStatus::At(Status::Blocked), 2));
        assert_eq!(at.messages, ["requirements.md is missing"]);
        assert_eq!(row("design").status, NodeStatus::Skipped, "declared away");
        assert_eq!(
            row("design-critic-review").status,
            NodeStatus::Skipped,
            "an opt-in nobody chose"
        );
        assert_eq!(row("test-planning").status, NodeStatus::NotReached);
        assert_eq!(rows.len(), LoopName::WorkItem.graph().nodes.len());
    }

    #[test]
    fn a_blocked_node_shows_the_gate_messages() {
        let mut state = WorkItemState::new("github:o/r#15", "pdlc-work-item-loop");
        state.current_node = "brainstorming".into();
        let record = state.nodes.entry("brainstorming".into()).or_default();
        record.attempts = 1;
        record.last_block = Some(vec!["brainstorm.md is missing".into()]);
        let text = render(LoopName::WorkItem.graph(), Some(&state), "issue-15", true);
        assert!(text.contains("status: blocked"), "{text}");
        assert!(text.contains("- gate: brainstorm.md is missing"), "{text}");
    }

    #[test]
    fn the_listing_section_is_the_loop_with_what_the_walk_passes_and_where_the_item_is() {
        let graph = LoopName::WorkItem.graph();
        let mut state = WorkItemState::new("github:octo/app#15", "pdlc-work-item-loop");
        state.current_node = "design".into();
        state.skips.insert("brainstorming".into(), serde_json::json!({"via": "cli"}));
        state.session_per_pr = "always".into();
        let section = listing(graph, &state, "issue-15");
        assert_eq!(section["loop"], "pdlc-work-item-loop");
        assert_eq!(section["workItem"], "issue-15");
        assert_eq!(
            (&section["currentNode"], &section["phase"]),
            (&"design".into(), &"design".into())
        );
        assert_eq!(section["sessionPerPr"], "always");
        assert!(section.get("surface").is_none(), "no choice, no key");
        let node = |id: &str| {
            section["nodes"].as_array().unwrap().iter().find(|n| n["id"] == id).cloned().unwrap()
        };
        assert_eq!(node("brainstorming")["skipped"], true);
        assert_eq!(node("design-critic-review")["skipped"], true, "an opt-in nobody selected");
        assert_eq!(node("design-critic-review")["optIn"], true);
        assert_eq!(node("phase-selection")["selectable"], false);
        assert_eq!(node("requirements-approval")["phase"], serde_json::Value::Null);
        assert_eq!(node("tasks-breakdown")["skipped"], false);
    }
}
