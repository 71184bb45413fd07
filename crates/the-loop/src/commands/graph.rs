//! `the-loop graph status|check|complete|force|skip REF`: where a work item stands in its
//! process graph, the session's claim that a node's work is done, and the operator's
//! overrides (docs/process-graph.md). The graph is the one in the work item's own session
//! checkout on this machine; each verb is the dispatcher's (`Dispatcher::graph_complete`,
//! `graph_force`, `graph_skip`, under the state file's lock), so what a claim's next node
//! asks — its label, its assignment — happens as on any boundary, and an override is
//! recorded and announced as the control plane's is. Glue only.

use loop_core::Hint as _;
use loop_core::graph::runtime::{Refused, Step};
use loop_daemon::dispatcher::GraphTarget;
use serde_json::json;

use super::sessions;
use crate::ExitStatus;
use crate::cli::{GlobalArgs, GraphCommand};
use crate::config_file::CliConfig;
use crate::printer::Printer;

pub fn run(
    command: GraphCommand,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let no_graph = |item: &loop_core::WorkItemRef| {
        printer.error(format!(
            "{item}: no process graph is driven here (no session checkout of it on this machine, \
             `routing.graph.enabled` off, or the checkout is not its repository; `the-loop explain {item}` says which)"
        ));
        ExitStatus::Negative
    };
    match command {
        GraphCommand::Status(args) => {
            let item = args.work_item;
            let target = GraphTarget::session(item.clone());
            let view =
                sessions::with_dispatcher(loaded.source, async |d| d.graph_view(&target).await)?;
            let Some(view) = view else { return Ok(no_graph(&item)) };
            printer.data(view.context.trim_end());
            Ok(ExitStatus::Success)
        }
        GraphCommand::Check(args) => {
            let item = args.work_item;
            let target = GraphTarget::session(item.clone());
            let view =
                sessions::with_dispatcher(loaded.source, async |d| d.graph_view(&target).await)?;
            let Some(view) = view else { return Ok(no_graph(&item)) };
            printer.data(view.check.trim_end());
            Ok(if view.ok { ExitStatus::Success } else { ExitStatus::Negative })
        }
        GraphCommand::Complete(args) => {
            let item = args.item.work_item;
            let by = sessions::operator();
            let claimed = sessions::with_dispatcher(loaded.source, async |d| {
                d.graph_complete(
                    &GraphTarget::session(item.clone()),
                    args.node.clone(),
                    by.as_str(),
                )
                .await
            })?;
            let Some(claimed) = claimed else { return Ok(no_graph(&item)) };
            let (result, node) = match &claimed.step {
                Step::Advanced { to, .. } => ("advanced", to.as_str()),
                Step::Blocked { node } => ("blocked", node.as_str()),
                Step::Escalated { node } => ("escalated", node.as_str()),
                Step::Parked { node } => ("waiting", node.as_str()),
                Step::NoEdge { node, .. } => ("no-edge", node.as_str()),
                Step::Terminal { node } => ("complete", node.as_str()),
                Step::AlreadyPast { node } => ("already-past", node.as_str()),
                Step::NotCurrent { node, .. } => ("not-current", node.as_str()),
                Step::NotStarted | Step::Started { .. } | Step::AlreadyStarted => {
                    ("not-started", "")
                }
            };
            printer.data(json!({
                "workItem": item.to_string(),
                "result": result,
                "node": node,
                "messages": claimed.messages,
            }));
            printer.info(claimed.context.trim_end());
            Ok(ExitStatus::Success)
        }
        GraphCommand::Force(args) => {
            let item = args.work_item;
            let by = sessions::operator();
            let forced = sessions::with_dispatcher(loaded.source, async |d| {
                let target = GraphTarget::session(item.clone());
                d.graph_force(&target, args.to.trim(), &args.reason, by.as_str()).await
            })?;
            let forced = match forced {
                None => return Ok(no_graph(&item)),
                Some(Err(refused)) => return Ok(refusal(printer, &refused)),
                Some(Ok(forced)) => forced,
            };
            for warning in &forced.warnings {
                printer.warning(warning);
            }
            printer.data(json!({
                "workItem": item.to_string(),
                "fromNode": forced.from,
                "toNode": forced.to,
                "reason": forced.reason,
                "warnings": forced.warnings,
            }));
            Ok(ExitStatus::Success)
        }
        GraphCommand::Skip(args) => {
            let item = args.work_item;
            let by = sessions::operator();
            let declared = sessions::with_dispatcher(loaded.source, async |d| {
                let target = GraphTarget::session(item.clone());
                d.graph_skip(&target, args.nodes.clone(), &args.reason, by.as_str(), "cli").await
            })?;
            let declared = match declared {
                None => return Ok(no_graph(&item)),
                Some(Err(refused)) => return Ok(refusal(printer, &refused)),
                Some(Ok(declared)) => declared,
            };
            for rejected in &declared.rejected {
                printer.warning(format!("`{}` not declared: {}", rejected.token, rejected.why));
            }
            for warning in &declared.warnings {
                printer.warning(warning);
            }
            let rejected: Vec<_> =
                declared.rejected.iter().map(|r| json!({"token": r.token, "why": r.why})).collect();
            printer.data(json!({
                "workItem": item.to_string(),
                "declared": declared.declared,
                "rejected": rejected,
                "reason": declared.reason,
                "warnings": declared.warnings,
            }));
            Ok(if declared.declared.is_empty() {
                ExitStatus::Negative
            } else {
                ExitStatus::Success
            })
        }
    }
}

/// An override refused before anything was written: the error and what to do instead.
fn refusal(printer: Printer, refused: &Refused) -> ExitStatus {
    printer.error(refused);
    if let Some(hint) = refused.hint() {
        printer.hint(hint);
    }
    ExitStatus::CouldNotRun
}
