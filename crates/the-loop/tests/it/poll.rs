//! `the-loop poll --once` through the binary, against a simulated GitHub: the cron form's
//! exit codes (0 clean, 1 a scope degraded, 2 cannot run) and its lock.

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
