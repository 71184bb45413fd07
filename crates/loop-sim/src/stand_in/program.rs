//! The stand-in harness as a program: owns the terminal (bracketed paste on, raw input,
//! restored on exit) and the two record files. Shared by the `loop-stand-in` binary and
//! the hidden `the-loop stand-in-harness` verb, so a user with only the `the-loop`
//! binary can watch the demo's sessions.
//!
//! Every composing rule lives in [`super`], tested without a tty; this module is the IO
//! around it and nothing else.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::Path;

use rustix::termios::{self, OptionalActions, Termios};

use super::{
    Composed, Composer, DISABLE_BRACKETED_PASTE, ENABLE_BRACKETED_PASTE, EXIT_MESSAGE,
    HANG_MESSAGE, LAUNCHES_ENV, RECORD_ENV, SHELL_PREFIX, StandInOptions,
};

/// Runs the stand-in on this process's terminal until `/exit` or end of input; returns
/// the exit status. `argv` is the whole command line as launched (recorded per launch);
/// `args` are the stand-in's own arguments within it.
pub fn run(argv: &[OsString], args: &[OsString]) -> u8 {
    let options = match StandInOptions::parse(
        args.iter().cloned(),
        std::env::var_os(RECORD_ENV),
        std::env::var_os(LAUNCHES_ENV),
    ) {
        Ok(options) => options,
        Err(err) => {
            let _ = writeln!(io::stderr(), "{err}");
            return 2;
        }
    };
    if let Err(err) = record_launch(&options, argv) {
        let _ = writeln!(io::stderr(), "loop-stand-in: cannot record the launch: {err}");
        return 2;
    }
    if let Some(status) = options.exit_at_start() {
        return u8::try_from(status).unwrap_or(1);
    }
    let terminal = Terminal::enter();
    let status = match converse(&options) {
        Ok(()) => 0,
        Err(err) => {
            let _ = writeln!(io::stderr(), "loop-stand-in: {err}");
            1
        }
    };
    drop(terminal);
    status
}

/// Reads the terminal until `/exit` or end of input, recording each submitted message.
fn converse(options: &StandInOptions) -> io::Result<()> {
    let mut stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    let mut composer = Composer::new();
    let mut buf = [0u8; 64 * 1024];
    let cwd = std::env::current_dir()?;
    let transcript = options.claude_transcript(&cwd);
    if let Some(dir) = transcript.as_ref().and_then(|path| path.parent()) {
        std::fs::create_dir_all(dir)?;
    }
    stdout.write_all(b"stand-in ready\r\n> ")?;
    stdout.flush()?;
    loop {
        let read = stdin.read(&mut buf)?;
        if read == 0 {
            return Ok(());
        }
        let completed = composer.feed(&buf[..read]);
        if completed.is_empty() {
            // Echo the line being composed, so a human attached to the pane sees typing.
            let draft = composer.draft_text();
            let line = draft.rsplit('\n').next().unwrap_or("");
            let shown: String = line.chars().filter(|c| !c.is_control()).collect();
            let tail: String =
                shown.chars().rev().take(70).collect::<Vec<_>>().into_iter().rev().collect();
            write!(stdout, "\r\x1b[K> {tail}")?;
            stdout.flush()?;
        }
        for composed in completed {
            let text = match composed {
                Composed::Submitted(text) => text,
                Composed::EndOfInput => return Ok(()),
            };
            if let Some(command) = text.strip_prefix(SHELL_PREFIX) {
                run_shell(command, options, &mut stdout)?;
                continue;
            }
            if let Some(record) = &options.record {
                append_json_line(record, &serde_json::json!({ "ts": now(), "text": text }))?;
            }
            if let Some(transcript) = &transcript {
                let line = serde_json::json!({
                    "type": "user",
                    "timestamp": now(),
                    "cwd": cwd.display().to_string(),
                    "message": { "role": "user", "content": text },
                });
                append_json_line(transcript, &line)?;
            }
            let first_line = text.lines().next().unwrap_or("");
            let shown: String = first_line.chars().filter(|c| !c.is_control()).take(60).collect();
            write!(stdout, "\r\n[recorded {} chars] {shown}\r\n> ", text.chars().count())?;
            stdout.flush()?;
            match text.as_str() {
                EXIT_MESSAGE => return Ok(()),
                HANG_MESSAGE => hang(),
                _ => {}
            }
        }
    }
}

/// Runs a `!command` line through `sh -c` in the pane's environment, as an agent's shell
/// tool would (Claude Code's `!` prefix): its output is shown and recorded with its exit
/// status, never as a message.
fn run_shell(command: &str, options: &StandInOptions, stdout: &mut impl Write) -> io::Result<()> {
    let output = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .output()?;
    let shown = String::from_utf8_lossy(&output.stdout).into_owned();
    let errors = String::from_utf8_lossy(&output.stderr).into_owned();
    write!(stdout, "\r\n{}{}\r\n> ", shown.replace('\n', "\r\n"), errors.replace('\n', "\r\n"))?;
    stdout.flush()?;
    if let Some(record) = &options.record {
        let line = serde_json::json!({
            "ts": now(),
            "shell": command,
            "status": output.status.code(),
            "stdout": shown,
            "stderr": errors,
        });
        append_json_line(record, &line)?;
    }
    Ok(())
}

/// Stops reading input for good, like a harness stuck in a loop.
fn hang() -> ! {
    loop {
        std::thread::park();
    }
}

fn record_launch(options: &StandInOptions, argv: &[OsString]) -> io::Result<()> {
    let Some(launches) = &options.launches else {
        return Ok(());
    };
    let argv: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let cwd = std::env::current_dir()?.to_string_lossy().into_owned();
    let line = serde_json::json!({
        "ts": now(),
        "argv": argv,
        "cwd": cwd,
        "workItem": std::env::var("THE_LOOP_WORK_ITEM").ok(),
        "instance": std::env::var("THE_LOOP_INSTANCE").ok(),
    });
    append_json_line(launches, &line)
}

/// Appends one JSON line with a single write, so a reader never sees half a line.
fn append_json_line(path: &Path, value: &serde_json::Value) -> io::Result<()> {
    let mut line = value.to_string();
    line.push('\n');
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(line.as_bytes())
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// The terminal in raw mode with bracketed paste on; restored when dropped.
#[derive(Debug)]
struct Terminal {
    saved: Option<Termios>,
}

impl Terminal {
    fn enter() -> Self {
        let mut stdout = io::stdout();
        let _ = stdout.write_all(ENABLE_BRACKETED_PASTE);
        let _ = stdout.flush();
        let stdin = io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(saved) = &saved {
            let mut raw = saved.clone();
            raw.make_raw();
            let _ = termios::tcsetattr(stdin.as_fd(), OptionalActions::Now, &raw);
        }
        Self { saved }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let mut stdout = io::stdout();
        let _ = stdout.write_all(DISABLE_BRACKETED_PASTE);
        let _ = stdout.flush();
        if let Some(saved) = &self.saved {
            let _ = termios::tcsetattr(io::stdin().as_fd(), OptionalActions::Now, saved);
        }
    }
}
