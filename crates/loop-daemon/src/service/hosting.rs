//! Running a built [`Service`]: every ingress over its one dispatcher until a stop, then
//! brought down in the one right order.
//!
//! [`Service::run`] is what `the-loop start --foreground` runs with TERM-or-INT as its
//! shutdown and what the demo runs with a oneshot: the webhook receiver (with the
//! dispatcher, the existence answers and `GET /metrics` wired in), the control plane
//! (`service.port`, over the same config, store, event log and dispatcher), the poller, the config
//! source's periodic re-read (the dispatcher and the poller follow it) and the
//! live-sessions gauge and the agent-state watcher. When `shutdown` resolves or the receiver or the control plane
//! fails, every ingress
//! stops, the dispatcher finishes what it holds within the mode's grace, the poller's
//! abandoned attempts are given back and the event log is flushed; the locks go last.
//! [`Service::poll_once`] is `poll --once`'s one cycle in the same shape, and
//! [`Service::close`] ends an operator's verb.
//!
//! It prints nothing: what a person would be told goes to the caller's `on_event`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use loop_store::{EventLog, StateStore};
use tokio::sync::broadcast;

use super::build::{Polling, Receiving, Service, ServiceError, Serving};
use super::preflight::Misconfiguration;
use crate::api::{self, ApiState};
use crate::dispatcher::{Dispatcher, blocking};
use crate::live_config::LiveConfig;
use crate::metrics::Metrics;
use crate::poller::{self, CycleObserver, CycleReport};
use crate::shutdown::Shutdown;
use crate::usage::UsageBook;

/// How often the config file is looked at for a change, and the live sessions counted.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// What the hosted service tells its caller.
#[derive(Debug)]
pub enum Notice {
    /// Every ingress is wired and listening.
    Ready,
    /// The webhook receiver stopped (after the stop, or because it failed).
    ReceiverStopped,
    /// A changed config file did not load; the previous config stays.
    ConfigNotApplied { error: String },
}

/// How the service ended.
#[derive(Debug)]
pub struct Stopped {
    /// The dispatcher's work it could not finish within the grace (released).
    pub abandoned: Vec<String>,
}

impl Service {
    /// Runs every ingress until `shutdown` resolves or the receiver fails, then stops them,
    /// lets the dispatcher finish, gives the poller's abandoned attempts back and flushes
    /// the event log; `on_event` hears what happens, in order.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()>,
        on_event: impl Fn(Notice) + Send + Sync,
    ) -> Result<Stopped, ServiceError> {
        let Self {
            mode, config, events, dispatcher, metrics, usage, receiver, poller, api, ..
        } = self;
        let (stop, _) = broadcast::channel::<()>(1);
        dispatcher.count_in(metrics.clone());
        // What a predecessor killed mid-write left beside its records: never read, so gone.
        let store = dispatcher.store().clone();
        let swept = blocking(move || store.sweep_orphaned_temp_files()).await;
        if swept > 0 {
            tracing::info!(swept, "removed the temp files of writes a killed process left");
        }

        let (mut poller, poll_lock) = match poller {
            Some(Polling { poller, lock }) => {
                let counted = metrics.clone();
                let observer = CycleObserver::new(move |cycle| counted.poll_cycle(cycle.took));
                (Some(poller.with_observer(observer)), Some(lock))
            }
            None => (None, None),
        };
        let (receiver_run, receiver_lock) = match receiver {
            Some(Receiving { receiver, listener, lock, .. }) => {
                let receiver = receiver
                    .with_dispatch(Arc::new(dispatcher.clone()))
                    .with_existence(Arc::new(dispatcher.clone()))
                    .with_routes(metrics.router())
                    .with_metrics(metrics.clone());
                metrics.watch_inbox(receiver.inbox());
                let mut stopped = stop.subscribe();
                let run = receiver.run(listener, async move {
                    let _ = stopped.recv().await;
                });
                (Some(run), Some(lock))
            }
            None => (None, None),
        };
        let api_run = api.map(|Serving { listener, token, claude_projects, .. }| {
            let state = ApiState {
                config: config.clone(),
                store: dispatcher.store().clone(),
                events: events.for_source("api"),
                dispatcher: dispatcher.clone(),
                claude_projects,
                usage: usage.clone(),
                stream: api::StreamHub::new(
                    events.for_source("api"),
                    config.current().service.stream.clone(),
                ),
            };
            let mut stopped = stop.subscribe();
            api::serve(listener, state, token, async move {
                let _ = stopped.recv().await;
            })
        });
        on_event(Notice::Ready);

        let polled = config.subscribe();
        let agents_config = config.subscribe();
        metrics.watch_agents(dispatcher.agents().clone());
        let sampled = Sampled { store: dispatcher.store().clone(), metrics, usage };
        let gauges = sample_gauges(sampled, config.clone(), stop.subscribe());
        let reload = follow_config(config, &dispatcher, stop.subscribe(), &on_event);
        let (changes, changed) = tokio::sync::mpsc::unbounded_channel();
        let mut told = stop.subscribe();
        let tell_agent_states = async {
            tokio::select! {
                () = dispatcher.tell_agent_states(changed) => {}
                _ = told.recv() => {}
            }
        };
        let watched = crate::agent_state::watch::Watcher {
            store: dispatcher.store().clone(),
            tmux: dispatcher.tmux().clone(),
            harness: dispatcher.harness().clone(),
            states: dispatcher.agents().clone(),
            config: agents_config,
            changes,
        };
        let watch_agents = crate::agent_state::watch::run(watched, stop.subscribe());
        let poll = async {
            if let Some(poller) = poller.as_mut() {
                poller::run(poller, polled, Shutdown::new(stop.subscribe())).await;
            }
        };
        // `shutdown` stops everything; so does a receiver that failed.
        let mut failed = stop.subscribe();
        let stopping = async {
            tokio::select! {
                () = shutdown => {}
                _ = failed.recv() => {}
            }
            let _ = stop.send(());
        };
        let receive = async {
            let Some(run) = receiver_run else { return Ok(()) };
            let received = run.await;
            let _ = stop.send(());
            on_event(Notice::ReceiverStopped);
            received
        };
        // A control plane that failed stops everything too.
        let serve_api = async {
            let Some(run) = api_run else { return Ok(()) };
            let served = run.await;
            let _ = stop.send(());
            served.map_err(ServiceError::Api)
        };
        // What a killed predecessor spawned and did not announce; a stop cuts it short.
        let mut stopped = stop.subscribe();
        let announce_owed = async {
            tokio::select! {
                () = dispatcher.announce_owed() => {}
                _ = stopped.recv() => {}
            }
        };
        let (received, served, (), (), (), (), (), (), ()) = tokio::join!(
            receive,
            serve_api,
            poll,
            reload,
            gauges,
            watch_agents,
            tell_agent_states,
            announce_owed,
            stopping
        );
        let abandoned = dispatcher.shutdown(mode.grace()).await;
        if let Some(poller) = poller {
            release(poller, abandoned.clone()).await?;
        }
        flush(events).await;
        drop((poll_lock, receiver_lock));
        received?;
        served?;
        Ok(Stopped { abandoned })
    }

    /// One poll cycle (`poll --once`): the poller says it started, polls every scope —
    /// stopping after the item in flight once `shutdown` resolves — then the dispatcher
    /// finishes what the cycle queued, the abandoned attempts are given back, the poller
    /// says it stopped and the event log is flushed.
    pub async fn poll_once(
        self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<CycleReport, ServiceError> {
        let Self { mode, config, events, dispatcher, poller, .. } = self;
        let Some(Polling { mut poller, lock }) = poller else {
            return Err(ServiceError::Misconfigured(vec![Misconfiguration::NothingToPoll]));
        };
        let current = config.current();
        poller.announce_start(&current, true);
        let (stop, signalled) = broadcast::channel(1);
        let report = {
            let mut stop_signal = Shutdown::new(signalled);
            let mut cycle = std::pin::pin!(poller.cycle(&current, &mut stop_signal));
            tokio::select! {
                report = cycle.as_mut() => report,
                () = shutdown => {
                    let _ = stop.send(());
                    cycle.await
                }
            }
        };
        let abandoned = dispatcher.shutdown(mode.grace()).await;
        let poller = release(poller, abandoned).await?;
        poller.announce_stop();
        flush(events).await;
        drop(lock);
        Ok(report)
    }

    /// Ends an operator's verb: the dispatcher finishes what it holds (the mode's grace)
    /// and the event log is flushed.
    pub async fn close(self) {
        self.dispatcher.shutdown(self.mode.grace()).await;
        flush(self.events).await;
    }
}

/// Gives the poller's attempts the dispatcher abandoned back, off the runtime's threads.
async fn release(
    mut poller: poller::Poller<Dispatcher>,
    abandoned: Vec<String>,
) -> Result<poller::Poller<Dispatcher>, ServiceError> {
    let (poller, released) = blocking(move || {
        let released = poller.release_attempts(&abandoned);
        (poller, released)
    })
    .await;
    released.map_err(ServiceError::Release)?;
    Ok(poller)
}

/// Waits, off the runtime's threads, until every line the process emitted is written.
async fn flush(events: EventLog) {
    blocking(move || events.flush()).await;
}

/// Re-reads the config file every [`RELOAD_EVERY`] until the service stops, and keeps
/// the dispatcher on the config in force (its concurrency bound and later decisions
/// follow a change with no webhook needed, whichever part noticed it); a change that
/// could not be used is told once.
async fn follow_config(
    config: LiveConfig,
    dispatcher: &Dispatcher,
    mut stop: broadcast::Receiver<()>,
    on_event: &(dyn Fn(Notice) + Send + Sync),
) {
    let (mut current, mut rejected) = (config.subscribe(), config.rejections());
    loop {
        tokio::select! {
            () = tokio::time::sleep(RELOAD_EVERY) => {
                let source = config.clone();
                blocking(move || source.refresh()).await;
            }
            Ok(()) = current.changed() => {
                dispatcher.set_config(current.borrow_and_update().clone());
            }
            Ok(()) = rejected.changed() => {
                let error = rejected.borrow_and_update().clone();
                if let Some(error) = error {
                    on_event(Notice::ConfigNotApplied { error: error.to_string() });
                }
            }
            _ = stop.recv() => return,
        }
    }
}

/// What the gauges' sampler reads and counts into.
struct Sampled {
    store: StateStore,
    metrics: Metrics,
    /// Read on for every live session, so `GET /metrics` counts tokens no request asked
    /// for.
    usage: UsageBook,
}

/// Counts the live sessions and reads their transcripts on for `GET /metrics` every
/// [`RELOAD_EVERY`] until the service stops (the store's live view and the transcripts'
/// new bytes, off the runtime's threads).
async fn sample_gauges(sampled: Sampled, config: LiveConfig, mut stop: broadcast::Receiver<()>) {
    let Sampled { store, metrics, usage } = sampled;
    loop {
        let (view, book, pricing) =
            (store.clone(), usage.clone(), config.current().pricing.clone());
        let live = tokio::task::spawn_blocking(move || {
            let records = view.live_records().ok()?;
            for record in &records {
                book.record(record, &pricing);
            }
            Some(records.iter().filter(|r| loop_sessions::registry::rules::is_live(r)).count())
        })
        .await
        .ok()
        .flatten();
        if let Some(live) = live {
            metrics.set_live_sessions(live as u64);
        }
        tokio::select! {
            () = tokio::time::sleep(RELOAD_EVERY) => {}
            _ = stop.recv() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::config_source::ConfigSource;
    use crate::service::{Environment, Mode};

    /// A service over the config file at `path`, its scratch files and tmux socket in `dir`.
    async fn operate(dir: &std::path::Path, path: &std::path::Path) -> Service {
        let (source, _) = ConfigSource::open(path).unwrap();
        let env = Environment {
            scratch_dir: dir.to_owned(),
            tmux_socket: Some(dir.join("tmux.sock")),
            ..Environment::default()
        };
        Service::from_config(source, env, Mode::Operate).await.unwrap()
    }

    #[tokio::test]
    async fn it_says_ready_then_stops_when_shutdown_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cli-config.yaml");
        let state = dir.path().join("state").display().to_string();
        std::fs::write(&path, format!("state:\n  root: {}\n", serde_json::json!(state))).unwrap();
        let service = operate(dir.path(), &path).await;
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        let told = move |event: Notice| seen.lock().unwrap().push(format!("{event:?}"));
        let stopped = tokio::time::timeout(Duration::from_secs(5), service.run(async {}, told))
            .await
            .expect("it stops once shutdown resolved")
            .expect("nothing failed");
        assert!(stopped.abandoned.is_empty());
        assert_eq!(*events.lock().unwrap(), ["Ready"]);
    }

    /// On a paused clock: each [`RELOAD_EVERY`] passes as soon as the runtime is idle
    /// (the reads run on blocking threads, which hold the clock while they run).
    #[tokio::test(start_paused = true)]
    async fn an_edited_config_file_reaches_the_dispatcher_at_the_next_look_and_a_broken_one_is_reported_once()
     {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cli-config.yaml");
        let state = serde_json::json!(dir.path().join("state").display().to_string());
        let config = |routing: &str| format!("state:\n  root: {state}\nrouting:\n{routing}");
        std::fs::write(&path, config("  maxConcurrentDispatches: 1\n")).unwrap();
        let service = operate(dir.path(), &path).await;
        let dispatcher = service.dispatcher().clone();
        let (told, mut events) = tokio::sync::mpsc::unbounded_channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(service.run(
            async {
                let _ = stopped.await;
            },
            move |event: Notice| {
                let _ = told.send(format!("{event:?}"));
            },
        ));
        assert_eq!(events.recv().await.as_deref(), Some("Ready"));

        std::fs::write(&path, config("  maxConcurrentDispatches: 3\n")).unwrap();
        tokio::time::sleep(RELOAD_EVERY * 2).await;
        assert_eq!(dispatcher.config().routing.max_concurrent_dispatches, 3, "no webhook needed");

        std::fs::write(&path, config("  enabled: \"yes\"\n")).unwrap();
        let refused = events.recv().await.expect("the service runs");
        assert!(refused.starts_with("ConfigNotApplied"), "{refused}");
        tokio::time::sleep(RELOAD_EVERY * 3).await;
        assert!(events.try_recv().is_err(), "reported once, not at every look");
        assert_eq!(dispatcher.config().routing.max_concurrent_dispatches, 3, "the last good one");

        stop.send(()).unwrap();
        running.await.unwrap().expect("nothing failed");
    }
}
