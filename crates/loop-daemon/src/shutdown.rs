//! Shutdown as a value handed to every task (STYLE §4.1, after mini-redis).
//!
//! [`run`](crate::receiver::Receiver::run) owns a [`broadcast`] sender; each task gets a
//! [`Shutdown`] wrapping a receiver and `select!`s on [`Shutdown::recv`] wherever it
//! waits, bringing its in-flight work to a safe point. Each task also holds a
//! [`CompletionGuard`]: when the last guard is dropped, [`Completion::wait`] returns, so
//! the owner knows every task has finished.

use tokio::sync::{broadcast, mpsc};

/// Tells one task that the service is stopping.
#[derive(Debug)]
pub struct Shutdown {
    /// Set once the signal was seen, so later calls return at once.
    is_shutdown: bool,
    /// The other end is held by the service's owner; dropping it (or sending) is the signal.
    notify: broadcast::Receiver<()>,
}

impl Shutdown {
    pub fn new(notify: broadcast::Receiver<()>) -> Self {
        Self { is_shutdown: false, notify }
    }

    pub fn is_shutdown(&self) -> bool {
        self.is_shutdown
    }

    /// Whether the signal has been given, without waiting (for loops between items).
    pub fn signalled(&mut self) -> bool {
        if !self.is_shutdown {
            self.is_shutdown =
                !matches!(self.notify.try_recv(), Err(broadcast::error::TryRecvError::Empty));
        }
        self.is_shutdown
    }

    /// Waits for the signal; returns at once when it was already seen.
    pub async fn recv(&mut self) {
        if self.is_shutdown {
            return;
        }
        // Closed (the sender dropped) and a sent value both mean "stop".
        let _ = self.notify.recv().await;
        self.is_shutdown = true;
    }
}

/// The signal's sending side and the tasks' completion, held by whoever runs the service.
#[derive(Debug)]
pub struct Trigger {
    /// Dropped (or sent on) to stop every [`Shutdown`] subscribed to it.
    stop: broadcast::Sender<()>,
    /// Cloned into every task's [`CompletionGuard`].
    done: mpsc::Sender<()>,
    /// Yields `None` once every guard is dropped.
    all_done: mpsc::Receiver<()>,
}

/// Held by a task for as long as it runs; dropping it says "finished".
#[derive(Debug, Clone)]
pub struct CompletionGuard {
    /// Never sent on: only its drop matters.
    _done: mpsc::Sender<()>,
}

impl Trigger {
    pub fn new() -> Self {
        let (stop, _) = broadcast::channel(1);
        let (done, all_done) = mpsc::channel(1);
        Self { stop, done, all_done }
    }

    /// A signal receiver and a completion guard for one more task.
    pub fn task(&self) -> (Shutdown, CompletionGuard) {
        (Shutdown::new(self.stop.subscribe()), CompletionGuard { _done: self.done.clone() })
    }

    /// Signals every task, then waits until each has dropped its guard.
    pub async fn stop_and_wait(self) {
        let Self { stop, done, mut all_done } = self;
        drop(stop);
        drop(done);
        let _ = all_done.recv().await;
    }
}

impl Default for Trigger {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_task_sees_the_signal_and_the_owner_waits_for_their_guards() {
        let trigger = Trigger::new();
        let (finished_tx, mut finished_rx) = mpsc::unbounded_channel();
        for n in 0..3 {
            let (mut shutdown, guard) = trigger.task();
            let finished = finished_tx.clone();
            tokio::spawn(async move {
                shutdown.recv().await;
                assert!(shutdown.is_shutdown());
                shutdown.recv().await; // a second wait returns at once
                let _ = finished.send(n);
                drop(guard);
            });
        }
        drop(finished_tx);
        trigger.stop_and_wait().await;
        let mut seen = Vec::new();
        while let Ok(n) = finished_rx.try_recv() {
            seen.push(n);
        }
        seen.sort_unstable();
        assert_eq!(seen, vec![0, 1, 2], "every task finished before stop_and_wait returned");
    }
}
