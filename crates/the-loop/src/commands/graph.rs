//! `the-loop graph status|check|complete REF`: where a work item stands in its process
//! graph, and the session's claim that a node's work is done (docs/process-graph.md).
//! The graph is the one in the work item's own session checkout on this machine; the
//! claim is the dispatcher's (`Dispatcher::graph_complete`, under the state file's lock),
//! so what the next node's entry asks — its label, its assignment — happens as on any
//! boundary. Glue only.

use loop_core::graph::runtime::Step;
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
    }
}
