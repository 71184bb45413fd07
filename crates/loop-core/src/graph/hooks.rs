//! What each hook says at a node boundary. Entry hooks act: they return the [`Effect`]s
//! the daemon carries out (a label, a comment, an assignment pasted). Exit hooks judge:
//! they return a [`Verdict`] from the event's comments and the artifacts the caller read
//! through [`GateFacts`]. A hook Tier 0 does not implement says so: `skip` where it would
//! only add strictness, `block` where it would decide an outcome.

use crate::login::Login;

use super::model::{Actor, Artifact, Hook, HookCall, Loop, Node, Support};

/// The marker the phase-selection checklist carries, so it is posted once.
pub const CHECKLIST_MARKER: &str = "<!-- the-loop:phase-selection -->";

/// One comment an exit gate reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub author: Login,
    pub body: String,
    /// Carries the-loop's own marker: never an input.
    pub self_authored: bool,
}

impl Comment {
    /// The comment an event carries for the gate — a conversation comment, a review or
    /// an inline comment — with its author; none for any other event, or an author with
    /// no login. Authorization is the classifier's (it reads [`GateInput::authorized`]).
    pub fn from_event(event: &crate::event::Event) -> Vec<Comment> {
        let Some(comment) = &event.comment else { return Vec::new() };
        let (Some(author), Some(body)) = (comment.author.login(), comment.body.as_deref()) else {
            return Vec::new();
        };
        let self_authored = crate::guards::is_self_authored(body);
        vec![Comment { author: author.clone(), body: body.to_owned(), self_authored }]
    }
}

/// What a gate reads besides comments: the spec folder's files and the inner loops.
pub trait GateFacts {
    /// The text of `name` in the work item's spec folder, when it exists.
    fn artifact(&self, name: &str) -> Option<String>;
    /// Every started inner loop: its path and current node.
    fn inner_loops(&self) -> Vec<(String, String)>;
}

/// The gate's inputs besides the files.
#[derive(Debug, Clone, Copy)]
pub struct GateInput<'a> {
    /// The event's comments, oldest first; empty for a claim or a status read.
    pub comments: &'a [Comment],
    /// `routing.authorizedUsers`: only their comments are read.
    pub authorized: &'a [Login],
    /// `routing.control.keywords.execute`.
    pub execute_keyword: &'a str,
    /// The phase checklist comment's body as it is now (ticks a person may have
    /// changed in GitHub's UI); `None` when it was not read.
    pub checklist: Option<&'a str>,
}

impl GateInput<'_> {
    /// Authorized, not self-authored comments, oldest first.
    fn voices(&self) -> impl Iterator<Item = &Comment> {
        self.comments
            .iter()
            .filter(|c| !c.self_authored && self.authorized.iter().any(|a| a == &c.author))
    }
}

/// A hook's judgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Pass,
    /// No opinion.
    Skip,
    Wait,
    Block,
}

/// One exit hook's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub hook: Hook,
    pub status: Status,
    pub messages: Vec<String>,
    /// The outcome the edges route on, when this hook names one.
    pub outcome: Option<String>,
    /// A decision to record (`phase-selection`: who executed it, when).
    pub decision: Option<Login>,
    /// The phases an `execute` selected (`phase-selection` only).
    pub selection: Option<Selection>,
    /// What `record-feedback` records: the artifact, and each reviewer's comment.
    pub feedback: Option<(String, Vec<(Login, String)>)>,
}

/// The phases an authorized `execute` selected, from the checklist's ticks: the
/// execute reply's own checklist when it carries one, else the-loop's checklist comment
/// as it is now, else the default (every default-on phase, no opt-in).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// Default-on phases left unticked: walked past.
    pub skips: Vec<String>,
    /// Opt-in phases ticked: walked through.
    pub opt_ins: Vec<String>,
    /// Where the ticks were read: `reply`, `checklist` or `default`.
    pub via: &'static str,
}

impl Selection {
    /// Reads the ticks of the first of `sources` (`(text, via)`) that carries a row for
    /// a selectable phase of `graph`; rows for anything else are ignored, so a reply
    /// cannot skip a required node.
    pub fn read(graph: &Loop, sources: &[(&str, &'static str)]) -> Selection {
        for (text, via) in sources {
            let rows: Vec<(&str, bool)> = text
                .lines()
                .filter_map(checklist_row)
                .filter(|(id, _)| graph.node(id).is_some_and(|n| n.skippable))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let mut selection = Selection { via, ..Selection::default() };
            for (id, ticked) in rows {
                let opt_in = graph.node(id).is_some_and(|n| n.opt_in);
                match (opt_in, ticked) {
                    (false, false) => selection.skips.push(id.to_owned()),
                    (true, true) => selection.opt_ins.push(id.to_owned()),
                    _ => {}
                }
            }
            return selection;
        }
        Selection { via: "default", ..Selection::default() }
    }

    /// The confirmation comment: what will run, what was declared away, who chose it.
    pub fn confirmation(&self, graph: &Loop, by: &Login) -> String {
        let runs: Vec<String> = graph
            .nodes
            .iter()
            .filter(|n| n.skippable)
            .filter(|n| {
                if n.opt_in { self.opt_ins.contains(&n.id) } else { !self.skips.contains(&n.id) }
            })
            .map(|n| format!("`{}`", n.id))
            .collect();
        let quoted = |ids: &[String]| ids.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>();
        let mut body = format!(
            "**Phase selection recorded** (by @{by}, ticks read from the {}).\n\nRuns: {}.\n",
            match self.via {
                "reply" => "reply",
                "checklist" => "checklist",
                _ => "default selection",
            },
            if runs.is_empty() { "no optional phase".to_owned() } else { runs.join(", ") }
        );
        if !self.skips.is_empty() {
            body.push_str(&format!("Skipped: {}.\n", quoted(&self.skips).join(", ")));
        }
        if !self.opt_ins.is_empty() {
            body.push_str(&format!("Opted in: {}.\n", quoted(&self.opt_ins).join(", ")));
        }
        body
    }
}

/// `- [x] id` / `- [ ] id` (also `*`, `X`): the id and whether it is ticked.
fn checklist_row(line: &str) -> Option<(&str, bool)> {
    let rest = line.trim_start().strip_prefix(['-', '*'])?.trim_start();
    let (ticked, rest) = if let Some(rest) = rest.strip_prefix("[x]").or(rest.strip_prefix("[X]")) {
        (true, rest)
    } else {
        (false, rest.strip_prefix("[ ]")?)
    };
    let id = rest.split_whitespace().next()?.trim_matches('`');
    Some((id, ticked))
}

impl Verdict {
    fn new(hook: Hook, status: Status, message: impl Into<Option<String>>) -> Self {
        Self {
            hook,
            status,
            messages: message.into().into_iter().collect(),
            outcome: None,
            feedback: None,
            decision: None,
            selection: None,
        }
    }

    fn outcome(mut self, outcome: &str) -> Self {
        self.outcome = Some(outcome.to_owned());
        self
    }
}

/// What an entry hook asks the daemon to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Add `loop:<phase>` and remove every other `loop:*` label; touch nothing else.
    PhaseLabel { phase: String },
    /// Append a dated heading to `execution-log.md`, only when that file exists.
    LogEntry { heading: String },
    /// Paste the node's assignment into the session (a failure never gates).
    Assignment { node: String, text: String },
    /// Post a self-marked comment on the work item (review request, confirmation), for
    /// `hook`.
    Comment { hook: Hook, body: String },
    /// Post the phase checklist unless a comment carrying [`CHECKLIST_MARKER`] exists.
    Checklist { body: String },
}

/// What the entry chain of `node` in `graph` does for work item `id` (`issue-<N>`),
/// entered at `boundary_at`. The stubbed entry hooks (`notify`, `publish-artifact`,
/// `post-goal-request`) do nothing.
pub fn entry_effects(
    node: &Node,
    graph: &Loop,
    id: &str,
    boundary_at: &str,
    execute_keyword: &str,
    plugin: bool,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for call in &node.entry {
        match call.hook {
            Hook::SetPhaseLabel => {
                if let Some(phase) = &node.phase {
                    effects.push(Effect::PhaseLabel { phase: phase.clone() });
                }
            }
            Hook::LogEntry => effects.push(Effect::LogEntry {
                heading: format!(
                    "### {boundary_at} — entry {}\n\n- Node: {}\n- Boundary: entry\n",
                    node.id, node.id
                ),
            }),
            Hook::DeliverAssignment => effects.push(Effect::Assignment {
                node: node.id.clone(),
                text: assignment(node, &graph.name, id, plugin),
            }),
            Hook::RequestReview => effects.push(Effect::Comment {
                hook: Hook::RequestReview,
                body: format!(
                    "`{}` is ready for review. Reply here: approve, or say what to change.",
                    node.id
                ),
            }),
            Hook::PostPhaseSelection => {
                effects.push(Effect::Checklist { body: checklist(&graph.nodes, execute_keyword) })
            }
            _ => {}
        }
    }
    effects
}

/// The assignment pasted into the session when it enters `node`: the node's command by
/// name when the session has the-loop's plugin, else its instructions inline.
pub fn assignment(node: &Node, loop_name: &str, id: &str, plugin: bool) -> String {
    let mut text =
        format!("Process graph assignment ({loop_name}): you are now at node `{}`", node.id);
    if let Some(phase) = &node.phase {
        text.push_str(&format!(" (phase `{phase}`)"));
    }
    text.push_str(".\n");
    if let Some(description) = &node.description {
        text.push_str(&format!("{description}\n"));
    }
    if !node.produces.is_empty() {
        let names: Vec<String> = node.produces.iter().map(Artifact::to_string).collect();
        text.push_str(&format!("Produce {} in the spec folder of {id}.\n", names.join(", ")));
    }
    if let Some(command) = node.command.as_deref().and_then(crate::slash::shipped) {
        text.push_str(&format!("{}\n", command.invoke(id, plugin)));
    }
    match node.actor {
        Actor::Agent => text.push_str(
            "When the work is done, claim it with `the-loop graph complete`; the gate checks it.\n",
        ),
        Actor::Human | Actor::Code => text.push_str(
            "This node is a human's decision: do not claim it; wait for the reply on the work item.\n",
        ),
    }
    text
}

/// The phase checklist for `graph`: every default-on phase ticked, every opt-in one
/// not. The ticks a person leaves (or types into the `execute` reply) are the selection
/// ([`Selection::read`]).
pub fn checklist(nodes: &[Node], execute_keyword: &str) -> String {
    let mut body = format!("{CHECKLIST_MARKER}\n**Phase selection.** These phases will run:\n\n");
    for node in nodes.iter().filter(|n| n.skippable && !n.opt_in) {
        body.push_str(&format!("- [x] {}\n", node.id));
    }
    let opt_ins: Vec<_> = nodes.iter().filter(|n| n.opt_in).collect();
    if !opt_ins.is_empty() {
        body.push_str("\nOff unless selected:\n\n");
        for node in opt_ins {
            body.push_str(&format!("- [ ] {}\n", node.id));
        }
    }
    body.push_str(&format!("\nReply `{execute_keyword}` to begin.\n"));
    body
}

/// Judges one exit hook of `node` in `graph`.
pub fn judge(
    call: &HookCall,
    graph: &Loop,
    node: &Node,
    decided: bool,
    input: &GateInput<'_>,
    facts: &dyn GateFacts,
) -> Verdict {
    let hook = call.hook;
    match hook.support() {
        Support::StubSkips => {
            return Verdict::new(hook, Status::Skip, "not implemented".to_owned());
        }
        Support::StubBlocks => {
            return Verdict::new(
                hook,
                Status::Block,
                format!("{hook} is not implemented: this gate cannot be passed yet"),
            );
        }
        Support::Implemented => {}
    }
    match hook {
        Hook::ClassifyPhaseSelection => {
            if decided {
                return Verdict::new(hook, Status::Pass, None).outcome("selected");
            }
            let keyword = input.execute_keyword.to_lowercase();
            match input
                .voices()
                .filter(|c| !keyword.is_empty() && c.body.to_lowercase().contains(&keyword))
                .last()
            {
                Some(comment) => {
                    let mut sources = vec![(comment.body.as_str(), "reply")];
                    sources.extend(input.checklist.map(|body| (body, "checklist")));
                    let mut verdict = Verdict::new(hook, Status::Pass, None).outcome("selected");
                    verdict.decision = Some(comment.author.clone());
                    verdict.selection = Some(Selection::read(graph, &sources));
                    verdict
                }
                None => Verdict::new(
                    hook,
                    Status::Wait,
                    format!(
                        "waiting for an authorized `{}` reply to the phase checklist",
                        input.execute_keyword
                    ),
                ),
            }
        }
        Hook::ClassifyFeedback => classify_feedback(input),
        Hook::RecordFeedback => {
            let given: Vec<(Login, String)> =
                input.voices().map(|c| (c.author.clone(), c.body.clone())).collect();
            let into = call.with.into.clone().unwrap_or_default();
            let mut verdict = Verdict::new(hook, Status::Pass, None);
            verdict.feedback = (!given.is_empty()).then_some((into, given));
            verdict
        }
        Hook::ClassifyAdhocReply => match input.voices().last() {
            None => {
                Verdict::new(hook, Status::Wait, "waiting for the requester's reply".to_owned())
            }
            Some(comment) if declares_done(&comment.body) => {
                Verdict::new(hook, Status::Pass, None).outcome("done")
            }
            Some(_) => Verdict::new(hook, Status::Pass, None).outcome("more-work"),
        },
        Hook::ValidateArtifacts => validate(call, node, facts),
        Hook::AwaitInnerLoops => {
            let open: Vec<String> = facts
                .inner_loops()
                .into_iter()
                .filter(|(_, at)| at != "complete")
                .map(|(path, at)| format!("inner loop {path} is at `{at}`"))
                .collect();
            if open.is_empty() {
                Verdict::new(hook, Status::Pass, None)
            } else {
                Verdict { messages: open, ..Verdict::new(hook, Status::Wait, None) }
            }
        }
        Hook::VerifyTests => Verdict::new(hook, Status::Skip, "no test command bound".to_owned()),
        // Entry hooks in an exit chain have nothing to judge.
        _ => Verdict::new(hook, Status::Skip, None),
    }
}

fn classify_feedback(input: &GateInput<'_>) -> Verdict {
    let hook = Hook::ClassifyFeedback;
    let voices: Vec<&Comment> = input.voices().collect();
    if voices.is_empty() {
        return Verdict::new(hook, Status::Wait, "waiting for an authorized review".to_owned());
    }
    let text: String = voices.iter().map(|c| c.body.to_lowercase()).collect::<Vec<_>>().join("\n");
    let any = |phrases: &[&str]| phrases.iter().any(|p| contains_phrase(&text, p));
    if any(&["changes requested", "request changes", "please change", "rejected"]) {
        return Verdict::new(hook, Status::Pass, None).outcome("changes-requested");
    }
    if any(&["approved", "lgtm", "looks good", "ship it"]) {
        let with_comments = voices.len() > 1 || any(&["but", "nit"]);
        let outcome = if with_comments { "approved-with-comments" } else { "approved" };
        return Verdict::new(hook, Status::Pass, None).outcome(outcome);
    }
    Verdict::new(hook, Status::Wait, "the reply neither approves nor requests changes".to_owned())
}

const DONE_PHRASES: &[&str] = &[
    "done",
    "all done",
    "we're done",
    "that's all",
    "thats all",
    "nothing else",
    "no more",
    "all set",
    "close it",
    "close this",
    "lgtm",
    "looks good",
    "ship it",
    "approved",
];

/// Whether a reply declares the task complete ("not done yet" does not).
fn declares_done(body: &str) -> bool {
    let text = body.to_lowercase();
    DONE_PHRASES.iter().any(|phrase| {
        phrase_positions(&text, phrase).any(|at| {
            let before = text[..at].trim_end();
            !(before.ends_with("not") || before.ends_with("n't") || before.ends_with("never"))
        })
    })
}

fn contains_phrase(text: &str, phrase: &str) -> bool {
    phrase_positions(text, phrase).next().is_some()
}

/// Where `phrase` occurs in `text` as whole words.
fn phrase_positions<'a>(text: &'a str, phrase: &'a str) -> impl Iterator<Item = usize> + 'a {
    let word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    text.match_indices(phrase).map(|(at, _)| at).filter(move |&at| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The structural artifact gate: the artifact is present (exactly one accepted name),
/// `status: approved` in its front matter when `locked`, every named `##` section present
/// and non-empty, no `- [ ]` left when `checkmarks: complete`. Every finding at once.
fn validate(call: &HookCall, node: &Node, facts: &dyn GateFacts) -> Verdict {
    let hook = Hook::ValidateArtifacts;
    let artifacts: Vec<&Artifact> = match &call.with.validates {
        Some(artifact) => vec![artifact],
        None => node.produces.iter().collect(),
    };
    if artifacts.is_empty() {
        return Verdict::new(
            hook,
            Status::Block,
            format!("node `{}` declares nothing to validate", node.id),
        );
    }
    let mut findings = Vec::new();
    for artifact in artifacts {
        let present: Vec<(&String, String)> =
            artifact.names.iter().filter_map(|n| facts.artifact(n).map(|text| (n, text))).collect();
        let (name, text) = match present.as_slice() {
            [] => {
                findings.push(format!("{artifact} is missing from the spec folder"));
                continue;
            }
            [one] => one,
            _ => {
                findings
                    .push(format!("{artifact}: more than one accepted name is present; keep one"));
                continue;
            }
        };
        let (front, body) = split_front_matter(text);
        if call.with.locked && front_matter_value(front, "status") != Some("approved") {
            findings.push(format!("{name}: front matter `status` must be `approved` (locked)"));
        }
        for section in &call.with.sections {
            match section_body(body, section) {
                None => findings.push(format!("{name}: section `## {section}` is missing")),
                Some(content) if content.trim().is_empty() => {
                    findings.push(format!("{name}: section `## {section}` is empty"))
                }
                Some(_) => {}
            }
        }
        if call.with.checkmarks_complete
            && body.lines().any(|l| l.trim_start().starts_with("- [ ]"))
        {
            findings.push(format!("{name}: unticked `- [ ]` items remain"));
        }
    }
    if findings.is_empty() {
        Verdict::new(hook, Status::Pass, None)
    } else {
        Verdict { messages: findings, ..Verdict::new(hook, Status::Block, None) }
    }
}

/// `(front matter, body)`: front matter is a leading `---` … `---` block.
fn split_front_matter(text: &str) -> (&str, &str) {
    let Some(rest) = text.strip_prefix("---\n") else { return ("", text) };
    match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            (&rest[..end], after.strip_prefix('\n').unwrap_or(after))
        }
        None => ("", text),
    }
}

fn front_matter_value<'a>(front: &'a str, key: &str) -> Option<&'a str> {
    front.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().trim_matches(['"', '\'']))
    })
}

/// The text under `## <title>` up to the next `#`/`##` heading.
fn section_body<'a>(body: &'a str, title: &str) -> Option<&'a str> {
    let mut start = None;
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        let heading = line.trim_end();
        if let Some(at) = start {
            if heading.starts_with("## ") || heading.starts_with("# ") {
                return Some(&body[at..offset]);
            }
        } else if heading.strip_prefix("## ").is_some_and(|t| t.trim() == title) {
            start = Some(offset + line.len());
        }
        offset += line.len();
    }
    start.map(|at| &body[at..])
}

/// A spec folder held in memory (artifact name → text, no inner loops): the facts the
/// gate tests here and in the runtime judge.
#[cfg(test)]
pub(crate) struct Files(pub(crate) Vec<(&'static str, &'static str)>);

#[cfg(test)]
impl GateFacts for Files {
    fn artifact(&self, name: &str) -> Option<String> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, t)| (*t).to_owned())
    }
    fn inner_loops(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::LoopName;

    fn login(name: &str) -> Login {
        name.parse().unwrap()
    }

    fn said(author: &str, body: &str) -> Comment {
        Comment { author: login(author), body: body.to_owned(), self_authored: false }
    }

    fn exit_of(graph: LoopName, node: &str, files: Files, comments: &[Comment]) -> Vec<Verdict> {
        let node = graph.graph().node(node).unwrap();
        let authorized = [login("ann")];
        let input = GateInput {
            comments,
            authorized: &authorized,
            execute_keyword: "the-loop execute",
            checklist: None,
        };
        node.exit
            .iter()
            .map(|call| judge(call, graph.graph(), node, false, &input, &files))
            .collect()
    }

    #[test]
    fn every_command_a_node_names_is_shipped_and_its_assignment_carries_it() {
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
    fn the_artifact_gate_lists_every_structural_finding() {
        let brainstorm =
            "---\nstatus: draft\n---\n# B\n## Problem / opportunity\n\n## Other\n- [ ] x\n";
        let verdicts = exit_of(
            LoopName::WorkItem,
            "brainstorming",
            Files(vec![("brainstorm.md", brainstorm)]),
            &[],
        );
        assert_eq!(verdicts[0].status, Status::Block);
        let text = verdicts[0].messages.join("\n");
        for expected in [
            "must be `approved`",
            "`## Problem / opportunity` is empty",
            "`## Open questions` is missing",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
        let missing = exit_of(LoopName::WorkItem, "brainstorming", Files(vec![]), &[]);
        assert_eq!(missing[0].messages, ["brainstorm.md is missing from the spec folder"]);
        assert_eq!(missing[1].status, Status::Skip, "lint-artifacts is a stub that skips");
    }

    #[test]
    fn a_valid_artifact_passes_and_two_accepted_names_are_ambiguous() {
        let good =
            "---\nstatus: approved\n---\n## Requirements\nR1\n## Security considerations\nnone\n";
        let ok = exit_of(
            LoopName::WorkItem,
            "requirements-definition",
            Files(vec![("bugfix.md", good)]),
            &[],
        );
        assert_eq!(ok[0].status, Status::Pass);
        let both = Files(vec![("bugfix.md", good), ("requirements.md", good)]);
        let twice = exit_of(LoopName::WorkItem, "requirements-definition", both, &[]);
        assert!(twice[0].messages[0].contains("more than one"), "{:?}", twice[0]);
    }

    #[test]
    fn unticked_tasks_block_implementation() {
        let tasks = "## Task list\n- [x] a\n- [ ] b\n";
        let verdicts =
            exit_of(LoopName::WorkItem, "implementation", Files(vec![("tasks.md", tasks)]), &[]);
        assert_eq!(verdicts[0].messages, ["tasks.md: unticked `- [ ]` items remain"]);
    }

    #[test]
    fn phase_selection_waits_for_an_authorized_execute_and_ignores_everyone_else() {
        let strangers = [said("mallory", "the-loop execute"), said("ann", "sounds good")];
        let waiting = exit_of(LoopName::WorkItem, "phase-selection", Files(vec![]), &strangers);
        assert_eq!(waiting[0].status, Status::Wait);
        let mut own = said("ann", "the-loop execute");
        own.self_authored = true;
        assert_eq!(
            exit_of(LoopName::WorkItem, "phase-selection", Files(vec![]), &[own])[0].status,
            Status::Wait
        );
        let chosen = exit_of(
            LoopName::WorkItem,
            "phase-selection",
            Files(vec![]),
            &[said("ann", "The-Loop Execute")],
        );
        assert_eq!(
            (chosen[0].status.clone(), chosen[0].outcome.as_deref()),
            (Status::Pass, Some("selected"))
        );
        assert_eq!(chosen[0].decision, Some(login("ann")));
    }

    #[test]
    fn the_selection_is_the_replys_ticks_else_the_checklists_else_the_default() {
        let graph = LoopName::WorkItem.graph();
        let posted = checklist(&graph.nodes, "the-loop execute");
        assert_eq!(Selection::read(graph, &[(&posted, "checklist")]).skips, Vec::<String>::new());
        let ticked = posted
            .replace("- [x] brainstorming", "- [ ] brainstorming")
            .replace("- [ ] design-critic-review", "- [x] design-critic-review");
        let read = Selection::read(graph, &[("the-loop execute", "reply"), (&ticked, "checklist")]);
        assert_eq!(
            (read.skips, read.opt_ins, read.via),
            (
                vec!["brainstorming".to_owned()],
                vec!["design-critic-review".to_owned()],
                "checklist"
            )
        );
        let reply = "the-loop execute\n- [ ] design\n- [ ] phase-selection\n- [ ] no-such-node";
        let read = Selection::read(graph, &[(reply, "reply"), (&ticked, "checklist")]);
        assert_eq!((read.skips, read.via), (vec!["design".to_owned()], "reply"));
        assert_eq!(Selection::read(graph, &[("the-loop execute", "reply")]).via, "default");
    }

    #[test]
    fn feedback_is_classified_by_keywords_and_an_ambiguous_reply_waits() {
        let cases = [
            ("lgtm", Some("approved")),
            ("approved, but one nit", Some("approved-with-comments")),
            ("please change the title", Some("changes-requested")),
            ("hmm, thinking", None),
            ("unapproved", None),
        ];
        for (body, expected) in cases {
            let verdict =
                &exit_of(LoopName::PullRequest, "pr-approval", Files(vec![]), &[said("ann", body)])
                    [0];
            assert_eq!(verdict.outcome.as_deref(), expected, "{body}");
        }
    }

    #[test]
    fn the_newest_authorized_adhoc_reply_decides_done_or_more_work() {
        let cases = [
            (vec![said("ann", "done")], Some("done")),
            (vec![said("ann", "not done yet, also fix the README")], Some("more-work")),
            (vec![said("ann", "done"), said("ann", "actually one more thing")], Some("more-work")),
            (vec![said("bob", "done")], None),
        ];
        for (comments, expected) in cases {
            let verdict = &exit_of(LoopName::AdHoc, "review", Files(vec![]), &comments)[0];
            assert_eq!(verdict.outcome.as_deref(), expected, "{comments:?}");
        }
    }

    #[test]
    fn the_goal_gate_blocks_because_it_is_not_implemented() {
        let verdict = &exit_of(
            LoopName::Contribution,
            "goal-definition",
            Files(vec![]),
            &[said("ann", "Goal: x")],
        )[0];
        assert_eq!(verdict.status, Status::Block);
        assert!(verdict.messages[0].contains("not implemented"));
    }
}
