//! Where a session's Claude Code transcript is: `<projects root>/<escaped cwd>/<session
//! id>.jsonl`, read only when it resolves to a regular file inside the projects root and
//! the id is made of letters, digits, `-` and `_` — a record cannot make the service
//! read anything else. The transcript route, the stream's `transcript` frames and the
//! usage book all find the file here.

use std::path::{Path, PathBuf};

use loop_core::WorkItemRef;
use loop_core::record::{Endpoint, LocalRecord};
use loop_sessions::harness::claude_project_dir_name;

/// Why a session has no transcript to read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NoTranscript {
    #[error("{0} has no session on this machine")]
    NoSession(WorkItemRef),
    #[error("{item}'s session runs `{harness}`: only Claude Code's transcripts can be read")]
    OtherHarness { item: WorkItemRef, harness: String },
    #[error("{0}'s session has not reported its conversation id yet")]
    NoConversation(WorkItemRef),
    #[error("`{0}` is not a conversation id a transcript is named by")]
    UnsafeId(String),
}

/// The session serving `item` in `record` (the pull request's own, else the item's) and
/// where its Claude Code transcript would be. Not read: see [`TranscriptFile::resolve`].
pub fn transcript_file<'r>(
    projects: &Path,
    record: &'r LocalRecord,
    item: &WorkItemRef,
) -> Result<(&'r Endpoint, TranscriptFile), NoTranscript> {
    let endpoint = record
        .endpoints
        .get(item)
        .or(record.own_endpoint())
        .ok_or_else(|| NoTranscript::NoSession(item.clone()))?;
    Ok((endpoint, endpoint_transcript(projects, endpoint, item)?))
}

/// Where `endpoint`'s (serving `item`) Claude Code transcript would be.
pub fn endpoint_transcript(
    projects: &Path,
    endpoint: &Endpoint,
    item: &WorkItemRef,
) -> Result<TranscriptFile, NoTranscript> {
    if endpoint.harness != "claude" {
        return Err(NoTranscript::OtherHarness {
            item: item.clone(),
            harness: endpoint.harness.clone(),
        });
    }
    let id = endpoint
        .harness_session_id
        .as_deref()
        .ok_or_else(|| NoTranscript::NoConversation(item.clone()))?;
    let safe_id =
        !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !safe_id {
        return Err(NoTranscript::UnsafeId(id.to_owned()));
    }
    let path = projects.join(claude_project_dir_name(&endpoint.cwd)).join(format!("{id}.jsonl"));
    Ok(TranscriptFile { projects: projects.to_owned(), path })
}

/// A transcript's path, not yet proven to be inside the projects root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptFile {
    projects: PathBuf,
    path: PathBuf,
}

impl TranscriptFile {
    /// The file, resolved, if it is a regular file inside the projects root (a link out
    /// of it, or a directory, is not). Blocking: file IO.
    pub fn resolve(&self) -> Option<PathBuf> {
        let root = self.projects.canonicalize().ok()?;
        let resolved = self.path.canonicalize().ok()?;
        let regular = std::fs::metadata(&resolved).is_ok_and(|m| m.is_file());
        (resolved.starts_with(&root) && regular).then_some(resolved)
    }

    /// Where it would be, as named (for a message).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The projects root it must be inside.
    pub fn projects(&self) -> &Path {
        &self.projects
    }
}

/// How far a reader has read a transcript: which file (a file replaced under the same
/// name is another) and up to which byte. Both the stream's line counts and the usage
/// book read on from here, so a long transcript is read once, then only what is appended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSoFar {
    path: PathBuf,
    /// `st_dev`, `st_ino`.
    id: (u64, u64),
    offset: u64,
}

/// What a look at a transcript found since the last one.
#[derive(Debug, PartialEq, Eq)]
pub enum Appended {
    /// Nothing new.
    Same,
    /// These bytes were appended.
    Grown(Vec<u8>),
    /// Another file, or the same cut short: all of it, to be counted from its start.
    Anew(Vec<u8>),
}

impl ReadSoFar {
    /// Reads the file at `path` (resolved, see [`TranscriptFile::resolve`]) on from where
    /// the last look left off; `None`, and nothing moved, when it cannot be read.
    /// Blocking: file IO.
    pub fn read_on(&mut self, path: &Path) -> Option<Appended> {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let file = std::fs::File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        let (id, len) = ((meta.dev(), meta.ino()), meta.len());
        let same = self.path == path && self.id == id && self.offset <= len;
        let from = if same { self.offset } else { 0 };
        if same && from == len {
            return Some(Appended::Same);
        }
        let mut bytes = vec![0; usize::try_from(len - from).ok()?];
        file.read_exact_at(&mut bytes, from).ok()?;
        *self = Self { path: path.to_owned(), id, offset: len };
        Some(if same { Appended::Grown(bytes) } else { Appended::Anew(bytes) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_is_read_on_from_the_last_look_and_anew_when_replaced_or_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conv.jsonl");
        std::fs::write(&path, "one\n").unwrap();
        let mut so_far = ReadSoFar::default();
        assert_eq!(so_far.read_on(&path), Some(Appended::Anew(b"one\n".to_vec())));
        assert_eq!(so_far.read_on(&path), Some(Appended::Same));
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, b"two\n").unwrap();
        assert_eq!(so_far.read_on(&path), Some(Appended::Grown(b"two\n".to_vec())));
        std::fs::write(&path, "x\n").unwrap();
        assert_eq!(so_far.read_on(&path), Some(Appended::Anew(b"x\n".to_vec())));
        let before = so_far.clone();
        assert_eq!(so_far.read_on(&dir.path().join("gone.jsonl")), None);
        assert_eq!(so_far, before, "an unreadable file moves nothing");
    }
}
