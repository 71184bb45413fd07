//! Agent sessions: the tmux runner, harness adapters, workspaces and harness trust.
//!
//! Filled by the sessions issue.
