//! `the-loop sim`: the simulated GitHub in the foreground, for manual use and the demo.
//!
//! Prints the API base URL on stdout (point `integrations.github.api.baseUrl` at it), then
//! serves until Ctrl-C or SIGTERM. Users are acted out over `POST <url>/_sim/actions`.
//! Takes nothing from the config file: the simulator has no settings worth keeping.

use anyhow::Context;
use loop_sim::{Sim, SimSettings};

use crate::ExitStatus;
use crate::cli::{GlobalArgs, SimArgs};
use crate::printer::Printer;

pub fn run(args: SimArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the simulator's runtime")?;
    runtime.block_on(serve(args, global, printer))
}

async fn serve(args: SimArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let stop = super::stop_signal()?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    let settings = SimSettings { viewer: args.viewer.clone(), ..SimSettings::default() };
    let sim = Sim::serve(listener, settings).await.context("cannot start the simulated GitHub")?;
    for repo in &args.seed_repos {
        sim.create_repo(&repo.to_string()).with_context(|| format!("cannot create `{repo}`"))?;
    }
    if global.json {
        let seeded: Vec<String> = args.seed_repos.iter().map(ToString::to_string).collect();
        let line = serde_json::json!({ "url": sim.url(), "enterpriseUrl": sim.enterprise_url(), "repositories": seeded });
        printer.data(line);
    } else {
        printer.data(sim.url());
    }
    printer.info(format_args!(
        "simulated GitHub on {url} (tokens act as `{viewer}`); act as users with `POST {url}/_sim/actions`; Ctrl-C to stop",
        url = sim.url(),
        viewer = args.viewer,
    ));
    stop.await;
    sim.shutdown().await;
    printer.info("simulated GitHub stopped");
    Ok(ExitStatus::Success)
}
