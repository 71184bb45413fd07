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
    let mut composer = Composer::new();
    let mut buf = [0u8; 64 * 1024];
    let cwd = std::env::current_dir()?;
    let transcript = options.claude_transcript(&cwd);
    if let Some(dir) = transcript.as_ref().and_then(|path| path.parent()) {
        std::fs::create_dir_all(dir)?;
    }
    let screen = Screen::start()?;
    loop {
        let read = stdin.read(&mut buf)?;
        if read == 0 {
            return Ok(());
        }
        let completed = composer.feed(&buf[..read]);
        if completed.is_empty() {
            // Show what is being composed in the box, as Claude Code does.
            screen.compose(&composer.draft_text())?;
        }
        for composed in completed {
            let text = match composed {
                Composed::Submitted(text) => text,
                Composed::EndOfInput => return Ok(()),
            };
            if let Some(command) = text.strip_prefix(SHELL_PREFIX) {
                screen.submitted("")?;
                run_shell(command.to_owned(), options.record.clone(), screen.clone());
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
            screen.submitted(&format!("[recorded {} chars] {shown}\r\n", text.chars().count()))?;
            match text.as_str() {
                EXIT_MESSAGE => return Ok(()),
                HANG_MESSAGE => hang(),
                _ => {}
            }
        }
    }
}

/// Runs a `!command` line through `sh -c` in the pane's environment, as an agent's shell
/// tool would (Claude Code's `!` prefix), on a thread of its own: the stand-in keeps
/// reading its terminal meanwhile, as Claude Code takes (and queues) input while a tool
/// runs. Its output is shown above the box and recorded with its exit status, never as
/// a message.
fn run_shell(command: String, record: Option<std::path::PathBuf>, screen: Screen) {
    std::thread::spawn(move || {
        let ran = std::process::Command::new("sh")
            .args(["-c", &command])
            .stdin(std::process::Stdio::null())
            .output();
        let (status, shown, errors) = match ran {
            Ok(output) => (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            ),
            Err(err) => (None, String::new(), err.to_string()),
        };
        let _ = screen.above(&format!(
            "{}{}\r\n",
            shown.replace('\n', "\r\n"),
            errors.replace('\n', "\r\n")
        ));
        if let Some(record) = &record {
            let line = serde_json::json!({
                "ts": now(),
                "shell": command,
                "status": status,
                "stdout": shown,
                "stderr": errors,
            });
            let _ = append_json_line(record, &line);
        }
    });
}

/// The terminal's screen: output scrolls above the input box, which is drawn at the
/// bottom as Claude Code draws its own (a rule, `❯ ` and the first line being composed,
/// a rule), so the-loop's landing rule reads the stand-in as it reads the real agent
/// (`loop_core::pane::InputBoxSigns::claude_code`). Shared with the shell threads; the
/// cursor rests at the end of the bottom rule.
#[derive(Debug, Clone)]
struct Screen(std::sync::Arc<std::sync::Mutex<Drawn>>);

/// What the box shows now.
#[derive(Debug, Default)]
struct Drawn {
    draft: String,
}

impl Screen {
    const RULE: &'static str = "────────────────────────────────────────";

    fn start() -> io::Result<Self> {
        let screen = Self(std::sync::Arc::default());
        let mut out = io::stdout().lock();
        out.write_all(b"stand-in ready\r\n")?;
        Self::draw(&mut out, "")?;
        Ok(screen)
    }

    /// The box shows `draft` (what is being typed or pasted).
    fn compose(&self, draft: &str) -> io::Result<()> {
        let mut drawn = self.lock();
        drawn.draft = draft.to_owned();
        Self::redraw(&mut io::stdout().lock(), "", draft)
    }

    /// The draft was submitted: `output` above, an empty box below.
    fn submitted(&self, output: &str) -> io::Result<()> {
        let mut drawn = self.lock();
        drawn.draft.clear();
        Self::redraw(&mut io::stdout().lock(), output, "")
    }

    /// `output` above the box, which keeps what it shows.
    fn above(&self, output: &str) -> io::Result<()> {
        let drawn = self.lock();
        Self::redraw(&mut io::stdout().lock(), output, &drawn.draft)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Drawn> {
        // A panicked holder left a draft at worst: the next draw shows it.
        self.0.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// Erases the box (back to the line it started on), writes `output`, draws it again.
    fn redraw(out: &mut impl Write, output: &str, draft: &str) -> io::Result<()> {
        out.write_all(b"\r\x1b[2A\x1b[J")?;
        out.write_all(output.as_bytes())?;
        Self::draw(out, draft)
    }

    fn draw(out: &mut impl Write, draft: &str) -> io::Result<()> {
        let first = draft.lines().find(|line| !line.trim().is_empty()).unwrap_or("");
        let shown: String = first.chars().filter(|c| !c.is_control()).take(70).collect();
        write!(out, "{rule}\r\n❯ {shown}\r\n{rule}", rule = Self::RULE)?;
        out.flush()
    }
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
