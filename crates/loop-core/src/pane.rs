//! What an agent's pane shows: its input box, read from a capture of the screen.
//!
//! A terminal agent such as Claude Code draws an input box at the bottom of its screen,
//! between two horizontal rules, starting with its prompt mark (`❯`). Whether a paste
//! *landed* is read there (docs/real-claude.md, "A paste that lands"): the pasted text
//! shows in the box before it is submitted, and leaves it once the agent took it — as a
//! turn, or queued behind the running one. A box that is not drawn at all means the agent
//! is not at its input (starting, or showing a dialog), and nothing may be typed.
//!
//! The signs are per harness ([`InputBoxSigns`]); Claude Code's are shipped
//! ([`InputBoxSigns::claude_code`]). Everything here reads a screen captured as plain
//! text (`tmux capture-pane -p`, no attributes); it does no IO.

/// How a harness draws its input box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputBoxSigns {
    /// The character a horizontal rule is drawn with (a rule is a line of only this).
    pub rule: char,
    /// The mark the box's first line starts with.
    pub prompt: char,
    /// What the harness shows in place of a long paste (`[Pasted text #1 +40 lines]`).
    pub collapsed_paste: String,
}

/// The shortest run of rule characters that counts as a rule (the box spans the pane).
const RULE_MIN: usize = 20;

/// How much of the pasted text's first line is looked for in the box: enough to tell it
/// from other text, short enough to fit the narrowest box on one line.
const PROBE_CHARS: usize = 24;

impl InputBoxSigns {
    /// Claude Code's (checked on 2.1.197; fixtures in `fixtures/pane/`).
    pub fn claude_code() -> Self {
        Self { rule: '─', prompt: '❯', collapsed_paste: "[Pasted text #".to_owned() }
    }

    /// The input box on `screen`, if it is drawn: the lines between the last two rules,
    /// the first of which starts with the prompt mark.
    pub fn input_box(&self, screen: &str) -> Option<InputBox<'_>> {
        let lines: Vec<&str> = screen.lines().collect();
        let mut rules = lines.iter().enumerate().rev().filter(|(_, line)| self.is_rule(line));
        let (below, _) = rules.next()?;
        let (above, _) = rules.next()?;
        let inside = &lines[above + 1..below];
        let first = inside.first()?.trim_start().strip_prefix(self.prompt)?;
        let rest = inside[1..].iter().map(|line| line.trim());
        let text = std::iter::once(first.trim()).chain(rest).collect::<Vec<_>>().join(" ");
        Some(InputBox { text: collapse_whitespace(&text), collapsed_paste: &self.collapsed_paste })
    }

    fn is_rule(&self, line: &str) -> bool {
        let line = line.trim();
        line.chars().count() >= RULE_MIN && line.chars().all(|c| c == self.rule)
    }
}

/// A drawn input box and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputBox<'a> {
    /// Its text after the prompt mark, lines joined, whitespace collapsed.
    text: String,
    collapsed_paste: &'a str,
}

impl InputBox<'_> {
    /// Whether nothing is typed in it (a dim placeholder counts as text: the screen
    /// capture has no attributes).
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Whether the box shows `pasted`: its collapsed form, or the start of its first
    /// line that is not blank.
    pub fn holds(&self, pasted: &str) -> bool {
        if self.text.contains(self.collapsed_paste) {
            return true;
        }
        let probe = probe(pasted);
        !probe.is_empty() && self.text.contains(probe.as_str())
    }
}

/// The start of `text`'s first non-blank line, whitespace collapsed, as the box shows it.
fn probe(text: &str) -> String {
    let line = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
    collapse_whitespace(line).chars().take(PROBE_CHARS).collect()
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const READY: &str = include_str!("../fixtures/pane/claude-ready.txt");
    const HOLDS_COLLAPSED: &str = include_str!("../fixtures/pane/claude-holds-collapsed.txt");
    const HOLDS_SHORT: &str = include_str!("../fixtures/pane/claude-holds-short.txt");
    const AFTER_TURN: &str = include_str!("../fixtures/pane/claude-after-turn.txt");
    const WORKING: &str = include_str!("../fixtures/pane/claude-working.txt");
    const QUEUED: &str = include_str!("../fixtures/pane/claude-queued.txt");

    const LONG: &str = "line 0 of a long prompt\nline 1 of a long prompt\n";
    const SHORT: &str = "Short comment: fix the parser";

    #[test]
    fn claude_codes_box_is_read_between_the_last_two_rules() {
        let signs = InputBoxSigns::claude_code();
        for (name, screen, empty) in [
            ("ready", READY, true),
            ("after a turn", AFTER_TURN, true),
            ("working", WORKING, true),
            ("holding a long paste", HOLDS_COLLAPSED, false),
            ("holding a short paste", HOLDS_SHORT, false),
            ("with a queued message", QUEUED, false),
        ] {
            let input = signs.input_box(screen).unwrap_or_else(|| panic!("{name}: no box"));
            assert_eq!(input.is_empty(), empty, "{name}: {input:?}");
        }
    }

    #[test]
    fn a_paste_is_held_until_the_agent_takes_it() {
        let signs = InputBoxSigns::claude_code();
        let holds = |screen: &str, text: &str| signs.input_box(screen).unwrap().holds(text);
        assert!(holds(HOLDS_COLLAPSED, LONG), "a long paste shows collapsed");
        assert!(holds(HOLDS_SHORT, SHORT), "a short one as itself");
        assert!(!holds(AFTER_TURN, LONG), "submitted: gone from the box");
        assert!(!holds(READY, SHORT));
        assert!(!holds(QUEUED, SHORT), "queued: shown above the box, not in it");
        assert!(!holds(HOLDS_SHORT, "Something else entirely"));
        assert!(!holds(READY, "  \n \n"), "a blank text is never seen");
    }

    #[test]
    fn no_box_is_drawn_on_a_shell_or_a_blank_screen() {
        let signs = InputBoxSigns::claude_code();
        assert_eq!(signs.input_box(""), None);
        assert_eq!(signs.input_box("$ ls\nfile\n$ "), None);
        let rule = "─".repeat(40);
        assert_eq!(signs.input_box(&format!("{rule}\nno prompt mark\n{rule}\n")), None);
        assert_eq!(signs.input_box(&format!("{rule}\n❯ one rule only\n")), None);
        let drawn = format!("{rule}\n  ❯ typed\n    more\n{rule}\nfooter\n");
        let input = signs.input_box(&drawn).unwrap();
        assert!(input.holds("typed more"), "{input:?}");
    }
}
