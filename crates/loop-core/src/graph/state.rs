//! The work item's checked-in state file, `<specDir>/<id>/work-item-state.json` (seed 003
//! R2–R4): where the item is in its loop, what an authorized human froze, and the pull
//! requests delivering it. Never a machine handle: a legacy `session` block is not a
//! field, so it is ignored on read and gone on the next save.
//!
//! The file lives in the work item's branch, so anyone who can open a pull request can
//! propose its content: readers take nothing from it on trust. [`Choices::resolve`] turns
//! the frozen `sessionPerPr`, `model` and `effort` into what the operator offers, naming
//! each refusal; `skips` and `optIns` count only for nodes the compiled loop says may be
//! skipped; a `pullRequests` entry is a record, never a reason to spawn or route.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::{Offer, SessionPerPr};

/// The state file's name in its spec folder.
pub const STATE_FILE: &str = "work-item-state.json";
/// The sidecar lock every writer holds.
pub const LOCK_FILE: &str = "work-item-state.lock";
/// The shape version written.
pub const VERSION: u32 = 1;

/// The whole file. Every key is written on every save (the parity test in loop-store
/// holds them to the classification table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkItemState {
    #[serde(default = "version")]
    pub version: u32,
    /// The work item's ref (`github:owner/repo#N`).
    #[serde(default)]
    pub work_item: String,
    /// The shipped loop it walks.
    #[serde(default, rename = "loop")]
    pub loop_name: String,
    /// `""` until the start node is entered.
    #[serde(default)]
    pub current_node: String,
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeState>,
    /// Gate decisions with their provenance (`phase-selection`, `goal-definition`).
    #[serde(default)]
    pub decisions: Map<String, Value>,
    /// Operator moves past a gate (Tier 1 writes them; kept untouched here).
    #[serde(default)]
    pub forced: Vec<Value>,
    #[serde(default)]
    pub parked: Option<Parked>,
    /// The session's claims, by node.
    #[serde(default)]
    pub completions: BTreeMap<String, Completion>,
    #[serde(default)]
    pub skips: Map<String, Value>,
    #[serde(default)]
    pub opt_ins: Map<String, Value>,
    /// `""` or `pull-request`.
    #[serde(default)]
    pub surface: String,
    /// `""` (no choice), `never`, `cross-repository` or `always`.
    #[serde(default)]
    pub session_per_pr: String,
    /// `""` (no choice) or a model the operator declared.
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub effort: String,
    #[serde(default)]
    pub pull_requests: Vec<PullRequestEntry>,
    /// What reviewers said at a gate that records it (`record-feedback`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<Feedback>,
}

/// One reviewer's comment recorded at a gate (`record-feedback`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    /// The gate it was given at.
    pub node: String,
    /// The artifact it is about (the hook's `into`).
    pub into: String,
    /// What the gate decided with it (`approved-with-comments`, `changes-requested`, …).
    pub outcome: String,
    pub by: String,
    pub at: Timestamp,
    /// The comment, cut to [`Feedback::TEXT_CAP`] characters.
    pub text: String,
}

impl Feedback {
    /// How much of a comment the state file keeps.
    pub const TEXT_CAP: usize = 2000;
}

fn version() -> u32 {
    VERSION
}

impl WorkItemState {
    /// A file for `work_item` that has entered nothing yet.
    pub fn new(work_item: &str, loop_name: &str) -> Self {
        Self {
            version: VERSION,
            work_item: work_item.to_owned(),
            loop_name: loop_name.to_owned(),
            current_node: String::new(),
            nodes: BTreeMap::new(),
            decisions: Map::new(),
            forced: Vec::new(),
            parked: None,
            completions: BTreeMap::new(),
            skips: Map::new(),
            opt_ins: Map::new(),
            surface: String::new(),
            session_per_pr: String::new(),
            model: String::new(),
            effort: String::new(),
            pull_requests: Vec::new(),
            feedback: Vec::new(),
        }
    }

    /// Whether the start node was ever entered.
    pub fn entered(&self) -> bool {
        !self.current_node.is_empty()
    }

    /// Records a pull request delivering the item; `true` when the file changed. A
    /// pull request already listed keeps its row — its upstream state is the close
    /// path's ([`WorkItemState::set_upstream`]), never a later link's.
    pub fn link_pull_request(&mut self, entry: PullRequestEntry) -> bool {
        if self.pull_requests.iter().any(|pr| pr.pr_ref == entry.pr_ref) {
            return false;
        }
        self.pull_requests.push(entry);
        true
    }

    /// Sets a recorded pull request's upstream state (the close path); `true` when the
    /// file changed. A pull request the file does not list is not added.
    pub fn set_upstream(&mut self, pr_ref: &str, state: Upstream) -> bool {
        match self.pull_requests.iter_mut().find(|pr| pr.pr_ref == pr_ref) {
            Some(pr) if pr.state != state => {
                pr.state = state;
                true
            }
            _ => false,
        }
    }
}

/// One node's history.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    #[serde(default)]
    pub attempts: u32,
    /// The outcome its exit chain gave when it was left; `""` while in it.
    #[serde(default)]
    pub outcome: String,
    #[serde(default)]
    pub entered_at: Option<Timestamp>,
    #[serde(default)]
    pub exited_at: Option<Timestamp>,
    /// The messages of the last block, to tell a repeated block from a new one.
    #[serde(default)]
    pub last_block: Option<Vec<String>>,
    #[serde(default)]
    pub forced: bool,
}

/// Why the pointer is waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Parked {
    pub node: String,
    pub reason: String,
    pub since: Timestamp,
}

/// A session's claim that a node's work is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub at: Timestamp,
    pub by: String,
}

/// A pull request delivering the work item (seed 003 R2): a remote entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRequestEntry {
    /// `github:owner/repo#N`.
    #[serde(rename = "ref")]
    pub pr_ref: String,
    /// `owner/repo` (with the host for an enterprise one).
    pub repository: String,
    pub number: u64,
    pub url: String,
    /// Its inner loop's state file, relative to the spec folder.
    pub inner_loop: String,
    pub state: Upstream,
}

impl PullRequestEntry {
    /// The row for `pr` delivering `work_item`, open upstream; `None` when `pr` is in
    /// another repository whose owner or name could not name a folder
    /// ([`inner_loop_dir`]).
    pub fn open(work_item: &crate::WorkItemRef, pr: &crate::WorkItemRef) -> Option<Self> {
        let repo = pr.repo();
        let other = (!repo.same_repository(work_item.repo())).then(|| (repo.owner(), repo.name()));
        let inner = inner_loop_dir(other, pr.number())?;
        Some(Self {
            pr_ref: pr.to_string(),
            repository: repo.to_string(),
            number: pr.number(),
            url: format!(
                "https://{}/{}/{}/pull/{}",
                repo.host(),
                repo.owner(),
                repo.name(),
                pr.number()
            ),
            inner_loop: format!("{inner}/{STATE_FILE}"),
            state: Upstream::Open,
        })
    }
}

/// A pull request's state upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Upstream {
    Open,
    Merged,
    Closed,
}

/// What the operator offers, against which the file's choices are resolved.
#[derive(Debug, Clone, Copy)]
pub struct Offered<'a> {
    pub session_per_pr: SessionPerPr,
    /// What `routing.harnessChoices` offers the harness sessions run on.
    pub harness: Offer<'a>,
}

/// The choices a file froze, as written: `""` is "no choice". Read from the state
/// file, or from a legacy portable `graph` section (read, never written).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frozen {
    pub session_per_pr: String,
    pub model: String,
    pub effort: String,
}

impl Frozen {
    /// The state file's choices.
    pub fn of(state: &WorkItemState) -> Self {
        Self {
            session_per_pr: state.session_per_pr.clone(),
            model: state.model.clone(),
            effort: state.effort.clone(),
        }
    }

    /// A legacy portable `graph` section's choices: only string values count (the
    /// section is the reference's, kept verbatim).
    pub fn of_legacy(graph: &Value) -> Self {
        let text = |key: &str| graph.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        Self { session_per_pr: text("sessionPerPr"), model: text("model"), effort: text("effort") }
    }

    /// Each key this file leaves empty taken from `older` (a work item frozen before the
    /// state file carried the keys keeps its choices across the upgrade).
    pub fn or(self, older: Frozen) -> Frozen {
        let pick = |new: String, old: String| if new.is_empty() { old } else { new };
        Frozen {
            session_per_pr: pick(self.session_per_pr, older.session_per_pr),
            model: pick(self.model, older.model),
            effort: pick(self.effort, older.effort),
        }
    }
}

/// The frozen choices, resolved against what the operator offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choices {
    pub session_per_pr: SessionPerPr,
    /// `None`: the harness's own arguments.
    pub model: Option<String>,
    pub effort: Option<String>,
    /// Each choice the file made that was not honoured, as `key: value` (abuse cases 1–2).
    pub refused: Vec<String>,
}

impl Choices {
    /// Resolves `frozen`: an absent or empty key, or a value outside the vocabulary,
    /// resolves to the operator's default — and a value that was there but refused is
    /// named in `refused`.
    pub fn resolve(frozen: &Frozen, offered: Offered<'_>) -> Choices {
        let mut refused = Vec::new();
        let mut pick = |key: &str, value: &str, allowed: &[&str]| -> Option<String> {
            if value.is_empty() {
                return None;
            }
            if allowed.contains(&value) {
                return Some(value.to_owned());
            }
            refused.push(format!("{key}: {value:?}"));
            None
        };
        let session_per_pr = match pick(
            "sessionPerPr",
            &frozen.session_per_pr,
            &["never", "cross-repository", "always"],
        ) {
            Some(mode) if mode == "never" => SessionPerPr::Never,
            Some(mode) if mode == "always" => SessionPerPr::Always,
            Some(_) => SessionPerPr::CrossRepository,
            None => offered.session_per_pr,
        };
        let models: Vec<&str> = offered.harness.models.iter().map(String::as_str).collect();
        let efforts: Vec<&str> = offered.harness.efforts.iter().map(String::as_str).collect();
        let model = pick("model", &frozen.model, &models);
        let effort = pick("effort", &frozen.effort, &efforts);
        Choices { session_per_pr, model, effort, refused }
    }
}

/// The spec folder's name for a GitHub work item: `issue-<N>` (pull requests share the
/// issue number space).
pub fn spec_id(number: u64) -> String {
    format!("issue-{number}")
}

/// Where a pull request's inner loop keeps its state, relative to the work item's spec
/// folder: `pr-loops/pr-<n>/`, or `pr-loops/<owner>__<repo>/pr-<n>/` for one in another
/// repository. `None` when the owner or name could escape the folder (`.`, `..`, or a
/// character outside `[A-Za-z0-9._-]`).
pub fn inner_loop_dir(other_repo: Option<(&str, &str)>, number: u64) -> Option<String> {
    let safe = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    match other_repo {
        None => Some(format!("pr-loops/pr-{number}")),
        Some((owner, repo)) if safe(owner) && safe(repo) => {
            Some(format!("pr-loops/{owner}__{repo}/pr-{number}"))
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered() -> (Vec<String>, Vec<String>) {
        (vec!["opus".to_owned()], vec!["high".to_owned()])
    }

    #[test]
    fn a_legacy_session_block_is_ignored_on_read_and_gone_on_save() {
        let text = r#"{"version":1,"workItem":"github:o/r#1","loop":"pdlc-adhoc-loop",
            "currentNode":"work","session":{"id":"abc","runner":"tmux","alive":true}}"#;
        let state: WorkItemState = serde_json::from_str(text).unwrap();
        assert_eq!(state.current_node, "work");
        let saved = serde_json::to_string(&state).unwrap();
        assert!(!saved.contains("session\""), "{saved}");
        assert!(!saved.contains("abc"), "{saved}");
    }

    #[test]
    fn choices_outside_the_vocabulary_resolve_to_the_operators_defaults_and_are_named() {
        let (models, efforts) = offered();
        let harness = Offer { models: &models, efforts: &efforts };
        let offer = Offered { session_per_pr: SessionPerPr::Never, harness };
        let mut state = WorkItemState::new("github:o/r#1", "pdlc-work-item-loop");
        (state.session_per_pr, state.model, state.effort) =
            ("bogus".into(), "gpt-9".into(), "high".into());
        let choices = Choices::resolve(&Frozen::of(&state), offer);
        assert_eq!(choices.session_per_pr, SessionPerPr::Never);
        assert_eq!(choices.model, None);
        assert_eq!(choices.effort.as_deref(), Some("high"));
        assert_eq!(choices.refused, ["sessionPerPr: \"bogus\"", "model: \"gpt-9\""]);

        (state.session_per_pr, state.model) = ("always".into(), "opus".into());
        let choices = Choices::resolve(&Frozen::of(&state), offer);
        assert_eq!(
            (choices.session_per_pr, choices.model.as_deref()),
            (SessionPerPr::Always, Some("opus"))
        );
        assert!(choices.refused.is_empty());

        let none = Choices::resolve(&Frozen::default(), offer);
        assert_eq!(
            (none.session_per_pr, none.model, none.refused.len()),
            (SessionPerPr::Never, None, 0)
        );
    }

    #[test]
    fn a_legacy_portable_graph_fills_only_what_the_state_file_leaves_empty() {
        let legacy = serde_json::json!({"loop": "spec", "sessionPerPr": "always", "model": "opus",
            "effort": true, "nodes": []});
        let mut state = WorkItemState::new("github:o/r#1", "pdlc-work-item-loop");
        state.model = "sonnet".into();
        let frozen = Frozen::of(&state).or(Frozen::of_legacy(&legacy));
        assert_eq!(
            frozen,
            Frozen { session_per_pr: "always".into(), model: "sonnet".into(), effort: "".into() }
        );
    }

    #[test]
    fn a_pull_request_is_recorded_once_and_its_upstream_state_follows_the_close() {
        let mut state = WorkItemState::new("github:o/r#1", "pdlc-work-item-loop");
        let entry = PullRequestEntry {
            pr_ref: "github:o/r#2".into(),
            repository: "o/r".into(),
            number: 2,
            url: "https://github.com/o/r/pull/2".into(),
            inner_loop: "pr-loops/pr-2/work-item-state.json".into(),
            state: Upstream::Open,
        };
        assert!(state.link_pull_request(entry.clone()));
        assert!(!state.link_pull_request(entry.clone()));
        assert!(state.set_upstream("github:o/r#2", Upstream::Merged));
        assert!(!state.link_pull_request(entry), "a later link leaves the close's state");
        assert!(!state.set_upstream("github:o/r#3", Upstream::Merged));
        assert_eq!(state.pull_requests.len(), 1);
        assert_eq!(state.pull_requests[0].state, Upstream::Merged);
    }

    #[test]
    fn an_inner_loop_in_another_repository_cannot_escape_the_spec_folder() {
        assert_eq!(inner_loop_dir(None, 7).as_deref(), Some("pr-loops/pr-7"));
        assert_eq!(
            inner_loop_dir(Some(("octo", "lib")), 7).as_deref(),
            Some("pr-loops/octo__lib/pr-7")
        );
        for bad in [("..", "x"), ("o", "."), ("o/x", "r"), ("", "r")] {
            assert_eq!(inner_loop_dir(Some(bad), 7), None, "{bad:?}");
        }
    }
}
