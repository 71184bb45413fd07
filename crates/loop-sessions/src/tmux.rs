//! The tmux runner: every agent session lives in a tmux session named `loop-<slug>`.
//!
//! It spawns sessions (`new-session -d -s <target> -c <cwd> [-e …] -- <argv>`, with
//! `remain-on-exit` set in the same tmux command list so a pane that dies at once is still
//! inspectable), answers liveness in the reference's vocabulary (live / dead / absent /
//! unknown), delivers prompts as a bracketed paste followed by a separate carriage return
//! (see [`paste`]), settles sessions on close (harness terminated with SIGTERM then SIGKILL
//! after a grace, or the session killed) and builds the attach command.
//!
//! Every tmux command names the server explicitly through [`TmuxSocket`] — or inherits the
//! caller's `TMUX`/`TMUX_TMPDIR` when the socket is [`TmuxSocket::Inherited`] — and every
//! session target is matched exactly (`=name`), so `loop-x-1` never resolves to
//! `loop-x-15`. Only targets shaped `loop-[A-Za-z0-9_-]+` are ever touched.
//!
//! Deliveries travel through one persistent control-mode client per runner (no process
//! fork per delivery); spawning, probing from outside a delivery and settling run plain
//! `tmux` commands. The API is synchronous: call it from a blocking thread, never from an
//! async task.
//!
//! A control client never attaches while this runner creates or ends a session: tmux
//! 3.3a's server (Debian 12's) crashes, taking every session with it, when a session is
//! created or closed during a control client's handshake (it writes a notification to
//! the client before the client's control state exists).
//!
//! This module must never put payload text on a command line: prompts reach tmux only as
//! the contents of a private temp file.

mod control;
pub mod paste;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, mpsc};
use std::time::{Duration, Instant};

use loop_core::WorkItemRef;

use self::control::ControlClient;
pub use self::control::ControlError;
use self::paste::PastePayload;

/// The variable naming the work item a session serves, set in its pane (tmux ≥ 3.2).
pub const WORK_ITEM_ENV: &str = "THE_LOOP_WORK_ITEM";
/// The variable naming the tmux session a pane belongs to, set in its pane (tmux ≥ 3.2):
/// the agent's hooks file their reports under it (docs/agent-states.md).
pub const SESSION_ENV: &str = "THE_LOOP_SESSION";
/// The variable naming the instance that spawned a session, set in its pane (tmux ≥ 3.2).
pub const INSTANCE_ENV: &str = "THE_LOOP_INSTANCE";

/// How often a settle loop looks again while waiting for a harness to exit.
const SETTLE_POLL: Duration = Duration::from_millis(100);
/// How many times a spawn is tried when it met a tmux server on its way out.
const SERVER_EXIT_RETRIES: u32 = 4;
/// How long a probe run as a plain command may take before it counts as no answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which tmux server the runner talks to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TmuxSocket {
    /// Whatever the daemon inherited: `$TMUX` inside tmux, else `$TMUX_TMPDIR/tmux-UID/default`.
    #[default]
    Inherited,
    /// A named socket in tmux's socket directory (`tmux -L <name>`).
    Named(String),
    /// A socket at an explicit path (`tmux -S <path>`).
    Path(PathBuf),
}

/// How the runner reaches tmux and what it does on spawn; filled from `routing.tmux`.
#[derive(Debug, Clone)]
pub struct TmuxSettings {
    /// The tmux executable (looked up on `PATH` when it has no slash).
    pub binary: PathBuf,
    pub socket: TmuxSocket,
    /// A configuration file for a server this runner starts (`tmux -f`); `None` lets tmux
    /// read the operator's own.
    pub config_file: Option<PathBuf>,
    /// Keep a pane whose harness exited (`remain-on-exit on`), so its scrollback survives.
    pub remain_on_exit: bool,
    /// How long one spawn, kill, paste or control-mode answer may take.
    pub command_timeout: Duration,
    /// The directory the private prompt files are written to (the system temp dir).
    pub scratch_dir: PathBuf,
    /// Environment variables removed from every tmux command the runner runs, so a
    /// server it starts — and every harness in it — never holds them (e.g. the webhook
    /// secret's variable). A server started by someone else keeps its own environment.
    pub withheld_env: Vec<String>,
    /// Variables set in every session it spawns, beside the work item and the instance
    /// (e.g. the config file the service runs with, so `the-loop ask` in the pane reads
    /// the same one).
    pub session_env: Vec<(String, String)>,
}

impl TmuxSettings {
    /// Settings for `tmux` on `PATH`, the given server, and the given scratch directory.
    pub fn new(socket: TmuxSocket, scratch_dir: PathBuf) -> Self {
        Self {
            binary: PathBuf::from("tmux"),
            socket,
            config_file: None,
            remain_on_exit: true,
            command_timeout: Duration::from_secs(30),
            scratch_dir,
            withheld_env: Vec::new(),
            session_env: Vec::new(),
        }
    }
}

/// One look at a session's pane ([`Tmux::look`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneView {
    /// The pane's process exited (the pane is kept by `remain-on-exit`).
    pub dead: bool,
    /// Its foreground command (`claude`, `bash`, …).
    pub command: String,
    /// Its screen as plain text.
    pub screen: String,
}

impl PaneView {
    /// Whether the foreground command is a shell: the agent exited to it.
    pub fn at_shell(&self) -> bool {
        matches!(self.command.as_str(), "bash" | "sh" | "zsh" | "fish" | "dash" | "ksh" | "tcsh")
    }
}

/// What a probe says about a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// The session exists and at least one pane's process is running.
    Live,
    /// The session exists but every pane's process has exited (kept by `remain-on-exit`).
    Dead,
    /// tmux answered: there is no such session (or no server at all).
    Absent,
    /// tmux did not answer (not installed, timed out, could not run).
    Unknown,
}

impl Liveness {
    /// Whether a delivery should be attempted: live, or no answer (assumed alive, so a
    /// busy tmux never triggers a respawn over a running session).
    pub fn may_be_live(self) -> bool {
        matches!(self, Liveness::Live | Liveness::Unknown)
    }
}

/// Why a tmux operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error("tmux (`{binary}`) is not installed or not on PATH")]
    NotInstalled { binary: PathBuf },
    #[error("could not run tmux `{verb}`")]
    Io {
        verb: String,
        #[source]
        source: std::io::Error,
    },
    #[error("tmux `{verb}` timed out after {after:?}")]
    TimedOut { verb: String, after: Duration },
    #[error("tmux `{verb}` failed ({status}): {message}")]
    Failed { verb: String, status: String, message: String },
    #[error(
        "`{target}` is not a the-loop session name (expected `loop-…` of letters, digits, `_` and `-`); refusing to touch it"
    )]
    ForeignTarget { target: String },
    #[error("tmux session `{target}` is already running a harness; not spawning over it")]
    SessionLive { target: String },
    #[error("tmux session `{target}` holds a dead pane that could not be cleared")]
    SessionOccupied { target: String },
    #[error("harness argument `{arg}` ends with `;`, which tmux would read as a command separator")]
    SeparatorInArgv { arg: String },
    #[error("the harness in `{target}` is still running after SIGKILL")]
    StillRunning { target: String },
    #[error("tmux control client: {0}")]
    Control(#[from] ControlError),
}

impl loop_core::Hint for TmuxError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::NotInstalled { .. } => Some(
                "install it (`apt install tmux`, `dnf install tmux` or `brew install tmux`)"
                    .to_owned(),
            ),
            Self::SessionLive { target } => Some(format!(
                "attach with `tmux attach -r -t {target}`, or end it with `tmux kill-session -t {target}`"
            )),
            Self::SessionOccupied { target } => Some(format!("`tmux kill-session -t {target}`")),
            _ => None,
        }
    }
}

/// Why a delivery did not reach the harness.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// Nothing runs there (absent, or a dead pane): the caller respawns.
    #[error("no live harness in tmux session `{target}` ({liveness:?}); a respawn is needed")]
    SessionMissing { target: String, liveness: Liveness },
    /// A transient failure: the session may be fine, try again later.
    #[error(transparent)]
    Tmux(#[from] TmuxError),
    #[error("nothing to paste into `{target}`: the prompt is empty")]
    EmptyPrompt { target: String },
    #[error("could not write the prompt file in `{dir}`")]
    Scratch {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where a session lives: its tmux name, its directory and what its pane is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSite {
    /// `loop-<slug>` (see [`WorkItemRef::tmux_session`]).
    pub target: String,
    /// The directory the harness starts in.
    pub cwd: PathBuf,
    /// Exported as [`WORK_ITEM_ENV`] when tmux supports `-e`.
    pub work_item: Option<WorkItemRef>,
    /// Exported as [`INSTANCE_ENV`] when tmux supports `-e`.
    pub instance: Option<String>,
}

impl SessionSite {
    /// The site of a work item's own session in `cwd`.
    pub fn for_work_item(work_item: &WorkItemRef, cwd: PathBuf, instance: Option<String>) -> Self {
        Self::for_endpoint(work_item, work_item, cwd, instance)
    }

    /// The site of the session serving `served` (a PR endpoint's own ref, or the work
    /// item's) on behalf of the work item `owner`: named after `served`, telling the pane
    /// it works for `owner` (hooks resolve the work item, not the PR).
    pub fn for_endpoint(
        owner: &WorkItemRef,
        served: &WorkItemRef,
        cwd: PathBuf,
        instance: Option<String>,
    ) -> Self {
        Self { target: served.tmux_session(), cwd, work_item: Some(owner.clone()), instance }
    }
}

/// What [`Tmux::terminate_harness`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// There was no such session.
    SessionMissing,
    /// Every pane was already dead; nothing was signalled.
    AlreadyExited,
    /// The harness exited after SIGTERM.
    Terminated,
    /// The harness ignored SIGTERM for the grace period and was killed.
    Killed,
}

/// The tmux runner for one tmux server.
#[derive(Debug)]
pub struct Tmux {
    settings: TmuxSettings,
    /// `tmux -V`, asked once; `None` when it could not be read (assumed recent).
    version: OnceLock<Option<(u32, u32)>>,
    /// Set once the "tmux too old for -e" warning was logged.
    env_warned: AtomicBool,
    /// The control-mode client deliveries go through; `None` until the first delivery
    /// and after it died. Held only by this runner; dropping the runner ends it.
    control: Mutex<Option<ControlClient>>,
    /// Held while the control client attaches and while a command creates or ends a
    /// session (see the module's comment).
    handshake: Mutex<()>,
    /// Distinguishes the buffers of successive deliveries.
    deliveries: AtomicU64,
}

impl Tmux {
    pub fn new(settings: TmuxSettings) -> Self {
        Self {
            settings,
            version: OnceLock::new(),
            env_warned: AtomicBool::new(false),
            control: Mutex::new(None),
            handshake: Mutex::new(()),
            deliveries: AtomicU64::new(0),
        }
    }

    pub fn settings(&self) -> &TmuxSettings {
        &self.settings
    }

    /// Probes a session: `has-session`, then the panes' `pane_dead` flags.
    pub fn liveness(&self, target: &str) -> Result<Liveness, TmuxError> {
        check_target(target)?;
        let exact = format!("={target}");
        match self.run_for(PROBE_TIMEOUT, &["has-session", "-t", &exact]) {
            Ok(output) if !output.status.success() => return Ok(Liveness::Absent),
            Ok(_) => {}
            Err(_) => return Ok(Liveness::Unknown),
        }
        let panes =
            self.run_for(PROBE_TIMEOUT, &["list-panes", "-s", "-t", &exact, "-F", "#{pane_dead}"]);
        Ok(match panes {
            Ok(output) if output.status.success() => {
                pane_liveness(&String::from_utf8_lossy(&output.stdout))
            }
            // The session answered has-session; a failing pane listing is read as live,
            // so a glitch never triggers a respawn over a running harness.
            _ => Liveness::Live,
        })
    }

    /// Watches the session for `delay` (a harness that cannot resume exits within it)
    /// and reports whether it may still be live at the end; `false` as soon as it is
    /// not. A zero delay is one probe, no waiting.
    pub fn survived(&self, target: &str, delay: Duration) -> Result<bool, TmuxError> {
        check_target(target)?;
        Ok(!self.await_exit(target, delay)?)
    }

    /// Waits until the harness in the session reads its terminal raw (canonical mode
    /// off) — the sign an interactive agent is up and will take a paste as input — for
    /// at most `within`. Used before pasting the first prompt into a fresh session.
    pub fn await_input_ready(&self, target: &str, within: Duration) -> Result<bool, TmuxError> {
        check_target(target)?;
        let exact = format!("={target}");
        let deadline = Instant::now() + within;
        loop {
            let output =
                self.run(&["list-panes", "-s", "-t", &exact, "-F", "#{pane_dead} #{pane_tty}"])?;
            let listing = String::from_utf8_lossy(&output.stdout);
            let ready = output.status.success()
                && listing.lines().any(|line| {
                    line.strip_prefix("0 ").is_some_and(|tty| reads_raw(Path::new(tty.trim())))
                });
            if ready {
                return Ok(true);
            }
            if !output.status.success() || Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(SETTLE_POLL.min(deadline - Instant::now()));
        }
    }

    /// Creates a detached session running `argv` (program first) at `site`, after
    /// clearing a dead pane of the same name. Refuses to replace a live session.
    pub fn spawn(&self, site: &SessionSite, argv: &[String]) -> Result<(), TmuxError> {
        check_target(&site.target)?;
        if let Some(arg) = argv.iter().find(|arg| arg.ends_with(';')) {
            return Err(TmuxError::SeparatorInArgv { arg: arg.clone() });
        }
        self.clear_target(&site.target, false)?;
        match self.new_session_on_a_settled_server(site, argv) {
            Err(TmuxError::Failed { message, .. })
                if message.to_ascii_lowercase().contains("duplicate session") =>
            {
                self.clear_target(&site.target, true)?;
                self.new_session_on_a_settled_server(site, argv)
            }
            other => other,
        }
    }

    /// `new-session`, retried when it reached a server that was exiting (clearing the
    /// last, dead session of a server makes it exit; a client arriving in that moment is
    /// told "server exited unexpectedly" and nothing was created).
    fn new_session_on_a_settled_server(
        &self,
        site: &SessionSite,
        argv: &[String],
    ) -> Result<(), TmuxError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.new_session(site, argv) {
                Err(TmuxError::Failed { message, .. })
                    if attempt < SERVER_EXIT_RETRIES
                        && (message.contains("server exited unexpectedly")
                            || message.contains("lost server")) =>
                {
                    std::thread::sleep(SETTLE_POLL / 4 * attempt);
                }
                other => return other,
            }
        }
    }

    /// Kills a session. `Ok(false)` when it was already gone.
    ///
    /// Not while a delivery is on the control client: the client may be attached to this
    /// session, and tmux ends a client whose session ends — in the middle of another
    /// session's paste, which would then be reported failed (and lost) or pasted and
    /// reported failed (and pasted again). A client attached here is let go first; the
    /// next delivery attaches to its own session.
    pub fn kill_session(&self, target: &str) -> Result<bool, TmuxError> {
        check_target(target)?;
        let mut control = self.control();
        if control.as_ref().is_some_and(|client| client.session() == target) {
            *control = None;
        }
        let output = {
            let _handshake = self.handshake();
            self.run(&["kill-session", "-t", &format!("={target}")])?
        };
        Ok(output.status.success())
    }

    /// Ends the harness inside a session but keeps the session (and its scrollback):
    /// SIGTERM to every live pane's process, then SIGKILL to those still alive after
    /// `grace`.
    pub fn terminate_harness(
        &self,
        target: &str,
        grace: Duration,
    ) -> Result<Termination, TmuxError> {
        check_target(target)?;
        let exact = format!("={target}");
        if !self.run(&["has-session", "-t", &exact])?.status.success() {
            return Ok(Termination::SessionMissing);
        }
        self.set_remain_on_exit(target)?;
        let pids = self.pane_pids(target)?;
        if pids.is_empty() {
            return Ok(Termination::AlreadyExited);
        }
        signal_all(&pids, rustix::process::Signal::TERM);
        if self.await_exit(target, grace)? {
            return Ok(Termination::Terminated);
        }
        signal_all(&self.pane_pids(target)?, rustix::process::Signal::KILL);
        if self.await_exit(target, self.settings.command_timeout.min(Duration::from_secs(5)))? {
            return Ok(Termination::Killed);
        }
        Err(TmuxError::StillRunning { target: target.to_owned() })
    }

    /// The command that attaches a terminal to a session (`-r`: read-only).
    pub fn attach_command(
        &self,
        target: &str,
        read_only: bool,
    ) -> Result<Vec<OsString>, TmuxError> {
        check_target(target)?;
        let mut argv = vec![self.settings.binary.clone().into_os_string()];
        argv.extend(self.global_args());
        argv.push("attach-session".into());
        if read_only {
            argv.push("-r".into());
        }
        argv.extend(["-t".into(), format!("={target}").into()]);
        Ok(argv)
    }

    /// Pastes `text` into the session as one bracketed paste, then submits it with a
    /// separate carriage return, in one trip. Nothing is pasted into a dead or absent
    /// session. This confirms nothing about the agent taking it; see
    /// `session::deliver` for the rule a harness's input box adds.
    pub fn deliver(&self, target: &str, text: &str) -> Result<(), DeliveryError> {
        let prompt = self.prompt_file(target, text)?;
        self.send(target, &[Keys::Paste(&prompt), Keys::Submit])
    }

    /// Writes `text` to a private prompt file for [`Keys::Paste`].
    pub fn prompt_file(&self, target: &str, text: &str) -> Result<PastePayload, DeliveryError> {
        if text.is_empty() {
            return Err(DeliveryError::EmptyPrompt { target: target.to_owned() });
        }
        PastePayload::write(&self.settings.scratch_dir, text).map_err(|source| {
            DeliveryError::Scratch { dir: self.settings.scratch_dir.clone(), source }
        })
    }

    /// Sends `keys` to the session in order, in one trip, after a probe that something
    /// runs there.
    pub fn send(&self, target: &str, keys: &[Keys<'_>]) -> Result<(), DeliveryError> {
        check_target(target)?;
        let serial = self.deliveries.fetch_add(1, Ordering::Relaxed);
        if self.supports_control_flags() {
            let commands = keys.iter().flat_map(|keys| keys.control_lines(target, serial));
            match self.trip_by_control(target, &commands.collect::<Vec<_>>(), serial) {
                Err(DeliveryError::Tmux(TmuxError::Control(ControlError::Attach { .. }))) => {}
                other => return other.map(drop),
            }
        }
        self.send_by_commands(target, keys, serial)
    }

    /// One look at the session's first pane for the agent-state watcher, in one tmux
    /// call outside the control client (a look every second must never be what a
    /// hand-attached client trips over): whether its process exited, its foreground
    /// command, its screen. `None`: there is no such session.
    pub fn look(&self, target: &str) -> Result<Option<PaneView>, TmuxError> {
        check_target(target)?;
        let pane = format!("={target}:");
        let args =
            ["display-message", "-p", "-t", &pane, "#{pane_dead} #{pane_current_command}", ";"];
        let output = self
            .run_for(PROBE_TIMEOUT, &[&args[..], &["capture-pane", "-p", "-t", &pane]].concat())?;
        if !output.status.success() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let (head, screen) = text.split_once('\n').unwrap_or((&text, ""));
        let (dead, command) = head.split_once(' ').unwrap_or((head, ""));
        Ok(Some(PaneView {
            dead: dead == "1",
            command: command.trim().to_owned(),
            screen: screen.to_owned(),
        }))
    }

    /// The session's screen as plain text (no colours or attributes), through the
    /// control client when there is one.
    pub fn capture(&self, target: &str) -> Result<String, DeliveryError> {
        check_target(target)?;
        let capture = format!("capture-pane -p -t '={target}:'");
        if self.supports_control_flags() {
            let serial = self.deliveries.fetch_add(1, Ordering::Relaxed);
            match self.trip_by_control(target, std::slice::from_ref(&capture), serial) {
                Err(DeliveryError::Tmux(TmuxError::Control(ControlError::Attach { .. }))) => {}
                other => {
                    return other.map(|mut replies| replies.pop().unwrap_or_default().join("\n"));
                }
            }
        }
        let pane = format!("={target}:");
        let output = self.run(&["capture-pane", "-p", "-t", &pane])?;
        if !output.status.success() {
            let liveness = self.liveness(target)?;
            return Err(DeliveryError::SessionMissing { target: target.to_owned(), liveness });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The hot path: a probe, then `commands` through the control client; each one's
    /// output lines, in order.
    fn trip_by_control(
        &self,
        target: &str,
        commands: &[String],
        serial: u64,
    ) -> Result<Vec<Vec<String>>, DeliveryError> {
        let mut slot = self.control();
        let timeout = self.settings.command_timeout;
        let probe = format!("list-panes -s -t '={target}' -F '#{{pane_dead}}'");
        if slot.as_mut().is_some_and(|client| !client.is_running()) {
            *slot = None;
        }
        let mut retried = false;
        let panes = loop {
            if slot.is_none() {
                // The client attaches to the session it delivers to; an absent session
                // cannot be attached to, and the plain probe says what is there.
                let attached = {
                    let _handshake = self.handshake();
                    ControlClient::attach(self.command(), target)
                };
                match attached {
                    Ok(client) => *slot = Some(client),
                    Err(err) => {
                        return match self.liveness(target)? {
                            Liveness::Live | Liveness::Unknown => Err(TmuxError::from(err).into()),
                            liveness => Err(DeliveryError::SessionMissing {
                                target: target.to_owned(),
                                liveness,
                            }),
                        };
                    }
                }
            }
            let client = slot.as_mut().expect("a client was attached just above");
            match client.run(&probe, timeout) {
                Ok(reply) => break reply,
                // The session it was attached to ended since the last delivery.
                Err(ControlError::Exited) if !retried => {
                    retried = true;
                    *slot = None;
                }
                Err(err) => {
                    *slot = None;
                    return Err(TmuxError::from(err).into());
                }
            }
        };
        let liveness = match panes {
            Ok(lines) => pane_liveness(&lines.join("\n")),
            Err(_) => Liveness::Absent,
        };
        if liveness != Liveness::Live {
            return Err(DeliveryError::SessionMissing { target: target.to_owned(), liveness });
        }
        let client = slot.as_mut().expect("the probe above just ran on this client");
        let mut replies = Vec::with_capacity(commands.len());
        for command in commands {
            let failure = match client.run(command, timeout) {
                Ok(Ok(lines)) => {
                    replies.push(lines);
                    continue;
                }
                Ok(Err(lines)) => TmuxError::Failed {
                    verb: command_verb(command),
                    status: "control %error".into(),
                    message: lines.join("\n"),
                },
                Err(err) => TmuxError::from(err),
            };
            // The prompt may sit in a loaded buffer: drop it (best effort; the buffers
            // of a dead client die with nothing else to clean).
            let (text_buffer, _) = buffer_names(serial);
            if client.run(&format!("delete-buffer -b {text_buffer}"), timeout).is_err() {
                *slot = None;
            }
            return Err(failure.into());
        }
        Ok(replies)
    }

    /// The path without a control client (a tmux without its flags, or one that would
    /// not attach): the same sequence as one plain `tmux` process after the liveness
    /// probe's, under the control client's lock all the same, so deliveries on this
    /// server still go one at a time (two pastes never interleave in one input) and no
    /// session is killed under one.
    fn send_by_commands(
        &self,
        target: &str,
        keys: &[Keys<'_>],
        serial: u64,
    ) -> Result<(), DeliveryError> {
        let _one_at_a_time = self.control();
        let liveness = self.liveness(target)?;
        if !liveness.may_be_live() {
            return Err(DeliveryError::SessionMissing { target: target.to_owned(), liveness });
        }
        let (text_buffer, submit_buffer) = buffer_names(serial);
        let pane = format!("={target}:");
        let mut steps: Vec<Vec<&OsStr>> = Vec::new();
        for keys in keys {
            match keys {
                Keys::Paste(prompt) => steps.extend([
                    ["load-buffer", "-b", &text_buffer]
                        .map(OsStr::new)
                        .into_iter()
                        .chain([prompt.path().as_os_str()])
                        .collect(),
                    ["paste-buffer", "-p", "-d", "-b", &text_buffer, "-t", &pane]
                        .map(OsStr::new)
                        .to_vec(),
                ]),
                Keys::Submit => steps.extend([
                    ["set-buffer", "-b", &submit_buffer, "\r"].map(OsStr::new).to_vec(),
                    ["paste-buffer", "-d", "-b", &submit_buffer, "-t", &pane]
                        .map(OsStr::new)
                        .to_vec(),
                ]),
            }
        }
        // One process for the whole sequence: tmux runs the commands in order and stops
        // at the first that fails.
        let chained = steps.join([OsStr::new(";")].as_slice());
        if let Err(err) = self.checked(&chained) {
            // The prompt may sit in a loaded buffer: drop it (best effort).
            let _ = self.run(&["delete-buffer", "-b", &text_buffer]);
            return Err(err.into());
        }
        Ok(())
    }

    fn supports_control_flags(&self) -> bool {
        self.version().is_none_or(|version| version >= (3, 2))
    }

    fn version(&self) -> Option<(u32, u32)> {
        *self.version.get_or_init(|| {
            let output = self.run_for(PROBE_TIMEOUT, &["-V"]).ok()?;
            parse_version(&String::from_utf8_lossy(&output.stdout))
        })
    }

    /// Clears the way for a new session: absent or unanswered → go; dead → kill it;
    /// live → refuse. `after_duplicate`: tmux already said the name is taken, so an
    /// unanswered probe counts as live.
    fn clear_target(&self, target: &str, after_duplicate: bool) -> Result<(), TmuxError> {
        match self.liveness(target)? {
            Liveness::Absent => Ok(()),
            Liveness::Unknown if !after_duplicate => Ok(()),
            Liveness::Live | Liveness::Unknown => {
                Err(TmuxError::SessionLive { target: target.to_owned() })
            }
            Liveness::Dead => {
                let killed = self.kill_session(target).unwrap_or(false);
                if killed || self.liveness(target)? == Liveness::Absent {
                    Ok(())
                } else {
                    Err(TmuxError::SessionOccupied { target: target.to_owned() })
                }
            }
        }
    }

    fn new_session(&self, site: &SessionSite, argv: &[String]) -> Result<(), TmuxError> {
        let mut args: Vec<OsString> =
            ["new-session", "-d", "-s", &site.target, "-c"].map(OsString::from).to_vec();
        args.push(site.cwd.as_os_str().to_owned());
        args.extend(self.env_args(site));
        args.push("--".into());
        args.extend(argv.iter().map(OsString::from));
        if self.settings.remain_on_exit {
            // In the same command list, so the option is set before tmux can notice a
            // harness that exits at once.
            let window = format!("={}:", site.target);
            args.extend(
                [";", "set-option", "-w", "-t", &window, "remain-on-exit", "on"]
                    .map(OsString::from),
            );
        }
        let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        let created = {
            let _handshake = self.handshake();
            self.checked(&refs)
        };
        match created {
            Ok(()) => Ok(()),
            // The session was created but the option could not be set: keep it.
            Err(TmuxError::Failed { message, .. })
                if !message.to_ascii_lowercase().contains("duplicate session")
                    && self.liveness(&site.target)? != Liveness::Absent =>
            {
                tracing::warn!(target = %site.target, %message, "remain-on-exit could not be set");
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    /// The control client's slot. The lock serialises deliveries on this server and keeps
    /// sessions from being killed under one; a poisoned lock only means a delivery
    /// panicked, and the client is re-checked before use anyway.
    fn control(&self) -> MutexGuard<'_, Option<ControlClient>> {
        self.control.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// Keeps control-client handshakes and session changes apart (a poisoned lock only
    /// means a holder panicked; the order it keeps is still right).
    fn handshake(&self) -> MutexGuard<'_, ()> {
        self.handshake.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    fn env_args(&self, site: &SessionSite) -> Vec<OsString> {
        let pairs: Vec<(&str, String)> = [
            site.work_item.as_ref().map(|item| (WORK_ITEM_ENV, item.to_string())),
            site.work_item.as_ref().map(|_| (SESSION_ENV, site.target.clone())),
            site.instance.as_ref().map(|name| (INSTANCE_ENV, name.clone())),
        ]
        .into_iter()
        .flatten()
        .chain(self.settings.session_env.iter().map(|(name, value)| (name.as_str(), value.clone())))
        .collect();
        if pairs.is_empty() {
            return Vec::new();
        }
        if self.version().is_some_and(|version| version < (3, 2)) {
            if !self.env_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "tmux older than 3.2 cannot set environment variables on new sessions; \
                     {WORK_ITEM_ENV} and {INSTANCE_ENV} are not exported (upgrade tmux)"
                );
            }
            return Vec::new();
        }
        pairs
            .into_iter()
            .flat_map(|(name, value)| ["-e".into(), format!("{name}={value}").into()])
            .collect()
    }

    fn set_remain_on_exit(&self, target: &str) -> Result<(), TmuxError> {
        let window = format!("={target}:");
        self.checked(&["set-option", "-w", "-t", &window, "remain-on-exit", "on"].map(OsStr::new))
    }

    /// The process ids of the session's panes that are still running.
    fn pane_pids(&self, target: &str) -> Result<Vec<i32>, TmuxError> {
        let exact = format!("={target}");
        let output =
            self.run(&["list-panes", "-s", "-t", &exact, "-F", "#{pane_pid} #{pane_dead}"])?;
        Ok(live_pane_pids(&String::from_utf8_lossy(&output.stdout)))
    }

    /// Polls until no pane of the session runs, for at most `within`.
    fn await_exit(&self, target: &str, within: Duration) -> Result<bool, TmuxError> {
        let deadline = Instant::now() + within;
        loop {
            if !self.liveness(target)?.may_be_live() {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(SETTLE_POLL.min(deadline - Instant::now()));
        }
    }

    /// `tmux` with the server-selecting global flags.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.settings.binary);
        command.args(self.global_args());
        for name in &self.settings.withheld_env {
            command.env_remove(name);
        }
        command
    }

    fn global_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        match &self.settings.socket {
            TmuxSocket::Inherited => {}
            TmuxSocket::Named(name) => args.extend(["-L".into(), OsString::from(name)]),
            TmuxSocket::Path(path) => args.extend(["-S".into(), path.clone().into_os_string()]),
        }
        if let Some(config) = &self.settings.config_file {
            args.extend(["-f".into(), config.clone().into_os_string()]);
        }
        args
    }

    /// Runs a command and turns a non-zero exit into [`TmuxError::Failed`].
    fn checked<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<(), TmuxError> {
        let output = self.run(args)?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        let message = if stderr.is_empty() {
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        } else {
            stderr
        };
        Err(TmuxError::Failed { verb: verb_of(args), status: output.status.to_string(), message })
    }

    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Output, TmuxError> {
        self.run_for(self.settings.command_timeout, args)
    }

    /// Runs `tmux <global> <args>` without a shell, killed after `timeout`.
    fn run_for<S: AsRef<OsStr>>(&self, timeout: Duration, args: &[S]) -> Result<Output, TmuxError> {
        let verb = verb_of(args);
        let child = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => {
                    TmuxError::NotInstalled { binary: self.settings.binary.clone() }
                }
                _ => TmuxError::Io { verb: verb.clone(), source },
            })?;
        let pid = child.id();
        let (done, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            // The receiver is gone only when the caller timed out and moved on.
            let _ = done.send(child.wait_with_output());
        });
        match outcome.recv_timeout(timeout) {
            Ok(output) => output.map_err(|source| TmuxError::Io { verb, source }),
            Err(_) => {
                if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw)
                {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
                Err(TmuxError::TimedOut { verb, after: timeout })
            }
        }
    }
}

/// What one trip to a session types, after the probe that it is live.
#[derive(Debug, Clone, Copy)]
pub enum Keys<'a> {
    /// The prompt file's text as one bracketed paste (`paste-buffer -p`).
    Paste(&'a PastePayload),
    /// A carriage return, unbracketed: submits what the agent's input holds.
    Submit,
}

impl Keys<'_> {
    /// The control-mode commands, in order: load the prompt file into a buffer and paste
    /// it bracketed, deleting it; or set a buffer to a carriage return and paste that
    /// unbracketed, deleting it.
    fn control_lines(&self, target: &str, serial: u64) -> [String; 2] {
        let (text_buffer, submit_buffer) = buffer_names(serial);
        match self {
            Keys::Paste(prompt) => [
                format!("load-buffer -b {text_buffer} {}", prompt.quoted_path()),
                format!("paste-buffer -p -d -b {text_buffer} -t '={target}:'"),
            ],
            Keys::Submit => [
                format!("set-buffer -b {submit_buffer} \"\\r\""),
                format!("paste-buffer -d -b {submit_buffer} -t '={target}:'"),
            ],
        }
    }
}

fn buffer_names(serial: u64) -> (String, String) {
    (format!("the-loop-evt-{serial}"), format!("the-loop-submit-{serial}"))
}

fn command_verb(command: &str) -> String {
    command.split_whitespace().next().unwrap_or_default().to_owned()
}

fn verb_of<S: AsRef<OsStr>>(args: &[S]) -> String {
    args.first().map(|arg| arg.as_ref().to_string_lossy().into_owned()).unwrap_or_default()
}

/// Only the-loop's own sessions may be touched: `loop-` then `[A-Za-z0-9_-]+`.
fn check_target(target: &str) -> Result<(), TmuxError> {
    let ok = target.strip_prefix("loop-").is_some_and(|rest| {
        !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
    });
    if ok { Ok(()) } else { Err(TmuxError::ForeignTarget { target: target.to_owned() }) }
}

/// Reads `#{pane_dead}` lines: dead only when every listed pane says `1`.
fn pane_liveness(lines: &str) -> Liveness {
    let flags: Vec<&str> = lines.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    if !flags.is_empty() && flags.iter().all(|flag| *flag == "1") {
        Liveness::Dead
    } else {
        Liveness::Live
    }
}

/// Reads `#{pane_pid} #{pane_dead}` lines; keeps positive pids of panes not dead.
fn live_pane_pids(lines: &str) -> Vec<i32> {
    lines
        .lines()
        .filter_map(|line| {
            let (pid, dead) = line.trim().split_once(' ')?;
            let pid = pid.parse::<i32>().ok().filter(|pid| *pid > 0)?;
            (dead.trim() == "0").then_some(pid)
        })
        .collect()
}

/// Whether the terminal at `tty` has canonical (line-editing) mode off.
fn reads_raw(tty: &Path) -> bool {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(tty, flags, Mode::empty()) else { return false };
    rustix::termios::tcgetattr(&fd)
        .is_ok_and(|termios| !termios.local_modes.contains(rustix::termios::LocalModes::ICANON))
}

fn signal_all(pids: &[i32], signal: rustix::process::Signal) {
    for &pid in pids {
        let Some(pid) = rustix::process::Pid::from_raw(pid) else { continue };
        match rustix::process::kill_process(pid, signal) {
            Ok(()) => {}
            Err(rustix::io::Errno::SRCH) => {}
            Err(err) => {
                tracing::warn!(pid = pid.as_raw_nonzero().get(), %err, "could not signal the harness")
            }
        }
    }
}

/// `tmux 3.3a` → (3, 3); `tmux next-3.4` → (3, 4); anything else → `None`.
fn parse_version(output: &str) -> Option<(u32, u32)> {
    let word = output.split_whitespace().nth(1)?;
    let word = word.rsplit('-').next()?;
    let (major, rest) = word.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(binary: &str) -> Tmux {
        let mut settings =
            TmuxSettings::new(TmuxSocket::Named("unused".into()), std::env::temp_dir());
        settings.binary = PathBuf::from(binary);
        Tmux::new(settings)
    }

    #[test]
    fn a_tmux_older_than_3_2_gets_no_environment_flags_and_one_warning() {
        let item: WorkItemRef = "github:octo/app#1".parse().unwrap();
        let site = SessionSite::for_work_item(&item, PathBuf::from("/w"), Some("laptop".into()));
        let old = runner("tmux");
        old.version.set(Some((3, 1))).unwrap();
        assert!(old.env_args(&site).is_empty());
        assert!(old.env_warned.load(Ordering::Relaxed));
        let new = runner("tmux");
        new.version.set(Some((3, 3))).unwrap();
        let args: Vec<String> =
            new.env_args(&site).iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "-e",
                "THE_LOOP_WORK_ITEM=github:octo/app#1",
                "-e",
                "THE_LOOP_SESSION=loop-github-octo-app-1",
                "-e",
                "THE_LOOP_INSTANCE=laptop"
            ]
        );
    }

    #[test]
    fn a_missing_tmux_binary_reads_as_unknown_and_refuses_to_spawn() {
        let tmux = runner("/nonexistent/tmux");
        assert_eq!(tmux.liveness("loop-a-1").unwrap(), Liveness::Unknown);
        let site =
            SessionSite::for_work_item(&"github:o/r#1".parse().unwrap(), PathBuf::from("/"), None);
        assert!(matches!(tmux.spawn(&site, &["x".into()]), Err(TmuxError::NotInstalled { .. })));
    }

    #[test]
    fn a_pr_endpoint_is_named_after_its_pr_and_tells_the_pane_its_work_item() {
        let item: WorkItemRef = "github:octo/app#15".parse().unwrap();
        let pr: WorkItemRef = "github:octo/lib#7".parse().unwrap();
        let site = SessionSite::for_endpoint(&item, &pr, PathBuf::from("/w"), None);
        assert_eq!(site.target, "loop-github-octo-lib-7");
        assert_eq!(site.work_item, Some(item));
    }

    #[test]
    fn withheld_variables_never_reach_a_tmux_command() {
        let mut tmux = runner("tmux");
        tmux.settings.withheld_env = vec!["THE_LOOP_GH_WEBHOOK_SECRET".into()];
        let command = tmux.command();
        let removed: Vec<_> =
            command.get_envs().filter(|(_, value)| value.is_none()).map(|(key, _)| key).collect();
        assert_eq!(removed, [OsStr::new("THE_LOOP_GH_WEBHOOK_SECRET")]);
    }

    #[test]
    fn the_runner_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Tmux>();
    }

    #[test]
    fn pane_flags_read_as_the_reference_table() {
        assert_eq!(pane_liveness("0\n"), Liveness::Live);
        assert_eq!(pane_liveness("1\n"), Liveness::Dead);
        assert_eq!(pane_liveness("1\n0\n"), Liveness::Live);
        assert_eq!(pane_liveness("1\n1\n"), Liveness::Dead);
        assert_eq!(pane_liveness("\n"), Liveness::Live);
    }

    #[test]
    fn pane_pids_skip_dead_panes_and_garbage() {
        assert_eq!(live_pane_pids("4242 0\n77 1\n99 0\n"), vec![4242, 99]);
        assert_eq!(live_pane_pids("0 0\n-1 0\nxyz 0\n\n"), Vec::<i32>::new());
    }

    #[test]
    fn only_the_loops_own_targets_are_accepted() {
        for ok in ["loop-github-octo-app-15", "loop-standing-x", "loop-github-ghe_corp-o-r_x-1"] {
            assert!(check_target(ok).is_ok(), "{ok}");
        }
        for bad in
            ["my-work", "loop", "loop-", "loop-x;rm", "0", "loop-other.session", "loop-other:0.1"]
        {
            assert!(matches!(check_target(bad), Err(TmuxError::ForeignTarget { .. })), "{bad}");
        }
    }

    #[test]
    fn versions_parse_with_suffixes_and_prefixes() {
        assert_eq!(parse_version("tmux 3.3a\n"), Some((3, 3)));
        assert_eq!(parse_version("tmux 3.1c"), Some((3, 1)));
        assert_eq!(parse_version("tmux next-3.4"), Some((3, 4)));
        assert_eq!(parse_version("tmux master"), None);
    }

    #[test]
    fn a_delivery_is_four_commands_with_the_text_only_in_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let payload = PastePayload::write(dir.path(), "rm -rf / ; `x` $(y)").unwrap();
        let commands: Vec<String> = [Keys::Paste(&payload), Keys::Submit]
            .iter()
            .flat_map(|keys| keys.control_lines("loop-a-1", 7))
            .collect();
        assert!(commands[0].starts_with("load-buffer -b the-loop-evt-7 '"));
        assert_eq!(commands[1], "paste-buffer -p -d -b the-loop-evt-7 -t '=loop-a-1:'");
        assert_eq!(commands[2], "set-buffer -b the-loop-submit-7 \"\\r\"");
        assert_eq!(commands[3], "paste-buffer -d -b the-loop-submit-7 -t '=loop-a-1:'");
        assert!(commands.iter().all(|command| !command.contains("rm -rf")));
    }
}
