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
    /// What the harness shows in place of a long paste: this, a number, then ` +N
    /// lines]` where N counts the paste's line breaks, or `]` when it has none
    /// (`[Pasted text #3 +39 lines]` for 40 lines).
    pub collapsed_paste: String,
    /// Dim hints the harness draws in an empty box (a screen capture has no
    /// attributes to tell them from typed text).
    pub placeholders: Vec<String>,
}

/// The shortest run of rule characters that counts as a rule (the box spans the pane).
const RULE_MIN: usize = 20;

/// How much of the pasted text's first line is looked for in the box: enough to tell it
/// from other text, short enough to fit the narrowest box on one line.
const PROBE_CHARS: usize = 24;

impl InputBoxSigns {
    /// Claude Code's (checked on 2.1.197; fixtures in `fixtures/pane/`).
    pub fn claude_code() -> Self {
        Self {
            rule: '─',
            prompt: '❯',
            collapsed_paste: "[Pasted text #".to_owned(),
            placeholders: vec!["Press up to edit queued messages".to_owned()],
        }
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
        Some(InputBox { text: collapse_whitespace(&text), signs: self })
    }

    /// Whether `line` is one of the box's horizontal rules.
    pub fn is_rule(&self, line: &str) -> bool {
        let line = line.trim();
        line.chars().count() >= RULE_MIN && line.chars().all(|c| c == self.rule)
    }
}

/// A drawn input box and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputBox<'a> {
    /// Its text after the prompt mark, lines joined, whitespace collapsed.
    text: String,
    signs: &'a InputBoxSigns,
}

impl InputBox<'_> {
    /// Whether nothing is typed in it: no text, or only a placeholder hint.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() || self.signs.placeholders.contains(&self.text)
    }

    /// Whether the box shows `pasted`, pasted into it empty: it starts with `pasted`'s
    /// collapsed form (the mark with its count of line breaks) or with the start of its
    /// first line that is not blank.
    pub fn holds(&self, pasted: &str) -> bool {
        let probe = probe(pasted);
        if probe.is_empty() {
            return false;
        }
        if self.text.starts_with(probe.as_str()) {
            return true;
        }
        let Some(rest) = self.text.strip_prefix(self.signs.collapsed_paste.as_str()) else {
            return false;
        };
        let breaks = pasted.replace("\r\n", "\n").matches(['\n', '\r']).count();
        let tail = if breaks == 0 { "]".to_owned() } else { format!(" +{breaks} lines]") };
        let number = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        number > 0 && rest[number..].starts_with(&tail)
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

    /// The 40 lines (ending in a line break) behind `[Pasted text #1 +40 lines]`.
    fn long() -> String {
        (0..40).map(|i| format!("line {i} of a long prompt\n")).collect()
    }
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
            ("with a queued message (its placeholder)", QUEUED, true),
        ] {
            let input = signs.input_box(screen).unwrap_or_else(|| panic!("{name}: no box"));
            assert_eq!(input.is_empty(), empty, "{name}: {input:?}");
        }
    }

    #[test]
    fn a_paste_is_held_until_the_agent_takes_it() {
        let signs = InputBoxSigns::claude_code();
        let holds = |screen: &str, text: &str| signs.input_box(screen).unwrap().holds(text);
        assert!(holds(HOLDS_COLLAPSED, &long()), "a long paste shows collapsed");
        let other: String = long().lines().take(12).collect::<Vec<_>>().join("\n");
        assert!(!holds(HOLDS_COLLAPSED, &other), "another paste's collapsed form is not this one");
        assert!(holds(HOLDS_SHORT, SHORT), "a short one as itself");
        assert!(!holds(AFTER_TURN, &long()), "submitted: gone from the box");
        assert!(!holds(READY, SHORT));
        assert!(!holds(QUEUED, SHORT), "queued: shown above the box, not in it");
        assert!(!holds(HOLDS_SHORT, "Something else entirely"));
        assert!(!holds(HOLDS_SHORT, "comment: fix"), "only from the start of the box");
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
        let one_line = format!("{rule}\n❯ [Pasted text #2]\n{rule}\n");
        let input = signs.input_box(&one_line).unwrap();
        assert!(input.holds(&"x".repeat(900)), "a long line collapses with no line count");
        assert!(!input.holds("a\nb"), "{input:?}");
    }
}
