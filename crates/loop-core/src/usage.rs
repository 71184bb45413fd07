//! Tokens and cost of an agent's conversation, summed from its harness's transcript
//! (Claude Code's JSONL: `message.{id, model, usage}` on assistant lines).
//!
//! A [`Tally`] is fed the transcript's bytes as they are appended — the caller remembers
//! how far it read and hands over only what is new; a line cut at the end waits for the
//! rest. It sums `input_tokens`, `output_tokens`, `cache_creation_input_tokens` and
//! `cache_read_input_tokens` per model, counting each `message.id` once: one reply
//! written as several lines (one per content block) repeats its usage, and a line
//! written again keeps the larger count of each field. A line that is not JSON, or
//! carries no usage, is skipped.
//!
//! [`Usage::priced`] prices what a tally counted with `pricing.models` (the config's
//! table, longest prefix wins): a model with tokens and no price makes the cost unknown
//! (`None`), never a guessed figure.
//!
//! No IO: the daemon reads the file and feeds the bytes.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use crate::config::{ModelPrice, PricingConfig};

/// Token counts of one kind of use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// `cache_creation_input_tokens`.
    pub cache_write_tokens: u64,
    /// `cache_read_input_tokens`.
    pub cache_read_tokens: u64,
}

impl Tokens {
    /// The counts of one `message.usage` object (absent fields count 0); `None` when it
    /// is not an object.
    fn from_usage(usage: &Value) -> Option<Self> {
        let usage = usage.as_object()?;
        let field = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        Some(Self {
            input_tokens: field("input_tokens"),
            output_tokens: field("output_tokens"),
            cache_write_tokens: field("cache_creation_input_tokens"),
            cache_read_tokens: field("cache_read_input_tokens"),
        })
    }

    fn plus(self, other: Self) -> Self {
        Self {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_add(other.cache_write_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_add(other.cache_read_tokens),
        }
    }

    /// Each field the larger of the two: one message's usage seen again.
    fn max(self, other: Self) -> Self {
        Self {
            input_tokens: self.input_tokens.max(other.input_tokens),
            output_tokens: self.output_tokens.max(other.output_tokens),
            cache_write_tokens: self.cache_write_tokens.max(other.cache_write_tokens),
            cache_read_tokens: self.cache_read_tokens.max(other.cache_read_tokens),
        }
    }

    fn is_zero(self) -> bool {
        self == Self::default()
    }
}

/// Tokens per model.
pub type ByModel = BTreeMap<String, Tokens>;

/// What a transcript read so far counted.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Per message id: its model and its usage (the larger of each field seen).
    messages: HashMap<String, (String, Tokens)>,
    /// Usage on lines with no message id: nothing to de-duplicate them by.
    anonymous: ByModel,
    /// The bytes after the last newline fed: a line not yet written whole.
    partial: Vec<u8>,
}

impl Tally {
    /// Counts what `bytes`, the next bytes of the transcript, complete.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else { return };
        let rest = self.partial.split_off(last + 1);
        let ended = std::mem::replace(&mut self.partial, rest);
        for line in ended.split(|&b| b == b'\n') {
            self.line(line);
        }
    }

    /// Counts one transcript line; skips what is not an assistant message with usage.
    fn line(&mut self, line: &[u8]) {
        let Ok(value) = serde_json::from_slice::<Value>(line) else { return };
        let Some(message) = value.get("message") else { return };
        let Some(tokens) = message.get("usage").and_then(Tokens::from_usage) else { return };
        let model = message.get("model").and_then(Value::as_str).unwrap_or("").to_owned();
        match message.get("id").and_then(Value::as_str) {
            Some(id) => {
                let seen = self.messages.entry(id.to_owned()).or_insert((model, Tokens::default()));
                seen.1 = seen.1.max(tokens);
            }
            None => {
                let sum = self.anonymous.entry(model).or_default();
                *sum = sum.plus(tokens);
            }
        }
    }

    /// Tokens per model, models with none left out.
    pub fn by_model(&self) -> ByModel {
        let mut sums = self.anonymous.clone();
        for (model, tokens) in self.messages.values() {
            let sum = sums.entry(model.clone()).or_default();
            *sum = sum.plus(*tokens);
        }
        sums.retain(|_, tokens| !tokens.is_zero());
        sums
    }
}

/// Adds `more` into `into`, model by model (an item's sessions summed).
pub fn add(into: &mut ByModel, more: &ByModel) {
    for (model, tokens) in more {
        let sum = into.entry(model.clone()).or_default();
        *sum = sum.plus(*tokens);
    }
}

/// `by_model`'s tokens over every model.
pub fn total(by_model: &ByModel) -> Tokens {
    by_model.values().fold(Tokens::default(), |sum, t| sum.plus(*t))
}

/// What `tokens` cost at `price`, USD.
#[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
pub fn cost(price: &ModelPrice, tokens: Tokens) -> f64 {
    let per = |count: u64, usd: f64| count as f64 * usd / 1e6;
    per(tokens.input_tokens, price.input_per_mtok)
        + per(tokens.output_tokens, price.output_per_mtok)
        + per(tokens.cache_write_tokens, price.cache_write_per_mtok)
        + per(tokens.cache_read_tokens, price.cache_read_per_mtok)
}

/// Tokens summed over every model, and what they cost: the API's `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(flatten)]
    pub tokens: Tokens,
    /// USD; `None` ("cost unknown") when a model with tokens has no price.
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// `by_model` summed and priced by `pricing` (see the module docs); the cost is
    /// rounded to a millionth of a dollar.
    pub fn priced(by_model: &ByModel, pricing: &PricingConfig) -> Self {
        let tokens = total(by_model);
        let cost = by_model.iter().try_fold(0.0, |sum, (model, tokens)| {
            pricing.price_of(model).map(|price| sum + cost(price, *tokens))
        });
        Self { tokens, cost_usd: cost.map(|usd| (usd * 1e6).round() / 1e6) }
    }
}

impl std::fmt::Display for Usage {
    /// `1200 input, 80 output, 5000 cache write, 90000 cache read tokens; $0.0421` (or
    /// `; cost unknown`), as the CLI and comments say it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.tokens;
        write!(
            f,
            "{} input, {} output, {} cache write, {} cache read tokens; ",
            t.input_tokens, t.output_tokens, t.cache_write_tokens, t.cache_read_tokens
        )?;
        match self.cost_usd {
            Some(usd) => write!(f, "${usd:.4}"),
            None => f.write_str("cost unknown"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelPrice;

    fn line(id: Option<&str>, model: &str, usage: Value) -> String {
        let mut message = serde_json::json!({"model": model, "usage": usage});
        if let Some(id) = id {
            message["id"] = id.into();
        }
        format!("{}\n", serde_json::json!({"type": "assistant", "message": message}))
    }

    fn usage(input: u64, output: u64, write: u64, read: u64) -> Value {
        serde_json::json!({
            "input_tokens": input,
            "output_tokens": output,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        })
    }

    fn tokens(input: u64, output: u64, write: u64, read: u64) -> Tokens {
        Tokens {
            input_tokens: input,
            output_tokens: output,
            cache_write_tokens: write,
            cache_read_tokens: read,
        }
    }

    #[test]
    fn a_reply_written_as_several_lines_is_counted_once_per_model() {
        let mut tally = Tally::default();
        let transcript = [
            "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n".to_owned(),
            line(Some("msg_1"), "claude-opus-4-8", usage(10, 5, 100, 0)),
            line(Some("msg_1"), "claude-opus-4-8", usage(10, 5, 100, 0)),
            line(Some("msg_2"), "claude-opus-4-8", usage(3, 7, 0, 100)),
            line(Some("msg_3"), "claude-haiku-4-5", usage(1, 1, 0, 0)),
            line(None, "claude-haiku-4-5", usage(2, 2, 0, 0)),
            line(Some("msg_4"), "<synthetic>", usage(0, 0, 0, 0)),
        ];
        tally.feed(transcript.concat().as_bytes());
        let by_model = tally.by_model();
        assert_eq!(by_model["claude-opus-4-8"], tokens(13, 12, 100, 100));
        assert_eq!(by_model["claude-haiku-4-5"], tokens(3, 3, 0, 0));
        assert!(!by_model.contains_key("<synthetic>"), "no tokens: not listed");
    }

    #[test]
    fn a_message_written_again_keeps_the_larger_count_of_each_field() {
        let mut tally = Tally::default();
        tally.feed(line(Some("m"), "x", usage(10, 1, 0, 0)).as_bytes());
        tally.feed(line(Some("m"), "x", usage(10, 40, 0, 0)).as_bytes());
        assert_eq!(tally.by_model()["x"], tokens(10, 40, 0, 0));
    }

    #[test]
    fn bytes_fed_in_pieces_count_a_line_once_it_ends_and_skip_malformed_lines() {
        let whole = line(Some("m"), "x", usage(4, 2, 0, 0));
        let (head, tail) = whole.split_at(whole.len() / 2);
        let mut tally = Tally::default();
        tally.feed(b"not json\n{\"message\":{\"usage\":\"none\"}}\n[1,2]\n\n");
        tally.feed(head.as_bytes());
        assert!(tally.by_model().is_empty(), "half a line counts nothing");
        tally.feed(tail.as_bytes());
        assert_eq!(tally.by_model()["x"], tokens(4, 2, 0, 0));
    }

    fn pricing(models: &[(&str, ModelPrice)]) -> PricingConfig {
        PricingConfig { models: models.iter().map(|(m, p)| ((*m).to_owned(), *p)).collect() }
    }

    const OPUS: ModelPrice = ModelPrice {
        input_per_mtok: 15.0,
        output_per_mtok: 75.0,
        cache_write_per_mtok: 18.75,
        cache_read_per_mtok: 1.5,
    };
    const OPUS_NEW: ModelPrice = ModelPrice {
        input_per_mtok: 5.0,
        output_per_mtok: 25.0,
        cache_write_per_mtok: 6.25,
        cache_read_per_mtok: 0.5,
    };

    #[test]
    fn cost_is_priced_by_the_longest_prefix_and_unknown_without_a_price() {
        let table = pricing(&[("claude-opus-4", OPUS), ("claude-opus-4-5", OPUS_NEW)]);
        let one = |model: &str| -> ByModel {
            [(model.to_owned(), tokens(1_000_000, 100_000, 200_000, 2_000_000))].into()
        };
        let old = Usage::priced(&one("claude-opus-4-20250514"), &table);
        assert_eq!(old.cost_usd, Some(15.0 + 7.5 + 3.75 + 3.0));
        let new = Usage::priced(&one("claude-opus-4-5-20251101"), &table);
        assert_eq!(new.cost_usd, Some(5.0 + 2.5 + 1.25 + 1.0));
        let mut mixed = one("claude-opus-4-5");
        add(&mut mixed, &one("claude-sonnet-9"));
        let unknown = Usage::priced(&mixed, &table);
        assert_eq!(unknown.cost_usd, None, "one model without a price: cost unknown");
        assert_eq!(unknown.tokens, tokens(2_000_000, 200_000, 400_000, 4_000_000));
        assert_eq!(Usage::priced(&ByModel::new(), &table).cost_usd, Some(0.0));
        assert_eq!(
            unknown.to_string(),
            "2000000 input, 200000 output, 400000 cache write, 4000000 cache read tokens; cost unknown"
        );
        assert!(old.to_string().ends_with("tokens; $29.2500"), "{old}");
        let shown = serde_json::to_value(unknown).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"inputTokens": 2_000_000, "outputTokens": 200_000,
                "cacheWriteTokens": 400_000, "cacheReadTokens": 4_000_000, "costUsd": null})
        );
    }
}
