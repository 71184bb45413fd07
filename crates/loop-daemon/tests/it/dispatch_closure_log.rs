//! A closure's event-log lines are rendered from its decisions like every other
//! outcome, so the log and `GET /metrics` agree: each step (`session.autoclosed`,
//! `work_item.ended`, `cleanup.deferred`, `work_item.pull_request_ended`,
//! `session.kept_open`) is a line carrying the delivery, and the delivery is counted
//! once, under the closure's reason.

use serde_json::Value;

use crate::dispatch_lab::{Lab, OWNER, REPO, STRANGER};

/// The names of `names`' lines, in log order.
fn in_order(lab: &Lab, names: &[&str]) -> Vec<String> {
    lab.events()
        .iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|name| names.contains(name))
        .map(str::to_owned)
        .collect()
}

fn counted(lab: &Lab, outcome: &str, reason: &str) -> bool {
    let sample =
        format!("the_loop_deliveries_total{{outcome=\"{outcome}\",reason=\"{reason}\"}} 1\n");
    lab.metrics.render().contains(&sample)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorized_close_logs_each_step_with_its_delivery_and_counts_it_once() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.close(REPO, number, OWNER).expect("closed");
    lab.settle().await;

    let steps = ["session.closed", "session.autoclosed", "work_item.ended", "session.cleaned"];
    assert_eq!(in_order(&lab, &steps), steps, "{:#?}", lab.events());
    let key = lab.key_of_last("session.autoclosed");
    let autoclosed = lab.named("session.autoclosed").pop().expect("autoclosed");
    assert_eq!(
        (autoclosed["reason"].as_str(), autoclosed["merged"].as_bool()),
        (Some("issue-closed"), Some(false))
    );
    let ended = lab.named("work_item.ended").pop().expect("ended");
    let expected = serde_json::json!({
        "work_item": lab.item(number).to_string(), "state": "closed", "kind": "issue",
        "ingress": "gh-webhook", "actor": OWNER, "delivery_id": key, "gh_event": "issues",
    });
    for (field, value) in expected.as_object().expect("an object") {
        assert_eq!(&ended[field], value, "{field} in {ended:#}");
    }
    assert!(counted(&lab, "done", "issue-closed"), "{}", lab.metrics.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_by_anyone_else_logs_the_deferred_cleanup_with_its_delivery() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.close(REPO, number, STRANGER).expect("closed");
    lab.settle().await;

    let steps = ["session.autoclosed", "work_item.ended", "cleanup.deferred"];
    assert_eq!(in_order(&lab, &steps), steps);
    let key = lab.key_of_last("session.autoclosed");
    let deferred = lab.named("cleanup.deferred").pop().expect("deferred");
    let fields: Vec<&Value> =
        ["reason", "actor", "closed_as", "delivery_id"].iter().map(|f| &deferred[*f]).collect();
    assert_eq!(
        fields,
        [
            &Value::from("unauthorized-actor"),
            &Value::from(STRANGER),
            &Value::from("closed"),
            &Value::from(key)
        ]
    );
    assert!(counted(&lab, "done", "issue-closed"), "{}", lab.metrics.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_pull_request_logs_its_end_and_the_kept_session_and_counts_pr_merged() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Part one", "", &format!("issue-{number}-part-one"), &[])
        .expect("a pull request");
    lab.settle().await;
    lab.sim.merge(REPO, pr, OWNER).expect("merged");
    lab.settle().await;

    let steps = ["session.pr_closed", "work_item.pull_request_ended", "session.kept_open"];
    assert_eq!(in_order(&lab, &steps), steps);
    let ended = lab.named("work_item.pull_request_ended").pop().expect("ended");
    assert_eq!(
        (ended["pull_request"].as_str(), ended["state"].as_str()),
        (Some(&*lab.item(pr).to_string()), Some("merged"))
    );
    let kept = lab.named("session.kept_open").pop().expect("kept");
    assert_eq!(kept["reason"], "pr-merged");
    assert_eq!(kept["delivery_id"], ended["delivery_id"]);
    assert!(lab.named("session.autoclosed").is_empty());
    assert!(counted(&lab, "done", "pr-merged"), "{}", lab.metrics.render());
}
