//! The stand-in harness: a tiny interactive terminal program that behaves like an agent
//! TUI (Claude Code, Cursor agent) as far as the-loop can tell from the outside.
//!
//! It enables bracketed paste mode on its terminal, reads keystrokes raw, treats a
//! bracketed paste as literal text (line breaks inside a paste never submit), submits the
//! composed message on a carriage return typed outside a paste, and appends each submitted
//! message as one JSON line `{"ts", "text"}` to its message record. It draws its input box
//! at the bottom of the screen as Claude Code does (a rule, `❯ ` and what is being
//! composed, a rule), so deliveries into it go by the same landing rule. Every launch appends
//! `{"ts", "argv", "cwd", "workItem", "instance"}` to an optional launch record, so a test
//! can assert that a respawn passed `--resume <id>` (Claude Code's `--model` and `--effort`
//! are taken and show only there). With `--claude-transcripts DIR` it
//! also keeps a transcript where Claude Code keeps one
//! (`DIR/projects/<escaped cwd>/<session id>.jsonl`, a `{"type":"user","message":…}`
//! line per message), so the-loop's Claude adapter can be tested against it.
//!
//! Failure modes on demand: `--fail-resume` exits at once when launched with `--resume`
//! (a conversation the harness cannot find), `--exit-on-start CODE` exits at once, and
//! the magic messages `/exit` and `/hang` end the program or stop it reading input. A
//! message typed as `!command` runs `command` through `sh -c` in the pane's environment
//! (as an agent's shell tool would) and records `{"ts", "shell", "status", "stdout",
//! "stderr"}` instead of a message: how a test makes the agent run `the-loop ask`.
//!
//! This module holds the composing rules and the argument parsing (no terminal, no
//! environment reads); [`program`] owns the terminal and the files, run by the binary
//! `loop-stand-in` and by `the-loop stand-in-harness`.

pub mod program;

use std::ffi::OsString;
use std::path::PathBuf;

/// Switches the terminal into bracketed paste mode (xterm `DECSET 2004`).
pub const ENABLE_BRACKETED_PASTE: &[u8] = b"\x1b[?2004h";
/// Switches bracketed paste mode off again.
pub const DISABLE_BRACKETED_PASTE: &[u8] = b"\x1b[?2004l";
/// What the terminal sends before pasted text.
pub const PASTE_START: &[u8] = b"\x1b[200~";
/// What the terminal sends after pasted text.
pub const PASTE_END: &[u8] = b"\x1b[201~";

/// Environment variable naming the message record when `--record` is not given.
pub const RECORD_ENV: &str = "LOOP_STAND_IN_RECORD";
/// Environment variable naming the launch record when `--launches` is not given.
pub const LAUNCHES_ENV: &str = "LOOP_STAND_IN_LAUNCHES";

/// The message that makes the stand-in exit with status 0.
pub const EXIT_MESSAGE: &str = "/exit";
/// The message that makes the stand-in stop reading input (a hung harness).
pub const HANG_MESSAGE: &str = "/hang";
/// A message starting with this runs the rest as a shell command in the pane (the
/// agent's own tool use: `!the-loop ask …`), recorded apart from messages.
pub const SHELL_PREFIX: &str = "!";

/// What the stand-in was asked to do, parsed from its command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StandInOptions {
    /// Where submitted messages are appended, one JSON line each.
    pub record: Option<PathBuf>,
    /// Where each launch (argv, cwd, work item) is appended, one JSON line each.
    pub launches: Option<PathBuf>,
    /// The conversation this launch starts (`--session-id`), if any.
    pub session_id: Option<String>,
    /// The conversation this launch resumes (`--resume`), if any.
    pub resume: Option<String>,
    /// Exit with status 1 at once when asked to resume (an unknown conversation).
    pub fail_resume: bool,
    /// Exit with this status at once, before reading anything.
    pub exit_on_start: Option<i32>,
    /// Claude Code's config dir to keep a Claude-shaped transcript under, if any.
    pub claude_transcripts: Option<PathBuf>,
}

/// Why the command line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StandInArgsError {
    #[error("loop-stand-in: `{flag}` needs a value")]
    MissingValue { flag: String },
    #[error("loop-stand-in: `{flag}` expects an exit status, got `{value}`")]
    BadStatus { flag: String, value: String },
    #[error("loop-stand-in: unknown argument `{arg}`")]
    Unknown { arg: String },
}

impl StandInOptions {
    /// Parses the arguments after the program name. `record_env` and `launches_env` are
    /// the values of [`RECORD_ENV`] and [`LAUNCHES_ENV`], used when the flags are absent.
    pub fn parse(
        args: impl IntoIterator<Item = OsString>,
        record_env: Option<OsString>,
        launches_env: Option<OsString>,
    ) -> Result<Self, StandInArgsError> {
        let mut options = StandInOptions::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let flag = arg.to_string_lossy().into_owned();
            let mut value =
                || args.next().ok_or_else(|| StandInArgsError::MissingValue { flag: flag.clone() });
            match flag.as_str() {
                "--record" => options.record = Some(PathBuf::from(value()?)),
                "--launches" => options.launches = Some(PathBuf::from(value()?)),
                "--session-id" => {
                    options.session_id = Some(value()?.to_string_lossy().into_owned());
                }
                "--resume" => options.resume = Some(value()?.to_string_lossy().into_owned()),
                // Claude Code's launch choices and plugin: taken, and shown by the launch
                // record's argv; the stand-in answers the same whatever the model.
                "--model" | "--effort" | "--plugin-dir" => {
                    value()?;
                }
                "--fail-resume" => options.fail_resume = true,
                "--claude-transcripts" => {
                    options.claude_transcripts = Some(PathBuf::from(value()?));
                }
                "--exit-on-start" => {
                    let raw = value()?.to_string_lossy().into_owned();
                    let status = raw.parse::<i32>().map_err(|_| StandInArgsError::BadStatus {
                        flag: flag.clone(),
                        value: raw.clone(),
                    })?;
                    options.exit_on_start = Some(status);
                }
                _ => return Err(StandInArgsError::Unknown { arg: flag }),
            }
        }
        options.record = options.record.or(record_env.map(PathBuf::from));
        options.launches = options.launches.or(launches_env.map(PathBuf::from));
        Ok(options)
    }

    /// Where this launch keeps its Claude-shaped transcript when run in `cwd`:
    /// `<dir>/projects/<cwd, every character but an ASCII letter or digit as `-`>/<id>.jsonl`
    /// — Claude Code's own convention, written out here independently of the adapter
    /// that reads it, so a mistake in one is not hidden by the other. `None` without
    /// `--claude-transcripts` or a conversation id.
    pub fn claude_transcript(&self, cwd: &std::path::Path) -> Option<PathBuf> {
        let id = self.session_id.as_ref().or(self.resume.as_ref())?;
        let escaped: String = cwd
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        Some(
            self.claude_transcripts
                .as_ref()?
                .join("projects")
                .join(escaped)
                .join(format!("{id}.jsonl")),
        )
    }

    /// The status to exit with before reading any input, if this launch must not run.
    pub fn exit_at_start(&self) -> Option<i32> {
        if self.fail_resume && self.resume.is_some() {
            return Some(1);
        }
        self.exit_on_start
    }
}

/// Something the composer wants the program to do after a chunk of input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Composed {
    /// A message was submitted (carriage return outside a paste).
    Submitted(String),
    /// End of input was asked for (Ctrl-D on an empty line).
    EndOfInput,
}

/// Where the composer is inside the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    #[default]
    Typing,
    Pasting,
}

/// Turns raw terminal bytes into submitted messages.
///
/// Escape sequences are matched across reads (a read may end in the middle of one). Inside
/// a bracketed paste every byte is text; a carriage return there is a line break, because
/// tmux (like a terminal) sends pasted line feeds as carriage returns. Outside a paste a
/// carriage return submits, backspace deletes, Ctrl-D on an empty line ends input, and any
/// other escape sequence (arrow keys, focus reports) is ignored.
#[derive(Debug, Default)]
pub struct Composer {
    mode: Mode,
    /// Bytes of a possible escape sequence not yet complete.
    pending: Vec<u8>,
    /// The message being composed.
    draft: Vec<u8>,
}

impl Composer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk of input and returns what it completed, in order.
    pub fn feed(&mut self, input: &[u8]) -> Vec<Composed> {
        let mut out = Vec::new();
        for &byte in input {
            if !self.pending.is_empty() || byte == 0x1b {
                self.pending.push(byte);
                self.settle_escape();
                continue;
            }
            match (self.mode, byte) {
                (Mode::Pasting, b'\r') => self.draft.push(b'\n'),
                (Mode::Pasting, _) => self.draft.push(byte),
                (Mode::Typing, b'\r') => {
                    let text = String::from_utf8_lossy(&self.draft).into_owned();
                    self.draft.clear();
                    out.push(Composed::Submitted(text));
                }
                (Mode::Typing, 0x7f | 0x08) => {
                    self.pop_char();
                }
                (Mode::Typing, 0x04) if self.draft.is_empty() => out.push(Composed::EndOfInput),
                (Mode::Typing, 0x03) => self.draft.clear(),
                (Mode::Typing, _) => self.draft.push(byte),
            }
        }
        out
    }

    /// Decides what the pending escape bytes are once they can no longer grow into a
    /// paste marker.
    fn settle_escape(&mut self) {
        let marker = match self.mode {
            Mode::Typing => PASTE_START,
            Mode::Pasting => PASTE_END,
        };
        if self.pending == marker {
            self.mode = match self.mode {
                Mode::Typing => Mode::Pasting,
                Mode::Pasting => Mode::Typing,
            };
            self.pending.clear();
        } else if !marker.starts_with(&self.pending) {
            let pending = std::mem::take(&mut self.pending);
            match self.mode {
                // Pasted escape bytes are text; re-feed all but the first so a marker
                // starting later in them is still seen.
                Mode::Pasting => {
                    self.draft.push(pending[0]);
                    let rest = pending[1..].to_vec();
                    self.feed(&rest);
                }
                // A typed escape sequence (arrow key, …) is not text: a CSI sequence runs
                // to its final byte, any other is the escape byte and one more. A fresh
                // escape byte inside it starts a new sequence.
                Mode::Typing => {
                    let last = pending[pending.len() - 1];
                    if last == 0x1b {
                        self.pending.push(last);
                    } else if pending[1] == b'[' && !(0x40..=0x7e).contains(&last) {
                        self.pending = pending;
                    }
                }
            }
        }
    }

    /// The message composed so far (not yet submitted).
    pub fn draft_text(&self) -> String {
        String::from_utf8_lossy(&self.draft).into_owned()
    }

    fn pop_char(&mut self) {
        let text = String::from_utf8_lossy(&self.draft).into_owned();
        let mut chars = text.chars();
        chars.next_back();
        self.draft = chars.as_str().as_bytes().to_vec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submitted(chunks: &[&[u8]]) -> Vec<Composed> {
        let mut composer = Composer::new();
        chunks.iter().flat_map(|chunk| composer.feed(chunk)).collect()
    }

    fn text(s: &str) -> Composed {
        Composed::Submitted(s.to_owned())
    }

    #[test]
    fn carriage_return_outside_a_paste_submits() {
        assert_eq!(submitted(&[b"hello\r"]), vec![text("hello")]);
    }

    #[test]
    fn line_breaks_inside_a_paste_do_not_submit() {
        let input = b"\x1b[200~one\rtwo\nthree\x1b[201~\r";
        assert_eq!(submitted(&[input]), vec![text("one\ntwo\nthree")]);
    }

    #[test]
    fn markers_split_across_reads_are_recognised() {
        let chunks: Vec<&[u8]> = vec![b"\x1b[2", b"00~a\r", b"b\x1b", b"[201", b"~", b"\r"];
        assert_eq!(submitted(&chunks), vec![text("a\nb")]);
    }

    #[test]
    fn escape_bytes_inside_a_paste_are_text() {
        let input = b"\x1b[200~red \x1b[31mx\x1b[0m \x1b\x1b[201~\r";
        assert_eq!(submitted(&[input]), vec![text("red \x1b[31mx\x1b[0m \x1b")]);
    }

    #[test]
    fn typed_escape_sequences_are_ignored() {
        assert_eq!(submitted(&[b"a\x1b[Ab\x1b[1;5Cc\r"]), vec![text("abc")]);
    }

    #[test]
    fn backspace_removes_one_character() {
        assert_eq!(submitted(&["héé\x7f!\r".as_bytes()]), vec![text("hé!")]);
    }

    #[test]
    fn the_draft_shows_what_is_composed_so_far() {
        let mut composer = Composer::new();
        composer.feed(b"\x1b[200~one\rtw");
        assert_eq!(composer.draft_text(), "one\ntw");
        composer.feed(b"o\x1b[201~\r");
        assert_eq!(composer.draft_text(), "");
    }

    #[test]
    fn ctrl_d_on_an_empty_line_ends_input() {
        assert_eq!(submitted(&[b"\x04"]), vec![Composed::EndOfInput]);
    }

    #[test]
    fn arguments_parse_and_fall_back_to_the_environment() {
        let args = ["--resume", "abc", "--model", "opus", "--fail-resume"].map(OsString::from);
        let options = StandInOptions::parse(args, Some("/r.jsonl".into()), None).unwrap();
        assert_eq!(options.record, Some(PathBuf::from("/r.jsonl")));
        assert_eq!(options.resume.as_deref(), Some("abc"));
        assert_eq!(options.exit_at_start(), Some(1));
        let err = StandInOptions::parse([OsString::from("--bogus")], None, None).unwrap_err();
        assert!(err.to_string().contains("--bogus"));
        for flag in ["--record", "--effort"] {
            let err = StandInOptions::parse([OsString::from(flag)], None, None).unwrap_err();
            assert!(err.to_string().contains("needs a value"), "{flag}");
        }
    }

    #[test]
    fn the_claude_transcript_sits_where_claude_code_keeps_it() {
        let args = ["--claude-transcripts", "/c", "--session-id", "u-1"].map(OsString::from);
        let options = StandInOptions::parse(args, None, None).unwrap();
        assert_eq!(
            options.claude_transcript(std::path::Path::new("/w/my_repo.x")),
            Some(PathBuf::from("/c/projects/-w-my-repo-x/u-1.jsonl"))
        );
        let bare = StandInOptions::parse(["--session-id", "u-1"].map(OsString::from), None, None);
        assert_eq!(bare.unwrap().claude_transcript(std::path::Path::new("/w")), None);
    }
}
