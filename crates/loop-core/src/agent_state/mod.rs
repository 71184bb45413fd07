//! The agent's state in its session, and how signs of it move that state
//! (docs/agent-states.md).
//!
//! A live session's agent is `starting`, `working` on a turn, `idle` at its input, at a
//! permission dialog (`needs-permission`), cut off by a usage or rate limit (`limited`),
//! `stalled` (working, no sign of life for `routing.stallAfterSeconds`) or `exited`. Two
//! sources report signs: the harness's hooks ([`hook`]: Claude Code's, written by the
//! `the-loop hook agent` binary into a spool the daemon reads) and the pane itself
//! ([`PaneLook`]: its screen, its current command, whether it is gone). [`Tracked::observe`]
//! is the whole transition rule, pure: a sign and the time it was seen in, the next
//! state out. Hooks win where both speak: once a session's hooks have reported, the pane
//! is read only for what hooks cannot say (the agent gone, a limit's reset time).
//!
//! What a state does to deliveries is [`AgentState::holds_delivery`]: only a dialog and a
//! limit hold them; the rest is the landing rule's (`starting`: it waits for the input
//! box), the respawn's (`exited`: resumed with its conversation) or Claude Code's own
//! queue (`working`, `stalled`: typed input waits for the turn).

pub mod hook;
pub mod limit;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

pub use self::limit::LimitNotice;

/// Where an agent is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum AgentState {
    /// Launched, not yet at its input.
    Starting,
    /// On a turn (a prompt submitted, tools running).
    Working,
    /// At its input prompt, waiting for the next turn.
    Idle,
    /// A permission dialog is open.
    NeedsPermission(Permission),
    /// Cut off by a usage or rate limit.
    Limited {
        /// When the limit resets, when the agent said so.
        until: Option<Timestamp>,
        /// What the agent showed (its error line).
        notice: String,
    },
    /// Working with no sign of life since `since`.
    Stalled,
    /// The agent process is gone, or its pane shows a shell.
    Exited,
}

/// The permission an agent asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Permission {
    /// The tool (`Bash`, `Edit`, an MCP tool's name).
    pub tool: String,
    /// What it would run or touch: the command, the file (one line, capped).
    pub input: String,
    /// The hook's id for this one prompt, when a hook asked: an answer goes to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

impl AgentState {
    /// The state's name as the API and the event log spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Working => "working",
            Self::Idle => "idle",
            Self::NeedsPermission(_) => "needs-permission",
            Self::Limited { .. } => "limited",
            Self::Stalled => "stalled",
            Self::Exited => "exited",
        }
    }

    /// Why a delivery into this agent must wait, if it must: nothing may be typed while a
    /// dialog is open (a paste is dropped and its Enter answers the dialog), nor while a
    /// limit lasts (the turn would fail again). `None`: deliver.
    pub fn holds_delivery(&self) -> Option<&'static str> {
        match self {
            Self::NeedsPermission(_) => Some("the agent is at a permission dialog"),
            Self::Limited { .. } => Some("the agent is cut off by a usage limit"),
            _ => None,
        }
    }

    /// Whether an operator should look: the agent waits on a person or cannot go on.
    pub fn needs_attention(&self) -> bool {
        matches!(
            self,
            Self::NeedsPermission(_) | Self::Limited { .. } | Self::Stalled | Self::Exited
        )
    }
}

/// What the work item is told when its agent leaves `before` for the state `tracked`
/// holds: a key naming the episode (one comment per key: one per permission prompt,
/// limit, stall or exit) and the comment's text, before its self-mark, naming the
/// commands by the keywords in force. `None`: nothing to tell — the agent is starting, working or
/// idle, or it is found exited without ever being seen alive (a session found dead at
/// the daemon's start is brought back by its next event; telling it on every restart
/// would repeat itself).
pub fn notice(
    before: &AgentState,
    tracked: &Tracked,
    keywords: &crate::config::ControlKeywords,
) -> Option<(String, String)> {
    let (since, approve, deny) = (tracked.since, &keywords.approve, &keywords.deny);
    Some(match &tracked.state {
        AgentState::NeedsPermission(asked) => {
            let tool = match asked.tool.is_empty() {
                true => "a tool".to_owned(),
                false => format!("`{}`", asked.tool),
            };
            let input = crate::hygiene::clean(&asked.input).replace("```", "'''");
            let key = format!("permission:{}", asked.request.as_deref().unwrap_or(&asked.input));
            let body = format!(
                "🔐 **the-loop**: the agent asks for permission to run {tool}:\n\n```\n{input}\n```\n\n\
                 Answer with a comment: `{approve}`, or `{deny} <reason>` (the reason is passed to \
                 the agent). Comments that arrive meanwhile are held and delivered once it is \
                 answered; nothing is typed into the dialog."
            );
            (key, body)
        }
        AgentState::Limited { until, notice } => {
            let when = until.map_or_else(
                || "its reset".to_owned(),
                |until| until.strftime("%H:%M UTC").to_string(),
            );
            let body = format!(
                "⏸️ **the-loop**: the agent is paused by a usage limit until {when} ({}). Events \
                 held meanwhile are delivered then.",
                crate::hygiene::clean(notice)
            );
            // One limit is one reset: a reading filled in later is the same limit.
            (format!("limit:{}", until.unwrap_or(since)), body)
        }
        AgentState::Stalled => (
            format!("stalled:{}", tracked.turn),
            format!(
                "⚠️ **the-loop**: the agent has shown no sign of life since {} while working. \
                 Look at it in its tmux session, or comment to nudge it.",
                tracked.alive_at.strftime("%H:%M UTC")
            ),
        ),
        AgentState::Exited if *before != AgentState::Starting => (
            format!("exited:{since}"),
            format!(
                "⚠️ **the-loop**: the agent exited at {}. Comment `{}` to bring it back with its \
                 conversation; any other comment does too, and is delivered.",
                since.strftime("%H:%M UTC"),
                keywords.resume
            ),
        ),
        AgentState::Exited => return None,
        AgentState::Starting | AgentState::Working | AgentState::Idle => return None,
    })
}

/// A sign of the agent's state, from one of its sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sign {
    /// A hook reported (see [`hook::Report`]).
    Hook(hook::Report),
    /// The pane was looked at.
    Pane(PaneLook),
}

/// What one look at an agent's pane saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaneLook {
    /// The session or its pane is gone, or the pane is dead.
    pub gone: bool,
    /// The pane's foreground command is a shell (the agent exited to it).
    pub shell: bool,
    /// The screen differs from the previous look: output, a sign of life.
    pub changed: bool,
    /// The input box is drawn (the agent is at its input).
    pub at_input: bool,
    /// A permission dialog is drawn: its question line.
    pub dialog: Option<String>,
    /// A usage-limit notice is drawn.
    pub limit: Option<LimitNotice>,
    /// The limit's own dialog is drawn (`1. Stop and wait for limit to reset`): the limit
    /// is now, and whatever is typed answers the dialog.
    pub limit_dialog: bool,
}

/// How a harness draws what [`PaneLook`] reads beyond its input box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneSigns {
    /// A line holding one of these is a permission dialog's question.
    pub dialog: Vec<String>,
    /// A line holding one of these is a usage-limit notice.
    pub limit: Vec<String>,
    /// A line holding one of these is the limit's dialog, open.
    pub limit_dialog: Vec<String>,
    /// The glyphs of the harness's busy animation: a line that starts with one, then a
    /// space, and holds `…` is the spinner (`✽ Swirling…`), which moves while the agent
    /// waits on nothing at all — it is no sign of life.
    pub spinner: Vec<char>,
}

impl PaneSigns {
    /// Claude Code's (checked on 2.1.197; docs/agent-states.md).
    pub fn claude_code() -> Self {
        Self {
            dialog: vec![
                "Do you want to proceed?".to_owned(),
                "Do you want to make this edit".to_owned(),
            ],
            limit: vec!["You've hit your".to_owned(), "limit reached".to_owned()],
            limit_dialog: vec!["Stop and wait for limit to reset".to_owned()],
            spinner: vec!['·', '✢', '✳', '✶', '✻', '✽', '*'],
        }
    }

    /// What of `screen` is the agent's output, for telling whether it moved: the lines
    /// above its input box (`input_box`'s rules; the box and the hints below it change
    /// on their own), without the spinner.
    pub fn output(&self, screen: &str, input_box: Option<&crate::pane::InputBoxSigns>) -> String {
        let lines: Vec<&str> = screen.lines().collect();
        let end = input_box
            .and_then(|signs| {
                let below = lines.iter().rposition(|line| signs.is_rule(line))?;
                lines[..below].iter().rposition(|line| signs.is_rule(line))
            })
            .unwrap_or(lines.len());
        let output = lines[..end].iter().filter(|line| !self.is_spinner(line));
        output.copied().collect::<Vec<_>>().join("\n")
    }

    fn is_spinner(&self, line: &str) -> bool {
        let mut chars = line.trim_start().chars();
        chars.next().is_some_and(|c| self.spinner.contains(&c))
            && chars.next() == Some(' ')
            && line.contains('…')
    }

    /// The dialog question on `screen`, if one is drawn.
    pub fn dialog(&self, screen: &str) -> Option<String> {
        find_line(screen, &self.dialog)
    }

    /// Whether the limit's dialog is drawn on `screen`.
    pub fn limit_dialog(&self, screen: &str) -> bool {
        find_line(screen, &self.limit_dialog).is_some()
    }

    /// The limit notice on `screen` seen at `now`, if one is drawn (the last one).
    pub fn limit(
        &self,
        screen: &str,
        now: Timestamp,
        zone_of: limit::ZoneOf<'_>,
    ) -> Option<LimitNotice> {
        find_line(screen, &self.limit).map(|line| LimitNotice::read(&line, now, zone_of))
    }
}

/// The last line of `screen` holding one of `needles`, trimmed.
fn find_line(screen: &str, needles: &[String]) -> Option<String> {
    screen
        .lines()
        .rev()
        .find(|line| needles.iter().any(|needle| line.contains(needle.as_str())))
        .map(|line| line.trim().trim_start_matches(['⎿', '│', '╭', '╰', ' ']).trim().to_owned())
}

/// An agent's state as tracked: where it is, since when, and its last sign of life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    pub state: AgentState,
    /// When it entered `state`.
    pub since: Timestamp,
    /// The last sign of life (a hook report, changed output).
    pub alive_at: Timestamp,
    /// When the current turn began: entering `working` from anything but `stalled` (a
    /// stall that ends is the same turn going on). A stall is told once per turn.
    pub turn: Timestamp,
    /// Whether its hooks have reported: the pane then only adds what hooks cannot say.
    pub hooked: bool,
    /// The notice of the last limit it was in: still on screen once that limit is over,
    /// it is history, not a new limit.
    pub last_limit: Option<String>,
}

impl Tracked {
    /// A session just launched (or first seen) at `now`.
    pub fn starting(now: Timestamp) -> Self {
        Self {
            state: AgentState::Starting,
            since: now,
            alive_at: now,
            turn: now,
            hooked: false,
            last_limit: None,
        }
    }

    /// Where it is in a sentence: what it waits on and how to answer it, for "Needs
    /// you" and `status`.
    pub fn in_words(&self) -> String {
        match &self.state {
            AgentState::NeedsPermission(asked) if asked.tool.is_empty() => {
                format!("at a permission dialog: {}", asked.input)
            }
            AgentState::NeedsPermission(asked) => format!(
                "at a permission dialog: {} `{}` — answer with `the-loop approve` or `the-loop deny`",
                asked.tool, asked.input
            ),
            AgentState::Limited { until: Some(until), .. } => {
                format!("cut off by a usage limit until {until}")
            }
            AgentState::Limited { notice, .. } => format!("cut off by a usage limit: {notice}"),
            AgentState::Stalled => format!("stalled: no sign of life since {}", self.alive_at),
            AgentState::Exited => format!("the agent exited at {}", self.since),
            other => other.name().to_owned(),
        }
    }

    /// Takes `sign`, seen at `now`; whether the state changed.
    pub fn observe(&mut self, sign: &Sign, now: Timestamp) -> bool {
        let next = match sign {
            Sign::Hook(report) => {
                self.hooked = true;
                self.alive_at = now;
                self.after_hook(report)
            }
            Sign::Pane(look) => {
                if look.changed {
                    self.alive_at = now;
                }
                self.after_look(look, now)
            }
        };
        match next {
            Some(next) if next != self.state => {
                if next == AgentState::Working && self.state != AgentState::Stalled {
                    self.turn = now;
                }
                if let AgentState::Limited { notice, .. } = &next {
                    self.last_limit = Some(notice.clone());
                }
                self.state = next;
                self.since = now;
                true
            }
            _ => false,
        }
    }

    /// `working` with no sign of life for `stall_after` is `stalled` at `now`; whether
    /// the state changed.
    pub fn tick(&mut self, now: Timestamp, stall_after: SignedDuration) -> bool {
        let quiet = now.duration_since(self.alive_at) >= stall_after;
        if self.state == AgentState::Working && quiet {
            self.state = AgentState::Stalled;
            self.since = now;
            return true;
        }
        false
    }

    fn after_hook(&self, report: &hook::Report) -> Option<AgentState> {
        use hook::Event as E;
        Some(match &report.event {
            E::SessionStart => AgentState::Idle,
            E::UserPromptSubmit | E::PreToolUse | E::PostToolUse => AgentState::Working,
            E::PermissionRequest => AgentState::NeedsPermission(Permission {
                tool: report.tool.clone().unwrap_or_default(),
                input: report.input.clone().unwrap_or_default(),
                request: report.request.clone(),
            }),
            // A dialog's reminder, or the agent long idle: only the latter says anything.
            E::Notification => match report.kind.as_deref() {
                Some("idle_prompt") => AgentState::Idle,
                _ => return None,
            },
            E::Stop => AgentState::Idle,
            E::StopFailure if report.error.as_deref() == Some("rate_limit") => {
                let notice = report.message.clone().unwrap_or_else(|| "rate limit".to_owned());
                let known = match &self.state {
                    AgentState::Limited { until, .. } => *until,
                    _ => None,
                };
                // The hook's reading of its message, else what the pane read first.
                AgentState::Limited { until: report.resets_at.or(known), notice }
            }
            E::StopFailure => AgentState::Idle,
            E::SessionEnd => AgentState::Exited,
            E::Other(_) | E::Unknown => return None,
        })
    }

    fn after_look(&self, look: &PaneLook, now: Timestamp) -> Option<AgentState> {
        if look.gone || look.shell {
            return Some(AgentState::Exited);
        }
        if let Some(limited) = self.limit_on(look, now) {
            return Some(limited);
        }
        if self.hooked {
            // Hooks said where it is; the pane adds only that a stall ended.
            return (self.state == AgentState::Stalled && look.changed)
                .then_some(AgentState::Working);
        }
        if let Some(question) = &look.dialog {
            let input = match &self.state {
                AgentState::NeedsPermission(asked) => {
                    return Some(AgentState::NeedsPermission(asked.clone()));
                }
                _ => question.clone(),
            };
            return Some(AgentState::NeedsPermission(Permission {
                tool: String::new(),
                input,
                request: None,
            }));
        }
        if look.at_input && !look.changed {
            return Some(AgentState::Idle);
        }
        look.changed.then_some(AgentState::Working)
    }

    /// The limit the pane shows in force at `now`, if it shows one. A limit's reading is
    /// fixed when it is first seen (its notice stays on screen, and read again after the
    /// reset it would name tomorrow); the pane only adds a reset time it lacked. It is
    /// over at its reset once its dialog is closed, or, with no reset known, when the
    /// screen moves (the agent was told to go on). Entered from the pane by the limit's
    /// dialog, or, for an agent without hooks (which report limits themselves), by a
    /// notice that is not the last limit's.
    fn limit_on(&self, look: &PaneLook, now: Timestamp) -> Option<AgentState> {
        let notice = look.limit.as_ref();
        if let AgentState::Limited { until, notice: text } = &self.state {
            let until = until.or_else(|| notice.and_then(|n| n.resets_at));
            let over = !look.limit_dialog && until.map_or(look.changed, |until| now >= until);
            return (!over).then(|| AgentState::Limited { until, notice: text.clone() });
        }
        let notice = match look.limit_dialog {
            true => notice
                .cloned()
                .unwrap_or_else(|| LimitNotice { text: "usage limit".to_owned(), resets_at: None }),
            false => notice
                .filter(|n| !self.hooked && self.last_limit.as_deref() != Some(n.text.as_str()))?
                .clone(),
        };
        Some(AgentState::Limited { until: notice.resets_at, notice: notice.text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hook::{Event, Report};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn keywords() -> crate::config::ControlKeywords {
        crate::config::Config::default().routing.control.keywords
    }

    fn report(event: Event) -> Sign {
        Sign::Hook(Report { event, ..Report::default() })
    }

    #[test]
    fn hooks_walk_a_turn_through_a_permission_dialog() {
        let mut agent = Tracked::starting(at(0));
        assert!(agent.observe(&report(Event::SessionStart), at(1)));
        assert_eq!(agent.state, AgentState::Idle);
        assert!(agent.observe(&report(Event::UserPromptSubmit), at(2)));
        assert!(!agent.observe(&report(Event::PreToolUse), at(3)), "still working");
        assert_eq!(agent.since, at(2), "since the state began");
        let asked = Report {
            event: Event::PermissionRequest,
            tool: Some("Bash".into()),
            input: Some("touch /tmp/x".into()),
            request: Some("r1".into()),
            ..Report::default()
        };
        assert!(agent.observe(&Sign::Hook(asked), at(4)));
        assert_eq!(agent.state.holds_delivery(), Some("the agent is at a permission dialog"));
        let reminder = Report {
            event: Event::Notification,
            kind: Some("permission_prompt".into()),
            ..Report::default()
        };
        assert!(!agent.observe(&Sign::Hook(reminder), at(10)), "a reminder changes nothing");
        assert!(agent.observe(&report(Event::PostToolUse), at(11)), "answered: the tool ran");
        assert_eq!(agent.state, AgentState::Working);
        assert!(agent.observe(&report(Event::Stop), at(12)));
        assert_eq!((agent.state.clone(), agent.state.holds_delivery()), (AgentState::Idle, None));
        assert!(agent.observe(&report(Event::SessionEnd), at(13)));
        assert_eq!(agent.state, AgentState::Exited);
    }

    #[test]
    fn once_hooks_speak_the_pane_only_adds_exit_limits_and_the_end_of_a_stall() {
        let mut agent = Tracked::starting(at(0));
        agent.observe(&report(Event::UserPromptSubmit), at(1));
        let dialog =
            PaneLook { dialog: Some("Do you want to proceed?".into()), ..PaneLook::default() };
        assert!(!agent.observe(&Sign::Pane(dialog.clone()), at(2)), "hooks tell dialogs");
        let idle_look = PaneLook { at_input: true, ..PaneLook::default() };
        assert!(!agent.observe(&Sign::Pane(idle_look), at(3)));
        assert!(agent.tick(at(3 + 900), SignedDuration::from_secs(900)));
        assert_eq!(agent.state, AgentState::Stalled);
        let output = PaneLook { changed: true, ..PaneLook::default() };
        assert!(agent.observe(&Sign::Pane(output), at(1000)));
        assert_eq!(agent.state, AgentState::Working);
        let limit = LimitNotice { text: "You've hit your session limit".into(), resets_at: None };
        let notice = PaneLook { limit: Some(limit), ..PaneLook::default() };
        assert!(!agent.observe(&Sign::Pane(notice.clone()), at(1001)), "hooks tell limits");
        let dialog = PaneLook { limit_dialog: true, ..notice };
        assert!(agent.observe(&Sign::Pane(dialog), at(1001)), "but its dialog is now");
        assert_eq!(agent.state.name(), "limited");
        let failure = Report {
            event: Event::StopFailure,
            error: Some("rate_limit".into()),
            message: Some("API Error".into()),
            ..Report::default()
        };
        agent.observe(&Sign::Hook(failure), at(1002));
        assert!(
            matches!(&agent.state, AgentState::Limited { notice, .. } if notice == "API Error")
        );
        assert!(
            agent.observe(&Sign::Pane(PaneLook { gone: true, ..PaneLook::default() }), at(1003))
        );
        assert_eq!(agent.state, AgentState::Exited);
    }

    #[test]
    fn a_limit_is_read_once_and_its_notice_is_history_once_it_is_over() {
        let text = "You've hit your session limit · resets 5:54pm (UTC)";
        let failure = Report {
            event: Event::StopFailure,
            error: Some("rate_limit".into()),
            message: Some(text.into()),
            resets_at: Some(at(100)),
            ..Report::default()
        };
        let limited = AgentState::Limited { until: Some(at(100)), notice: text.into() };
        // With hooks: the hook's reading stands, the pane's later one (tomorrow) does not.
        let mut agent = Tracked::starting(at(0));
        agent.observe(&report(Event::UserPromptSubmit), at(1));
        assert!(agent.observe(&Sign::Hook(failure), at(2)));
        let reread = LimitNotice { text: text.into(), resets_at: Some(at(100 + 86_400)) };
        let shown = PaneLook { limit: Some(reread), limit_dialog: true, ..PaneLook::default() };
        assert!(!agent.observe(&Sign::Pane(shown.clone()), at(101)));
        assert_eq!(agent.state, limited);
        let closed = PaneLook { limit_dialog: false, at_input: true, ..shown.clone() };
        assert!(!agent.observe(&Sign::Pane(closed.clone()), at(102)), "the hooks end it");
        assert!(agent.observe(&report(Event::UserPromptSubmit), at(103)));
        assert!(!agent.observe(&Sign::Pane(closed.clone()), at(104)), "history");
        // Without hooks: a notice is a limit until its reset, then history.
        let mut agent = Tracked::starting(at(0));
        let first = LimitNotice { text: text.into(), resets_at: Some(at(100)) };
        let notice = PaneLook { limit: Some(first), ..PaneLook::default() };
        assert!(agent.observe(&Sign::Pane(notice.clone()), at(2)));
        assert_eq!(agent.state, limited);
        assert!(!agent.observe(&Sign::Pane(closed.clone()), at(99)), "not yet");
        assert!(agent.observe(&Sign::Pane(closed.clone()), at(100)));
        assert_eq!(agent.state, AgentState::Idle);
        assert!(!agent.observe(&Sign::Pane(closed), at(101)), "history");
        let unknown = LimitNotice { text: "limit reached".into(), resets_at: None };
        assert!(agent.observe(&Sign::Pane(PaneLook { limit: Some(unknown), ..notice }), at(200)));
        assert_eq!(agent.state.name(), "limited", "a new notice is a new limit");
    }

    #[test]
    fn without_hooks_the_pane_tells_everything() {
        let mut agent = Tracked::starting(at(0));
        assert!(
            agent.observe(&Sign::Pane(PaneLook { changed: true, ..PaneLook::default() }), at(1))
        );
        assert_eq!(agent.state, AgentState::Working);
        let dialog =
            PaneLook { dialog: Some("Do you want to proceed?".into()), ..PaneLook::default() };
        assert!(agent.observe(&Sign::Pane(dialog.clone()), at(2)));
        assert!(
            matches!(&agent.state, AgentState::NeedsPermission(p) if p.input == "Do you want to proceed?")
        );
        assert!(!agent.observe(&Sign::Pane(dialog), at(3)), "the same dialog");
        assert!(
            agent.observe(&Sign::Pane(PaneLook { at_input: true, ..PaneLook::default() }), at(4))
        );
        assert_eq!(agent.state, AgentState::Idle);
        assert!(agent.observe(&Sign::Pane(PaneLook { shell: true, ..PaneLook::default() }), at(5)));
        assert_eq!(agent.state, AgentState::Exited);
        assert!(!agent.tick(at(10_000), SignedDuration::from_secs(900)), "only work stalls");
    }

    #[test]
    fn a_permission_prompt_is_told_once_with_its_command_and_how_to_answer() {
        let asked = Permission {
            tool: "Bash".into(),
            input: "rm -rf ``` x".into(),
            request: Some("r1".into()),
        };
        let tracked =
            Tracked { state: AgentState::NeedsPermission(asked), ..Tracked::starting(at(0)) };
        let (key, body) = notice(&AgentState::Working, &tracked, &keywords()).unwrap();
        assert_eq!(key, "permission:r1");
        assert!(body.contains("`Bash`") && body.contains("rm -rf ''' x"), "{body}");
        assert!(body.contains("`the-loop approve`"), "{body}");
        assert_eq!(notice(&AgentState::Idle, &Tracked::starting(at(0)), &keywords()), None);
        let until = Some(Timestamp::from_second(1_800_003_600).unwrap());
        let state = AgentState::Limited { until, notice: "You've hit your limit".into() };
        let limited = Tracked { state, ..Tracked::starting(at(0)) };
        let (_, body) = notice(&AgentState::Working, &limited, &keywords()).unwrap();
        assert!(body.contains("until 09:00 UTC"), "{body}");
    }

    #[test]
    fn an_exit_is_told_only_when_the_agent_was_seen_alive_before() {
        let exited = Tracked { state: AgentState::Exited, ..Tracked::starting(at(0)) };
        let (key, body) = notice(&AgentState::Working, &exited, &keywords()).unwrap();
        assert!(key.starts_with("exited:") && body.contains("exited at"), "{key} {body}");
        assert_eq!(
            notice(&AgentState::Starting, &exited, &keywords()),
            None,
            "found dead at start"
        );
    }

    #[test]
    fn a_stall_is_told_once_per_turn_however_often_it_ends_and_returns() {
        let stall = SignedDuration::from_secs(60);
        let mut agent = Tracked::starting(at(0));
        agent.observe(&report(Event::UserPromptSubmit), at(1));
        let key = |agent: &Tracked| notice(&AgentState::Working, agent, &keywords()).map(|n| n.0);
        assert!(agent.tick(at(61), stall));
        let first = key(&agent).unwrap();
        let output = PaneLook { changed: true, ..PaneLook::default() };
        assert!(agent.observe(&Sign::Pane(output), at(70)), "output: working again");
        assert!(agent.tick(at(130), stall));
        assert_eq!(key(&agent).unwrap(), first, "the same turn");
        agent.observe(&report(Event::Stop), at(140));
        agent.observe(&report(Event::UserPromptSubmit), at(150));
        assert!(agent.tick(at(210), stall));
        assert_ne!(key(&agent).unwrap(), first, "a new turn");
    }

    #[test]
    fn the_spinner_and_what_is_below_the_input_box_are_not_output() {
        let signs = PaneSigns::claude_code();
        let boxed = crate::pane::InputBoxSigns::claude_code();
        let rule = "─".repeat(40);
        let screen = |spinner: &str, hint: &str| {
            format!("⏺ Reading the parser\n\n{spinner} Swirling…\n\n{rule}\n❯ \n{rule}\n  {hint}\n")
        };
        let one = signs.output(&screen("✽", "paste again to expand"), Some(&boxed));
        let two = signs.output(&screen("·", "esc to interrupt"), Some(&boxed));
        assert_eq!(one, two);
        assert!(one.contains("Reading the parser") && !one.contains("Swirling"), "{one}");
        let more = signs.output(&screen("✽", "").replace("parser", "lexer"), Some(&boxed));
        assert_ne!(one, more, "new output is a change");
        assert!(signs.output("* a list item\n", None).contains("a list item"));
    }

    #[test]
    fn claude_codes_dialog_and_limit_are_read_off_its_screen() {
        let signs = PaneSigns::claude_code();
        let screen =
            " Bash command\n   touch /tmp/x\n Do you want to proceed?\n ❯ 1. Yes\n   3. No\n";
        assert_eq!(signs.dialog(screen).as_deref(), Some("Do you want to proceed?"));
        assert_eq!(signs.dialog("❯ hello\n"), None);
        let screen = "  ⎿  You've hit your session limit · resets 5:08pm (UTC)\n\n What do you want to do?\n";
        let utc = |_: Option<&str>| Some(jiff::tz::TimeZone::UTC);
        let notice = signs.limit(screen, at(0), &utc).unwrap();
        assert_eq!(notice.text, "You've hit your session limit · resets 5:08pm (UTC)");
    }
}
