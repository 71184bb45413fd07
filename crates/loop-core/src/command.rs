//! The commands an operator gives a work item (`the-loop start`, `pause`, …, the roster
//! edits): the vocabulary both the control rules ([`crate::control`]) and the records
//! ([`crate::record`], whose `control.command` holds the last one) speak. Only the names
//! and what each command is; parsing a comment and deciding what a command does are in
//! `control`.

use crate::config::ControlKeywords;

/// A control command (`routing.control.keywords.<name>`), also what a portable record's
/// `control.command` holds: the last command recorded (never a roster edit, which writes
/// the `collaborators` section instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Command {
    Start,
    Contribute,
    Do,
    Review,
    Resume,
    Pause,
    Stop,
    Cleanup,
    Execute,
    AddCollaborator,
    RemoveCollaborator,
    /// Answer the agent's open permission prompt: allow it.
    Approve,
    /// Answer the agent's open permission prompt: refuse it (the rest of the line is the
    /// reason the agent is given).
    Deny,
}

impl Command {
    pub const ALL: [Command; 13] = [
        Command::Start,
        Command::Contribute,
        Command::Do,
        Command::Review,
        Command::Resume,
        Command::Pause,
        Command::Stop,
        Command::Cleanup,
        Command::Execute,
        Command::AddCollaborator,
        Command::RemoveCollaborator,
        Command::Approve,
        Command::Deny,
    ];

    /// The command's name, as in `routing.control.keywords` and the event log.
    pub fn name(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Contribute => "contribute",
            Self::Do => "do",
            Self::Review => "review",
            Self::Resume => "resume",
            Self::Pause => "pause",
            Self::Stop => "stop",
            Self::Cleanup => "cleanup",
            Self::Execute => "execute",
            Self::AddCollaborator => "add-collaborator",
            Self::RemoveCollaborator => "remove-collaborator",
            Self::Approve => "approve",
            Self::Deny => "deny",
        }
    }

    /// Start, contribute, do and review: may spawn a session.
    pub fn spawns(self) -> bool {
        matches!(self, Self::Start | Self::Contribute | Self::Do | Self::Review)
    }

    /// The spawning commands and resume: as the last recorded command, the item is armed.
    pub fn arms(self) -> bool {
        self.spawns() || self == Self::Resume
    }

    /// Pause, stop and cleanup: always recorded, and they disarm.
    pub fn disarms(self) -> bool {
        matches!(self, Self::Pause | Self::Stop | Self::Cleanup)
    }

    /// The two roster commands, which take `@login` arguments and write no control record.
    pub fn edits_roster(self) -> bool {
        matches!(self, Self::AddCollaborator | Self::RemoveCollaborator)
    }

    /// Approve and deny: they answer the agent's open permission prompt and are never
    /// recorded as the item's last command (they neither arm nor disarm it).
    pub fn answers_permission(self) -> bool {
        matches!(self, Self::Approve | Self::Deny)
    }

    /// The comment text that issues this command (`routing.control.keywords.<name>`).
    pub fn keyword(self, keywords: &ControlKeywords) -> &str {
        match self {
            Self::Start => &keywords.start,
            Self::Contribute => &keywords.contribute,
            Self::Do => &keywords.r#do,
            Self::Review => &keywords.review,
            Self::Resume => &keywords.resume,
            Self::Pause => &keywords.pause,
            Self::Stop => &keywords.stop,
            Self::Cleanup => &keywords.cleanup,
            Self::Execute => &keywords.execute,
            Self::AddCollaborator => &keywords.add_collaborator,
            Self::RemoveCollaborator => &keywords.remove_collaborator,
            Self::Approve => &keywords.approve,
            Self::Deny => &keywords.deny,
        }
    }
}
