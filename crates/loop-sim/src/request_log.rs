//! Every API request the simulated GitHub answered, with counts per endpoint and status.
//!
//! Endpoints are named by method and OpenAPI path template
//! (`GET /repos/{owner}/{repo}/issues`), so tests and benchmarks can say "a quiet poll cycle
//! is S requests, all 304" and the contract tests can look each one up in GitHub's OpenAPI
//! description. Scripting requests under `/_sim/` are not logged.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestRecord {
    /// `GET`, `POST`, …
    pub method: String,
    /// The OpenAPI path template, or `/graphql`; the raw path when no route matched.
    pub endpoint: String,
    /// The path as requested (with `/api/v3` for the Enterprise layout).
    pub path: String,
    /// The query parameters, decoded (`per_page`, `page`, `since`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    pub status: u16,
    /// The `X-GitHub-Api-Version` the request asked for, if any.
    pub api_version: Option<String>,
    /// The `Accept` header, if any.
    pub accept: Option<String>,
}

/// The requests answered so far (or since the log was last cleared).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestLog {
    pub records: Vec<RequestRecord>,
}

impl RequestLog {
    pub fn total(&self) -> usize {
        self.records.len()
    }

    /// `"METHOD endpoint"` → status → count.
    pub fn counts(&self) -> BTreeMap<String, BTreeMap<u16, u64>> {
        let mut counts: BTreeMap<String, BTreeMap<u16, u64>> = BTreeMap::new();
        for r in &self.records {
            *counts
                .entry(format!("{} {}", r.method, r.endpoint))
                .or_default()
                .entry(r.status)
                .or_default() += 1;
        }
        counts
    }

    /// Requests answered with `status`, over all endpoints.
    pub fn with_status(&self, status: u16) -> usize {
        self.records.iter().filter(|r| r.status == status).count()
    }

    /// Requests to `"METHOD endpoint"` (any status).
    pub fn to_endpoint(&self, endpoint: &str) -> usize {
        self.records.iter().filter(|r| format!("{} {}", r.method, r.endpoint) == endpoint).count()
    }
}

/// A table: one line per endpoint and status, then the total.
impl fmt::Display for RequestLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (endpoint, statuses) in self.counts() {
            for (status, count) in statuses {
                writeln!(f, "{count:>6}  {status}  {endpoint}")?;
            }
        }
        write!(f, "{:>6}  total ({} answered 304)", self.total(), self.with_status(304))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_group_by_endpoint_and_status() {
        let record = |endpoint: &str, status| RequestRecord {
            method: "GET".into(),
            endpoint: endpoint.into(),
            path: String::new(),
            query: BTreeMap::new(),
            status,
            api_version: None,
            accept: None,
        };
        let log = RequestLog {
            records: vec![
                record("/a", 304),
                record("/a", 304),
                record("/a", 200),
                record("/b", 200),
            ],
        };
        assert_eq!(log.counts()["GET /a"][&304], 2);
        assert_eq!(log.with_status(200), 2);
        assert_eq!(log.to_endpoint("GET /a"), 3);
        assert_eq!(
            log.to_string(),
            "     1  200  GET /a\n     2  304  GET /a\n     1  200  GET /b\n     4  total (2 answered 304)"
        );
    }
}
