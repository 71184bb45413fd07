//! Integration tests of the simulated GitHub: its HTTP behaviour, its scripting API and
//! the shape of its webhook payloads; and of the Messages API stand-in (`model_api`).
//!
//! The simulator's answers are checked against GitHub's OpenAPI description by
//! loop-github's contract tests, where the client's calls are known.

mod http_api;
mod model_api;
mod scripting;
mod webhook_shapes;

/// A simulator with `octo/app`, and an HTTP client for talking to it.
async fn start() -> (loop_sim::Sim, reqwest::Client) {
    let sim = loop_sim::Sim::start().await.unwrap();
    sim.create_repo("octo/app").unwrap();
    (sim, reqwest::Client::new())
}

/// A request as a well-behaved GitHub client sends it.
fn github(http: &reqwest::Client, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
    http.request(method, url).header("User-Agent", "sim-test").bearer_auth("t")
}
