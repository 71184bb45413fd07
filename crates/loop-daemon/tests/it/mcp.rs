//! The MCP server (`/mcp`) driven by a real MCP client (rmcp's streamable HTTP client)
//! over a lab: the tools are listed, `link_pull_request` records a pull request that
//! carries no closing reference, and that pull request's next event reaches the work
//! item's session; every call is in the event log; a request addressed to another host
//! (DNS rebinding) or from a foreign origin is refused before any tool runs.

use std::io::{Read as _, Write as _};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::dispatch_lab::{Lab, OWNER, REPO};

/// Serves the lab's `/mcp` on a port of its own; its address.
async fn serve_mcp(lab: &Lab, cancel: &CancellationToken) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port 0");
    let addr = listener.local_addr().expect("an address");
    let service = loop_daemon::mcp::service(
        lab.dispatcher.clone(),
        // No transcripts here: every usage is `null`.
        loop_daemon::usage::UsageBook::new(std::path::PathBuf::from("/nonexistent/projects")),
        vec![addr.to_string(), format!("localhost:{}", addr.port())],
        vec![format!("http://{addr}")],
        cancel.child_token(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let stop = cancel.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
    });
    addr
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_mcp_client_links_a_pull_request_whose_events_then_reach_the_session() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let item = lab.item(number);
    let cancel = CancellationToken::new();
    let addr = serve_mcp(&lab, &cancel).await;

    let client =
        ().serve(StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp")))
            .await
            .expect("the client initializes");
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools listed")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    for tool in
        ["ask", "link_pull_request", "get_work_item", "list_work_items", "query_events", "explain"]
    {
        assert!(tools.iter().any(|t| t == tool), "{tool} in {tools:?}");
    }

    // A pull request the session opened: its branch and body name no issue.
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Widget fix", "Part of the work.", "loop/widget", &[])
        .expect("a pull request");
    let call = |name: &'static str, arguments: Value| {
        let arguments = arguments.as_object().cloned();
        let client = &client;
        async move {
            client
                .call_tool(
                    CallToolRequestParams::new(name).with_arguments(arguments.unwrap_or_default()),
                )
                .await
                .expect("the call is answered")
        }
    };
    let linked = call(
        "link_pull_request",
        json!({"work_item": item.to_string(), "pull_request": format!("https://github.com/{REPO}/pull/{pr}")}),
    )
    .await;
    assert_ne!(linked.is_error, Some(true), "{}", text_of(&linked));
    let answer: Value = serde_json::from_str(&text_of(&linked)).expect("JSON");
    assert_eq!(answer["linked"], true);
    let again =
        call("link_pull_request", json!({"work_item": item.to_string(), "pull_request": pr})).await;
    assert_eq!(
        serde_json::from_str::<Value>(&text_of(&again)).unwrap()["linked"],
        false,
        "idempotent"
    );
    let refused =
        call("link_pull_request", json!({"work_item": item.to_string(), "pull_request": number}))
            .await;
    assert_eq!(refused.is_error, Some(true), "a self-link is refused");

    let shown = call("get_work_item", json!({"work_item": item.to_string()})).await;
    let shown: Value = serde_json::from_str(&text_of(&shown)).expect("JSON");
    assert_eq!(shown["pullRequests"], json!([format!("github:{REPO}#{pr}")]), "{shown:#}");
    assert_eq!(shown["usage"], Value::Null, "no transcript, no usage: {shown:#}");

    lab.comment(pr, OWNER, "Please rename the widget.");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert!(
        pasted.iter().any(|text| text.contains("Please rename the widget.")),
        "the linked PR's comment reaches the work item's session: {pasted:#?}"
    );

    let calls = lab.named("mcp.call");
    let tools_called: Vec<&str> = calls.iter().filter_map(|line| line["tool"].as_str()).collect();
    assert_eq!(
        tools_called,
        ["link_pull_request", "link_pull_request", "link_pull_request", "get_work_item"],
        "{calls:#?}"
    );
    assert_eq!(calls[2]["outcome"], "refused");
    client.cancel().await.expect("the client closes");
    cancel.cancel();
}

/// A raw initialize request with the given `Host` and `Origin`; the status.
fn initialize(addr: std::net::SocketAddr, host: &str, origin: Option<&str>) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_host_or_a_foreign_origin_is_refused_before_any_tool_runs() {
    let lab = Lab::start("").await;
    let cancel = CancellationToken::new();
    let addr = serve_mcp(&lab, &cancel).await;
    let (own, foreign_host, foreign_origin) = tokio::task::spawn_blocking(move || {
        (
            initialize(addr, &addr.to_string(), Some(&format!("http://{addr}"))),
            initialize(addr, &format!("evil.example:{}", addr.port()), None),
            initialize(addr, &addr.to_string(), Some("https://evil.example")),
        )
    })
    .await
    .unwrap();
    assert_eq!(own, 200);
    assert_eq!(foreign_host, 403, "DNS rebinding: the Host is not the service's");
    assert_eq!(foreign_origin, 403, "a web page elsewhere may not drive the tools");
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_serves_mcp_on_its_port_unless_disabled() {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let accept = [("Accept", "application/json, text/event-stream")];
    let on = crate::api::ApiService::start("", None).await;
    let answer = on.post("/mcp", &accept, init).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("the-loop"), "{answer:?}");
    on.stop().await;
    let off = crate::api::ApiService::start("service:\n  mcp:\n    enabled: false\n", None).await;
    assert_eq!(off.post("/mcp", &accept, init).await.status, 404);
    off.stop().await;
}
