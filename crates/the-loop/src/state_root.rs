//! The state root as this invocation's config names it.
//!
//! Every verb asks here, and the service asks [`StateLayout::for_config`] with the same
//! working directory, so every verb and daemon agrees on every path (reference trap 4).
//! Explicit paths are used verbatim; relative ones are relative to the working
//! directory; `~` is not expanded in `state.root` (reference trap 6).

use loop_core::config::Config;
use loop_store::StateLayout;

/// Every path under the configured state root.
pub fn layout(config: &Config) -> StateLayout {
    StateLayout::for_config(config, std::env::current_dir().ok())
}
