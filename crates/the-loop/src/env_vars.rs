//! Every environment variable the-loop reads or sets, declared once.

/// Names the CLI config file; also exported to child processes with the resolved
/// absolute path, so a spawned service reads the same file as the command that spawned it
/// (and the service exports it into every session's pane).
pub const CLI_CONFIG: &str = loop_daemon::config_source::CONFIG_ENV;

/// The work item a session serves, set in its pane: `the-loop ask`'s default.
pub const WORK_ITEM: &str = loop_sessions::tmux::WORK_ITEM_ENV;

/// The tmux session a pane belongs to, set in its pane: the agent hook's spool name.
pub const SESSION: &str = loop_sessions::tmux::SESSION_ENV;

/// The user's home directory, for `~/.the-loop/cli-config.yaml`.
pub const HOME: &str = "HOME";

/// Where Claude Code keeps its config when not under `$HOME` (for trust pre-seeding).
pub const CLAUDE_CONFIG_DIR: &str = "CLAUDE_CONFIG_DIR";

/// The program search path, to tell whether `the-loop` is callable by name (the demo's
/// closing hints).
pub const PATH: &str = "PATH";
