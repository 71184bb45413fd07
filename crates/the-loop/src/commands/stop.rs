//! `the-loop stop [--timeout S]`: end whatever holds an ingress lock, whether or not the
//! config still enables it, and wait until every lock is free.
//!
//! Only a pid a held lock proves alive is signalled (SIGTERM, once per process: the
//! ingresses hosted by one service share its pid). A stale pidfile — a file nobody holds
//! — is reported `not running` and its pid is never touched (reference §3.7, trap 19).
//! Exit 0 when every ingress is stopped or was not running, 1 when one outlived the
//! timeout.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use loop_store::StateLayout;
use rustix::process::{Pid, Signal, kill_process};

use loop_daemon::service::{Ingress, Liveness};

use super::service::liveness;
use crate::ExitStatus;
use crate::cli::{GlobalArgs, StopArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

/// How often the locks are probed while waiting.
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// How one ingress ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Stopped {
        pid: Option<u32>,
    },
    NotRunning,
    /// Still holding its lock when the timeout ran out.
    Failed {
        pid: Option<u32>,
    },
}

pub fn run(args: StopArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let layout = state_root::layout(&loaded.config);
    let outcomes = stop_all(&layout, Duration::from_secs(args.timeout))?;
    report(&outcomes, args.timeout, printer);
    let ok = outcomes.iter().all(|(_, o)| !matches!(o, Outcome::Failed { .. }));
    Ok(if ok { ExitStatus::Success } else { ExitStatus::Negative })
}

/// Signals every process that holds an ingress lock and waits up to `timeout` for all
/// the locks to be free. Shared with `restart`.
pub fn stop_all(
    layout: &StateLayout,
    timeout: Duration,
) -> anyhow::Result<Vec<(Ingress, Outcome)>> {
    let deadline = Instant::now() + timeout;
    let mut held: Vec<Liveness> = Vec::new();
    for ingress in Ingress::ALL.into_iter().rev() {
        let mut live = liveness(ingress, layout)?;
        // A holder that has locked but not yet written its pid is given until the
        // deadline to do so; it cannot be signalled before.
        while live.running() && live.pid().is_none() && Instant::now() < deadline {
            std::thread::sleep(PROBE_EVERY);
            live = liveness(ingress, layout)?;
        }
        held.push(live);
    }
    let pids: BTreeSet<u32> = held.iter().filter_map(Liveness::pid).collect();
    for pid in &pids {
        signal_terminate(*pid)?;
    }
    let mut outcomes = Vec::new();
    for live in held {
        let outcome = if !live.running() {
            Outcome::NotRunning
        } else {
            wait_for_release(live.ingress, layout, deadline)?;
            let now = liveness(live.ingress, layout)?;
            if now.running() {
                Outcome::Failed { pid: now.pid().or(live.pid()) }
            } else {
                Outcome::Stopped { pid: live.pid() }
            }
        };
        outcomes.push((live.ingress, outcome));
    }
    Ok(outcomes)
}

fn signal_terminate(pid: u32) -> anyhow::Result<()> {
    let target = i32::try_from(pid).ok().and_then(Pid::from_raw);
    let Some(target) = target else {
        anyhow::bail!(
            "the pidfile names pid {pid}, which is not a process id; remove nothing and check the file"
        );
    };
    match kill_process(target, Signal::TERM) {
        // Gone between the lock probe and the signal: it is stopping anyway.
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(errno) => Err(std::io::Error::from(errno))
            .with_context(|| format!("cannot signal pid {pid} (it holds an ingress lock)")),
    }
}

fn wait_for_release(
    ingress: Ingress,
    layout: &StateLayout,
    deadline: Instant,
) -> anyhow::Result<()> {
    while liveness(ingress, layout)?.running() && Instant::now() < deadline {
        std::thread::sleep(PROBE_EVERY);
    }
    Ok(())
}

/// One line per ingress.
pub fn report(outcomes: &[(Ingress, Outcome)], timeout: u64, printer: Printer) {
    for (ingress, outcome) in outcomes {
        let name = ingress.name();
        let pid = |pid: &Option<u32>| pid.map_or_else(String::new, |p| format!(" (pid {p})"));
        match outcome {
            Outcome::Stopped { pid: p } => printer.info(format!("{name:<11} stopped{}", pid(p))),
            Outcome::NotRunning => printer.info(format!("{name:<11} not running")),
            Outcome::Failed { pid: p } => printer.error(format!(
                "{name} still running{} after {timeout}s; it may be finishing a long dispatch — run `the-loop stop` again, or `kill -9` it",
                pid(p)
            )),
        }
    }
}
