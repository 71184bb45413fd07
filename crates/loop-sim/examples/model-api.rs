//! Runs the Messages API stand-in by itself, for trying the real Claude Code against it
//! by hand (docs/simulator.md, "The model stand-in"):
//!
//! ```console
//! $ cargo run -p loop-sim --example model-api -- --port 0 --rules rules.json
//! http://127.0.0.1:40123
//! ```
//!
//! The base URL on stdout goes into `ANTHROPIC_BASE_URL`. `--rules` takes a JSON array of
//! rules (the body of `POST /_stand-in/rules`, one per element); more can be added and
//! the log read over `/_stand-in/` while it runs. Ctrl-C or SIGTERM stops it.

use std::io::Write as _;

use loop_sim::ModelApi;
use loop_sim::model_api::Rule;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut port = 0u16;
    let mut rules: Vec<Rule> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--port", Some(value)) => port = value.parse()?,
            ("--rules", Some(path)) => {
                rules = serde_json::from_str(&std::fs::read_to_string(&path)?)?
            }
            _ => {
                return Err(format!(
                    "unexpected `{arg}`; usage: model-api [--port N] [--rules FILE]"
                )
                .into());
            }
        }
    }
    let api = ModelApi::serve(TcpListener::bind(("127.0.0.1", port)).await?).await?;
    for rule in rules {
        api.script(rule)?;
    }
    writeln!(std::io::stdout(), "{}", api.base_url())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    api.shutdown().await;
    Ok(())
}
