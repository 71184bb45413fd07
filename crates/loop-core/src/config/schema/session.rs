//! Where and how a session lives, under `routing`: its tmux session's lifetime and a
//! pull request's own session (`tmux`), and its checkout (`workspace`).

use std::path::PathBuf;

use saphyr::MarkedYamlOwned as Node;
use serde::{Serialize, Serializer};

use crate::config::ProblemKind;
use crate::config::read::{
    Block, Diagnostics, Section, Value, bad_value, config_enum, join, number_at_least, one_of,
    optional_path, read_section, string,
};

/// How many sessions a work item's pull requests get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionPerPr {
    Never,
    #[default]
    CrossRepository,
    Always,
}

impl SessionPerPr {
    const TEXTS: &[&str] = &["never", "cross-repository", "always"];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::CrossRepository => "cross-repository",
            Self::Always => "always",
        }
    }
}

impl Serialize for SessionPerPr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Value for SessionPerPr {
    /// One of the texts, or a boolean (`true`: cross-repository, `false`: never).
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        match node.data {
            saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::Boolean(true)) => {
                Some(Self::CrossRepository)
            }
            saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::Boolean(false)) => Some(Self::Never),
            _ => one_of(node, path, diags, Self::TEXTS, |text| match text {
                "never" => Some(Self::Never),
                "cross-repository" => Some(Self::CrossRepository),
                "always" => Some(Self::Always),
                _ => None,
            }),
        }
    }
}

/// `routing.tmux`: session lifetime.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TmuxConfig {
    pub keep_session_on_close: bool,
    pub remain_on_exit: bool,
    pub kill_harness_on_close: bool,
    pub harness_kill_grace_seconds: f64,
    pub resume_on_respawn: bool,
    pub resume_probe_seconds: f64,
    pub session_per_pr: SessionPerPr,
}

impl Section for TmuxConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            keep_session_on_close: b.field("keepSessionOnClose", || true),
            remain_on_exit: b.field("remainOnExit", || true),
            kill_harness_on_close: b.field("killHarnessOnClose", || true),
            harness_kill_grace_seconds: b.field_by(
                "harnessKillGraceSeconds",
                || 5.0,
                number_at_least(0.0),
            ),
            resume_on_respawn: b.field("resumeOnRespawn", || true),
            resume_probe_seconds: b.field_by("resumeProbeSeconds", || 2.0, number_at_least(0.0)),
            session_per_pr: b.field("sessionPerPr", SessionPerPr::default),
        }
    }
}

config_enum! {
    /// How a work item's checkout is laid out.
    WorkspaceStrategy (default Worktree) {
        Worktree = "worktree",
        Clone = "clone",
    }
}

config_enum! {
    /// The clone URL scheme.
    CloneProtocol (default Https) {
        Https = "https",
        Ssh = "ssh",
    }
}

/// `routing.workspace`: per-work-item checkouts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceConfig {
    /// Checkout root (`~` expanded where used); `None` (`""` in the file): no checkouts.
    pub root: Option<PathBuf>,
    pub strategy: WorkspaceStrategy,
    pub clone_protocol: CloneProtocol,
    pub default_host: String,
    pub keep_checkout_on_close: bool,
    pub git_binary: String,
    /// Per host, where its repositories are cloned from instead of `https://<host>`
    /// (a mirror, or the simulator's git server).
    pub clone_urls: Vec<CloneUrl>,
}

/// One `routing.workspace.cloneUrls[]` entry: `<base>/<owner>/<repo>.git` for `host`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneUrl {
    pub host: String,
    pub base: String,
}

impl Section for CloneUrl {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let host = b.required("host", String::new);
        let base = b.field_by("base", String::new, read_clone_base);
        if base.is_empty() {
            let path = join(b.path(), "base");
            b.diags().error(
                &path,
                None,
                ProblemKind::MissingKey,
                "required key is missing".to_owned(),
            );
        }
        Self { host, base }
    }
}

impl Value for CloneUrl {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        Some(read_section(Some(node), path.to_owned(), diags))
    }
}

/// An `http(s)://` or `file://` URL, without a trailing `/`.
fn read_clone_base(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<String> {
    let text = string(node, path, diags)?;
    if ["http://", "https://", "file://"].iter().any(|p| text.starts_with(p)) {
        Some(text.trim_end_matches('/').to_owned())
    } else {
        bad_value(
            node,
            path,
            diags,
            format!("expected an http://, https:// or file:// URL, got {text:?}"),
        );
        None
    }
}

impl Section for WorkspaceConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            root: b.field_by("root", || None, optional_path),
            strategy: b.field("strategy", WorkspaceStrategy::default),
            clone_protocol: b.field("cloneProtocol", CloneProtocol::default),
            default_host: b.field("defaultHost", || "github.com".to_owned()),
            keep_checkout_on_close: b.field("keepCheckoutOnClose", || false),
            git_binary: b.field("gitBinary", || "git".to_owned()),
            clone_urls: b.field("cloneUrls", Vec::new),
        }
    }
}

default_from_nothing!(TmuxConfig, WorkspaceConfig);
