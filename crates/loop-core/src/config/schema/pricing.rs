//! `pricing`: what a model's tokens cost, in USD per million tokens, to price the usage
//! summed from a session's transcript (`crate::usage`).
//!
//! `pricing.models.<model id or prefix>` is merged over the shipped table: a key given
//! replaces the shipped one of that name, a new key adds a price, and `null` removes a
//! shipped price (that model's cost is then unknown). The longest key a model id starts
//! with prices it.

use std::collections::BTreeMap;

use saphyr::{MarkedYamlOwned as Node, ScalarOwned as Scalar, YamlDataOwned as Data};
use serde::Serialize;

use crate::config::ProblemKind;
use crate::config::read::{
    Block, Diagnostics, Section, join, line_of, number_at_least, wrong_type,
};

/// The shipped prices: Anthropic's public pricing page
/// (<https://platform.claude.com/docs/en/about-claude/pricing>, "Model pricing", read
/// 2026-12-04): base input, output, 5-minute cache writes, cache hits.
const SHIPPED: &[(&str, [f64; 4])] = &[
    ("claude-opus-5", [5.0, 25.0, 6.25, 0.50]),
    ("claude-opus-4-8", [5.0, 25.0, 6.25, 0.50]),
    ("claude-opus-4-7", [5.0, 25.0, 6.25, 0.50]),
    ("claude-opus-4-6", [5.0, 25.0, 6.25, 0.50]),
    ("claude-opus-4-5", [5.0, 25.0, 6.25, 0.50]),
    ("claude-opus-4", [15.0, 75.0, 18.75, 1.50]),
    ("claude-sonnet-4", [3.0, 15.0, 3.75, 0.30]),
    ("claude-3-7-sonnet", [3.0, 15.0, 3.75, 0.30]),
    ("claude-haiku-4-5", [1.0, 5.0, 1.25, 0.10]),
    ("claude-3-5-haiku", [0.80, 4.0, 1.0, 0.08]),
    ("claude-3-opus", [15.0, 75.0, 18.75, 1.50]),
    ("claude-3-haiku", [0.25, 1.25, 0.30, 0.03]),
];

/// `pricing`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PricingConfig {
    /// Model id or prefix → its price; the shipped table with the file's keys merged in.
    pub models: BTreeMap<String, ModelPrice>,
}

/// One model's price, USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelPrice {
    #[serde(rename = "inputPerMTok")]
    pub input_per_mtok: f64,
    #[serde(rename = "outputPerMTok")]
    pub output_per_mtok: f64,
    #[serde(rename = "cacheWritePerMTok")]
    pub cache_write_per_mtok: f64,
    #[serde(rename = "cacheReadPerMTok")]
    pub cache_read_per_mtok: f64,
}

impl PricingConfig {
    /// The price of `model`: the longest key it starts with.
    pub fn price_of(&self, model: &str) -> Option<&ModelPrice> {
        self.models
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, price)| price)
    }
}

fn shipped() -> BTreeMap<String, ModelPrice> {
    SHIPPED
        .iter()
        .map(|(model, [input, output, write, read])| {
            let price = ModelPrice {
                input_per_mtok: *input,
                output_per_mtok: *output,
                cache_write_per_mtok: *write,
                cache_read_per_mtok: *read,
            };
            ((*model).to_owned(), price)
        })
        .collect()
}

impl Section for PricingConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { models: b.field_by("models", shipped, read_models) }
    }
}

/// `pricing.models`: the shipped table with each key of the mapping merged in (`null`
/// removes one). A bad price is reported and that key left as shipped.
fn read_models(
    node: &Node,
    path: &str,
    diags: &mut Diagnostics,
) -> Option<BTreeMap<String, ModelPrice>> {
    let Data::Mapping(entries) = &node.data else {
        wrong_type(node, path, diags, "a mapping of model ids or prefixes to prices");
        return None;
    };
    let mut models = shipped();
    for (key, value) in entries {
        let Data::Value(Scalar::String(model)) = &key.data else {
            wrong_type(key, path, diags, "a model id or prefix as a key");
            continue;
        };
        if model.is_empty() {
            let message = "a model id or prefix may not be empty".to_owned();
            diags.error(path, line_of(key), ProblemKind::BadValue, message);
            continue;
        }
        let at = join(path, model);
        if matches!(value.data, Data::Value(Scalar::Null)) {
            models.remove(model.as_str());
            continue;
        }
        let mut block = Block::new(Some(value), at, diags);
        let price = read_price(&mut block);
        block.finish();
        if let Some(price) = price {
            models.insert(model.clone(), price);
        }
    }
    Some(models)
}

/// One model's price: every rate required; `None` when one is missing or invalid.
fn read_price(b: &mut Block<'_, '_>) -> Option<ModelPrice> {
    let mut rate = |key: &str| {
        let path = join(b.path(), key);
        match b.take(key) {
            Some(node) => number_at_least(0.0)(node, &path, b.diags()),
            None => {
                let message = "required key is missing".to_owned();
                b.diags().error(&path, None, ProblemKind::MissingKey, message);
                None
            }
        }
    };
    let input = rate("inputPerMTok");
    let output = rate("outputPerMTok");
    let cache_write = rate("cacheWritePerMTok");
    let cache_read = rate("cacheReadPerMTok");
    Some(ModelPrice {
        input_per_mtok: input?,
        output_per_mtok: output?,
        cache_write_per_mtok: cache_write?,
        cache_read_per_mtok: cache_read?,
    })
}

default_from_nothing!(PricingConfig);
