//! What the poller lists: one scope per repository and label (seed 002, issue-348).
//!
//! Repositories come from the top-level `repositories` list; each `polling.sources[]`
//! entry contributes its label (empty: `routing.autoExecuteLabel`) and which kinds it
//! monitors. A configuration without sources polls every repository with the routing
//! label, both kinds. A source's legacy `repos` are used only when the top-level list is
//! empty. A scope fails alone: its listing error degrades it and never the others.

use loop_core::config::Config;
use loop_core::{RepoRef, WorkItemRef};

/// One repository listed with one label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub repo: RepoRef,
    pub label: String,
    pub issues: bool,
    pub pull_requests: bool,
}

impl Scope {
    /// The scope name used in events and the heartbeat: `[host/]owner/repo`, lower-cased.
    pub fn name(&self) -> String {
        self.repo.to_string().to_ascii_lowercase()
    }
}

/// The scopes of `config`, in configuration order, de-duplicated by repository and label.
pub fn scopes(config: &Config) -> Vec<Scope> {
    let routing_label = &config.routing.auto_execute_label;
    let mut sources: Vec<(&str, bool, bool, &[RepoRef])> = config
        .polling
        .sources
        .iter()
        .map(|s| {
            let label = if s.label.is_empty() { routing_label.as_str() } else { s.label.as_str() };
            (label, s.monitor.issues, s.monitor.pull_requests, s.repos.as_slice())
        })
        .collect();
    if sources.is_empty() {
        sources.push((routing_label.as_str(), true, true, &[]));
    }
    let mut scopes: Vec<Scope> = Vec::new();
    for (label, issues, pull_requests, legacy) in sources {
        let repos = if config.repositories.is_empty() { legacy } else { &config.repositories };
        for repo in repos {
            let known = scopes.iter().any(|s| s.repo.same_repository(repo) && s.label == label);
            if !known {
                scopes.push(Scope {
                    repo: repo.clone(),
                    label: label.to_owned(),
                    issues,
                    pull_requests,
                });
            }
        }
    }
    scopes
}

/// Whether `item` belongs to one of `scopes` (the poller owns it).
pub fn owns(scopes: &[Scope], item: &WorkItemRef) -> bool {
    scopes.iter().any(|s| s.repo.same_repository(item.repo()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        loop_core::config::parse(yaml).unwrap().config
    }

    #[test]
    fn scopes_come_from_the_top_level_repositories_with_the_routing_label_by_default() {
        let config = config("repositories: [octo/app, ghe.example.com/octo/lib]\n");
        let scopes = scopes(&config);
        assert_eq!(scopes.len(), 2);
        assert_eq!(scopes[0].label, "the-loop: auto-execute");
        assert!(scopes[0].issues && scopes[0].pull_requests);
        assert_eq!(scopes[1].name(), "ghe.example.com/octo/lib");
    }

    #[test]
    fn a_source_supplies_its_label_and_monitors() {
        let config = config(
            "repositories: [octo/app]\npolling:\n  sources:\n    - provider: github\n      label: go\n      monitor: {pullRequests: false}\n",
        );
        let scopes = scopes(&config);
        assert_eq!(scopes.len(), 1);
        assert_eq!(scopes[0].label, "go");
        assert!(scopes[0].issues && !scopes[0].pull_requests);
    }

    #[test]
    fn legacy_source_repos_are_used_only_without_a_top_level_list() {
        let legacy = "polling:\n  sources:\n    - provider: github\n      repos: [octo/old]\n";
        assert_eq!(scopes(&config(legacy))[0].name(), "octo/old");
        let both = format!("repositories: [octo/app]\n{legacy}");
        let names: Vec<String> = scopes(&config(&both)).iter().map(Scope::name).collect();
        assert_eq!(names, ["octo/app"]);
    }

    #[test]
    fn ownership_is_by_repository() {
        let scopes = scopes(&config("repositories: [Octo/App]\n"));
        assert!(owns(&scopes, &"github:octo/app#1".parse().unwrap()));
        assert!(!owns(&scopes, &"github:octo/lib#1".parse().unwrap()));
    }
}
