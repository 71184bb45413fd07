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
use std::sync::Arc;
use std::time::Duration;

use loop_store::{StateStore, StoreError};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

use crate::dispatcher::Dispatcher;
use crate::live_config::LiveConfig;
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
    /// The process's config, re-read every few seconds and followed by every part.
    pub config: LiveConfig,
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
            .field("config", &self.config.path())
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Runs every ingress until `shutdown` resolves or the receiver fails, then stops them,
    /// lets the dispatcher finish and gives the poller's abandoned attempts back.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<Stopped, ServiceError> {
        let Self { dispatcher, receiver, poller, config, metrics, grace, on_event } = self;
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

        let config_rx = config.subscribe();
        let reload = follow_config(config, &dispatcher, stop.subscribe(), &on_event);
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

/// Re-reads the config file every [`RELOAD_EVERY`] until the service stops, and keeps
/// the dispatcher on the config in force (its concurrency bound and later decisions
/// follow a change with no webhook needed, whichever part noticed it); a change that
/// could not be used is told once.
async fn follow_config(
    config: LiveConfig,
    dispatcher: &Dispatcher,
    mut stop: broadcast::Receiver<()>,
    on_event: &(dyn Fn(Event) + Send + Sync),
) {
    let (mut current, mut rejected) = (config.subscribe(), config.rejections());
    loop {
        tokio::select! {
            () = tokio::time::sleep(RELOAD_EVERY) => {
                let source = config.clone();
                crate::dispatcher::blocking(move || source.refresh()).await;
            }
            Ok(()) = current.changed() => {
                dispatcher.set_config(current.borrow_and_update().clone());
            }
            Ok(()) = rejected.changed() => {
                let error = rejected.borrow_and_update().clone();
                if let Some(error) = error {
                    on_event(Event::ConfigNotApplied { error: error.to_string() });
                }
            }
            _ = stop.recv() => return,
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

    use loop_core::config::Config;
    use loop_sessions::{CommandHarness, Tmux, TmuxSettings, TmuxSocket};
    use loop_store::{EventLog, StateLayout};

    use super::*;
    use crate::config_source::ConfigSource;
    use crate::dispatcher::DispatcherParts;
    use crate::live_config::Hosted;

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
            config: {
                let (source, _) = ConfigSource::open(dir.path().join("cli-config.yaml")).unwrap();
                LiveConfig::new(source, EventLog::disabled(), Hosted::default())
            },
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
}
