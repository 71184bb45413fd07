//! The inbox journal, `local/inbox/`: webhook deliveries acknowledged but not yet
//! processed (SPEC §1, §4).
//!
//! The receiver answers 202 only once a delivery is durable here, and processes it
//! afterwards; a delivery still pending when the process dies is replayed at the next
//! start. The journal is a sequence of append-only *segment* files
//! (`journal-<first seq>.log`), each a run of entries:
//!
//! ```text
//! {"op":"received","seq":7,"event":"issue_comment","delivery":"…","verified":true,"at":"…","len":1234,"crc32":3735928559}\n<1234 body bytes>\n
//! {"op":"processed","seq":7}\n
//! ```
//!
//! The body's checksum guards the journal's own integrity (a torn or damaged write), not
//! its authenticity (the signature was checked before it was journalled), so it is a
//! CRC-32; journals written before it carry a SHA-256 (`sha256`), still read.
//!
//! Appends are buffered. [`Inbox::write`] hands them to the kernel (`write(2)`): from then
//! on a crash of the process — `kill -9` included — loses none of them, and that is when
//! the receiver acknowledges. Surviving an OS crash or a power loss needs an `fdatasync`
//! too: [`Inbox::live_segment`] gives a [`SegmentSync`] handle on the live segment and
//! [`Inbox::take_retired`] the segments retired since (and the new segment's directory
//! entry), so another thread can sync behind the writer (group commit that never delays
//! an answer); [`Inbox::sync`] writes and syncs in one call (shutdown, tests). Sequence numbers are the journal's own, so deliveries without an
//! `X-GitHub-Delivery` header never share a key.
//!
//! Reading tolerates a torn tail (a crash mid-append, or a power loss before the sync): a segment is read up
//! to the first entry that is incomplete or whose body does not match its checksum; the
//! rest is reported as ignored, never a crash. A receipt's `processed` mark is always
//! written to the same or a later segment, so segments are deleted oldest first, and only
//! once every receipt in them is processed: a surviving mark never refers to a deleted
//! receipt's successor.
//!
//! This module stores and replays bytes; it does not verify signatures or parse bodies.
//! Its calls block (file IO, `fdatasync`): the receiver drives it from one writer thread.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::StoreError;

/// A live segment that grows past this is replaced by a new one, so processed deliveries'
/// files can be deleted while the receiver keeps running.
const SEGMENT_RETIRE_BYTES: u64 = 4 * 1024 * 1024;

/// How much the writer buffers before it hands bytes to the kernel on its own.
const WRITE_BUFFER: usize = 256 * 1024;

/// Sequence numbers and segment ids stay below this (no journal sees 2^63 deliveries), so
/// `seq + 1` never overflows; a header or a segment name claiming more is damaged.
const SEQ_LIMIT: u64 = 1 << 63;

/// One verified delivery as the receiver got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// `X-GitHub-Event` (`unknown` when absent).
    pub event: String,
    /// `X-GitHub-Delivery`, when the request carried one.
    pub delivery_id: Option<String>,
    /// Whether a signature was checked (`false` only under `allowUnsigned`).
    pub verified: bool,
    pub received_at: Timestamp,
    /// The raw body, exactly as signed.
    pub body: Bytes,
}

/// A receipt and its place in the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journalled {
    /// The journal's sequence number: unique, increasing, never reused within a journal.
    pub seq: u64,
    pub receipt: Receipt,
}

/// A stretch of a segment that could not be read (a torn tail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub path: PathBuf,
    /// Where the unreadable part starts.
    pub offset: u64,
    pub bytes: u64,
}

/// What a journal on disk holds.
#[derive(Debug, Default)]
pub struct Contents {
    /// Receipts with no `processed` mark, oldest first.
    pub pending: Vec<Journalled>,
    pub ignored: Vec<Ignored>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Header {
    Received {
        seq: u64,
        event: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delivery: Option<String>,
        verified: bool,
        at: Timestamp,
        len: u64,
        /// The body's CRC-32 (IEEE).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        crc32: Option<u32>,
        /// The body's SHA-256, hex: journals written before the CRC-32.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
    },
    Processed {
        seq: u64,
    },
}

/// What one segment held.
#[derive(Debug, Default)]
struct SegmentRead {
    received: Vec<Journalled>,
    processed: BTreeSet<u64>,
    ignored: Option<Ignored>,
}

/// Bookkeeping for one segment file: which of its receipts are still pending, one slot
/// per sequence number from the segment's id on (memory stays small however many
/// deliveries wait): 0 when none is pending there, else 1 + the body's length.
#[derive(Debug, Default)]
struct Segment {
    slots: Vec<u32>,
    pending: usize,
}

impl Segment {
    /// Marks `offset` pending with a body of `len` bytes; whether it was not pending yet.
    fn insert(&mut self, offset: u64, len: usize) -> bool {
        let at = offset as usize;
        if self.slots.len() <= at {
            self.slots.resize(at + 1, 0);
        }
        let new = self.slots[at] == 0;
        if new {
            self.slots[at] = u32::try_from(len).unwrap_or(u32::MAX - 1) + 1;
            self.pending += 1;
        }
        new
    }

    /// Clears `offset`; the body length of the receipt that was pending there.
    fn remove(&mut self, offset: u64) -> Option<u64> {
        let slot = self.slots.get_mut(offset as usize).filter(|slot| **slot != 0)?;
        let len = u64::from(*slot - 1);
        *slot = 0;
        self.pending -= 1;
        Some(len)
    }

    fn is_done(&self) -> bool {
        self.pending == 0
    }
}

/// The open journal: one writer appends and marks; [`Inbox::write`] puts it beyond a
/// process crash, a sync (here or through [`SegmentSync`]) beyond a power loss.
#[derive(Debug)]
pub struct Inbox {
    dir: PathBuf,
    /// Segments by their first sequence number; the last is the live one.
    segments: BTreeMap<u64, Segment>,
    /// The live segment, opened for appending, and what is buffered for it.
    live: File,
    buffer: Vec<u8>,
    live_id: u64,
    /// The live segment's length counting what is buffered.
    live_len: u64,
    next_seq: u64,
    /// Where the last successful [`Inbox::write`] left the live segment and the sequence
    /// numbers: a failed write goes back to it.
    written: Written,
    /// An append or mark failed since the last write: the buffer may hold part of an
    /// entry, so the next write goes back instead of writing it.
    broken: bool,
    /// A failed write left bytes past the last good length that could not be cut off
    /// yet: nothing is written until they are.
    uncut: bool,
    /// Receipts marked processed since the last successful write: their marks are
    /// buffered by the next write and kept until one succeeds.
    marked: Vec<u64>,
    /// Receipts without a `processed` mark, in all segments.
    pending: usize,
    /// Their bodies' bytes.
    pending_bytes: u64,
    /// Retired segments and a created segment's directory entry not yet synced.
    retired: Retired,
}

/// The journal as of the last successful write.
#[derive(Debug, Clone, Copy)]
struct Written {
    live_len: u64,
    next_seq: u64,
}

impl Inbox {
    /// Opens the journal in `dir` (created when missing), returning what it held. New
    /// entries go to a fresh segment, never after an old segment's possibly torn tail.
    /// Its directory entry and the deletion of finished segments wait for the first sync.
    pub fn open(dir: &Path) -> Result<(Self, Contents), StoreError> {
        fs::create_dir_all(dir).map_err(StoreError::io("create directory", dir))?;
        let mut segments = BTreeMap::new();
        let mut contents = Contents::default();
        let mut next_seq = 0;
        let mut processed = BTreeSet::new();
        let mut received = Vec::new();
        for (id, path) in segment_files(dir)? {
            let read = read_segment(&path, &mut |_| true)?;
            next_seq = next_seq.max(id);
            for entry in &read.received {
                next_seq = next_seq.max(entry.seq + 1);
            }
            next_seq = next_seq.max(read.processed.last().map_or(0, |seq| seq + 1));
            processed.extend(read.processed);
            contents.ignored.extend(read.ignored);
            received.extend(read.received.into_iter().map(|entry| (id, entry)));
            segments.insert(id, Segment::default());
        }
        // A segment's receipts are numbered on from its id, so an offset past the number
        // of receipts read is a damaged header: replayed, but not tracked (a bitmap that
        // long would exhaust memory).
        let receipts = received.len() as u64;
        for (id, entry) in received {
            if processed.contains(&entry.seq) {
                continue;
            }
            let offset = entry.seq.checked_sub(id).filter(|offset| *offset < receipts);
            if let (Some(segment), Some(offset)) = (segments.get_mut(&id), offset) {
                segment.insert(offset, entry.receipt.body.len());
            }
            contents.pending.push(entry);
        }
        contents.pending.sort_by_key(|entry| entry.seq);

        // Never append after an old segment's (possibly torn) tail.
        let live_id = next_seq.max(segments.last_key_value().map_or(0, |(id, _)| id + 1));
        // A segment's receipts are numbered from its id on.
        let next_seq = live_id;
        let path = segment_path(dir, live_id);
        let file = open_segment(&path)?;
        let live_len = file.metadata().map_err(StoreError::io("stat", &path))?.len();
        segments.entry(live_id).or_default();
        // Only tracked receipts can be marked (see above).
        let pending = segments.values().map(|segment| segment.pending).sum();
        let pending_bytes = segments
            .values()
            .flat_map(|segment| &segment.slots)
            .map(|slot| u64::from(slot.saturating_sub(1)))
            .sum();
        let mut inbox = Self {
            dir: dir.to_owned(),
            segments,
            live: file,
            buffer: Vec::with_capacity(WRITE_BUFFER),
            live_id,
            live_len,
            next_seq,
            written: Written { live_len, next_seq },
            broken: false,
            uncut: false,
            marked: Vec::new(),
            pending,
            pending_bytes,
            // The new segment's directory entry is synced with the first sync, not here:
            // opening never waits for the disk.
            retired: Retired { dir: Some(dir.to_owned()), ..Retired::default() },
        };
        inbox.retire_finished()?;
        Ok((inbox, contents))
    }

    /// The sequence number the next receipt will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Receipts without a `processed` mark.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// The body bytes of the receipts without a `processed` mark.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// Appends a receipt (buffered: safe from a process crash after the next
    /// [`Inbox::write`], from a power loss after the sync that follows it).
    pub fn append(&mut self, receipt: Receipt) -> Result<Journalled, StoreError> {
        let seq = self.next_seq;
        let header = Header::Received {
            seq,
            event: receipt.event.clone(),
            delivery: receipt.delivery_id.clone(),
            verified: receipt.verified,
            at: receipt.received_at,
            len: receipt.body.len() as u64,
            crc32: Some(crc32fast::hash(&receipt.body)),
            sha256: None,
        };
        self.write_entry(&header, Some(&receipt.body))?;
        self.next_seq += 1;
        let len = receipt.body.len();
        if self.segments.entry(self.live_id).or_default().insert(seq - self.live_id, len) {
            self.pending += 1;
            self.pending_bytes += len as u64;
        }
        Ok(Journalled { seq, receipt })
    }

    /// Records that receipt `seq` was processed, so it is never replayed: it stops
    /// counting as pending at once, and its mark goes to disk with the next
    /// [`Inbox::write`] that succeeds. Unknown sequence numbers are ignored.
    pub fn mark_processed(&mut self, seq: u64) {
        // Receipts precede the next segment's id, so the holder is the last id <= seq.
        let holder = self.segments.range_mut(..=seq).next_back();
        let Some((&id, segment)) = holder else { return };
        let Some(len) = segment.remove(seq - id) else { return };
        self.pending -= 1;
        self.pending_bytes -= len;
        self.marked.push(seq);
    }

    /// Hands every buffered entry to the kernel, then retires a full live segment and
    /// hands over the oldest segments whose receipts are all processed for deletion (both
    /// left to a later sync, see [`Inbox::take_retired`]). What was appended survives a
    /// crash of this process from here on.
    ///
    /// When the write fails (a full or read-only disk), or an append since the last
    /// write did, no receipt since the last write is kept: the segment is cut back to
    /// where that write left it, so no partial entry is followed by good ones, and the
    /// receipts appended since are forgotten (their sequence numbers are given again).
    /// The marks since then are kept and written by the next write that succeeds: a
    /// receipt processed while the disk was full is not replayed at the next start. A
    /// segment that cannot retire now (no room for a new file) retires at a later write.
    pub fn write(&mut self) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, self.live_id);
        let unclean =
            |what: &str| Err(StoreError::io("append to", &path)(io::Error::other(what.to_owned())));
        let flushed = if self.broken {
            unclean("an entry could not be buffered")
        } else if self.uncut {
            unclean("the segment could not be cut back after a failed write")
        } else {
            self.buffer_marks()
                .and_then(|()| self.flush_buffer().map_err(StoreError::io("append to", &path)))
        };
        if let Err(err) = flushed {
            self.go_back();
            return Err(err);
        }
        self.marked.clear();
        self.written = Written { live_len: self.live_len, next_seq: self.next_seq };
        if let Err(err) = self.retire_finished() {
            tracing::warn!(error = %err, "cannot start a new inbox journal segment yet; the live one grows meanwhile");
        }
        Ok(())
    }

    /// Forgets the receipts appended since the last successful write (see
    /// [`Inbox::write`]) and cuts the live segment back to it; a cut that fails (a
    /// read-only disk) is tried again at the next write, which fails until it succeeds.
    fn go_back(&mut self) {
        if let Some(segment) = self.segments.get_mut(&self.live_id) {
            for seq in self.written.next_seq..self.next_seq {
                if let Some(len) = segment.remove(seq - self.live_id) {
                    self.pending -= 1;
                    self.pending_bytes -= len;
                }
            }
        }
        self.live_len = self.written.live_len;
        self.next_seq = self.written.next_seq;
        self.broken = false;
        // What is still buffered is dropped, never written after a cut.
        self.buffer.clear();
        self.uncut = self.live.set_len(self.written.live_len).is_err();
    }

    /// Buffers the marks made since the last successful write, after the receipts
    /// appended since (a receipt is always written before its mark).
    fn buffer_marks(&mut self) -> Result<(), StoreError> {
        for at in 0..self.marked.len() {
            self.write_entry(&Header::Processed { seq: self.marked[at] }, None)?;
        }
        Ok(())
    }

    /// Hands what is buffered to the kernel. On failure part of it may be in the file.
    fn flush_buffer(&mut self) -> io::Result<()> {
        let written = self.live.write_all(&self.buffer);
        self.buffer.clear();
        written
    }

    /// Buffers `bytes`, first handing the buffer to the kernel when they would overflow
    /// it; what is larger than the buffer goes to the kernel directly.
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buffer.len() + bytes.len() > WRITE_BUFFER {
            self.flush_buffer()?;
        }
        if bytes.len() > WRITE_BUFFER {
            return self.live.write_all(bytes);
        }
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    /// [`Inbox::write`], then the syncs of what retired meanwhile and one `fdatasync` of
    /// the live segment: everything appended so far survives a power loss.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.write()?;
        self.take_retired().sync()?;
        self.live_segment()?.sync()
    }

    /// The segments retired (and the directory, when a segment was created) and the
    /// segments finished since the last call: a sync behind the writer covers them before
    /// the live segment, and deletes the finished ones.
    pub fn take_retired(&mut self) -> Retired {
        std::mem::take(&mut self.retired)
    }

    /// The first sequence number of the live segment: it changes when a segment retires,
    /// which is when a [`SegmentSync`] handle must be taken again.
    pub fn live_id(&self) -> u64 {
        self.live_id
    }

    /// A handle on the live segment for syncing it from another thread (a duplicate of
    /// the writer's file descriptor).
    pub fn live_segment(&self) -> Result<SegmentSync, StoreError> {
        let path = segment_path(&self.dir, self.live_id);
        let file = self.live.try_clone().map_err(StoreError::io("duplicate", &path))?;
        Ok(SegmentSync { path, file })
    }

    /// Buffers one entry. On failure the buffer may hold part of it: the journal is
    /// broken until the next [`Inbox::write`] goes back.
    fn write_entry(&mut self, header: &Header, body: Option<&[u8]>) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(header).map_err(|source| StoreError::Encode {
            path: segment_path(&self.dir, self.live_id),
            source,
        })?;
        line.push(b'\n');
        let mut entry_len = line.len() as u64;
        let mut buffered = self.put(&line);
        if let Some(body) = body {
            buffered = buffered.and_then(|()| self.put(body)).and_then(|()| self.put(b"\n"));
            entry_len += body.len() as u64 + 1;
        }
        // Counted whole either way: a broken write goes back to the last good length.
        self.live_len += entry_len;
        if let Err(err) = buffered {
            self.broken = true;
            return Err(StoreError::io("append to", segment_path(&self.dir, self.live_id))(err));
        }
        Ok(())
    }

    /// Starts a new live segment when the current one is full, then hands over fully
    /// processed segments for deletion, oldest first, stopping at the first with a pending
    /// receipt (called with the buffer written out, so nothing buffered is lost). The
    /// retiring segment's sync, the directory's and the deletions are left to
    /// [`Retired::sync`] ([`Inbox::take_retired`]), so the writer never waits for the disk.
    /// A deleted segment needs no sync: every receipt in it was processed.
    fn retire_finished(&mut self) -> Result<(), StoreError> {
        if self.live_len >= SEGMENT_RETIRE_BYTES {
            let retiring = self.live_segment()?;
            let id = self.next_seq.max(self.live_id + 1);
            let path = segment_path(&self.dir, id);
            let file = open_segment(&path)?;
            self.next_seq = id;
            self.retired.segments.push(retiring);
            self.retired.dir = Some(self.dir.clone());
            self.live = file;
            self.live_id = id;
            self.live_len = 0;
            self.written = Written { live_len: 0, next_seq: id };
            self.segments.insert(id, Segment::default());
        }
        while let Some((&id, segment)) = self.segments.first_key_value() {
            if id == self.live_id || !segment.is_done() {
                break;
            }
            self.retired.finished.push(segment_path(&self.dir, id));
            self.segments.remove(&id);
        }
        Ok(())
    }
}

/// The disk work the writer leaves behind (see [`Inbox::take_retired`]): segments
/// retired and the directory entry of a created segment, not yet synced, and fully
/// processed segments to delete.
#[derive(Debug, Default)]
pub struct Retired {
    segments: Vec<SegmentSync>,
    dir: Option<PathBuf>,
    finished: Vec<PathBuf>,
}

impl Retired {
    /// Syncs each retired segment, then the directory, then deletes the finished
    /// segments (oldest first).
    pub fn sync(&self) -> Result<(), StoreError> {
        for segment in &self.segments {
            segment.sync()?;
        }
        if let Some(dir) = &self.dir {
            sync_dir(dir)?;
        }
        for path in &self.finished {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(StoreError::io("remove", path)(err)),
            }
        }
        Ok(())
    }

    /// Adds what `later` holds (for a sync that covers several writes).
    pub fn absorb(&mut self, later: Retired) {
        self.segments.extend(later.segments);
        self.dir = later.dir.or(self.dir.take());
        self.finished.extend(later.finished);
    }
}

/// A handle on one segment file that syncs it (see [`Inbox::live_segment`]).
#[derive(Debug)]
pub struct SegmentSync {
    path: PathBuf,
    file: File,
}

impl SegmentSync {
    /// `fdatasync`: everything written to the segment before the call survives a power loss.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(StoreError::io("fsync", &self.path))
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads the journal in `dir` without opening it for writing: what is pending now.
/// Safe while a writer appends (a half-written tail reads as ignored).
pub fn read_pending(dir: &Path) -> Result<Contents, StoreError> {
    let mut contents = Contents::default();
    let mut processed = BTreeSet::new();
    let mut received = Vec::new();
    if !dir.exists() {
        return Ok(contents);
    }
    for (_, path) in segment_files(dir)? {
        let read = read_segment(&path, &mut |_| true)?;
        processed.extend(read.processed);
        received.extend(read.received);
        contents.ignored.extend(read.ignored);
    }
    contents.pending = received.into_iter().filter(|e| !processed.contains(&e.seq)).collect();
    contents.pending.sort_by_key(|entry| entry.seq);
    Ok(contents)
}

/// The receipts with sequence numbers from `from_seq` on, oldest first, at most `limit`,
/// reading only the segments that can hold them. Marks are not consulted: this is for a
/// reader that processes in order and so knows none of these was processed yet (the
/// receiver's processor catching up). Safe while a writer appends.
pub fn read_from(dir: &Path, from_seq: u64, limit: usize) -> Result<Vec<Journalled>, StoreError> {
    let segments = segment_files(dir)?;
    let mut found = Vec::new();
    for (i, (_, path)) in segments.iter().enumerate() {
        // A segment's entries all precede the next segment's first sequence number.
        if segments.get(i + 1).is_some_and(|(next, _)| *next <= from_seq) {
            continue;
        }
        let mut room = limit - found.len();
        let read = read_segment(path, &mut |seq| {
            let wanted = seq >= from_seq && room > 0;
            room -= usize::from(wanted);
            wanted
        })?;
        found.extend(read.received);
        if found.len() >= limit {
            break;
        }
    }
    found.sort_by_key(|entry| entry.seq);
    found.truncate(limit);
    Ok(found)
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("journal-{id:020}.log"))
}

/// The segment files in `dir`, oldest first.
fn segment_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(StoreError::io("list", dir))? {
        let entry = entry.map_err(StoreError::io("list", dir))?;
        let name = entry.file_name();
        let id = name
            .to_str()
            .and_then(|name| name.strip_prefix("journal-"))
            .and_then(|rest| rest.strip_suffix(".log"))
            .and_then(|digits| digits.parse::<u64>().ok())
            .filter(|id| *id < SEQ_LIMIT);
        if let Some(id) = id {
            found.push((id, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Reads a segment entry by entry through a buffer of [`READ_BUFFER`] bytes; receipts
/// for which `want` says no are checked for shape only and skipped (their bodies are
/// neither read into memory nor checksummed). A receipt's body is read into an
/// allocation of its own size, so reading a segment back never holds the whole file.
fn read_segment(path: &Path, want: &mut dyn FnMut(u64) -> bool) -> Result<SegmentRead, StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(SegmentRead::default()),
        Err(err) => return Err(StoreError::io("read", path)(err)),
    };
    let mut segment = SegmentReader { file: BufReader::with_capacity(READ_BUFFER, file), at: 0 };
    let mut read = SegmentRead::default();
    loop {
        let start = segment.at;
        match segment.next_entry(want).map_err(StoreError::io("read", path))? {
            Some(Entry::Received(journalled)) => read.received.push(journalled),
            Some(Entry::Processed(seq)) => {
                read.processed.insert(seq);
            }
            Some(Entry::Unwanted) => {}
            Some(Entry::End) => break,
            None => {
                // Everything from here on is unreadable: measure it for the report.
                let end = segment.file.get_mut().metadata().map(|meta| meta.len());
                let end = end.map_err(StoreError::io("stat", path))?;
                read.ignored = Some(Ignored {
                    path: path.to_owned(),
                    offset: start,
                    bytes: end.saturating_sub(start),
                });
                break;
            }
        }
    }
    Ok(read)
}

/// How much of a segment is read at a time (below the allocator's threshold for a
/// mapping of its own, so a read-back leaves no large free block behind).
const READ_BUFFER: usize = 64 * 1024;

/// A segment file being read from its start.
struct SegmentReader {
    file: BufReader<File>,
    /// Where the next entry starts.
    at: u64,
}

enum Entry {
    Received(Journalled),
    Processed(u64),
    /// A receipt the reader did not ask for.
    Unwanted,
    /// The segment ends here, after a whole entry.
    End,
}

impl SegmentReader {
    /// The next entry; `None` when it is incomplete or damaged (a torn tail).
    fn next_entry(&mut self, want: &mut dyn FnMut(u64) -> bool) -> io::Result<Option<Entry>> {
        let mut line = Vec::new();
        let used = self.file.read_until(b'\n', &mut line)?;
        if used == 0 {
            return Ok(Some(Entry::End));
        }
        if line.pop() != Some(b'\n') {
            return Ok(None);
        }
        let Ok(header) = serde_json::from_slice::<Header>(&line) else { return Ok(None) };
        let (Header::Processed { seq } | Header::Received { seq, .. }) = &header;
        if *seq >= SEQ_LIMIT {
            return Ok(None);
        }
        let mut used = used as u64;
        let entry = match header {
            Header::Processed { seq } => Entry::Processed(seq),
            Header::Received { seq, event, delivery, verified, at, len, crc32, sha256 } => {
                let entry = match self.body(len, want(seq))? {
                    Body::Torn => return Ok(None),
                    Body::Skipped => Entry::Unwanted,
                    Body::Read(body) => {
                        let intact = match (crc32, sha256) {
                            (Some(crc32), _) => crc32fast::hash(&body) == crc32,
                            (None, Some(sha256)) => hex(&Sha256::digest(&body)) == sha256,
                            (None, None) => false,
                        };
                        if !intact {
                            return Ok(None);
                        }
                        let receipt = Receipt {
                            event,
                            delivery_id: delivery,
                            verified,
                            received_at: at,
                            body: Bytes::from(body),
                        };
                        Entry::Received(Journalled { seq, receipt })
                    }
                };
                // The body was there, so its length fits the file.
                used += len + 1;
                entry
            }
        };
        self.at += used;
        Ok(Some(entry))
    }

    /// A receipt's body of `len` bytes and its closing newline: read when `wanted`, else
    /// skipped.
    fn body(&mut self, len: u64, wanted: bool) -> io::Result<Body> {
        let body = if wanted {
            // Grown as bytes arrive, so a damaged length cannot claim memory the file
            // does not hold; a whole body ends at exactly its length.
            let mut body = Vec::with_capacity(usize::try_from(len).map_or(0, |l| l.min(1 << 20)));
            (&mut self.file).take(len).read_to_end(&mut body)?;
            if (body.len() as u64) < len {
                return Ok(Body::Torn);
            }
            Body::Read(body)
        } else {
            // Past the end of the file the newline below is missing: a torn tail.
            let Ok(skip) = i64::try_from(len) else { return Ok(Body::Torn) };
            self.file.seek_relative(skip)?;
            Body::Skipped
        };
        let mut newline = [0u8; 1];
        if self.file.read(&mut newline)? != 1 || newline[0] != b'\n' {
            return Ok(Body::Torn);
        }
        Ok(body)
    }
}

/// A receipt's body as [`SegmentReader::body`] found it.
enum Body {
    Read(Vec<u8>),
    Skipped,
    /// The segment ends before the body and its newline do, or the newline is missing.
    Torn,
}

fn hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    digest.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Opens segment `path` for appending, creating it private to this user.
fn open_segment(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(StoreError::io("create", path))
}

/// Makes a new file's directory entry durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(StoreError::io("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(delivery: Option<&str>, body: &str) -> Receipt {
        Receipt {
            event: "issue_comment".into(),
            delivery_id: delivery.map(str::to_owned),
            verified: true,
            received_at: Timestamp::UNIX_EPOCH,
            body: Bytes::copy_from_slice(body.as_bytes()),
        }
    }

    /// A new journal in a temp directory, which lives as long as the guard.
    fn new_inbox() -> (tempfile::TempDir, Inbox) {
        let dir = tempfile::tempdir().unwrap();
        let (inbox, _) = Inbox::open(dir.path()).unwrap();
        (dir, inbox)
    }

    /// Syncs and closes `inbox`, and opens the journal in `dir` again.
    fn reopen(mut inbox: Inbox, dir: &Path) -> Inbox {
        inbox.sync().unwrap();
        drop(inbox);
        Inbox::open(dir).unwrap().0
    }

    /// What reopening the journal in `dir` finds.
    fn reopened(dir: &Path) -> Contents {
        Inbox::open(dir).unwrap().1
    }

    #[test]
    fn a_synced_receipt_is_pending_after_reopening_until_it_is_marked_processed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut inbox, contents) = Inbox::open(dir.path()).unwrap();
        assert!(contents.pending.is_empty());
        let first = inbox.append(receipt(Some("a"), "{\"n\":1}")).unwrap();
        let second = inbox.append(receipt(None, "{\"n\":2}")).unwrap();
        inbox.sync().unwrap();
        drop(inbox);

        let (mut inbox, contents) = Inbox::open(dir.path()).unwrap();
        assert_eq!(contents.pending, vec![first.clone(), second.clone()]);
        assert!(inbox.next_seq() > second.seq);
        inbox.mark_processed(first.seq);
        inbox.sync().unwrap();
        drop(inbox);

        assert_eq!(reopened(dir.path()).pending, vec![second]);
    }

    #[test]
    fn reading_from_a_sequence_number_skips_earlier_segments_and_stops_at_the_limit() {
        let (dir, mut inbox) = new_inbox();
        let old = inbox.append(receipt(Some("old"), "{}")).unwrap();
        let mut inbox = reopen(inbox, dir.path());
        let fresh: Vec<u64> =
            (0..5).map(|_| inbox.append(receipt(None, "{}")).unwrap().seq).collect();
        inbox.sync().unwrap();
        let read = read_from(dir.path(), fresh[1], 3).unwrap();
        assert_eq!(read.iter().map(|e| e.seq).collect::<Vec<_>>(), fresh[1..4]);
        assert_eq!(read_from(dir.path(), old.seq, 1).unwrap()[0].seq, old.seq);
    }

    #[test]
    fn a_segment_holding_only_marks_is_followed_by_correctly_numbered_receipts() {
        let (dir, mut inbox) = new_inbox();
        let a = inbox.append(receipt(Some("a"), "{}")).unwrap();
        let mut inbox = reopen(inbox, dir.path());
        inbox.mark_processed(a.seq); // the new live segment holds only this mark
        inbox.sync().unwrap();
        drop(inbox);
        let (mut inbox, contents) = Inbox::open(dir.path()).unwrap();
        assert!(contents.pending.is_empty());
        let b = inbox.append(receipt(Some("b"), "{}")).unwrap();
        assert!(b.seq > a.seq);
        inbox.sync().unwrap();
        inbox.mark_processed(b.seq);
        inbox.mark_processed(b.seq); // a second mark is ignored
        inbox.sync().unwrap();
        drop(inbox);
        let (_, contents) = Inbox::open(dir.path()).unwrap();
        assert!(contents.pending.is_empty());
    }

    /// A mark made while the disk is full is written once there is room again, so the
    /// receipt it settles is not replayed at the next start (it was lost with the failed
    /// write that carried it).
    #[test]
    fn a_mark_whose_write_failed_is_written_by_the_next_write_that_succeeds() {
        let (dir, mut inbox) = new_inbox();
        let processed = inbox.append(receipt(Some("a"), "{}")).unwrap();
        inbox.write().unwrap();

        // The disk fills: the mark and the next receipt go to a write that fails.
        let full = OpenOptions::new().append(true).open("/dev/full").unwrap();
        let segment = std::mem::replace(&mut inbox.live, full);
        inbox.mark_processed(processed.seq);
        inbox.append(receipt(Some("refused"), "{}")).unwrap();
        assert!(inbox.write().is_err());
        assert_eq!(inbox.pending(), 0, "processed, whatever the disk says");

        // Space returns. (`/dev/full` cannot be cut back either: the first write goes
        // back once more, the next succeeds.)
        inbox.live = segment;
        let _ = inbox.write();
        inbox.write().unwrap();
        drop(inbox);
        let contents = read_pending(dir.path()).unwrap();
        assert!(contents.pending.is_empty(), "{:?}", contents.pending);
        assert!(contents.ignored.is_empty(), "{:?}", contents.ignored);
    }

    #[test]
    fn deliveries_without_an_id_get_distinct_sequence_numbers() {
        let (_dir, mut inbox) = new_inbox();
        let a = inbox.append(receipt(None, "{}")).unwrap();
        let b = inbox.append(receipt(None, "{}")).unwrap();
        assert_ne!(a.seq, b.seq);
    }

    #[test]
    fn a_torn_tail_is_ignored_and_reported_and_earlier_entries_survive() {
        let (dir, mut inbox) = new_inbox();
        let kept = inbox.append(receipt(Some("a"), "{\"kept\":true}")).unwrap();
        inbox.sync().unwrap();
        drop(inbox);
        let (_, path) = segment_files(dir.path()).unwrap().pop().unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"op\":\"received\",\"seq\":9,\"event\":\"x\",\"verified\":true,\"at\":\"2026-01-01T00:00:00Z\",\"len\":50,\"sha256\":\"00\"}\n{\"trunc").unwrap();

        let contents = read_pending(dir.path()).unwrap();
        assert_eq!(contents.pending, vec![kept.clone()]);
        assert_eq!(contents.ignored.len(), 1);
        assert_eq!(reopened(dir.path()).pending, vec![kept]);
    }

    #[test]
    fn a_body_that_does_not_match_its_checksum_is_not_replayed() {
        let (dir, mut inbox) = new_inbox();
        inbox.append(receipt(Some("a"), "{\"v\":1}")).unwrap();
        inbox.sync().unwrap();
        drop(inbox);
        let (_, path) = segment_files(dir.path()).unwrap().pop().unwrap();
        let text = fs::read_to_string(&path).unwrap().replace("{\"v\":1}", "{\"v\":2}");
        fs::write(&path, text).unwrap();
        let contents = read_pending(dir.path()).unwrap();
        assert!(contents.pending.is_empty());
        assert_eq!(contents.ignored.len(), 1);
    }

    #[test]
    fn fully_processed_old_segments_are_deleted_oldest_first() {
        let (dir, mut inbox) = new_inbox();
        let a = inbox.append(receipt(Some("a"), "{}")).unwrap();
        inbox.sync().unwrap();
        drop(inbox);
        let (mut inbox, contents) = Inbox::open(dir.path()).unwrap();
        assert_eq!(contents.pending.len(), 1);
        assert_eq!(segment_files(dir.path()).unwrap().len(), 2, "old segment kept while pending");
        inbox.mark_processed(a.seq);
        inbox.sync().unwrap();
        assert_eq!(segment_files(dir.path()).unwrap().len(), 1, "only the live segment remains");
        drop(inbox);
        let (_, contents) = Inbox::open(dir.path()).unwrap();
        assert!(contents.pending.is_empty(), "the mark survived with the live segment");
    }

    #[test]
    fn a_retired_segment_and_the_directory_are_handed_over_for_syncing_once() {
        let (dir, mut inbox) = new_inbox();
        let first_live = inbox.live_id();
        let body = "x".repeat(1024 * 1024);
        for _ in 0..5 {
            inbox.append(receipt(None, &body)).unwrap();
        }
        inbox.write().unwrap();
        assert_ne!(inbox.live_id(), first_live, "the full segment retired");
        let retired = inbox.take_retired();
        assert_eq!(retired.segments.len(), 1);
        assert_eq!(retired.segments[0].path(), segment_path(dir.path(), first_live));
        assert_eq!(retired.dir.as_deref(), Some(dir.path()));
        retired.sync().unwrap();
        let again = inbox.take_retired();
        assert!(again.segments.is_empty() && again.dir.is_none());
    }

    #[test]
    fn a_full_live_segment_is_replaced_and_deleted_once_processed() {
        let (dir, mut inbox) = new_inbox();
        let body = "x".repeat(1024 * 1024);
        for _ in 0..5 {
            let entry = inbox.append(receipt(None, &body)).unwrap();
            inbox.mark_processed(entry.seq);
        }
        inbox.sync().unwrap();
        let files = segment_files(dir.path()).unwrap();
        assert_eq!(files.len(), 1);
        assert!(fs::metadata(&files[0].1).unwrap().len() < 1024, "a fresh segment");
    }

    #[test]
    fn a_journal_written_with_sha256_checksums_is_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut segment = Vec::new();
        for (seq, body) in [(0u64, &b"{\"old\":1}"[..]), (1, b"{\"old\":2}")] {
            segment.extend(format!(
                "{{\"op\":\"received\",\"seq\":{seq},\"event\":\"issues\",\"verified\":true,\"at\":\"2026-01-01T00:00:00Z\",\"len\":{},\"sha256\":\"{}\"}}\n",
                body.len(),
                hex(&Sha256::digest(body))
            ).into_bytes());
            segment.extend_from_slice(body);
            segment.push(b'\n');
        }
        segment.extend_from_slice(b"{\"op\":\"processed\",\"seq\":0}\n");
        fs::write(segment_path(dir.path(), 0), &segment).unwrap();
        let (inbox, contents) = Inbox::open(dir.path()).unwrap();
        let pending: Vec<&[u8]> = contents.pending.iter().map(|e| &e.receipt.body[..]).collect();
        assert_eq!(pending, [&b"{\"old\":2}"[..]]);
        assert!(contents.ignored.is_empty());
        assert_eq!(inbox.pending(), 1);
    }

    #[test]
    fn pending_receipts_and_their_bytes_follow_appends_marks_and_a_reopen() {
        let (dir, mut inbox) = new_inbox();
        let a = inbox.append(receipt(None, "{\"a\":1}")).unwrap();
        inbox.append(receipt(None, "{}")).unwrap();
        inbox.sync().unwrap();
        assert_eq!((inbox.pending(), inbox.pending_bytes()), (2, 9));
        inbox.mark_processed(a.seq);
        inbox.mark_processed(a.seq); // a second mark changes nothing
        inbox.sync().unwrap();
        assert_eq!((inbox.pending(), inbox.pending_bytes()), (1, 2));
        drop(inbox);
        let (inbox, _) = Inbox::open(dir.path()).unwrap();
        assert_eq!((inbox.pending(), inbox.pending_bytes()), (1, 2));
    }

    /// Found by the `state_files` fuzz target: a damaged header numbering a receipt far
    /// past its segment made `open` allocate a bitmap that long (out of memory), and a
    /// mark numbered `u64::MAX` overflowed the next sequence number.
    #[test]
    fn a_receipt_numbered_far_past_its_segment_opens_without_exhausting_memory() {
        let dir = tempfile::tempdir().unwrap();
        let body = b"{}";
        let header = Header::Received {
            seq: 400_000_000_000,
            event: "issues".into(),
            delivery: None,
            verified: true,
            at: Timestamp::UNIX_EPOCH,
            len: body.len() as u64,
            crc32: Some(crc32fast::hash(body)),
            sha256: None,
        };
        let mut segment = serde_json::to_vec(&header).unwrap();
        segment.push(b'\n');
        segment.extend_from_slice(body);
        segment.push(b'\n');
        segment.extend(serde_json::to_vec(&Header::Processed { seq: u64::MAX }).unwrap());
        segment.push(b'\n');
        fs::write(segment_path(dir.path(), 0), &segment).unwrap();

        let (mut inbox, contents) = Inbox::open(dir.path()).unwrap();
        let pending: Vec<u64> = contents.pending.iter().map(|entry| entry.seq).collect();
        assert_eq!(pending, [400_000_000_000]);
        assert_eq!(contents.ignored.len(), 1, "the mark past the sequence limit is damaged");
        assert!(inbox.append(receipt(None, "{}")).unwrap().seq > 400_000_000_000);
    }
}
