//! `the-loop explain DELIVERY-ID | REF`: why something happened — or did not.
//!
//! For a delivery (a GitHub delivery id, a dedup key or a poll id): its trail from the
//! event log alone — what arrived, each guard passed or failed with its reason, the
//! decision, the effects and their outcomes — and a one-line verdict. For a work item
//! (`github:owner/repo#N`): its current arming, session, ledger, collaborators and ended
//! state from its records, then the trail of each delivery that touched it.
//! `--json` prints the same as one JSON object.
//!
//! Glue only: the reading of lines is loop-core's `explain`, the files loop-store's.
//! Exit 1 when there is nothing to explain (no line, no record).

use anyhow::Context as _;
use loop_core::WorkItemRef;
use loop_core::explain::{self, DeliveryTrail, Mark, Record, Verdict};
use loop_store::event_log::read::read_all;
use loop_store::{EventLog, StateStore};
use serde_json::json;

use crate::ExitStatus;
use crate::cli::{ExplainArgs, GlobalArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

pub fn run(args: ExplainArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let layout = state_root::layout(&loaded.config);
    let path = layout.event_log();
    let records: Vec<Record> = read_all(path)
        .with_context(|| format!("cannot read the event log `{}`", path.display()))?
        .into_iter()
        .map(|record| record.0)
        .collect();
    match args.subject.parse::<WorkItemRef>() {
        Ok(item) => {
            let store = StateStore::new(layout, EventLog::disabled());
            let state = store
                .item_state(&item)
                .with_context(|| format!("cannot read the records of {item}"))?;
            let trails = explain::item_trail(&records, &item, args.limit);
            let summary = explain::describe_item(&state);
            let known = !trails.is_empty()
                || state.control.is_some()
                || state.session.is_some()
                || state.ledger.is_some()
                || state.ended.is_some();
            if global.json {
                printer.data(json!({
                    "workItem": item.to_string(),
                    "state": {
                        "control": state.control,
                        "session": state.session,
                        "poll": state.ledger,
                        "ended": state.ended,
                        "collaborators": state.collaborators,
                    },
                    "summary": summary,
                    "deliveries": trails,
                }));
            } else {
                printer.data(item.to_string());
                for line in &summary {
                    printer.data(format!("  {line}"));
                }
                if trails.is_empty() {
                    printer.data("  (the event log has no line about it)");
                }
                for trail in &trails {
                    printer.data("");
                    print_trail(trail, printer);
                }
            }
            Ok(if known { ExitStatus::Success } else { ExitStatus::Negative })
        }
        Err(_) if args.subject.contains('#') && args.subject.contains(':') => {
            // Looks like a ref but is not one: say why rather than search for it.
            let err = args
                .subject
                .parse::<WorkItemRef>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            printer.error(format!("`{}` is not a work-item ref: {err}", args.subject));
            Ok(ExitStatus::CouldNotRun)
        }
        Err(_) => {
            let trail = explain::delivery_trail(&records, &args.subject);
            let found = !trail.steps.is_empty();
            if global.json {
                printer
                    .data(serde_json::to_value(&trail).context("cannot encode the trail as JSON")?);
            } else if found {
                print_trail(&trail, printer);
            } else {
                printer.error(format!(
                    "the event log `{}` has no line about delivery `{}`",
                    path.display(),
                    args.subject
                ));
                printer.hint("`the-loop events` lists recent events with their delivery ids; a work item's ref (`github:owner/repo#N`) explains everything about it");
            }
            Ok(if found { ExitStatus::Success } else { ExitStatus::Negative })
        }
    }
}

fn print_trail(trail: &DeliveryTrail, printer: Printer) {
    match &trail.delivery {
        Some(id) => printer.data(format!("delivery {id}")),
        None => printer.data("outside any delivery"),
    }
    for step in &trail.steps {
        let mark = match step.mark {
            Mark::Passed => "✓",
            Mark::Failed => "✗",
            Mark::Noted => "·",
        };
        printer.data(format!("  {}  {mark} {}", step.ts, step.text));
    }
    if let Some(verdict) = &trail.verdict {
        let (word, text) = match verdict {
            Verdict::Acted(text) => ("done", text),
            Verdict::Refused(text) => ("refused", text),
            Verdict::Failed(text) => ("failed", text),
            Verdict::Undecided(text) => ("undecided", text),
        };
        printer.data(format!("  => {word}: {text}"));
    }
}
