//! The dashboard's files from the real service: the page at `/` and every script it
//! loads, transitively, served with their types and a strict Content-Security-Policy;
//! served without the token (the page asks for it), but not to a rebound `Host`; never
//! audited.

use std::collections::BTreeSet;

use crate::api::ApiService;

/// The local paths `text` refers to: `src="/…"`, `href="/…"` and `from './x.js'`.
fn references(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (open, close, base) in
        [("src=\"/", '"', "/"), ("href=\"/", '"', "/"), ("from './", '\'', "/assets/")]
    {
        for (at, _) in text.match_indices(open) {
            let rest = &text[at + open.len()..];
            if let Some(end) = rest.find(close) {
                found.push(format!("{base}{}", &rest[..end]));
            }
        }
    }
    found
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[tokio::test]
async fn the_page_and_every_script_it_loads_are_served_under_a_strict_policy() {
    let api = ApiService::start("", None).await;
    let mut seen = BTreeSet::new();
    let mut next = vec!["/".to_owned()];
    while let Some(path) = next.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let answer = api.get(&path, &[]).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        let policy = header(&answer.head, "content-security-policy").unwrap_or("");
        for directive in ["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert_eq!(header(&answer.head, "x-content-type-options"), Some("nosniff"), "{path}");
        let kind = header(&answer.head, "content-type").unwrap_or("");
        let expected = match path.rsplit_once('.').map(|(_, ext)| ext) {
            Some("js") => "text/javascript",
            Some("css") => "text/css",
            Some("svg") => "image/svg+xml",
            _ => "text/html",
        };
        assert!(kind.starts_with(expected), "{path}: {kind}");
        // No script, style or font from elsewhere, and no inline script to allow.
        let body = answer.body.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!body.contains("http://") && !body.contains("https://"), "{path}");
        if expected == "text/html" {
            assert!(!answer.body.contains("<script>"), "no inline script: {path}");
            assert!(!answer.body.contains("style="), "no inline style: {path}");
        }
        next.extend(references(&answer.body));
    }
    assert!(seen.len() >= 8, "the page and its modules: {seen:?}");
    assert_eq!(api.get("/assets/nothing.js", &[]).await.status, 404);
    let site = api.stop().await;
    assert!(site.events_named("api.request").is_empty(), "the dashboard's files are not audited");
}

#[tokio::test]
async fn the_files_need_no_token_but_the_api_they_call_does_and_a_rebound_host_gets_nothing() {
    let api = ApiService::start("", Some("s3cret-token")).await;
    for path in ["/", "/assets/app.js", "/assets/style.css"] {
        assert_eq!(api.get(path, &[]).await.status, 200, "{path}");
    }
    assert_eq!(api.get("/api/v1/work-items", &[]).await.status, 401);
    let rebound = api.get("/", &[("Host", "evil.example:4114")]).await;
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    api.stop().await;
}
