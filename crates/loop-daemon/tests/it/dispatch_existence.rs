//! The existence check the dispatcher answers for the receiver: a definite 404 drops a
//! branch-named ref (see `dispatch_closure`), anything else keeps it, and a live record
//! owning one of the event's refs answers before GitHub is asked.

use loop_sim::{Fault, FaultKind};

use crate::dispatch_lab::{LABEL, Lab, OWNER, REPO};

fn asked_about(lab: &Lab, number: u64) -> usize {
    let path = format!("/repos/{REPO}/issues/{number}");
    lab.sim.requests().records.iter().filter(|r| r.method == "GET" && r.path == path).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existence_check_that_cannot_answer_keeps_the_ref() {
    let mut lab = Lab::start("").await;
    lab.sim.inject(Fault {
        kind: FaultKind::ServerError { status: 502 },
        times: 5,
        path_contains: Some("/issues/4243".into()),
    });
    lab.sim
        .open_pull_request(REPO, OWNER, "Unsure", "", "issue-4243-fix", &[LABEL])
        .expect("a pull request");
    lab.settle().await;
    assert!(asked_about(&lab, 4243) >= 1, "GitHub was asked");
    assert!(lab.named("routing.linkage_dropped").is_empty(), "an unavailable check is not absence");
    let ghost = lab.item(4243).to_string();
    let kept = lab.named("dispatch.dropped").into_iter().any(|line| {
        line["gh_event"] == "pull_request"
            && line["work_items"].as_array().is_some_and(|items| items.iter().any(|i| *i == ghost))
    });
    assert!(kept, "the ref travels on with the event: {:#?}", lab.named("dispatch.dropped"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_record_answers_before_github_is_asked() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.clear_requests();
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Part", "", &format!("issue-{number}-part"), &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "look at this part");
    lab.settle().await;
    assert_eq!(asked_about(&lab, number), 0, "{}", lab.sim.requests());
    assert!(lab.pasted().await.last().expect("pasted").contains("look at this part"));
}
