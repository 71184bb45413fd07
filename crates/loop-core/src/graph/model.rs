//! A compiled loop: nodes, their hook chains and the edges between them, as the
//! compiler ([`super::compile`]) leaves them — every name resolved, every reference
//! checked — so the runtime never meets an unknown hook or a dangling edge.

use std::fmt;

/// One compiled loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    pub name: String,
    /// The node a work item enters first.
    pub start: String,
    /// Named groups of skippable nodes (`spec-chain`, `review-chain`, …), in file order.
    pub skip_sets: Vec<(String, Vec<String>)>,
    /// In declaration order (the order `check` reports them in).
    pub nodes: Vec<Node>,
    /// Deduplicated by `(from, on)`, first declaration kept.
    pub edges: Vec<Edge>,
}

impl Loop {
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// Where `outcome` leads from `from`, if a declared edge says.
    pub fn edge(&self, from: &str, outcome: &str) -> Option<&str> {
        self.edges.iter().find(|e| e.from == from && e.on == outcome).map(|e| e.to.as_str())
    }

    /// The start node (the compiler proved it exists).
    pub fn start_node(&self) -> &Node {
        match self.node(&self.start) {
            Some(node) => node,
            None => unreachable!("compile refuses a start that names no node"),
        }
    }
}

/// Who acts at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// The session does the work and claims it with `the-loop graph complete`.
    Agent,
    /// A person decides, by a comment the gate reads.
    Human,
    /// The-loop itself (teardown).
    Code,
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Agent => "agent",
            Actor::Human => "human",
            Actor::Code => "code",
        }
    }
}

/// Whether a node's session is fresh or the previous node's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionUse {
    #[default]
    New,
    Inherit,
}

/// One node: a place the work item is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    /// The `loop:<phase>` label's suffix; `None` writes no label.
    pub phase: Option<String>,
    pub actor: Actor,
    /// Artifacts the node produces; each is one or more accepted file names.
    pub produces: Vec<Artifact>,
    /// The slash command a prompt names for this node.
    pub command: Option<String>,
    pub session: SessionUse,
    pub required: bool,
    pub optional: bool,
    /// A human may declare it away (`optIn` implies it).
    pub skippable: bool,
    /// Off unless a human selects it.
    pub opt_in: bool,
    pub description: Option<String>,
    /// Blocks at this node before it escalates.
    pub max_attempts: u32,
    pub entry: Vec<HookCall>,
    pub exit: Vec<HookCall>,
    pub terminal: bool,
}

/// One artifact: its accepted names (`requirements.md|bugfix.md` is two), exactly one of
/// which may be present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub names: Vec<String>,
}

impl fmt::Display for Artifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names.join("|"))
    }
}

/// `from --on--> to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub on: String,
}

/// A hook in a chain, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCall {
    pub hook: Hook,
    pub with: Params,
}

/// The parameters any shipped hook takes (`with:`); a key outside these is refused at
/// compile time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Params {
    /// validate-artifacts: front matter `status: approved` is required.
    pub locked: bool,
    /// validate-artifacts: `##` sections that must be present and non-empty.
    pub sections: Vec<String>,
    /// validate-artifacts: `checkmarks: complete` — no `- [ ]` may remain.
    pub checkmarks_complete: bool,
    /// validate-artifacts: check this file instead of the node's `produces`.
    pub validates: Option<Artifact>,
    /// record-feedback: the artifact the feedback is appended to.
    pub into: Option<String>,
    /// notify: the notification's event name.
    pub event: Option<String>,
    /// publish-artifact: the artifact posted.
    pub artifact: Option<String>,
    /// enforces-boundaries-from: the upstream artifact and its markers.
    pub upstream: Option<String>,
    pub markers: Vec<String>,
}

/// Every hook a shipped loop may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    SetPhaseLabel,
    LogEntry,
    DeliverAssignment,
    RequestReview,
    Notify,
    PublishArtifact,
    PostPhaseSelection,
    ClassifyPhaseSelection,
    ClassifyFeedback,
    RecordFeedback,
    ClassifyAdhocReply,
    PostGoalRequest,
    ClassifyGoal,
    ValidateArtifacts,
    EnforcesBoundariesFrom,
    LintArtifacts,
    VerifyTests,
    AwaitInnerLoops,
    McpCall,
}

/// What Tier 0 does with a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Evaluated for real.
    Implemented,
    /// Not implemented; only adds strictness or is best-effort, so it reports `skip`.
    StubSkips,
    /// Not implemented and would decide an outcome, so it blocks rather than pass.
    StubBlocks,
}

impl Hook {
    pub const ALL: [Hook; 19] = [
        Hook::SetPhaseLabel,
        Hook::LogEntry,
        Hook::DeliverAssignment,
        Hook::RequestReview,
        Hook::Notify,
        Hook::PublishArtifact,
        Hook::PostPhaseSelection,
        Hook::ClassifyPhaseSelection,
        Hook::ClassifyFeedback,
        Hook::RecordFeedback,
        Hook::ClassifyAdhocReply,
        Hook::PostGoalRequest,
        Hook::ClassifyGoal,
        Hook::ValidateArtifacts,
        Hook::EnforcesBoundariesFrom,
        Hook::LintArtifacts,
        Hook::VerifyTests,
        Hook::AwaitInnerLoops,
        Hook::McpCall,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Hook::SetPhaseLabel => "set-phase-label",
            Hook::LogEntry => "log-entry",
            Hook::DeliverAssignment => "deliver-assignment",
            Hook::RequestReview => "request-review",
            Hook::Notify => "notify",
            Hook::PublishArtifact => "publish-artifact",
            Hook::PostPhaseSelection => "post-phase-selection",
            Hook::ClassifyPhaseSelection => "classify-phase-selection",
            Hook::ClassifyFeedback => "classify-feedback",
            Hook::RecordFeedback => "record-feedback",
            Hook::ClassifyAdhocReply => "classify-adhoc-reply",
            Hook::PostGoalRequest => "post-goal-request",
            Hook::ClassifyGoal => "classify-goal",
            Hook::ValidateArtifacts => "validate-artifacts",
            Hook::EnforcesBoundariesFrom => "enforces-boundaries-from",
            Hook::LintArtifacts => "lint-artifacts",
            Hook::VerifyTests => "verify-tests",
            Hook::AwaitInnerLoops => "await-inner-loops",
            Hook::McpCall => "mcp-call",
        }
    }

    pub fn from_name(name: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|hook| hook.name() == name)
    }

    pub fn support(self) -> Support {
        match self {
            Hook::LintArtifacts
            | Hook::EnforcesBoundariesFrom
            | Hook::Notify
            | Hook::PublishArtifact
            | Hook::PostGoalRequest
            | Hook::McpCall => Support::StubSkips,
            Hook::ClassifyGoal => Support::StubBlocks,
            Hook::SetPhaseLabel
            | Hook::LogEntry
            | Hook::DeliverAssignment
            | Hook::RequestReview
            | Hook::PostPhaseSelection
            | Hook::ClassifyPhaseSelection
            | Hook::ClassifyFeedback
            | Hook::RecordFeedback
            | Hook::ClassifyAdhocReply
            | Hook::ValidateArtifacts
            | Hook::VerifyTests
            | Hook::AwaitInnerLoops => Support::Implemented,
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
