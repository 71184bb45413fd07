//! The command line: every verb and flag, typed. Doc comments are the `--help` text.
//!
//! Parsing never reads the config file, so `--help` and `--version` work even when the
//! config is broken or stale.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::env_vars;

/// Turns GitHub issues and pull requests into long-lived AI agent sessions in tmux.
///
/// Events on labelled work items arrive by webhook and/or by polling; each is routed to
/// its work item, checked against the guards, and pasted into that item's agent session.
#[derive(Debug, Parser)]
#[command(name = "the-loop", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Flags every verb accepts, before or after the verb.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The CLI config file [default: ./.the-loop/cli-config.yaml if it exists, else
    /// ~/.the-loop/cli-config.yaml; a missing file means all defaults]
    #[arg(long, short = 'c', global = true, value_name = "PATH", env = env_vars::CLI_CONFIG)]
    pub config: Option<PathBuf>,

    /// Print machine-readable JSON where the verb prints data
    #[arg(long, global = true)]
    pub json: bool,

    /// Say more (repeat for even more)
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,

    /// Say less: only errors
    #[arg(short, long, global = true, action = ArgAction::SetTrue)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check, show, create or migrate the CLI config file
    #[command(subcommand)]
    Config(ConfigCommand),

    /// Read the event log (the audit trail of every decision)
    Events(EventsArgs),

    /// Run a simulated GitHub in the foreground and print its URL (for trying the-loop
    /// without credentials; Ctrl-C to stop)
    Sim(SimArgs),

    /// Run one poll cycle in the foreground and exit (the cron form; takes the poller's
    /// lock): 0 clean, 1 a repository could not be listed, 2 cannot run
    Poll(PollArgs),

    /// Bring up every enabled ingress (webhook receiver, poller) in one service process,
    /// detached, its output in `<state.root>/logs/service.out` (`--foreground`: in this one)
    Start(StartArgs),

    /// Stop the service: signal only a process its pidfile lock proves alive, and wait
    Stop(StopArgs),

    /// Is each enabled ingress running? Exit 0 only if all are (`--json` for machines)
    Status,

    /// Stop the service, then start it detached
    Restart(StopArgs),

    /// Print the URL of the running service's dashboard (`--open`: open it in the browser)
    Dashboard(DashboardArgs),

    /// See and steer work items and their agent sessions
    #[command(subcommand)]
    Sessions(SessionsCommand),

    /// Grant or revoke a work item's collaborators (their comments are input, never
    /// commands); the CLI twin of the `add-collaborator` / `remove-collaborator` keywords
    #[command(subcommand)]
    Collaborators(CollaboratorsCommand),

    /// Ask a question on the work item from inside its agent session: posted as a
    /// comment, the wait recorded; the answer arrives as the session's next event
    Ask(AskArgs),

    /// Answer a work item's agent session from this machine: pasted into its pane under
    /// a header naming you, and mirrored on the work item (never spawns or resumes)
    Reply(ReplyArgs),

    /// the-loop's Claude Code plugin (`/the-loop:work-on`, the link-pr hook, the MCP
    /// server): install it for your own Claude Code, or see what is installed where
    #[command(subcommand)]
    Harness(HarnessCommand),

    /// What the harness plugin's hooks run (reads the hook's JSON on stdin; exits 0)
    #[command(subcommand, hide = true)]
    Hook(HookCommand),

    /// Where a work item stands in its process graph, and the session's claim that a
    /// node's work is done (judged by the node's gate)
    #[command(subcommand)]
    Graph(GraphCommand),

    /// Why did (nothing) happen? The decision trail of one delivery or one work item,
    /// from the event log: what arrived, each guard passed or failed, what was done
    Explain(ExplainArgs),

    /// See the whole loop work in one command, with no account or token: a simulated
    /// GitHub, the service (webhooks and polling) and a stand-in agent in a private tmux
    /// server play a scripted story, each step checked; exit 0 only if every step worked
    Demo(DemoArgs),

    /// The stand-in agent harness the demo's sessions run (records each submitted message)
    #[command(hide = true)]
    StandInHarness(StandInHarnessArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config file; list every problem with its key path and line (exit 2 if any)
    Check,

    /// Print the effective config, defaults filled in (YAML, or JSON with --json)
    Show,

    /// Write a commented starter config that passes `config check`
    Init {
        /// Where to write it [default: the `--config` file, else ./.the-loop/cli-config.yaml]
        #[arg(long, value_name = "FILE")]
        path: Option<PathBuf>,

        /// Overwrite an existing file (the old one is kept as `<file>.bak`)
        #[arg(long)]
        force: bool,
    },

    /// Rewrite a config written for an older version: removed keys are moved to their
    /// replacements, the original is kept as `<file>.bak`, every move is reported
    Migrate {
        /// The file to migrate [default: the resolved config path]
        #[arg(long, value_name = "FILE")]
        path: Option<PathBuf>,

        /// Print the migrated config without writing it
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Keep printing new events as they are appended (Ctrl-C to stop)
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// Only events about this work item (`github:owner/repo#N`)
    #[arg(long, value_name = "REF")]
    pub work_item: Option<loop_core::WorkItemRef>,

    /// Only events of this type; `*` matches any run of characters (e.g. `session.*`).
    /// Repeat to accept several
    #[arg(long = "event", value_name = "NAME")]
    pub events: Vec<String>,

    /// Only events at or after this time: RFC 3339 (`2026-11-29T10:00:00Z`) or an age
    /// (`90s`, `15m`, `2h`, `7d`)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,

    /// Show only the last N matching events (0 = all)
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// The port to listen on, on 127.0.0.1 [default: any free port]
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub port: u16,

    /// Create this repository (`owner/repo`) at start; repeat for several
    #[arg(long = "seed-repo", value_name = "OWNER/REPO")]
    pub seed_repos: Vec<loop_core::RepoRef>,

    /// The login API tokens act as (the author of what the-loop writes)
    #[arg(long, value_name = "LOGIN", default_value = "loop-operator")]
    pub viewer: String,
}

#[derive(Debug, Args)]
pub struct PollArgs {
    /// Run exactly one cycle, then exit (required: continuous polling is `the-loop start`)
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Run in this process until TERM or INT (for systemd, containers and tests)
    #[arg(long)]
    pub foreground: bool,

    /// Journal and acknowledge deliveries without processing them; they are processed at
    /// the next start without this flag (crash and recovery testing)
    #[arg(long, hide = true)]
    pub hold_processing: bool,

    /// Leave the caller's session first (how a detached `start` runs the service)
    #[arg(long, hide = true, requires = "foreground")]
    pub own_session: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Every session record on this machine, with its last control command
    List {
        /// Only sessions in this state
        #[arg(long, value_enum)]
        status: Option<SessionStatus>,
    },

    /// One work item: arming, session, ledger, collaborators (`--json`: the records)
    Show(WorkItemArg),

    /// Attach this terminal to the work item's tmux session (read-only for a closed one)
    Attach {
        #[command(flatten)]
        item: WorkItemArg,
        /// Watch without typing into the session
        #[arg(long)]
        read_only: bool,
    },

    /// Arm the work item and spawn its session (a paused one is resumed); the label is
    /// not needed from here
    Start(ControlArgs),

    /// Close the session and disarm the work item
    Stop(ControlArgs),

    /// Stop delivering events to the session (the conversation is kept)
    Pause(ControlArgs),

    /// Deliver events to a paused session again (never spawns)
    Resume(ControlArgs),

    /// Remove the work item's local resources (tmux sessions, checkouts, session
    /// record) and disarm it; its portable record is kept
    Cleanup(ControlArgs),

    /// Close the session the way a merge does, without recording a command
    Close {
        #[command(flatten)]
        item: WorkItemArg,
        /// Keep the tmux session (default: `routing.tmux.keepSessionOnClose`)
        #[arg(long, conflicts_with = "kill_tmux")]
        keep_tmux: bool,
        /// Kill the tmux session
        #[arg(long)]
        kill_tmux: bool,
    },

    /// Forget work items on this machine: close a live session, delete the session
    /// record, clear the `control` and `poll` sections (no comment is posted)
    Reset {
        /// The work item (repeat for several)
        #[arg(
            long = "work-item",
            value_name = "REF",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        work_items: Vec<loop_core::WorkItemRef>,
        /// Every work item with a record on this machine
        #[arg(long)]
        all: bool,
        /// Say what would be done, change nothing
        #[arg(long)]
        dry_run: bool,
    },

    /// Record that a pull request delivers the work item, so its events reach the
    /// work item's session
    LinkPr {
        #[command(flatten)]
        item: WorkItemArg,
        /// `N`, `#N` (same repository), a ref or the pull request's URL
        #[arg(long, value_name = "PR")]
        pull_request: String,
    },
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The work item (or the pull request its session serves) to ask on
    #[arg(long = "work-item", value_name = "REF", env = crate::env_vars::WORK_ITEM)]
    pub work_item: loop_core::WorkItemRef,
    /// The question, as it should read on GitHub
    #[arg(long, value_name = "TEXT")]
    pub question: String,
    /// A choice to offer (repeat for each, at most 10)
    #[arg(long = "option", value_name = "TEXT")]
    pub options: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// The node, phase and status, the gate's messages and what to run next
    Status(GraphArgs),
    /// Every node in order, what each gave, and the hooks this version only stubs:
    /// exit 0 when nothing up to the current node is unsatisfied, 1 otherwise
    Check(GraphArgs),
    /// Claim the current node's work done: its gate judges the claim (one JSON line on
    /// stdout; exit 0 whether or not the pointer moved)
    Complete(GraphCompleteArgs),
    /// The operator's override: move the work item to a node past its gates. No verdict
    /// is forged (the node left keeps none, the one entered is marked forced), its entry
    /// is not run, and an audit comment is posted (one JSON line on stdout; exit 2 when
    /// refused)
    Force(GraphForceArgs),
    /// Declare nodes ahead of the pointer skipped: the walk passes them when it gets
    /// there (one JSON line on stdout; exit 0 if any was declared, 1 if all were refused)
    Skip(GraphSkipArgs),
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The work item (`github:owner/repo#N`); inside its session, the session's own
    #[arg(value_name = "REF", env = crate::env_vars::WORK_ITEM)]
    pub work_item: loop_core::WorkItemRef,
}

#[derive(Debug, Args)]
pub struct GraphCompleteArgs {
    #[command(flatten)]
    pub item: GraphArgs,
    /// The node claimed (default: the current one); a node already left is a no-op
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct GraphForceArgs {
    /// The work item (`github:owner/repo#N`)
    #[arg(value_name = "REF")]
    pub work_item: loop_core::WorkItemRef,
    /// The node to move it to
    #[arg(long, value_name = "NODE")]
    pub to: String,
    /// Why: recorded in the state file and posted on the work item
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct GraphSkipArgs {
    /// The work item (`github:owner/repo#N`)
    #[arg(value_name = "REF")]
    pub work_item: loop_core::WorkItemRef,
    /// A skippable node or a skip set (`spec-chain`, `review-chain`, …); repeat for more
    #[arg(long = "node", value_name = "NODE", required = true)]
    pub nodes: Vec<String>,
    /// Why: recorded with each skip and posted on the work item
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct ReplyArgs {
    /// The work item (`github:owner/repo#N`), or a pull request its session serves
    #[arg(value_name = "REF")]
    pub work_item: loop_core::WorkItemRef,
    /// What to tell the session
    #[arg(value_name = "TEXT")]
    pub text: String,
}

#[derive(Debug, Subcommand)]
pub enum HarnessCommand {
    /// Write the plugin under the state root and register it in this user's Claude Code
    /// settings, for the sessions you start yourself (only keys that are absent; an
    /// existing `false` is kept). Sessions the-loop spawns need no install
    Install {
        #[arg(value_enum)]
        harness: PluginHarness,
    },
    /// Where the plugin is, whether its files are this binary's, whether spawned sessions
    /// load it, and whether your own Claude Code has it installed (exit 0 when spawned
    /// sessions load it)
    Status,
}

/// The harnesses the-loop ships a plugin for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PluginHarness {
    Claude,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// `PostToolUse`: record a pull request the tool call created (`gh pr create`, a
    /// GitHub MCP tool) for the session's work item (THE_LOOP_WORK_ITEM)
    LinkPr,
    /// Every Claude Code hook event: report the agent's state to the daemon (spooled
    /// under the state root for the session in THE_LOOP_SESSION); a `PermissionRequest`
    /// waits for an answer given from the work item (`the-loop approve|deny`) and prints
    /// it (docs/agent-states.md)
    Agent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SessionStatus {
    Active,
    Paused,
    Closed,
}

#[derive(Debug, Args)]
pub struct WorkItemArg {
    /// The work item (`github:owner/repo#N`)
    #[arg(long = "work-item", value_name = "REF")]
    pub work_item: loop_core::WorkItemRef,
}

#[derive(Debug, Args)]
pub struct ControlArgs {
    #[command(flatten)]
    pub item: WorkItemArg,
    /// Do not post the keyword comment back to the work item
    #[arg(long)]
    pub no_comment: bool,
}

#[derive(Debug, Subcommand)]
pub enum CollaboratorsCommand {
    /// Grant each login collaborator access to the work item
    Add(CollaboratorsArgs),
    /// Revoke it
    Remove(CollaboratorsArgs),
}

#[derive(Debug, Args)]
pub struct CollaboratorsArgs {
    /// The work item (`github:owner/repo#N`)
    #[arg(value_name = "REF")]
    pub work_item: loop_core::WorkItemRef,
    /// GitHub logins (`@login` or `login`)
    #[arg(value_name = "@LOGIN", required = true)]
    pub logins: Vec<String>,
    /// Do not post the keyword comment back to the work item
    #[arg(long)]
    pub no_comment: bool,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A delivery id (`X-GitHub-Delivery`, as `the-loop events` shows it) or a work
    /// item's ref (`github:owner/repo#N`)
    #[arg(value_name = "DELIVERY-ID | REF")]
    pub subject: String,

    /// For a work item: show only the last N deliveries (0 = all)
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Also open it in the browser (with `xdg-open`, else `open`)
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seconds to wait for each step's effect before calling the step failed
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub step_timeout: u64,

    /// Put the demo's config, state and tmux socket here (a new or empty directory)
    /// [default: a new directory under the system temp dir]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// At the end, stop the demo's tmux server and delete its directory: nothing is left
    #[arg(long)]
    pub clean: bool,

    /// The agent the sessions run: the built-in stand-in, or the real Claude Code CLI
    /// (`claude` on PATH) against a stand-in of Anthropic's API — no account, no cost
    #[arg(long, value_enum, default_value_t = DemoAgent::StandIn)]
    pub agent: DemoAgent,
}

/// The agents `the-loop demo` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoAgent {
    /// This binary's stand-in agent, which records what it is sent
    StandIn,
    /// Claude Code as installed (`claude` on PATH), its model a local stand-in
    Claude,
}

#[derive(Debug, Args)]
pub struct StandInHarnessArgs {
    /// The stand-in's own arguments (`--record FILE`, `--session-id ID`, `--resume ID`, …)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// Seconds to wait for the service to exit before giving up (exit 1)
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn config_flag_is_accepted_before_and_after_the_verb() {
        let before = Cli::try_parse_from(["the-loop", "--config", "a.yaml", "config", "check"]);
        let after = Cli::try_parse_from(["the-loop", "config", "check", "--config", "a.yaml"]);
        for cli in [before.unwrap(), after.unwrap()] {
            assert_eq!(cli.global.config, Some(PathBuf::from("a.yaml")));
        }
    }

    #[test]
    fn events_parses_a_work_item_ref_and_refuses_a_bad_one() {
        let cli =
            Cli::try_parse_from(["the-loop", "events", "--work-item", "github:o/r#3"]).unwrap();
        let Command::Events(args) = cli.command else { panic!("not events") };
        assert_eq!(args.work_item.unwrap().to_string(), "github:o/r#3");
        assert!(Cli::try_parse_from(["the-loop", "events", "--work-item", "o/r#3"]).is_err());
    }

    #[test]
    fn sim_takes_a_port_and_repeatable_seed_repositories() {
        let cli = Cli::try_parse_from([
            "the-loop",
            "sim",
            "--port",
            "8080",
            "--seed-repo",
            "octo/app",
            "--seed-repo",
            "octo/lib",
        ])
        .unwrap();
        let Command::Sim(args) = cli.command else { panic!("not sim") };
        assert_eq!(args.port, 8080);
        assert_eq!(args.seed_repos.len(), 2);
        assert!(Cli::try_parse_from(["the-loop", "sim", "--seed-repo", "not-a-repo"]).is_err());
    }

    #[test]
    fn demo_takes_its_flags_and_the_stand_in_verb_passes_its_arguments_through() {
        let cli =
            Cli::try_parse_from(["the-loop", "demo", "--step-timeout", "3", "--clean"]).unwrap();
        let Command::Demo(args) = cli.command else { panic!("not demo") };
        assert_eq!((args.step_timeout, args.clean, args.dir), (3, true, None));
        let cli = Cli::try_parse_from([
            "the-loop",
            "stand-in-harness",
            "--record",
            "r.jsonl",
            "--session-id",
            "abc",
        ])
        .unwrap();
        let Command::StandInHarness(args) = cli.command else { panic!("not stand-in-harness") };
        assert_eq!(args.args, ["--record", "r.jsonl", "--session-id", "abc"]);
    }

    #[test]
    fn verbose_and_quiet_conflict() {
        assert!(Cli::try_parse_from(["the-loop", "-v", "-q", "events"]).is_err());
    }

    #[test]
    fn start_takes_foreground_and_the_hidden_hold_flag() {
        let cli = Cli::try_parse_from(["the-loop", "start", "--foreground"]).unwrap();
        let Command::Start(args) = cli.command else { panic!("not start") };
        assert!(args.foreground && !args.hold_processing);
        let cli = Cli::try_parse_from(["the-loop", "start", "--foreground", "--hold-processing"])
            .unwrap();
        let Command::Start(args) = cli.command else { panic!("not start") };
        assert!(args.hold_processing);
    }

    #[test]
    fn graph_verbs_take_a_work_item_ref_and_complete_an_optional_node() {
        let cli = Cli::try_parse_from([
            "the-loop",
            "graph",
            "complete",
            "github:o/r#3",
            "--node",
            "brainstorming",
        ])
        .unwrap();
        let Command::Graph(GraphCommand::Complete(args)) = cli.command else {
            panic!("not complete")
        };
        assert_eq!(args.item.work_item.to_string(), "github:o/r#3");
        assert_eq!(args.node.as_deref(), Some("brainstorming"));
        let cli = Cli::try_parse_from(["the-loop", "graph", "check", "github:o/r#3"]).unwrap();
        assert!(matches!(cli.command, Command::Graph(GraphCommand::Check(_))));
        assert!(Cli::try_parse_from(["the-loop", "graph", "status", "issue-3"]).is_err());
        let cli = Cli::try_parse_from([
            "the-loop",
            "graph",
            "skip",
            "github:o/r#3",
            "--node",
            "spec-chain",
            "--node",
            "evidence",
            "--reason",
            "small fix",
        ])
        .unwrap();
        let Command::Graph(GraphCommand::Skip(args)) = cli.command else { panic!("not skip") };
        assert_eq!(args.nodes, ["spec-chain", "evidence"]);
        let force = ["the-loop", "graph", "force", "github:o/r#3", "--to", "design"];
        assert!(Cli::try_parse_from(force).is_err(), "a force needs its reason");
    }
}
