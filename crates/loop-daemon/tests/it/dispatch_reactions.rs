//! Lifecycle reactions by node id (reference §7; seed 002): 👀 when the worker takes the
//! event, then 🎉 or 😕 from the outcome, through GraphQL `addReaction` on whatever the
//! node id names — a pull-request review included, which has no REST reactions
//! endpoint. Best-effort: a failed reaction never changes the dispatch.

use loop_sim::{Fault, FaultKind, ReviewState};

use crate::dispatch_lab::{Lab, OWNER, REPO};

/// The contents of the reactions on a pull request's first review, in order.
fn reactions_on_review(lab: &Lab, pr: u64) -> Vec<String> {
    let world = lab.sim.world();
    let item = world.item(REPO, pr).expect("the pull request");
    let review = &item.pull.as_ref().expect("a pull request").reviews[0];
    review.reactions.iter().map(|r| r.content.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_review_gets_eyes_then_hooray_on_the_review_itself() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix it", &format!("Closes #{number}"), "fix-widget", &[])
        .expect("a pull request");
    lab.sim
        .review(REPO, pr, OWNER, ReviewState::ChangesRequested, "please rename the flag", &[])
        .expect("a review");
    lab.settle().await;

    assert!(lab.pasted().await.last().expect("pasted").contains("please rename the flag"));
    assert_eq!(reactions_on_review(&lab, pr), ["eyes", "hooray"]);
    let added = lab.named("reaction.added");
    let on_review: Vec<_> = added.iter().filter(|r| r["target"] == "review").collect();
    assert_eq!(on_review.len(), 2, "{added:#?}");
    let mutations = lab.sim.graphql_requests();
    assert!(
        mutations.iter().any(|r| r["query"].as_str().is_some_and(|q| q.contains("addReaction"))),
        "reacted through GraphQL: {mutations:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_reacts_by_node_id_and_a_failed_reaction_leaves_the_dispatch_alone() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.inject(Fault {
        kind: FaultKind::ServerError { status: 502 },
        times: 2,
        path_contains: Some("graphql".to_owned()),
    });
    let comment = lab.comment(number, OWNER, "mind the empty case");
    lab.settle().await;

    assert!(lab.pasted().await.last().expect("pasted").contains("mind the empty case"));
    assert!(lab.reactions_on_comment(number, comment).is_empty(), "both reactions failed");
    let failed = lab.named("reaction.failed");
    let states: Vec<_> = failed.iter().map(|f| f["state"].as_str().unwrap_or("")).collect();
    assert_eq!(states, ["started", "completed"], "{failed:#?}");
    let key = lab.key_of_last("dispatch.succeeded");
    assert!(failed.iter().all(|f| f["delivery_id"] == key.as_str()), "{failed:#?}");

    let next = lab.comment(number, OWNER, "and the null case");
    lab.settle().await;
    assert_eq!(lab.reactions_on_comment(number, next), ["eyes", "hooray"]);
}

/// Issue #16 (the soak): a burst of deliveries faster than GitHub takes reactions does not
/// pile reaction tasks up in memory without bound. Past the cap a delivery goes without
/// reactions, `reaction.shed` says so once, and every comment is still pasted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_faster_than_github_takes_reactions_sheds_them_once_and_pastes_every_comment() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    // Every connection the client may open is held by a slow reaction for a while.
    lab.sim.inject(Fault {
        kind: FaultKind::Latency { millis: 3_000 },
        times: 16,
        path_contains: Some("graphql".to_owned()),
    });
    let burst = 80;
    let comments: Vec<u64> =
        (0..burst).map(|i| lab.comment(number, OWNER, &format!("burst {i}"))).collect();
    lab.settle().await;

    let pasted = lab.pasted().await;
    assert_eq!(pasted.iter().filter(|p| p.contains("burst ")).count(), burst);
    let shed = lab.named("reaction.shed");
    assert_eq!(shed.len(), 1, "said once for the burst: {shed:#?}");
    let reacted =
        comments.iter().filter(|&&c| !lab.reactions_on_comment(number, c).is_empty()).count();
    assert!(reacted < burst, "some went without: {reacted} of {burst} reacted");

    let next = lab.comment(number, OWNER, "after the burst");
    lab.settle().await;
    assert_eq!(lab.reactions_on_comment(number, next), ["eyes", "hooray"], "reactions resumed");
}

/// Found by the soak: reactions spent the GraphQL budget, then every reaction (and the
/// poller's linkage query) waited an hour for its reset. The last tenth of a bucket is
/// left to what must be asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_leave_the_last_tenth_of_the_rate_limit_and_say_so_once() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.set_rate_limit(40);
    let comments: Vec<u64> =
        (0..24).map(|i| lab.comment(number, OWNER, &format!("budget {i}"))).collect();
    lab.settle().await;

    let pasted = lab.pasted().await;
    assert_eq!(pasted.iter().filter(|p| p.contains("budget ")).count(), comments.len());
    let shed = lab.named("reaction.shed");
    assert_eq!(shed.len(), 1, "said once: {shed:#?}");
    assert_eq!(shed[0]["reason"], "rate-limit-reserve", "{shed:#?}");
    let reacted =
        comments.iter().filter(|&&c| !lab.reactions_on_comment(number, c).is_empty()).count();
    assert!(reacted < comments.len(), "{reacted} of {} reacted", comments.len());
    assert!(lab.named("reaction.failed").is_empty(), "{:#?}", lab.named("reaction.failed"));
}
