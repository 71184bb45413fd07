//! Pidfile locks across processes: a live holder refuses a second one, naming its pid; a
//! holder killed with SIGKILL leaves a stale file that is simply taken over.

use std::io::BufReader;

use loop_store::{Holder, PidLock, StoreError, lock_holder};

use crate::child;

#[test]
fn a_second_process_is_refused_naming_the_holders_pid_and_a_killed_holders_file_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("poll.pid");
    let mut holder = child::spawn("hold-pidfile", &[dir.path().to_str().unwrap()]);
    let mut stdout = BufReader::new(holder.stdout.take().unwrap());
    child::wait_for_line(&mut stdout, "locked");

    let pid = holder.id();
    assert_eq!(lock_holder(&path).unwrap(), Some(Holder { pid: Some(pid) }));
    match PidLock::acquire(&path) {
        Err(err @ StoreError::PidfileHeld { .. }) => {
            assert!(err.to_string().contains(&format!("(pid {pid})")), "{err}");
        }
        other => panic!("expected the lock to be refused, got {other:?}"),
    }

    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(path.exists(), "SIGKILL leaves the pidfile behind");
    assert_eq!(lock_holder(&path).unwrap(), None, "but nobody holds it");
    let lock = PidLock::acquire(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{}\n", std::process::id()));
    drop(lock);
    assert!(!path.exists());
}
