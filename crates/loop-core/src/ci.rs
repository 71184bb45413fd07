//! CI evidence: what a session is shown when CI fails on its pull request
//! (docs/agent-input.md).
//!
//! A failing `workflow_run` or `check_run` names a GitHub Actions run; the dispatcher
//! reads that run's jobs and steps, each failed job's check-run annotations and the tail
//! of its log, within `routing.ci`'s budget of requests and bytes, and hands what it got
//! back here as [`Evidence`]. This module decides which runs to read ([`runs_to_read`]),
//! which jobs failed, how a log is cut ([`log_tail`]) and what the report says
//! ([`report`]); it does no IO. The report is a capped JSON excerpt like any other, so it
//! travels inside the prompt's untrusted fence.

use crate::event::{CiRun, Event, RunKind};
use crate::excerpt::{Builder, Class, EXCERPT_MAX_CHARS, Field, fit};
use crate::refs::RepoRef;

/// The most annotations a failed job shows.
pub const MAX_ANNOTATIONS: usize = 10;

/// How an event says CI ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Failed,
    Passed,
}

/// The commit a CI event is about.
pub fn head_sha(event: &Event) -> Option<&str> {
    if !event.kind.is_ci() {
        return None;
    }
    match &event.status {
        Some(status) => status.sha.as_deref(),
        None => event.runs.first().and_then(|run| run.head_sha.as_deref()),
    }
}

/// Whether a CI event reports a failure, a success, or neither (still running, skipped,
/// neutral).
pub fn outcome(event: &Event) -> Option<Outcome> {
    if !event.kind.is_ci() {
        return None;
    }
    let word = match &event.status {
        Some(status) => status.state.as_deref(),
        None => event.runs.first().and_then(|run| run.conclusion.as_deref()),
    };
    match word? {
        "failure" | "timed_out" | "startup_failure" | "error" => Some(Outcome::Failed),
        "success" => Some(Outcome::Passed),
        _ => None,
    }
}

/// A GitHub Actions run whose jobs are to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunToRead {
    pub repo: RepoRef,
    pub id: u64,
    pub name: Option<String>,
    /// The run's page on GitHub.
    pub html_url: Option<String>,
}

/// The Actions runs the failing events of a batch name, each once, in arrival order: a
/// workflow run by its id, a check run by the run its `details_url` points into
/// (`…/actions/runs/{run}/job/{job}`). A check run of another app, a check suite and a
/// commit status name no run.
pub fn runs_to_read(events: &[&Event]) -> Vec<RunToRead> {
    let mut runs: Vec<RunToRead> = Vec::new();
    for event in events.iter().filter(|e| outcome(e) == Some(Outcome::Failed)) {
        let (Some(repo), Some(run)) = (&event.repository, event.runs.first()) else { continue };
        let Some((id, html_url)) = actions_run(run) else { continue };
        match runs.iter_mut().find(|r| r.id == id) {
            Some(known) if run.kind == RunKind::WorkflowRun => {
                known.name = run.name.clone();
            }
            Some(_) => {}
            None => runs.push(RunToRead {
                repo: repo.clone(),
                id,
                name: (run.kind == RunKind::WorkflowRun).then(|| run.name.clone()).flatten(),
                html_url,
            }),
        }
    }
    runs
}

/// The Actions run id and page a CI object names.
fn actions_run(run: &CiRun) -> Option<(u64, Option<String>)> {
    match run.kind {
        RunKind::WorkflowRun => Some((run.id.as_deref()?.parse().ok()?, run.html_url.clone())),
        RunKind::CheckRun => {
            let url = run.details_url.as_deref()?;
            let (page, rest) = url.split_once("/actions/runs/")?;
            let id: u64 = rest.split('/').next()?.parse().ok()?;
            Some((id, Some(format!("{page}/actions/runs/{id}"))))
        }
        RunKind::CheckSuite => None,
    }
}

/// A job of a workflow run (`GET /repos/{o}/{r}/actions/runs/{id}/jobs`). Its id is also
/// the id of its check run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Job {
    pub id: u64,
    pub name: String,
    pub conclusion: Option<String>,
    pub html_url: Option<String>,
    pub steps: Vec<Step>,
}

/// A step of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub number: u64,
    pub name: String,
    pub conclusion: Option<String>,
}

/// A check-run annotation (`GET /repos/{o}/{r}/check-runs/{id}/annotations`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotation {
    pub path: String,
    pub start_line: u64,
    /// `notice`, `warning` or `failure`.
    pub level: Option<String>,
    pub message: String,
}

/// Whether a job or step conclusion is a failure.
fn failed(conclusion: Option<&str>) -> bool {
    matches!(conclusion, Some("failure" | "timed_out" | "startup_failure"))
}

/// The jobs of a run that failed, in the run's order.
pub fn failed_jobs(jobs: &[Job]) -> Vec<&Job> {
    jobs.iter().filter(|job| failed(job.conclusion.as_deref())).collect()
}

/// The first failed step of a job.
pub fn failed_step(job: &Job) -> Option<&Step> {
    job.steps.iter().find(|step| failed(step.conclusion.as_deref()))
}

/// What was read about one failed job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailedJob {
    pub job: Job,
    pub annotations: Vec<Annotation>,
    /// The log's last lines ([`log_tail`]); empty when the log was not read.
    pub log_tail: Vec<String>,
}

/// What was read about one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEvidence {
    pub run: RunToRead,
    pub failed: Vec<FailedJob>,
}

/// Everything read for one batch of CI events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    pub runs: Vec<RunEvidence>,
}

impl Evidence {
    pub fn failed_jobs(&self) -> usize {
        self.runs.iter().map(|r| r.failed.len()).sum()
    }

    pub fn annotations(&self) -> usize {
        self.runs.iter().flat_map(|r| &r.failed).map(|j| j.annotations.len()).sum()
    }

    /// Bytes of log text the report carries.
    pub fn tail_bytes(&self) -> usize {
        self.runs
            .iter()
            .flat_map(|r| &r.failed)
            .flat_map(|j| &j.log_tail)
            .map(|line| line.len() + 1)
            .sum()
    }
}

/// The end of a job's log as the report shows it: ANSI escapes and each line's leading
/// runner timestamp removed, trailing blank lines dropped, then the last `max_lines`
/// lines that fit in `max_bytes` (a single line longer than that keeps its end).
pub fn log_tail(log: &[u8], max_lines: usize, max_bytes: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(log);
    let clean = strip_ansi(&text);
    let mut lines: Vec<&str> =
        clean.lines().map(|line| strip_timestamp(line.trim_end_matches('\r'))).collect();
    while lines.last().is_some_and(|line| line.trim().is_empty()) {
        lines.pop();
    }
    let mut kept: Vec<String> = Vec::new();
    let mut bytes = 0;
    for line in lines.iter().rev().take(max_lines) {
        let cost = line.len() + 1;
        if bytes + cost > max_bytes {
            if kept.is_empty() {
                kept.push(end_of(line, max_bytes.saturating_sub(1)).to_owned());
            }
            break;
        }
        bytes += cost;
        kept.push((*line).to_owned());
    }
    kept.reverse();
    kept
}

/// The last at most `max` bytes of `line`, cut on a character boundary.
fn end_of(line: &str, max: usize) -> &str {
    let mut start = line.len().saturating_sub(max);
    while !line.is_char_boundary(start) {
        start += 1;
    }
    &line[start..]
}

/// `text` without ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`,
/// and two-character escapes).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A line without the runner's `2024-05-01T12:00:00.1234567Z ` prefix.
fn strip_timestamp(line: &str) -> &str {
    let Some((stamp, rest)) = line.split_once(' ') else { return line };
    let bytes = stamp.as_bytes();
    let looks_like = stamp.len() >= 20
        && stamp.ends_with('Z')
        && bytes.get(4) == Some(&b'-')
        && bytes.get(10) == Some(&b'T')
        && bytes[..4].iter().all(u8::is_ascii_digit);
    if looks_like { rest } else { line }
}

/// The CI report of a batch: each failed job of each run read, with its failed step,
/// annotations (`path:line`, level, message) and log tail, under the run's name and URL;
/// then every event of the batch no run read covers, as name, conclusion and URL.
pub fn report(events: &[&Event], evidence: &Evidence) -> String {
    let mut fields = Builder::default();
    let first = events.first();
    let sha = first.and_then(|e| head_sha(e)).map(str::to_owned);
    let branch = events.iter().flat_map(|e| &e.runs).find_map(|r| r.head_branch.clone());
    let mut tail_chars = 0;
    fields.container("ci", |ci| {
        ci.text("head_sha", Class::Label, &sha);
        ci.text("head_branch", Class::Label, &branch);
        let mut failed = Vec::new();
        for run in &evidence.runs {
            for job in &run.failed {
                let mut j = Builder::default();
                j.text("workflow", Class::Label, &run.run.name);
                j.text("job", Class::Label, &Some(job.job.name.clone()));
                j.text("step", Class::Label, &failed_step(&job.job).map(|s| s.name.clone()));
                let annotations = job
                    .annotations
                    .iter()
                    .take(MAX_ANNOTATIONS)
                    .map(|a| {
                        let level = a.level.as_deref().unwrap_or("failure");
                        let text = format!("{}:{} {level}: {}", a.path, a.start_line, a.message);
                        Field::Text(Class::Prose, text)
                    })
                    .collect();
                j.list("annotations", annotations);
                tail_chars += job.log_tail.iter().map(|l| l.chars().count() + 8).sum::<usize>();
                let tail =
                    job.log_tail.iter().map(|l| Field::Text(Class::Label, l.clone())).collect();
                j.list("log_tail", tail);
                j.text("job_url", Class::Anchor, &job.job.html_url);
                j.text("run_url", Class::Anchor, &run.run.html_url);
                failed.push(Field::Object(j.0));
            }
        }
        ci.list("failed", failed);
        let covered = |event: &&&Event| {
            event.runs.first().and_then(actions_run).is_some_and(|(id, _)| {
                evidence.runs.iter().any(|r| r.run.id == id && !r.failed.is_empty())
            })
        };
        let others = events
            .iter()
            .filter(|e| !covered(e))
            .map(|event| {
                let mut c = Builder::default();
                summary(event, &mut c);
                Field::Object(c.0)
            })
            .collect();
        ci.list("checks", others);
    });
    let cap = EXCERPT_MAX_CHARS * (1 + evidence.failed_jobs()) + tail_chars;
    fit(&fields.0, cap)
}

/// A CI event in one entry: what it is, how it ended, where to look.
fn summary(event: &Event, into: &mut Builder) {
    if let Some(status) = &event.status {
        into.text("context", Class::Label, &status.context);
        into.text("state", Class::Label, &status.state);
        into.text("description", Class::Prose, &status.description);
        into.text("target_url", Class::Anchor, &status.target_url);
        return;
    }
    let Some(run) = event.runs.first() else { return };
    into.text("kind", Class::Label, &Some(run.kind.key().to_owned()));
    into.text("name", Class::Label, &run.name);
    into.text("conclusion", Class::Label, &run.conclusion);
    let url = run.html_url.clone().or_else(|| run.details_url.clone());
    into.text("html_url", Class::Anchor, &url);
}

/// The one line pasted when CI passes on a head whose failure was reported before.
pub fn passed_after_failure(event: &Event) -> String {
    let sha = head_sha(event).unwrap_or("-");
    let short = sha.get(..7).unwrap_or(sha);
    let name = match (&event.status, event.runs.first()) {
        (Some(status), _) => status.context.clone(),
        (None, Some(run)) => run.name.clone(),
        (None, None) => None,
    };
    let what = name.map(|n| format!("{n} ")).unwrap_or_default();
    let url = match (&event.status, event.runs.first()) {
        (Some(status), _) => status.target_url.clone(),
        (None, Some(run)) => run.html_url.clone().or_else(|| run.details_url.clone()),
        (None, None) => None,
    };
    let mut line = serde_json::Map::new();
    line.insert(
        "ci".into(),
        format!("{what}passed on {short} after the failure reported earlier").into(),
    );
    if let Some(url) = url {
        line.insert("html_url".into(), url.into());
    }
    serde_json::Value::Object(line).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn workflow_run(id: u64, conclusion: &str) -> Event {
        Event::from_webhook(
            "workflow_run",
            &json!({
                "action": "completed",
                "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
                "workflow_run": {"id": id, "name": "CI", "status": "completed", "conclusion": conclusion,
                                 "head_sha": "abc1234def", "head_branch": "issue-1",
                                 "html_url": format!("https://github.com/octo/app/actions/runs/{id}")},
            }),
        )
    }

    fn check_run(job: u64, run: u64) -> Event {
        Event::from_webhook(
            "check_run",
            &json!({
                "action": "completed",
                "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
                "check_run": {"id": job, "name": "test", "status": "completed", "conclusion": "failure",
                              "head_sha": "abc1234def",
                              "details_url": format!("https://github.com/octo/app/actions/runs/{run}/job/{job}")},
            }),
        )
    }

    #[test]
    fn failures_of_one_head_name_each_run_once() {
        let (w, c) = (workflow_run(5, "failure"), check_run(11, 5));
        let runs = runs_to_read(&[&c, &w]);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].id, 5);
        assert_eq!(runs[0].name.as_deref(), Some("CI"));
        assert_eq!(runs[0].html_url.as_deref(), Some("https://github.com/octo/app/actions/runs/5"));
        assert!(runs_to_read(&[&workflow_run(6, "success")]).is_empty());
        assert_eq!(outcome(&w), Some(Outcome::Failed));
        assert_eq!(head_sha(&c), Some("abc1234def"));
    }

    #[test]
    fn a_log_tail_has_no_escapes_or_timestamps_and_keeps_the_last_line_within_caps() {
        let log = "2024-05-01T12:00:00.1234567Z \u{1b}[36;1mcargo test\u{1b}[0m\n\
                   2024-05-01T12:00:01.0000000Z line two\n\
                   2024-05-01T12:00:02.0000000Z \u{1b}]8;;http://x\u{7}error: it broke\r\n\n";
        assert_eq!(log_tail(log.as_bytes(), 2, 1000), ["line two", "error: it broke"]);
        assert_eq!(log_tail(log.as_bytes(), 10, 16), ["error: it broke"]);
        assert_eq!(log_tail(log.as_bytes(), 10, 6), ["broke"]);
        assert!(log_tail(b"", 10, 10).is_empty());
    }

    #[test]
    fn the_report_names_job_step_annotation_tail_and_run_url() {
        let w = workflow_run(5, "failure");
        let evidence = Evidence {
            runs: vec![RunEvidence {
                run: runs_to_read(&[&w]).remove(0),
                failed: vec![FailedJob {
                    job: Job {
                        id: 11,
                        name: "test".into(),
                        conclusion: Some("failure".into()),
                        html_url: Some("https://github.com/octo/app/actions/runs/5/job/11".into()),
                        steps: vec![
                            Step {
                                number: 1,
                                name: "checkout".into(),
                                conclusion: Some("success".into()),
                            },
                            Step {
                                number: 2,
                                name: "cargo test".into(),
                                conclusion: Some("failure".into()),
                            },
                        ],
                    },
                    annotations: vec![Annotation {
                        path: "src/lib.rs".into(),
                        start_line: 7,
                        level: Some("failure".into()),
                        message: "assertion failed".into(),
                    }],
                    log_tail: vec!["error: test failed".into()],
                }],
            }],
        };
        let status = Event::from_webhook(
            "status",
            &json!({"id": 3, "sha": "abc1234def", "state": "failure", "context": "lint",
                    "target_url": "https://ci.example/3"}),
        );
        let text = report(&[&w, &status], &evidence);
        let got: Value = serde_json::from_str(&text).unwrap();
        let failed = &got["ci"]["failed"][0];
        assert_eq!(failed["job"], "test");
        assert_eq!(failed["step"], "cargo test");
        assert_eq!(failed["annotations"][0], "src/lib.rs:7 failure: assertion failed");
        assert_eq!(failed["log_tail"][0], "error: test failed");
        assert_eq!(failed["run_url"], "https://github.com/octo/app/actions/runs/5");
        assert_eq!(got["ci"]["checks"][0]["context"], "lint", "{text}");
        assert_eq!(got["ci"]["checks"].as_array().unwrap().len(), 1, "the run is not listed twice");
    }

    #[test]
    fn a_pass_after_a_failure_is_one_line() {
        let line = passed_after_failure(&workflow_run(9, "success"));
        assert!(!line.contains('\n'));
        assert!(line.contains("CI passed on abc1234 after the failure reported earlier"), "{line}");
    }
}
