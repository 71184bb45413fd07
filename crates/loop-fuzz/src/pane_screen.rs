//! Fuzz harness: bytes as an agent's screen, captured from its tmux pane.
//!
//! The path every delivery into a harness with an input box takes (`loop_sessions::
//! landing`): `tmux capture-pane -p` text (lossy UTF-8, as the runner reads it) through
//! `InputBoxSigns::input_box` and `InputBox::holds`. The screen is whatever the program in
//! the pane drew: the agent, a shell, a user's typing.
//!
//! What must hold: no panic; a screen with no two rules has no box; a blank paste is
//! never seen in a box.

use loop_core::pane::InputBoxSigns;

/// One input.
pub fn run(data: &[u8]) {
    let screen = String::from_utf8_lossy(data);
    let signs = InputBoxSigns::claude_code();
    let rules = screen.lines().filter(|line| {
        let line = line.trim();
        line.chars().count() >= 20 && line.chars().all(|c| c == signs.rule)
    });
    let found = signs.input_box(&screen);
    if rules.count() < 2 {
        assert!(found.is_none(), "a box without two rules on {screen:?}");
    }
    let Some(input) = found else { return };
    let _ = input.is_empty();
    // Any line of the screen as the pasted text: reading it never panics.
    for line in screen.lines().take(64) {
        let _ = input.holds(line);
    }
    assert!(!input.holds("") && !input.holds(" \n\t"), "a blank paste is never seen");
}
