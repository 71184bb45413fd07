//! A work item's spec folder in its checkout, `<checkout>/<specDir>/<id>/`: the checked-in
//! state file `work-item-state.json` (loop-core's [`WorkItemState`]) and the artifacts its
//! gates read. Unlike everything else in this crate it lives outside `state.root`, in
//! the work item's repository — which is why it holds no machine handle.
//!
//! The state file is written atomically (0644: it is meant to be committed) under an
//! exclusive `flock` on the sibling `work-item-state.lock`, by the daemon and by
//! `the-loop graph complete` alike. A file that does not parse is moved aside and reads as
//! absent, like every state file.

use std::fs;
use std::path::{Component, Path, PathBuf};

use loop_core::graph::hooks::GateFacts;
use loop_core::graph::state::{LOCK_FILE, STATE_FILE, WorkItemState};

use crate::error::StoreError;
use crate::event_log::EventLog;
use crate::json_file::{FileMode, JsonFile, Written, parse_json, write_json};
use crate::lock::LockGuard;

/// Why a spec folder cannot be placed in a checkout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("routing.graph.specDir `{}` must be a relative path inside the checkout", spec_dir.display())]
pub struct SpecDirOutside {
    pub spec_dir: PathBuf,
}

/// One work item's (or one inner loop's) spec folder.
#[derive(Debug, Clone)]
pub struct SpecFolder {
    dir: PathBuf,
}

impl SpecFolder {
    /// `<checkout>/<spec_dir>/<id>`; `spec_dir` must be relative and stay inside.
    pub fn new(checkout: &Path, spec_dir: &Path, id: &str) -> Result<Self, SpecDirOutside> {
        let inside = |path: &Path| path.components().all(|c| matches!(c, Component::Normal(_)));
        if !inside(spec_dir) || !inside(Path::new(id)) || spec_dir.as_os_str().is_empty() {
            return Err(SpecDirOutside { spec_dir: spec_dir.to_owned() });
        }
        Ok(Self { dir: checkout.join(spec_dir).join(id) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    /// The state file, `None` when absent (or unparsable: moved aside).
    pub fn load(&self, events: &EventLog) -> Result<Option<WorkItemState>, StoreError> {
        let (path, lock) = (self.state_path(), self.lock_path());
        if !path.exists() {
            return Ok(None);
        }
        JsonFile { path: &path, lock: &lock, events }.load(parse_json)
    }

    /// Read-modify-write under the lock: `change` gets the file as it is (`None` when
    /// absent) and returns what to save (`None` saves nothing) with its answer.
    pub fn update<R>(
        &self,
        events: &EventLog,
        change: impl FnOnce(Option<WorkItemState>) -> (Option<WorkItemState>, R),
    ) -> Result<R, StoreError> {
        let (path, lock) = (self.state_path(), self.lock_path());
        let _guard = LockGuard::exclusive(&lock)?;
        let current = JsonFile { path: &path, lock: &lock, events }.load_locked(parse_json)?;
        let (next, answer) = change(current);
        if let Some(next) = next {
            let _: Written = write_json(&path, &next, FileMode::Shared)?;
        }
        Ok(answer)
    }
}

impl GateFacts for SpecFolder {
    /// A file directly in the folder; names with a separator are never read.
    fn artifact(&self, name: &str) -> Option<String> {
        if name.contains('/') || name == ".." || name == "." {
            return None;
        }
        fs::read_to_string(self.dir.join(name)).ok()
    }

    /// `pr-loops/pr-<n>/` and `pr-loops/<owner>__<repo>/pr-<n>/`, each with the node its
    /// state file is at (`?` when unreadable: never counted as complete).
    fn inner_loops(&self) -> Vec<(String, String)> {
        let root = self.dir.join("pr-loops");
        let mut found = Vec::new();
        let mut visit = |dir: &Path, rel: String| {
            let Ok(text) = fs::read(dir.join(STATE_FILE)) else { return };
            let at = parse_json::<WorkItemState>(&text)
                .map_or_else(|_| "?".to_owned(), |s| s.current_node);
            found.push((rel, at));
        };
        for entry in dirs(&root) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("pr-") {
                visit(&entry.path(), format!("pr-loops/{name}"));
            } else {
                for inner in dirs(&entry.path()) {
                    let inner_name = inner.file_name().to_string_lossy().into_owned();
                    visit(&inner.path(), format!("pr-loops/{name}/{inner_name}"));
                }
            }
        }
        found.sort();
        found
    }
}

fn dirs(path: &Path) -> Vec<fs::DirEntry> {
    let mut out: Vec<fs::DirEntry> = fs::read_dir(path)
        .map(|entries| entries.flatten().filter(|e| e.path().is_dir()).collect())
        .unwrap_or_default();
    out.sort_by_key(fs::DirEntry::file_name);
    out
}
