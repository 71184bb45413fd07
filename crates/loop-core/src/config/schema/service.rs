//! `service`: the control plane's port, exposure, token, CORS, MCP and event stream.

use saphyr::MarkedYamlOwned as Node;
use serde::Serialize;

use super::strings;
use crate::config::ProblemKind;
use crate::config::read::{Block, Diagnostics, Section, Value, bad_value, integer_at_least, join};

/// `service`: the control plane — the HTTP API, its event stream and the dashboard —
/// on a port of its own, in the service process beside the ingresses.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceConfig {
    /// Whether `the-loop start` serves the control plane beside its ingresses.
    pub enabled: bool,
    /// Bind address; anything but loopback needs `exposed` and a token.
    pub host: String,
    pub port: u16,
    /// Opt-in to binding beyond loopback (which then also needs the token).
    pub exposed: bool,
    /// The *name* of the env var holding the bearer token; when the variable is set,
    /// every route but health needs `Authorization: Bearer <token>`.
    pub token_env: String,
    pub cors: CorsConfig,
    pub mcp: McpConfig,
    pub stream: StreamConfig,
}

impl ServiceConfig {
    /// Whether `host` names this machine's loopback interface only.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }

    /// Where a client on this machine reaches the service: `http://host:port` (an IPv6
    /// address in brackets; an unspecified bind address as loopback).
    pub fn local_url(&self) -> String {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        let host = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
            Ok(ip) if ip.is_unspecified() => "[::1]".to_owned(),
            Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => bare.to_owned(),
        };
        format!("http://{host}:{}", self.port)
    }
}

/// `localhost`, or an IPv4/IPv6 loopback address (`[::1]` with or without brackets).
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Section for ServiceConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let service = Self {
            enabled: b.field("enabled", || true),
            host: b.field("host", || "127.0.0.1".to_owned()),
            port: b.field("port", || 4114),
            exposed: b.field("exposed", || false),
            token_env: b.field("tokenEnv", || "THE_LOOP_SERVICE_TOKEN".to_owned()),
            cors: b.section("cors"),
            mcp: b.section("mcp"),
            stream: b.section("stream"),
        };
        if !service.is_loopback() && !service.exposed {
            let path = join(b.path(), "host");
            b.diags().error(
                &path,
                None,
                ProblemKind::BadValue,
                format!(
                    "`{}` is beyond loopback: set `service.exposed: true` (and export the token `service.tokenEnv` names) to serve other machines, or bind 127.0.0.1",
                    service.host
                ),
            );
        }
        service
    }
}

/// `service.cors`: which other web origins may call the API from a browser.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CorsConfig {
    /// Exact origins (`scheme://host[:port]`, or `*`); empty: no cross-origin access.
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub allow_credentials: bool,
    /// Answer Chromium's private-network preflight (a public page reaching loopback).
    pub allow_private_network: bool,
}

impl Section for CorsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let cors = Self {
            allow_origins: b.field_by("allowOrigins", Vec::new, read_origins),
            allow_methods: b.field_by(
                "allowMethods",
                || strings(&["GET", "POST", "OPTIONS"]),
                http_tokens("a method such as `GET`"),
            ),
            allow_headers: b.field_by(
                "allowHeaders",
                || strings(&["Accept", "Content-Type", "Authorization", "Last-Event-ID"]),
                http_tokens("a header name such as `Content-Type`"),
            ),
            allow_credentials: b.field("allowCredentials", || false),
            allow_private_network: b.field("allowPrivateNetwork", || true),
        };
        if cors.allow_credentials && cors.allow_origins.iter().any(|o| o == "*") {
            let path = join(b.path(), "allowCredentials");
            b.diags().error(
                &path,
                None,
                ProblemKind::BadValue,
                "`true` with `*` in `allowOrigins` would let every web page act with the browser's credentials: list the exact origins".to_owned(),
            );
        }
        cors
    }
}

/// A list of HTTP tokens (method or header names: letters, digits and `!#$%&'*+-.^_`|~`).
fn http_tokens(
    expected: &'static str,
) -> impl FnOnce(&Node, &str, &mut Diagnostics) -> Option<Vec<String>> {
    move |node, path, diags| {
        let items: Vec<String> = Value::read(node, path, diags)?;
        let saphyr::YamlDataOwned::Sequence(nodes) = &node.data else { return Some(items) };
        let is_token = |text: &str| {
            !text.is_empty()
                && text.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
        };
        let mut tokens = Vec::with_capacity(items.len());
        for (i, (token, item)) in items.into_iter().zip(nodes).enumerate() {
            if is_token(&token) {
                tokens.push(token);
            } else {
                bad_value(
                    item,
                    &format!("{path}[{i}]"),
                    diags,
                    format!("expected {expected}, got {token:?}"),
                );
            }
        }
        Some(tokens)
    }
}

/// `allowOrigins`: each `*` or an origin `http(s)://host[:port]` — no path, no trailing
/// slash (a browser's `Origin` never has one, so such an entry could never match).
fn read_origins(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<String>> {
    let items: Vec<String> = Value::read(node, path, diags)?;
    let saphyr::YamlDataOwned::Sequence(nodes) = &node.data else { return Some(items) };
    let mut origins = Vec::with_capacity(items.len());
    for (i, (origin, item)) in items.into_iter().zip(nodes).enumerate() {
        if origin == "*" || is_origin(&origin) {
            origins.push(origin);
        } else {
            bad_value(
                item,
                &format!("{path}[{i}]"),
                diags,
                format!(
                    "expected an origin such as `https://example.com` or `http://127.0.0.1:8080` (scheme, host, optional port; no path), got {origin:?}"
                ),
            );
        }
    }
    Some(origins)
}

/// `http(s)://host[:port]` and nothing after it (an IPv6 host in brackets).
fn is_origin(text: &str) -> bool {
    let Some(authority) = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((ip, rest)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => ("ipv6", rest),
            _ => return false,
        },
        None => authority.split_at(authority.find(':').unwrap_or(authority.len())),
    };
    let port_ok = match port {
        "" => true,
        port => port.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()).is_some_and(|p| p > 0),
    };
    port_ok
        && !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c))
}

/// `service.mcp`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpConfig {
    /// Serve the MCP endpoint at `/mcp`.
    pub enabled: bool,
}

impl Section for McpConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true) }
    }
}

/// `service.stream`: `GET /api/v1/stream`, the server-sent event stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamConfig {
    pub enabled: bool,
    /// Concurrent subscribers; one more is answered 503 with `Retry-After`.
    pub max_subscribers: u32,
    /// Seconds between keep-alive comments on an idle stream.
    pub keep_alive_seconds: u64,
}

impl Section for StreamConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            max_subscribers: b.field_by("maxSubscribers", || 8, integer_at_least(1)),
            keep_alive_seconds: b.field_by("keepAliveSeconds", || 15, integer_at_least(1)),
        }
    }
}

default_from_nothing!(ServiceConfig, CorsConfig, StreamConfig);
