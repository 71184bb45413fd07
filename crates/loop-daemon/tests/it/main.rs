//! Integration tests of loop-daemon: one test binary, a module per area.
//!
//! Every test runs the real receiver on `127.0.0.1:0` with its own state root and config
//! file in a temp directory, and talks to it over real HTTP.

mod api;
mod api_graph;
mod backlog;
mod common;
mod crash_windows;
mod dashboard;
mod dispatch;
mod dispatch_closure;
mod dispatch_closure_log;
mod dispatch_control;
mod dispatch_crash;
mod dispatch_edges;
mod dispatch_existence;
mod dispatch_graph;
mod dispatch_lab;
mod dispatch_poll;
mod dispatch_reactions;
mod dispatch_refusals;
mod dispatch_reload;
mod dispatch_spawning;
mod history;
mod mcp;
mod metrics;
mod openapi;
mod poll;
mod poll_closure;
mod poll_e2e;
mod poll_edges;
mod poll_kill;
mod poll_spawn;
mod poll_support;
mod poll_threads;
mod receiver;
mod replay;
mod simulator;
mod stream;
