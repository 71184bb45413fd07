//! Hosting the service: every ingress given over one opened dispatcher, run until a stop,
//! then brought down in the one right order.
//!
//! [`Service::run`] is what `the-loop start --foreground` runs with TERM-or-INT as its
//! shutdown and what the demo runs with a oneshot. The caller builds and locks the parts
//! (its start-time checks and their messages are the caller's); this runs them: the webhook
//! receiver (with the dispatcher, the existence answers and `GET /metrics` wired in), the
//! poller, the config reload for the poller and the live-sessions gauge. When `shutdown`
//! resolves or the receiver fails, every ingress stops, the dispatcher finishes what it
//! holds within [`Service::grace`] and the poller's abandoned attempts are given back.
//!
//! It prints nothing: what a person would be told goes to [`Service::on_event`].

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use loop_core::config::Config;
use loop_store::{StateStore, StoreError};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};

use crate::config_source::{ConfigSource, Reload};
use crate::dispatcher::Dispatcher;
use crate::metrics::Metrics;
use crate::poller::{self, CycleObserver, Poller};
use crate::receiver::{Receiver, ReceiverError};
use crate::shutdown::Shutdown;

/// How often the config file is looked at for a change (for the poller), and the live
/// sessions counted.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// What to host: the ingresses, over one dispatcher.
pub struct Service {
    /// The opened dispatcher both ingresses hand their work to.
    pub dispatcher: Dispatcher,
    /// The webhook receiver (not yet wired to the dispatcher) and its bound listener.
    pub receiver: Option<(Receiver, TcpListener)>,
    /// The poller, over the same dispatcher; its lock is the caller's to hold.
    pub poller: Option<Poller<Dispatcher>>,
    /// The config file re-read for the poller (`None`: never reloaded).
    pub config_path: Option<PathBuf>,
    /// What `GET /metrics` on the receiver's port answers.
    pub metrics: Metrics,
    /// How long the dispatcher may finish its queues once the ingresses stopped.
    pub grace: Duration,
    /// Told what happens, in order (the caller prints it).
    pub on_event: Box<dyn Fn(Event) + Send + Sync>,
}

/// What the hosted service tells its caller.
#[derive(Debug)]
pub enum Event {
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

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("the webhook receiver failed")]
    Receiver(#[from] ReceiverError),
    #[error("cannot release the abandoned attempts")]
    Release(#[from] StoreError),
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("receiving", &self.receiver.is_some())
            .field("polling", &self.poller.is_some())
            .field("config_path", &self.config_path)
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Runs every ingress until `shutdown` resolves or the receiver fails, then stops them,
    /// lets the dispatcher finish and gives the poller's abandoned attempts back.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<Stopped, ServiceError> {
        let Self { dispatcher, receiver, poller, config_path, metrics, grace, on_event } = self;
        let (stop, _) = broadcast::channel::<()>(1);
        dispatcher.count_in(metrics.clone());

        let mut poller = poller.map(|poller| {
            let counted = metrics.clone();
            poller.with_observer(CycleObserver::new(move |cycle| counted.poll_cycle(cycle.took)))
        });
        let receiver_run = receiver.map(|(receiver, listener)| {
            let receiver = receiver
                .with_dispatch(Arc::new(dispatcher.clone()))
                .with_existence(Arc::new(dispatcher.clone()))
                .with_routes(metrics.router())
                .with_metrics(metrics.clone());
            metrics.watch_inbox(receiver.inbox_depth());
            let mut stopped = stop.subscribe();
            receiver.run(listener, async move {
                let _ = stopped.recv().await;
            })
        });
        on_event(Event::Ready);

        let (config_tx, config_rx) = watch::channel(dispatcher.config());
        let reload =
            reload_config(config_path, config_tx, &dispatcher, stop.subscribe(), &on_event);
        let gauges = sample_gauges(dispatcher.store().clone(), metrics, stop.subscribe());
        let poll = async {
            if let Some(poller) = poller.as_mut() {
                poller::run(poller, config_rx, Shutdown::new(stop.subscribe())).await;
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
            on_event(Event::ReceiverStopped);
            received
        };
        let (received, (), (), (), ()) = tokio::join!(receive, poll, reload, gauges, stopping);
        let abandoned = dispatcher.shutdown(grace).await;
        if let Some(poller) = poller.as_mut() {
            poller.release_attempts(&abandoned)?;
        }
        received?;
        Ok(Stopped { abandoned })
    }
}

/// Re-reads the config file every [`RELOAD_EVERY`] until the service stops, handing each
/// change to the poller (it applies it between cycles) and to the dispatcher (its
/// concurrency bound and later decisions follow it, with no webhook needed); a change
/// that does not load keeps the previous config and is reported once. The receiver
/// reloads on its own, per event. Without a path it only keeps the poller's config
/// channel open.
async fn reload_config(
    path: Option<PathBuf>,
    config: watch::Sender<Arc<Config>>,
    dispatcher: &Dispatcher,
    mut stop: broadcast::Receiver<()>,
    on_event: &(dyn Fn(Event) + Send + Sync),
) {
    let Some(Ok((mut source, _))) = path.map(|path| ConfigSource::open(&path)) else {
        let _ = stop.recv().await;
        return;
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(RELOAD_EVERY) => {}
            _ = stop.recv() => return,
        }
        let (next, reloaded) = tokio::task::spawn_blocking(move || {
            let reloaded = source.reload_if_changed();
            (source, reloaded)
        })
        .await
        .unwrap_or_else(|join| std::panic::resume_unwind(join.into_panic()));
        source = next;
        match reloaded {
            Reload::Unchanged => {}
            Reload::Reloaded { config: fresh, .. } => {
                dispatcher.set_config(fresh.clone());
                let _ = config.send(fresh);
            }
            Reload::Failed { error, .. } => {
                on_event(Event::ConfigNotApplied { error: error.to_string() });
            }
        }
    }
}

/// Counts the live sessions for `GET /metrics` every [`RELOAD_EVERY`] until the service
/// stops (a file listing, off the runtime's threads).
async fn sample_gauges(store: StateStore, metrics: Metrics, mut stop: broadcast::Receiver<()>) {
    loop {
        let listing = store.clone();
        let live = tokio::task::spawn_blocking(move || listing.list_local_records())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|records| {
                records.iter().filter(|r| loop_sessions::registry::rules::is_live(r)).count()
            });
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

    use loop_sessions::{CommandHarness, Tmux, TmuxSettings, TmuxSocket};
    use loop_store::{EventLog, StateLayout};

    use super::*;
    use crate::dispatcher::DispatcherParts;

    async fn dispatcher(dir: &std::path::Path) -> Dispatcher {
        let store = StateStore::new(StateLayout::new(dir.join("state")), EventLog::disabled());
        let tmux = TmuxSettings::new(TmuxSocket::Path(dir.join("tmux.sock")), dir.to_owned());
        Dispatcher::open(DispatcherParts {
            config: Arc::new(Config::default()),
            store,
            github: None,
            tmux: Arc::new(Tmux::new(tmux)),
            harness: Arc::new(CommandHarness {
                name: "none".into(),
                fresh: vec!["true".into()],
                resume: None,
                transcript: None,
            }),
            claude_files: None,
        })
        .await
        .expect("the dispatcher opens")
    }

    #[tokio::test]
    async fn it_says_ready_then_stops_when_shutdown_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        let service = Service {
            dispatcher: dispatcher(dir.path()).await,
            receiver: None,
            poller: None,
            config_path: None,
            metrics: Metrics::new(),
            grace: Duration::from_millis(100),
            on_event: Box::new(move |event| seen.lock().unwrap().push(format!("{event:?}"))),
        };
        let stopped = tokio::time::timeout(Duration::from_secs(5), service.run(async {}))
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
        std::fs::write(&path, "routing:\n  maxConcurrentDispatches: 1\n").unwrap();
        let dispatcher = dispatcher(dir.path()).await;
        let (told, mut events) = tokio::sync::mpsc::unbounded_channel();
        let service = Service {
            dispatcher: dispatcher.clone(),
            receiver: None,
            poller: None,
            config_path: Some(path.clone()),
            metrics: Metrics::new(),
            grace: Duration::from_millis(100),
            on_event: Box::new(move |event| {
                let _ = told.send(format!("{event:?}"));
            }),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(service.run(async {
            let _ = stopped.await;
        }));
        assert_eq!(events.recv().await.as_deref(), Some("Ready"));

        std::fs::write(&path, "routing:\n  maxConcurrentDispatches: 3\n").unwrap();
        tokio::time::sleep(RELOAD_EVERY * 2).await;
        assert_eq!(dispatcher.config().routing.max_concurrent_dispatches, 3, "no webhook needed");

        std::fs::write(&path, "routing:\n  enabled: \"yes\"\n").unwrap();
        let refused = events.recv().await.expect("the service runs");
        assert!(refused.starts_with("ConfigNotApplied"), "{refused}");
        tokio::time::sleep(RELOAD_EVERY * 3).await;
        assert!(events.try_recv().is_err(), "reported once, not at every look");
        assert_eq!(dispatcher.config().routing.max_concurrent_dispatches, 3, "the last good one");

        stop.send(()).unwrap();
        running.await.unwrap().expect("nothing failed");
    }
}
