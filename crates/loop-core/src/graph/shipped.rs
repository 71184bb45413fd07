//! The four loops the-loop ships, embedded in the binary and compiled once. A repository
//! cannot supply or override one; which of them a work item walks is [`LoopName::select`]'s
//! decision.

use std::sync::LazyLock;

use super::compile::compile;
use super::model::Loop;
use crate::control::Command;

/// One of the shipped loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoopName {
    /// The outer loop a work item walks by default (`the-loop start`).
    WorkItem,
    /// `the-loop contribute`: joining somebody else's work item.
    Contribution,
    /// `the-loop do`: a tactical task with no product process.
    AdHoc,
    /// One per pull request; and `the-loop review`'s, bound to the pull request.
    PullRequest,
}

const SOURCES: [(LoopName, &str); 4] = [
    (LoopName::WorkItem, include_str!("loops/work-item.yaml")),
    (LoopName::Contribution, include_str!("loops/contribution.yaml")),
    (LoopName::AdHoc, include_str!("loops/adhoc.yaml")),
    (LoopName::PullRequest, include_str!("loops/pr.yaml")),
];

static COMPILED: LazyLock<Vec<(LoopName, Loop)>> = LazyLock::new(|| {
    SOURCES
        .iter()
        .map(|(name, text)| match compile(text) {
            Ok(compiled) => (*name, compiled.graph),
            // The embedded files are compiled by `every_shipped_loop_compiles`, so this
            // is a build that skipped its tests, not a runtime condition.
            Err(err) => panic!("shipped loop {name:?}: {err}"),
        })
        .collect()
});

impl LoopName {
    pub const ALL: [LoopName; 4] =
        [LoopName::WorkItem, LoopName::Contribution, LoopName::AdHoc, LoopName::PullRequest];

    /// The name recorded in the state file's `loop`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoopName::WorkItem => "pdlc-work-item-loop",
            LoopName::Contribution => "pdlc-contribution-loop",
            LoopName::AdHoc => "pdlc-adhoc-loop",
            LoopName::PullRequest => "pdlc-pr-loop",
        }
    }

    /// The compiled loop.
    pub fn graph(self) -> &'static Loop {
        match COMPILED.iter().find(|(name, _)| *name == self) {
            Some((_, graph)) => graph,
            None => unreachable!("SOURCES names every LoopName"),
        }
    }

    /// The loop a work item walks: the state file's recorded `loop` when it names an
    /// outer loop (the file is agent-writable: anything else is ignored), else the
    /// arming command's (`contribute`, `do`, `review`), else the work-item loop.
    pub fn select(recorded: Option<&str>, armed_by: Option<Command>) -> LoopName {
        let outer = [LoopName::WorkItem, LoopName::Contribution, LoopName::AdHoc];
        if let Some(name) = outer.into_iter().find(|n| Some(n.as_str()) == recorded) {
            return name;
        }
        match armed_by {
            Some(Command::Contribute) => LoopName::Contribution,
            Some(Command::Do) => LoopName::AdHoc,
            Some(Command::Review) => LoopName::PullRequest,
            _ => LoopName::WorkItem,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_loop_compiles_without_warnings() {
        for (name, text) in SOURCES {
            match compile(text) {
                Ok(compiled) => {
                    assert_eq!(compiled.graph.name, name.as_str());
                    assert!(compiled.warnings.is_empty(), "{name:?}: {:?}", compiled.warnings);
                }
                Err(err) => panic!("{name:?}: {err}"),
            }
        }
    }

    #[test]
    fn the_start_nodes_are_the_documented_ones() {
        let starts: Vec<_> = LoopName::ALL.iter().map(|n| n.graph().start.as_str()).collect();
        assert_eq!(starts, ["phase-selection", "goal-definition", "work", "implementation"]);
    }

    #[test]
    fn every_command_a_node_names_is_shipped_and_its_assignment_carries_it() {
        use crate::graph::hooks::assignment;
        let mut named = 0;
        for name in LoopName::ALL {
            let graph = name.graph();
            for node in &graph.nodes {
                let Some(command) = &node.command else { continue };
                named += 1;
                let shipped = crate::slash::shipped(command);
                assert!(shipped.is_some(), "{name:?} node `{}` names `{command}`", node.id);
                let with = assignment(node, &graph.name, "issue-9", true);
                assert!(with.contains(&format!("`/the-loop:{command} issue-9`")), "{with}");
                let without = assignment(node, &graph.name, "issue-9", false);
                assert!(!without.contains("/the-loop:"), "{without}");
                let body = shipped.map(|c| c.body.trim_end()).unwrap_or_default();
                assert!(without.contains(body), "the instructions inline: {without}");
            }
        }
        assert!(named >= 10, "the loops name their commands");
    }

    #[test]
    fn the_pull_request_loop_writes_no_label() {
        use crate::graph::model::Hook;
        let graph = LoopName::PullRequest.graph();
        assert!(graph.nodes.iter().all(|n| n.entry.iter().all(|c| c.hook != Hook::SetPhaseLabel)));
    }

    #[test]
    fn selection_honours_only_outer_loop_names_then_the_arming_command() {
        use Command::*;
        let cases = [
            (None, None, LoopName::WorkItem),
            (None, Some(Start), LoopName::WorkItem),
            (None, Some(Contribute), LoopName::Contribution),
            (None, Some(Do), LoopName::AdHoc),
            (None, Some(Review), LoopName::PullRequest),
            (Some("pdlc-adhoc-loop"), Some(Contribute), LoopName::AdHoc),
            (Some("pdlc-pr-loop"), Some(Do), LoopName::AdHoc),
            (Some("rm -rf"), None, LoopName::WorkItem),
        ];
        for (recorded, armed, expected) in cases {
            assert_eq!(LoopName::select(recorded, armed), expected, "{recorded:?} {armed:?}");
        }
    }
}
