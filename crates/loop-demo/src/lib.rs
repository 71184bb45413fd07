//! `the-loop demo` as a library: the whole loop in one call, with no account, token or
//! config of the user's.
//!
//! [`run`] starts a simulated GitHub (loop-sim), the service exactly as `the-loop start
//! --foreground` builds it (loop-daemon's `Service`: webhook receiver and poller over one
//! dispatcher — hybrid mode) with the simulator's client and a stand-in agent (or the
//! real Claude Code against a stand-in model) as its stand-ins, and a private tmux
//! server whose sessions run that agent; then it plays a
//! scripted story and checks each step's effect where a user would look: the event log,
//! the agent's record of what was pasted, the simulator's comments, tmux.
//!
//! Everything it writes is in one directory ([`Paths`]): the config it ran with (what
//! `the-loop --config … explain` reads afterwards), the state root, the tmux socket.
//! When it ends only the tmux server with the story's (ended) session is left, to be
//! attached; [`clean`] removes that too, and an interrupted run stops its tmux server
//! (the files stay). It never touches the user's own tmux server, config or state root,
//! and sets no environment variable.
//!
//! It prints nothing: what a person would be told goes to the caller's `tell` as a
//! [`Told`], and the outcome comes back as a [`Ran`].
//!
//! Layout:
//! - [`stack`]: the running loop (simulator, service, tmux) in its directory.
//! - [`story`]: the scripted steps and how each effect is observed.
//!
//! It may use every crate of the workspace but the binary; nothing in the product's
//! runtime path depends on it.

pub mod stack;
pub mod story;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use stack::{Agent, CAST, Cast, Paths, REPO, Stack};
pub use story::{Outcome, STEPS, StepReport};

/// Why the demo could not run (not a step that was not observed: that is an
/// [`Outcome`]).
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("`{}` is not empty: the demo needs a new or empty directory", path.display())]
    NotEmpty { path: PathBuf },

    #[error("cannot {action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot listen on 127.0.0.1 for {what}")]
    Listen {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },

    #[error("the simulated GitHub cannot {action}")]
    Sim {
        action: &'static str,
        #[source]
        source: loop_sim::WorldError,
    },

    #[error("a work item of the story has no valid ref")]
    Ref(#[from] loop_core::RefError),

    #[error("cannot read the demo's config")]
    Config(#[from] loop_daemon::config_source::SourceError),

    #[error("the demo's service failed")]
    Service(#[from] loop_daemon::service::ServiceError),

    #[error("the demo's service stopped without a word")]
    ServiceLost,

    #[error("cannot build the GitHub client for the simulator")]
    Github(#[from] loop_github::GithubError),

    #[error("cannot read the event log")]
    EventLog(#[from] loop_store::StoreError),

    #[error("cannot read the session record of a work item of the story")]
    Record(#[source] loop_store::StoreError),
}

/// How the demo runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long a step may take to show each of its effects.
    pub step_timeout: Duration,
    /// The agent the sessions run.
    pub agent: Agent,
    /// After the story, keep the world up — the simulator, the service and so the
    /// dashboard — until `interrupt`, so a person can look around.
    pub linger: bool,
}

/// What the demo tells whoever runs it, in order.
#[derive(Debug)]
pub enum Told {
    /// Everything is up: where GitHub is simulated, where webhooks go, how often the
    /// poller looks, where the dashboard is.
    Started {
        simulated_github: String,
        webhooks: String,
        polls_every: u64,
        dashboard: String,
        /// What the sessions run, in a few words.
        agent: String,
    },
    /// A step of the story begins (`number` of [`STEPS`]).
    Step { number: usize, text: String },
    /// An effect of the step was seen.
    Observed { what: String },
    /// An effect was not seen within the step timeout: the story stops here.
    NotObserved { missing: String, timeout: Duration, event_log: PathBuf },
    /// The story is over and the world stays up ([`Settings::linger`]) until
    /// `interrupt`: the dashboard is still at `dashboard`.
    Lingering { dashboard: String },
}

/// How a run ended.
#[derive(Debug)]
pub enum Ran {
    /// The story played to its end or to its first effect not observed.
    Played {
        outcome: Outcome,
        /// The command that attaches to the story's session, word by word.
        attach: Option<Vec<String>>,
    },
    /// `interrupt` resolved first: the demo and its tmux server are stopped, its files
    /// stay.
    Interrupted,
}

/// Whether tmux can be run (the demo's sessions need it).
pub fn tmux_available() -> bool {
    std::process::Command::new("tmux").arg("-V").output().is_ok()
}

/// Starts the loop in `paths`, plays the story (telling `tell` what happens) until its
/// end or `interrupt` — with [`Settings::linger`], until `interrupt` after the end —
/// then stops the service and the simulator.
pub async fn run(
    paths: Paths,
    settings: &Settings,
    interrupt: impl Future<Output = ()>,
    tell: impl Fn(Told),
) -> Result<Ran, DemoError> {
    let stack = Stack::start(paths, &settings.agent).await?;
    tell(Told::Started {
        simulated_github: stack.sim.url(),
        webhooks: stack.webhook_url.clone(),
        polls_every: stack.config.polling.interval_seconds,
        dashboard: format!("{}/", stack.dashboard_url),
        agent: match (&settings.agent, &stack.model) {
            (Agent::Claude(cli), Some(model)) => format!(
                "the real Claude Code ({}) against a stand-in model at {}",
                cli.display(),
                model.base_url()
            ),
            _ => "a stand-in agent".to_owned(),
        },
    });
    let mut interrupt = std::pin::pin!(interrupt);
    let played = tokio::select! {
        played = story::play(&stack, settings.step_timeout, &tell) => Some(played),
        () = &mut interrupt => None,
    };
    if played.is_some() && settings.linger {
        tell(Told::Lingering { dashboard: format!("{}/", stack.dashboard_url) });
        interrupt.await;
    }
    let attach = match &played {
        Some(Ok(outcome)) => outcome.issue.as_ref().and_then(|issue| {
            let argv = stack.tmux.attach_command(&issue.tmux_session(), false).ok()?;
            Some(argv.iter().map(|word| word.to_string_lossy().into_owned()).collect())
        }),
        _ => None,
    };
    let paths = stack.paths.clone();
    let stopped = stack.stop().await;
    let Some(played) = played else {
        stop_tmux(&paths);
        stopped?;
        return Ok(Ran::Interrupted);
    };
    let outcome = played?;
    stopped?;
    Ok(Ran::Played { outcome, attach })
}

/// Stops the demo's tmux server (its own socket) and removes the demo's directory.
pub fn clean(paths: &Paths) -> Result<(), DemoError> {
    stop_tmux(paths);
    std::fs::remove_dir_all(&paths.root).map_err(|source| DemoError::Io {
        action: "remove the demo's directory",
        path: paths.root.clone(),
        source,
    })
}

/// Stops the demo's own tmux server; "no server running" is fine: nothing to stop.
fn stop_tmux(paths: &Paths) {
    let _ =
        std::process::Command::new("tmux").arg("-S").arg(&paths.socket).arg("kill-server").output();
}

/// Creates `dir`, or accepts it when it exists and is empty, and returns its absolute
/// path; a new directory under `temp_dir` (the system's) when `dir` is `None`.
pub fn directory(dir: Option<&Path>, temp_dir: &Path) -> Result<PathBuf, DemoError> {
    let io = |action, path: &Path| {
        let path = path.to_owned();
        move |source| DemoError::Io { action, path, source }
    };
    let Some(dir) = dir else {
        return tempfile::Builder::new()
            .prefix("the-loop-demo-")
            .tempdir_in(temp_dir)
            .map(tempfile::TempDir::keep)
            .map_err(io("create the demo's directory under", temp_dir));
    };
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let mut entries = std::fs::read_dir(dir).map_err(io("read", dir))?;
    if entries.next().is_some() {
        return Err(DemoError::NotEmpty { path: dir.to_owned() });
    }
    std::path::absolute(dir).map_err(io("resolve", dir))
}
