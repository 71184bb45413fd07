//! The process graph (Tier 0, docs/process-graph.md): the loops a work item walks, the
//! state that says where it is, and the pure runtime that moves it.
//!
//! Layout: [`model`] (a compiled loop), [`compile`] (YAML → loop, every compile-time
//! failure at once), [`shipped`] (the four embedded loops and which one an item walks).
//! Like the rest of the crate, nothing here does IO: the daemon reads the state file and
//! the artifacts, calls the runtime, and carries out the effects it returns.

pub mod compile;
pub mod model;
pub mod shipped;

pub use self::compile::{CompileError, compile};
pub use self::model::{Actor, Hook, Loop, Node, Support};
pub use self::shipped::LoopName;
