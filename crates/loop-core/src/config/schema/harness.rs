//! The harness keys under `routing`: extra arguments (`harnessArgs`), the models and
//! efforts a work item may choose (`harnessChoices`), pre-seeded trust (`harnessTrust`)
//! and the-loop's Claude Code plugin (`harnessPlugins`).

use saphyr::MarkedYamlOwned as Node;
use serde::Serialize;

use crate::config::ProblemKind;
use crate::config::read::{
    Block, Diagnostics, Section, bad_value, config_enum, line_of, string, wrong_type,
};

/// `routing.harnessArgs`: extra arguments per harness, passed verbatim.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarnessArgsConfig {
    pub claude: Vec<String>,
    pub cursor: Vec<String>,
}

impl Section for HarnessArgsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { claude: b.field("claude", Vec::new), cursor: b.field("cursor", Vec::new) }
    }
}

/// `routing.harnessChoices`: per harness, the models and efforts a work item may choose
/// (its state file's `model` and `effort`, docs/process-graph.md). A choice outside them
/// is refused and the session launches on the operator's own arguments; nothing is
/// offered by default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarnessChoicesConfig {
    pub claude: ClaudeChoices,
    pub cursor: CursorChoices,
}

impl Section for HarnessChoicesConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { claude: b.section("claude"), cursor: b.section("cursor") }
    }
}

impl HarnessChoicesConfig {
    /// What is offered to the harness named `harness` (`claude`, `cursor`); nothing to
    /// any other (a command harness takes no model).
    pub fn offered_to(&self, harness: &str) -> Offer<'_> {
        match harness {
            "claude" => Offer { models: &self.claude.models, efforts: &self.claude.efforts },
            "cursor" => Offer { models: &self.cursor.models, efforts: &[] },
            _ => Offer { models: &[], efforts: &[] },
        }
    }
}

/// `routing.harnessChoices.claude`: passed as `--model <m>` and `--effort <level>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaudeChoices {
    pub models: Vec<String>,
    pub efforts: Vec<String>,
}

impl Section for ClaudeChoices {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            models: b.field_by("models", Vec::new, launch_values),
            efforts: b.field_by("efforts", Vec::new, claude_efforts),
        }
    }
}

/// `routing.harnessChoices.cursor`: passed as `--model <m>`; Cursor has no effort setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CursorChoices {
    pub models: Vec<String>,
}

impl Section for CursorChoices {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { models: b.field_by("models", Vec::new, launch_values) }
    }
}

/// The models and efforts offered to one harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer<'a> {
    pub models: &'a [String],
    pub efforts: &'a [String],
}

impl Offer<'_> {
    /// `model` if it is offered.
    pub fn model(&self, model: Option<&str>) -> Option<String> {
        model.filter(|m| self.models.iter().any(|offered| offered == m)).map(str::to_owned)
    }

    /// `effort` if it is offered.
    pub fn effort(&self, effort: Option<&str>) -> Option<String> {
        effort.filter(|e| self.efforts.iter().any(|offered| offered == e)).map(str::to_owned)
    }
}

/// The effort levels Claude Code takes (`claude --effort`); another declared level is
/// passed as written, with a warning.
const CLAUDE_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// [`launch_values`], each outside [`CLAUDE_EFFORTS`] warned about at its line.
fn claude_efforts(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<String>> {
    let values = launch_values(node, path, diags)?;
    let saphyr::YamlDataOwned::Sequence(items) = &node.data else { return Some(values) };
    for (i, item) in items.iter().enumerate() {
        let saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::String(text)) = &item.data else {
            continue;
        };
        if values.contains(text) && !CLAUDE_EFFORTS.contains(&text.as_str()) {
            let known = CLAUDE_EFFORTS.join(", ");
            diags.warning(
                &format!("{path}[{i}]"),
                line_of(item),
                ProblemKind::Advice,
                format!(
                    "`{text}` is not an effort level Claude Code is known to take ({known}); it is passed as written"
                ),
            );
        }
    }
    Some(values)
}

/// A list of values for a harness flag: each 1–200 characters of letters, digits and
/// `. _ - : / @ + [ ]`, starting with a letter or digit — never read as a flag, never
/// split by a shell. A bad item is reported at its index and left out; a repeat is
/// dropped.
fn launch_values(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<String>> {
    let saphyr::YamlDataOwned::Sequence(items) = &node.data else {
        wrong_type(node, path, diags, "a list of strings");
        return None;
    };
    let mut values: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(text) = string(item, &item_path, diags) else { continue };
        let mut chars = text.chars();
        let fits = text.len() <= 200
            && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || "._-:/@+[]".contains(c));
        if !fits {
            let message = format!(
                "expected a model or effort name (letters, digits and `. _ - : / @ + [ ]`, starting with a letter or digit, at most 200), got {text:?}"
            );
            bad_value(item, &item_path, diags, message);
        } else if !values.iter().any(|seen| seen == text) {
            values.push(text.to_owned());
        }
    }
    Some(values)
}

config_enum! {
    /// How far pre-seeded harness trust reaches.
    TrustScope (default WorkspaceRoot) {
        WorkspaceRoot = "workspace-root",
        Directory = "directory",
    }
}

config_enum! {
    /// When to record the bypass-permissions disclaimer.
    BypassAcceptance (default Auto) {
        /// Only when the harness args ask for bypass mode.
        Auto = "auto",
        Always = "always",
        Never = "never",
    }
}

/// `routing.harnessTrust`: pre-seeding the harness's trust dialogs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessTrustConfig {
    pub enabled: bool,
    pub scope: TrustScope,
    pub accept_bypass_permissions: BypassAcceptance,
}

impl Section for HarnessTrustConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            scope: b.field("scope", TrustScope::default),
            accept_bypass_permissions: b
                .field("acceptBypassPermissions", BypassAcceptance::default),
        }
    }
}

/// `routing.harnessPlugins`: registering the-loop's Claude Code plugin (the `work-on`
/// command, the link-pr hook, the MCP server) before each Claude spawn. The plugin is
/// shipped in the binary; the reference's `marketplaceRepo` is accepted and not read.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessPluginsConfig {
    pub enabled: bool,
}

impl Section for HarnessPluginsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true) }
    }
}

default_from_nothing!(HarnessChoicesConfig, ClaudeChoices, CursorChoices);
