//! The typed configuration: every key of `cli-config.yaml` this version acts on, its
//! type and its default.
//!
//! Each struct's [`Section`] impl is the one place that names its keys and their
//! defaults; `Default` is "read from nothing", so the two can never disagree. Field docs
//! say what a key means; `docs/configuration.md` is the operator's version of this file.
//! Keys of the reference schema not implemented yet have no type here: they are the list
//! in `inert.rs`, accepted and warned about by the reader, holding no value.
//!
//! Paths are kept as written (relative ones are relative to the process cwd, `~` is not
//! expanded in `state.root`); an `Option<PathBuf>` override is `None` when unset, and the
//! store derives it from `state.root`.
//!
//! A file per top-level section (`instance`, `webhooks`, `polling`, `routing`, `eventLog`
//! and `state`, `integrations`, `service`, `pricing`); `routing`'s harness and session keys have
//! their own (`harness`, `session`). This module holds the whole [`Config`] and what the
//! sections share.

use std::fmt::Display;

use saphyr::MarkedYamlOwned as Node;
use serde::{Serialize, Serializer};

use super::ProblemKind;
use super::read::{Block, Diagnostics, Section, Value, line_of, wrong_type};
use crate::RepoRef;

/// Declares `Default` as "every key absent".
macro_rules! default_from_nothing {
    ($($ty:ty),+) => {$(
        impl Default for $ty {
            fn default() -> Self {
                use $crate::config::read::{Diagnostics, read_section};
                read_section(None, String::new(), &mut Diagnostics::default())
            }
        }
    )+};
}

mod harness;
mod instance;
mod integrations;
mod polling;
mod pricing;
mod routing;
mod service;
mod session;
mod state;
mod webhooks;

pub use harness::*;
pub use instance::*;
pub use integrations::*;
pub use polling::*;
pub use pricing::*;
pub use routing::*;
pub use service::*;
pub use session::*;
pub use state::*;
pub use webhooks::*;

pub(super) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

pub(super) fn display_seq<T: Display, S: Serializer>(items: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(ToString::to_string))
}

/// The whole `cli-config.yaml`, defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The schema version the file declares (`None` when it declares none).
    pub version: Option<String>,
    /// The repositories this instance works with; bounds both ingresses. Empty: unbounded.
    /// De-duplicated, `github.com` normalised away.
    #[serde(serialize_with = "display_seq")]
    pub repositories: Vec<RepoRef>,
    pub instance: InstanceConfig,
    pub webhooks: WebhooksConfig,
    pub polling: PollingConfig,
    pub routing: RoutingConfig,
    pub event_log: EventLogConfig,
    pub integrations: IntegrationsConfig,
    pub state: StateConfig,
    pub service: ServiceConfig,
    pub pricing: PricingConfig,
}

impl Section for Config {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            version: b.field_by("version", || None, read_version),
            repositories: b.field_by("repositories", Vec::new, read_repositories),
            instance: b.section("instance"),
            webhooks: b.section("webhooks"),
            polling: b.section("polling"),
            routing: b.section("routing"),
            event_log: b.section("eventLog"),
            integrations: b.section("integrations"),
            state: b.section("state"),
            service: b.section("service"),
            pricing: b.section("pricing"),
        }
    }
}

/// `version` as text; an unquoted `0.5` is a YAML number and is kept as its text.
fn read_version(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<String>> {
    match &node.data {
        saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::String(s)) => Some(Some(s.clone())),
        saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::Integer(i)) => Some(Some(i.to_string())),
        saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::FloatingPoint(f)) => {
            Some(Some(f.to_string()))
        }
        _ => {
            wrong_type(node, path, diags, "a version string such as \"0.5.0\"");
            None
        }
    }
}

/// `repositories`: each a valid repository; a repeat is reported at its own line and dropped.
fn read_repositories(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<RepoRef>> {
    let saphyr::YamlDataOwned::Sequence(items) = &node.data else {
        wrong_type(node, path, diags, "a list");
        return None;
    };
    let mut unique: Vec<RepoRef> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(repo) = RepoRef::read(item, &item_path, diags) else { continue };
        if unique.iter().any(|seen| seen.same_repository(&repo)) {
            diags.warning(
                &item_path,
                line_of(item),
                ProblemKind::Advice,
                format!("`{repo}` is listed more than once; the repeat is ignored"),
            );
        } else {
            unique.push(repo);
        }
    }
    Some(unique)
}

default_from_nothing!(Config);
