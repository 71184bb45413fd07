//! The version gate and the migration of removed keys (reference §1.4).
//!
//! The gate refuses narrowly: a file is refused only when it carries a key an older
//! version had (which this one would otherwise misread) or declares a `version` older than
//! [`CURRENT_VERSION`]. An absent `version` is accepted. [`migrate`] is the pure rewrite
//! `the-loop config migrate` applies: deterministic, idempotent, every move reported.
//!
//! Nothing here reads or writes files.

use std::fmt;

use saphyr::{MarkedYamlOwned as Node, ScalarOwned as Scalar, YamlDataOwned as Data};
use serde_json::{Map, Value as Json};

use super::read::{Diagnostics, ProblemKind, line_of};

/// The schema version this build writes and reads without migration.
pub const CURRENT_VERSION: &str = "0.5.0";

/// What refuses a stale file: the command that fixes it.
pub const MIGRATE_COMMAND: &str = "the-loop config migrate";

/// A key an older version had, and what took its place.
#[derive(Debug, Clone, Copy)]
pub struct RemovedKey {
    pub path: &'static [&'static str],
    pub replacement: &'static str,
    pub why: &'static str,
}

/// Every removed key the gate refuses. `migrate` moves each one.
pub const REMOVED_KEYS: &[RemovedKey] = &[
    RemovedKey {
        path: &["routing", "control", "ghBinary"],
        replacement: "integrations.github.cli.binary",
        why: "one `gh` binary serves every caller",
    },
    RemovedKey {
        path: &["routing", "reactions", "ghBinary"],
        replacement: "integrations.github.cli.binary",
        why: "one `gh` binary serves every caller",
    },
    RemovedKey {
        path: &["routing", "announce", "ghBinary"],
        replacement: "integrations.github.cli.binary",
        why: "one `gh` binary serves every caller",
    },
    RemovedKey {
        path: &["polling", "stateFile"],
        replacement: "state.root",
        why: "the poll ledger became a directory of records",
    },
    RemovedKey {
        path: &["webhooks", "ghWebhook", "routing"],
        replacement: "routing",
        why: "routing is shared by both ingresses, so it moved to the top level",
    },
    RemovedKey {
        path: &["integrations", "slack"],
        replacement: "channels.slack",
        why: "Slack became a channel; its settings do not convert",
    },
];

/// A version string as the reference compares it: each dot-separated chunk keeps only its
/// digits (none counts as 0), and a shorter tuple is older, so `0.5` < `0.5.0`.
fn version_tuple(version: &str) -> Vec<u64> {
    version
        .split('.')
        .map(|chunk| {
            let digits: String = chunk.chars().filter(char::is_ascii_digit).collect();
            digits.parse().unwrap_or(0)
        })
        .collect()
}

/// Whether a declared version is older than [`CURRENT_VERSION`].
pub fn is_older(version: &str) -> bool {
    version_tuple(version) < version_tuple(CURRENT_VERSION)
}

fn scalar_text(node: &Node) -> Option<String> {
    match &node.data {
        Data::Value(Scalar::String(s)) => Some(s.clone()),
        Data::Value(Scalar::Integer(i)) => Some(i.to_string()),
        Data::Value(Scalar::FloatingPoint(f)) => Some(f.to_string()),
        _ => None,
    }
}

/// The key node and value node at `path` under `node`, if present.
fn find<'n>(node: &'n Node, path: &[&str]) -> Option<(&'n Node, &'n Node)> {
    let (first, rest) = path.split_first()?;
    let Data::Mapping(map) = &node.data else { return None };
    let (key, value) = map
        .iter()
        .find(|(k, _)| matches!(&k.data, Data::Value(Scalar::String(s)) if s == first))?;
    if rest.is_empty() { Some((key, value)) } else { find(value, rest) }
}

/// Records a refusal for every removed key present and for a stale `version`.
pub(crate) fn gate(root: &Node, diags: &mut Diagnostics) {
    for removed in REMOVED_KEYS {
        if let Some((key, _)) = find(root, removed.path) {
            diags.error(
                &removed.path.join("."),
                line_of(key),
                ProblemKind::RemovedKey,
                format!(
                    "removed key, replaced by `{}` ({}); it is not being ignored: run `{MIGRATE_COMMAND}`",
                    removed.replacement, removed.why
                ),
            );
        }
    }
    if let Some((_, value)) = find(root, &["version"])
        && let Some(version) = scalar_text(value)
        && is_older(&version)
    {
        diags.error(
            "version",
            line_of(value),
            ProblemKind::StaleVersion,
            format!(
                "the file declares version {version}, older than {CURRENT_VERSION}: run `{MIGRATE_COMMAND}`"
            ),
        );
    }
}

/// One thing [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A key was moved to its replacement.
    Moved { from: String, to: String },
    /// A key was removed; `why` says what, if anything, replaces it.
    Removed { key: String, why: String },
    /// A value was dropped because the destination already had another.
    Dropped { key: String, value: String, kept: String },
    /// `version` was set.
    VersionSet { from: Option<String>, to: &'static str },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Moved { from, to } => write!(f, "moved `{from}` to `{to}`"),
            Self::Removed { key, why } => write!(f, "removed `{key}`: {why}"),
            Self::Dropped { key, value, kept } => {
                write!(f, "dropped `{key}` = {value}: the existing {kept} wins")
            }
            Self::VersionSet { from: Some(from), to } => {
                write!(f, "set `version` from {from} to {to}")
            }
            Self::VersionSet { from: None, to } => write!(f, "set `version` to {to}"),
        }
    }
}

/// Rewrites a config document written for an older version into the current shape.
///
/// Pure and deterministic; running it on its own output changes nothing and reports
/// nothing. A document that is not a mapping is returned unchanged.
pub fn migrate(mut doc: Json) -> (Json, Vec<Change>) {
    let mut changes = Vec::new();
    let Some(root) = doc.as_object_mut() else { return (doc, changes) };
    migrate_gh_binary(root, &mut changes);
    if let Some(polling) = root.get_mut("polling").and_then(Json::as_object_mut)
        && polling.remove("stateFile").is_some()
    {
        changes.push(Change::Removed {
            key: "polling.stateFile".to_owned(),
            why: "the ledger now lives under `state.root`; the old file is still read forward once"
                .to_owned(),
        });
    }
    promote_routing(root, &mut changes);
    if let Some(integrations) = root.get_mut("integrations").and_then(Json::as_object_mut)
        && integrations.remove("slack").is_some()
    {
        changes.push(Change::Removed {
            key: "integrations.slack".to_owned(),
            why: "no conversion is possible; configure `channels.slack` (botTokenEnv, appTokenEnv, channel)"
                .to_owned(),
        });
        remove_if_empty(root, "integrations");
    }
    set_version(root, &mut changes);
    (doc, changes)
}

/// Every `ghBinary` under the control/reactions/announce blocks (top-level and the old
/// nested `webhooks.ghWebhook.routing`) becomes one `integrations.github.cli.binary`.
fn migrate_gh_binary(root: &mut Map<String, Json>, changes: &mut Vec<Change>) {
    let mut found: Vec<(String, String)> = Vec::new();
    for prefix in [&["routing"][..], &["webhooks", "ghWebhook", "routing"][..]] {
        for block in ["control", "reactions", "announce"] {
            let mut path: Vec<&str> = prefix.to_vec();
            path.push(block);
            if let Some(map) = object_at(root, &path)
                && let Some(value) = map.remove("ghBinary")
            {
                let key = format!("{}.ghBinary", path.join("."));
                found.push((key, value.as_str().map_or_else(|| value.to_string(), str::to_owned)));
            }
        }
    }
    if found.is_empty() {
        return;
    }
    let mut values: Vec<&String> = found.iter().map(|(_, v)| v).collect();
    values.sort();
    values.dedup();
    let target = "integrations.github.cli.binary";
    let existing = object_at(root, &["integrations", "github", "cli"])
        .and_then(|cli| cli.get("binary").cloned());
    let chosen = match existing {
        Some(existing) => existing.as_str().map_or_else(|| existing.to_string(), str::to_owned),
        None => {
            let first = values[0].clone();
            ensure_object(root, &["integrations", "github", "cli"])
                .insert("binary".to_owned(), Json::String(first.clone()));
            first
        }
    };
    for (key, value) in &found {
        if *value == chosen {
            changes.push(Change::Moved { from: key.clone(), to: target.to_owned() });
        } else {
            changes.push(Change::Dropped {
                key: key.clone(),
                value: format!("{value:?}"),
                kept: format!("`{target}` = {chosen:?}"),
            });
        }
    }
}

/// `webhooks.ghWebhook.routing` moves to top-level `routing`; where both set a key, the
/// top-level one wins key by key and each dropped differing value is reported.
fn promote_routing(root: &mut Map<String, Json>, changes: &mut Vec<Change>) {
    let Some(nested) =
        object_at(root, &["webhooks", "ghWebhook"]).and_then(|gh| gh.remove("routing"))
    else {
        return;
    };
    let from = "webhooks.ghWebhook.routing";
    match (root.get_mut("routing"), nested) {
        (Some(Json::Object(top)), Json::Object(nested)) => {
            for (key, value) in nested {
                match top.get(&key) {
                    None => {
                        top.insert(key.clone(), value);
                    }
                    Some(kept) if *kept == value => {}
                    Some(kept) => changes.push(Change::Dropped {
                        key: format!("{from}.{key}"),
                        value: value.to_string(),
                        kept: format!("`routing.{key}` = {kept}"),
                    }),
                }
            }
            changes.push(Change::Moved { from: from.to_owned(), to: "routing".to_owned() });
        }
        (Some(top @ Json::Object(_)), nested) => {
            changes.push(Change::Dropped {
                key: from.to_owned(),
                value: nested.to_string(),
                kept: format!("`routing` = {top}"),
            });
        }
        (top, nested) => {
            if let Some(top) = top.filter(|top| !top.is_null()) {
                changes.push(Change::Dropped {
                    key: "routing".to_owned(),
                    value: top.to_string(),
                    kept: format!("`{from}` (a scalar `routing` cannot hold settings)"),
                });
            }
            root.insert("routing".to_owned(), nested);
            changes.push(Change::Moved { from: from.to_owned(), to: "routing".to_owned() });
        }
    }
    if let Some(webhooks) = root.get_mut("webhooks").and_then(Json::as_object_mut) {
        remove_if_empty(webhooks, "ghWebhook");
    }
    remove_if_empty(root, "webhooks");
}

fn set_version(root: &mut Map<String, Json>, changes: &mut Vec<Change>) {
    let declared = match root.get("version") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    if declared.as_deref().is_some_and(|v| !is_older(v)) {
        return;
    }
    // `version` goes first, where a reader looks for it.
    let rest = std::mem::take(root);
    root.insert("version".to_owned(), Json::String(CURRENT_VERSION.to_owned()));
    root.extend(rest.into_iter().filter(|(key, _)| key != "version"));
    changes.push(Change::VersionSet { from: declared, to: CURRENT_VERSION });
}

fn object_at<'m>(
    root: &'m mut Map<String, Json>,
    path: &[&str],
) -> Option<&'m mut Map<String, Json>> {
    let mut map = root;
    for key in path {
        map = map.get_mut(*key)?.as_object_mut()?;
    }
    Some(map)
}

/// The mapping at `path`, created (replacing anything that is not a mapping) if needed.
fn ensure_object<'m>(root: &'m mut Map<String, Json>, path: &[&str]) -> &'m mut Map<String, Json> {
    let mut map = root;
    for key in path {
        let slot = map.entry((*key).to_owned()).or_insert_with(|| Json::Object(Map::new()));
        if !slot.is_object() {
            *slot = Json::Object(Map::new());
        }
        map = match slot {
            Json::Object(inner) => inner,
            _ => unreachable!("invariant: the slot was made a mapping just above"),
        };
    }
    map
}

fn remove_if_empty(map: &mut Map<String, Json>, key: &str) {
    if map.get(key).is_some_and(|v| v.as_object().is_some_and(Map::is_empty)) {
        map.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_compare_as_digit_tuples_and_shorter_is_older() {
        assert!(is_older("0.3.0"));
        assert!(is_older("0.4.9"));
        assert!(is_older("0.5"), "the reference's quirk: 0.5 < 0.5.0");
        assert!(!is_older("0.5.0"));
        assert!(!is_older("0.8.0"));
        assert!(!is_older("v0.5.0"));
        assert!(!is_older("1.0"));
    }

    #[test]
    fn gh_binaries_collapse_into_one_and_disagreement_is_reported() {
        let (doc, changes) = migrate(json!({
            "version": "0.4.0",
            "routing": {"control": {"ghBinary": "/opt/gh"}, "reactions": {"ghBinary": "/usr/bin/gh"}},
        }));
        assert_eq!(doc["integrations"]["github"]["cli"]["binary"], "/opt/gh");
        assert_eq!(doc["routing"], json!({"control": {}, "reactions": {}}));
        assert!(changes.iter().any(
            |c| matches!(c, Change::Dropped { key, .. } if key == "routing.reactions.ghBinary")
        ));
        assert!(
            changes
                .contains(&Change::VersionSet { from: Some("0.4.0".into()), to: CURRENT_VERSION })
        );
    }

    #[test]
    fn nested_routing_is_promoted_and_top_level_wins_key_by_key() {
        let (doc, changes) = migrate(json!({
            "webhooks": {"ghWebhook": {"routing": {"enabled": true, "defaultHarness": "cursor"}}},
            "routing": {"defaultHarness": "claude"},
        }));
        assert_eq!(doc["routing"], json!({"defaultHarness": "claude", "enabled": true}));
        assert!(doc.get("webhooks").is_none(), "the emptied husk is removed: {doc}");
        assert!(changes.iter().any(|c| matches!(c, Change::Dropped { key, .. } if key == "webhooks.ghWebhook.routing.defaultHarness")));
    }

    #[test]
    fn migration_is_idempotent() {
        let old = json!({
            "version": "0.3.0",
            "polling": {"stateFile": "x.json", "enabled": true},
            "integrations": {"slack": {"token": "t"}},
            "webhooks": {"ghWebhook": {"port": 9000, "routing": {"control": {"ghBinary": "gh2"}}}},
        });
        let (once, changes) = migrate(old);
        assert!(!changes.is_empty());
        assert_eq!(
            once.as_object().and_then(|m| m.keys().next()).map(String::as_str),
            Some("version")
        );
        let (twice, again) = migrate(once.clone());
        assert_eq!(twice, once);
        assert!(again.is_empty(), "{again:?}");
    }
}
