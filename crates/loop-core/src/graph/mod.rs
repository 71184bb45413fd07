//! The process graph (Tier 0, docs/process-graph.md): the loops a work item walks, the
//! state that says where it is, and the pure runtime that moves it.
//!
//! Layout: [`model`] (a compiled loop), [`compile`] (YAML → loop, every compile-time
//! failure at once), [`shipped`] (the four embedded loops and which one an item walks),
//! [`state`] (the work item's checked-in state file), [`hooks`] (what each hook says or
//! asks for at a boundary), [`runtime`] (start, advance, complete), [`context`] (the
//! `$graph_context` block).
//! Like the rest of the crate, nothing here does IO: the daemon reads the state file and
//! the artifacts, calls the runtime, and carries out the effects it returns.

pub mod compile;
pub mod context;
pub mod hooks;
pub mod model;
pub mod runtime;
pub mod shipped;
pub mod state;

pub use self::compile::{CompileError, compile};
pub use self::model::{Actor, Hook, Loop, Node, Support};
pub use self::shipped::LoopName;
