//! The agents' spool, `local/agent/`: what each session's hooks report, and the answers
//! written back to a hook that waits (docs/agent-states.md).
//!
//! `<session>.jsonl` holds one [`Report`] per line, appended by the `the-loop hook agent`
//! process the harness runs (`O_APPEND`: concurrent hooks of one session never tear a
//! line; a torn last line, from a hook killed mid-write, is left for the next read). The
//! daemon reads it from an offset, so each look costs what was appended since.
//! `<session>.<request>.answer.json` holds the decision a waiting `PermissionRequest`
//! hook prints; written atomically, taken (read and removed) by that hook.
//!
//! Names are tmux session names and hook-chosen ids: `[A-Za-z0-9_-]{1,128}`, so no name
//! can reach outside the directory.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use loop_core::agent_state::hook::Report;

use crate::error::StoreError;
use crate::json_file::write_atomically;

/// The spool directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpool {
    dir: PathBuf,
}

/// Why the spool could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error(transparent)]
    Name(#[from] BadName),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a session or request name (letters, digits, `_` and `-`, at most 128)")]
pub struct BadName(pub String);

/// What a read from an offset found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reports {
    pub reports: Vec<Report>,
    /// Where the next read starts: after the last whole line.
    pub next: u64,
}

impl AgentSpool {
    /// The spool in `dir` (`StateLayout::agent_dir`).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn reports_of(&self, session: &str) -> Result<PathBuf, BadName> {
        Ok(self.dir.join(format!("{}.jsonl", name(session)?)))
    }

    fn answer_of(&self, session: &str, request: &str) -> Result<PathBuf, BadName> {
        Ok(self.dir.join(format!("{}.{}.answer.json", name(session)?, name(request)?)))
    }

    /// Appends `report` to `session`'s spool as one line.
    pub fn append(&self, session: &str, report: &Report) -> Result<(), SpoolError> {
        let path = self.reports_of(session)?;
        let mut line = serde_json::to_vec(report)
            .map_err(|source| StoreError::Encode { path: path.clone(), source })?;
        line.push(b'\n');
        fs::create_dir_all(&self.dir).map_err(failed("create", &self.dir))?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(failed("open", &path))?;
        file.write_all(&line).map_err(failed("append to", &path))
    }

    /// The reports of `session` from byte `from` on; lines that do not parse are skipped.
    /// A spool shorter than `from` (removed and started again) is read from its start.
    pub fn read_from(&self, session: &str, from: u64) -> Result<Reports, SpoolError> {
        let path = self.reports_of(session)?;
        let mut file = match fs::File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Reports::default()),
            Err(err) => return Err(failed("read", &path)(err)),
        };
        let len = file.metadata().map_err(failed("read", &path))?.len();
        let from = if from > len { 0 } else { from };
        file.seek(SeekFrom::Start(from)).map_err(failed("read", &path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(failed("read", &path))?;
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
        let reports = bytes[..whole]
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect();
        Ok(Reports { reports, next: from + whole as u64 })
    }

    /// Files `decision` for `session`'s waiting hook `request`.
    pub fn answer(
        &self,
        session: &str,
        request: &str,
        decision: &serde_json::Value,
    ) -> Result<(), SpoolError> {
        let path = self.answer_of(session, request)?;
        fs::create_dir_all(&self.dir).map_err(failed("create", &self.dir))?;
        Ok(write_atomically(&path, decision.to_string().as_bytes(), 0o600)?)
    }

    /// Takes the decision filed for `request`, if any (it is removed).
    pub fn take_answer(
        &self,
        session: &str,
        request: &str,
    ) -> Result<Option<serde_json::Value>, SpoolError> {
        let path = self.answer_of(session, request)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(failed("read", &path)(err)),
        };
        let _ = fs::remove_file(&path);
        Ok(serde_json::from_slice(&bytes).ok())
    }

    /// Removes `session`'s spool and answers (its session ended).
    pub fn forget(&self, session: &str) -> Result<(), SpoolError> {
        let stem = name(session)?;
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(failed("list", &self.dir)(err)),
        };
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            let ours = file.strip_prefix(stem).is_some_and(|rest| {
                rest == ".jsonl" || rest.ends_with(".answer.json") && rest.starts_with('.')
            });
            if ours {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(())
    }
}

/// `text` when it is a safe file-name part.
fn name(text: &str) -> Result<&str, BadName> {
    let ok = (1..=128).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok { Ok(text) } else { Err(BadName(text.to_owned())) }
}

fn failed(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SpoolError {
    let path = path.to_owned();
    move |source| SpoolError::Store(StoreError::Io { action, path, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loop_core::agent_state::hook::Event;
    use serde_json::json;

    fn report(event: Event) -> Report {
        Report { event, ..Report::default() }
    }

    #[test]
    fn reports_are_read_from_where_the_last_read_ended() {
        let dir = tempfile::tempdir().unwrap();
        let spool = AgentSpool::new(dir.path().join("agent"));
        assert_eq!(spool.read_from("loop-a-1", 0).unwrap(), Reports::default(), "no spool yet");
        spool.append("loop-a-1", &report(Event::SessionStart)).unwrap();
        spool.append("loop-a-1", &report(Event::UserPromptSubmit)).unwrap();
        let first = spool.read_from("loop-a-1", 0).unwrap();
        assert_eq!(first.reports.len(), 2);
        // A hook killed mid-write leaves half a line: not read until it is whole.
        let path = dir.path().join("agent/loop-a-1.jsonl");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"event\":\"St").unwrap();
        let torn = spool.read_from("loop-a-1", first.next).unwrap();
        assert_eq!((torn.reports.len(), torn.next), (0, first.next));
        file.write_all(b"op\"}\n").unwrap();
        let rest = spool.read_from("loop-a-1", first.next).unwrap();
        assert_eq!(rest.reports, vec![report(Event::Stop)]);
        spool.forget("loop-a-1").unwrap();
        assert!(!path.exists());
        assert_eq!(spool.read_from("loop-a-1", rest.next).unwrap().reports.len(), 0);
        spool.append("loop-a-1", &report(Event::Stop)).unwrap();
        assert_eq!(
            spool.read_from("loop-a-1", rest.next).unwrap().reports.len(),
            1,
            "started again"
        );
    }

    #[test]
    fn an_answer_is_taken_once_and_names_cannot_leave_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let spool = AgentSpool::new(dir.path().to_owned());
        assert_eq!(spool.take_answer("loop-a-1", "r1").unwrap(), None);
        spool.answer("loop-a-1", "r1", &json!({"allow": true})).unwrap();
        assert_eq!(spool.take_answer("loop-a-1", "r1").unwrap(), Some(json!({"allow": true})));
        assert_eq!(spool.take_answer("loop-a-1", "r1").unwrap(), None, "taken");
        for bad in ["../x", "", "a.b", "a/b", &"x".repeat(129)] {
            assert!(spool.append(bad, &report(Event::Stop)).is_err(), "{bad}");
            assert!(spool.answer("loop-a-1", bad, &json!(1)).is_err(), "{bad}");
        }
    }
}
