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

/// Renders the block for work item `id` (`issue-<N>`) walking `graph`.
pub fn render(graph: &Loop, state: Option<&WorkItemState>, id: &str) -> String {
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
    if let Some(command) = &node.command {
        out.push_str(&format!("Command for this node: `/the-loop:{command} {id}`.\n"));
    }
    match (node.actor, status) {
        (_, Status::Complete) => out.push_str("The process is complete.\n"),
        (Actor::Agent, _) => out.push_str(&format!(
            "When this node's work is done, run `the-loop graph complete {id}`; its gate decides.\n"
        )),
        _ => out.push_str("This node is a human's decision: do not claim it.\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::LoopName;

    #[test]
    fn an_unentered_item_renders_the_start_node_pending_with_the_rule() {
        let text = render(LoopName::WorkItem.graph(), None, "issue-15");
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
        let text = render(LoopName::AdHoc.graph(), Some(&state), "issue-15");
        assert!(text.contains("status: in-progress"), "{text}");
        assert!(text.contains("`/the-loop:do-task issue-15`"), "{text}");
        assert!(text.contains("`the-loop graph complete issue-15`"), "{text}");
    }

    #[test]
    fn a_blocked_node_shows_the_gate_messages() {
        let mut state = WorkItemState::new("github:o/r#15", "pdlc-work-item-loop");
        state.current_node = "brainstorming".into();
        let record = state.nodes.entry("brainstorming".into()).or_default();
        record.attempts = 1;
        record.last_block = Some(vec!["brainstorm.md is missing".into()]);
        let text = render(LoopName::WorkItem.graph(), Some(&state), "issue-15");
        assert!(text.contains("status: blocked"), "{text}");
        assert!(text.contains("- gate: brainstorm.md is missing"), "{text}");
    }
}
