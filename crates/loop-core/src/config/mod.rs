//! The configuration: `cli-config.yaml` parsed, validated and typed.
//!
//! [`parse`] takes the file's text and returns the typed [`Config`] with every default
//! filled in, plus warnings — or every problem the file has, each with its key path and
//! line, never only the first. The pipeline:
//!
//! 1. YAML (saphyr, with positions) — a syntax error is one problem with its line;
//! 2. the version gate ([`version`]): keys removed by an older version and a stale
//!    `version` refuse the file, naming `the-loop config migrate`;
//! 3. the typed read (`schema/`, through the walker in `read.rs`): wrong types, values
//!    outside an enum or range, malformed repositories / refs / logins and unknown keys are
//!    errors; keys accepted but not implemented yet (the list in `inert.rs`, holding no
//!    value) and obsolete keys are warnings;
//! 4. advice on valid but risky settings (no authorized users, unbounded repositories, an
//!    event filter without `issues` or `pull_request`).
//!
//! No IO here: callers read the file (a missing file is the empty text, i.e. all
//! defaults) and print what comes back.

mod inert;
mod read;
mod schema;
pub mod version;

use saphyr::{
    LoadableYamlNode, MarkedYamlOwned as Node, ScalarOwned as Scalar, YamlDataOwned as Data,
};
use serde_json::Value as Json;

pub use inert::NOT_IMPLEMENTED;
pub use read::{Problem, ProblemKind};
pub use schema::*;
pub use version::{CURRENT_VERSION, Change, MIGRATE_COMMAND, migrate};

use read::Diagnostics;

/// Keys whose mapping is keyed by the operator's own names (model ids), not the schema's:
/// documented as one key, and any name is allowed under them.
pub const NAMED_MAPPINGS: &[&str] = &["pricing.models"];

/// A commented starter config that passes `the-loop config check`.
pub const STARTER: &str = include_str!("starter.yaml");

/// A config that loaded, and what the operator should hear about it.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<Problem>,
}

/// Why a config file was refused: every problem found, and the warnings beside them.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", summary(problems))]
pub struct ConfigError {
    pub problems: Vec<Problem>,
    pub warnings: Vec<Problem>,
}

impl ConfigError {
    fn one(problem: Problem) -> Self {
        Self { problems: vec![problem], warnings: Vec::new() }
    }

    /// Whether `the-loop config migrate` fixes (some of) it.
    pub fn needs_migration(&self) -> bool {
        self.problems
            .iter()
            .any(|p| matches!(p.kind, ProblemKind::RemovedKey | ProblemKind::StaleVersion))
    }
}

fn summary(problems: &[Problem]) -> String {
    match problems {
        [one] => format!("invalid config: {one}"),
        _ => {
            let all: Vec<String> = problems.iter().map(ToString::to_string).collect();
            format!("invalid config ({} problems): {}", problems.len(), all.join("; "))
        }
    }
}

/// Parses, gates and validates a config file's text. Empty text is all defaults.
pub fn parse(text: &str) -> Result<Loaded, ConfigError> {
    let root = load(text)?;
    let mut diags = Diagnostics::default();
    if let Some(root) = &root {
        version::gate(root, &mut diags);
        if !diags.errors.is_empty() {
            return Err(refusal(diags));
        }
    }
    let config: Config = read::read_section(root.as_ref(), String::new(), &mut diags);
    advise(&config, &mut diags);
    if diags.errors.is_empty() {
        Ok(Loaded { config, warnings: in_file_order(diags.warnings) })
    } else {
        Err(refusal(diags))
    }
}

fn refusal(diags: Diagnostics) -> ConfigError {
    ConfigError { problems: in_file_order(diags.errors), warnings: in_file_order(diags.warnings) }
}

/// The walker reads keys in schema order; the operator reads the file top to bottom.
/// Problems without a line keep their order, after the others.
fn in_file_order(mut problems: Vec<Problem>) -> Vec<Problem> {
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    problems
}

/// Parses a config file's text into a plain document (for [`migrate`]), without the gate
/// or the schema. Empty text is an empty mapping.
pub fn parse_document(text: &str) -> Result<Json, ConfigError> {
    Ok(load(text)?.map_or_else(|| Json::Object(serde_json::Map::new()), |root| to_json(&root)))
}

/// Nesting deeper than any config needs. Refused before a tree is built: walking or
/// dropping a tree thousands of levels deep would overflow the stack.
const MAX_DEPTH: usize = 64;

/// The single YAML document in `text`, `None` when there is none.
fn load(text: &str) -> Result<Option<Node>, ConfigError> {
    refuse_deep_nesting(text)?;
    let mut docs = Node::load_from_str(text).map_err(|err| {
        ConfigError::one(Problem {
            path: String::new(),
            line: Some(err.marker().line()),
            kind: ProblemKind::Syntax,
            message: format!("not valid YAML: {}", err.info()),
        })
    })?;
    if docs.len() > 1 {
        return Err(ConfigError::one(Problem {
            path: String::new(),
            line: docs.get(1).and_then(read::line_of),
            kind: ProblemKind::Syntax,
            message: format!("expected one YAML document, found {}", docs.len()),
        }));
    }
    Ok(docs.pop())
}

/// Counts nesting on the parser's event stream (no tree) and refuses past [`MAX_DEPTH`].
/// A syntax error is left for the loader to report.
fn refuse_deep_nesting(text: &str) -> Result<(), ConfigError> {
    use saphyr_parser::{Event, Parser};
    let mut depth = 0usize;
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { return Ok(()) };
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(ConfigError::one(Problem {
                        path: String::new(),
                        line: Some(span.start.line()),
                        kind: ProblemKind::Syntax,
                        message: format!("nested more than {MAX_DEPTH} levels deep"),
                    }));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Warnings about settings that are valid but rarely what the operator wants.
fn advise(config: &Config, diags: &mut Diagnostics) {
    if config.routing.authorized_users.is_empty() {
        diags.warning(
            "routing.authorizedUsers",
            None,
            ProblemKind::Advice,
            "empty: nothing human-authored will be acted on; add your GitHub login".to_owned(),
        );
    }
    if config.repositories.is_empty() {
        diags.warning(
            "repositories",
            None,
            ProblemKind::Advice,
            "empty: every repository is in bounds; list the repositories this instance works with"
                .to_owned(),
        );
    }
    let events = &config.webhooks.gh_webhook.events;
    for needed in ["issues", "pull_request"] {
        if !events.iter().any(|e| e == needed) {
            diags.warning(
                "webhooks.ghWebhook.events",
                None,
                ProblemKind::Advice,
                format!("`{needed}` is not in the list: openings, labels and closures of that kind are never seen"),
            );
        }
    }
}

/// A YAML node as plain JSON (keys as text, anchors and tags dropped).
fn to_json(node: &Node) -> Json {
    match &node.data {
        Data::Value(Scalar::Null) | Data::Alias(_) | Data::BadValue | Data::Representation(..) => {
            Json::Null
        }
        Data::Value(Scalar::Boolean(b)) => Json::Bool(*b),
        Data::Value(Scalar::Integer(i)) => Json::from(*i),
        Data::Value(Scalar::FloatingPoint(f)) => {
            serde_json::Number::from_f64(f.into_inner()).map_or(Json::Null, Json::Number)
        }
        Data::Value(Scalar::String(s)) => Json::String(s.clone()),
        Data::Sequence(items) => Json::Array(items.iter().map(to_json).collect()),
        Data::Mapping(map) => Json::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match to_json(k) {
                        Json::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Data::Tagged(_, inner) => to_json(inner),
    }
}

/// Renders a JSON document (the effective config, a migrated file) as YAML text.
pub fn to_yaml(doc: &Json) -> String {
    let yaml = from_json(doc);
    let mut out = String::new();
    let mut emitter = saphyr::YamlEmitter::new(&mut out);
    emitter
        .dump(&yaml)
        .expect("invariant: emitting into a String cannot fail and JSON has no aliases");
    let body = out.strip_prefix("---\n").unwrap_or(&out);
    format!("{}\n", body.trim_end())
}

fn from_json(doc: &Json) -> saphyr::Yaml<'static> {
    use saphyr::{Scalar as S, Yaml};
    match doc {
        Json::Null => Yaml::Value(S::Null),
        Json::Bool(b) => Yaml::Value(S::Boolean(*b)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Value(S::Integer(i)),
            None => Yaml::Value(S::FloatingPoint(n.as_f64().unwrap_or(f64::NAN).into())),
        },
        Json::String(s) => Yaml::Value(S::String(s.clone().into())),
        Json::Array(items) => Yaml::Sequence(items.iter().map(from_json).collect()),
        Json::Object(map) => Yaml::Mapping(
            map.iter()
                .map(|(k, v)| (Yaml::Value(S::String(k.clone().into())), from_json(v)))
                .collect(),
        ),
    }
}

impl Config {
    /// The effective config as JSON (camelCase keys, defaults filled in).
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self)
            .expect("invariant: the config serializes to JSON (string keys, finite numbers)")
    }
}

#[cfg(test)]
mod tests;
