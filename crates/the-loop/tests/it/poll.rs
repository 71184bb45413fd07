//! `the-loop poll --once` through the binary, against a simulated GitHub: the cron form's
//! exit codes (0 clean, 1 a scope degraded, 2 cannot run), its lock, a second run warm
//! from the poll cache, and the scope health `status` reads from the heartbeat.

use loop_sim::Sim;
use loop_store::{PidLock, StateLayout};

use crate::common::{Cli, Run};

const LABEL: &str = "the-loop: auto-execute";

/// A private home and config polling `repos` on `sim` (each must exist there to list).
fn site(sim: &Sim, repos: &[&str]) -> Cli {
    let mut cli = Cli::new();
    cli.env("GH_TOKEN", "t");
    cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "repositories: [{}]\nstate:\n  root: state\nrouting:\n  enabled: true\n  authorizedUsers: [ann]\nintegrations:\n  github:\n    api:\n      baseUrl: {}\n",
            repos.join(", "),
            sim.url()
        ),
    );
    cli
}

/// Runs the binary off the test's runtime, so the simulator keeps answering.
async fn run(cli: Cli, args: &'static [&'static str]) -> (Cli, Run) {
    tokio::task::spawn_blocking(move || {
        let run = cli.run(args);
        (cli, run)
    })
    .await
    .expect("the binary's runner")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_once_exits_0_after_a_clean_cycle_and_records_the_ledger() {
    let sim = Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    let n = sim.open_issue("octo/app", "ann", "Work", &[LABEL]).unwrap();
    let (cli, run_) = run(site(&sim, &["octo/app"]), &["poll", "--once"]).await;
    run_.expect_code(0).expect_stderr("poll cycle: 1 item(s)");
    let record = cli.cwd().join(format!("state/portable/github-octo-app-{n}.json"));
    let text = std::fs::read_to_string(&record).unwrap_or_else(|_| panic!("{run_}"));
    assert!(text.contains("\"poll\""), "{text}");
    assert!(cli.cwd().join("state/local/poll-clocks.json").exists());
    assert!(!cli.cwd().join("state/poll.pid").exists(), "the lock is released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_once_exits_1_when_a_repository_cannot_be_listed() {
    let sim = Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    let (_cli, run_) = run(site(&sim, &["octo/app", "octo/missing"]), &["poll", "--once"]).await;
    run_.expect_code(1).expect_stderr("degraded: octo/missing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_once_json_names_each_scopes_health() {
    let sim = Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    let (_cli, run_) =
        run(site(&sim, &["octo/app", "octo/missing"]), &["poll", "--once", "--json"]).await;
    run_.expect_code(1);
    let value: serde_json::Value =
        serde_json::from_str(&run_.stdout).unwrap_or_else(|_| panic!("{run_}"));
    assert_eq!(value["scopesDegraded"], serde_json::json!(["octo/missing"]), "{value}");
    assert_eq!(value["scopesFailed"][0]["scope"], "octo/missing", "{value}");
    let scopes = value["scopes"].as_array().unwrap_or_else(|| panic!("{value}"));
    let degraded: Vec<_> = scopes.iter().map(|s| (&s["repository"], &s["degraded"])).collect();
    assert_eq!(
        degraded,
        [(&"octo/app".into(), &false.into()), (&"octo/missing".into(), &true.into())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_once_exits_2_when_another_poller_holds_the_lock() {
    let sim = Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    let cli = site(&sim, &["octo/app"]);
    let layout = StateLayout::new(cli.cwd().join("state"));
    let _held = PidLock::acquire(&layout.poll_pidfile()).unwrap();
    let (_cli, run_) = run(cli, &["poll", "--once"]).await;
    run_.expect_code(2).expect_stderr("another poller holds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_exits_2_without_once_or_without_repositories() {
    let sim = Sim::start().await.unwrap();
    let (_cli, run_) = run(site(&sim, &["octo/app"]), &["poll"]).await;
    run_.expect_code(2).expect_stderr("needs `--once`");
    let (_cli, run_) = run(site(&sim, &[]), &["poll", "--once"]).await;
    run_.expect_code(2).expect_stderr("nothing to poll");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_once_exits_2_when_routing_is_disabled() {
    let sim = Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    let cli = site(&sim, &["octo/app"]);
    let config = cli.cwd().join(".the-loop/cli-config.yaml");
    let text = std::fs::read_to_string(&config).unwrap().replace("  enabled: true\n", "");
    std::fs::write(&config, text).unwrap();
    let (_cli, run_) = run(cli, &["poll", "--once"]).await;
    run_.expect_code(2).expect_stderr("routing.enabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_poll_once_with_nothing_new_makes_one_request_per_repository_all_304() {
    let sim = Sim::start().await.unwrap();
    let repos = ["octo/app", "octo/lib"];
    for repo in repos {
        sim.create_repo(repo).unwrap();
        let n = sim.open_issue(repo, "ann", "Work", &[LABEL]).unwrap();
        sim.comment(repo, n, "ann", "context").unwrap();
    }
    let pr = sim.open_pull_request("octo/lib", "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    sim.comment("octo/lib", pr, "ann", "on the PR").unwrap();
    let (cli, first) = run(site(&sim, &repos), &["poll", "--once"]).await;
    first.expect_code(0);
    assert!(sim.requests().total() > repos.len(), "the first run reads every thread");
    sim.clear_requests();
    let (_cli, second) = run(cli, &["poll", "--once"]).await;
    second.expect_code(0).expect_stderr("2 GitHub request(s), 2 answered 304");
    let log = sim.requests();
    assert_eq!((log.total(), log.with_status(304)), (repos.len(), repos.len()), "{log}");
    assert_eq!(log.to_endpoint("GET /repos/{owner}/{repo}/issues"), repos.len(), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_each_scopes_health_from_the_heartbeat() {
    let sim = Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    sim.open_issue("octo/app", "ann", "Work", &[LABEL]).unwrap();
    let (cli, run_) = run(site(&sim, &["octo/app", "octo/missing"]), &["poll", "--once"]).await;
    run_.expect_code(1);
    let (_cli, status) = run(cli, &["status", "--json"]).await;
    let value: serde_json::Value =
        serde_json::from_str(&status.stdout).unwrap_or_else(|_| panic!("{status}"));
    let poller = value["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["service"] == "poller")
        .unwrap_or_else(|| panic!("{status}"));
    let scopes = poller["scopes"].as_array().unwrap_or_else(|| panic!("{status}"));
    assert_eq!(scopes.len(), 2, "{status}");
    assert_eq!(scopes[0]["repository"], "octo/app");
    assert_eq!(scopes[0]["label"], LABEL);
    assert_eq!(scopes[0]["monitor"], serde_json::json!({"issues": true, "pullRequests": true}));
    assert_eq!(scopes[0]["degraded"], false);
    assert!(scopes[0]["lastPolledAt"].is_string(), "{status}");
    assert_eq!(scopes[0]["requests"], 2, "its listing and its item's thread");
    assert_eq!(scopes[1]["repository"], "octo/missing");
    assert_eq!(scopes[1]["degraded"], true);
    assert!(scopes[1]["reason"].is_string(), "{status}");
    assert_eq!(poller["lastCycle"]["scopesPolled"], 1);
    assert_eq!(poller["lastCycle"]["scopesFailed"][0]["scope"], "octo/missing");
}
