//! Fuzz harness: bytes as each state file the daemon and the CLI read back.
//!
//! The first byte picks the file, the rest is its content, written under a fresh state
//! root and read through the store's public readers — the same calls the service makes
//! at start and the CLI's `explain`/`events` make:
//!
//! - a portable record (`portable/<slug>.json`): the whole record and every section, then
//!   `explain`'s account of the item;
//! - a local session record (`local/<slug>.json`): the one-record read and the listing;
//! - `local/poll-clocks.json`; the delivery ledger's `local/deliveries.log` (then opened
//!   and used as the dispatcher does); the poller's heartbeat;
//! - an inbox journal segment, either the raw bytes or entries built from them with
//!   correct lengths and checksums (CRC-32, or the older SHA-256), so reading gets past
//!   the checksum to the sequence numbers, read by `read_pending`, `read_from` and
//!   `Inbox::open`;
//! - the event log (live file and one rotated file), read whole and tailed, filtered by a
//!   fuzzed `--event` glob and `--since`, and explained;
//! - a legacy control record or poll-state file, read forward into the portable record;
//! - Claude Code's user config or settings (`~/.claude.json`, `~/.claude/settings.json`),
//!   merged into by the trust pre-seed at spawn (not ours, but read and rewritten).
//!
//! What must hold: no panic, no abort, bounded memory. A file that does not parse reads
//! as absent (quarantined) — that is the store's contract, not checked here.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::{BypassAcceptance, TrustScope};
use loop_core::explain::{self, ItemState, Record};
use loop_core::record::{Collaborators, Control, Ended, PollLedger};
use loop_sessions::trust::{ClaudeFiles, TrustSettings, seed_claude_trust};
use loop_store::event_log::filter::{EventFilter, parse_since};
use loop_store::event_log::read::{EventTail, read_all};
use loop_store::inbox::{self, Inbox, Receipt};
use loop_store::{ChannelBindings, EventLog, Section, Slot, StateLayout, StateStore};
use sha2::{Digest, Sha256};

/// The work item every record is about.
const ITEM: &str = "github:octo/app#7";

/// One process-wide scratch directory; each input gets a fresh state root inside it. On
/// tmpfs when there is one: the readers fsync, and a disk would make the run IO-bound.
static SCRATCH: LazyLock<Mutex<tempfile::TempDir>> = LazyLock::new(|| {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    Mutex::new(dir.expect("invariant: the fuzz run has a writable temp dir"))
});

static ITEM_REF: LazyLock<WorkItemRef> =
    LazyLock::new(|| ITEM.parse().expect("invariant: ITEM is a valid ref"));

/// One input.
pub fn run(data: &[u8]) {
    let Some((&selector, content)) = data.split_first() else { return };
    let scratch = SCRATCH.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = scratch.path().join("state");
    // A leftover of the previous input (quarantined files, journal segments) would make
    // a crash depend on the input order; start every input from nothing.
    let _ = fs::remove_dir_all(&root);
    let store = StateStore::new(StateLayout::new(&root), EventLog::disabled());
    match selector % 12 {
        0 => portable_record(&store, content),
        1 => local_record(&store, content),
        2 => poll_clocks(&store, content),
        3 => delivery_ledger(&store, content),
        4 => heartbeat(&store, content),
        5 => journal(&store, content),
        6 => journal(&store, &built_segment(content)),
        7 => event_log(&store, content),
        8 => legacy(&store, content, &store.layout().legacy_control(&ITEM_REF)),
        9 => legacy(&store, content, &store.layout().legacy_poll_state()),
        10 => claude_trust(&root, content, |files| &files.user_config),
        _ => claude_trust(&root, content, |files| &files.settings),
    }
}

fn put(path: &Path, content: &[u8]) {
    let dir = path.parent().expect("invariant: every state file has a directory");
    fs::create_dir_all(dir).expect("invariant: the scratch root is writable");
    fs::write(path, content).expect("invariant: the scratch root is writable");
}

fn portable_record(store: &StateStore, content: &[u8]) {
    let item = &*ITEM_REF;
    put(&store.layout().portable_record(item), content);
    let _ = store.load_portable_record(item);
    put(&store.layout().portable_record(item), content);
    let state = ItemState {
        control: section::<Control>(store, item),
        session: None,
        ledger: section::<PollLedger>(store, item),
        ended: section::<Ended>(store, item),
        collaborators: section::<Collaborators>(store, item),
    };
    let _ = section::<ChannelBindings>(store, item);
    let _ = explain::describe_item(&state);
}

/// A pre-issue-128 file: read forward into a record that has no section yet.
fn legacy(store: &StateStore, content: &[u8], path: &Path) {
    put(path, content);
    let _ = (section::<Control>(store, &ITEM_REF), section::<PollLedger>(store, &ITEM_REF));
    let _ = store.load_portable_record(&ITEM_REF);
}

/// Claude Code's user config or settings, as a spawn pre-seeds trust in them: read,
/// merged and written back (bypass mode asked for, so both files are touched).
fn claude_trust(root: &Path, content: &[u8], file: fn(&ClaudeFiles) -> &PathBuf) {
    let home = root.join("home");
    let files = ClaudeFiles::locate(&home, None);
    put(file(&files), content);
    let settings = TrustSettings {
        enabled: true,
        scope: TrustScope::WorkspaceRoot,
        accept_bypass_permissions: BypassAcceptance::Auto,
    };
    let (workspace, cwd) = (home.join("work"), home.join("work/octo-app-7"));
    let bypass = ["--dangerously-skip-permissions".to_owned()];
    let _ = seed_claude_trust(&files, &settings, &cwd, Some(&workspace), &bypass);
}

fn section<S: Section>(store: &StateStore, item: &WorkItemRef) -> Option<S> {
    store.read_section::<S>(item).ok().and_then(Slot::into_value)
}

fn local_record(store: &StateStore, content: &[u8]) {
    let item = &*ITEM_REF;
    put(&store.layout().local_record(item), content);
    let loaded = store.load_local_record(item).ok().flatten();
    put(&store.layout().local_record(item), content);
    let _ = store.list_local_records();
    let _ = store.live_records();
    let Some(mut record) = loaded else { return };
    let live = record.own_endpoint().is_some_and(|e| e.is_live());
    for endpoint in record.endpoints.values_mut() {
        endpoint.note_delivery("fuzz-delivery", Timestamp::UNIX_EPOCH);
    }
    let state = ItemState { session: Some(record), ..ItemState::default() };
    let _ = (live, explain::describe_item(&state));
}

fn poll_clocks(store: &StateStore, content: &[u8]) {
    put(&store.layout().poll_clocks(), content);
    let _ = store.poll_clock(&ITEM_REF);
}

/// The delivery ledger's log (`deliveries.log`): read as `status` does, then opened and
/// used as the dispatcher does.
fn delivery_ledger(store: &StateStore, content: &[u8]) {
    put(&store.layout().local_dir().join("deliveries.log"), content);
    let _ = store.load_delivery_ledger(8);
    let Ok((mut log, _released)) = store.open_delivery_log(8) else { return };
    let now = Timestamp::UNIX_EPOCH;
    let _ = log.take_in("fuzz-key", now);
    let _ = log.keep("fuzz-key", now);
    let _ = log.settle("fuzz-other", "fuzz", now);
    let _ = log.release("fuzz-other", now);
    log.set_capacity(1);
    let _ = store.save_delivery_ledger(log.ledger());
}

fn heartbeat(store: &StateStore, content: &[u8]) {
    put(&store.layout().heartbeat(), content);
    let _ = store.read_heartbeat();
}

/// The journal's first segment (`journal-<first seq, 20 digits>.log`).
fn segment(store: &StateStore) -> PathBuf {
    store.layout().inbox_dir().join(format!("journal-{:020}.log", 0))
}

fn journal(store: &StateStore, content: &[u8]) {
    let dir = store.layout().inbox_dir();
    put(&segment(store), content);
    let _ = inbox::read_pending(&dir);
    let _ = inbox::read_from(&dir, 0, 16);
    let _ = inbox::read_from(&dir, u64::MAX, 16);
    if let Ok((mut opened, contents)) = Inbox::open(&dir) {
        for pending in contents.pending.iter().take(4) {
            opened.mark_processed(pending.seq);
        }
        let _ = opened.append(Receipt {
            event: "issues".to_owned(),
            delivery_id: None,
            verified: true,
            received_at: Timestamp::UNIX_EPOCH,
            body: Bytes::from_static(b"{}"),
        });
        let _ = opened.sync();
    }
}

/// One journal entry as the fuzzer describes it; written in the journal's own format.
#[derive(Debug, Arbitrary)]
enum Entry<'a> {
    Received {
        seq: u64,
        event: &'a str,
        delivery: Option<&'a str>,
        body: &'a [u8],
        at: i64,
        /// Checksummed as journals before CRC-32 were (`sha256`), still read.
        legacy: bool,
    },
    Processed {
        seq: u64,
    },
    /// Raw bytes: a torn or damaged stretch.
    Raw(&'a [u8]),
}

/// A segment of well-formed entries (correct length and checksum) built from `content`.
fn built_segment(content: &[u8]) -> Vec<u8> {
    let mut input = Unstructured::new(content);
    let entries: Vec<Entry<'_>> = input.arbitrary().unwrap_or_default();
    let mut out = Vec::new();
    for entry in entries {
        match entry {
            Entry::Received { seq, event, delivery, body, at, legacy } => {
                let at = Timestamp::from_second(at.rem_euclid(4_000_000_000))
                    .unwrap_or(Timestamp::UNIX_EPOCH);
                let mut header = serde_json::json!({
                    "op": "received", "seq": seq, "event": event, "delivery": delivery,
                    "verified": true, "at": at, "len": body.len(),
                });
                if legacy {
                    let sha256: String =
                        Sha256::digest(body).iter().map(|b| format!("{b:02x}")).collect();
                    header["sha256"] = sha256.into();
                } else {
                    header["crc32"] = crc32fast::hash(body).into();
                }
                out.extend_from_slice(header.to_string().as_bytes());
                out.push(b'\n');
                out.extend_from_slice(body);
                out.push(b'\n');
            }
            Entry::Processed { seq } => {
                out.extend_from_slice(
                    serde_json::json!({"op": "processed", "seq": seq}).to_string().as_bytes(),
                );
                out.push(b'\n');
            }
            Entry::Raw(bytes) => out.extend_from_slice(bytes),
        }
    }
    out
}

/// `bytes` before and after the first `byte` (all of it and nothing when there is none).
fn split_at_byte(bytes: &[u8], byte: u8) -> (&[u8], &[u8]) {
    match bytes.iter().position(|b| *b == byte) {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[]),
    }
}

/// The event log's rotated file `n` (`events.jsonl.<n>`).
fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{n}"));
    path.with_file_name(name)
}

fn event_log(store: &StateStore, content: &[u8]) {
    // `<glob>\t<since>\n`, then the log: up to a form feed the rotated file, after it the
    // live one.
    let (params, log) = split_at_byte(content, b'\n');
    let params = String::from_utf8_lossy(params);
    let (glob, since) = params.split_once('\t').unwrap_or((&params, ""));
    let (rotated_lines, live_lines) = split_at_byte(log, 0x0c);
    let path = store.layout().event_log().to_owned();
    put(&rotated(&path, 1), rotated_lines);
    put(&path, live_lines);
    let records: Vec<Record> = match read_all(&path) {
        Ok(records) => records.into_iter().map(|record| record.0).collect(),
        Err(_) => return,
    };
    if let Ok(tail) = EventTail::from_end(&path) {
        let filter = EventFilter {
            work_item: Some(ITEM_REF.clone()),
            events: vec![glob.to_owned()],
            since: parse_since(since, Timestamp::UNIX_EPOCH).ok(),
            ..EventFilter::default()
        };
        if let Ok(backlog) = tail.backlog() {
            let _ = backlog.iter().filter(|record| filter.matches(record)).count();
        }
    }
    let _ = explain::item_trail(&records, &ITEM_REF, 3);
    for id in records.iter().filter_map(|r| r.get("gh_delivery")?.as_str()).take(2) {
        let _ = explain::delivery_trail(&records, id);
    }
    for record in &records {
        let _ = explain::step(record);
    }
}
