//! `the-loop events`: read the event log, across rotated files, optionally following it.
//!
//! Glue only: the filters and the reader are loop-store's; this module resolves the log's
//! path from the config, picks the output form (a table, or JSONL with `--json`) and, with
//! `--follow`, polls for appends until Ctrl-C (exit 0).

use std::time::Duration;

use anyhow::Context as _;
use jiff::Timestamp;
use loop_store::event_log::filter::{EventFilter, parse_since};
use loop_store::event_log::read::{EventRecord, EventTail};
use serde_json::Value;

use crate::ExitStatus;
use crate::cli::{EventsArgs, GlobalArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

/// How often `--follow` looks for appends.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

pub fn run(args: EventsArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let config = CliConfig::load(global, printer)?;
    let layout = state_root::layout(&config.config);
    let path = layout.event_log();
    let since =
        args.since.as_deref().map(|since| parse_since(since, Timestamp::now())).transpose()?;
    let filter = EventFilter {
        work_item: args.work_item,
        events: args.events,
        since,
        ..EventFilter::default()
    };
    let output = Output { json: global.json, printer };

    // Ctrl-C is caught from before the backlog is printed, so a reader that saw the
    // backlog can interrupt the follow and get exit 0.
    let interrupt = args.follow.then(Interrupt::install).transpose()?;
    let mut tail = EventTail::from_end(path)
        .with_context(|| format!("cannot read the event log `{}`", path.display()))?;
    let mut matching: Vec<EventRecord> =
        tail.backlog()?.into_iter().filter(|record| filter.matches(record)).collect();
    if args.limit > 0 && matching.len() > args.limit {
        matching.drain(..matching.len() - args.limit);
    }
    if matching.is_empty() {
        printer.info("(no matching events)");
    } else {
        output.header();
        for record in &matching {
            output.record(record);
        }
    }
    if let Some(interrupt) = interrupt {
        interrupt.follow(&mut tail, &filter, output)?;
    }
    Ok(ExitStatus::Success)
}

/// A current-thread runtime with the SIGINT handler already installed.
#[derive(Debug)]
struct Interrupt {
    runtime: tokio::runtime::Runtime,
    /// Yields once per SIGINT received after [`Interrupt::install`].
    signal: tokio::signal::unix::Signal,
}

impl Interrupt {
    fn install() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the runtime that waits for Ctrl-C")?;
        let signal = {
            let _context = runtime.enter();
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .context("cannot listen for Ctrl-C")?
        };
        Ok(Self { runtime, signal })
    }

    /// Prints matching appends until Ctrl-C.
    fn follow(
        mut self,
        tail: &mut EventTail,
        filter: &EventFilter,
        output: Output,
    ) -> anyhow::Result<()> {
        self.runtime.block_on(async {
            let mut interval = tokio::time::interval(FOLLOW_INTERVAL);
            loop {
                tokio::select! {
                    _ = self.signal.recv() => return Ok(()),
                    _ = interval.tick() => {
                        for record in tail.poll()?.iter().filter(|record| filter.matches(record)) {
                            output.record(record);
                        }
                    }
                }
            }
        })
    }
}

/// Table or JSONL.
#[derive(Debug, Clone, Copy)]
struct Output {
    json: bool,
    printer: Printer,
}

impl Output {
    fn header(&self) {
        if !self.json {
            self.printer.data(row(["Time", "Source", "Level", "Event", "Work item", "Detail"]));
        }
    }

    fn record(&self, record: &EventRecord) {
        if self.json {
            self.printer.data(Value::Object(record.0.clone()));
        } else {
            self.printer.data(table_row(record));
        }
    }
}

const WIDTHS: [usize; 5] = [24, 10, 7, 28, 24];

/// One table line: fixed-width columns, the detail last.
fn row(cells: [&str; 6]) -> String {
    let mut line = String::new();
    for (cell, width) in cells[..5].iter().zip(WIDTHS) {
        line.push_str(&format!("{cell:<width$} "));
    }
    line.push_str(cells[5]);
    line.trim_end().to_owned()
}

/// An event as a table line; Detail is every non-envelope field as `k=v` (strings bare,
/// anything else JSON), except the work items, which have their own column.
fn table_row(record: &EventRecord) -> String {
    let work_items: Vec<&str> = record.work_items().collect();
    let detail: Vec<String> = record
        .details()
        .filter(|(key, _)| !matches!(*key, "work_item" | "work_items"))
        .map(|(key, value)| match value {
            Value::String(text) => format!("{key}={text}"),
            other => format!("{key}={other}"),
        })
        .collect();
    row([
        record.ts(),
        record.source(),
        record.level(),
        record.event(),
        &work_items.join(","),
        &detail.join(" "),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_row_shows_the_envelope_the_work_items_and_the_detail() {
        let record = EventRecord(
            serde_json::from_str(
                r#"{"ts":"2026-11-29T10:00:00.000Z","source":"poll","event":"poll.item_error","level":"warning","pid":7,"work_item":"github:o/r#1","reason":"boom","will_retry":true}"#,
            )
            .unwrap(),
        );
        assert_eq!(
            table_row(&record),
            "2026-11-29T10:00:00.000Z poll       warning poll.item_error              github:o/r#1             reason=boom will_retry=true"
        );
    }
}
