//! `the-loop dashboard`: where the configured service's dashboard is, and with `--open`
//! the browser opened on it (`xdg-open`, else `open`).
//!
//! The URL is `http://<service.host>:<service.port>/`; an unspecified bind address
//! (`0.0.0.0`, `::`) is browsed at loopback. It is printed on stdout only when the
//! service answers there (`GET /api/v1/health`, which needs no token): exit 1 when
//! nothing (or something else) answers, 2 when the control plane is disabled
//! (`service.enabled: false`) or no opener is installed.

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::time::Duration;

use serde_json::json;

use crate::ExitStatus;
use crate::cli::{DashboardArgs, GlobalArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;

/// How long the service may take to answer its health probe.
const PROBE_PATIENCE: Duration = Duration::from_secs(3);

/// The programs that open a URL in the user's browser, tried in order.
const OPENERS: [&str; 2] = ["xdg-open", "open"];

pub fn run(
    args: DashboardArgs,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let service = &loaded.config.service;
    if !service.enabled {
        printer.error(
            "the control plane, and so the dashboard, is disabled (`service.enabled: false`)",
        );
        printer.hint(format_args!(
            "set `service.enabled: true` in `{}`, then `the-loop restart`",
            loaded.location.path.display()
        ));
        return Ok(ExitStatus::CouldNotRun);
    }
    let (authority, url) = address(&service.host, service.port);
    match probe(&authority) {
        Probe::Ours => {}
        Probe::Nothing => {
            printer.error(format_args!("the service is not running: nothing answers at {url}"));
            printer.hint("start it with `the-loop start`");
            return Ok(ExitStatus::Negative);
        }
        Probe::Other(first_line) => {
            printer.error(format_args!(
                "something other than the-loop's control plane answers at {url} ({first_line})"
            ));
            printer.hint(format_args!(
                "another program holds port {}: stop it, or set `service.port` to a free one and `the-loop restart`",
                service.port
            ));
            return Ok(ExitStatus::Negative);
        }
    }
    if global.json {
        printer.data(json!({ "url": url }));
    } else {
        printer.data(&url);
    }
    if args.open {
        return Ok(open(&url, printer));
    }
    Ok(ExitStatus::Success)
}

/// The `host:port` to connect to for a control plane bound to `host:port`, and the
/// dashboard's URL.
fn address(host: &str, port: u16) -> (String, String) {
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1".to_owned(),
        "::" | "[::]" => "[::1]".to_owned(),
        host if host.contains(':') && !host.starts_with('[') => format!("[{host}]"),
        host => host.to_owned(),
    };
    let authority = format!("{host}:{port}");
    let url = format!("http://{authority}/");
    (authority, url)
}

/// What answers the health probe at `authority`.
enum Probe {
    Ours,
    Nothing,
    /// An HTTP server that is not the control plane: its status line.
    Other(String),
}

fn probe(authority: &str) -> Probe {
    let Some(addr) = authority.to_socket_addrs().ok().and_then(|mut addrs| addrs.next()) else {
        return Probe::Nothing;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, PROBE_PATIENCE) else {
        return Probe::Nothing;
    };
    let _ = stream.set_read_timeout(Some(PROBE_PATIENCE));
    let request = format!(
        "GET /api/v1/health HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return Probe::Nothing;
    }
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.lines().next().unwrap_or("").trim().to_owned();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let healthy = serde_json::from_str::<serde_json::Value>(body)
        .is_ok_and(|health| health["status"] == "ok" && health["version"].is_string());
    match (status.split(' ').nth(1), healthy) {
        (Some("200"), true) => Probe::Ours,
        _ if status.is_empty() => Probe::Nothing,
        _ => Probe::Other(status),
    }
}

/// Opens `url` with the first opener installed.
fn open(url: &str, printer: Printer) -> ExitStatus {
    for opener in OPENERS {
        match std::process::Command::new(opener).arg(url).status() {
            Ok(status) if status.success() => return ExitStatus::Success,
            Ok(status) => {
                printer.error(format_args!("`{opener} {url}` failed ({status})"));
                printer.hint("open the URL above in a browser yourself");
                return ExitStatus::Negative;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                printer.error(format_args!("cannot run `{opener}`: {err}"));
                printer.hint("open the URL above in a browser yourself");
                return ExitStatus::Negative;
            }
        }
    }
    printer.error(format_args!(
        "cannot open a browser: neither `{}` nor `{}` is installed",
        OPENERS[0], OPENERS[1]
    ));
    printer.hint("install `xdg-utils`, or open the URL above in a browser yourself");
    ExitStatus::CouldNotRun
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_bind_address_is_browsed_at_loopback_and_ipv6_is_bracketed() {
        assert_eq!(address("127.0.0.1", 4114).1, "http://127.0.0.1:4114/");
        assert_eq!(address("0.0.0.0", 4114).1, "http://127.0.0.1:4114/");
        assert_eq!(address("::", 4114).1, "http://[::1]:4114/");
        assert_eq!(address("::1", 4114).1, "http://[::1]:4114/");
        assert_eq!(address("localhost", 4114).0, "localhost:4114");
    }
}
