//! Table tests of parsing and validation: every problem class, with its key path and line.

use super::*;

fn problems(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(loaded) => panic!("expected problems, got a config: {:?}", loaded.config),
        Err(err) => err.problems.iter().map(ToString::to_string).collect(),
    }
}

fn warnings(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(loaded) => loaded.warnings.iter().map(ToString::to_string).collect(),
        Err(err) => panic!("expected a config, got {err}"),
    }
}

#[test]
fn empty_text_and_empty_mapping_are_all_defaults() {
    for text in ["", "# only a comment\n", "{}", "---\n"] {
        let loaded = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(loaded.config, Config::default(), "{text:?}");
    }
}

#[test]
fn defaults_follow_the_reference_except_where_the_spec_overrides() {
    let c = Config::default();
    assert_eq!(c.state.root, std::path::PathBuf::from(".the-loop"));
    assert!(c.event_log.enabled);
    assert_eq!(c.event_log.path, None);
    assert_eq!(c.routing.registry_dir, None);
    assert_eq!(c.webhooks.gh_webhook.pidfile, None);
    assert_eq!(c.webhooks.gh_webhook.port, 8787);
    assert_eq!(c.webhooks.gh_webhook.path, "/gh-webhook");
    assert_eq!(c.webhooks.gh_webhook.secret_env, "THE_LOOP_GH_WEBHOOK_SECRET");
    assert!(!c.webhooks.gh_webhook.allow_unsigned);
    assert_eq!(c.webhooks.gh_webhook.events.len(), 9);
    assert_eq!(c.polling.interval_seconds, 60);
    assert_eq!(c.polling.max_retries, 3);
    assert_eq!(c.routing.spawn_on_unmatched, SpawnPolicy::Labeled, "SPEC §3 overrides `never`");
    assert_eq!(c.routing.auto_execute_label, "the-loop: auto-execute");
    assert_eq!(c.integrations.github.api.token_env, ["GH_TOKEN", "GITHUB_TOKEN"]);
    assert_eq!(c.integrations.github.cli.binary, "gh");
    assert_eq!(c.routing.control.keywords.start, "the-loop start");
    assert_eq!(c.routing.control.keywords.add_collaborator, "the-loop add-collaborator");
    assert_eq!(c.routing.reactions.started, Some(Reaction::Eyes));
    assert_eq!(c.instance.scope, InstanceScope::Open);
}

#[test]
fn keys_not_implemented_hold_no_value_and_are_not_shown() {
    let text = "\
routing:
  harnessPlugins:
    marketplaceRepo: octo/plugins
selfDiagnosis:
  repo: not-a-repo
service:
  autoStart: maybe
collaborators:
  - handle: octocat
    roles: []
";
    let c = parse(text).unwrap_or_else(|e| panic!("{e}")).config;
    assert_eq!(c, Config::default(), "values under them are not read, so not validated either");
    let shown = c.to_json();
    for key in ["selfDiagnosis", "collaborators", "channels", "standingSessions"] {
        assert!(shown.get(key).is_none(), "{key} shown: {shown:#}");
    }
    assert!(shown["routing"].get("webTerminal").is_none(), "routing.webTerminal shown");
}

#[test]
fn every_validation_class_is_reported_with_its_path_and_line() {
    let cases: &[(&str, &str)] = &[
        // wrong type: strict, a quoted "false" is not a boolean, "8787" is not a port
        (
            "routing:\n  enabled: \"false\"\n",
            "routing.enabled: expected true or false, got string \"false\" (line 2)",
        ),
        (
            "webhooks:\n  ghWebhook:\n    port: \"8787\"\n",
            "webhooks.ghWebhook.port: expected a port 1–65535, got string \"8787\" (line 3)",
        ),
        ("routing: [a]\n", "routing: expected a mapping, got a list (line 1)"),
        (
            "routing:\n  authorizedUsers: octocat\n",
            "routing.authorizedUsers: expected a list, got string \"octocat\" (line 2)",
        ),
        // enum
        (
            "routing:\n  spawnOnUnmatched: sometimes\n",
            "routing.spawnOnUnmatched: expected one of never|always|labeled, got \"sometimes\" (line 2)",
        ),
        (
            "instance:\n  scope: everywhere\n",
            "instance.scope: expected one of open|addressed|locked, got \"everywhere\" (line 2)",
        ),
        // range
        (
            "webhooks:\n  ghWebhook:\n    port: 70000\n",
            "webhooks.ghWebhook.port: expected a port 1–65535, got 70000 (line 3)",
        ),
        (
            "polling:\n  intervalSeconds: 0\n",
            "polling.intervalSeconds: expected an integer ≥ 1, got 0 (line 2)",
        ),
        (
            "routing:\n  tmux:\n    harnessKillGraceSeconds: -1\n",
            "routing.tmux.harnessKillGraceSeconds: expected a number ≥ 0, got -1 (line 3)",
        ),
        // malformed repo, ref, login
        (
            "repositories:\n  - octo/app\n  - not-a-repo\n",
            "repositories[1]: `not-a-repo` is not a repository: expected `[host/]owner/repo` (line 3)",
        ),
        (
            "instance:\n  workItems: [\"octo/app#1\"]\n",
            "instance.workItems[0]: `octo/app#1` is not a work-item ref",
        ),
        (
            "routing:\n  authorizedUsers: [\"@octocat\"]\n",
            "routing.authorizedUsers[0]: `@octocat` is not a GitHub login",
        ),
        // unknown key
        (
            "routing:\n  spawnOnUnmatchd: labeled\n",
            "routing.spawnOnUnmatchd: unknown key; did you mean `spawnOnUnmatched`?",
        ),
        ("routing:\n  contrl: {}\n", "routing.contrl: unknown key; did you mean `control`?"),
        ("routing:\n  frobnicate: 1\n", "routing.frobnicate: unknown key (line 2)"),
        (
            "polling:\n  sources:\n    - provider: github\n      repo: [octo/app]\n",
            "polling.sources[0].repo: unknown key",
        ),
        // missing required key
        (
            "polling:\n  sources:\n    - label: x\n",
            "polling.sources[0].provider: required key is missing",
        ),
        // syntax
        ("routing: [\n", "not valid YAML"),
    ];
    for (text, expected) in cases {
        let found = problems(text);
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{text:?}\nexpected: {expected}\nfound: {found:#?}"
        );
    }
}

/// Found by the `config` fuzz target: `Duration::from_secs_f64` panics on seconds this
/// large, and the service converts these keys without checking again.
#[test]
fn seconds_too_large_for_a_duration_are_refused() {
    assert_eq!(
        problems("routing:\n  tmux:\n    harnessKillGraceSeconds: 1e300\n"),
        [
            "routing.tmux.harnessKillGraceSeconds: expected a number ≤ 1000000000, got 1e300 (line 3)"
        ]
    );
    assert_eq!(problems("routing:\n  tmux:\n    resumeProbeSeconds: 1.0e10\n").len(), 1);
    let largest = parse("routing:\n  tmux:\n    resumeProbeSeconds: 1e9\n").unwrap();
    let seconds = largest.config.routing.tmux.resume_probe_seconds;
    assert!(std::time::Duration::try_from_secs_f64(seconds).is_ok());
}

#[test]
fn every_problem_is_listed_at_once() {
    let text = "\
routing:
  enabled: yes please
  spawnOnUnmatched: sometimes
  bogus: 1
polling:
  maxRetries: 0
webhooks:
  ghWebhook:
    port: \"8787\"
";
    let found = problems(text);
    assert_eq!(found.len(), 5, "{found:#?}");
    let lines: Vec<&str> = found.iter().map(|p| p.rsplit("(line ").next().unwrap_or("")).collect();
    assert_eq!(lines, ["2)", "3)", "4)", "6)", "9)"], "{found:#?}");
}

#[test]
fn keys_not_implemented_yet_warn_once_each_only_when_present() {
    let none = warnings("routing:\n  authorizedUsers: [octocat]\nrepositories: [octo/app]\n");
    assert!(none.is_empty(), "{none:#?}");
    let text = "\
routing:
  authorizedUsers: [octocat]
  graph:
    enabled: false
    specDir: specs
    repoHooks: true
  control:
    keywords:
      execute: go
repositories: [octo/app]
service:
  port: 4115
  autoStart: true
";
    let found = warnings(text);
    assert_eq!(found.len(), 2, "{found:#?}");
    for path in ["routing.graph.repoHooks:", "service.autoStart:"] {
        assert!(
            found.iter().any(|w| w.starts_with(path) && w.contains("not implemented")),
            "{path}: {found:#?}"
        );
    }
}

#[test]
fn a_misspelled_key_inside_a_key_not_implemented_is_still_refused() {
    let cases: &[(&str, &str)] = &[
        (
            "service:\n  port: 4115\n  cors:\n    allowOrigin: []\n",
            "service.cors.allowOrigin: unknown key; did you mean `allowOrigins`? (line 4)",
        ),
        (
            "collaborators:\n  - handle: octocat\n    rols: [engineer]\n",
            "collaborators[0].rols: unknown key; did you mean `roles`? (line 3)",
        ),
        (
            "standingSessions:\n  sessions:\n    - name: a\n    - name: b\n      slack:\n        chanel: C1\n",
            "standingSessions.sessions[1].slack.chanel: unknown key; did you mean `channel`? (line 6)",
        ),
        (
            "selfDiagnosys:\n  enabled: false\n",
            "selfDiagnosys: unknown key; did you mean `selfDiagnosis`? (line 1)",
        ),
        ("routing:\n  grahp: {}\n", "routing.grahp: unknown key; did you mean `graph`? (line 2)"),
        (
            "integrations:\n  jira:\n    api:\n      tokenEvn: x\n",
            "integrations.jira.api.tokenEvn: unknown key; did you mean `tokenEnv`? (line 4)",
        ),
        ("channels:\n  teams: {}\n", "channels.teams: unknown key (line 2)"),
        (
            "collaborators: octocat\n",
            "collaborators: expected a list, got string \"octocat\" (line 1)",
        ),
        ("service: [a]\n", "service: expected a mapping, got a list (line 1)"),
    ];
    for (text, expected) in cases {
        let err = parse(text).expect_err(text);
        let found: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
        assert_eq!(found, [*expected], "{text:?}");
        let warned: Vec<&Problem> =
            err.warnings.iter().filter(|w| w.kind == ProblemKind::NotImplemented).collect();
        assert!(
            warned.len() <= 1,
            "one warning per key not implemented, not per key under it: {warned:#?}"
        );
    }
}

#[test]
fn an_obsolete_key_warns_and_is_not_refused() {
    let found = warnings("routing:\n  runner: tmux\n  authorizedUsers: [a]\nrepositories: [o/r]\n");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("routing.runner: removed key"), "{found:#?}");
}

#[test]
fn risky_but_valid_settings_are_warnings() {
    let found = warnings("webhooks:\n  ghWebhook:\n    events: [issue_comment]\n");
    for expected in [
        "routing.authorizedUsers: empty",
        "repositories: empty",
        "`issues` is not in the list",
        "`pull_request` is not in the list",
    ] {
        assert!(found.iter().any(|w| w.contains(expected)), "{expected}: {found:#?}");
    }
}

#[test]
fn repositories_are_deduplicated_and_github_com_is_normalised_away() {
    let loaded = parse(
        "repositories:\n  - github.com/octo/app\n  - octo/App\n  - ghe.example.com/octo/app\n",
    )
    .unwrap();
    let repos: Vec<String> = loaded.config.repositories.iter().map(ToString::to_string).collect();
    assert_eq!(repos, ["octo/app", "ghe.example.com/octo/app"]);
    let repeat = loaded.warnings.iter().find(|w| w.message.contains("more than once"));
    assert_eq!(
        repeat.map(ToString::to_string).as_deref(),
        Some(
            "repositories[1]: `octo/App` is listed more than once; the repeat is ignored (line 3)"
        )
    );
}

#[test]
fn instance_accepts_the_spec_shape_and_the_seed_shape() {
    let spec =
        parse("instance:\n  name: laptop\n  scope: locked\n  workItems: [\"github:octo/app#3\"]\n")
            .unwrap()
            .config;
    assert_eq!(spec.instance.name.as_deref(), Some("laptop"));
    assert_eq!(spec.instance.scope, InstanceScope::Locked);
    let seed = parse("instance:\n  name: laptop\n  scope:\n    mode: locked\n    workItems: [\"https://github.com/octo/app/pull/3\"]\n").unwrap().config;
    assert_eq!(seed.instance, spec.instance);
    let found = problems("instance:\n  scope: addressed\n");
    assert!(found.iter().any(|p| p.contains("needs `instance.name`")), "{found:#?}");
    let found = problems("instance:\n  name: Laptop\n");
    assert!(found.iter().any(|p| p.starts_with("instance.name: expected a name")), "{found:#?}");
}

#[test]
fn session_per_pr_takes_a_boolean_too() {
    let c = parse("routing:\n  tmux:\n    sessionPerPr: false\n").unwrap().config;
    assert_eq!(c.routing.tmux.session_per_pr, SessionPerPr::Never);
    let c = parse("routing:\n  tmux:\n    sessionPerPr: true\n").unwrap().config;
    assert_eq!(c.routing.tmux.session_per_pr, SessionPerPr::CrossRepository);
}

#[test]
fn empty_path_overrides_mean_derive_from_the_state_root() {
    let c = parse("eventLog:\n  path: \"\"\nrouting:\n  registryDir: /var/loop/local\n")
        .unwrap()
        .config;
    assert_eq!(c.event_log.path, None);
    assert_eq!(c.routing.registry_dir, Some("/var/loop/local".into()));
}

#[test]
fn a_stale_config_is_refused_naming_the_key_its_replacement_and_the_command() {
    let text = "\
version: \"0.3.0\"
webhooks:
  ghWebhook:
    routing:
      control:
        ghBinary: /opt/gh
polling:
  stateFile: .the-loop/poll-state.json
integrations:
  slack:
    token: x
";
    let err = parse(text).unwrap_err();
    assert!(err.needs_migration());
    let found: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    for expected in [
        "polling.stateFile: removed key, replaced by `state.root`",
        "webhooks.ghWebhook.routing: removed key, replaced by `routing`",
        "integrations.slack: removed key, replaced by `channels.slack`",
        "version: the file declares version 0.3.0, older than 0.5.0",
    ] {
        assert!(
            found.iter().any(|p| p.starts_with(expected) && p.contains("the-loop config migrate")),
            "{expected}: {found:#?}"
        );
    }
    assert!(found.iter().any(|p| p.contains("(line 8)")), "{found:#?}");
}

#[test]
fn a_two_part_version_is_older_and_an_absent_one_is_accepted() {
    assert!(parse("version: \"0.5\"\n").unwrap_err().needs_migration());
    assert!(parse("version: 0.5\n").unwrap_err().needs_migration());
    assert!(parse("routing:\n  enabled: true\n").is_ok());
    assert!(parse("version: \"0.8.0\"\n").is_ok());
}

#[test]
fn migrating_a_stale_document_yields_one_that_parses() {
    let text = "\
version: \"0.3.0\"
webhooks:
  ghWebhook:
    enabled: true
    routing:
      enabled: true
      authorizedUsers: [octocat]
      control:
        ghBinary: /opt/gh
polling:
  stateFile: .the-loop/poll-state.json
";
    let (doc, changes) = migrate(parse_document(text).unwrap());
    assert!(changes.len() >= 4, "{changes:#?}");
    let rewritten = to_yaml(&doc);
    let loaded = parse(&rewritten).unwrap_or_else(|e| panic!("{e}\n{rewritten}"));
    assert_eq!(loaded.config.integrations.github.cli.binary, "/opt/gh");
    assert!(loaded.config.routing.enabled);
    assert!(loaded.config.webhooks.gh_webhook.enabled);
    assert_eq!(loaded.config.version.as_deref(), Some(CURRENT_VERSION));
}

#[test]
fn the_effective_config_round_trips_through_yaml() {
    let shown = to_yaml(&Config::default().to_json());
    let reloaded = parse(&shown).unwrap_or_else(|e| panic!("{e}\n{shown}"));
    assert_eq!(reloaded.config, Config::default());
}

#[test]
fn the_starter_config_passes_validation() {
    let loaded = parse(STARTER).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.config.version.as_deref(), Some(CURRENT_VERSION));
}

#[test]
fn a_reference_config_loads_without_errors() {
    let loaded = parse(include_str!("../../tests/fixtures/reference-0.5.0.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let c = loaded.config;
    assert!(c.routing.enabled);
    assert_eq!(c.polling.sources.len(), 1);
    assert_eq!(c.repositories.len(), 2);
    assert_eq!(c.instance.name.as_deref(), Some("laptop"));
    let warned: Vec<&str> = loaded.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        warned,
        [
            "routing.harnessPlugins.marketplaceRepo",
            "routing.webTerminal",
            "routing.graph.repoHooks",
            "integrations.github.transport",
            "service.autoStart",
            "service.hostIngresses",
            "standingSessions",
            "channels",
            "selfDiagnosis",
            "collaborators",
            "notifications",
        ],
        "one warning per key not implemented, in file order"
    );
    assert!(loaded.warnings.iter().all(|w| w.kind == ProblemKind::NotImplemented));
}

#[test]
fn yaml_output_quotes_strings_that_would_read_back_as_something_else() {
    let doc = serde_json::json!({
        "texts": ["true", "123", "", "+1", "a: b", "#x", "null", "~", "0.5", "- x", "yes"],
        "n": 1.5,
        "nested": {"empty": [], "map": {}},
    });
    let text = to_yaml(&doc);
    assert_eq!(parse_document(&text).unwrap(), doc, "{text}");
}

/// Every dotted key path under `value`, blocks and leaves alike.
fn key_paths(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
    if NAMED_MAPPINGS.contains(&prefix) {
        out.push(prefix.to_owned());
        return;
    }
    if let serde_json::Value::Object(map) = value {
        for (key, child) in map {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            if !child.is_object() {
                out.push(path.clone());
            }
            key_paths(&path, child, out);
        }
    }
}

#[test]
fn the_configuration_doc_describes_every_key() {
    let doc = include_str!("../../../../docs/configuration.md");
    let mut paths = Vec::new();
    key_paths("", &Config::default().to_json(), &mut paths);
    let missing: Vec<&String> =
        paths.iter().filter(|p| !doc.contains(&format!("| `{p}` |"))).collect();
    assert!(missing.is_empty(), "docs/configuration.md lacks: {missing:#?}");
    let missing: Vec<&&str> =
        NOT_IMPLEMENTED.iter().filter(|key| !doc.contains(&format!("| `{key}` |"))).collect();
    assert!(missing.is_empty(), "docs/configuration.md lacks: {missing:#?}");
}

#[test]
fn hostile_nesting_is_refused_without_exhausting_the_stack() {
    let deep = format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let found = problems(&deep);
    // The scanner's own flow-nesting limit or ours, whichever trips first.
    assert!(found[0].contains("(line 1)"), "{found:#?}");
    let found = problems(&"- ".repeat(50_000));
    assert!(found[0].contains("nested more than 64 levels deep"), "{found:#?}");
}

#[test]
fn a_duplicated_key_is_a_syntax_error_with_its_line() {
    let found = problems("routing:\n  enabled: true\n  enabled: false\n");
    assert_eq!(found, ["not valid YAML: duplicated key in mapping (line 3)"]);
}

proptest::proptest! {
    #[test]
    fn parsing_never_panics_on_any_text(text in "\\PC{0,200}") {
        let _ = parse(&text);
        let _ = parse_document(&text).map(migrate);
    }

    #[test]
    fn parsing_never_panics_on_yaml_shaped_text(
        lines in proptest::collection::vec(
            ("( {0,6})", "(routing|version|polling|[a-z]{1,8}|- [a-z0-9]{0,5})", "(:|: |: \\[|: \\{|: \"x\"|: 0\\.5|: ~|: -1|)"),
            0..20,
        )
    ) {
        let text: String = lines.iter().map(|(i, k, v)| format!("{i}{k}{v}\n")).collect();
        let _ = parse(&text);
        let _ = parse_document(&text).map(migrate);
    }
}

#[test]
fn the_service_defaults_to_loopback_on_4114_with_cors_off() {
    let service = Config::default().service;
    assert!(service.enabled);
    assert_eq!((service.host.as_str(), service.port), ("127.0.0.1", 4114));
    assert!(!service.exposed && service.is_loopback());
    assert_eq!(service.token_env, "THE_LOOP_SERVICE_TOKEN");
    assert!(service.cors.allow_origins.is_empty(), "no other origin unless listed");
    assert_eq!((service.stream.max_subscribers, service.stream.keep_alive_seconds), (8, 15));
    let exposed = "service:\n  host: 0.0.0.0\n  exposed: true\n";
    assert_eq!(parse(exposed).unwrap_or_else(|e| panic!("{e}")).config.service.host, "0.0.0.0");
    for host in ["localhost", "::1", "[::1]", "127.0.0.2"] {
        let text = format!("service:\n  host: \"{host}\"\n");
        assert!(parse(&text).is_ok(), "{host} is loopback");
    }
}

#[test]
fn the_service_refuses_what_would_open_it_to_other_machines_or_pages() {
    let cases: &[(&str, &str)] = &[
        (
            "service:\n  host: 0.0.0.0\n",
            "service.host: `0.0.0.0` is beyond loopback: set `service.exposed: true`",
        ),
        (
            "service:\n  cors:\n    allowOrigins: [\"*\"]\n    allowCredentials: true\n",
            "service.cors.allowCredentials: `true` with `*` in `allowOrigins`",
        ),
        (
            "service:\n  cors:\n    allowOrigins: [https://octo.example/]\n",
            "service.cors.allowOrigins[0]: expected an origin such as `https://example.com`",
        ),
        (
            "service:\n  cors:\n    allowOrigins: [octo.example]\n",
            "service.cors.allowOrigins[0]: expected an origin",
        ),
        ("service:\n  stream:\n    maxSubscribers: 0\n", "service.stream.maxSubscribers"),
    ];
    for (text, expected) in cases {
        let found = problems(text);
        assert!(found.len() == 1 && found[0].starts_with(expected), "{text:?}: {found:#?}");
    }
    let fine = "service:\n  cors:\n    allowOrigins: [\"https://a.example\", \"http://127.0.0.1:8080\", \"http://[::1]:3000\", \"*\"]\n";
    let origins = parse(fine).unwrap_or_else(|e| panic!("{e}")).config.service.cors.allow_origins;
    assert_eq!(origins.len(), 4);
}

#[test]
fn harness_choices_offer_flag_values_per_harness_and_refuse_anything_else() {
    let text = "routing:\n  harnessChoices:\n    claude:\n      models: [opus, claude-sonnet-4-5, \"sonnet[1m]\", opus]\n      efforts: [high, max]\n    cursor:\n      models: [gpt-5]\n";
    let offered = parse(text).unwrap().config.routing.harness_choices;
    assert_eq!(
        offered.claude.models,
        ["opus", "claude-sonnet-4-5", "sonnet[1m]"],
        "a repeat drops"
    );
    assert_eq!(offered.claude.efforts, ["high", "max"]);
    let claude = offered.offered_to("claude");
    assert_eq!(claude.model(Some("opus")).as_deref(), Some("opus"));
    assert_eq!((claude.model(Some("gpt-5")), claude.effort(None)), (None, None));
    let cursor = offered.offered_to("cursor");
    assert_eq!((cursor.models, cursor.efforts), (&["gpt-5".to_owned()][..], &[][..]));
    assert!(offered.offered_to("stand-in").models.is_empty(), "a command harness: nothing");
    assert!(Config::default().routing.harness_choices.claude.models.is_empty(), "none by default");

    for (text, expected) in [
        (
            "routing:\n  harnessChoices:\n    claude:\n      models: [\"-x\"]\n",
            "routing.harnessChoices.claude.models[0]: expected a model or effort name",
        ),
        (
            "routing:\n  harnessChoices:\n    claude:\n      efforts: [\"high effort\"]\n",
            "routing.harnessChoices.claude.efforts[0]: expected a model or effort name",
        ),
        (
            "routing:\n  harnessChoices:\n    claude:\n      models: opus\n",
            "routing.harnessChoices.claude.models: expected a list of strings, got string",
        ),
        (
            "routing:\n  harnessChoices:\n    claude:\n      models: [3]\n",
            "routing.harnessChoices.claude.models[0]: expected a string, got number 3",
        ),
        (
            "routing:\n  harnessChoices:\n    cursor:\n      efforts: [high]\n",
            "routing.harnessChoices.cursor.efforts: unknown key",
        ),
        (
            "routing:\n  harnessChoices:\n    codex: {}\n",
            "routing.harnessChoices.codex: unknown key",
        ),
    ] {
        let found = problems(text);
        assert!(found.iter().any(|p| p.starts_with(expected)), "{text:?}\n{found:#?}");
    }
    let found = warnings("routing:\n  harnessChoices:\n    claude:\n      efforts: [high, hihg]\n");
    let efforts: Vec<&String> = found.iter().filter(|w| w.contains("efforts")).collect();
    assert_eq!(efforts.len(), 1, "{found:#?}");
    assert!(efforts[0].starts_with("routing.harnessChoices.claude.efforts[1]: `hihg` is not"));
}

#[test]
fn pricing_models_merge_over_the_shipped_table_and_null_removes_a_price() {
    let shipped = Config::default().pricing;
    let opus = shipped.price_of("claude-opus-4-20250514").expect("a shipped price");
    assert_eq!((opus.input_per_mtok, opus.output_per_mtok), (15.0, 75.0));
    let newer = shipped.price_of("claude-opus-4-5-20251101").expect("a shipped price");
    assert_eq!((newer.cache_write_per_mtok, newer.cache_read_per_mtok), (6.25, 0.5));
    let text = "\
pricing:
  models:
    claude-opus-4:
      inputPerMTok: 1
      outputPerMTok: 2
      cacheWritePerMTok: 3
      cacheReadPerMTok: 0.5
    my-model: {inputPerMTok: 0, outputPerMTok: 0, cacheWritePerMTok: 0, cacheReadPerMTok: 0}
    claude-haiku-4-5: null
";
    let pricing = parse(text).unwrap().config.pricing;
    assert_eq!(pricing.price_of("claude-opus-4-1").map(|p| p.input_per_mtok), Some(1.0));
    assert_eq!(pricing.price_of("claude-opus-4-5").map(|p| p.input_per_mtok), Some(5.0));
    assert!(pricing.price_of("my-model-2").is_some());
    assert_eq!(pricing.price_of("claude-haiku-4-5-20251001"), None, "removed: cost unknown");
    assert_eq!(pricing.price_of("gpt-5"), None);
}

#[test]
fn a_price_missing_a_rate_or_with_a_bad_one_is_refused_with_its_key_path() {
    let text = "\
pricing:
  models:
    claude-opus-4:
      inputPerMTok: -1
      outputPerMTok: 2
      cacheWritePerMTok: 3
      cachedPerMTok: 1
    '': {inputPerMTok: 1}
";
    let found = problems(text);
    let expected = [
        "pricing.models.claude-opus-4.inputPerMTok",
        "pricing.models.claude-opus-4.cacheReadPerMTok: required key is missing",
        "pricing.models.claude-opus-4.cachedPerMTok",
        "pricing.models: a model id or prefix may not be empty (line 8)",
    ];
    for needle in expected {
        assert!(found.iter().any(|p| p.contains(needle)), "{needle}: {found:#?}");
    }
    assert!(problems("pricing:\n  models: [a]\n")[0].starts_with("pricing.models"));
}
