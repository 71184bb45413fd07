//! The keys of the reference schema (0.5.0) that this version accepts but does not act on.
//!
//! SPEC §1 promises that a file written for the reference loads unchanged, and §3 that
//! such a key gets one warning ("accepted, not implemented") where any other unknown key
//! is an error. [`NOT_IMPLEMENTED`] is the one place those keys are named. Most of them are
//! *inert*: no type, no default, no field in `Config`, so `config show` leaves them out.
//! The reader (`read.rs`) consults the list for every key a typed section did not take:
//! a listed key is accepted with one warning at the first listed key (`channels`, not
//! each of its keys), and the keys beneath it are checked against the list — so a misspelling
//! there is still an unknown key, with its path, line and a suggestion — while their
//! values are never read.
//!
//! No code outside the config reads a listed key — not
//! `routing.harnessPlugins.marketplaceRepo` (the plugin ships inside the binary) and not
//! `collaborators` (a work item's roster lives in its portable record).
//!
//! Grammar: dotted key paths, with `[]` standing for every item of a list. The reference
//! allows no mapping with free-form keys inside these sections, so there is no other
//! wildcard.

/// Every key the reference schema has and this version does not act on, as leaf paths.
pub const NOT_IMPLEMENTED: &[&str] = &[
    // routing.harnessPlugins (typed: `enabled`): the plugin ships in the binary
    "routing.harnessPlugins.marketplaceRepo",
    // routing.webTerminal: a browser terminal (ttyd) onto tmux
    "routing.webTerminal.enabled",
    "routing.webTerminal.host",
    "routing.webTerminal.port",
    // routing.graph.repoHooks: repositories' own graph hooks (Tier 1)
    "routing.graph.repoHooks",
    // integrations: GitHub is reached over HTTPS only; Jira is reserved
    "integrations.github.transport",
    "integrations.jira.transport",
    "integrations.jira.api.baseUrl",
    "integrations.jira.api.tokenEnv",
    "integrations.jira.cli.binary",
    // service: the control plane runs in the service process, which always hosts the
    // ingresses, and the CLI never goes through it
    "service.autoStart",
    "service.hostIngresses",
    // standingSessions: sessions tied to no work item
    "standingSessions.enabled",
    "standingSessions.sessions[].name",
    "standingSessions.sessions[].description",
    "standingSessions.sessions[].harness",
    "standingSessions.sessions[].harnessArgs",
    "standingSessions.sessions[].cwd",
    "standingSessions.sessions[].prompt",
    "standingSessions.sessions[].promptFile",
    "standingSessions.sessions[].autoStart",
    "standingSessions.sessions[].slack.enabled",
    "standingSessions.sessions[].slack.channel",
    // channels: Slack conversations beside the ticket
    "channels.slack.enabled",
    "channels.slack.botTokenEnv",
    "channels.slack.appTokenEnv",
    "channels.slack.channel",
    "channels.slack.events",
    "channels.slack.verbosity",
    "channels.slack.authorizedUsers",
    "channels.slack.read.mode",
    "channels.slack.read.intervalSeconds",
    // selfDiagnosis: reports about the-loop itself
    "selfDiagnosis.enabled",
    "selfDiagnosis.repo",
    "selfDiagnosis.label",
    "selfDiagnosis.harness",
    "selfDiagnosis.model",
    "selfDiagnosis.timeoutSeconds",
    "selfDiagnosis.intervalSeconds",
    "selfDiagnosis.maxIssuesPerDay",
    "selfDiagnosis.maxRetries",
    // collaborators, notifications: declared by the reference, read by nothing there either
    "collaborators[].handle",
    "collaborators[].kind",
    "collaborators[].roles",
    "collaborators[].notifications.enabled",
    "collaborators[].notifications.channels",
    "notifications.enabled",
    "notifications.events.work-item-spawned",
    "notifications.events.dispatch-failed",
    "notifications.events.session-died",
    "notifications.events.event-dropped-unauthorized",
];

/// What a key path is to the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A listed key: its value is not looked at.
    Leaf,
    /// A mapping holding listed keys.
    Mapping,
    /// A list whose items hold listed keys.
    List,
}

/// What `path` (list indices included, e.g. `collaborators[2].roles`) is to the list;
/// `None` when no listed key is at or under it.
pub(crate) fn shape(path: &str) -> Option<Shape> {
    let pattern = pattern_of(path);
    NOT_IMPLEMENTED.iter().find_map(|key| {
        let rest = key.strip_prefix(pattern.as_str())?;
        if rest.is_empty() {
            Some(Shape::Leaf)
        } else if rest.starts_with('.') {
            Some(Shape::Mapping)
        } else if rest.starts_with("[]") {
            Some(Shape::List)
        } else {
            None
        }
    })
}

/// The listed keys directly under the mapping at `path` (`""`: the top level), for
/// suggesting one in place of a misspelling.
pub(crate) fn keys_under(path: &str) -> impl Iterator<Item = &'static str> {
    let pattern = pattern_of(path);
    let prefix = if pattern.is_empty() { pattern } else { format!("{pattern}.") };
    NOT_IMPLEMENTED.iter().filter_map(move |key| {
        let rest = key.strip_prefix(prefix.as_str())?;
        rest.split(['.', '[']).next()
    })
}

/// `path` with every list index written as `[]`, the list's own spelling.
fn pattern_of(path: &str) -> String {
    let mut pattern = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                pattern.push_str("[]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            _ => pattern.push(c),
        }
    }
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_listed_key_is_also_a_block_of_other_listed_keys() {
        for key in NOT_IMPLEMENTED {
            let clash = NOT_IMPLEMENTED.iter().find(|other| {
                other.strip_prefix(key).is_some_and(|rest| rest.starts_with(['.', '[']))
            });
            assert_eq!(clash, None, "{key} is listed as a key and as a block");
        }
    }

    #[test]
    fn paths_are_matched_with_their_list_indices_as_wildcards() {
        assert_eq!(shape("service"), Some(Shape::Mapping));
        assert_eq!(shape("service.autoStart"), Some(Shape::Leaf));
        assert_eq!(shape("service.port"), None);
        assert_eq!(shape("collaborators"), Some(Shape::List));
        assert_eq!(shape("collaborators[3]"), Some(Shape::Mapping));
        assert_eq!(shape("standingSessions.sessions[0].slack.channel"), Some(Shape::Leaf));
        assert_eq!(shape("channels.slack.chanel"), None);
        assert_eq!(shape("routing.control.keywords.start"), None);
        let under: Vec<&str> = keys_under("collaborators[1]").collect();
        assert_eq!(under, ["handle", "kind", "roles", "notifications", "notifications"]);
        assert!(keys_under("").any(|key| key == "selfDiagnosis"));
        assert!(keys_under("routing").any(|key| key == "graph"));
    }
}
