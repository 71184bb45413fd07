//! Closure reconciliation (reference §3, seeds 000 and 001): after a complete,
//! uninterrupted listing, ask GitHub about the records the listing no longer carries.
//!
//! The tracked set — session records of any status, and portable records carrying
//! `control`, `graph` or `collaborators` — is asked every cycle it is absent, with no
//! window and no cap. The ledger-only set — records carrying only `poll` — is asked
//! lazily: due after 60 × `intervalSeconds` on the local clocks, at most 20 per cycle,
//! longest-absent first ([`loop_core::poll::ledger_checks`]). Listed, unowned, stamped
//! and degraded refs are never asked. Closed or merged → the dispatcher's close path,
//! then the poll ledger is forgotten; open or unanswerable → for a ledger-only record only
//! `closureCheckedAt` is written. Pull requests carried inside work items' records are
//! asked in two ways: a live PR endpoint every cycle it is absent, like the tracked set
//! (its session is to be ended when it closes); a nested PR ledger with no live endpoint
//! lazily, in the ledger-only set's window and under its cap (seed 000, abuse case 1: a
//! planted record listing N pull requests must not cost N calls a cycle). A closed one's
//! nested ledger is dropped from its owner's record. Nothing is ever closed on doubt.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::log::{Kind, Line};
use loop_core::poll::{self, ClosureClass, RecordFacts, Skip};
use loop_github::{ItemKind, ItemState};

use super::events::close_event;
use super::ledgers::Ledgers;
use super::scope::{self, Scope};
use super::seam::Pipeline;
use super::{CycleReport, Facts, Poller};

/// What reconciliation reads from the cycle.
#[derive(Debug)]
pub(super) struct Reconcile<'a> {
    pub config: &'a Config,
    pub scopes: &'a [Scope],
    pub facts: &'a Facts,
    /// Every ref of every listed item, linked refs included.
    pub open: &'a BTreeSet<WorkItemRef>,
    /// Scopes whose listing failed this cycle.
    pub degraded: &'a [String],
    pub now: Timestamp,
}

impl Reconcile<'_> {
    fn skip(&self, item: &WorkItemRef) -> Option<Skip> {
        if self.open.contains(item) {
            Some(Skip::Listed)
        } else if !scope::owns(self.scopes, item) {
            Some(Skip::Unowned)
        } else if self.degraded.iter().any(|d| *d == item.repo().to_string().to_ascii_lowercase()) {
            Some(Skip::Degraded)
        } else {
            None
        }
    }

    fn record_facts(&self, item: &WorkItemRef) -> RecordFacts {
        let has = |section| self.facts.has_section(item, section);
        RecordFacts {
            session: self.facts.session_records.contains(item),
            control: has("control"),
            graph: has("graph"),
            collaborators: has("collaborators"),
            poll: has("poll"),
            ended: has("ended"),
        }
    }
}

impl<D: Pipeline> Poller<D> {
    pub(super) async fn reconcile(
        &mut self,
        cx: &Reconcile<'_>,
        ledgers: &mut Ledgers,
        report: &mut CycleReport,
    ) {
        // A nested ledger with no live endpoint is asked lazily, like a ledger-only record.
        let (pull_requests, nested): (BTreeMap<_, _>, BTreeMap<_, _>) =
            pull_requests(cx).into_iter().partition(|(pr, _)| cx.facts.live.contains(pr));
        let known: BTreeSet<&WorkItemRef> =
            cx.facts.session_records.iter().chain(cx.facts.sections.keys()).collect();
        let mut ledger_only = BTreeMap::new();
        for item in known {
            match poll::closure_class(cx.record_facts(item)) {
                ClosureClass::Tracked if cx.skip(item).is_none() => {
                    self.ask(item, Set::Tracked, cx.now, ledgers, report).await;
                }
                ClosureClass::LedgerOnly
                    if !pull_requests.contains_key(item) && !nested.contains_key(item) =>
                {
                    ledger_only.insert(item.clone(), ledgers.clock(item));
                }
                ClosureClass::Tracked | ClosureClass::LedgerOnly | ClosureClass::Untracked => {}
            }
        }
        for pr in nested.keys() {
            ledger_only.insert(pr.clone(), ledgers.clock(pr));
        }
        let interval = cx.config.polling.interval_seconds;
        for item in poll::ledger_checks(&ledger_only, cx.now, interval, |r| cx.skip(r)) {
            report.ledger_checks += 1;
            let set = match nested.get(&item) {
                Some(nested_in) => Set::PullRequest {
                    nested_in: nested_in.clone(),
                    own_ledger: cx.facts.has_section(&item, "poll"),
                    lazy: true,
                },
                None => Set::LedgerOnly,
            };
            self.ask(&item, set, cx.now, ledgers, report).await;
        }
        for (pr, nested_in) in pull_requests {
            let own_ledger = cx.facts.has_section(&pr, "poll");
            let set = Set::PullRequest { nested_in, own_ledger, lazy: false };
            self.ask(&pr, set, cx.now, ledgers, report).await;
        }
    }

    /// Asks GitHub whether `item` ended and acts on a definite answer only.
    async fn ask(
        &mut self,
        item: &WorkItemRef,
        set: Set,
        now: Timestamp,
        ledgers: &mut Ledgers,
        report: &mut CycleReport,
    ) {
        let answer = match self.github.for_repo(item.repo()) {
            Some(client) => client.read_item(item).await.map_err(|e| e.to_string()),
            None => {
                Err(format!("no GitHub client is configured for host `{}`", item.repo().host()))
            }
        };
        let status = match answer {
            Ok(status) if status.state == ItemState::Closed => status,
            Ok(_) => {
                if set.lazy() {
                    ledgers.closure_checked(item, now);
                }
                return;
            }
            Err(error) => {
                report.errors.push(format!("{item}: {error}"));
                self.store
                    .events()
                    .emit_async(
                        Line::warning(Kind::PollItemError)
                            .work_item(item)
                            .field("error", &error)
                            .field("will_retry", true),
                    )
                    .await;
                if set.lazy() {
                    ledgers.closure_checked(item, now);
                }
                return;
            }
        };
        let state = if status.merged { "merged" } else { "closed" };
        let kind = match status.kind {
            ItemKind::Issue => "issue",
            ItemKind::PullRequest => "pull-request",
        };
        self.store
            .events()
            .emit_async(
                Line::info(Kind::PollClosureDetected)
                    .work_item(item)
                    .field("state", state)
                    .field("kind", kind),
            )
            .await;
        if let Err(error) = self.dispatch.close(close_event(&status)).await {
            report.errors.push(format!("{item}: {error}"));
            self.store
                .events()
                .emit_async(
                    Line::warning(Kind::PollItemError)
                        .work_item(item)
                        .field("error", error.to_string())
                        .field("will_retry", true),
                )
                .await;
            return;
        }
        let forgotten = match &set {
            Set::Tracked | Set::LedgerOnly => ledgers.forget(item),
            Set::PullRequest { nested_in, own_ledger, .. } => nested_in
                .as_ref()
                .map_or(Ok(()), |owner| ledgers.drop_nested(owner, item))
                .and_then(|()| if *own_ledger { ledgers.forget(item) } else { Ok(()) }),
        };
        match forgotten {
            Ok(()) => report.closures += 1,
            Err(err) => report.errors.push(format!("{item}: {err}")),
        }
    }
}

/// Which set an asked ref belongs to: what an answer does to its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Set {
    /// Asked every cycle it is absent; closed → the poll section is forgotten.
    Tracked,
    /// Asked lazily; open or unanswerable → `closureCheckedAt`.
    LedgerOnly,
    /// A pull request a work item's record carries (a live session endpoint, or a ledger
    /// nested in the owner's poll section): a live endpoint is asked every cycle it is
    /// absent, like the tracked set; a nested ledger alone lazily (`lazy`: open or
    /// unanswerable → `closureCheckedAt`, like the ledger-only set). Closed → the close
    /// path ends its session, the nested ledger is dropped from the owner's record, and
    /// the poll section of its own record (`own_ledger`: it was polled on its own before
    /// it came to serve the work item) is forgotten.
    PullRequest { nested_in: Option<WorkItemRef>, own_ledger: bool, lazy: bool },
}

impl Set {
    /// Whether it is asked lazily: an open or unanswerable answer stamps
    /// `closureCheckedAt`, so it waits a window.
    fn lazy(&self) -> bool {
        matches!(self, Self::LedgerOnly | Self::PullRequest { lazy: true, .. })
    }
}

/// The pull requests carried inside work items' records that the tracked set does not ask
/// about: live PR endpoints of session records and nested PR ledgers, minus listed,
/// unowned, degraded and stamped ones. A PR whose own record carries only a poll ledger
/// (it was polled on its own first) is asked here, not as a ledger-only record of its
/// own.
fn pull_requests(cx: &Reconcile<'_>) -> BTreeMap<WorkItemRef, Option<WorkItemRef>> {
    let mut prs = BTreeMap::new();
    for (endpoint, owner) in &cx.facts.binding {
        if endpoint != owner && cx.facts.live.contains(endpoint) {
            prs.insert(endpoint.clone(), None);
        }
    }
    for (pr, owner) in &cx.facts.nested {
        prs.insert(pr.clone(), Some(owner.clone()));
    }
    prs.retain(|pr, _| {
        cx.skip(pr).is_none()
            && !cx.facts.has_section(pr, "ended")
            && poll::closure_class(cx.record_facts(pr)) != ClosureClass::Tracked
    });
    prs
}
