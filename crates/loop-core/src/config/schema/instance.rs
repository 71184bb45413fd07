//! `instance`: who this instance is, and which work items are its own (its scope and
//! the items it names).

use saphyr::MarkedYamlOwned as Node;
use serde::Serialize;

use super::display_seq;
use crate::WorkItemRef;
use crate::config::ProblemKind;
use crate::config::read::{
    Block, Diagnostics, Section, Value, bad_value, config_enum, join, read_section, string,
};

config_enum! {
    /// Which work items an instance takes (seed 002, issue-322).
    InstanceScope (default Open) {
        /// Every item in its repositories (the behaviour without an `instance` block).
        Open = "open",
        /// Only items whose start names it (`the-loop start instance:<name>`).
        Addressed = "addressed",
        /// Nothing new: only `workItems` and items it already manages.
        Locked = "locked",
    }
}

/// `instance`: who this instance is and which work items are its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceConfig {
    /// `^[a-z0-9][a-z0-9-]{0,39}$`; `None` is the unnamed instance.
    pub name: Option<String>,
    pub scope: InstanceScope,
    /// Items declared as this instance's own (refs or issue/PR web addresses in the file).
    #[serde(serialize_with = "display_seq")]
    pub work_items: Vec<WorkItemRef>,
}

impl Section for InstanceConfig {
    /// Accepts the SPEC shape `{name, scope: open, workItems}` and the seed's
    /// `{name, scope: {mode, workItems}}`; the two `workItems` lists are joined.
    fn read(b: &mut Block<'_, '_>) -> Self {
        let name = b.field_by("name", || None, read_instance_name);
        let mut scope = InstanceScope::default();
        let mut work_items: Vec<WorkItemRef> = Vec::new();
        if let Some(node) = b.take("scope") {
            let path = join(b.path(), "scope");
            match &node.data {
                saphyr::YamlDataOwned::Mapping(_) => {
                    let nested: ScopeBlock = read_section(Some(node), path, b.diags());
                    scope = nested.mode;
                    work_items = nested.work_items;
                }
                _ => scope = InstanceScope::read(node, &path, b.diags()).unwrap_or_default(),
            }
        }
        work_items.extend(b.field::<Vec<WorkItemRef>>("workItems", Vec::new));
        if scope == InstanceScope::Addressed && name.is_none() {
            let path = join(b.path(), "scope");
            b.diags().error(
                &path,
                None,
                ProblemKind::BadValue,
                "scope `addressed` needs `instance.name` (an address names an instance)".to_owned(),
            );
        }
        Self { name, scope, work_items }
    }
}

/// The seed's nested `instance.scope: {mode, workItems}`.
struct ScopeBlock {
    mode: InstanceScope,
    work_items: Vec<WorkItemRef>,
}

impl Section for ScopeBlock {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            mode: b.field("mode", InstanceScope::default),
            work_items: b.field("workItems", Vec::new),
        }
    }
}

fn read_instance_name(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<String>> {
    let name = string(node, path, diags)?;
    let mut bytes = name.bytes();
    let valid = name.len() <= 40
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Some(Some(name.to_owned()))
    } else {
        bad_value(
            node,
            path,
            diags,
            format!("expected a name matching [a-z0-9][a-z0-9-]{{0,39}}, got {name:?}"),
        );
        None
    }
}

default_from_nothing!(InstanceConfig);
