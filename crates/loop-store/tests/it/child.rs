//! Child processes for tests that need a second process.
//!
//! [`spawn`] re-runs this test binary filtered to the single test [`act`], with
//! `LOOP_STORE_IT_CHILD` naming the role and `LOOP_STORE_IT_ARGS` its arguments. When
//! the variable is absent (a normal test run), `act` does nothing and passes.

use std::path::Path;
use std::process::{Child, Command, Stdio};

const ROLE: &str = "LOOP_STORE_IT_CHILD";
const ARGS: &str = "LOOP_STORE_IT_ARGS";

/// The work item the writer roles hammer.
pub const HAMMERED: &str = "github:octo/app#15";

/// Starts this binary as a child acting out `role` with `args` (tab-separated).
pub fn spawn(role: &str, args: &[&str]) -> Child {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    Command::new(exe)
        .args(["--exact", "child::act", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(ARGS, args.join("\t"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary can be re-run as a child")
}

/// The child's entry point; a no-op in a normal run.
#[test]
fn act() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let args = std::env::var(ARGS).unwrap_or_default();
    let args: Vec<&str> = args.split('\t').collect();
    let root = Path::new(args[0]);
    let store = crate::store_in(root);
    let item = crate::item(HAMMERED);
    let count =
        |n: usize| -> u64 { args.get(n).and_then(|a| a.parse().ok()).expect("a count argument") };
    match role.as_str() {
        // Appends one comment id per write to `poll`, each a read-modify-write of the
        // section, so a lost update shows as a missing id.
        "write-poll" => {
            for n in 0..count(1) {
                let mut poll = store
                    .read_section::<loop_core::record::PollLedger>(&item)
                    .unwrap()
                    .into_value()
                    .unwrap_or_default();
                poll.comments.seen_comments.push(n);
                store.write_section(&item, Some(&poll)).unwrap();
            }
        }
        "write-control" => {
            for n in 0..count(1) {
                let mut control =
                    crate::portable::control(loop_core::record::ControlCommand::Start);
                control.note = Some(n.to_string());
                store.write_section(&item, Some(&control)).unwrap();
            }
        }
        _ => panic!("unknown child role `{role}` (root {})", root.display()),
    }
}
