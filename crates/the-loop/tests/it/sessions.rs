//! `the-loop sessions …` and `the-loop collaborators …` through the real binary, against
//! the simulated GitHub (`integrations.github.api.baseUrl`, token from `GH_TOKEN`) and real
//! tmux on a private socket directory (`TMUX_TMPDIR` per test), with a shell stand-in for
//! the `claude` harness on `PATH`.

use std::path::PathBuf;
use std::process::Command;

use crate::common::{Cli, Run, stand_in_claude};
use crate::machine::World;

const REPO: &str = World::REPO;
const ITEM: &str = "github:octo/app#1";

/// A site: the simulator with issue #1, a config pointing at it, a private tmux.
struct Site {
    cli: Cli,
    world: World,
    tmux_dir: PathBuf,
}

impl Site {
    fn new(spawn_policy: &str) -> Self {
        let world = World::new();
        world.sim.open_issue(REPO, "octocat", "A bug", &[]).unwrap();
        let mut cli = Cli::new();
        let root = cli.cwd().join("state");
        let bin = cli.cwd().join("bin");
        let tmux_dir = cli.cwd().join("tmux");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&tmux_dir).unwrap();
        // The binary's stand-in agent: reads its terminal raw, as an interactive agent
        // does, and draws its input box, as Claude Code does.
        stand_in_claude(&bin);
        // tmux as installed, except that an operator's attach (which needs a terminal)
        // only records how it was asked for; the dispatcher's control-mode client
        // (`tmux -C attach-session`) goes through.
        let real_tmux = String::from_utf8(
            Command::new("sh").args(["-c", "command -v tmux"]).output().unwrap().stdout,
        )
        .unwrap()
        .trim()
        .to_owned();
        let attached = cli.cwd().join("attached.txt");
        let tmux = bin.join("tmux");
        std::fs::write(
            &tmux,
            format!(
                "#!/bin/sh\nif [ \"$1\" = attach-session ]; then echo \"$@\" >> {}; exit 0; fi\nexec {real_tmux} \"$@\"\n",
                attached.display()
            ),
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(&tmux).status().unwrap();
        cli.write(
            ".the-loop/cli-config.yaml",
            &format!(
                "state:\n  root: {root}\nrepositories: [{REPO}]\ninstance:\n  name: laptop\nrouting:\n  enabled: true\n  authorizedUsers: [octocat]\n  spawnOnUnmatched: {spawn_policy}\n  harnessTrust:\n    enabled: false\n  harnessPlugins:\n    enabled: false\n  spawnWorkdir: {work}\nintegrations:\n  github:\n    api:\n      baseUrl: {base}\n",
                root = root.display(),
                work = cli.cwd().display(),
                base = world.sim.url(),
            ),
        );
        cli.sessions_env(&bin, &tmux_dir).env("USER", "alice");
        Self { cli, world, tmux_dir }
    }

    fn run(&self, args: &[&str]) -> Run {
        self.cli.run(args)
    }

    /// What the-loop posted on issue #1 (as the simulator's viewer).
    fn posted(&self) -> Vec<String> {
        self.world.sim.comments_by(REPO, 1, self.world.sim.viewer())
    }

    fn show_json(&self) -> serde_json::Value {
        let run = self.run(&["sessions", "show", "--work-item", ITEM, "--json"]);
        serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("show --json is JSON\n{run}"))
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("kill-server")
            .stderr(std::process::Stdio::null())
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .env_remove("TMUX")
            .status();
    }
}

#[test]
fn pause_without_a_session_is_recorded_exits_1_and_posts_the_keyword_self_marked() {
    let site = Site::new("labeled");
    site.run(&["sessions", "pause", "--work-item", ITEM])
        .expect_code(1)
        .expect_stderr("nothing to pause");
    let shown = site.show_json();
    assert_eq!(shown["control"]["command"], "pause");
    assert_eq!(shown["control"]["source"], "cli");
    assert_eq!(shown["control"]["actor"], "alice");
    let posted = site.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert!(posted[0].starts_with("the-loop pause instance:laptop"), "{}", posted[0]);
    assert!(posted[0].contains("by `alice`"), "{}", posted[0]);
    assert!(posted[0].contains("<!-- the-loop:agent-comment -->"), "self-marked: {}", posted[0]);
}

#[test]
fn no_comment_keeps_the_thread_quiet() {
    let site = Site::new("labeled");
    site.run(&["sessions", "stop", "--work-item", ITEM, "--no-comment"]).expect_code(1);
    assert!(site.posted().is_empty());
    assert_eq!(site.show_json()["control"]["command"], "stop");
}

#[test]
fn resume_with_nothing_paused_is_refused_and_not_recorded() {
    let site = Site::new("labeled");
    site.run(&["sessions", "resume", "--work-item", ITEM])
        .expect_code(1)
        .expect_stderr("no paused session");
    assert!(site.show_json()["control"].is_null());
    assert!(site.posted().is_empty(), "nothing executed, nothing posted");
}

#[test]
fn start_is_refused_when_the_spawn_policy_is_never_and_nothing_is_recorded() {
    let site = Site::new("never");
    site.run(&["sessions", "start", "--work-item", ITEM]).expect_code(1).expect_stderr("refused");
    assert!(site.show_json()["control"].is_null());
}

#[test]
fn start_spawns_a_session_in_tmux_then_list_pause_stop_and_cleanup_steer_it() {
    let site = Site::new("labeled");
    site.run(&["sessions", "start", "--work-item", ITEM])
        .expect_code(0)
        .expect_stderr("spawned")
        .expect_stderr("tmux attach -t loop-github-octo-app-1");
    let shown = site.show_json();
    assert_eq!(shown["control"]["command"], "start");
    let list = site.run(&["sessions", "list"]);
    list.expect_code(0).expect_stdout(ITEM).expect_stdout("active").expect_stdout("start (cli)");
    let has_session = Command::new("tmux")
        .args(["has-session", "-t", "=loop-github-octo-app-1"])
        .env("TMUX_TMPDIR", &site.tmux_dir)
        .env_remove("TMUX")
        .status()
        .unwrap();
    assert!(has_session.success(), "the session runs in the private tmux server");

    site.run(&["sessions", "pause", "--work-item", ITEM, "--no-comment"]).expect_code(0);
    site.run(&["sessions", "list", "--status", "paused"]).expect_stdout(ITEM);
    site.run(&["sessions", "start", "--work-item", ITEM, "--no-comment"])
        .expect_code(0)
        .expect_stderr("resumed");
    site.run(&["sessions", "stop", "--work-item", ITEM, "--no-comment"])
        .expect_code(0)
        .expect_stderr("stopped");
    site.run(&["sessions", "list", "--status", "closed"]).expect_stdout(ITEM);
    site.run(&["sessions", "cleanup", "--work-item", ITEM, "--no-comment"])
        .expect_code(0)
        .expect_stderr("cleaned");
    site.run(&["sessions", "list"]).expect_code(0).expect_stderr("(no registered sessions)");
    let gone = Command::new("tmux")
        .args(["has-session", "-t", "=loop-github-octo-app-1"])
        .env("TMUX_TMPDIR", &site.tmux_dir)
        .env_remove("TMUX")
        .status()
        .unwrap();
    assert!(!gone.success(), "cleanup kills the tmux session");
    assert_eq!(site.show_json()["control"]["command"], "cleanup", "the portable record is kept");
    // The first post is the announcement of the new session, then the `start` keyword.
    assert!(
        site.posted().iter().any(|p| p.starts_with("the-loop start instance:laptop")),
        "{:?}",
        site.posted()
    );
}

#[test]
fn collaborators_are_granted_and_revoked_and_the_keyword_names_them() {
    let site = Site::new("labeled");
    site.run(&["collaborators", "add", ITEM, "@bob", "carol"])
        .expect_code(0)
        .expect_stderr("@bob granted")
        .expect_stderr("@carol granted");
    let users = site.show_json()["collaborators"]["users"].clone();
    assert_eq!(users.as_array().map(Vec::len), Some(2), "{users}");
    site.run(&["collaborators", "remove", ITEM, "bob", "--no-comment"])
        .expect_code(0)
        .expect_stderr("@bob revoked");
    let posted = site.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert!(posted[0].starts_with("the-loop add-collaborator @bob @carol"), "{}", posted[0]);
    site.run(&["collaborators", "add", ITEM, "not a login"]).expect_code(2);
}

#[test]
fn reset_clears_control_roster_ended_its_poll_clocks_and_the_session_record_without_posting() {
    let site = Site::new("labeled");
    site.run(&["sessions", "stop", "--work-item", ITEM, "--no-comment"]).expect_code(1);
    site.run(&["collaborators", "add", ITEM, "@bob", "--no-comment"]).expect_code(0);
    // A nested pull request's ledger and an `ended` stamp, as a poller and a close left them.
    let record_path = site.cli.cwd().join("state/portable/github-octo-app-1.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record_path).unwrap()).unwrap();
    record["poll"] = serde_json::json!({"pullRequests": {"github:octo/app#3": {}}});
    record["ended"] = serde_json::json!({"state": "closed", "kind": "issue",
        "at": "2026-11-01T00:00:00Z", "source": "poll"});
    std::fs::write(&record_path, record.to_string()).unwrap();
    let clocks = site.cli.cwd().join("state/local/poll-clocks.json");
    let stamped = format!(
        r#"{{"clocks":{{"{ITEM}":{{"lastPolledAt":"2026-11-01T00:00:00Z"}},"github:octo/app#2":{{"lastPolledAt":"2026-11-01T00:00:00Z"}},"github:octo/app#3":{{"lastPolledAt":"2026-11-01T00:00:00Z"}}}}}}"#
    );
    std::fs::create_dir_all(clocks.parent().unwrap()).unwrap();
    std::fs::write(&clocks, stamped).unwrap();
    site.run(&["sessions", "reset", "--work-item", ITEM, "--dry-run"])
        .expect_code(0)
        .expect_stderr("would");
    assert_eq!(site.show_json()["control"]["command"], "stop", "a dry run changes nothing");
    site.run(&["sessions", "reset", "--work-item", ITEM])
        .expect_code(0)
        .expect_stderr("reset 1 work item(s)");
    let shown = site.show_json();
    assert!(shown["control"].is_null(), "{shown:#}");
    // Issue #16, item 5 (seed 002): the roster and the stamp go with the rest.
    assert!(shown["collaborators"].is_null(), "{shown:#}");
    assert!(shown["ended"].is_null(), "{shown:#}");
    let left = std::fs::read_to_string(&clocks).unwrap();
    assert!(!left.contains(ITEM) && left.contains("octo/app#2"), "{left}");
    assert!(!left.contains("octo/app#3"), "the nested PR's clock goes too: {left}");
    site.run(&["sessions", "reset"]).expect_code(2);
}

#[test]
fn attach_and_link_pr_need_a_session_record() {
    let site = Site::new("labeled");
    site.run(&["sessions", "attach", "--work-item", ITEM])
        .expect_code(1)
        .expect_stderr("no session on this machine");
    site.run(&["sessions", "link-pr", "--work-item", ITEM, "--pull-request", "#2"])
        .expect_code(1)
        .expect_stderr("nothing to link");
    site.run(&["sessions", "attach", "--work-item", "octo/app#1"]).expect_code(2);
}

#[test]
fn attach_execs_tmux_attach_read_only_when_asked_and_always_for_a_closed_session() {
    let site = Site::new("labeled");
    site.run(&["sessions", "start", "--work-item", ITEM, "--no-comment"]).expect_code(0);
    site.run(&["sessions", "attach", "--work-item", ITEM, "--read-only"]).expect_code(0);
    site.run(&["sessions", "attach", "--work-item", ITEM]).expect_code(0);
    site.run(&["sessions", "stop", "--work-item", ITEM, "--no-comment"]).expect_code(0);
    site.run(&["sessions", "attach", "--work-item", ITEM])
        .expect_code(0)
        .expect_stderr("closed: attaching read-only");
    let attached = std::fs::read_to_string(site.cli.cwd().join("attached.txt")).unwrap();
    let calls: Vec<&str> = attached.lines().collect();
    assert_eq!(
        calls,
        [
            "attach-session -r -t =loop-github-octo-app-1",
            "attach-session -t =loop-github-octo-app-1",
            "attach-session -r -t =loop-github-octo-app-1",
        ],
        "{attached}"
    );
}

#[test]
fn close_records_no_command_and_kill_tmux_ends_the_session_and_link_pr_links_once() {
    let site = Site::new("labeled");
    site.run(&["sessions", "start", "--work-item", ITEM, "--no-comment"]).expect_code(0);
    site.run(&["sessions", "link-pr", "--work-item", ITEM, "--pull-request", "#2"])
        .expect_code(0)
        .expect_stderr("linked github:octo/app#2 to github:octo/app#1");
    site.run(&["sessions", "link-pr", "--work-item", ITEM, "--pull-request", "2"])
        .expect_code(0)
        .expect_stderr("already linked");
    site.run(&["sessions", "link-pr", "--work-item", ITEM, "--pull-request", "#1"]).expect_code(2);
    site.run(&["sessions", "close", "--work-item", ITEM, "--kill-tmux"])
        .expect_code(0)
        .expect_stderr("closed");
    let shown = site.show_json();
    assert_eq!(shown["control"]["command"], "start", "close records no command");
    let alive = Command::new("tmux")
        .args(["has-session", "-t", "=loop-github-octo-app-1"])
        .env("TMUX_TMPDIR", &site.tmux_dir)
        .env_remove("TMUX")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!alive.success(), "--kill-tmux ends the tmux session");
    site.run(&["sessions", "close", "--work-item", ITEM])
        .expect_code(1)
        .expect_stderr("no live session");
}

#[test]
fn a_session_record_of_the_references_old_layout_is_adopted_once_and_a_reset_keeps_it_gone() {
    let site = Site::new("labeled");
    // What the reference wrote before its issue 128: the registry under `sessions/`.
    let legacy = site.cli.cwd().join("state/sessions");
    std::fs::create_dir_all(&legacy).unwrap();
    std::fs::write(
        legacy.join("github-octo-app-1.json"),
        r#"{"ref": "github:octo/app#1", "endpoints": {"github:octo/app#1": {"harness": "claude", "harnessSessionId": "7b0c9b4e-1111-4222-8333-944455556666", "cwd": "/home/ann/work/octo-app-1", "tmuxTarget": "loop-github-octo-app-1", "status": "paused", "recentDeliveries": ["issue_comment:IC_1:created"], "createdAt": "2026-05-01T10:00:00+00:00", "lastEventAt": "2026-05-01T11:00:00+00:00"}}}"#,
    )
    .unwrap();

    let shown = site.show_json();
    assert_eq!(shown["session"]["endpoints"][ITEM]["status"], "paused", "{shown}");
    assert_eq!(
        shown["session"]["endpoints"][ITEM]["harnessSessionId"],
        "7b0c9b4e-1111-4222-8333-944455556666"
    );
    site.run(&["sessions", "list"]).expect_code(0).expect_stdout("loop-github-octo-app-1");
    let events = std::fs::read_to_string(site.cli.cwd().join("state/logs/events.jsonl")).unwrap();
    assert_eq!(events.matches("\"state.legacy_adopted\"").count(), 1, "{events}");

    site.run(&["sessions", "reset", "--work-item", ITEM]).expect_code(0);
    site.run(&["sessions", "list"]).expect_code(0).expect_stderr("no registered sessions");
    assert!(legacy.join("github-octo-app-1.json").exists(), "the legacy file is left alone");
}
