//! The Messages API stand-in over HTTP: the stream and JSON forms, scripted tool uses,
//! errors and delays, side requests, `count_tokens`, refusals, the log and the HTTP
//! scripting form. What the real Claude Code does against it is in docs/simulator.md.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use loop_sim::ModelApi;
use loop_sim::model_api::{
    AnsweredBy, Matcher, ModelRequest, Reply, RequestKind, Rule, Side, Usage, total_usage,
};
use serde_json::{Value, json};

const KEY: &str = "sk-ant-api03-not-a-real-key";

async fn start() -> (ModelApi, reqwest::Client) {
    // reqwest is built without a bundled crypto provider; plain HTTP needs one all the same.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
    (ModelApi::start().await.unwrap(), reqwest::Client::new())
}

/// A request as Claude Code sends it: an API key, the version, `?beta=true`.
async fn post(
    http: &reqwest::Client,
    api: &ModelApi,
    path: &str,
    body: &Value,
) -> reqwest::Response {
    http.post(format!("{}{path}?beta=true", api.base_url()))
        .header("content-type", "application/json")
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "claude-code-20250219,oauth-2025-04-20")
        .header("user-agent", "claude-cli/2.1.197 (external, cli)")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// A turn: offers tools, last user message `text`, in conversation `session`.
fn turn(text: &str, session: &str, stream: bool) -> Value {
    json!({
        "model": "claude-opus-4-8",
        "max_tokens": 64000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "input_schema": {}}],
        "metadata": {"user_id": json!({"device_id": "d", "session_id": session}).to_string()},
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\ncontext\n</system-reminder>"},
                {"type": "text", "text": text}
            ]},
            {"role": "system", "content": "Available agent types …"}
        ]
    })
}

/// The server-sent events of a body, as (event name, data).
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            };
            (field("event:"), serde_json::from_str(&field("data:")).unwrap())
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

/// The text and tool inputs a stream's deltas make, per block index.
fn reassemble(events: &[(String, Value)]) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    for (_, data) in events.iter().filter(|(name, _)| name == "content_block_delta") {
        let index = data["index"].as_u64().unwrap() as usize;
        if blocks.len() <= index {
            blocks.resize(index + 1, String::new());
        }
        let delta = &data["delta"];
        let piece = delta["text"].as_str().or(delta["partial_json"].as_str()).unwrap();
        blocks[index].push_str(piece);
    }
    blocks
}

fn usage_of(value: &Value) -> Usage {
    serde_json::from_value(value.clone()).unwrap()
}

#[tokio::test]
async fn a_streamed_turn_comes_in_the_documented_order_and_its_deltas_make_the_text() {
    let (api, http) = start().await;
    let text = "A reply long enough to be cut into several text deltas by the stand-in.";
    api.script(Rule::when_contains("say hello", Reply::text(text))).unwrap();
    let response = post(&http, &api, "/v1/messages", &turn("say hello please", "s-1", true)).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let request_id = response.headers()["request-id"].to_str().unwrap().to_owned();
    let events = events(&response.text().await.unwrap());
    let order = names(&events);
    assert_eq!(order[..3], ["message_start", "content_block_start", "ping"]);
    assert!(order[3..order.len() - 3].iter().all(|name| *name == "content_block_delta"));
    assert!(order.len() - 6 > 1, "the text comes in several deltas: {order:?}");
    assert_eq!(order[order.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(reassemble(&events), [text]);
    let start = &events[0].1["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        (start["model"].as_str(), start["role"].as_str()),
        (Some("claude-opus-4-8"), Some("assistant"))
    );
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["usage"]["output_tokens"], 1);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    let record = &api.wait_for_turns(1).await[0];
    assert_eq!(record.request_id, request_id);
    assert_eq!(record.user_text.as_deref(), Some("say hello please"));
    assert_eq!(record.answered_by, Some(AnsweredBy::Rule { rule: 0, step: 0 }));
    let usage = record.usage.unwrap();
    assert_eq!(usage_of(&delta["usage"]), usage, "message_delta carries the cumulative usage");
    assert_eq!(usage.output_tokens, (text.len() as u64).div_ceil(4));
    assert_eq!(start["usage"]["input_tokens"], usage.input_tokens);
    assert_eq!(start["usage"]["cache_creation_input_tokens"], usage.cache_creation_input_tokens);
}

#[tokio::test]
async fn a_tool_use_streams_its_input_in_pieces_and_its_result_gets_the_next_reply() {
    let (api, http) = start().await;
    let input = json!({"command": "echo hi", "description": "Print hi to the terminal"});
    let rule = Rule::when_contains(
        "run echo",
        Reply::tool_use("Bash", input.clone()).preceded_by("Running it."),
    )
    .then(Reply::text("It printed hi."));
    api.script(rule).unwrap();
    let first = post(&http, &api, "/v1/messages", &turn("please run echo", "s-1", true)).await;
    let events = events(&first.text().await.unwrap());
    let tool_start = events
        .iter()
        .find(|(name, data)| {
            name == "content_block_start" && data["content_block"]["type"] == "tool_use"
        })
        .map(|(_, data)| data["content_block"].clone())
        .unwrap();
    let tool_use_id = tool_start["id"].as_str().unwrap().to_owned();
    assert!(tool_use_id.starts_with("toolu_"));
    assert_eq!(
        (tool_start["name"].clone(), tool_start["input"].clone()),
        (json!("Bash"), json!({}))
    );
    let blocks = reassemble(&events);
    assert_eq!(blocks[0], "Running it.");
    assert_eq!(
        serde_json::from_str::<Value>(&blocks[1]).unwrap(),
        input,
        "partial_json pieces make the input"
    );
    let input_deltas =
        events.iter().filter(|(_, d)| d["delta"]["type"] == "input_json_delta").count();
    assert!(input_deltas > 2, "the input comes in pieces");
    assert_eq!(events[events.len() - 2].1["delta"]["stop_reason"], "tool_use");

    // The next request brings the tool's result back, as Claude Code sends it.
    let mut next = turn("", "s-1", true);
    next["messages"] = json!([
        {"role": "user", "content": "please run echo"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": tool_use_id, "name": "Bash", "input": input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "hi", "is_error": false}]}
    ]);
    let second = post(&http, &api, "/v1/messages", &next).await;
    let events = self::events(&second.text().await.unwrap());
    assert_eq!(reassemble(&events), ["It printed hi."]);
    assert_eq!(events[events.len() - 2].1["delta"]["stop_reason"], "end_turn");
    let turns = api.wait_for_turns(2).await;
    assert_eq!(turns[1].tool_results[0].tool_use_id, tool_use_id);
    assert_eq!(turns[1].tool_results[0].content, "hi");
    assert_eq!(turns[1].answered_by, Some(AnsweredBy::Rule { rule: 0, step: 1 }));
    assert!(api.rules()[0].spent);
}

#[tokio::test]
async fn the_json_form_answers_the_whole_message_with_the_logged_usage() {
    let (api, http) = start().await;
    let usage = Usage {
        input_tokens: 11,
        output_tokens: 7,
        cache_creation_input_tokens: 300,
        cache_read_input_tokens: 200,
    };
    api.script(Rule::when_contains("sum", Reply::text("exact").with_usage(usage))).unwrap();
    let response = post(&http, &api, "/v1/messages", &turn("sum it", "s-1", false)).await;
    assert_eq!(response.status(), 200);
    let message: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["content"], json!([{"type": "text", "text": "exact"}]));
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(usage_of(&message["usage"]), usage);
    // An unscripted turn gets the default echo of its first line.
    let echo =
        post(&http, &api, "/v1/messages", &turn("fix the parser\nsecond line", "s-1", false)).await;
    let echo: Value = serde_json::from_str(&echo.text().await.unwrap()).unwrap();
    assert_eq!(echo["content"][0]["text"], "stand-in model: received \"fix the parser\"");
    let turns = api.wait_for_turns(2).await;
    assert_eq!(turns[0].usage, Some(usage));
    assert!(!turns[0].stream);
    assert_eq!(turns[1].answered_by, Some(AnsweredBy::Default));
    assert_eq!(usage_of(&echo["usage"]), turns[1].usage.unwrap());
}

#[tokio::test]
async fn a_usage_limit_answers_429_with_the_subscriber_headers() {
    let (api, http) = start().await;
    let resets = Timestamp::from_second(Timestamp::now().as_second() + 3600).unwrap();
    api.script(Rule::when_contains("limit", Reply::usage_limit(resets))).unwrap();
    api.script(Rule::when_contains(
        "busy",
        Reply::error(529, "overloaded_error", "Overloaded").with_header("x-should-retry", "true"),
    ))
    .unwrap();
    let limited = post(&http, &api, "/v1/messages", &turn("hit the limit", "s-1", true)).await;
    assert_eq!(limited.status(), 429);
    let header = |name: &str| limited.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
    let reset = resets.as_second().to_string();
    assert_eq!(header("anthropic-ratelimit-unified-status").as_deref(), Some("rejected"));
    assert_eq!(header("anthropic-ratelimit-unified-reset"), Some(reset.clone()));
    assert_eq!(header("anthropic-ratelimit-unified-5h-reset"), Some(reset));
    assert_eq!(
        header("anthropic-ratelimit-unified-representative-claim").as_deref(),
        Some("five_hour")
    );
    let retry_after: i64 = header("retry-after").unwrap().parse().unwrap();
    assert!((3590..=3600).contains(&retry_after), "{retry_after}");
    let request_id = header("request-id").unwrap();
    let body: Value = serde_json::from_str(&limited.text().await.unwrap()).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(body["request_id"], json!(request_id));
    let busy = post(&http, &api, "/v1/messages", &turn("busy now", "s-1", false)).await;
    assert_eq!(busy.status(), 529);
    assert_eq!(busy.headers()["x-should-retry"], "true");
    let body: Value = serde_json::from_str(&busy.text().await.unwrap()).unwrap();
    assert_eq!(body["error"], json!({"type": "overloaded_error", "message": "Overloaded"}));
    let turns = api.wait_for_turns(2).await;
    assert_eq!((turns[0].status, turns[0].error.as_deref()), (429, Some("rate_limit_error")));
    assert_eq!(turns[0].usage, None, "an error spends nothing");
    assert_eq!(turns[1].status, 529);
}

#[tokio::test]
async fn a_stream_can_break_with_an_error_event() {
    let (api, http) = start().await;
    api.script(
        Rule::when_contains(
            "x",
            Reply::stream_error("overloaded_error", "Overloaded").preceded_by("Half a"),
        )
        .always(),
    )
    .unwrap();
    let streamed = post(&http, &api, "/v1/messages", &turn("x", "s-1", true)).await;
    assert_eq!(streamed.status(), 200, "the stream had started");
    let events = events(&streamed.text().await.unwrap());
    assert_eq!(
        names(&events),
        ["message_start", "content_block_start", "ping", "content_block_delta", "error"]
    );
    assert_eq!(events[4].1["error"]["type"], "overloaded_error");
    let whole = post(&http, &api, "/v1/messages", &turn("x", "s-1", false)).await;
    assert_eq!(whole.status(), 529, "without a stream it is the error's own status");
    let turns = api.wait_for_turns(2).await;
    assert_eq!((turns[0].status, turns[0].error.as_deref()), (200, Some("overloaded_error")));
}

#[tokio::test]
async fn a_delay_holds_back_the_first_byte_and_a_pace_spaces_the_events() {
    let (api, http) = start().await;
    let delay = Duration::from_millis(300);
    let pace = Duration::from_millis(40);
    api.script(Rule::when_contains("slow", Reply::text("late").delayed(delay))).unwrap();
    api.script(Rule::when_contains("paced", Reply::text("step by step").paced(pace))).unwrap();
    let asked = Instant::now();
    let response = post(&http, &api, "/v1/messages", &turn("slow", "s-1", true)).await;
    // A lower bound only: the answer cannot come before the delay, however loaded.
    assert!(asked.elapsed() >= delay, "answered after {:?}", asked.elapsed());
    assert_eq!(reassemble(&events(&response.text().await.unwrap())), ["late"]);

    let asked = Instant::now();
    let mut response = post(&http, &api, "/v1/messages", &turn("paced", "s-1", true)).await;
    let mut chunks = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        chunks.push(String::from_utf8(chunk.to_vec()).unwrap());
    }
    let events = events(&chunks.concat());
    assert!(chunks.len() > 1, "the events come one by one");
    assert!(
        asked.elapsed() >= pace * (events.len() as u32 - 1),
        "paced events after {:?}",
        asked.elapsed()
    );
    assert_eq!(reassemble(&events), ["step by step"]);
}

#[tokio::test]
async fn side_requests_are_answered_apart_and_leave_the_rules_unused() {
    let (api, http) = start().await;
    api.script(Rule::new(Matcher::Any, Reply::text("scripted turn"))).unwrap();
    let title = json!({
        "model": "claude-haiku-4-5-20251001", "max_tokens": 32000, "stream": true, "tools": [],
        "system": [{"type": "text", "text": "Generate a concise, sentence-case title (3-7 words) that captures the main topic"}],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}},
        "metadata": {"user_id": json!({"session_id": "s-1"}).to_string()},
        "messages": [{"role": "user", "content": [{"type": "text", "text": "<session>\nsay hello please\n</session>\n\nWrite the title…"}]}]
    });
    let response = post(&http, &api, "/v1/messages", &title).await;
    let answer = reassemble(&events(&response.text().await.unwrap())).concat();
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap(),
        json!({"title": "Say hello please"})
    );
    let quota = json!({"model": "claude-sonnet-5", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]});
    let response = post(&http, &api, "/v1/messages", &quota).await;
    let message: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(message["content"][0]["text"], "ok");
    assert_eq!(api.rules()[0].served, 0, "side requests never use a rule");
    let response = post(&http, &api, "/v1/messages", &turn("now a turn", "s-1", true)).await;
    assert_eq!(reassemble(&events(&response.text().await.unwrap())), ["scripted turn"]);
    let log = api.requests();
    let kinds: Vec<(RequestKind, Option<Side>)> = log.iter().map(|r| (r.kind, r.side)).collect();
    assert_eq!(
        kinds,
        [
            (RequestKind::Side, Some(Side::Title)),
            (RequestKind::Side, Some(Side::Other)),
            (RequestKind::Turn, None)
        ]
    );
    assert_eq!(log[0].answered_by, Some(AnsweredBy::Side));
    assert_eq!(api.turns().len(), 1);
}

#[tokio::test]
async fn count_tokens_answers_the_estimate_of_the_request() {
    let (api, http) = start().await;
    let body = json!({"model": "claude-opus-4-8", "messages": [{"role": "user", "content": "x".repeat(400)}]});
    let response = post(&http, &api, "/v1/messages/count_tokens", &body).await;
    assert_eq!(response.status(), 200);
    let counted: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    let n = counted["input_tokens"].as_u64().unwrap();
    assert!((100..120).contains(&n), "about a token per four characters: {n}");
    let log = api.requests();
    assert_eq!(log[0].kind, RequestKind::CountTokens);
    assert_eq!(log[0].usage.map(|u| u.input_tokens), Some(n));
    assert!(api.turns().is_empty());
}

#[tokio::test]
async fn bad_requests_are_refused_in_anthropics_error_shape() {
    let (api, http) = start().await;
    let url = |path: &str| format!("{}{path}", api.base_url());
    let head = http.head(url("/")).send().await.unwrap();
    assert_eq!(head.status(), 200, "Claude Code's HEAD / at start");
    assert!(head.headers()["request-id"].to_str().unwrap().starts_with("req_"));
    let no_credential = http
        .post(url("/v1/messages"))
        .body(turn("x", "s", false).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(no_credential.status(), 401);
    let bearer = http
        .post(url("/v1/messages"))
        .bearer_auth("sk-ant-oat01-x")
        .body(turn("x", "s", false).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), 200, "a bearer token is a credential too");
    let missing_tokens =
        post(&http, &api, "/v1/messages", &json!({"model": "m", "messages": []})).await;
    assert_eq!(missing_tokens.status(), 400);
    let body: Value = serde_json::from_str(&missing_tokens.text().await.unwrap()).unwrap();
    assert_eq!(
        body["error"],
        json!({"type": "invalid_request_error", "message": "max_tokens: Field required"})
    );
    let not_json = http
        .post(url("/v1/messages"))
        .header("x-api-key", KEY)
        .body("{\"model\":")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400, "a malformed body is refused, never a panic");
    let unknown =
        http.get(url("/api/oauth/profile")).header("x-api-key", KEY).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    let body: Value = serde_json::from_str(&unknown.text().await.unwrap()).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error");
    assert!(body["request_id"].as_str().unwrap().starts_with("req_"));
    let log = api.requests();
    let seen: Vec<(&str, &str, u16)> =
        log.iter().map(|r| (r.method.as_str(), r.path.as_str(), r.status)).collect();
    assert_eq!(
        seen,
        [
            ("HEAD", "/", 200),
            ("POST", "/v1/messages", 401),
            ("POST", "/v1/messages", 200),
            ("POST", "/v1/messages", 400),
            ("POST", "/v1/messages", 400),
            ("GET", "/api/oauth/profile", 404)
        ]
    );
    assert_eq!(log[1].kind, RequestKind::Turn, "a refused turn is still known as one");
    assert!(log[2].headers.bearer_token && !log[2].headers.api_key);
    assert_eq!(log[4].kind, RequestKind::Other, "an unreadable body is no turn");
}

#[tokio::test]
async fn the_log_names_the_conversation_the_client_and_the_usage_it_must_add_up_to() {
    let (api, http) = start().await;
    let first = post(&http, &api, "/v1/messages", &turn("first", "s-1", true)).await;
    first.text().await.unwrap();
    let mut second = turn("second", "s-1", true);
    second["messages"] = json!([
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "text", "text": "stand-in model: received \"first\""}]},
        {"role": "user", "content": [{"type": "text", "text": "second", "cache_control": {"type": "ephemeral"}}]}
    ]);
    let response = http
        .post(format!("{}/v1/messages?beta=true", api.base_url()))
        .header("x-api-key", KEY)
        .header("X-Claude-Code-Session-Id", "s-1")
        .body(second.to_string())
        .send()
        .await
        .unwrap();
    response.text().await.unwrap();
    let turns = api.wait_for_turns(2).await;
    let record: &ModelRequest = &turns[0];
    assert_eq!(record.conversation.as_deref(), Some("s-1"));
    assert_eq!(turns[1].conversation.as_deref(), Some("s-1"), "from the session header");
    assert_eq!(record.query.as_deref(), Some("beta=true"));
    assert_eq!(record.model.as_deref(), Some("claude-opus-4-8"));
    assert_eq!(record.tools, ["Bash", "Read"]);
    assert!(record.stream);
    assert_eq!(record.headers.anthropic_version.as_deref(), Some("2023-06-01"));
    assert_eq!(record.headers.anthropic_beta, ["claude-code-20250219", "oauth-2025-04-20"]);
    assert_eq!(record.headers.user_agent.as_deref(), Some("claude-cli/2.1.197 (external, cli)"));
    assert!(record.headers.api_key);
    let (first, second) = (turns[0].usage.unwrap(), turns[1].usage.unwrap());
    assert!(
        first.cache_creation_input_tokens > 0 && first.cache_read_input_tokens == 0,
        "{first:?}"
    );
    assert_eq!(
        second.cache_read_input_tokens, first.cache_creation_input_tokens,
        "the second reads what the first wrote"
    );
    let sum = total_usage(&turns);
    assert_eq!(sum.output_tokens, first.output_tokens + second.output_tokens);
    assert_eq!(sum.total_input(), first.total_input() + second.total_input());
    let served = serde_json::to_string(&api.requests()).unwrap();
    assert!(!served.contains(KEY), "the log never keeps a credential");
    api.clear_requests();
    assert!(api.requests().is_empty());
}

#[tokio::test]
async fn another_process_scripts_and_reads_over_the_stand_in_paths() {
    let (api, http) = start().await;
    let rules = format!("{}/_stand-in/rules", api.base_url());
    let rule = json!({
        "when": {"contains": "run it"},
        "replies": [
            {"kind": "tool_use", "name": "Bash", "input": {"command": "echo hi"}, "id": "toolu_scripted"},
            {"kind": "text", "text": "done"}
        ]
    });
    let added = http.post(&rules).body(rule.to_string()).send().await.unwrap();
    assert_eq!(added.status(), 201);
    assert_eq!(
        serde_json::from_str::<Value>(&added.text().await.unwrap()).unwrap(),
        json!({"index": 0})
    );
    let refused = http
        .post(&rules)
        .body(json!({"when": "any", "replies": []}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("at least one reply"));
    let garbled = http.post(&rules).body("{").send().await.unwrap();
    assert_eq!(garbled.status(), 400);
    let response = post(&http, &api, "/v1/messages", &turn("run it", "s-9", false)).await;
    let message: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(message["content"][0]["id"], "toolu_scripted");
    let listed: Value =
        serde_json::from_str(&http.get(&rules).send().await.unwrap().text().await.unwrap())
            .unwrap();
    assert_eq!((listed[0]["served"].clone(), listed[0]["spent"].clone()), (json!(1), json!(false)));
    let requests = format!("{}/_stand-in/requests", api.base_url());
    let log: Value =
        serde_json::from_str(&http.get(&requests).send().await.unwrap().text().await.unwrap())
            .unwrap();
    assert_eq!(log.as_array().unwrap().len(), 1, "scripting requests are not logged");
    assert_eq!(log[0]["kind"], "turn");
    assert_eq!(log[0]["conversation"], "s-9");
    assert_eq!(http.delete(&requests).send().await.unwrap().status(), 204);
    assert_eq!(http.delete(&rules).send().await.unwrap().status(), 204);
    assert!(api.requests().is_empty() && api.rules().is_empty());
    api.shutdown().await;
}
