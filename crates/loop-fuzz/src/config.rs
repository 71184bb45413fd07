//! Fuzz harness: bytes as `cli-config.yaml`.
//!
//! The path every command and the service take (`ConfigFile::read` refuses a file that
//! is not UTF-8, then `loop_core::config::parse`: YAML, the version gate, the typed read,
//! advice), and for an accepted file what `config show` does with it (the effective
//! config as JSON and as YAML). The `config migrate` path runs on every input: the plain
//! document, `migrate`, the migrated text.
//!
//! What must hold: no panic, no stack overflow; an accepted config's seconds convert to a
//! `Duration` (the service builds its tmux timers from them without checking again); the
//! effective config `config show` prints loads again to the same config.

use std::time::Duration;

use loop_core::config;

/// One input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match config::parse(text) {
        Ok(loaded) => {
            let tmux = &loaded.config.routing.tmux;
            for seconds in [tmux.harness_kill_grace_seconds, tmux.resume_probe_seconds] {
                assert!(
                    Duration::try_from_secs_f64(seconds).is_ok(),
                    "accepted {seconds} s, which no Duration holds"
                );
            }
            let shown = config::to_yaml(&loaded.config.to_json());
            let reloaded = config::parse(&shown).unwrap_or_else(|err| {
                panic!("`config show` printed a config that does not load: {err}\n{shown}")
            });
            assert_eq!(reloaded.config, loaded.config, "`config show` changed the config\n{shown}");
        }
        Err(err) => {
            let _ = (err.to_string(), err.needs_migration());
        }
    }
    if let Ok(document) = config::parse_document(text) {
        let (migrated, changes) = config::migrate(document);
        let _ = (config::to_yaml(&migrated), changes.len());
    }
}
