//! What an operator can do about an error, kept apart from the error's message.
//!
//! An error's `Display` says what failed and where; its [`Hint`] says what to do next.
//! The binary prints the hint on a `hint:` line after the message and its causes (STYLE
//! §2.2); an event-log line's `error` field carries the message alone, so a log reader
//! never sees advice meant for a terminal as if it were part of what went wrong.

/// The next step for an error, when there is one.
pub trait Hint {
    fn hint(&self) -> Option<String>;
}
