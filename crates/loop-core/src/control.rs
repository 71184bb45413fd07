//! Execution control: the keywords authorized users steer work items with, as pure
//! decisions (reference §4, seed 002).
//!
//! [`Vocabulary::parse`] reads a comment body (never an issue's or PR's description)
//! into a [`Parsed`] value: not a command, one command with its `@login` arguments, or
//! ambiguous. [`decide`] then applies the named-actor re-check and the per-command
//! semantics to give a [`ControlDecision`] the dispatcher executes and the event log
//! records; [`spawn_gate`] is the spawn-policy gate shared by commands and unmatched
//! events. Nothing from a comment leaves this module except a fixed [`Command`] and
//! logins that fit GitHub's grammar.

use crate::config::{ControlConfig, SpawnPolicy};
use crate::event::Actor;
use crate::guards::ActorPass;
use crate::login::Login;
use jiff::Timestamp;

use crate::record::{Collaborator, Collaborators, ControlSource};
use crate::refs::WorkItemRef;

pub use crate::command::Command;

/// Whether a work item is armed: its last recorded command is an arming one. This is the
/// durable bit a start satisfies `requireStartCommand` with.
pub fn is_armed(last_recorded: Option<Command>) -> bool {
    last_recorded.is_some_and(Command::arms)
}

/// What a comment body says to the-loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// No keyword: ordinary input for the session.
    Plain,
    /// One command, possibly repeated. `logins` are the `@login` arguments of a roster
    /// command (lowercased, deduplicated, in order); empty for every other command.
    Command { command: Command, logins: Vec<Login> },
    /// Two or more different commands: nothing is executed and nothing forwarded.
    Ambiguous { commands: Vec<Command> },
}

impl Parsed {
    /// The one command it carries, if it carries exactly one.
    pub fn command(&self) -> Option<Command> {
        match self {
            Self::Command { command, .. } => Some(*command),
            Self::Plain | Self::Ambiguous { .. } => None,
        }
    }
}

/// The enabled keywords. `control.enabled: false` makes an empty vocabulary (everything
/// is plain input), and a keyword set to `""` disables that one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    /// Each enabled command with its keyword lowercased, as characters.
    keywords: Vec<(Command, Vec<char>)>,
}

impl From<&ControlConfig> for Vocabulary {
    fn from(control: &ControlConfig) -> Self {
        if !control.enabled {
            return Self { keywords: Vec::new() };
        }
        let keywords = Command::ALL
            .into_iter()
            .map(|command| (command, command.keyword(&control.keywords)))
            .filter(|(_, keyword)| !keyword.is_empty())
            .map(|(command, keyword)| (command, keyword.chars().map(fold).collect()))
            .collect();
        Self { keywords }
    }
}

impl Vocabulary {
    /// Reads a comment body. Each keyword matches literally and case-insensitively as a
    /// whole token: not touched on either side by a word character, `-` or `:`. Code
    /// fences are not stripped, so a quoted keyword counts.
    pub fn parse(&self, body: &str) -> Parsed {
        if self.keywords.is_empty() {
            return Parsed::Plain;
        }
        let text: Vec<(usize, char)> = body.char_indices().collect();
        let folded: Vec<char> = text.iter().map(|(_, c)| fold(*c)).collect();
        // One pass: a keyword can only start where the previous character does not
        // touch it, so only those positions are tried, each against every keyword.
        let mut seen = vec![false; self.keywords.len()];
        let mut roster_args: Vec<usize> = Vec::new();
        let mut at_boundary = true;
        for (start, c) in folded.iter().enumerate() {
            if at_boundary {
                for ((command, keyword), seen) in self.keywords.iter().zip(&mut seen) {
                    let Some(end) = whole_token_at(&folded, start, keyword) else { continue };
                    *seen = true;
                    if command.edits_roster() {
                        roster_args.push(text.get(end).map_or(body.len(), |(at, _)| *at));
                    }
                }
            }
            at_boundary = !touches(*c);
        }
        // Commands in vocabulary order, whatever order the text names them in.
        let found: Vec<Command> = self
            .keywords
            .iter()
            .zip(seen)
            .filter_map(|((command, _), seen)| seen.then_some(*command))
            .collect();
        parsed(found, roster_args, body)
    }
}

/// What a body says, given the commands found in it (in vocabulary order) and where the
/// `@login` arguments of its roster keywords start: nothing, one command with its
/// logins (in the order the body names them, each once), or an ambiguity.
fn parsed(found: Vec<Command>, mut roster_args: Vec<usize>, body: &str) -> Parsed {
    match found.as_slice() {
        [] => Parsed::Plain,
        [command] => {
            roster_args.sort_unstable();
            let mut logins: Vec<Login> = Vec::new();
            for at in roster_args {
                for login in login_arguments(&body[at..]) {
                    if !logins.contains(&login) {
                        logins.push(login);
                    }
                }
            }
            Parsed::Command { command: *command, logins }
        }
        _ => Parsed::Ambiguous { commands: found },
    }
}

/// Case folding for keyword matching: one character in, one out.
fn fold(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(single), None) => single,
        _ => c,
    }
}

/// Whether `c` joins a keyword to its neighbour, so the keyword is not a whole token.
fn touches(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | ':')
}

/// The end (exclusive, in characters) of `keyword` when it occurs in `text` at `start`
/// and is not touched by the character after it (the caller checked the one before).
fn whole_token_at(text: &[char], start: usize, keyword: &[char]) -> Option<usize> {
    let end = start.checked_add(keyword.len())?;
    let found = text.get(start..end)?;
    let whole = !keyword.is_empty()
        && found.first() == keyword.first()
        && found == keyword
        && !text.get(end).is_some_and(|c| touches(*c));
    whole.then_some(end)
}

/// The `@login` run after a roster keyword: tokens split on whitespace and commas,
/// trailing punctuation stripped, stopping at the first that is not `@` + a login.
fn login_arguments(rest: &str) -> Vec<Login> {
    rest.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|token| !token.is_empty())
        .map(|token| {
            token.trim_end_matches([
                '.', ',', ';', ':', '!', '?', ')', ']', '}', '>', '"', '\'', '`',
            ])
        })
        .map_while(|token| {
            let name = token.strip_prefix('@').filter(|name| is_user_login(name))?;
            name.to_ascii_lowercase().parse::<Login>().ok()
        })
        .collect()
}

/// GitHub's user-login grammar: 1–39 letters or digits with single interior hyphens.
fn is_user_login(name: &str) -> bool {
    name.len() <= 39
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Why a command was refused (`control.rejected`); always settled, never forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// No named actor, or one outside `authorizedUsers` (collaborators included).
    UnauthorizedActor,
    /// A roster command naming no valid `@login`.
    MissingCollaborator,
    /// Resume with no paused session.
    NothingToResume,
    /// A spawning command the spawn-policy gate refused; nothing is recorded.
    Spawn(SpawnRefusal),
}

impl Rejection {
    pub fn reason(self) -> &'static str {
        match self {
            Self::UnauthorizedActor => "unauthorized-actor",
            Self::MissingCollaborator => "missing-collaborator",
            Self::NothingToResume => "nothing-to-resume",
            Self::Spawn(refusal) => refusal.reason(),
        }
    }
}

/// Why the spawn-policy gate refused a spawn (reference §4.7), in the order checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnRefusal {
    /// The item is not armed by the spawn policy (`never`, or `labeled` without the label).
    SpawnPolicy,
    /// A collaborator's event never spawns.
    CollaboratorNoSpawn,
    /// There is no target.
    NoWorkItem,
    /// `requireStartCommand`: armed, but no start recorded.
    AwaitingStart,
}

/// What becomes of a delivery id after a refusal (reference §5.4, §5.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Removed from the dedup cache: a redelivery or a later poll may retry.
    Release,
    /// Kept with the refusal as its outcome: suppressed on purpose, never retried.
    Settle,
    /// Kept without an outcome: a permanent drop.
    Keep,
}

impl SpawnRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            Self::SpawnPolicy => "spawn-policy",
            Self::CollaboratorNoSpawn => "collaborator-no-spawn",
            Self::NoWorkItem => "no-work-item",
            Self::AwaitingStart => "awaiting-start",
        }
    }

    pub fn disposition(self) -> Disposition {
        match self {
            Self::SpawnPolicy => Disposition::Release,
            Self::CollaboratorNoSpawn | Self::AwaitingStart => Disposition::Settle,
            Self::NoWorkItem => Disposition::Keep,
        }
    }
}

/// Whether an armed item must also have a recorded start before it spawns:
/// `control.enabled` and `requireStartCommand` both on.
pub fn start_required(control: &ControlConfig) -> bool {
    control.enabled && control.require_start_command
}

/// The facts the spawn-policy gate reads.
#[derive(Debug, Clone, Copy)]
pub struct SpawnRequest<'a> {
    pub policy: SpawnPolicy,
    /// The event carries `autoExecuteLabel` ([`crate::event::Event::carries_label`]).
    pub labeled: bool,
    /// How the actor guard let the event in.
    pub actor: ActorPass,
    pub target: Option<&'a WorkItemRef>,
    /// [`start_required`].
    pub start_required: bool,
    /// The event's own command, when it carries one.
    pub command: Option<Command>,
    /// The target's last recorded command.
    pub last_recorded: Option<Command>,
}

/// The spawn-policy gate (reference §4.7): `always` widens which items may spawn, never
/// who may start them.
pub fn spawn_gate(request: &SpawnRequest<'_>) -> Result<(), SpawnRefusal> {
    let armed_by_policy = match request.policy {
        SpawnPolicy::Never => false,
        SpawnPolicy::Always => true,
        SpawnPolicy::Labeled => request.labeled,
    };
    if !armed_by_policy {
        return Err(SpawnRefusal::SpawnPolicy);
    }
    if request.actor == ActorPass::Collaborator {
        return Err(SpawnRefusal::CollaboratorNoSpawn);
    }
    if request.target.is_none() {
        return Err(SpawnRefusal::NoWorkItem);
    }
    let started = request.command.is_some_and(Command::spawns) || is_armed(request.last_recorded);
    if request.start_required && !started {
        return Err(SpawnRefusal::AwaitingStart);
    }
    Ok(())
}

/// The live session of the command's target, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    None,
    Active,
    Paused,
}

/// What executing a command does to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Spawn a session against the target (the spawn is the delivery).
    Spawn,
    /// Resume the paused session (`resumed`).
    Resume,
    /// Bring back the live session's agent, which exited: the command's own comment is
    /// delivered, which respawns it with its conversation (the delivery is the restart).
    Restart,
    /// Pause the active session (`paused`).
    Pause,
    /// Close the session the way a merge would (`stopped`).
    Stop,
    /// Release local resources, with or without a session.
    Cleanup,
    /// Nothing to do beyond recording (`noop`).
    Noop,
    /// Answer the agent's open permission prompt (never recorded).
    Answer { allow: bool },
}

/// What carrying out a command's [`Effect`] did: the `effect` of its `control.command`
/// line, and what the operator's verbs report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executed {
    /// A spawn was queued (the spawn itself is the queue's).
    SpawnQueued,
    /// The delivery that restarts an exited agent was queued.
    RestartQueued,
    /// An operator's `start` spawned a live session.
    Spawned,
    /// An operator's `start` produced no live session.
    SpawnFailed,
    Paused,
    Resumed,
    Stopped,
    /// Cleanup found something and removed all of it.
    Cleaned,
    /// Cleanup found nothing to remove.
    NothingToClean,
    /// Cleanup removed some of what it found (the rest is in the line's `error`).
    PartlyCleaned,
    /// Nothing to do beyond recording.
    Noop,
    /// The agent's open permission prompt was allowed.
    Approved,
    /// It was refused.
    Denied,
    /// No permission prompt was open to answer; nothing was typed or answered.
    NothingToAnswer,
}

impl Executed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SpawnQueued => "spawn-queued",
            Self::RestartQueued => "restart-queued",
            Self::Spawned => "spawned",
            Self::SpawnFailed => "spawn-failed",
            Self::Paused => "paused",
            Self::Resumed => "resumed",
            Self::Stopped => "stopped",
            Self::Cleaned => "cleaned",
            Self::NothingToClean => "nothing-to-clean",
            Self::PartlyCleaned => "partial",
            Self::Noop => "noop",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::NothingToAnswer => "nothing-to-answer",
        }
    }
}

/// What the dispatcher does with a comment, decided from the parse, the actor and the
/// target's session (reference §4.5, §5.2 steps 3 and 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlDecision {
    /// Not a command: deliver it as input.
    Forward,
    /// Settle `control-ambiguous`: nothing executed, nothing forwarded.
    Ambiguous { commands: Vec<Command> },
    /// Settle `control-rejected`: nothing recorded, nothing forwarded.
    Rejected { command: Command, rejection: Rejection },
    /// Record the command as the target's last, then carry out the effect. Consumed,
    /// never forwarded. (An arming command that would not act is `Rejected` instead, so
    /// it is never recorded; a disarming one always lands here.)
    Execute { command: Command, actor: Login, effect: Effect },
    /// Grant or revoke each login on the target's roster ([`RosterEdit::apply`]); no
    /// control record.
    Roster { edit: RosterEdit, actor: Login, logins: Vec<Login> },
    /// `execute`: emit `control.command` (`handed-to-graph`) and carry on delivering the
    /// comment so the phase-selection gate can read it.
    HandToGraph { actor: Login },
}

/// Decides a parsed comment. The named-actor re-check comes first: a command executes
/// only for a named actor in `authorizedUsers`, which is what keeps actor-less comments
/// and collaborators from commanding. `spawn_gate` is the gate's answer for this target
/// (consulted only by a spawning command when no session is live).
pub fn decide(
    parsed: &Parsed,
    actor: &Actor,
    authorized: &[Login],
    session: SessionState,
    spawn_gate: Result<(), SpawnRefusal>,
) -> ControlDecision {
    let (command, logins) = match parsed {
        Parsed::Plain => return ControlDecision::Forward,
        Parsed::Ambiguous { commands } => {
            return ControlDecision::Ambiguous { commands: commands.clone() };
        }
        Parsed::Command { command, logins } => (*command, logins),
    };
    let reject = |rejection| ControlDecision::Rejected { command, rejection };
    let Some(actor) = actor.login().filter(|login| authorized.contains(login)).cloned() else {
        return reject(Rejection::UnauthorizedActor);
    };
    let execute = |effect| ControlDecision::Execute { command, actor: actor.clone(), effect };
    match (command, session) {
        (Command::AddCollaborator | Command::RemoveCollaborator, _) if logins.is_empty() => {
            reject(Rejection::MissingCollaborator)
        }
        (Command::AddCollaborator, _) => {
            ControlDecision::Roster { edit: RosterEdit::Grant, actor, logins: logins.clone() }
        }
        (Command::RemoveCollaborator, _) => {
            ControlDecision::Roster { edit: RosterEdit::Revoke, actor, logins: logins.clone() }
        }
        (Command::Execute, _) => ControlDecision::HandToGraph { actor },
        (Command::Start | Command::Contribute | Command::Do | Command::Review, state) => {
            match (state, spawn_gate) {
                (SessionState::None, Ok(())) => execute(Effect::Spawn),
                (SessionState::None, Err(refusal)) => reject(Rejection::Spawn(refusal)),
                (SessionState::Paused, _) => execute(Effect::Resume),
                (SessionState::Active, _) => execute(Effect::Noop),
            }
        }
        (Command::Resume, SessionState::Paused) => execute(Effect::Resume),
        (Command::Resume, SessionState::None | SessionState::Active) => {
            reject(Rejection::NothingToResume)
        }
        (Command::Pause, SessionState::Active) => execute(Effect::Pause),
        (Command::Pause, SessionState::None | SessionState::Paused) => execute(Effect::Noop),
        (Command::Stop, SessionState::None) => execute(Effect::Noop),
        (Command::Stop, SessionState::Active | SessionState::Paused) => execute(Effect::Stop),
        (Command::Cleanup, _) => execute(Effect::Cleanup),
        (Command::Approve, _) => execute(Effect::Answer { allow: true }),
        (Command::Deny, _) => execute(Effect::Answer { allow: false }),
    }
}

/// The longest deny reason passed on to the agent, in characters.
pub const REASON_CAP: usize = 500;

/// What follows `keyword` on its line in `body`, trimmed and capped: a deny's reason.
/// `None` when nothing does (or the keyword is not there).
pub fn rest_of_line(body: &str, keyword: &str) -> Option<String> {
    if keyword.is_empty() {
        return None;
    }
    let text: Vec<(usize, char)> = body.char_indices().map(|(at, c)| (at, fold(c))).collect();
    let wanted: Vec<char> = keyword.chars().map(fold).collect();
    let start = text
        .windows(wanted.len())
        .position(|w| w.iter().map(|(_, c)| *c).eq(wanted.iter().copied()))?;
    let at = text.get(start + wanted.len()).map_or(body.len(), |(at, _)| *at);
    let line = body[at..].lines().next().unwrap_or_default();
    let reason = line.trim_start_matches([':', ',', '-', ' ']).trim();
    match reason.is_empty() {
        true => None,
        false => Some(reason.chars().take(REASON_CAP).collect()),
    }
}

/// A change to a work item's collaborator roster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosterEdit {
    Grant,
    Revoke,
}

/// What a roster edit did for one login (the `effect` of its `control.command` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosterEffect {
    Granted,
    AlreadyGranted,
    Revoked,
    NotACollaborator,
}

impl RosterEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Granted => "granted",
            Self::AlreadyGranted => "already-granted",
            Self::Revoked => "revoked",
            Self::NotACollaborator => "not-a-collaborator",
        }
    }
}

/// Who made a grant, when, through which surface, and the comment's URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grantor {
    pub by: Login,
    pub at: Timestamp,
    pub source: ControlSource,
    pub note: Option<String>,
}

impl RosterEdit {
    /// Applies the edit to a roster, login by login, comparing without regard to case.
    /// Returns one effect per login, in order.
    pub fn apply(
        self,
        roster: &mut Collaborators,
        logins: &[Login],
        grantor: &Grantor,
    ) -> Vec<(Login, RosterEffect)> {
        logins
            .iter()
            .map(|login| {
                let position = roster
                    .users
                    .iter()
                    .position(|u| u.login.as_str().eq_ignore_ascii_case(login.as_str()));
                let effect = match (self, position) {
                    (Self::Grant, Some(_)) => RosterEffect::AlreadyGranted,
                    (Self::Grant, None) => {
                        roster.users.push(Collaborator {
                            login: login.clone(),
                            added_by: grantor.by.clone(),
                            added_at: grantor.at,
                            source: grantor.source,
                            note: grantor.note.clone(),
                        });
                        RosterEffect::Granted
                    }
                    (Self::Revoke, Some(at)) => {
                        roster.users.remove(at);
                        RosterEffect::Revoked
                    }
                    (Self::Revoke, None) => RosterEffect::NotACollaborator,
                };
                (login.clone(), effect)
            })
            .collect()
    }
}

/// The work item a command, a start test or a spawn is about (reference §5.3): the first
/// live record owning any of the event's refs, whatever order the refs came in, else the
/// first ref. `review` typed on a pull request is about the pull request itself. `owner`
/// answers which live record's work item owns a ref (directly or through a recorded PR
/// binding).
pub fn target(
    command: Option<Command>,
    refs: &[WorkItemRef],
    pull_request: Option<&WorkItemRef>,
    owner: impl Fn(&WorkItemRef) -> Option<WorkItemRef>,
) -> Option<WorkItemRef> {
    if command == Some(Command::Review)
        && let Some(pr) = pull_request
    {
        return Some(pr.clone());
    }
    refs.iter().find_map(owner).or_else(|| refs.first().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The straightforward reading `parse` must agree with: every keyword tried at every
    /// position, commands in vocabulary order.
    fn parse_at_every_position(vocabulary: &Vocabulary, body: &str) -> Parsed {
        let text: Vec<(usize, char)> = body.char_indices().collect();
        let folded: Vec<char> = text.iter().map(|(_, c)| fold(*c)).collect();
        let mut found: Vec<Command> = Vec::new();
        let mut roster_args: Vec<usize> = Vec::new();
        for (command, keyword) in &vocabulary.keywords {
            for start in 0..folded.len() {
                let before = start.checked_sub(1).and_then(|i| folded.get(i));
                if before.is_some_and(|c| touches(*c)) {
                    continue;
                }
                let Some(end) = whole_token_at(&folded, start, keyword) else { continue };
                if !found.contains(command) {
                    found.push(*command);
                }
                if command.edits_roster() {
                    roster_args.push(text.get(end).map_or(body.len(), |(at, _)| *at));
                }
            }
        }
        parsed(found, roster_args, body)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn the_one_pass_parse_reads_every_body_as_trying_every_position_does(
            pieces in prop::collection::vec(
                prop::sample::select(vec![
                    "the-loop start", "THE-LOOP Stop", "the-loop", " start", "stop", "the-loop add-collaborator",
                    "the-loop remove-collaborator", "@octocat", "@Mona-Lisa", " ", "  ", "\n", "-", ":", "_",
                    ",", ".", "x", "the-loop pause", "İ", "é", "`", "the-loop do", "do",
                ]),
                0..14,
            )
        ) {
            let body = pieces.concat();
            let vocabulary = vocabulary();
            prop_assert_eq!(vocabulary.parse(&body), parse_at_every_position(&vocabulary, &body));
        }
    }

    fn vocabulary() -> Vocabulary {
        Vocabulary::from(&ControlConfig::default())
    }

    fn parse(body: &str) -> Parsed {
        vocabulary().parse(body)
    }

    fn command(body: &str) -> Option<Command> {
        match parse(body) {
            Parsed::Command { command, .. } => Some(command),
            _ => None,
        }
    }

    fn login(s: &str) -> Login {
        s.parse().unwrap()
    }

    #[test]
    fn every_default_keyword_is_recognised() {
        for c in Command::ALL {
            assert_eq!(command(&format!("the-loop {}", c.name())), Some(c), "{}", c.name());
        }
    }

    #[test]
    fn keywords_match_as_whole_tokens_case_insensitively() {
        let matches = [
            "the-loop start",
            "the-loop start.",
            "**the-loop start**",
            "(the-loop start)",
            "THE-LOOP START",
            "please\nthe-loop start\nthanks",
            "@the-loop start",
            "```\nthe-loop start\n```",
        ];
        for body in matches {
            assert_eq!(command(body), Some(Command::Start), "{body:?}");
        }
        let near_misses = [
            "xthe-loop start",
            "the-loop startx",
            "the-loop startlater",
            "the-loop start:now",
            "the-loop start-now",
            "the-loop  start",
            "the-loop\nstart",
            "the-loop done",
            "the-loop docs",
            "the-loop does",
            "the-loop add-collaborators @a",
        ];
        for body in near_misses {
            assert_eq!(parse(body), Parsed::Plain, "{body:?}");
        }
    }

    #[test]
    fn two_different_keywords_are_ambiguous_and_a_repeat_is_not() {
        assert_eq!(
            parse("the-loop start, no wait, the-loop stop"),
            Parsed::Ambiguous { commands: vec![Command::Start, Command::Stop] }
        );
        assert_eq!(command("the-loop stop. I said the-loop stop!"), Some(Command::Stop));
        assert!(matches!(
            parse("the-loop add-collaborator @a and the-loop start"),
            Parsed::Ambiguous { .. }
        ));
    }

    #[test]
    fn an_empty_keyword_disables_its_command_and_disabled_control_parses_nothing() {
        let mut config = ControlConfig::default();
        config.keywords.stop = String::new();
        assert_eq!(Vocabulary::from(&config).parse("the-loop stop"), Parsed::Plain);
        config.keywords.start = "go!".to_owned();
        assert_eq!(
            Vocabulary::from(&config).parse("GO!"),
            Parsed::Command { command: Command::Start, logins: vec![] }
        );
        config.enabled = false;
        assert_eq!(Vocabulary::from(&config).parse("the-loop pause"), Parsed::Plain);
        assert!(!start_required(&config));
    }

    #[test]
    fn collaborator_arguments_follow_githubs_login_grammar() {
        let logins = |body: &str| match parse(body) {
            Parsed::Command { logins, .. } => {
                logins.iter().map(|l| l.to_string()).collect::<Vec<_>>()
            }
            other => panic!("{body:?} parsed as {other:?}"),
        };
        let cases: [(&str, &[&str]); 8] = [
            (
                "please the-loop add-collaborator @a @b — they know this\nand the-loop add-collaborator @c too",
                &["a", "b", "c"],
            ),
            ("the-loop add-collaborator @dana/../etc --x", &[]),
            ("the-loop add-collaborator @dana rm -rf /", &["dana"]),
            ("the-loop add-collaborator @Dana, @dana, @bo.", &["dana", "bo"]),
            ("the-loop remove-collaborator (@x) `@y`", &[]),
            ("the-loop remove-collaborator @x) @y`", &["x", "y"]),
            ("the-loop add-collaborator @a--b", &[]),
            ("the-loop add-collaborator dana", &[]),
        ];
        for (body, expected) in cases {
            assert_eq!(logins(body), expected, "{body:?}");
        }
    }

    fn decision(
        body: &str,
        actor: Actor,
        session: SessionState,
        gate: Result<(), SpawnRefusal>,
    ) -> ControlDecision {
        decide(&parse(body), &actor, &[login("ann")], session, gate)
    }

    fn ann() -> Actor {
        Actor::User(login("ann"))
    }

    #[test]
    fn command_semantics_table() {
        use ControlDecision as D;
        use SessionState::*;
        let exec = |command, effect| D::Execute { command, actor: login("ann"), effect };
        let rejected = |command, rejection| D::Rejected { command, rejection };
        let refused = Err(SpawnRefusal::SpawnPolicy);
        let cases = [
            (
                "start spawns when the gate allows",
                "the-loop start",
                None,
                Ok(()),
                exec(Command::Start, Effect::Spawn),
            ),
            (
                "start on an unarmed item is refused",
                "the-loop start",
                None,
                refused,
                rejected(Command::Start, Rejection::Spawn(SpawnRefusal::SpawnPolicy)),
            ),
            (
                "start on a paused session resumes it",
                "the-loop start",
                Paused,
                refused,
                exec(Command::Start, Effect::Resume),
            ),
            (
                "start on an active session is recorded only",
                "the-loop start",
                Active,
                Ok(()),
                exec(Command::Start, Effect::Noop),
            ),
            (
                "review spawns like start",
                "the-loop review",
                None,
                Ok(()),
                exec(Command::Review, Effect::Spawn),
            ),
            (
                "resume with nothing paused is refused",
                "the-loop resume",
                None,
                Ok(()),
                rejected(Command::Resume, Rejection::NothingToResume),
            ),
            (
                "resume of an active session is refused",
                "the-loop resume",
                Active,
                Ok(()),
                rejected(Command::Resume, Rejection::NothingToResume),
            ),
            (
                "resume of a paused session",
                "the-loop resume",
                Paused,
                Ok(()),
                exec(Command::Resume, Effect::Resume),
            ),
            (
                "pause with no session is still recorded",
                "the-loop pause",
                None,
                Ok(()),
                exec(Command::Pause, Effect::Noop),
            ),
            (
                "pause of an active session",
                "the-loop pause",
                Active,
                Ok(()),
                exec(Command::Pause, Effect::Pause),
            ),
            (
                "stop with no session is still recorded",
                "the-loop stop",
                None,
                Ok(()),
                exec(Command::Stop, Effect::Noop),
            ),
            (
                "stop closes a paused session",
                "the-loop stop",
                Paused,
                Ok(()),
                exec(Command::Stop, Effect::Stop),
            ),
            (
                "cleanup runs with or without a session",
                "the-loop cleanup",
                None,
                Ok(()),
                exec(Command::Cleanup, Effect::Cleanup),
            ),
            (
                "execute is handed to the graph",
                "the-loop execute",
                Active,
                Ok(()),
                D::HandToGraph { actor: login("ann") },
            ),
            (
                "add-collaborator without a login",
                "the-loop add-collaborator @x/y",
                Active,
                Ok(()),
                rejected(Command::AddCollaborator, Rejection::MissingCollaborator),
            ),
            ("plain text is forwarded", "looks good", Active, Ok(()), D::Forward),
        ];
        for (name, body, session, gate, expected) in cases {
            assert_eq!(decision(body, ann(), session, gate), expected, "{name}");
        }
        assert_eq!(
            decision("the-loop add-collaborator @Dana", ann(), None, Ok(())),
            D::Roster { edit: RosterEdit::Grant, actor: login("ann"), logins: vec![login("dana")] }
        );
    }

    #[test]
    fn only_a_named_authorized_actor_commands() {
        let unauthorized = |actor| decision("the-loop stop", actor, SessionState::Active, Ok(()));
        let expected = ControlDecision::Rejected {
            command: Command::Stop,
            rejection: Rejection::UnauthorizedActor,
        };
        assert_eq!(unauthorized(Actor::Nobody), expected, "an actor-less comment");
        assert_eq!(unauthorized(Actor::User(login("dana"))), expected, "a collaborator");
        assert_eq!(unauthorized(Actor::Unrecognised("a b".into())), expected, "a malformed login");
        // The named-actor check comes before the argument check.
        assert_eq!(
            decision("the-loop add-collaborator", Actor::Nobody, SessionState::None, Ok(())),
            ControlDecision::Rejected {
                command: Command::AddCollaborator,
                rejection: Rejection::UnauthorizedActor
            }
        );
        // Ambiguity is decided whoever the actor is.
        assert!(matches!(
            decision("the-loop start the-loop stop", Actor::Nobody, SessionState::None, Ok(())),
            ControlDecision::Ambiguous { .. }
        ));
    }

    fn gate(
        policy: SpawnPolicy,
        labeled: bool,
        command: Option<Command>,
        last: Option<Command>,
    ) -> Result<(), SpawnRefusal> {
        let item: WorkItemRef = "github:o/r#1".parse().unwrap();
        spawn_gate(&SpawnRequest {
            policy,
            labeled,
            actor: ActorPass::Authorized,
            target: Some(&item),
            start_required: true,
            command,
            last_recorded: last,
        })
    }

    #[test]
    fn spawn_gate_table() {
        use Command::*;
        use SpawnPolicy::*;
        use SpawnRefusal as R;
        let cases = [
            (
                "an unlabelled start is refused by policy",
                Labeled,
                false,
                Some(Start),
                None,
                Err(R::SpawnPolicy),
            ),
            ("never never spawns", Never, true, Some(Start), None, Err(R::SpawnPolicy)),
            ("a labelled start spawns", Labeled, true, Some(Start), None, Ok(())),
            (
                "an item opened with the label waits for a start",
                Labeled,
                true,
                None,
                None,
                Err(R::AwaitingStart),
            ),
            ("always still waits for a start", Always, false, None, None, Err(R::AwaitingStart)),
            (
                "a recorded start survives: a later labelled event spawns",
                Labeled,
                true,
                None,
                Some(Start),
                Ok(()),
            ),
            ("a recorded resume arms", Labeled, true, None, Some(Resume), Ok(())),
            ("a recorded pause disarms", Labeled, true, None, Some(Pause), Err(R::AwaitingStart)),
            ("a recorded stop disarms", Always, true, None, Some(Stop), Err(R::AwaitingStart)),
            ("execute does not arm", Labeled, true, None, Some(Execute), Err(R::AwaitingStart)),
        ];
        for (name, policy, labeled, command, last, expected) in cases {
            assert_eq!(gate(policy, labeled, command, last), expected, "{name}");
        }
    }

    #[test]
    fn a_refused_start_leaves_nothing_so_labelling_later_does_not_start() {
        // The start is refused and, being a rejection, never recorded...
        let refusal = gate(SpawnPolicy::Labeled, false, Some(Command::Start), None);
        assert!(matches!(
            decision("the-loop start", ann(), SessionState::None, refusal),
            ControlDecision::Rejected { .. }
        ));
        // ...so the label arriving later finds no recorded start.
        assert_eq!(gate(SpawnPolicy::Labeled, true, None, None), Err(SpawnRefusal::AwaitingStart));
    }

    #[test]
    fn without_the_start_requirement_the_label_alone_spawns() {
        let item: WorkItemRef = "github:o/r#1".parse().unwrap();
        let config = ControlConfig { enabled: false, ..ControlConfig::default() };
        let request = SpawnRequest {
            policy: SpawnPolicy::Labeled,
            labeled: true,
            actor: ActorPass::Actorless,
            target: Some(&item),
            start_required: start_required(&config),
            command: None,
            last_recorded: None,
        };
        assert_eq!(spawn_gate(&request), Ok(()));
        assert_eq!(
            spawn_gate(&SpawnRequest { target: None, ..request }),
            Err(SpawnRefusal::NoWorkItem)
        );
        assert_eq!(
            spawn_gate(&SpawnRequest { actor: ActorPass::Collaborator, ..request }),
            Err(SpawnRefusal::CollaboratorNoSpawn)
        );
    }

    #[test]
    fn a_policy_refusal_releases_the_id_and_suppressions_settle_it() {
        assert_eq!(SpawnRefusal::SpawnPolicy.disposition(), Disposition::Release);
        assert_eq!(SpawnRefusal::AwaitingStart.disposition(), Disposition::Settle);
        assert_eq!(SpawnRefusal::CollaboratorNoSpawn.disposition(), Disposition::Settle);
        assert_eq!(SpawnRefusal::NoWorkItem.disposition(), Disposition::Keep);
    }

    #[test]
    fn the_control_target_is_the_running_record_whatever_the_order() {
        let refs: Vec<WorkItemRef> =
            ["github:o/r#15", "github:o/r#16"].iter().map(|s| s.parse().unwrap()).collect();
        let pr = refs[1].clone();
        let running: WorkItemRef = "github:o/other#3".parse().unwrap();
        let owner = |item: &WorkItemRef| (*item == pr).then(|| running.clone());
        assert_eq!(target(Some(Command::Stop), &refs, Some(&pr), owner), Some(running.clone()));
        assert_eq!(target(None, &refs, Some(&pr), |_| None), Some(refs[0].clone()));
        assert_eq!(target(Some(Command::Review), &refs, Some(&pr), owner), Some(pr.clone()));
        assert_eq!(target(None, &[], None, |_| None), None);
    }

    #[test]
    fn roster_edits_grant_once_and_revoke_without_regard_to_case() {
        let mut roster = Collaborators::default();
        let grantor = Grantor {
            by: login("ann"),
            at: "2026-11-29T10:00:00Z".parse().unwrap(),
            source: ControlSource::Comment,
            note: Some("https://github.com/o/r/issues/1#issuecomment-9".to_owned()),
        };
        let effects = |edit: RosterEdit, roster: &mut Collaborators, names: &[&str]| {
            let logins: Vec<Login> = names.iter().map(|n| login(n)).collect();
            edit.apply(roster, &logins, &grantor)
                .into_iter()
                .map(|(l, e)| format!("{l}:{}", e.as_str()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            effects(RosterEdit::Grant, &mut roster, &["dana", "bo"]),
            ["dana:granted", "bo:granted"]
        );
        assert_eq!(effects(RosterEdit::Grant, &mut roster, &["Dana"]), ["Dana:already-granted"]);
        assert_eq!(roster.users[0].added_by, login("ann"));
        assert_eq!(
            effects(RosterEdit::Revoke, &mut roster, &["DANA", "eve"]),
            ["DANA:revoked", "eve:not-a-collaborator"]
        );
        assert_eq!(roster.users.len(), 1);
    }

    #[test]
    fn recorded_commands_convert_and_arm() {
        assert!(is_armed(Some(Command::Do)));
        assert!(!is_armed(Some(Command::Cleanup)));
        assert!(!is_armed(None));
    }

    #[test]
    fn a_deny_carries_the_rest_of_its_line_as_the_reason() {
        let reason = |body: &str| rest_of_line(body, "the-loop deny");
        assert_eq!(
            reason("The-Loop deny: not outside the repo\nthanks").as_deref(),
            Some("not outside the repo")
        );
        assert_eq!(reason("the-loop deny"), None);
        assert_eq!(reason("Ünïcode first. the-loop deny — ça non").as_deref(), Some("— ça non"));
        assert_eq!(
            reason(&format!("the-loop deny {}", "x".repeat(900))).map(|r| r.len()),
            Some(REASON_CAP)
        );
        assert_eq!(reason("nothing here"), None);
    }

    #[test]
    fn approve_and_deny_answer_for_the_authorized_only_and_are_never_recorded() {
        let vocabulary = Vocabulary::from(&crate::config::Config::default().routing.control);
        let approve = vocabulary.parse("the-loop approve");
        assert_eq!(approve.command(), Some(Command::Approve));
        assert!(Command::Approve.answers_permission() && !Command::Approve.arms());
        let ann = Actor::User(login("ann"));
        let decided = decide(&approve, &ann, &[login("ann")], SessionState::Active, Ok(()));
        assert!(matches!(
            decided,
            ControlDecision::Execute { effect: Effect::Answer { allow: true }, .. }
        ));
        let deny = vocabulary.parse("the-loop deny because");
        let decided = decide(
            &deny,
            &Actor::User(login("eve")),
            &[login("ann")],
            SessionState::Active,
            Ok(()),
        );
        assert!(matches!(
            decided,
            ControlDecision::Rejected { rejection: Rejection::UnauthorizedActor, .. }
        ));
    }
}
