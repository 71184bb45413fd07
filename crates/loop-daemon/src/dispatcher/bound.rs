//! The concurrency bound across work items (`routing.maxConcurrentDispatches`), as a
//! live value: a reload that raises it lets waiting dispatches start at once; one that
//! lowers it lets the dispatches already running finish and starts no new one until the
//! count is under the new bound. Permits are counted, never revoked.
//!
//! No IO; waiting is on a `watch` channel, so a change of bound and a returned permit
//! both wake the waiters.

use tokio::sync::watch;

/// How many dispatches may run, and how many do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slots {
    bound: usize,
    running: usize,
}

/// A resizable bound on concurrent dispatches; cheap to clone (one shared count).
#[derive(Debug, Clone)]
pub struct Bound {
    slots: std::sync::Arc<watch::Sender<Slots>>,
}

/// One running dispatch; gives its slot back when dropped.
#[derive(Debug)]
pub struct Permit {
    slots: std::sync::Arc<watch::Sender<Slots>>,
}

impl Bound {
    /// A bound of `bound` (at least 1) with nothing running.
    pub fn new(bound: u32) -> Self {
        let slots = Slots { bound: at_least_one(bound), running: 0 };
        Self { slots: std::sync::Arc::new(watch::Sender::new(slots)) }
    }

    /// Puts a new bound in force (at least 1); waiters are woken to look again.
    pub fn resize(&self, bound: u32) {
        let bound = at_least_one(bound);
        self.slots.send_if_modified(|slots| {
            let changed = slots.bound != bound;
            slots.bound = bound;
            changed
        });
    }

    /// Waits for a free slot and takes it.
    pub async fn acquire(&self) -> Permit {
        let mut changes = self.slots.subscribe();
        loop {
            let taken = self.slots.send_if_modified(|slots| {
                let free = slots.running < slots.bound;
                if free {
                    slots.running += 1;
                }
                free
            });
            if taken {
                return Permit { slots: self.slots.clone() };
            }
            // The sender lives in `self`, so the channel cannot close while waiting;
            // `wait_for` looks at the current value first, so no wake-up is missed.
            let _ = changes.wait_for(|slots| slots.running < slots.bound).await;
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.slots.send_modify(|slots| slots.running = slots.running.saturating_sub(1));
    }
}

fn at_least_one(bound: u32) -> usize {
    (bound as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn raising_the_bound_lets_a_waiter_in_and_lowering_it_revokes_nothing() {
        let bound = Bound::new(1);
        let first = bound.acquire().await;
        let waiting = tokio::spawn({
            let bound = bound.clone();
            async move { bound.acquire().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one slot, taken");
        bound.resize(2);
        let second = waiting.await.expect("the waiter got the new slot");

        bound.resize(1);
        let third = tokio::spawn({
            let bound = bound.clone();
            async move { bound.acquire().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!third.is_finished(), "two running, bound 1: still over");
        drop(second);
        third.await.expect("a slot once under the bound");
    }
}
