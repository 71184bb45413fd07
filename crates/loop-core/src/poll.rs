//! The poller's ledger rules (reference poller-provider §2–§3, seeds 000, 001, 004), as
//! pure functions over [`PollLedger`] / [`CommentLedger`] values.
//!
//! Which comments of a thread are already resolved, which are candidates to forward, what
//! to do with a candidate given what the dispatcher says about its delivery, when a
//! presence (spawn) is offered, retried or given up, what first sight baselines and which
//! control commands it holds back, and which absent records closure reconciliation asks
//! about this cycle. The runtime in loop-daemon reads the thread, asks the dispatcher and
//! GitHub, and applies what these functions return.
//!
//! Nothing here does IO, reads a clock or is async: `now`, the thread, the authorization
//! facts and the dispatcher's answers are passed in.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use crate::control::{Command, Parsed, Vocabulary};
use crate::event::Actor;
use crate::guards::is_self_authored;
use crate::login::Login;
use crate::record::{CommentId, CommentLedger, GaveUp, PollClock, PollLedger, SpawnLedger};
use crate::refs::WorkItemRef;

/// How many resolved comment ids a ledger keeps. A longer thread's oldest resolved ids
/// give way to the ledger's `seenThrough` watermark ([`finalize`]), which says they are
/// resolved without naming them, so the record stays bounded and nothing is re-forwarded.
pub const SEEN_COMMENTS_CAP: usize = 2000;

/// A ledger-only record is asked again once this many poll intervals have passed since it
/// was last listed or last asked (seed 000 R1.2: one hour at the default interval).
pub const LEDGER_RECHECK_EVERY_CYCLES: i64 = 60;

/// At most this many ledger-only records are asked per source per cycle (seed 000 R1.3).
pub const LEDGER_CHECKS_PER_CYCLE: usize = 20;

/// One comment of a thread, on any surface, as the ledger rules need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadEntry<'a> {
    /// The node id: unique across a pull request's three comment surfaces.
    pub id: &'a CommentId,
    /// The author: nobody for a deleted account, or a login GitHub would never issue.
    pub author: &'a Actor,
    pub body: &'a str,
    /// GitHub's `created_at` (`submitted_at` for a review); `None` when it did not parse.
    pub created_at: Option<Timestamp>,
}

/// What the dispatcher knows about a delivery the poller handed it (local, no GitHub
/// call). `Done` beats `Settled`: the caller asks in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Delivered into a session (or the spawn it caused happened).
    Done,
    /// The dispatcher finished with it on purpose (awaiting-start, session-paused,
    /// control-executed, …); the outcome is recorded verbatim, never branched on.
    Settled(String),
    /// Queued or being delivered: never re-forwarded, never counted.
    InFlight,
    /// Unknown to the dispatcher (never handed over, or released after a failure).
    Unhandled,
}

/// What becomes of one candidate comment this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentStep {
    /// Delivered: resolve it and drop its attempts.
    Resolve,
    /// Settled on purpose: resolve it, no attempt, no failure (`poll.comment_settled`).
    Settle(String),
    /// Still in flight: leave it alone.
    Wait,
    /// The budget is spent: record the give-up first, then post one notice.
    GiveUp { attempts: u32 },
    /// Hand it to the dispatcher as attempt number `attempt`.
    Forward { attempt: u32 },
}

/// The decision table of reference §2.4. `max_retries` below 1 counts as 1.
pub fn comment_step(status: &DeliveryStatus, attempts: u32, max_retries: u32) -> CommentStep {
    match status {
        DeliveryStatus::Done => CommentStep::Resolve,
        DeliveryStatus::Settled(outcome) => CommentStep::Settle(outcome.clone()),
        DeliveryStatus::InFlight => CommentStep::Wait,
        DeliveryStatus::Unhandled if attempts >= max_retries.max(1) => {
            CommentStep::GiveUp { attempts }
        }
        DeliveryStatus::Unhandled => CommentStep::Forward { attempt: attempts + 1 },
    }
}

/// The authorization rule of the poll path (reference §2.2 step 3): an absent actor is
/// allowed; a named one only when it is in `authorizedUsers` (an empty list denies all); a
/// login GitHub would never issue never is.
pub fn is_authorized(author: &Actor, authorized: &[Login]) -> bool {
    match author {
        Actor::Nobody => true,
        Actor::User(login) => authorized.contains(login),
        Actor::Unrecognised(_) => false,
    }
}

/// The comments first sight must not baseline (seed 004): comments carrying one
/// unambiguous control command, by an authorized named author (collaborators never count
/// here), not self-marked — in thread order. Nothing is pending when the work item already
/// has a control record (a first sight may bootstrap control state, never replay over it)
/// or control is disabled (an empty vocabulary).
pub fn pending_control(
    thread: &[ThreadEntry<'_>],
    has_control_record: bool,
    authorized: &[Login],
    vocabulary: &Vocabulary,
) -> Vec<CommentId> {
    if has_control_record {
        return Vec::new();
    }
    thread
        .iter()
        .filter(|c| c.author.login().is_some_and(|login| authorized.contains(login)))
        .filter(|c| !is_self_authored(c.body))
        .filter(|c| matches!(vocabulary.parse(c.body), Parsed::Command { .. }))
        .map(|c| c.id.clone())
        .collect()
}

/// Whether a work item's own ledger shows its thread was baselined before, so this cycle
/// is not its first sight: it carries a title, comment state or a spawn ledger. A poll
/// section that so far only nests pull-request ledgers does not. The reference's records
/// carry no title; the caller also counts a `lastPolledAt` an older version left in the
/// record as evidence, since re-baselining such a thread would swallow every comment
/// posted since (reference §6 E-24).
pub fn own_thread_known(ledger: &PollLedger) -> bool {
    ledger.title.is_some() || ledger.spawn.is_some() || ledger.comments != CommentLedger::default()
}

/// First sight: every live comment except `pending` is resolved, nothing is in flight.
/// The spawn ledger is kept (the caller owns it).
pub fn baseline(ledger: &mut CommentLedger, live: &[CommentId], pending: &[CommentId]) {
    ledger.seen_comments.clear();
    ledger.comment_attempts.clear();
    ledger.seen_through = None;
    let mut seen = BTreeSet::new();
    for id in live.iter().filter(|id| !pending.contains(id)) {
        if seen.insert(id) {
            ledger.seen_comments.push(id.clone());
        }
    }
}

/// Whether `comment` is resolved: named in `seenComments`, or created before the
/// ledger's `seenThrough` watermark.
pub fn is_resolved(ledger: &CommentLedger, comment: &ThreadEntry<'_>) -> bool {
    before_watermark(ledger.seen_through, comment) || ledger.seen_comments.contains(comment.id)
}

fn before_watermark(seen_through: Option<Timestamp>, comment: &ThreadEntry<'_>) -> bool {
    seen_through.zip(comment.created_at).is_some_and(|(through, created)| created < through)
}

/// [`is_resolved`] for many comments of one ledger: its seen ids indexed once.
struct Resolved<'a> {
    seen_through: Option<Timestamp>,
    seen: BTreeSet<&'a CommentId>,
}

impl<'a> Resolved<'a> {
    fn of(ledger: &'a CommentLedger) -> Self {
        Self { seen_through: ledger.seen_through, seen: ledger.seen_comments.iter().collect() }
    }

    fn contains(&self, comment: &ThreadEntry<'_>) -> bool {
        before_watermark(self.seen_through, comment) || self.seen.contains(comment.id)
    }
}

/// A known item's thread sorted (reference §2.2 step 6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sorted {
    /// Unseen comments that are not allowed or are self-marked: resolved silently.
    pub silenced: Vec<CommentId>,
    /// Unseen, allowed comments, in thread order.
    pub candidates: Vec<CommentId>,
}

/// Sorts the unseen comments of a known item. `allowed` is the comment rule: an
/// authorized author, or a collaborator granted on the item's refs.
pub fn sort_thread(
    ledger: &CommentLedger,
    thread: &[ThreadEntry<'_>],
    allowed: impl Fn(&Actor) -> bool,
) -> Sorted {
    let mut sorted = Sorted::default();
    let resolved = Resolved::of(ledger);
    for comment in thread.iter().filter(|c| !resolved.contains(c)) {
        if is_self_authored(comment.body) || !allowed(comment.author) {
            sorted.silenced.push(comment.id.clone());
        } else {
            sorted.candidates.push(comment.id.clone());
        }
    }
    sorted
}

/// Whether a candidate was never attempted: new activity re-arms a given-up spawn.
pub fn genuinely_new(ledger: &CommentLedger, candidates: &[CommentId]) -> bool {
    candidates.iter().any(|id| ledger.comment_attempts.get(id).copied().unwrap_or(0) == 0)
}

/// Marks `id` resolved: seen, no longer in flight. ([`finalize`] bounds the seen ids.)
pub fn resolve(ledger: &mut CommentLedger, id: &CommentId) {
    ledger.comment_attempts.remove(id);
    if !ledger.seen_comments.contains(id) {
        ledger.seen_comments.push(id.clone());
    }
}

/// Resolves `id` as abandoned by `version`: it joins `gaveUp` so an upgrade may re-arm it.
pub fn give_up(ledger: &mut CommentLedger, id: &CommentId, version: &str) {
    resolve(ledger, id);
    let gave_up = ledger.gave_up.get_or_insert_with(GaveUp::default);
    if !gave_up.comments.contains(id) {
        gave_up.comments.push(id.clone());
    }
    gave_up.version = version.to_owned();
}

/// Counts one more delivery attempt of `id`.
pub fn record_attempt(ledger: &mut CommentLedger, id: &CommentId) -> u32 {
    let attempts = ledger.comment_attempts.entry(id.clone()).or_insert(0);
    *attempts += 1;
    *attempts
}

/// Gives back an attempt that never ran (its delivery was still queued at shutdown).
/// Resolved comments are not releasable; an entry reaching zero is removed.
pub fn release_attempt(ledger: &mut CommentLedger, id: &CommentId) -> bool {
    match ledger.comment_attempts.get_mut(id) {
        Some(attempts) if *attempts > 1 => {
            *attempts -= 1;
            true
        }
        Some(_) => {
            ledger.comment_attempts.remove(id);
            true
        }
        None => false,
    }
}

/// Gives back a presence attempt that never ran: attempts down by one, delivery id gone.
pub fn release_spawn(spawn: &mut SpawnLedger) {
    spawn.attempts = spawn.attempts.saturating_sub(1);
    spawn.delivery_id = None;
}

/// Prunes everything to the live thread (deleted comments never come back), drops an
/// empty `gaveUp` (reference §2.2 step 10) and bounds the seen ids ([`cap_seen`]).
pub fn finalize(ledger: &mut CommentLedger, thread: &[ThreadEntry<'_>]) {
    let live: BTreeSet<&CommentId> = thread.iter().map(|c| c.id).collect();
    ledger.seen_comments.retain(|id| live.contains(id));
    ledger.comment_attempts.retain(|id, _| live.contains(id));
    if let Some(gave_up) = &mut ledger.gave_up {
        gave_up.comments.retain(|id| live.contains(id));
        if gave_up.comments.is_empty() {
            ledger.gave_up = None;
        }
    }
    cap_seen(ledger, thread);
}

/// Re-arms comments abandoned by another version (issue-146): they leave `seenComments`
/// and `gaveUp` is cleared. The same version never re-arms, so repeated `--once` runs
/// cannot turn a give-up into an endless retry. Returns the re-armed ids.
pub fn rearm(ledger: &mut CommentLedger, version: &str) -> Vec<CommentId> {
    let Some(gave_up) = ledger.gave_up.take_if(|g| g.version != version && !g.comments.is_empty())
    else {
        return Vec::new();
    };
    ledger.seen_comments.retain(|id| !gave_up.comments.contains(id));
    gave_up.comments
}

/// Keeps at most [`SEEN_COMMENTS_CAP`] seen ids. The oldest give way to the `seenThrough`
/// watermark, which may only move to a creation time before which every comment of the
/// thread is resolved (so an unresolved old comment holds it back), and never moves back;
/// ids the watermark covers are dropped. Nothing is evicted while an unresolved comment's
/// creation time is unknown. The thread stays on GitHub's clock throughout.
fn cap_seen(ledger: &mut CommentLedger, thread: &[ThreadEntry<'_>]) {
    let excess = ledger.seen_comments.len().saturating_sub(SEEN_COMMENTS_CAP);
    if excess > 0 {
        let resolved = Resolved::of(ledger);
        let mut by_creation: Vec<(Timestamp, &ThreadEntry<'_>)> =
            thread.iter().filter_map(|c| Some((c.created_at?, c))).collect();
        by_creation.sort_by_key(|(created, _)| *created);
        let unplaced = thread.iter().any(|c| c.created_at.is_none() && !resolved.contains(c));
        // The oldest unresolved comment, and the creation time of the first seen id kept.
        let frontier = by_creation.iter().find(|(_, c)| !resolved.contains(c)).map(|(at, _)| *at);
        let kept = by_creation
            .iter()
            .filter(|(_, c)| resolved.seen.contains(c.id))
            .nth(excess)
            .map(|(at, _)| *at);
        let through = match (kept, frontier) {
            (Some(kept), Some(frontier)) => Some(kept.min(frontier)),
            (kept, frontier) => kept.or(frontier),
        };
        if !unplaced && let Some(through) = through {
            ledger.seen_through = ledger.seen_through.max(Some(through));
        }
    }
    let Some(through) = ledger.seen_through else { return };
    let covered: BTreeSet<&CommentId> = thread
        .iter()
        .filter(|c| c.created_at.is_some_and(|created| created < through))
        .map(|c| c.id)
        .collect();
    if !covered.is_empty() {
        ledger.seen_comments.retain(|id| !covered.contains(id));
    }
}

/// Whether the item may be offered a presence (spawn): its author is authorized, or an
/// authorized arming command is the last recorded one. The author gates only this.
pub fn spawn_authorized(item_authorized: bool, last_recorded: Option<Command>) -> bool {
    item_authorized || crate::control::is_armed(last_recorded)
}

/// What to do about the presence (spawn) this cycle (reference §2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnStep {
    /// Given up, or awaiting a start the dispatcher would refuse: say nothing.
    Quiet,
    /// The last presence is still in flight.
    Wait,
    /// The last presence landed or was settled: reset the ledger, nothing to emit.
    Reset,
    /// The budget is spent: `poll.spawn_failed`, mark given up.
    GiveUp { attempts: u32 },
    /// Emit a presence as attempt number `attempt`.
    Emit { attempt: u32 },
}

/// `last` is the dispatcher's status of the stored presence delivery (`None` when the
/// ledger stores none); `awaiting_start` is `requireStartCommand` with no recorded start.
pub fn spawn_step(
    spawn: &SpawnLedger,
    awaiting_start: bool,
    last: Option<&DeliveryStatus>,
    max_retries: u32,
) -> SpawnStep {
    if spawn.gave_up || awaiting_start {
        return SpawnStep::Quiet;
    }
    match last {
        Some(DeliveryStatus::InFlight) => return SpawnStep::Wait,
        Some(DeliveryStatus::Done | DeliveryStatus::Settled(_)) => return SpawnStep::Reset,
        Some(DeliveryStatus::Unhandled) | None => {}
    }
    if spawn.attempts >= max_retries.max(1) {
        SpawnStep::GiveUp { attempts: spawn.attempts }
    } else {
        SpawnStep::Emit { attempt: spawn.attempts + 1 }
    }
}

/// Whether the spawn ledger is armed this cycle (reference §2.2 step 8): something
/// genuinely new arrived, or a spawn is already in progress.
pub fn spawn_armed(spawn: &SpawnLedger, genuinely_new: bool) -> bool {
    genuinely_new || (spawn.attempts > 0 && !spawn.gave_up)
}

/// Where a pull request's ledger lives (seed 002, issue-370): under the work item this
/// machine's session record binds it to, else under the owner an existing ledger already
/// nests it in, else its own record. Never guessed from linkage.
pub fn ledger_owner(
    pr: &WorkItemRef,
    session_binding: Option<&WorkItemRef>,
    existing_owner: Option<&WorkItemRef>,
) -> WorkItemRef {
    session_binding.or(existing_owner).unwrap_or(pr).clone()
}

/// The comment ledger of `item` inside `owner`'s poll ledger: the owner's own, or the
/// nested one of a pull request delivering it.
pub fn comment_ledger_mut<'a>(
    owner: &WorkItemRef,
    ledger: &'a mut PollLedger,
    item: &WorkItemRef,
) -> &'a mut CommentLedger {
    if owner == item {
        &mut ledger.comments
    } else {
        ledger.pull_requests.entry(item.clone()).or_default()
    }
}

/// What a portable record is to closure reconciliation (seed 000 R1.1, R2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClosureClass {
    /// Armed, frozen, rostered or session-backed: asked every cycle it is absent.
    Tracked,
    /// Only a poll ledger: asked lazily, windowed and capped.
    LedgerOnly,
    /// Stamped `ended`, or nothing the poller tracks: never asked.
    Untracked,
}

/// The sections (and session) a ref has, as closure reconciliation reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordFacts {
    pub session: bool,
    pub control: bool,
    pub graph: bool,
    pub collaborators: bool,
    pub poll: bool,
    pub ended: bool,
}

pub fn closure_class(facts: RecordFacts) -> ClosureClass {
    if facts.ended {
        ClosureClass::Untracked
    } else if facts.session || facts.control || facts.graph || facts.collaborators {
        ClosureClass::Tracked
    } else if facts.poll {
        ClosureClass::LedgerOnly
    } else {
        ClosureClass::Untracked
    }
}

/// Whether a ledger-only record is due (seed 000 R1.2): the later of its two clocks is at
/// least 60 × interval before `now`. No clock (absent or unparsable) is due; a clock in
/// the future is not.
pub fn is_due(clock: &PollClock, now: Timestamp, interval_seconds: u64) -> bool {
    match latest(clock) {
        None => true,
        Some(at) => {
            let interval = i64::try_from(interval_seconds.max(1)).unwrap_or(i64::MAX);
            let window =
                SignedDuration::from_secs(interval.saturating_mul(LEDGER_RECHECK_EVERY_CYCLES));
            now.duration_since(at) >= window
        }
    }
}

fn latest(clock: &PollClock) -> Option<Timestamp> {
    clock.last_polled_at.max(clock.closure_checked_at)
}

/// A stamp as written by the reference (`YYYY-MM-DDTHH:MM:SSZ`) or any RFC 3339 form;
/// `None` when it does not parse (which makes the record due).
pub fn parse_stamp(text: &str) -> Option<Timestamp> {
    text.parse().ok()
}

/// Why a ledger-only candidate was passed over without spending the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Listed this cycle (itself or as a linked ref).
    Listed,
    /// Not in any configured repository.
    Unowned,
    /// Its repository's listing failed or was skipped this cycle.
    Degraded,
}

/// The ledger-only records to ask about this cycle (seed 000 R1.1–R1.3): due ones,
/// longest-absent first (no clock first, then the oldest, then by ref), at most
/// [`LEDGER_CHECKS_PER_CYCLE`]. `skip` says why a ref is passed over (listed, unowned,
/// degraded); such skips never spend the cap.
pub fn ledger_checks(
    candidates: &BTreeMap<WorkItemRef, PollClock>,
    now: Timestamp,
    interval_seconds: u64,
    skip: impl Fn(&WorkItemRef) -> Option<Skip>,
) -> Vec<WorkItemRef> {
    let mut due: Vec<(Option<Timestamp>, &WorkItemRef)> = candidates
        .iter()
        .filter(|(item, clock)| skip(item).is_none() && is_due(clock, now, interval_seconds))
        .map(|(item, clock)| (latest(clock), item))
        .collect();
    due.sort();
    due.into_iter().take(LEDGER_CHECKS_PER_CYCLE).map(|(_, item)| item.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ControlConfig;

    fn login(name: &str) -> Login {
        name.parse().unwrap()
    }

    fn user(name: &str) -> Actor {
        Actor::User(login(name))
    }

    fn item(n: u64) -> WorkItemRef {
        format!("github:octo/app#{n}").parse().unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// A conversation comment's node id.
    fn c(n: u64) -> CommentId {
        CommentId::new(format!("IC_{n}"))
    }

    fn ids(ns: &[u64]) -> Vec<CommentId> {
        ns.iter().map(|n| c(*n)).collect()
    }

    /// Comment `n` was created at minute `n` of GitHub's clock.
    fn minute(n: u64) -> Timestamp {
        Timestamp::from_second(1_790_000_000 + 60 * n as i64).unwrap()
    }

    /// A thread by `ann` of `live`, comment `n` created at [`minute`] `n` except those in
    /// `unknown` (whose creation time did not parse).
    fn entries<'a>(live: &'a [CommentId], unknown: &[u64]) -> Vec<ThreadEntry<'a>> {
        static ANN: std::sync::LazyLock<Actor> = std::sync::LazyLock::new(|| user("ann"));
        live.iter()
            .map(|id| {
                let n: u64 = id.as_str().trim_start_matches("IC_").parse().unwrap();
                let created_at = (!unknown.contains(&n)).then(|| minute(n));
                ThreadEntry { id, author: &ANN, body: "go on", created_at }
            })
            .collect()
    }

    fn vocabulary() -> Vocabulary {
        Vocabulary::from(&ControlConfig::default())
    }

    #[test]
    fn the_comment_step_table() {
        use DeliveryStatus::*;
        let cases = [
            (Done, 2, CommentStep::Resolve),
            (Settled("awaiting-start".into()), 0, CommentStep::Settle("awaiting-start".into())),
            (InFlight, 3, CommentStep::Wait),
            (InFlight, 0, CommentStep::Wait),
            (Unhandled, 0, CommentStep::Forward { attempt: 1 }),
            (Unhandled, 2, CommentStep::Forward { attempt: 3 }),
            (Unhandled, 3, CommentStep::GiveUp { attempts: 3 }),
        ];
        for (status, attempts, step) in cases {
            assert_eq!(comment_step(&status, attempts, 3), step, "{status:?} {attempts}");
        }
    }

    #[test]
    fn a_max_retries_below_one_counts_as_one() {
        assert_eq!(
            comment_step(&DeliveryStatus::Unhandled, 1, 0),
            CommentStep::GiveUp { attempts: 1 }
        );
        assert_eq!(
            comment_step(&DeliveryStatus::Unhandled, 0, 0),
            CommentStep::Forward { attempt: 1 }
        );
    }

    #[test]
    fn authorization_allows_nobody_and_listed_logins_only() {
        let list = [login("ann")];
        assert!(is_authorized(&Actor::Nobody, &list));
        assert!(is_authorized(&user("ann"), &list));
        assert!(!is_authorized(&user("bob"), &list));
        assert!(!is_authorized(&user("ann"), &[]));
        assert!(!is_authorized(&Actor::Unrecognised("a b".into()), &list));
    }

    #[test]
    fn first_sight_holds_back_authorized_unambiguous_non_self_commands_in_thread_order() {
        let (ann, eve, nobody) = (user("ann"), user("eve"), Actor::Nobody);
        let marked = crate::guards::mark_self_authored("the-loop start");
        let id = ids(&[1, 2, 3, 4, 5, 6, 7]);
        let thread = [
            ThreadEntry { id: &id[0], author: &ann, body: "just chatting", created_at: None },
            ThreadEntry { id: &id[1], author: &ann, body: "the-loop start", created_at: None },
            ThreadEntry { id: &id[2], author: &eve, body: "the-loop start", created_at: None },
            ThreadEntry { id: &id[3], author: &ann, body: &marked, created_at: None },
            ThreadEntry {
                id: &id[4],
                author: &ann,
                body: "the-loop start then the-loop stop",
                created_at: None,
            },
            ThreadEntry { id: &id[5], author: &nobody, body: "the-loop start", created_at: None },
            ThreadEntry { id: &id[6], author: &ann, body: "the-loop stop", created_at: None },
        ];
        let authorized = [login("ann")];
        assert_eq!(pending_control(&thread, false, &authorized, &vocabulary()), ids(&[2, 7]));
        assert!(pending_control(&thread, true, &authorized, &vocabulary()).is_empty());
        let disabled = Vocabulary::from(&ControlConfig { enabled: false, ..Default::default() });
        assert!(pending_control(&thread, false, &authorized, &disabled).is_empty());
    }

    #[test]
    fn edge_24_an_untitled_ledger_with_own_state_is_known_and_a_nesting_one_is_not() {
        let with = |f: fn(&mut PollLedger)| {
            let mut ledger = PollLedger::default();
            f(&mut ledger);
            ledger
        };
        let nesting = with(|l| {
            l.pull_requests.insert(item(7), CommentLedger::default());
        });
        assert!(!own_thread_known(&nesting), "only a nested PR ledger: first sight");
        assert!(own_thread_known(&with(|l| l.title = Some("t".into()))));
        assert!(own_thread_known(&with(|l| l.comments.seen_comments.push(c(1)))));
        assert!(own_thread_known(&with(|l| l.spawn = Some(SpawnLedger::default()))));
        assert!(!own_thread_known(&PollLedger::default()));
    }

    #[test]
    fn baseline_resolves_everything_but_the_pending_and_clears_attempts() {
        let mut ledger = CommentLedger {
            seen_comments: ids(&[9]),
            comment_attempts: BTreeMap::from([(c(9), 1)]),
            gave_up: None,
            seen_through: None,
        };
        baseline(&mut ledger, &ids(&[1, 2, 3, 2]), &ids(&[2]));
        assert_eq!(ledger.seen_comments, ids(&[1, 3]));
        assert!(ledger.comment_attempts.is_empty());
    }

    #[test]
    fn sorting_silences_unseen_strangers_and_self_marked_and_keeps_order() {
        let (ann, eve, nobody) = (user("ann"), user("eve"), Actor::Nobody);
        let marked = crate::guards::mark_self_authored("hello");
        let ledger = CommentLedger { seen_comments: ids(&[1]), ..Default::default() };
        let id = ids(&[1, 2, 3, 4, 5]);
        let thread = [
            ThreadEntry { id: &id[0], author: &ann, body: "seen", created_at: None },
            ThreadEntry { id: &id[1], author: &eve, body: "stranger", created_at: None },
            ThreadEntry { id: &id[2], author: &ann, body: "new", created_at: None },
            ThreadEntry { id: &id[3], author: &ann, body: &marked, created_at: None },
            ThreadEntry { id: &id[4], author: &nobody, body: "ghost", created_at: None },
        ];
        let authorized = [login("ann")];
        let sorted = sort_thread(&ledger, &thread, |a| is_authorized(a, &authorized));
        assert_eq!(sorted.silenced, ids(&[2, 4]));
        assert_eq!(sorted.candidates, ids(&[3, 5]));
    }

    #[test]
    fn a_pr_comment_review_and_inline_comment_sharing_a_number_are_three_entries() {
        // GitHub numbers the three surfaces separately: #5 exists on each of them.
        let ann = user("ann");
        let id = [CommentId::new("IC_5"), CommentId::new("PRR_5"), CommentId::new("PRRC_5")];
        let thread: Vec<ThreadEntry<'_>> = id
            .iter()
            .map(|id| ThreadEntry { id, author: &ann, body: "go on", created_at: None })
            .collect();
        let mut ledger = CommentLedger::default();
        resolve(&mut ledger, &id[0]);
        let authorized = [login("ann")];
        let sorted = sort_thread(&ledger, &thread, |a| is_authorized(a, &authorized));
        assert_eq!(sorted.candidates, id[1..]);
        record_attempt(&mut ledger, &id[1]);
        assert!(genuinely_new(&ledger, &sorted.candidates), "the inline comment is new");
        resolve(&mut ledger, &id[2]);
        finalize(&mut ledger, &thread);
        assert_eq!(ledger.seen_comments, [id[0].clone(), id[2].clone()]);
        assert_eq!(ledger.comment_attempts, BTreeMap::from([(id[1].clone(), 1)]));
    }

    #[test]
    fn a_candidate_with_attempts_is_not_genuinely_new() {
        let ledger =
            CommentLedger { comment_attempts: BTreeMap::from([(c(3), 1)]), ..Default::default() };
        assert!(!genuinely_new(&ledger, &ids(&[3])));
        assert!(genuinely_new(&ledger, &ids(&[3, 4])));
        assert!(!genuinely_new(&ledger, &[]));
    }

    #[test]
    fn give_up_is_resolved_and_remembered_with_the_version() {
        let mut ledger =
            CommentLedger { comment_attempts: BTreeMap::from([(c(3), 3)]), ..Default::default() };
        give_up(&mut ledger, &c(3), "1.0.0");
        assert_eq!(ledger.seen_comments, ids(&[3]));
        assert!(ledger.comment_attempts.is_empty());
        assert_eq!(ledger.gave_up, Some(GaveUp { comments: ids(&[3]), version: "1.0.0".into() }));
    }

    #[test]
    fn released_attempts_count_down_and_resolved_ones_are_not_releasable() {
        let mut ledger = CommentLedger::default();
        assert_eq!(record_attempt(&mut ledger, &c(3)), 1);
        assert_eq!(record_attempt(&mut ledger, &c(3)), 2);
        assert!(release_attempt(&mut ledger, &c(3)));
        assert_eq!(ledger.comment_attempts[&c(3)], 1);
        assert!(release_attempt(&mut ledger, &c(3)));
        assert!(!ledger.comment_attempts.contains_key(&c(3)));
        resolve(&mut ledger, &c(4));
        assert!(!release_attempt(&mut ledger, &c(4)));
        let mut spawn = SpawnLedger { attempts: 1, gave_up: false, delivery_id: Some("d".into()) };
        release_spawn(&mut spawn);
        assert_eq!(spawn, SpawnLedger { attempts: 0, gave_up: false, delivery_id: None });
    }

    #[test]
    fn finalize_prunes_to_the_live_thread() {
        let mut ledger = CommentLedger {
            seen_comments: ids(&[1, 2, 3]),
            comment_attempts: BTreeMap::from([(c(4), 1), (c(5), 2)]),
            gave_up: Some(GaveUp { comments: ids(&[2]), version: "v".into() }),
            seen_through: None,
        };
        finalize(&mut ledger, &entries(&ids(&[1, 3, 5]), &[]));
        assert_eq!(ledger.seen_comments, ids(&[1, 3]));
        assert_eq!(ledger.comment_attempts, BTreeMap::from([(c(5), 2)]));
        assert_eq!(ledger.gave_up, None);
    }

    #[test]
    fn a_thread_within_the_cap_keeps_every_id_and_no_watermark() {
        let mut ledger = CommentLedger::default();
        let live: Vec<CommentId> = (1..=700).map(c).collect();
        baseline(&mut ledger, &live, &[]);
        finalize(&mut ledger, &entries(&live, &[]));
        assert_eq!(ledger.seen_comments.len(), 700);
        assert_eq!(ledger.seen_through, None);
    }

    #[test]
    fn a_thread_past_the_cap_gives_its_oldest_ids_to_the_watermark_and_re_forwards_none() {
        let n = SEEN_COMMENTS_CAP as u64 + 100;
        let live: Vec<CommentId> = (1..=n).map(c).collect();
        let thread = entries(&live, &[]);
        let mut ledger = CommentLedger::default();
        baseline(&mut ledger, &live, &[]);
        finalize(&mut ledger, &thread);
        assert_eq!(ledger.seen_comments.len(), SEEN_COMMENTS_CAP);
        assert_eq!(ledger.seen_through, Some(minute(101)), "the first id kept");
        assert_eq!(ledger.seen_comments.first(), Some(&c(101)));
        let authorized = [login("ann")];
        let allowed = |a: &Actor| is_authorized(a, &authorized);
        assert_eq!(sort_thread(&ledger, &thread, allowed), Sorted::default(), "nothing is new");
        assert!(thread.iter().all(|comment| is_resolved(&ledger, comment)));
        // One more comment: it alone is a candidate; once resolved the watermark moves on.
        let longer: Vec<CommentId> = (1..=n + 1).map(c).collect();
        let thread = entries(&longer, &[]);
        assert_eq!(sort_thread(&ledger, &thread, allowed).candidates, [c(n + 1)]);
        resolve(&mut ledger, &c(n + 1));
        finalize(&mut ledger, &thread);
        assert_eq!(ledger.seen_comments.len(), SEEN_COMMENTS_CAP);
        assert_eq!(ledger.seen_through, Some(minute(102)));
    }

    #[test]
    fn the_watermark_never_passes_an_unresolved_comment_nor_one_of_unknown_age() {
        let n = SEEN_COMMENTS_CAP as u64 + 100;
        let live: Vec<CommentId> = (1..=n).map(c).collect();
        // #50 is still in flight: the watermark stops at it, whatever the cap says.
        let mut ledger = CommentLedger::default();
        baseline(&mut ledger, &live, &[c(50)]);
        record_attempt(&mut ledger, &c(50));
        finalize(&mut ledger, &entries(&live, &[]));
        assert_eq!(ledger.seen_through, Some(minute(50)));
        assert_eq!(ledger.seen_comments.len(), live.len() - 50);
        let authorized = [login("ann")];
        let allowed = |a: &Actor| is_authorized(a, &authorized);
        let thread = entries(&live, &[]);
        assert_eq!(sort_thread(&ledger, &thread, allowed).candidates, [c(50)]);
        // An unresolved comment whose creation time did not parse: nothing is evicted.
        let mut ledger = CommentLedger::default();
        baseline(&mut ledger, &live, &[c(7)]);
        finalize(&mut ledger, &entries(&live, &[7]));
        assert_eq!((ledger.seen_through, ledger.seen_comments.len()), (None, live.len() - 1));
    }

    #[test]
    fn the_watermark_never_moves_back() {
        let live: Vec<CommentId> = (1..=10).map(c).collect();
        let mut ledger = CommentLedger { seen_through: Some(minute(5)), ..Default::default() };
        for id in &live[4..] {
            resolve(&mut ledger, id);
        }
        finalize(&mut ledger, &entries(&live, &[]));
        assert_eq!(ledger.seen_through, Some(minute(5)));
        assert_eq!(ledger.seen_comments, live[4..], "ids the watermark covers are dropped");
    }

    #[test]
    fn rearm_only_for_another_version() {
        let abandoned = |version: &str| CommentLedger {
            seen_comments: ids(&[1, 2]),
            comment_attempts: BTreeMap::new(),
            gave_up: Some(GaveUp { comments: ids(&[2]), version: version.into() }),
            seen_through: None,
        };
        let mut same = abandoned("1.0.0");
        assert!(rearm(&mut same, "1.0.0").is_empty());
        assert_eq!(same, abandoned("1.0.0"));
        let mut older = abandoned("0.9.0");
        assert_eq!(rearm(&mut older, "1.0.0"), ids(&[2]));
        assert_eq!(older.seen_comments, ids(&[1]));
        assert_eq!(older.gave_up, None);
    }

    #[test]
    fn the_spawn_step_table() {
        use DeliveryStatus::*;
        let ledger = |attempts, gave_up| SpawnLedger { attempts, gave_up, delivery_id: None };
        let cases = [
            (ledger(0, true), false, None, SpawnStep::Quiet),
            (ledger(0, false), true, None, SpawnStep::Quiet),
            (ledger(1, false), false, Some(InFlight), SpawnStep::Wait),
            (ledger(1, false), false, Some(Done), SpawnStep::Reset),
            (ledger(1, false), false, Some(Settled("x".into())), SpawnStep::Reset),
            (ledger(1, false), false, Some(Unhandled), SpawnStep::Emit { attempt: 2 }),
            (ledger(0, false), false, None, SpawnStep::Emit { attempt: 1 }),
            (ledger(3, false), false, Some(Unhandled), SpawnStep::GiveUp { attempts: 3 }),
        ];
        for (spawn, awaiting, last, step) in cases {
            assert_eq!(spawn_step(&spawn, awaiting, last.as_ref(), 3), step, "{spawn:?} {last:?}");
        }
    }

    #[test]
    fn an_arming_command_satisfies_the_item_author_gate() {
        assert!(spawn_authorized(true, None));
        assert!(spawn_authorized(false, Some(Command::Start)));
        assert!(spawn_authorized(false, Some(Command::Resume)));
        assert!(!spawn_authorized(false, Some(Command::Stop)));
        assert!(!spawn_authorized(false, None));
    }

    #[test]
    fn spawn_is_armed_by_new_activity_or_a_spawn_in_progress() {
        let spawn = |attempts, gave_up| SpawnLedger { attempts, gave_up, delivery_id: None };
        assert!(spawn_armed(&spawn(0, false), true));
        assert!(spawn_armed(&spawn(0, true), true));
        assert!(spawn_armed(&spawn(1, false), false));
        assert!(!spawn_armed(&spawn(0, false), false));
        assert!(!spawn_armed(&spawn(3, true), false));
    }

    #[test]
    fn a_pr_ledger_nests_under_the_bound_or_known_owner_never_a_guess() {
        let (pr, issue, other) = (item(7), item(3), item(4));
        assert_eq!(ledger_owner(&pr, Some(&issue), Some(&other)), issue);
        assert_eq!(ledger_owner(&pr, None, Some(&other)), other);
        assert_eq!(ledger_owner(&pr, None, None), pr);
        let mut ledger = PollLedger::default();
        comment_ledger_mut(&issue, &mut ledger, &pr).seen_comments.push(c(1));
        comment_ledger_mut(&issue, &mut ledger, &issue).seen_comments.push(c(2));
        assert_eq!(ledger.pull_requests[&pr].seen_comments, ids(&[1]));
        assert_eq!(ledger.comments.seen_comments, ids(&[2]));
    }

    #[test]
    fn closure_classes() {
        let facts = |f: fn(&mut RecordFacts)| {
            let mut facts = RecordFacts::default();
            f(&mut facts);
            closure_class(facts)
        };
        assert_eq!(facts(|f| f.poll = true), ClosureClass::LedgerOnly);
        assert_eq!(facts(|f| (f.poll, f.control) = (true, true)), ClosureClass::Tracked);
        assert_eq!(facts(|f| (f.poll, f.graph) = (true, true)), ClosureClass::Tracked);
        assert_eq!(facts(|f| (f.poll, f.collaborators) = (true, true)), ClosureClass::Tracked);
        assert_eq!(facts(|f| (f.poll, f.session) = (true, true)), ClosureClass::Tracked);
        assert_eq!(facts(|f| f.session = true), ClosureClass::Tracked);
        assert_eq!(facts(|f| (f.poll, f.ended) = (true, true)), ClosureClass::Untracked);
        assert_eq!(facts(|f| (f.control, f.ended) = (true, true)), ClosureClass::Untracked);
        assert_eq!(facts(|_| ()), ClosureClass::Untracked);
    }

    #[test]
    fn due_means_sixty_intervals_since_the_later_clock() {
        let now = at("2026-09-18T12:00:00Z");
        let clock = |polled: Option<&str>, checked: Option<&str>| PollClock {
            last_polled_at: polled.map(at),
            closure_checked_at: checked.map(at),
        };
        let cases = [
            (clock(None, None), true),
            (clock(Some("2026-09-18T11:00:00Z"), None), true),
            (clock(Some("2026-09-18T11:00:01Z"), None), false),
            (clock(Some("2026-09-17T00:00:00Z"), Some("2026-09-18T11:30:00Z")), false),
            (clock(Some("2026-09-18T11:30:00Z"), Some("2026-09-17T00:00:00Z")), false),
            (clock(Some("2026-09-17T00:00:00Z"), Some("2026-09-18T10:00:00Z")), true),
            (clock(Some("2027-01-01T00:00:00Z"), None), false),
        ];
        for (clock, due) in cases {
            assert_eq!(is_due(&clock, now, 60), due, "{clock:?}");
        }
        assert!(is_due(&clock(Some("2026-09-18T11:58:00Z"), None), now, 1));
    }

    #[test]
    fn an_unparsable_stamp_reads_as_no_clock_and_is_due() {
        assert_eq!(parse_stamp("yesterday"), None);
        assert_eq!(parse_stamp("2026-09-18T10:42:00Z"), Some(at("2026-09-18T10:42:00Z")));
        let clock =
            PollClock { last_polled_at: parse_stamp("yesterday"), closure_checked_at: None };
        assert!(is_due(&clock, at("2026-09-18T12:00:00Z"), 60));
    }

    #[test]
    fn twenty_asked_longest_absent_first_and_skips_spend_no_cap() {
        let now = at("2026-09-18T12:00:00Z");
        let mut candidates = BTreeMap::new();
        for n in 1..=30u64 {
            let stamp = Timestamp::from_second(1_700_000_000 + (30 - n as i64) * 60).unwrap();
            candidates
                .insert(item(n), PollClock { last_polled_at: Some(stamp), ..Default::default() });
        }
        candidates.insert(item(99), PollClock::default());
        let skip = |r: &WorkItemRef| match r.number() {
            1 => Some(Skip::Unowned),
            2 => Some(Skip::Degraded),
            3 => Some(Skip::Listed),
            _ => None,
        };
        let asked = ledger_checks(&candidates, now, 60, skip);
        assert_eq!(asked.len(), LEDGER_CHECKS_PER_CYCLE);
        let numbers: Vec<u64> = asked.iter().map(WorkItemRef::number).collect();
        // No clock first, then the oldest: #30 is the oldest stamp, #4 the newest asked.
        assert_eq!(numbers[0], 99);
        assert_eq!(numbers[1], 30);
        assert_eq!(numbers[19], 12);
        assert!(!numbers.contains(&1) && !numbers.contains(&2) && !numbers.contains(&3));
    }
}
