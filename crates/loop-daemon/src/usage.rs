//! Tokens and cost per session and per work item (docs/control-plane.md "Usage and
//! cost"), summed from each session's Claude Code transcript by `loop_core::usage` and
//! priced by `pricing.models`.
//!
//! A [`UsageBook`] remembers, per transcript file, how far it has read
//! ([`ReadSoFar`]) and what that counted, so a look reads only what was appended since
//! the last one (one `stat`, one read of the new bytes); a file replaced or cut short is
//! counted again from its start.
//! What each look adds is counted into `GET /metrics` (`Metrics::usage`), by harness.
//! The file is found, safely, where the transcript route finds it ([`crate::transcript`]).
//! A session with no transcript here (another harness, no conversation id yet, no file)
//! has no usage: `None`, never a made-up zero.
//!
//! Every method reads files: call it off the runtime's threads. The book's lock is a
//! std mutex held while a file's new bytes are read, never across an `.await`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use loop_core::WorkItemRef;
use loop_core::config::PricingConfig;
use loop_core::record::{Endpoint, LocalRecord};
use loop_core::usage::{ByModel, Tally, Tokens, add, cost, total};

use crate::metrics::Metrics;
use crate::transcript::{Appended, ReadSoFar, endpoint_transcript};

/// What every transcript read so far counted. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct UsageBook {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Claude Code's `projects/` directory.
    projects: PathBuf,
    /// Where what each look adds is counted; `None` for a one-shot reader (the CLI).
    metrics: Option<Metrics>,
    files: Mutex<HashMap<PathBuf, Read>>,
}

/// One transcript as far as it was read, and what that counted.
#[derive(Debug, Default)]
struct Read {
    so_far: ReadSoFar,
    tally: Tally,
}

impl UsageBook {
    /// A book over the transcripts under `projects`.
    pub fn new(projects: PathBuf) -> Self {
        Self::with(projects, None)
    }

    /// A book that also counts what it reads into `metrics`.
    pub fn counted_in(projects: PathBuf, metrics: Metrics) -> Self {
        Self::with(projects, Some(metrics))
    }

    fn with(projects: PathBuf, metrics: Option<Metrics>) -> Self {
        Self { inner: Arc::new(Inner { projects, metrics, files: Mutex::default() }) }
    }

    /// Tokens per model of the session `endpoint` (serving `served`), read up to now;
    /// `None` when it has no readable transcript. Prices what was added since the last
    /// look with `pricing` for the metrics.
    pub fn endpoint(
        &self,
        endpoint: &Endpoint,
        served: &WorkItemRef,
        pricing: &PricingConfig,
    ) -> Option<ByModel> {
        let path = self.transcript(endpoint, served)?;
        self.tokens(&path, &endpoint.harness, pricing)
    }

    /// Tokens per model of every session of `record` (the item's and its pull
    /// requests'), summed — a transcript two of them share (a pull request served by the
    /// item's own session) counted once; `None` when none has a readable transcript.
    pub fn record(&self, record: &LocalRecord, pricing: &PricingConfig) -> Option<ByModel> {
        let mut read = std::collections::HashSet::new();
        let mut sum: Option<ByModel> = None;
        for (served, endpoint) in &record.endpoints {
            let Some(path) = self.transcript(endpoint, served) else { continue };
            if !read.insert(path.clone()) {
                continue;
            }
            if let Some(tokens) = self.tokens(&path, &endpoint.harness, pricing) {
                add(sum.get_or_insert_default(), &tokens);
            }
        }
        sum
    }

    /// Where `endpoint`'s transcript is, resolved, if it has one here.
    fn transcript(&self, endpoint: &Endpoint, served: &WorkItemRef) -> Option<PathBuf> {
        endpoint_transcript(&self.inner.projects, endpoint, served).ok()?.resolve()
    }

    /// The tokens of the `harness` session's transcript at `path`; what this look added
    /// is counted into the metrics.
    fn tokens(&self, path: &Path, harness: &str, pricing: &PricingConfig) -> Option<ByModel> {
        let (now, added) = self.read(path)?;
        if let Some(metrics) = &self.inner.metrics
            && !added.is_empty()
        {
            // Counted as far as it is priced: a model without a price adds no cost.
            let usd = added
                .iter()
                .filter_map(|(model, tokens)| Some(cost(pricing.price_of(model)?, *tokens)))
                .sum();
            metrics.usage(harness, total(&added), usd);
        }
        Some(now)
    }

    /// The file at `path` read on from where the last look left off: its tokens per
    /// model, and what this look added.
    fn read(&self, path: &Path) -> Option<(ByModel, ByModel)> {
        let mut files = self.inner.files.lock().unwrap_or_else(PoisonError::into_inner);
        let read = files.entry(path.to_owned()).or_default();
        let before = read.tally.by_model();
        match read.so_far.read_on(path)? {
            Appended::Same => {}
            Appended::Grown(bytes) => read.tally.feed(&bytes),
            Appended::Anew(bytes) => {
                read.tally = Tally::default();
                read.tally.feed(&bytes);
            }
        }
        let now = read.tally.by_model();
        let added = now
            .iter()
            .filter_map(|(model, tokens)| {
                let was = before.get(model).copied().unwrap_or_default();
                let grew = minus(*tokens, was);
                (grew != Tokens::default()).then(|| (model.clone(), grew))
            })
            .collect();
        Some((now, added))
    }
}

/// What `now` counts beyond `was`, field by field (a file counted again from its start
/// adds nothing it had counted before).
fn minus(now: Tokens, was: Tokens) -> Tokens {
    Tokens {
        input_tokens: now.input_tokens.saturating_sub(was.input_tokens),
        output_tokens: now.output_tokens.saturating_sub(was.output_tokens),
        cache_write_tokens: now.cache_write_tokens.saturating_sub(was.cache_write_tokens),
        cache_read_tokens: now.cache_read_tokens.saturating_sub(was.cache_read_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(id: &str, input: u64, output: u64) -> String {
        let usage = serde_json::json!({"input_tokens": input, "output_tokens": output});
        let message = serde_json::json!({"id": id, "model": "claude-opus-4-8", "usage": usage});
        format!("{}\n", serde_json::json!({"type": "assistant", "message": message}))
    }

    #[test]
    fn a_transcript_is_read_on_from_where_the_last_look_left_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conv.jsonl");
        std::fs::write(&path, reply("a", 10, 1)).unwrap();
        let book = UsageBook::new(dir.path().to_owned());
        let (now, added) = book.read(&path).unwrap();
        assert_eq!((now["claude-opus-4-8"].input_tokens, added.len()), (10, 1));
        let (_, added) = book.read(&path).unwrap();
        assert!(added.is_empty(), "nothing new: nothing added");
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        let more = reply("a", 10, 1) + &reply("b", 5, 2);
        std::io::Write::write_all(&mut file, more.as_bytes()).unwrap();
        let (now, added) = book.read(&path).unwrap();
        assert_eq!(now["claude-opus-4-8"].input_tokens, 15, "message a counted once");
        assert_eq!(added["claude-opus-4-8"].output_tokens, 2);
        // Replaced by a shorter file: counted again from its start, adding nothing.
        std::fs::write(&path, reply("c", 1, 1)).unwrap();
        let (now, added) = book.read(&path).unwrap();
        assert_eq!(now["claude-opus-4-8"].input_tokens, 1);
        assert!(added.is_empty(), "{added:?}");
    }
}
