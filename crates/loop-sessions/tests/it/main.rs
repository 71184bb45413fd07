//! Integration tests of loop-sessions against real tmux, real git and real files.
//!
//! Every test gets its own temp dir, tmux socket (`-S <dir>/tmux.sock`, killed on drop)
//! and HOME-like directories; nothing touches the developer's own tmux server. Tests
//! wait for observable state with bounded polls, never with sleeps as synchronisation.

mod plugin;
mod registry;
mod session;
mod support;
mod tmux;
mod trust;
mod workspace;
