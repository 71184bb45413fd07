//! Reading the event log back: every line of the rotated files and the live one, oldest
//! first, and following appends.
//!
//! The reader never fails on content: a missing file is empty, and a blank, corrupt or
//! partial line (a writer mid-append) is skipped.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::rotated_path;
use crate::error::StoreError;

/// The fields every line carries; everything else is the event's detail.
pub const ENVELOPE: [&str; 5] = ["ts", "source", "event", "level", "pid"];

/// One line of the log, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord(pub Map<String, Value>);

impl EventRecord {
    fn text(&self, key: &str) -> &str {
        self.0.get(key).and_then(Value::as_str).unwrap_or("")
    }

    pub fn ts(&self) -> &str {
        self.text("ts")
    }

    pub fn source(&self) -> &str {
        self.text("source")
    }

    pub fn event(&self) -> &str {
        self.text("event")
    }

    pub fn level(&self) -> &str {
        self.text("level")
    }

    /// The work items the event is about: `work_item` and every entry of `work_items`.
    pub fn work_items(&self) -> impl Iterator<Item = &str> {
        let one = self.0.get("work_item").and_then(Value::as_str);
        let many = self.0.get("work_items").and_then(Value::as_array).into_iter().flatten();
        one.into_iter().chain(many.filter_map(Value::as_str))
    }

    /// The non-envelope fields, in the order they were written.
    pub fn details(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0
            .iter()
            .filter(|(key, _)| !ENVELOPE.contains(&key.as_str()))
            .map(|(k, v)| (k.as_str(), v))
    }
}

/// Parses one line; `None` for a blank, corrupt or non-object line.
fn parse_line(line: &[u8]) -> Option<EventRecord> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => Some(EventRecord(map)),
        _ => None,
    }
}

/// Every record in the rotated files (oldest first) and then the live file.
pub fn read_all(path: &Path) -> Result<Vec<EventRecord>, StoreError> {
    let mut records = read_rotated(path)?;
    if let Some(handle) = open(path)? {
        read_lines(path, handle, &mut records)?;
    }
    Ok(records)
}

/// Every record in the rotated files, oldest first.
fn read_rotated(path: &Path) -> Result<Vec<EventRecord>, StoreError> {
    let mut rotated: Vec<PathBuf> =
        (1..).map(|n| rotated_path(path, n)).take_while(|file| file.exists()).collect();
    rotated.reverse();
    let mut records = Vec::new();
    for file in &rotated {
        if let Some(handle) = open(file)? {
            read_lines(file, handle, &mut records)?;
        }
    }
    Ok(records)
}

fn read_lines(
    path: &Path,
    file: impl Read,
    records: &mut Vec<EventRecord>,
) -> Result<(), StoreError> {
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(StoreError::io("read", path))?;
        records.extend(parse_line(&line));
    }
    Ok(())
}

fn open(path: &Path) -> Result<Option<File>, StoreError> {
    match File::open(path) {
        Ok(file) => Ok(Some(file)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(StoreError::io("open", path)(err)),
    }
}

/// Follows the live file from a position, across rotations: when the live file is
/// replaced, the rest of the old one (now `.1`, or `.n` after several rotations) and the
/// newer rotated files are read before the new live file from its start. Lines that were
/// rotated out of the kept files between two polls are lost to the tail.
#[derive(Debug)]
pub struct EventTail {
    path: PathBuf,
    /// The inode being followed and how far into it complete lines were read.
    position: Option<(u64, u64)>,
}

impl EventTail {
    /// Starts after the last complete line of the live file: only lines appended from
    /// now on (and one being appended right now) are returned by [`EventTail::poll`].
    pub fn from_end(path: &Path) -> Result<Self, StoreError> {
        let Some(mut file) = open(path)? else {
            return Ok(Self { path: path.to_owned(), position: None });
        };
        let meta = file.metadata().map_err(StoreError::io("stat", path))?;
        let end = complete_end(&mut file, meta.len()).map_err(StoreError::io("read", path))?;
        Ok(Self { path: path.to_owned(), position: Some((meta.ino(), end)) })
    }

    /// Everything before the tail's starting point: the rotated files and the live file
    /// up to where the tail begins, so a backlog followed by [`EventTail::poll`] neither
    /// misses nor repeats a line.
    pub fn backlog(&self) -> Result<Vec<EventRecord>, StoreError> {
        let mut records = read_rotated(&self.path)?;
        let Some((inode, end)) = self.position else { return Ok(records) };
        if let Some(file) = open(&self.path)?
            && file.metadata().is_ok_and(|meta| meta.ino() == inode)
        {
            read_lines(&self.path, file.take(end), &mut records)?;
        }
        Ok(records)
    }

    /// The complete lines appended since the last call.
    pub fn poll(&mut self) -> Result<Vec<EventRecord>, StoreError> {
        let mut records = Vec::new();
        let live = match std::fs::metadata(&self.path) {
            Ok(meta) => Some(meta.ino()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(StoreError::io("stat", &self.path)(err)),
        };
        if let Some((inode, offset)) = self.position
            && Some(inode) != live
        {
            // Rotated away: finish the old file where rotation put it (`.1`, or further
            // if several rotations happened since), then every newer rotated file.
            let moved_to = (1..)
                .map(|n| (n, rotated_path(&self.path, n)))
                .map_while(|(n, file)| std::fs::metadata(&file).ok().map(|meta| (n, meta.ino())))
                .find(|(_, found)| *found == inode);
            if let Some((n, _)) = moved_to {
                read_from(&rotated_path(&self.path, n), offset, &mut records)?;
                for newer in (1..n).rev() {
                    read_from(&rotated_path(&self.path, newer), 0, &mut records)?;
                }
            }
            self.position = None;
        }
        if let Some(inode) = live {
            let offset = self.position.map_or(0, |(_, offset)| offset);
            let end = read_from(&self.path, offset, &mut records)?;
            self.position = Some((inode, end));
        }
        Ok(records)
    }
}

/// The offset just after the last newline in the first `len` bytes of `file` (lines are
/// far shorter than the window searched; without a newline in it, `len`).
fn complete_end(file: &mut File, len: u64) -> io::Result<u64> {
    const WINDOW: u64 = 64 * 1024;
    let start = len.saturating_sub(WINDOW);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.take(len - start).read_to_end(&mut tail)?;
    Ok(match tail.iter().rposition(|&b| b == b'\n') {
        Some(last) => start + last as u64 + 1,
        None if start == 0 => 0,
        None => len,
    })
}

/// Reads complete lines from `offset`; returns the offset after the last complete line.
/// A file that shrank below `offset` (truncated by hand) is read from its start.
fn read_from(path: &Path, offset: u64, records: &mut Vec<EventRecord>) -> Result<u64, StoreError> {
    let Some(mut file) = open(path)? else { return Ok(0) };
    let len = file.metadata().map_err(StoreError::io("stat", path))?.len();
    let start = if len < offset { 0 } else { offset };
    file.seek(SeekFrom::Start(start)).map_err(StoreError::io("seek", path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(StoreError::io("read", path))?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |last| last + 1);
    for line in bytes[..complete].split(|&b| b == b'\n') {
        records.extend(parse_line(line));
    }
    Ok(start + complete as u64)
}
