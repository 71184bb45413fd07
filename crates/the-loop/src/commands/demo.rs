//! `the-loop demo`: the whole loop in one command, with no account, token or config.
//!
//! The demo is loop-demo's: a simulated GitHub, the service as `start --foreground`
//! builds it, a private tmux server whose sessions run the stand-in agent (this binary's
//! hidden `stand-in-harness` verb), and a scripted story whose every effect is checked.
//! This verb picks the directory, narrates what loop-demo tells it, prints the closing
//! hints (or `--json`), and exits 0 only if every effect was observed, 1 if one was not
//! or the demo was interrupted (Ctrl-C), 2 if the demo could not run (no tmux, no port).

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use loop_demo::{Agent, CAST, Outcome, Paths, REPO, Ran, STEPS, Settings, Told};
use loop_sessions::shell::word as shell_word;
use serde_json::json;

use crate::ExitStatus;
use crate::cli::{DemoAgent, DemoArgs, GlobalArgs};
use crate::env_vars;
use crate::printer::Printer;

pub fn run(args: DemoArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    if !loop_demo::tmux_available() {
        printer.error("the demo runs its agent sessions in tmux, and tmux is not installed");
        printer.hint("install it (`apt install tmux`, `dnf install tmux` or `brew install tmux`)");
        return Ok(ExitStatus::CouldNotRun);
    }
    let root = match loop_demo::directory(args.dir.as_deref(), &std::env::temp_dir()) {
        Ok(root) => root,
        Err(err @ loop_demo::DemoError::NotEmpty { .. }) => {
            printer.error(&err);
            printer.hint("give `--dir` a new or empty directory, or no `--dir`");
            return Ok(ExitStatus::CouldNotRun);
        }
        Err(err) => return Err(err.into()),
    };
    let paths = Paths::new(&root);
    let exe = std::env::current_exe()
        .context("cannot find this program's own path to run the stand-in harness")?;
    let agent = match args.agent {
        DemoAgent::StandIn => {
            Agent::StandIn(vec![exe.display().to_string(), "stand-in-harness".to_owned()])
        }
        DemoAgent::Claude => match on_path("claude") {
            Some(cli) => Agent::Claude(cli),
            None => {
                printer.error(
                    "`--agent claude` runs the Claude Code CLI, and `claude` is not on PATH",
                );
                printer.hint(
                    "install it (`npm install -g @anthropic-ai/claude-code`), or run \
                     `scripts/install-claude.sh` from a clone and put the directory it prints on PATH",
                );
                return Ok(ExitStatus::CouldNotRun);
            }
        },
    };
    let settings = Settings {
        step_timeout: Duration::from_secs(args.step_timeout.max(1)),
        agent,
        // A person at a terminal gets to look at the dashboard afterwards; a script does
        // not wait, and `--clean` means nothing is to be left.
        linger: std::io::stdin().is_terminal() && !args.clean,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the demo's runtime")?;
    let began = Instant::now();
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let ran = runtime.block_on(loop_demo::run(paths.clone(), &settings, interrupted, |told| {
        narrate(told, &paths, printer);
    }))?;
    drop(runtime);
    let Ran::Played { outcome, attach } = ran else {
        // Interrupted: nothing of the demo keeps running, its files stay to be read.
        printer.error(format_args!(
            "interrupted: the demo is stopped; its files are in `{}`",
            paths.root.display()
        ));
        return Ok(ExitStatus::Negative);
    };
    let attach =
        attach.map(|argv| argv.iter().map(|word| shell_word(word)).collect::<Vec<_>>().join(" "));
    let seconds = began.elapsed().as_secs_f64();

    if args.clean {
        loop_demo::clean(&paths)?;
    }
    let me = program_name();
    let config = shell_word(&paths.config.display().to_string());
    let mut explain: Vec<(String, String)> = Vec::new();
    if let Some(issue) = &outcome.issue {
        explain.push((
            format!("{me} --config {config} explain {issue}"),
            "the work item's whole trail".to_owned(),
        ));
    }
    if let Some(delivery) = &outcome.refused_delivery {
        explain.push((
            format!("{me} --config {config} explain {delivery}"),
            format!("why {}'s comment was refused", CAST.stranger),
        ));
    }
    if global.json {
        printer.data(json!({
            "ok": outcome.ok(),
            "seconds": seconds,
            "dir": paths.root,
            "config": paths.config,
            "tmuxSocket": paths.socket,
            "eventLog": loop_store::StateLayout::new(&paths.state).event_log(),
            "steps": outcome.steps.iter().map(|s| json!({
                "step": s.step,
                "ok": s.ok(),
                "effects": s.effects.iter().map(|(seen, what)| json!({"observed": seen, "what": what})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "attach": if args.clean { None } else { attach.clone() },
            "explain": explain.iter().map(|(command, _)| command).collect::<Vec<_>>(),
            "cleaned": args.clean,
        }));
    }
    conclude(
        &outcome,
        seconds,
        &paths,
        attach.filter(|_| !args.clean),
        &explain,
        args.clean,
        printer,
    );
    Ok(if outcome.ok() { ExitStatus::Success } else { ExitStatus::Negative })
}

/// Prints what the demo tells, as it happens.
fn narrate(told: Told, paths: &Paths, printer: Printer) {
    match told {
        Told::Started { simulated_github, webhooks, polls_every, dashboard, agent } => {
            printer
                .info("the-loop demo: everything below is real except GitHub, which is simulated");
            printer
                .info(format_args!("  simulated GitHub  {simulated_github} (repository {REPO})"));
            printer.info(format_args!(
                "  the service       webhooks at {webhooks} and polling every {polls_every} s, one dispatcher"
            ));
            printer.info(format_args!(
                "  agent sessions    {agent} in a private tmux server ({})",
                paths.socket.display()
            ));
            printer.info(format_args!(
                "  people            {} (authorized), {} (teammate), {} (stranger)",
                CAST.maintainer, CAST.teammate, CAST.stranger
            ));
            printer
                .info(format_args!("  dashboard         {dashboard} (live while the demo runs)"));
            printer.info(format_args!("  files             {}", paths.root.display()));
            printer.info("");
        }
        Told::Lingering { dashboard } => {
            printer.info("");
            printer.info(format_args!(
                "the story is over; the dashboard stays up at {dashboard} — Ctrl-C to stop the demo"
            ));
        }
        Told::Step { number, text } => printer.info(format_args!("[{number}/{STEPS}] {text}")),
        Told::Observed { what } => printer.info(format_args!("      ✓ {what}")),
        Told::NotObserved { missing, timeout, event_log } => {
            printer.error(format_args!("✗ not observed within {} s: {missing}", timeout.as_secs()));
            printer.hint(format_args!(
                "the event log is `{}` (`the-loop --config {} events`)",
                event_log.display(),
                paths.config.display()
            ));
        }
    }
}

fn conclude(
    outcome: &Outcome,
    seconds: f64,
    paths: &Paths,
    attach: Option<String>,
    explain: &[(String, String)],
    cleaned: bool,
    printer: Printer,
) {
    printer.info("");
    if outcome.ok() {
        printer.info(format_args!(
            "✓ the whole loop worked: {STEPS} of {STEPS} steps observed in {seconds:.1} s"
        ));
    } else {
        let done = outcome.steps.iter().filter(|s| s.ok()).count();
        printer.error(format_args!(
            "the demo stopped at step {}: {done} of {STEPS} steps observed",
            done + 1
        ));
    }
    if cleaned {
        printer.info("cleaned up: the demo's tmux server is stopped and its directory removed");
        return;
    }
    printer.info("look at what happened:");
    if let Some(attach) = attach {
        printer.info(format_args!("  {attach}"));
        printer.info("      the session as the agent saw it (detach with Ctrl-b d)");
    }
    for (command, what) in explain {
        printer.info(format_args!("  {command}"));
        printer.info(format_args!("      {what}"));
    }
    let socket = shell_word(&paths.socket.display().to_string());
    let root = shell_word(&paths.root.display().to_string());
    printer.info(format_args!(
        "everything is in {root}; remove it with: tmux -S {socket} kill-server; rm -r {root}"
    ));
    if outcome.ok() {
        printer.info(
            "next, the real thing: `the-loop config init`, a GitHub token, `the-loop start` (README)",
        );
    }
}

/// How the user calls this program: `the-loop` when that is what `PATH` finds, else its
/// full path (e.g. after `cargo run`).
/// The first executable `name` on PATH.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os(env_vars::PATH)?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn program_name() -> String {
    let Ok(exe) = std::env::current_exe() else { return "the-loop".to_owned() };
    let on_path = std::env::var_os(env_vars::PATH).is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::canonicalize(dir.join("the-loop")).ok() == std::fs::canonicalize(&exe).ok()
        })
    });
    if on_path { "the-loop".to_owned() } else { shell_word(&exe.display().to_string()) }
}
