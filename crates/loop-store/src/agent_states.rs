//! What the live sessions' agents were last seen doing: `local/agent/states.json`,
//! replaced whole by the daemon's agent-state watcher each time a state changes and read
//! by `the-loop status` (which talks to no daemon). A snapshot, not a record: the daemon
//! rebuilds the states from the hooks' spool and the panes on start, and a stale file
//! (the daemon stopped) is said to be stale by its reader.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode, JsonFile};

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStates {
    pub written_at: Option<Timestamp>,
    /// One per watched session, by work item then tmux session.
    pub agents: Vec<AgentRow>,
}

/// One agent as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRow {
    pub work_item: String,
    pub tmux_target: String,
    /// The state's name (`working`, `needs-permission`, …).
    pub state: String,
    pub since: Timestamp,
    /// The state in a sentence (what it waits on, and how to answer).
    pub detail: String,
    /// Whether an operator should look.
    pub needs_attention: bool,
}

impl StateStore {
    fn agent_states_path(&self) -> std::path::PathBuf {
        self.layout.agent_dir().join("states.json")
    }

    fn agent_states_lock(&self) -> std::path::PathBuf {
        self.layout.locks_dir().join("agent-states.lock")
    }

    /// Replaces the agents' states atomically.
    pub fn write_agent_states(&self, states: &AgentStates) -> Result<(), StoreError> {
        let _guard = crate::lock::LockGuard::exclusive(&self.agent_states_lock())?;
        json_file::write_json(&self.agent_states_path(), states, FileMode::Private).map(drop)
    }

    /// The agents' states as last written; empty when none were.
    pub fn read_agent_states(&self) -> Result<AgentStates, StoreError> {
        let (path, lock) = (self.agent_states_path(), self.agent_states_lock());
        let loaded = JsonFile { path: &path, lock: &lock, events: &self.events }
            .load(json_file::parse_json)?;
        Ok(loaded.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventLog, StateLayout};

    #[test]
    fn the_states_written_are_the_states_read_and_none_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(StateLayout::new(dir.path()), EventLog::disabled());
        assert_eq!(store.read_agent_states().unwrap(), AgentStates::default());
        let states = AgentStates {
            written_at: Some(Timestamp::UNIX_EPOCH),
            agents: vec![AgentRow {
                work_item: "github:octo/app#1".into(),
                tmux_target: "loop-github-octo-app-1".into(),
                state: "needs-permission".into(),
                since: Timestamp::UNIX_EPOCH,
                detail: "at a permission dialog".into(),
                needs_attention: true,
            }],
        };
        store.write_agent_states(&states).unwrap();
        assert_eq!(store.read_agent_states().unwrap(), states);
    }
}
