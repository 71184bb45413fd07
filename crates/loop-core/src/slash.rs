//! The slash commands the-loop ships: one table of every command a prompt or a shipped
//! loop may name (`/the-loop:<name>`), each with its instructions written once, under
//! `crates/loop-core/commands/<name>.md`. The Claude Code plugin writes each as
//! `commands/<name>.md` ([`SlashCommand::plugin_file`]); a harness without the plugin
//! (Cursor, the command harness) gets the same text inline in its prompt or assignment
//! ([`SlashCommand::inline`]), so no agent is ever told to run a command it does not have.
//! The loop compiler refuses a node naming a command outside this table.

/// One shipped command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlashCommand {
    /// `work-on` for `/the-loop:work-on`.
    pub name: &'static str,
    /// The front matter's `description:` (what Claude Code lists).
    pub description: &'static str,
    /// What the command's argument is.
    pub argument: &'static str,
    /// The instructions, in Markdown.
    pub body: &'static str,
}

/// The argument of a graph node's command: the work item's spec id.
const SPEC_ID: &str = "<spec id of the work item, e.g. issue-12>";

/// Every command, `work-on` first.
pub const SHIPPED: [SlashCommand; 11] = [
    SlashCommand {
        name: "work-on",
        description: "Start or continue work on a the-loop work item",
        argument: "<work-item ref, e.g. github:owner/repo#12>",
        body: include_str!("../commands/work-on.md"),
    },
    SlashCommand {
        name: "brainstorm",
        description: "the-loop brainstorming phase: write and lock brainstorm.md",
        argument: SPEC_ID,
        body: include_str!("../commands/brainstorm.md"),
    },
    SlashCommand {
        name: "new-requirement",
        description: "the-loop requirements phase: write requirements.md or bugfix.md",
        argument: SPEC_ID,
        body: include_str!("../commands/new-requirement.md"),
    },
    SlashCommand {
        name: "create-design",
        description: "the-loop design phase: write and lock design.md",
        argument: SPEC_ID,
        body: include_str!("../commands/create-design.md"),
    },
    SlashCommand {
        name: "create-testing-plan",
        description: "the-loop test-planning phase: write and lock testing-plan.md",
        argument: SPEC_ID,
        body: include_str!("../commands/create-testing-plan.md"),
    },
    SlashCommand {
        name: "create-tasks-plan",
        description: "the-loop tasks-breakdown phase: write and lock tasks.md",
        argument: SPEC_ID,
        body: include_str!("../commands/create-tasks-plan.md"),
    },
    SlashCommand {
        name: "execute-tasks",
        description: "the-loop implementation phase: build and tick every task in tasks.md",
        argument: SPEC_ID,
        body: include_str!("../commands/execute-tasks.md"),
    },
    SlashCommand {
        name: "verify-work",
        description: "the-loop verification phase: run the plan's checks and record results",
        argument: SPEC_ID,
        body: include_str!("../commands/verify-work.md"),
    },
    SlashCommand {
        name: "finish-tasks",
        description: "the-loop: a completed work item's last steps",
        argument: SPEC_ID,
        body: include_str!("../commands/finish-tasks.md"),
    },
    SlashCommand {
        name: "do-task",
        description: "the-loop ad-hoc task: do what the work item asks, then claim it",
        argument: SPEC_ID,
        body: include_str!("../commands/do-task.md"),
    },
    SlashCommand {
        name: "contribute-to",
        description: "the-loop contribution: a scoped plan for somebody else's work item",
        argument: SPEC_ID,
        body: include_str!("../commands/contribute-to.md"),
    },
];

/// `/the-loop:work-on`, which every spawn prompt names.
pub const WORK_ON: SlashCommand = SHIPPED[0];

/// The shipped command called `name`.
pub fn shipped(name: &str) -> Option<&'static SlashCommand> {
    SHIPPED.iter().find(|command| command.name == name)
}

impl SlashCommand {
    /// `commands/<name>.md` of the plugin: front matter (each value a double-quoted YAML
    /// string), the argument, the instructions.
    pub fn plugin_file(&self) -> String {
        let quoted = |text: &str| serde_json::Value::from(text).to_string();
        format!(
            "---\ndescription: {}\nargument-hint: {}\n---\n\nThe argument is $ARGUMENTS.\n\n{}\n",
            quoted(self.description),
            quoted(self.argument),
            self.body.trim_end()
        )
    }

    /// How a prompt tells the agent to run it for `argument`: by name when the harness
    /// has the plugin, else its instructions, inline.
    pub fn invoke(&self, argument: &str, plugin: bool) -> String {
        if plugin {
            format!("Run `/the-loop:{} {argument}`.", self.name)
        } else {
            self.inline(argument)
        }
    }

    /// The instructions for `argument`, for a harness without the plugin.
    pub fn inline(&self, argument: &str) -> String {
        format!(
            "Instructions (the `{}` command) for {argument}:\n\n{}",
            self.name,
            self.body.trim_end()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_each_text_says_how_to_claim_and_ask() {
        for (at, command) in SHIPPED.iter().enumerate() {
            assert!(
                SHIPPED[..at].iter().all(|other| other.name != command.name),
                "{} twice",
                command.name
            );
            assert!(!command.description.contains('\n'), "{} is one line", command.name);
            assert!(command.body.contains("the-loop ask"), "{} says when to ask", command.name);
            if command.name != "work-on" && command.name != "finish-tasks" {
                assert!(
                    command.body.contains("the-loop graph complete"),
                    "{} says how to claim",
                    command.name
                );
            }
        }
    }

    #[test]
    fn the_plugin_file_opens_with_front_matter_and_the_inline_form_names_no_command() {
        let command = shipped("brainstorm").expect("shipped");
        let file = command.plugin_file();
        assert!(file.starts_with("---\ndescription: \"the-loop brainstorming phase"), "{file}");
        assert!(file.contains("\n---\n\nThe argument is $ARGUMENTS."), "{file}");
        let inline = command.invoke("issue-3", false);
        assert!(!inline.contains("/the-loop:") && inline.contains("brainstorm.md"), "{inline}");
        assert_eq!(command.invoke("issue-3", true), "Run `/the-loop:brainstorm issue-3`.");
    }
}
