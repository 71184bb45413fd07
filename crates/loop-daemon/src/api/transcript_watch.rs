//! The stream's `transcript` frames (reference §1.5): a subscriber that names work items
//! in `?transcript=` is told when the Claude Code transcript of a session serving one of
//! them grows — `event: transcript`, `data: {ref, totalLines}`, no content (the client
//! reads `GET /api/v1/sessions/transcript` for that). The first sight of a file is its
//! baseline, not a frame; a file replaced or cut short is counted again and is a frame.
//!
//! Each subscriber looks at its own files every [`TICK`]: one `stat` per file, and a
//! read of only what was appended since, counted as the route counts (non-blank lines).
//! Which file a ref's transcript is — its session, its conversation id, the path safety
//! of the route ([`crate::transcript::transcript_file`]) — is worked out again every
//! [`RESOLVE_EVERY`] looks, so a session started, respawned or gone since is followed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Bytes;
use loop_core::WorkItemRef;
use loop_store::StateStore;
use serde_json::json;

use crate::transcript::{Appended, ReadSoFar, TranscriptFile, transcript_file};

/// How often a subscriber looks at the transcripts it watches.
pub const TICK: Duration = Duration::from_millis(500);

/// Looks between two resolutions of which file a ref's transcript is.
const RESOLVE_EVERY: u32 = 10;

/// The transcripts one subscriber watches.
#[derive(Debug)]
pub(super) struct Transcripts {
    store: StateStore,
    projects: PathBuf,
    watched: Vec<Watched>,
    looks: u32,
}

#[derive(Debug)]
struct Watched {
    item: WorkItemRef,
    /// `None`: no Claude Code session serves it here (yet).
    file: Option<TranscriptFile>,
    seen: Option<Seen>,
}

/// A file as last counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    read: ReadSoFar,
    /// Non-blank lines ended so far.
    lines: u64,
    /// Whether the line not yet ended (the bytes after the last newline) is not blank.
    partial: bool,
}

impl Seen {
    /// What the route would answer as `totalLines`.
    fn total(&self) -> u64 {
        self.lines + u64::from(self.partial)
    }

    /// Counts `bytes`, the next bytes of the file.
    fn count(&mut self, bytes: &[u8]) {
        let blank = |line: &[u8]| line.iter().all(u8::is_ascii_whitespace);
        let mut pieces = bytes.split(|&b| b == b'\n').peekable();
        let mut partial = self.partial;
        while let Some(piece) = pieces.next() {
            partial |= !blank(piece);
            if pieces.peek().is_some() {
                self.lines += u64::from(partial);
                partial = false;
            }
        }
        self.partial = partial;
    }
}

impl Transcripts {
    /// `None` when the subscriber watches nothing.
    pub(super) fn new(store: StateStore, projects: PathBuf, refs: &[String]) -> Option<Self> {
        let watched: Vec<Watched> = refs
            .iter()
            .filter_map(|r| r.parse().ok())
            .map(|item| Watched { item, file: None, seen: None })
            .collect();
        (!watched.is_empty()).then_some(Self { store, projects, watched, looks: 0 })
    }

    /// The `transcript` frames of the files that changed since the last look. Blocking:
    /// file IO.
    pub(super) fn look(&mut self) -> Vec<Bytes> {
        let resolve = self.looks.is_multiple_of(RESOLVE_EVERY);
        self.looks = self.looks.wrapping_add(1);
        let mut frames = Vec::new();
        for watched in &mut self.watched {
            if resolve {
                watched.file =
                    self.store.load_local_record(&watched.item).ok().flatten().and_then(|record| {
                        transcript_file(&self.projects, &record, &watched.item)
                            .ok()
                            .map(|(_, file)| file)
                    });
            }
            let Some(path) = watched.file.as_ref().and_then(TranscriptFile::resolve) else {
                continue;
            };
            let Some(now) = count(&path, watched.seen.as_ref()) else { continue };
            let grew = watched.seen.as_ref().is_some_and(|seen| *seen != now);
            if grew {
                let data = json!({"ref": watched.item.to_string(), "totalLines": now.total()});
                frames.push(Bytes::from(format!("event: transcript\ndata: {data}\n\n")));
            }
            watched.seen = Some(now);
        }
        frames
    }
}

/// The file at `path` counted, from where `before` left off when it is the same file
/// grown, else from its start; `before` itself when nothing changed, `None` when it
/// cannot be read.
fn count(path: &Path, before: Option<&Seen>) -> Option<Seen> {
    let mut seen = before.cloned().unwrap_or_default();
    match seen.read.read_on(path)? {
        Appended::Same => {}
        Appended::Grown(bytes) => seen.count(&bytes),
        Appended::Anew(bytes) => {
            seen = Seen { read: seen.read, ..Seen::default() };
            seen.count(&bytes);
        }
    }
    Some(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_is_counted_as_the_route_counts_reading_only_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conv.jsonl");
        std::fs::write(&path, "{\"a\":1}\n\n{\"b\":2}\n{\"c\"").unwrap();
        let first = count(&path, None).unwrap();
        assert_eq!((first.lines, first.partial, first.total()), (2, true, 3));
        assert_eq!(count(&path, Some(&first)), Some(first.clone()), "unchanged");
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, b":3}\n   \n{\"d\":4}\n").unwrap();
        let grown = count(&path, Some(&first)).unwrap();
        assert_eq!((grown.lines, grown.partial, grown.total()), (4, false, 4));
        // Replaced by a shorter file: counted from its start.
        std::fs::write(&path, "{\"x\":1}\n").unwrap();
        assert_eq!(count(&path, Some(&grown)).unwrap().total(), 1);
    }
}
