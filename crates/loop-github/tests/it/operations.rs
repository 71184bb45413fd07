//! The product's operations read and write what the simulated users did.

use loop_github::{CommentSurface, ItemKind, ItemState, Reaction, ReactionTarget};
use loop_sim::ReviewState;

use crate::support::{LABEL, REPO, RecordingClock, client, item, repo, sim};

#[tokio::test]
async fn listing_tells_issues_from_pull_requests_and_carries_what_the_poller_needs() {
    let sim = sim().await;
    let issue = sim.open_issue(REPO, "alice", "Fix parser", &[LABEL, "bug"]).unwrap();
    let pr =
        sim.open_pull_request(REPO, "bob", "Parser fix", "Closes #1", "issue-1", &[LABEL]).unwrap();
    let closed = sim.open_issue(REPO, "alice", "done", &[LABEL]).unwrap();
    sim.close(REPO, closed, "alice").unwrap();
    let gh = client(&sim, RecordingClock::new());
    let listing = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap();
    let rows: Vec<_> =
        listing.items.iter().map(|i| (i.item.number(), i.kind, i.author.as_str())).collect();
    assert_eq!(rows, vec![(pr, ItemKind::PullRequest, "bob"), (issue, ItemKind::Issue, "alice")]);
    let pr_row = &listing.items[0];
    assert_eq!(pr_row.body, "Closes #1");
    assert!(pr_row.node_id.starts_with("PR_"));
    assert_eq!(listing.items[1].labels, vec![LABEL.to_owned(), "bug".to_owned()]);
    assert_eq!(listing.items[1].html_url, "https://github.com/octo/app/issues/1");
}

#[tokio::test]
async fn reading_an_item_reports_state_reason_merge_and_closer() {
    let sim = sim().await;
    let issue = sim.open_issue(REPO, "alice", "bug", &[]).unwrap();
    let pr = sim.open_pull_request(REPO, "bob", "fix", "Fixes #1", "issue-1", &[]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    let open = gh.read_item(&item(issue)).await.unwrap();
    assert_eq!((open.state, open.merged, open.closed_by.clone()), (ItemState::Open, false, None));

    sim.merge(REPO, pr, "carol").unwrap();
    let merged = gh.read_item(&item(pr)).await.unwrap();
    assert_eq!(
        (merged.kind, merged.state, merged.merged),
        (ItemKind::PullRequest, ItemState::Closed, true)
    );
    assert_eq!(merged.closed_by.as_deref(), Some("carol"));
    let closed = gh.read_item(&item(issue)).await.unwrap();
    assert_eq!(closed.state, ItemState::Closed);
    assert_eq!(closed.state_reason.as_deref(), Some("completed"));
    assert_eq!(closed.closed_by.as_deref(), Some("carol"), "merging a linked PR closes the issue");

    let pull = gh.read_pull_request(&item(pr)).await.unwrap();
    assert_eq!(
        (pull.head_ref.as_str(), pull.merged, pull.body.as_str()),
        ("issue-1", true, "Fixes #1")
    );
}

#[tokio::test]
async fn a_pull_request_thread_merges_three_surfaces_and_drops_pending_and_empty_reviews() {
    let sim = sim().await;
    let pr = sim.open_pull_request(REPO, "bob", "fix", "", "b", &[]).unwrap();
    sim.comment(REPO, pr, "alice", "conversation").unwrap();
    sim.review(
        REPO,
        pr,
        "alice",
        ReviewState::ChangesRequested,
        "please rename",
        &[("src/lib.rs", 12, "here")],
    )
    .unwrap();
    sim.review(REPO, pr, "carol", ReviewState::Pending, "draft thoughts", &[]).unwrap();
    sim.review(REPO, pr, "carol", ReviewState::Approved, "  ", &[]).unwrap();
    let gh = client(&sim, RecordingClock::new());

    let thread = gh.pull_request_thread(&item(pr)).await.unwrap();
    let shape: Vec<_> = thread
        .iter()
        .map(|c| (c.surface.clone(), c.body.as_str(), &c.node_id[..c.node_id.find('_').unwrap()]))
        .collect();
    assert_eq!(
        shape,
        vec![
            (CommentSurface::Conversation, "conversation", "IC"),
            (CommentSurface::Review { state: "CHANGES_REQUESTED".into() }, "please rename", "PRR"),
            (
                CommentSurface::Inline {
                    path: "src/lib.rs".into(),
                    line: Some(12),
                    review: Some(thread[1].id)
                },
                "here",
                "PRRC"
            ),
        ]
    );
    assert!(thread.iter().all(|c| c.author == "alice" && !c.created_at.is_empty()));
    let conversation = gh.conversation_comments(&item(pr)).await.unwrap();
    assert_eq!(conversation.len(), 1);
}

#[tokio::test]
async fn posting_and_reacting_land_in_the_world_as_the_tokens_user() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "bug", &[]).unwrap();
    let pr = sim.open_pull_request(REPO, "bob", "fix", "", "b", &[]).unwrap();
    let comment = sim.comment(REPO, n, "alice", "the-loop start").unwrap();
    sim.review(REPO, pr, "alice", ReviewState::Commented, "", &[("a.rs", 1, "nit")]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    let inline = gh.review_comments(&item(pr)).await.unwrap().remove(0);

    let posted = gh.post_comment(&item(n), "on it").await.unwrap();
    assert!(posted.node_id.starts_with("IC_"));
    assert_eq!(sim.comments_by(REPO, n, sim.viewer()), vec!["on it".to_owned()]);

    gh.add_reaction(&ReactionTarget::Item(item(n)), Reaction::Eyes).await.unwrap();
    gh.add_reaction(&ReactionTarget::IssueComment { repo: repo(), id: comment }, Reaction::Hooray)
        .await
        .unwrap();
    gh.add_reaction(&ReactionTarget::IssueComment { repo: repo(), id: comment }, Reaction::Hooray)
        .await
        .unwrap();
    gh.add_reaction(
        &ReactionTarget::ReviewComment { repo: repo(), id: inline.id },
        Reaction::Confused,
    )
    .await
    .unwrap();
    gh.add_reaction(&ReactionTarget::Item(item(pr)), Reaction::ThumbsUp).await.unwrap();

    let world = sim.world();
    let issue = world.item(REPO, n).unwrap();
    assert_eq!(
        issue.reactions.iter().map(|r| r.content.as_str()).collect::<Vec<_>>(),
        vec!["eyes"]
    );
    assert_eq!(issue.comments[0].reactions.len(), 1, "reacting twice is one reaction");
    assert_eq!(
        world.item(REPO, pr).unwrap().pull.as_ref().unwrap().review_comments[0].reactions[0]
            .content,
        "confused"
    );
    assert_eq!(world.item(REPO, pr).unwrap().reactions[0].user, sim.viewer());
}

#[tokio::test]
async fn a_node_id_reaction_lands_on_the_review_and_an_unknown_node_is_not_found() {
    let sim = sim().await;
    let pr = sim.open_pull_request(REPO, "bob", "fix", "", "b", &[]).unwrap();
    sim.review(REPO, pr, "alice", ReviewState::Approved, "ship it", &[]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    let review = gh.reviews(&item(pr)).await.unwrap().remove(0);
    for reaction in [Reaction::Eyes, Reaction::Hooray, Reaction::Hooray] {
        gh.add_reaction(&ReactionTarget::Node(review.node_id.clone()), reaction).await.unwrap();
    }
    let world = sim.world();
    let reviews = &world.item(REPO, pr).unwrap().pull.as_ref().unwrap().reviews;
    let contents: Vec<_> = reviews[0].reactions.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(contents, ["eyes", "hooray"], "reacting twice is one reaction");

    let missing = ReactionTarget::Node("IC_kwDOSim0000009999".to_owned());
    let err = gh.add_reaction(&missing, Reaction::Eyes).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn linked_issues_of_many_pull_requests_come_from_one_graphql_request() {
    let sim = sim().await;
    sim.create_repo("octo/other").unwrap();
    let a = sim.open_issue(REPO, "alice", "a", &[]).unwrap();
    let b = sim.open_issue(REPO, "alice", "b", &[]).unwrap();
    let pr1 = sim
        .open_pull_request(REPO, "bob", "one", &format!("Closes #{a} and fixes #{b}"), "x", &[])
        .unwrap();
    let pr2 = sim.open_pull_request(REPO, "bob", "two", "no links", "y", &[]).unwrap();
    sim.open_issue("octo/other", "alice", "c", &[]).unwrap();
    let other_pr =
        sim.open_pull_request("octo/other", "bob", "three", "Resolves #1", "z", &[]).unwrap();
    let other: loop_core::RepoRef = "octo/other".parse().unwrap();
    let gh = client(&sim, RecordingClock::new());
    sim.clear_requests();

    let cross = sim.open_pull_request(REPO, "bob", "four", "Fixes octo/other#1", "w", &[]).unwrap();
    let asked = [item(pr1), item(pr2), item(99), other.item(other_pr), item(cross)];
    let linked = gh.linked_issues(&asked).await.unwrap();
    assert_eq!(linked[&item(pr1)], vec![item(a), item(b)]);
    assert_eq!(linked[&item(pr2)], vec![]);
    assert!(!linked.contains_key(&item(99)), "a pull request GitHub does not know is left out");
    assert_eq!(
        linked[&other.item(other_pr)],
        vec![other.item(1)],
        "matched by repository and number"
    );
    assert_eq!(
        linked[&item(cross)],
        vec![other.item(1)],
        "a closing ref may name another repository"
    );
    assert_eq!(sim.requests().total(), 1);

    sim.merge(REPO, cross, "carol").unwrap();
    let closed = gh.read_item(&other.item(1)).await.unwrap();
    assert_eq!((closed.state, closed.closed_by.as_deref()), (ItemState::Closed, Some("carol")));
}

#[tokio::test]
async fn a_repository_without_issues_answers_gone_and_its_pull_requests_are_still_listed() {
    let sim = sim().await;
    sim.open_issue(REPO, "alice", "bug", &[LABEL]).unwrap();
    let pr = sim.open_pull_request(REPO, "bob", "fix", "", "b", &[LABEL]).unwrap();
    sim.open_pull_request(REPO, "bob", "unlabelled", "", "c", &[]).unwrap();
    sim.act(loop_sim::Action::SetIssuesEnabled { repo: REPO.to_owned(), enabled: false }).unwrap();
    let gh = client(&sim, RecordingClock::new());

    let err = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap_err();
    assert!(
        matches!(&err, loop_github::GithubError::Gone { message, .. } if message == "Issues are disabled for this repo"),
        "{err:?}"
    );
    let prs = gh.list_labelled_open_pull_requests(&repo(), LABEL).await.unwrap();
    let listed: Vec<_> = prs.items.iter().map(|i| (i.item.number(), i.kind)).collect();
    assert_eq!(listed, vec![(pr, ItemKind::PullRequest)]);
    assert!(gh.list_labelled_open_pull_requests(&repo(), LABEL).await.unwrap().unchanged);
}

/// Reference §6 edge 9: an inline comment on a line the pull request has since changed
/// comes back with `line: null`; it keeps the line it was written on (`original_line`).
#[tokio::test]
async fn an_outdated_inline_comment_keeps_its_original_line() {
    let comment = serde_json::json!([{
        "id": 11, "node_id": "PRRC_kwDOoutdated", "body": "this loop is off by one",
        "html_url": "https://github.com/octo/app/pull/5#discussion_r11",
        "user": {"login": "alice"}, "created_at": "2026-11-01T00:00:00Z",
        "path": "src/lib.rs", "line": null, "original_line": 42
    }]);
    let app = axum::Router::new().route(
        "/repos/octo/app/pulls/5/comments",
        axum::routing::get(move || async move { axum::Json(comment) }),
    );
    let gh = crate::support::client_at(crate::support::serve(app).await);
    let comments = gh.review_comments(&item(5)).await.unwrap();
    assert_eq!(
        comments[0].surface,
        CommentSurface::Inline { path: "src/lib.rs".into(), line: Some(42), review: None }
    );
}

#[tokio::test]
async fn adding_and_removing_a_label_leaves_every_other_label_alone() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "bug", &[LABEL, "loop:design"]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    let now = gh.add_labels(&item(n), &["loop:test planning"]).await.unwrap();
    assert_eq!(now, [LABEL, "loop:design", "loop:test planning"]);
    assert!(gh.remove_label(&item(n), "loop:design").await.unwrap());
    assert!(!gh.remove_label(&item(n), "loop:design").await.unwrap(), "absent: GitHub's 404");
    assert!(gh.remove_label(&item(n), "loop:test planning").await.unwrap(), "escaped name");
    assert_eq!(sim.world().item(REPO, n).unwrap().labels, [LABEL]);
}

#[tokio::test]
async fn forgetting_an_items_threads_forgets_its_reads_and_pages_and_nothing_else() {
    let sim = sim().await;
    let issue = sim.open_issue(REPO, "alice", "one", &[LABEL]).unwrap();
    let pr = sim.open_pull_request(REPO, "bob", "fix", "", "b", &[LABEL]).unwrap();
    for _ in pr + 1..10 {
        sim.open_issue(REPO, "alice", "filler", &[]).unwrap();
    }
    let tenth = sim.open_issue(REPO, "alice", "ten", &[LABEL]).unwrap();
    // Long enough for a second page, which is read at the `Link` header's
    // `/repositories/{id}/…` URL.
    for number in [issue, tenth] {
        for k in 0..101 {
            sim.comment(REPO, number, "alice", &format!("comment {k}")).unwrap();
        }
    }
    let gh = client(&sim, RecordingClock::new());
    gh.list_labelled_open_items(&repo(), LABEL).await.unwrap();
    for number in [issue, tenth] {
        gh.read_item(&item(number)).await.unwrap();
        gh.conversation_comments(&item(number)).await.unwrap();
    }
    gh.pull_request_thread(&item(pr)).await.unwrap();
    let urls = |gh: &loop_github::GithubClient| -> Vec<String> {
        gh.validators().into_iter().map(|v| v.url).collect()
    };
    let before = urls(&gh);
    let by_id = |url: &str, n: u64| {
        url.contains("/repositories/") && url.contains(&format!("/issues/{n}/comments?"))
    };
    assert!(before.iter().any(|url| by_id(url, issue)), "a second page by id: {before:?}");

    gh.forget_threads(&item(issue));
    gh.forget_threads(&item(pr));

    let kept: Vec<String> = before
        .into_iter()
        .filter(|url| {
            let path = url.split('?').next().unwrap_or(url);
            let of = |n: u64, what: &str| {
                path.ends_with(&format!("/{what}/{n}")) || path.contains(&format!("/{what}/{n}/"))
            };
            !(of(issue, "issues") || of(pr, "issues") || of(pr, "pulls"))
        })
        .collect();
    assert_eq!(urls(&gh), kept);
    assert!(kept.iter().any(|url| by_id(url, tenth)), "{kept:?}");
    assert!(kept.iter().any(|url| url.ends_with(&format!("/issues/{tenth}"))), "{kept:?}");
    assert!(kept.iter().any(|url| url.contains("labels=")), "the listing stays: {kept:?}");
}
