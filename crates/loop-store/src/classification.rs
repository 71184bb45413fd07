//! Where each attribute lives, and why: the one classification table (seed 003 R1).
//!
//! Every top-level key of every record this crate writes is listed in [`ATTRIBUTES`] with
//! its [`Kind`]. The kind decides the file: operator ledgers and remote entities go in the
//! portable record (committed, travels with the deployment); machine handles only in
//! files that never leave the machine; derived values anywhere, declared derived.
//!
//! Tests hold the table to the code: a record type that gains a key the table does not
//! classify fails `every_written_key_is_classified`; a machine handle in a portable record
//! fails `no_machine_handle_is_portable`; and `docs/state.md` must carry the table as
//! rendered by [`render_markdown`].

use std::fmt::Write as _;

/// What an attribute is (seed 003's kinds, plus the identity keys its table lists apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The key naming what the record is about (`ref`).
    Identity,
    /// Where the process graph for the work item is.
    Pointer,
    /// A choice an authorized human froze.
    HumanDecision,
    /// Something that exists upstream because of this work item (a PR, a thread).
    RemoteEntity,
    /// What this deployment was told or has already seen (armed, roster, seen comments).
    OperatorLedger,
    /// A conversation id, a tmux name, a cwd, a cursor, a pid, a clock of this machine.
    MachineHandle,
    /// Rebuildable from other attributes.
    Derived,
}

impl Kind {
    pub fn letter(self) -> &'static str {
        match self {
            Kind::Identity => "I",
            Kind::Pointer => "P",
            Kind::HumanDecision => "H",
            Kind::RemoteEntity => "R",
            Kind::OperatorLedger => "L",
            Kind::MachineHandle => "M",
            Kind::Derived => "D",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Identity => "identity",
            Kind::Pointer => "pointer",
            Kind::HumanDecision => "human decision",
            Kind::RemoteEntity => "remote entity",
            Kind::OperatorLedger => "operator ledger",
            Kind::MachineHandle => "machine handle",
            Kind::Derived => "derived",
        }
    }
}

/// A record type this crate writes (a whole file, or an object nested in one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    PortableRecord,
    Control,
    Poll,
    PullRequestLedger,
    Spawn,
    GaveUp,
    Collaborators,
    Collaborator,
    Ended,
    ChannelBinding,
    LocalRecord,
    Endpoint,
    PollClocks,
    PollClock,
    LegacySessionsAdopted,
    Heartbeat,
    CycleSummary,
    ScopeFailure,
    ScopeHealth,
    PollCache,
    RememberedThread,
    RememberedLinkage,
    Validator,
    DeliveryLine,
    Index,
    IndexEntry,
    WorkItemState,
    NodeState,
    PullRequestEntry,
}

impl RecordType {
    /// Where the record type is written, as `docs/state.md` names it.
    pub fn location(self) -> &'static str {
        match self {
            RecordType::PortableRecord => "portable/<slug>.json",
            RecordType::Control => "portable/<slug>.json → control",
            RecordType::Poll => "portable/<slug>.json → poll",
            RecordType::PullRequestLedger => "portable/<slug>.json → poll.pullRequests.<ref>",
            RecordType::Spawn => "portable/<slug>.json → poll.spawn",
            RecordType::GaveUp => "portable/<slug>.json → poll.gaveUp",
            RecordType::Collaborators => "portable/<slug>.json → collaborators",
            RecordType::Collaborator => "portable/<slug>.json → collaborators.users[]",
            RecordType::Ended => "portable/<slug>.json → ended",
            RecordType::ChannelBinding => "portable/<slug>.json → channels.<type>",
            RecordType::LocalRecord => "local/<slug>.json",
            RecordType::Endpoint => "local/<slug>.json → endpoints.<ref>",
            RecordType::PollClocks => "local/poll-clocks.json",
            RecordType::PollClock => "local/poll-clocks.json → clocks.<ref>",
            RecordType::LegacySessionsAdopted => "local/legacy-sessions-adopted.json",
            RecordType::Heartbeat => "poll-status.json",
            RecordType::CycleSummary => "poll-status.json → lastCycle",
            RecordType::ScopeFailure => "poll-status.json → lastCycle.scopesFailed[]",
            RecordType::ScopeHealth => "poll-status.json → scopes[]",
            RecordType::PollCache => "local/poll-cache.json",
            RecordType::RememberedThread => "local/poll-cache.json → threads.<ref>",
            RecordType::RememberedLinkage => "local/poll-cache.json → linkage.<ref>",
            RecordType::Validator => "local/poll-cache.json → validators.<host>[]",
            RecordType::DeliveryLine => "local/deliveries.log → each line",
            RecordType::Index => "portable/index.json",
            RecordType::IndexEntry => "portable/index.json → workItems[]",
            RecordType::WorkItemState => "<checkout>/<specDir>/<id>/work-item-state.json",
            RecordType::NodeState => "<checkout>/<specDir>/<id>/work-item-state.json → nodes.<id>",
            RecordType::PullRequestEntry => {
                "<checkout>/<specDir>/<id>/work-item-state.json → pullRequests[]"
            }
        }
    }

    /// Whether the record is written into a tree meant to be committed: the portable
    /// records, or the work item's own checkout.
    pub fn is_portable(self) -> bool {
        self.location().starts_with("portable/") || self.location().starts_with("<checkout>/")
    }
}

/// One classified key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribute {
    pub record: RecordType,
    pub key: &'static str,
    pub kind: Kind,
    /// What it holds, in a few words.
    pub holds: &'static str,
}

const fn attr(record: RecordType, key: &'static str, kind: Kind, holds: &'static str) -> Attribute {
    Attribute { record, key, kind, holds }
}

use Kind::{
    Derived as D, HumanDecision as H, Identity as I, MachineHandle as M, OperatorLedger as L,
    Pointer as P, RemoteEntity as R,
};
use RecordType as T;

/// Every top-level key of every record type written, classified.
pub const ATTRIBUTES: &[Attribute] = &[
    attr(T::PortableRecord, "ref", I, "the work item's ref"),
    attr(T::PortableRecord, "url", D, "the work item's web address, derived from the ref"),
    attr(T::PortableRecord, "control", L, "the last control command recorded"),
    attr(T::PortableRecord, "poll", L, "what the poller has learnt about the thread"),
    attr(
        T::PortableRecord,
        "collaborators",
        L,
        "who besides the authorized users is heard on the item (delivered, never obeyed as a command)",
    ),
    attr(T::PortableRecord, "ended", L, "the closure this deployment observed"),
    attr(
        T::PortableRecord,
        "channels",
        R,
        "the channel thread bound to the item, per channel type",
    ),
    attr(T::PortableRecord, "sealed", L, "every section was cleared while legacy state remains"),
    attr(
        T::PortableRecord,
        "graph",
        H,
        "the reference's frozen phase selection; kept verbatim, read for the `sessionPerPr`, `model` and `effort` a state file leaves empty, never written (`GET /api/v1/work-items` shows one derived from the state file in its place, when a session here has one)",
    ),
    attr(T::Control, "command", L, "start|stop|pause|resume|execute|contribute|cleanup|do"),
    attr(T::Control, "source", L, "comment, cli or api (the control plane)"),
    attr(T::Control, "actor", L, "who issued it"),
    attr(T::Control, "requestedAt", L, "when it was recorded"),
    attr(T::Control, "note", L, "e.g. the URL of the comment carrying it"),
    attr(T::Control, "instance", L, "the instance that recorded it"),
    attr(
        T::Control,
        "deliveryId",
        L,
        "the dedup key of the comment that carried it; its replay is not executed again",
    ),
    attr(T::Poll, "seenComments", L, "resolved comments, by node id (`IC_…`, `PRR_…`, `PRRC_…`)"),
    attr(T::Poll, "commentAttempts", L, "delivery attempts of comments in flight"),
    attr(T::Poll, "gaveUp", L, "comments abandoned after the retry budget"),
    attr(
        T::Poll,
        "seenThrough",
        L,
        "every comment created before it is resolved (GitHub's time; threads past the cap)",
    ),
    attr(T::Poll, "spawn", L, "the presence (spawn) retry ledger"),
    attr(T::Poll, "title", D, "the listing's title"),
    attr(
        T::Poll,
        "pullRequests",
        L,
        "the ledgers of the pull requests delivering the item, by PR ref",
    ),
    attr(T::PullRequestLedger, "seenComments", L, "resolved PR comments, by node id"),
    attr(T::PullRequestLedger, "commentAttempts", L, "delivery attempts of PR comments in flight"),
    attr(T::PullRequestLedger, "gaveUp", L, "PR comments abandoned after the retry budget"),
    attr(
        T::PullRequestLedger,
        "seenThrough",
        L,
        "every PR comment created before it is resolved (GitHub's time)",
    ),
    attr(T::Spawn, "attempts", L, "spawn attempts so far"),
    attr(T::Spawn, "gaveUp", L, "whether spawning was abandoned"),
    attr(T::Spawn, "deliveryId", L, "the last presence delivery id"),
    attr(T::GaveUp, "comments", L, "the abandoned comments, by node id"),
    attr(T::GaveUp, "version", L, "the CLI version that abandoned them"),
    attr(T::Collaborators, "users", L, "the roster"),
    attr(
        T::Collaborators,
        "deliveryId",
        L,
        "the dedup key of the comment that edited it last; its replay is not applied again",
    ),
    attr(T::Collaborator, "login", L, "the collaborator"),
    attr(T::Collaborator, "addedBy", L, "who granted it"),
    attr(T::Collaborator, "addedAt", L, "when"),
    attr(T::Collaborator, "source", L, "comment or cli"),
    attr(T::Collaborator, "note", L, "free text"),
    attr(T::Ended, "state", L, "closed or merged"),
    attr(T::Ended, "kind", L, "issue or pull-request"),
    attr(T::Ended, "reason", L, "GitHub's state reason"),
    attr(T::Ended, "at", L, "when it was observed"),
    attr(T::Ended, "source", L, "the ingress that observed it"),
    attr(T::Ended, "actor", L, "who closed it"),
    attr(T::ChannelBinding, "channel", R, "the channel id"),
    attr(T::ChannelBinding, "thread", R, "the thread id"),
    attr(T::ChannelBinding, "openedAt", R, "when the thread was opened"),
    attr(T::ChannelBinding, "origin", R, "opened by the-loop or adopted"),
    attr(T::ChannelBinding, "permalink", R, "the thread's link"),
    attr(T::LocalRecord, "ref", I, "the work item's ref"),
    attr(T::LocalRecord, "endpoints", M, "this machine's sessions, keyed by the ref they serve"),
    attr(T::LocalRecord, "channelCursors", M, "the last message mirrored, per bound thread"),
    attr(T::Endpoint, "harness", M, "the harness adapter"),
    attr(T::Endpoint, "harnessSessionId", M, "the harness conversation id"),
    attr(T::Endpoint, "cwd", M, "the checkout (absolute path)"),
    attr(T::Endpoint, "tmuxTarget", M, "the tmux session"),
    attr(T::Endpoint, "status", M, "active|paused|closed"),
    attr(T::Endpoint, "recentDeliveries", M, "the last delivery ids pasted"),
    attr(T::Endpoint, "createdAt", M, "when the session was created"),
    attr(T::Endpoint, "lastEventAt", M, "when the last event was delivered"),
    attr(T::Endpoint, "model", M, "the model it was launched with"),
    attr(T::Endpoint, "effort", M, "the effort it was launched with"),
    attr(T::Endpoint, "harnessArgs", M, "the launch arguments"),
    attr(T::Endpoint, "awaitingInput", M, "the agent's open question (comment link, options)"),
    attr(T::Endpoint, "graphWarning", M, "why the process graph cannot run in this checkout"),
    attr(T::PollClocks, "clocks", M, "the poll clocks, keyed by ref"),
    attr(T::PollClock, "lastPolledAt", M, "the last cycle that listed the ref"),
    attr(T::PollClock, "closureCheckedAt", M, "the last cycle that asked whether it ended"),
    attr(
        T::LegacySessionsAdopted,
        "adopted",
        M,
        "the slugs of the legacy `sessions/<slug>.json` records already read forward",
    ),
    attr(T::Heartbeat, "startedAt", M, "when the poller started"),
    attr(T::Heartbeat, "lastCycleAt", M, "when the last cycle ended"),
    attr(T::Heartbeat, "intervalSeconds", M, "the poll interval"),
    attr(T::Heartbeat, "lastCycle", M, "what the last cycle did"),
    attr(T::Heartbeat, "scopes", M, "how each scope (repository + label) fared"),
    attr(T::CycleSummary, "itemsSeen", M, "items listed"),
    attr(T::CycleSummary, "spawns", M, "sessions spawned"),
    attr(T::CycleSummary, "commentsForwarded", M, "comments delivered"),
    attr(T::CycleSummary, "closures", M, "closures handled"),
    attr(T::CycleSummary, "failures", M, "items that failed"),
    attr(T::CycleSummary, "errors", M, "provider errors"),
    attr(T::CycleSummary, "interrupted", M, "whether shutdown cut it short"),
    attr(T::CycleSummary, "scopesPolled", M, "scopes whose listing answered"),
    attr(T::CycleSummary, "scopesFailed", M, "scopes whose listing failed"),
    attr(T::CycleSummary, "scopesSkipped", M, "scopes whose issues were not asked (quarantined)"),
    attr(T::CycleSummary, "requests", M, "GitHub requests made"),
    attr(T::CycleSummary, "notModified", M, "of which answered 304"),
    attr(T::ScopeFailure, "scope", M, "the scope, `[host/]owner/repo`"),
    attr(T::ScopeFailure, "error", M, "what failed"),
    attr(T::ScopeFailure, "permanent", M, "whether it is re-probed only every 60 cycles"),
    attr(T::ScopeHealth, "repository", M, "the scope's repository, `[host/]owner/repo`"),
    attr(T::ScopeHealth, "label", M, "the label it lists"),
    attr(T::ScopeHealth, "monitor", M, "which kinds it lists (issues, pullRequests)"),
    attr(T::ScopeHealth, "lastPolledAt", M, "the last cycle its listing answered"),
    attr(T::ScopeHealth, "degraded", M, "whether its last listing failed or is quarantined"),
    attr(T::ScopeHealth, "reason", M, "why it is degraded"),
    attr(T::ScopeHealth, "requests", M, "GitHub requests it cost in the last cycle"),
    attr(T::ScopeHealth, "notModified", M, "of which answered 304"),
    attr(T::PollCache, "writtenFor", M, "the scopes and API bases it was written for"),
    attr(T::PollCache, "lastSweepAt", M, "when every thread was last read again"),
    attr(T::PollCache, "validators", M, "the conditional answers remembered, per API host"),
    attr(T::PollCache, "threads", D, "each listed item's thread as last read"),
    attr(T::PollCache, "linkage", D, "each listed pull request's linked issues"),
    attr(T::RememberedThread, "updatedAt", D, "the item's `updated_at` when it was read"),
    attr(T::RememberedThread, "comments", D, "the thread's comments, every surface"),
    attr(T::RememberedLinkage, "body", D, "the description the links were read for"),
    attr(T::RememberedLinkage, "linked", D, "the issues it closes"),
    attr(T::Validator, "url", M, "the URL asked"),
    attr(T::Validator, "variant", M, "a fingerprint of the token and `Accept` that asked"),
    attr(T::Validator, "etag", M, "the answer's `ETag`"),
    attr(T::Validator, "body", D, "the answer, served again on a 304"),
    attr(T::Validator, "next", M, "the answer's next page"),
    attr(T::DeliveryLine, "key", M, "the delivery's dedup key"),
    attr(T::DeliveryLine, "state", M, "inflight|kept|settled|released"),
    attr(T::DeliveryLine, "reason", M, "why a settled delivery was refused on purpose"),
    attr(T::DeliveryLine, "at", M, "when the mark changed"),
    attr(T::Index, "workItems", D, "one entry per portable record"),
    attr(T::IndexEntry, "ref", D, "the record's ref"),
    attr(T::IndexEntry, "url", D, "the record's url"),
    attr(T::IndexEntry, "file", D, "the record's file name"),
    attr(T::IndexEntry, "sections", D, "the sections holding a value"),
    attr(T::IndexEntry, "pullRequests", D, "the PRs whose ledgers the record carries"),
    attr(T::IndexEntry, "sealed", D, "whether the record is a sealed stub"),
    attr(T::WorkItemState, "version", P, "the shape version (1)"),
    attr(T::WorkItemState, "workItem", P, "the work item's ref"),
    attr(T::WorkItemState, "loop", P, "the shipped loop it walks"),
    attr(T::WorkItemState, "currentNode", P, "the node it is at; empty until entered"),
    attr(T::WorkItemState, "nodes", P, "each node's attempts, outcome and times"),
    attr(T::WorkItemState, "parked", P, "why the pointer waits, since when"),
    attr(
        T::WorkItemState,
        "forced",
        P,
        "operator moves past a gate (`the-loop graph force`): `from`, `to`, `reason`, `actor`, `at`, `warnings`",
    ),
    attr(T::WorkItemState, "completions", P, "the session's claims, by node"),
    attr(T::WorkItemState, "decisions", H, "gate decisions with who made them"),
    attr(
        T::WorkItemState,
        "skips",
        H,
        "phases declared away (at phase-selection, or by `the-loop graph skip`), with provenance",
    ),
    attr(T::WorkItemState, "optIns", H, "opt-in phases selected, with provenance"),
    attr(T::WorkItemState, "surface", H, "where the artifacts are iterated"),
    attr(T::WorkItemState, "sessionPerPr", H, "how many sessions its pull requests get"),
    attr(T::WorkItemState, "model", H, "the model chosen for its sessions"),
    attr(T::WorkItemState, "effort", H, "the effort chosen for its sessions"),
    attr(
        T::WorkItemState,
        "pullRequests",
        R,
        "the pull requests delivering the item: added by `link-pr` or the first event routed from one, upstream state set by the close path",
    ),
    attr(T::NodeState, "attempts", P, "times entered"),
    attr(T::NodeState, "outcome", P, "what its exit chain gave when left"),
    attr(T::NodeState, "enteredAt", P, "first entered"),
    attr(T::NodeState, "exitedAt", P, "last left"),
    attr(T::NodeState, "lastBlock", P, "the last block's messages"),
    attr(T::NodeState, "forced", P, "whether an operator forced the pointer here"),
    attr(T::PullRequestEntry, "ref", R, "the pull request's ref"),
    attr(T::PullRequestEntry, "repository", R, "its repository"),
    attr(T::PullRequestEntry, "number", R, "its number"),
    attr(T::PullRequestEntry, "url", R, "its web address"),
    attr(
        T::PullRequestEntry,
        "innerLoop",
        R,
        "its inner loop's state file, relative to the spec folder",
    ),
    attr(T::PullRequestEntry, "state", R, "open, merged or closed upstream"),
];

/// The kind of `key` in `record`, `None` when the table does not classify it.
pub fn classify(record: RecordType, key: &str) -> Option<Kind> {
    ATTRIBUTES.iter().find(|a| a.record == record && a.key == key).map(|a| a.kind)
}

/// The table as Markdown, one section per record type, as `docs/state.md` carries it.
pub fn render_markdown() -> String {
    let mut out = String::new();
    let mut current = None;
    for attribute in ATTRIBUTES {
        if current != Some(attribute.record) {
            current = Some(attribute.record);
            let _ = write!(
                out,
                "\n#### `{}`\n\n| Key | Kind | Holds |\n|---|---|---|\n",
                attribute.record.location()
            );
        }
        let kind = attribute.kind;
        let _ = writeln!(
            out,
            "| `{}` | {} ({}) | {} |",
            attribute.key,
            kind.letter(),
            kind.name(),
            attribute.holds
        );
    }
    out
}
