//! `the-loop config check|show|init|migrate` and config discovery, through the binary.

use crate::common::Cli;

const REFERENCE: &str = include_str!("../../../loop-core/tests/fixtures/reference-0.5.0.yaml");

/// A config written before 0.5.0: every kind of removed key, and an old version.
const PRE_0_5: &str = "\
# my old config
version: \"0.3.0\"
webhooks:
  ghWebhook:
    enabled: true
    port: 8788
    routing:
      enabled: true
      authorizedUsers: [octocat]
      control:
        ghBinary: /opt/homebrew/bin/gh
polling:
  enabled: true
  stateFile: .the-loop/poll-state.json
integrations:
  slack:
    botToken: xoxb
";

fn label_config(label: &str) -> String {
    format!("routing:\n  autoExecuteLabel: {label}\n")
}

fn shown_label(cli: &Cli, args: &[&str]) -> String {
    let run = cli.run(args.iter().copied().chain(["config", "show", "--json"]));
    run.expect_code(0);
    let doc: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run}"));
    doc["routing"]["autoExecuteLabel"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_reference_config_is_accepted_by_check() {
    let cli = Cli::new();
    let path = cli.write("reference.yaml", REFERENCE);
    cli.run(["config", "check", "--config"]).expect_code(2); // clap: --config needs a value
    let run = cli.run(["--config".as_ref(), path.as_os_str(), "config".as_ref(), "check".as_ref()]);
    run.expect_code(0).expect_stderr("valid").expect_stderr("not implemented");
    assert!(!run.stderr.contains("error:"), "{run}");
}

#[test]
fn a_misspelled_key_is_refused_with_exit_2_naming_the_key_path_and_line() {
    let cli = Cli::new();
    cli.write(
        "c.yaml",
        "version: \"0.5.0\"\nrouting:\n  enabled: true\n  spawnOnUnmatchd: labeled\n",
    );
    cli.run(["config", "check", "-c", "c.yaml"])
        .expect_code(2)
        .expect_stderr("error: routing.spawnOnUnmatchd: unknown key")
        .expect_stderr("(line 4)")
        .expect_stderr("c.yaml: 1 problem");
}

#[test]
fn a_verb_refused_by_its_config_prints_each_problem_once_and_the_hint_on_its_own_line() {
    let cli = Cli::new();
    cli.write(
        "c.yaml",
        "version: \"0.5.0\"\nrouting:\n  spawnOnUnmatched: sometimes\n  frobnicate: 1\n",
    );
    for verb in [&["status"][..], &["poll", "--once"], &["start", "--foreground"]] {
        let run = cli.run([&["-c", "c.yaml"], verb].concat());
        run.expect_code(2);
        for problem in
            ["routing.spawnOnUnmatched: expected one of", "routing.frobnicate: unknown key"]
        {
            assert_eq!(run.stderr.matches(problem).count(), 1, "{verb:?}: {}", run.stderr);
        }
        assert!(
            run.stderr.lines().any(|line| line
                == "hint: check the spelling: `the-loop config show` lists the keys in \
                        effect, docs/configuration.md every accepted key"),
            "{verb:?}: {}",
            run.stderr
        );
        run.expect_stderr("was refused (2 problems above)");
    }
}

#[test]
fn every_problem_is_listed_on_stderr_with_a_count() {
    let cli = Cli::new();
    cli.write(
        "c.yaml",
        "routing:\n  enabled: \"false\"\n  spawnOnUnmatched: sometimes\nwebhooks:\n  ghWebhook:\n    port: \"8787\"\n",
    );
    let run = cli.run(["config", "check", "-c", "c.yaml"]);
    run.expect_code(2)
        .expect_stderr("error: routing.enabled: expected true or false, got string \"false\" (line 2)")
        .expect_stderr("error: routing.spawnOnUnmatched: expected one of never|always|labeled, got \"sometimes\" (line 3)")
        .expect_stderr("error: webhooks.ghWebhook.port: expected a port 1–65535, got string \"8787\" (line 6)")
        .expect_stderr("c.yaml: 3 problems");
}

#[test]
fn a_pre_0_5_config_is_refused_then_migrated_once_and_a_second_migrate_changes_nothing() {
    let cli = Cli::new();
    let path = cli.write("old.yaml", PRE_0_5);
    let check = cli.run(["config", "check", "-c", "old.yaml"]);
    check
        .expect_code(2)
        .expect_stderr("error: polling.stateFile: removed key, replaced by `state.root`")
        .expect_stderr("error: webhooks.ghWebhook.routing: removed key")
        .expect_stderr("error: integrations.slack: removed key, replaced by `channels.slack`")
        .expect_stderr("error: version: the file declares version 0.3.0")
        .expect_stderr("the-loop config migrate");
    // Only the verbs that use the config refuse it; --help still works.
    cli.run(["-c", "old.yaml", "--help"]).expect_code(0);
    cli.run(["-c", "old.yaml", "config", "show"]).expect_code(2).expect_stderr("config migrate");

    let dry = cli.run(["config", "migrate", "-c", "old.yaml", "--dry-run"]);
    dry.expect_code(0).expect_stdout("version: 0.5.0");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), PRE_0_5, "a dry run writes nothing");

    cli.run(["config", "migrate", "-c", "old.yaml"])
        .expect_code(0)
        .expect_stderr("moved `webhooks.ghWebhook.routing.control.ghBinary` to `integrations.github.cli.binary`")
        .expect_stderr("removed `polling.stateFile`")
        .expect_stderr("moved `webhooks.ghWebhook.routing` to `routing`")
        .expect_stderr("removed `integrations.slack`")
        .expect_stderr("set `version` from 0.3.0 to 0.5.0");
    assert_eq!(std::fs::read_to_string(cli.cwd().join("old.yaml.bak")).unwrap(), PRE_0_5);
    cli.run(["config", "check", "-c", "old.yaml"]).expect_code(0);

    let migrated = std::fs::read(&path).unwrap();
    cli.run(["config", "migrate", "--path", "old.yaml"])
        .expect_code(0)
        .expect_stderr("config is already current; nothing to migrate");
    assert_eq!(std::fs::read(&path).unwrap(), migrated, "byte-identical after a second run");

    let shown = cli.run(["config", "show", "--json", "-c", "old.yaml"]);
    let doc: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(doc["integrations"]["github"]["cli"]["binary"], "/opt/homebrew/bin/gh");
    assert_eq!(doc["routing"]["authorizedUsers"], serde_json::json!(["octocat"]));
    assert_eq!(doc["webhooks"]["ghWebhook"]["port"], 8788);
}

#[test]
fn init_writes_a_starter_config_that_check_accepts_and_never_overwrites_silently() {
    let cli = Cli::new();
    cli.run(["config", "init", "--path", "conf/cli-config.yaml"])
        .expect_code(0)
        .expect_stderr("wrote a starter config");
    let path = cli.cwd().join("conf/cli-config.yaml");
    let starter = std::fs::read_to_string(&path).unwrap();
    assert!(starter.starts_with("# the-loop CLI config"), "{starter}");
    cli.run(["config", "check", "-c", "conf/cli-config.yaml"]).expect_code(0);

    std::fs::write(&path, "# mine\n").unwrap();
    cli.run(["config", "init", "--path", "conf/cli-config.yaml"])
        .expect_code(2)
        .expect_stderr("already exists")
        .expect_stderr("--force");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
    cli.run(["config", "init", "--path", "conf/cli-config.yaml", "--force"]).expect_code(0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), starter);
    assert_eq!(
        std::fs::read_to_string(cli.cwd().join("conf/cli-config.yaml.bak")).unwrap(),
        "# mine\n"
    );
}

#[test]
fn init_without_a_path_writes_the_working_directory_file_that_discovery_finds_first() {
    let cli = Cli::new();
    cli.run(["config", "init"]).expect_code(0);
    assert!(cli.cwd().join(".the-loop/cli-config.yaml").is_file());
    cli.run(["config", "check"]).expect_code(0).expect_stderr(".the-loop/cli-config.yaml: valid");
    cli.run(["config", "init", "-c", "named.yaml"]).expect_code(0);
    assert!(cli.cwd().join("named.yaml").is_file(), "--config names the file init writes");
}

#[test]
fn show_prints_the_effective_config_with_defaults() {
    let cli = Cli::new();
    let run = cli.run(["config", "show", "--json"]);
    run.expect_code(0);
    let doc: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run}"));
    assert_eq!(doc["routing"]["spawnOnUnmatched"], "labeled");
    assert_eq!(doc["webhooks"]["ghWebhook"]["port"], 8787);
    assert_eq!(doc["state"]["root"], ".the-loop");
    assert_eq!(
        doc["integrations"]["github"]["api"]["tokenEnv"],
        serde_json::json!(["GH_TOKEN", "GITHUB_TOKEN"])
    );
    let yaml = cli.run(["config", "show"]);
    yaml.expect_code(0)
        .expect_stdout("spawnOnUnmatched: labeled")
        .expect_stdout("# effective config from ");
}

#[test]
fn the_config_flag_works_before_and_after_the_verb() {
    let cli = Cli::new();
    cli.write("a.yaml", &label_config("before-or-after"));
    assert_eq!(shown_label(&cli, &["--config", "a.yaml"]), "before-or-after");
    let run = cli.run(["config", "show", "--json", "--config", "a.yaml"]);
    run.expect_code(0).expect_stdout("before-or-after");
}

#[test]
fn discovery_prefers_flag_then_env_then_working_directory_then_home() {
    let mut cli = Cli::new();
    cli.write("flag.yaml", &label_config("from-flag"));
    let env_file = cli.write("env.yaml", &label_config("from-env"));
    cli.write(".the-loop/cli-config.yaml", &label_config("from-cwd"));
    let home_file = cli.home().join(".the-loop/cli-config.yaml");
    std::fs::create_dir_all(home_file.parent().unwrap()).unwrap();
    std::fs::write(&home_file, label_config("from-home")).unwrap();

    cli.env("THE_LOOP_CLI_CONFIG", &env_file);
    assert_eq!(shown_label(&cli, &["--config", "flag.yaml"]), "from-flag");
    assert_eq!(shown_label(&cli, &[]), "from-env");

    cli.unset("THE_LOOP_CLI_CONFIG");
    assert_eq!(shown_label(&cli, &[]), "from-cwd");
    std::fs::remove_file(cli.cwd().join(".the-loop/cli-config.yaml")).unwrap();
    assert_eq!(shown_label(&cli, &[]), "from-home");
    std::fs::remove_file(&home_file).unwrap();
    assert_eq!(shown_label(&cli, &[]), "the-loop: auto-execute", "a missing file is all defaults");
}

#[test]
fn check_with_json_prints_a_verdict_with_every_problem() {
    let cli = Cli::new();
    cli.write("c.yaml", "routing:\n  spawnOnUnmatchd: labeled\n  enabled: 1\n");
    let run = cli.run(["config", "check", "--json", "-c", "c.yaml"]);
    run.expect_code(2);
    let verdict: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run}"));
    assert_eq!(verdict["valid"], false);
    assert_eq!(verdict["problems"][0]["path"], "routing.spawnOnUnmatchd");
    assert_eq!(verdict["problems"][0]["line"], 2);
    assert_eq!(verdict["problems"][0]["kind"], "unknown-key");
    assert_eq!(verdict["problems"][1]["path"], "routing.enabled");
    assert_eq!(verdict["problems"][1]["kind"], "wrong-type");
}

#[test]
fn a_missing_config_file_checks_as_all_defaults() {
    let cli = Cli::new();
    cli.run(["config", "check"])
        .expect_code(0)
        .expect_stderr("no such file; every key takes its default");
}

#[test]
fn a_harness_choice_that_is_no_model_name_is_refused_before_anything_starts() {
    let cli = Cli::new();
    cli.write(
        "c.yaml",
        "routing:\n  harnessChoices:\n    claude:\n      models: [opus, \"--dangerously-skip-permissions\"]\n    cursor:\n      efforts: [high]\n",
    );
    for verb in [&["config", "check"][..], &["start", "--foreground"]] {
        let run = cli.run([&["-c", "c.yaml"], verb].concat());
        run.expect_code(2)
            .expect_stderr(
                "error: routing.harnessChoices.claude.models[1]: expected a model or effort name",
            )
            .expect_stderr("got \"--dangerously-skip-permissions\" (line 4)")
            .expect_stderr("error: routing.harnessChoices.cursor.efforts: unknown key (line 6)");
    }
    cli.write("ok.yaml", "routing:\n  harnessChoices:\n    claude:\n      efforts: [hihg]\n");
    let run = cli.run(["-c", "ok.yaml", "config", "show", "--json"]);
    run.expect_code(0).expect_stderr("`hihg` is not an effort level Claude Code is known to take");
    let doc: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{run}"));
    assert_eq!(
        doc["routing"]["harnessChoices"],
        serde_json::json!({"claude": {"models": [], "efforts": ["hihg"]}, "cursor": {"models": []}})
    );
}
