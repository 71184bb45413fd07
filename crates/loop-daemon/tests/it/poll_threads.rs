//! Long threads (issue #16, the soak's finding): a changed item's thread is read from
//! where the last read left off (`since=` each surface's newest `updated_at`, as GitHub
//! reported it), so a new comment costs one page however long the thread is, and a thread
//! longer than the ledger's cap of seen ids re-forwards none of its old comments, across
//! restarts and without the poll cache.

use loop_core::poll::SEEN_COMMENTS_CAP;
use loop_core::record::PollLedger;
use loop_sim::RequestLog;
use loop_sim::ReviewState;
use loop_sim::shapes::time;

use crate::poll_support::{Bench, LABEL};

const REPO: &str = "octo/app";
const CONVERSATION: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}/comments";
const INLINE: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments";
const REVIEWS: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews";

fn poll_ledger(bench: &Bench, number: u64) -> PollLedger {
    let item = bench.item(REPO, number);
    bench.store.read_section::<PollLedger>(&item).unwrap().into_value().unwrap()
}

/// The `since` each request to `endpoint` asked with (`None`: a whole read).
fn since_asked(log: &RequestLog, endpoint: &str) -> Vec<Option<String>> {
    log.records
        .iter()
        .filter(|r| format!("{} {}", r.method, r.endpoint) == endpoint)
        .map(|r| r.query.get("since").cloned())
        .collect()
}

/// How many pages of issue `number`'s conversation the poll cache remembers.
fn remembered_pages(bench: &Bench, number: u64) -> usize {
    let text = std::fs::read_to_string(bench.store.layout().poll_cache()).unwrap();
    let cache: serde_json::Value = serde_json::from_str(&text).unwrap();
    let page = format!("/issues/{number}/comments");
    let validators = cache["validators"]["github.com"].as_array().unwrap();
    validators.iter().filter(|v| v["url"].as_str().unwrap().contains(&page)).count()
}

/// The simulator's clock ticks at least a second per action, so after these comments it
/// runs half an hour ahead of this machine's: a `since` taken from the local clock would
/// ask for the whole thread again (and one behind GitHub's would miss comments).
#[tokio::test]
async fn a_new_comment_on_a_thread_past_the_cap_costs_one_page_and_re_forwards_nothing() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    let long = SEEN_COMMENTS_CAP + 150;
    for i in 0..long {
        bench.sim.comment(REPO, n, "ann", &format!("old {i}")).unwrap();
    }
    bench.cycle().await;
    assert_eq!(remembered_pages(&bench, n), 1, "a whole read keeps its last page only");
    let ledger = poll_ledger(&bench, n).comments;
    assert_eq!(ledger.seen_comments.len(), SEEN_COMMENTS_CAP, "the record stays bounded");
    assert!(ledger.seen_through.is_some(), "the oldest ids gave way to the watermark");

    let pages_of_the_thread = (long + 1).div_ceil(100);
    let cases = [
        ("the next cycle", "one", false),
        ("a restart, warm from the poll cache", "two", true),
        ("a restart without the poll cache", "three", true),
    ];
    for (when, body, restart) in cases {
        if restart {
            bench.restart();
        }
        if when.contains("without") {
            std::fs::remove_file(bench.store.layout().poll_cache()).unwrap();
        }
        let newest = bench.sim.world().item(REPO, n).unwrap().comments.last().unwrap().updated_at;
        bench.sim.comment(REPO, n, "ann", body).unwrap();
        bench.sim.clear_requests();
        let report = bench.cycle().await;
        let log = bench.sim.requests();
        assert_eq!(report.comments_forwarded, 1, "{when}: only the new comment");
        let asked = since_asked(&log, CONVERSATION);
        if when.contains("without") {
            // Cold: the whole thread is read, and the ledger's watermark still knows
            // every old comment.
            assert!(asked.len() >= pages_of_the_thread, "{when}: {log}");
            assert!(asked.iter().all(Option::is_none), "{when}: {asked:?}");
        } else {
            assert_eq!(asked, [Some(time(newest))], "{when}: one page: {log}");
        }
    }
    assert_eq!(bench.stand_in.comment_bodies(), ["one", "two", "three"]);
    assert_eq!(remembered_pages(&bench, n), 1);
    bench.cycle().await;
    let ledger = poll_ledger(&bench, n).comments;
    assert_eq!(ledger.seen_comments.len(), SEEN_COMMENTS_CAP);
    assert!(ledger.comment_attempts.is_empty());
}

/// The comment at the watermark comes back with every `since=` read (GitHub compares
/// inclusively), and an edited comment comes back with its new `updated_at`: both replace
/// the remembered comment by node id; neither is forwarded again.
#[tokio::test]
async fn comments_seen_again_at_the_watermark_or_edited_are_merged_and_never_re_forwarded() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let first = bench.sim.comment(REPO, n, "ann", "first").unwrap();
    bench.cycle().await;
    bench.sim.comment(REPO, n, "ann", "second").unwrap();
    bench.sim.clear_requests();
    bench.cycle().await;
    let log = bench.sim.requests();
    assert!(since_asked(&log, CONVERSATION)[0].is_some(), "{log}");
    bench.sim.edit_comment(REPO, first, "ann", "first, edited").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["first", "second"]);
    let cache: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bench.store.layout().poll_cache()).unwrap())
            .unwrap();
    let remembered = &cache["threads"][bench.item(REPO, n).to_string()]["comments"];
    let bodies: Vec<&str> =
        remembered.as_array().unwrap().iter().map(|c| c["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["first, edited", "second"], "merged by node id, in thread order");
    // Reads with a watermark are never remembered for conditional requests: their URL
    // changes with it, so the validators hold the listing and no thread page.
    let validators = cache["validators"]["github.com"].as_array().unwrap();
    assert!(
        validators.iter().all(|v| !v["url"].as_str().unwrap().contains("since=")),
        "{validators:?}"
    );
}

/// A pull request's conversation and inline comments are read since their own newest
/// `updated_at` each; its reviews, which GitHub lists without `since`, whole and
/// conditionally.
#[tokio::test]
async fn a_pull_requests_surfaces_are_each_read_since_their_own_newest_comment() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    bench.sim.comment(REPO, pr, "ann", "context").unwrap();
    let inline = [("src/lib.rs", 3, "inline one")];
    bench.sim.review(REPO, pr, "ann", ReviewState::Commented, "a review", &inline).unwrap();
    bench.cycle().await;
    let world = bench.sim.world();
    let item = world.item(REPO, pr).unwrap();
    let conversation_newest = time(item.comments.last().unwrap().updated_at);
    let inline_newest =
        time(item.pull.as_ref().unwrap().review_comments.last().unwrap().created_at);
    let inline = [("src/lib.rs", 9, "inline two")];
    bench.sim.review(REPO, pr, "ann", ReviewState::Commented, "another", &inline).unwrap();
    bench.sim.clear_requests();
    bench.cycle().await;
    let log = bench.sim.requests();
    assert_eq!(since_asked(&log, CONVERSATION), [Some(conversation_newest)], "{log}");
    assert_eq!(since_asked(&log, INLINE), [Some(inline_newest)], "{log}");
    assert_eq!(since_asked(&log, REVIEWS), [None], "{log}");
    assert_eq!(bench.stand_in.comment_bodies(), ["another", "inline two"]);
}
