//! A paste that lands: text goes into an agent's input only when the agent shows its input
//! box, and counts as delivered only once the agent took it (docs/real-claude.md).
//!
//! Claude Code in tmux loses input in two ways a blind paste cannot see: a paste that
//! arrives while the agent is not at its input (starting, or showing a dialog) is
//! dropped, and the Enter after a paste can be dropped while the agent is still busy with
//! the paste itself (always seen in the first second of a fresh session) — the text then
//! sits in the box, unsent. So for a harness that draws an input box
//! ([`Harness::input_box`]):
//!
//! 1. wait until the box is drawn and empty (nothing is typed before, never into a
//!    dialog, never beside what someone is typing by hand) — or already shows this very
//!    text (a retry after a submit that did not take pastes nothing twice);
//! 2. paste into the empty box and wait until it shows the text;
//! 3. submit (a carriage return) and wait until the box no longer shows it — taken as a
//!    turn, or queued behind the running one; a submit that did not take is sent again,
//!    up to [`SUBMIT_TRIES`] times. Only the return is repeated, never the paste.
//!
//! A harness without input-box signs gets the paste and the return in one trip, as
//! before. Synchronous: call from a blocking thread.

use std::time::{Duration, Instant};

use loop_core::pane::InputBoxSigns;

use crate::harness::Harness;
use crate::tmux::{DeliveryError, Keys, Tmux};

/// Why text did not land.
#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    #[error(
        "the agent in `{target}` did not show an empty input box within {within:?} (starting, at a dialog, or someone typing in it); nothing was typed"
    )]
    NotAtInput { target: String, within: Duration },
    #[error("the paste never showed in the input box of the agent in `{target}`")]
    PasteNotShown { target: String },
    #[error(
        "the agent in `{target}` did not take the pasted text after {tries} returns; it is still in its input box"
    )]
    NotTaken { target: String, tries: u32 },
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

impl loop_core::Hint for LandingError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::NotAtInput { target, .. }
            | Self::PasteNotShown { target }
            | Self::NotTaken { target, .. } => {
                Some(format!("look at it with `tmux attach -r -t {target}`"))
            }
            Self::Delivery(_) => None,
        }
    }
}

/// How often the screen is looked at while waiting.
const LOOK_EVERY: Duration = Duration::from_millis(10);
/// How long a paste may take to show in the box (Claude Code 2.1.197 shows one after
/// 0.3–0.7 s on a busy 2-core machine: it holds input back to tell a paste from typing).
const PASTE_SHOWS_WITHIN: Duration = Duration::from_secs(5);
/// How long one submit may take to empty the box before the return is sent again (seen:
/// 0.3–0.6 s).
const SUBMIT_TAKES_WITHIN: Duration = Duration::from_secs(2);
/// How many returns are sent before a submit is given up.
pub const SUBMIT_TRIES: u32 = 5;
/// How long a later delivery waits for a live agent to show its input box.
pub const AT_INPUT_WITHIN: Duration = Duration::from_secs(10);

/// Puts `text` into the agent's input in session `target` and submits it, by the
/// harness's rule; `at_input_within` bounds the wait for the agent to show its input box.
pub fn deliver(
    tmux: &Tmux,
    harness: &dyn Harness,
    target: &str,
    text: &str,
    at_input_within: Duration,
) -> Result<(), LandingError> {
    let Some(signs) = harness.input_box() else {
        return Ok(tmux.deliver(target, text)?);
    };
    let prompt = tmux.prompt_file(target, text)?;
    let watch = |within, done: fn(Look) -> bool| watch(tmux, signs, target, text, within, done);
    let ready = watch(at_input_within, |look| matches!(look, Look::Empty | Look::Holds))?;
    match ready {
        Look::Holds => {}
        Look::Empty => {
            tmux.send(target, &[Keys::Paste(&prompt)])?;
            if watch(PASTE_SHOWS_WITHIN, |look| look == Look::Holds)? != Look::Holds {
                return Err(LandingError::PasteNotShown { target: target.to_owned() });
            }
        }
        Look::NoBox | Look::Other => {
            let within = at_input_within;
            return Err(LandingError::NotAtInput { target: target.to_owned(), within });
        }
    }
    for _ in 0..SUBMIT_TRIES {
        tmux.send(target, &[Keys::Submit])?;
        // Gone from the box: taken. A box no longer drawn is never sent another return
        // (it could answer a dialog); the text left the box, so it was taken too.
        if watch(SUBMIT_TAKES_WITHIN, |look| look != Look::Holds)? != Look::Holds {
            return Ok(());
        }
    }
    Err(LandingError::NotTaken { target: target.to_owned(), tries: SUBMIT_TRIES })
}

/// What one look at the screen saw of the input box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// No box drawn: the agent is starting, or shows a dialog.
    NoBox,
    /// A box with nothing typed in it.
    Empty,
    /// A box showing the text being delivered.
    Holds,
    /// A box holding something else (someone typing by hand).
    Other,
}

/// Looks at the session's screen until `done` accepts what it shows or `within` passes;
/// the last look.
fn watch(
    tmux: &Tmux,
    signs: &InputBoxSigns,
    target: &str,
    text: &str,
    within: Duration,
    done: fn(Look) -> bool,
) -> Result<Look, DeliveryError> {
    let deadline = Instant::now() + within;
    loop {
        let screen = tmux.capture(target)?;
        let look = match signs.input_box(&screen) {
            None => Look::NoBox,
            Some(input) if input.holds(text) => Look::Holds,
            Some(input) if input.is_empty() => Look::Empty,
            Some(_) => Look::Other,
        };
        if done(look) || Instant::now() >= deadline {
            return Ok(look);
        }
        std::thread::sleep(LOOK_EVERY.min(deadline.saturating_duration_since(Instant::now())));
    }
}
