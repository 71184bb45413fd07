//! Agent sessions: the tmux runner, harness adapters, workspaces and harness trust.
//!
//! Everything here acts on the machine (tmux, git, files under `$HOME`) and is
//! synchronous: the daemon calls it from blocking threads. It decides nothing about *when*
//! to spawn or deliver — that is loop-core's and the dispatcher's — and it never writes a
//! machine handle anywhere but the local session record.
//!
//! Layout:
//! - [`tmux`]: spawn, liveness, paste delivery (control-mode client), settle, attach.
//! - [`cleanup`]: the local teardown of a work item (sessions, checkouts, record).
//! - [`harness`]: Claude Code, Cursor agent and command-template adapters.
//! - [`landing`]: a paste that lands — into a drawn input box, confirmed taken.
//! - [`plugin`]: the-loop's Claude Code plugin, written under the state root and registered.
//! - [`registry`]: the rules of the local session record (statuses, PR endpoints, routing).
//! - [`shell`]: commands as a person pastes them into a shell (quoting).
//! - [`session`]: first spawn, respawn with resume fallback, delivery, close retention.
//! - [`trust`]: Claude Code trust pre-seeding in the user's harness config.
//! - [`workspace`]: per-endpoint git checkouts (worktree or clone) and their removal.

pub mod cleanup;
pub mod harness;
pub mod landing;
pub mod plugin;
pub mod registry;
pub mod session;
pub mod shell;
pub mod tmux;
pub mod trust;
pub mod workspace;

pub use harness::{
    ClaudeCode, CommandHarness, ConversationId, CursorAgent, Harness, HarnessError, Launch,
    LaunchChoice,
};
pub use session::{
    CloseSettings, Closed, Delivered, RespawnSettings, Respawned, SessionError, Settled,
};
pub use tmux::{
    DeliveryError, Liveness, SessionSite, Termination, Tmux, TmuxError, TmuxSettings, TmuxSocket,
};
