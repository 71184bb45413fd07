//! `the-loop demo`: the whole loop in one command, with no account, token or config.
//!
//! It starts a simulated GitHub, the service's parts in this process (webhook receiver
//! and poller over one dispatcher: hybrid mode), and a private tmux server whose sessions
//! run the stand-in agent (this binary's hidden `stand-in-harness` verb); then plays a
//! scripted story and checks each step's effect ([`story`]). Exit 0 only if every effect
//! was observed, 1 if one was not, 2 if the demo could not run (no tmux, no port).
//!
//! Everything it writes is in one directory (a new temp dir unless `--dir`): the config
//! it ran with, the state root, the tmux socket. When it ends only the tmux server with
//! the story's (ended) session is left, to be attached; `--clean` removes that too, and
//! Ctrl-C stops the demo's tmux server (the files stay). It
//! never touches the user's own tmux server, config or state root, and sets no
//! environment variable.

mod stack;
mod story;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use self::stack::{CAST, Paths, REPO, Stack};
use self::story::{Outcome, STEPS};
use crate::ExitStatus;
use crate::cli::{DemoArgs, GlobalArgs};
use crate::env_vars;
use crate::printer::Printer;

pub fn run(args: DemoArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    if std::process::Command::new("tmux").arg("-V").output().is_err() {
        printer.error("the demo runs its agent sessions in tmux, and tmux is not installed");
        printer.hint("install it (`apt install tmux`, `dnf install tmux` or `brew install tmux`)");
        return Ok(ExitStatus::CouldNotRun);
    }
    let root = match &args.dir {
        Some(dir) => prepare(dir)?,
        None => tempfile::Builder::new()
            .prefix("the-loop-demo-")
            .tempdir()
            .context("cannot create the demo's directory under the system temp dir")?
            .keep(),
    };
    let paths = Paths::new(&root);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the demo's runtime")?;
    let began = Instant::now();
    let timeout = Duration::from_secs(args.step_timeout.max(1));
    let played = runtime.block_on(async {
        let stack = Stack::start(paths.clone()).await?;
        introduce(&stack, printer);
        let played = tokio::select! {
            played = story::play(&stack, printer, timeout) => played.map(Some),
            _ = tokio::signal::ctrl_c() => Ok(None),
        };
        let attach = played.as_ref().ok().and_then(Option::as_ref).and_then(|outcome| {
            let target = outcome.issue.as_ref()?.tmux_session();
            let argv = stack.tmux.attach_command(&target, false).ok()?;
            Some(
                argv.iter().map(|a| shell_word(&a.to_string_lossy())).collect::<Vec<_>>().join(" "),
            )
        });
        let stopped = stack.stop().await;
        let outcome = played?;
        stopped?;
        anyhow::Ok(outcome.map(|outcome| (outcome, attach)))
    })?;
    drop(runtime);
    let Some((outcome, attach)) = played else {
        // Interrupted: nothing of the demo keeps running, its files stay to be read.
        stop_tmux(&paths);
        printer.error(format_args!(
            "interrupted: the demo is stopped; its files are in `{}`",
            paths.root.display()
        ));
        return Ok(ExitStatus::Negative);
    };
    let seconds = began.elapsed().as_secs_f64();

    if args.clean {
        clean(&paths)?;
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

/// Creates `dir`, or accepts it when it exists and is empty.
fn prepare(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read `{}`", dir.display()))?;
    if entries.next().is_some() {
        anyhow::bail!(
            "`{}` is not empty: the demo needs a new or empty directory (or no `--dir`)",
            dir.display()
        );
    }
    std::path::absolute(dir).with_context(|| format!("cannot resolve `{}`", dir.display()))
}

fn introduce(stack: &Stack, printer: Printer) {
    let interval = stack.config.polling.interval_seconds;
    printer.info("the-loop demo: everything below is real except GitHub, which is simulated");
    printer.info(format_args!("  simulated GitHub  {} (repository {REPO})", stack.sim.url()));
    printer.info(format_args!(
        "  the service       webhooks at {} and polling every {interval} s, one dispatcher",
        stack.webhook_url
    ));
    printer.info(format_args!(
        "  agent sessions    a stand-in agent in a private tmux server ({})",
        stack.paths.socket.display()
    ));
    printer.info(format_args!(
        "  people            {} (authorized), {} (teammate), {} (stranger)",
        CAST.maintainer, CAST.teammate, CAST.stranger
    ));
    printer.info(format_args!("  files             {}", stack.paths.root.display()));
    printer.info("");
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

/// Stops the demo's tmux server (its own socket) and removes the demo's directory.
fn clean(paths: &Paths) -> anyhow::Result<()> {
    stop_tmux(paths);
    std::fs::remove_dir_all(&paths.root)
        .with_context(|| format!("cannot remove the demo's directory `{}`", paths.root.display()))
}

/// Stops the demo's own tmux server; "no server running" is fine: nothing to stop.
fn stop_tmux(paths: &Paths) {
    let _ =
        std::process::Command::new("tmux").arg("-S").arg(&paths.socket).arg("kill-server").output();
}

/// How the user calls this program: `the-loop` when that is what `PATH` finds, else its
/// full path (e.g. after `cargo run`).
fn program_name() -> String {
    let Ok(exe) = std::env::current_exe() else { return "the-loop".to_owned() };
    let on_path = std::env::var_os(env_vars::PATH).is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::canonicalize(dir.join("the-loop")).ok() == std::fs::canonicalize(&exe).ok()
        })
    });
    if on_path { "the-loop".to_owned() } else { shell_word(&exe.display().to_string()) }
}

/// `word` as one shell word: as is when it has only safe characters, else single-quoted.
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-=:@%+,".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/tmp/the-loop-demo-x/tmux.sock"), "/tmp/the-loop-demo-x/tmux.sock");
        assert_eq!(shell_word("=loop-github-demo-app-1"), "=loop-github-demo-app-1");
        assert_eq!(shell_word("/a dir/it's"), r"'/a dir/it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
