//! Agent sessions: the tmux runner, harness adapters, workspaces and harness trust.
//!
//! Everything here acts on the machine (tmux, git, files under `$HOME`) and is
//! synchronous: the daemon calls it from blocking threads. It decides nothing about *when*
//! to spawn or deliver — that is loop-core's and the dispatcher's — and it never writes a
//! machine handle anywhere but the local session record.
//!
//! Layout:
//! - [`tmux`]: spawn, liveness, paste delivery (control-mode client), settle, attach.

pub mod tmux;

pub use tmux::{
    DeliveryError, Liveness, SpawnRequest, Termination, Tmux, TmuxError, TmuxSettings, TmuxSocket,
};
