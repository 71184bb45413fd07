//! Reading a failing CI run's evidence (docs/agent-input.md): the run's jobs and steps,
//! each failed job's check-run annotations and the end of its log, through the GitHub
//! client, spending at most `routing.ci.maxRequests` requests (a log's redirect counts)
//! and keeping at most the tail `routing.ci` allows. loop-core picks the runs and the
//! failed jobs, cuts the log and writes the report; this module only fetches.
//!
//! Best-effort and never a lost delivery: when no run's jobs can be read (an error, no
//! client, nothing failed) the answer is `None` and the event's own excerpt is pasted
//! (`ci.fetch_failed`); an annotation or log read that fails or is out of budget only
//! leaves that part out. What was read is logged as counts and bytes (`ci.fetched`),
//! never as text.

use std::sync::PoisonError;

use loop_core::ci::{self, Evidence, FailedJob, RunEvidence};
use loop_core::event::Event;
use loop_core::log::{Kind, Line};
use loop_core::plan::Context;

use super::Dispatcher;

/// The most bytes of one log read to reach its end; a longer log shows no tail.
const MAX_LOG_READ: u64 = 64 * 1024 * 1024;

/// How many heads with a pasted failure are remembered.
const REMEMBERED_FAILURES: usize = 256;

impl Dispatcher {
    /// The evidence for the failing events of a batch; `None` when nothing could be read
    /// (or nothing is to be read: CI evidence off, no failing Actions run, no client).
    pub(crate) async fn ci_evidence(&self, events: &[&Event], cx: &Context) -> Option<Evidence> {
        let config = self.config();
        let settings = &config.routing.ci;
        let runs = ci::runs_to_read(events);
        if !settings.enabled || runs.is_empty() {
            return None;
        }
        let github = self.github()?;
        let budget = settings.max_requests;
        let (max_lines, max_bytes) =
            (settings.max_log_lines as usize, settings.max_log_bytes as usize);
        // The raw log carries a timestamp and escapes on every line: read more than shown.
        let keep = 4 * max_bytes + 64 * max_lines;
        let (mut spent, mut log_bytes, mut errors) = (0u32, 0u64, 0u32);
        let mut evidence = Evidence::default();
        let mut first_error = None;
        for run in runs {
            if spent >= budget {
                break;
            }
            spent += 1;
            let jobs = match github.run_jobs(&run.repo, run.id).await {
                Ok(jobs) => jobs,
                Err(err) => {
                    errors += 1;
                    first_error.get_or_insert(err.to_string());
                    continue;
                }
            };
            let mut failed = Vec::new();
            for job in ci::failed_jobs(&jobs) {
                let mut read = FailedJob { job: job.clone(), ..FailedJob::default() };
                if spent < budget {
                    spent += 1;
                    match github.check_run_annotations(&run.repo, job.id, ci::MAX_ANNOTATIONS).await
                    {
                        Ok(annotations) => read.annotations = annotations,
                        Err(_) => errors += 1,
                    }
                }
                // The log costs two requests: the API's redirect and the log itself.
                if spent + 2 <= budget {
                    spent += 1;
                    match github.job_log_tail(&run.repo, job.id, keep, MAX_LOG_READ).await {
                        Ok(tail) => {
                            spent += u32::from(tail.redirected);
                            log_bytes += tail.read;
                            read.log_tail = ci::log_tail(&tail.bytes, max_lines, max_bytes);
                        }
                        Err(_) => errors += 1,
                    }
                }
                failed.push(read);
            }
            if !failed.is_empty() {
                evidence.runs.push(RunEvidence { run, failed });
            }
        }
        let item = cx.work_items.first();
        if evidence.failed_jobs() == 0 {
            let error = first_error.unwrap_or_else(|| "no failed job was found".to_owned());
            let line = Line::warning(Kind::CiFetchFailed)
                .field("requests", spent)
                .field("max_requests", budget)
                .field("error", error);
            self.events().emit_async(cx.stamp(with_item(line, item))).await;
            return None;
        }
        let line = Line::info(Kind::CiFetched)
            .field("runs", evidence.runs.len())
            .field("failed_jobs", evidence.failed_jobs())
            .field("annotations", evidence.annotations())
            .field("requests", spent)
            .field("max_requests", budget)
            .field("log_bytes", log_bytes)
            .field("tail_bytes", evidence.tail_bytes())
            .field("errors", errors);
        self.events().emit_async(cx.stamp(with_item(line, item))).await;
        Some(evidence)
    }

    /// Whether a failure on `head` was pasted (and forgets it: one pass says so once).
    pub(crate) fn take_ci_failure(&self, head: &str) -> bool {
        let mut failures = self.inner.ci_failures.lock().unwrap_or_else(PoisonError::into_inner);
        let found = failures.iter().position(|h| h == head);
        found.map(|at| failures.remove(at)).is_some()
    }

    /// Remembers that a failure on `head` was pasted.
    pub(crate) fn remember_ci_failure(&self, head: String) {
        let mut failures = self.inner.ci_failures.lock().unwrap_or_else(PoisonError::into_inner);
        if !failures.contains(&head) {
            failures.push_back(head);
        }
        while failures.len() > REMEMBERED_FAILURES {
            failures.pop_front();
        }
    }
}

fn with_item(line: Line, item: Option<&loop_core::WorkItemRef>) -> Line {
    match item {
        Some(item) => line.work_item(item),
        None => line,
    }
}
