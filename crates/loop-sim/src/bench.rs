//! Counting the GitHub requests a scenario makes: the measuring stick for SPEC §7's
//! "a quiet poll cycle = S requests, all 304".
//!
//! ```ignore
//! let log = loop_sim::bench::count_requests(&sim, || poller.cycle()).await;
//! assert_eq!(log.with_status(304), log.total());
//! println!("{log}"); // requests by endpoint and status
//! ```

use std::future::Future;

use crate::request_log::RequestLog;
use crate::server::Sim;

/// Runs `scenario` and returns the requests the simulator answered while it ran (and
/// what the scenario itself returned). The log is cleared first.
pub async fn count_requests<F, Fut, T>(sim: &Sim, scenario: F) -> (RequestLog, T)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    sim.clear_requests();
    let result = scenario().await;
    (sim.requests(), result)
}
