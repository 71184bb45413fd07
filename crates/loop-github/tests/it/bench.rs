//! The request-count benchmark utility measures what SPEC §7 promises of the client:
//! a quiet listing cycle over S repositories is S requests, all 304.

use loop_sim::bench::count_requests;

use crate::support::{LABEL, RecordingClock, client, sim};

#[tokio::test]
async fn a_quiet_listing_cycle_is_one_304_per_repository() {
    let sim = sim().await;
    let repos = ["octo/app", "octo/lib", "octo/web"];
    for (i, name) in repos.iter().enumerate() {
        sim.create_repo(name).unwrap();
        for n in 0..=i {
            sim.open_issue(name, "alice", &format!("issue {n}"), &[LABEL]).unwrap();
        }
    }
    let gh = client(&sim, RecordingClock::new());
    let refs: Vec<loop_core::RepoRef> = repos.iter().map(|r| r.parse().unwrap()).collect();
    let cycle = || async {
        for repo in &refs {
            gh.list_labelled_open_items(repo, LABEL).await.unwrap();
        }
    };
    let (first, ()) = count_requests(&sim, cycle).await;
    assert_eq!(first.with_status(200), repos.len(), "{first}");
    let (quiet, ()) = count_requests(&sim, cycle).await;
    assert_eq!((quiet.total(), quiet.with_status(304)), (repos.len(), repos.len()), "{quiet}");
    assert!(quiet.to_string().ends_with("3  total (3 answered 304)"), "{quiet}");
}
