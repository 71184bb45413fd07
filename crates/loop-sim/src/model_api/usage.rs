//! Token usage the stand-in model answers: the four counters of Anthropic's `usage`
//! object, and the estimate it makes when a reply does not script them.
//!
//! The estimate is arithmetic on sizes, not a tokenizer: a token is about four characters
//! (rounded up, at least one). A request that carries `cache_control` is treated as
//! caching everything before its last message, per conversation: the conversation's first
//! such request writes that prefix to the cache, later ones read what an earlier one
//! wrote and write only what was added since. A request without `cache_control` pays for
//! all of its input. So a test that knows the sizes knows the sums, and one that must know
//! them exactly scripts them ([`super::Reply::with_usage`]).
//!
//! Pure: no IO, no clock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Anthropic's `usage` object, as answered in the JSON form and in the stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from or written to the cache.
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens written to the cache by this request.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the cache by this request.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Every input token, cached or not.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }
}

/// About four characters a token, rounded up; never zero.
pub fn tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// The sizes of a request that the input estimate needs, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputSize {
    /// System prompt, messages and tools together.
    pub whole: usize,
    /// The last message alone (part of `whole`): what no cache can hold yet.
    pub tail: usize,
    /// Whether the request asked for caching (`cache_control` anywhere in it).
    pub cached: bool,
}

/// The cache prefix each conversation holds, in tokens.
///
/// Keyed by conversation (`None` for requests that name none) and by whether the request
/// was a side request, so a session's title request does not disturb its turns' cache.
#[derive(Debug, Default)]
pub struct CacheLedger {
    held: BTreeMap<(Option<String>, bool), u64>,
}

impl CacheLedger {
    /// The input half of a request's usage (`output_tokens` is 0), recording what the
    /// request leaves in the cache.
    pub fn input_usage(&mut self, key: (Option<String>, bool), size: InputSize) -> Usage {
        let whole = tokens(size.whole);
        let tail = tokens(size.tail).min(whole);
        if !size.cached {
            return Usage { input_tokens: whole, ..Usage::default() };
        }
        let prefix = whole - tail;
        let held = self.held.entry(key).or_default();
        let read = (*held).min(prefix);
        *held = prefix;
        Usage {
            input_tokens: tail,
            cache_creation_input_tokens: prefix - read,
            cache_read_input_tokens: read,
            output_tokens: 0,
        }
    }

    /// Forgets every conversation's cache.
    pub fn clear(&mut self) {
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(whole: usize, tail: usize, cached: bool) -> InputSize {
        InputSize { whole, tail, cached }
    }

    #[test]
    fn a_token_is_four_characters_rounded_up_and_never_zero() {
        assert_eq!(tokens(0), 1);
        assert_eq!(tokens(1), 1);
        assert_eq!(tokens(4), 1);
        assert_eq!(tokens(5), 2);
        assert_eq!(tokens(400), 100);
    }

    #[test]
    fn without_cache_control_every_input_token_is_paid() {
        let mut ledger = CacheLedger::default();
        let usage = ledger.input_usage((None, false), size(400, 40, false));
        assert_eq!(usage, Usage { input_tokens: 100, ..Usage::default() });
    }

    #[test]
    fn a_conversation_writes_its_prefix_first_and_reads_it_after() {
        let mut ledger = CacheLedger::default();
        let key = || (Some("s1".to_owned()), false);
        let first = ledger.input_usage(key(), size(400, 40, true));
        assert_eq!((first.input_tokens, first.cache_creation_input_tokens), (10, 90));
        assert_eq!(first.cache_read_input_tokens, 0);
        // The next request repeats the first whole and adds 200 characters.
        let second = ledger.input_usage(key(), size(600, 80, true));
        assert_eq!(second.cache_read_input_tokens, 90, "what the first request wrote");
        assert_eq!(second.cache_creation_input_tokens, 40, "what was added since");
        assert_eq!(second.input_tokens, 20);
        assert_eq!(second.total_input(), 150, "the sum is the whole request either way");
        // Another conversation starts cold, and so does a side request of the first.
        let other = ledger.input_usage((Some("s2".to_owned()), false), size(600, 80, true));
        assert_eq!(other.cache_read_input_tokens, 0);
        let side = ledger.input_usage((Some("s1".to_owned()), true), size(600, 80, true));
        assert_eq!(side.cache_read_input_tokens, 0);
    }

    #[test]
    fn a_shrunk_conversation_reads_only_what_it_still_sends() {
        let mut ledger = CacheLedger::default();
        ledger.input_usage((None, false), size(800, 0, true));
        let compacted = ledger.input_usage((None, false), size(200, 0, true));
        assert_eq!(compacted.cache_read_input_tokens, 49);
        assert_eq!(compacted.cache_creation_input_tokens, 0);
        ledger.clear();
        let cold = ledger.input_usage((None, false), size(200, 0, true));
        assert_eq!(cold.cache_read_input_tokens, 0);
    }
}
