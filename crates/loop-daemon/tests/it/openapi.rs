//! `GET /api/openapi.json` against the real service: the document the route sets
//! generate describes every route served, and each operation it names is served.

use serde_json::Value;

use crate::api::{ApiService, json};

#[tokio::test]
async fn every_documented_operation_is_served_and_the_document_names_the_stream_mcp_and_health() {
    let api = ApiService::start("", None).await;
    let answer = api.get("/api/openapi.json", &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let document = json(&answer);
    assert!(document["openapi"].as_str().unwrap().starts_with("3."), "{document:#}");
    let paths = document["paths"].as_object().expect("paths");
    for path in ["/api/v1/health", "/api/v1/stream", "/mcp", "/api/openapi.json", "/api/v1/events"]
    {
        assert!(paths.contains_key(path), "{path} is not described: {:?}", paths.keys());
    }
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("a path item") {
            let method = method.to_ascii_uppercase();
            // A query no route takes: every route answers at once (the stream too, 400).
            let probe = format!("{path}?openapi-probe=1");
            let answer = match method.as_str() {
                "GET" => api.get(&probe, &[]).await,
                "POST" => api.post(&probe, &[], "{}").await,
                _ => crate::common::request(api.addr, &method, &probe, &[], b"").await,
            };
            let fallback = answer.status == 404 && answer.body.contains("no such route");
            assert!(!fallback && answer.status != 405, "{method} {path} is not served: {answer:?}");
            let statuses = operation["responses"].as_object().expect("responses");
            assert!(
                statuses.contains_key(&answer.status.to_string()),
                "{method} {path} answered {} which it does not describe: {:?}",
                answer.status,
                statuses.keys()
            );
            operations += 1;
        }
    }
    assert!(operations >= 20, "{operations} operations");
    let refusal = &document["components"]["schemas"]["Detail"];
    assert_eq!(refusal["required"], Value::from(vec!["detail"]), "{refusal:#}");
    api.stop().await;
}
