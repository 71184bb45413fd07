//! What can go wrong talking to GitHub, sorted by what the caller may conclude.
//!
//! The seeds' rule is "never act on doubt": only [`GithubError::NotFound`] is a definite
//! answer that something does not exist. Everything else means "unknown" and must not
//! lead to closing, forgetting or ending anything.

use crate::token::TokenError;

/// A failed exchange with the GitHub API.
#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// GitHub answered 404: the thing does not exist (or is invisible to this token).
    #[error("GitHub has no `{url}` (404)")]
    NotFound { url: String },

    /// GitHub refused the token even after it was asked for again.
    #[error("GitHub refused the token for `{url}` (401)")]
    Unauthorized { url: String },

    /// The token works but may not do this (403 without a rate-limit reason).
    #[error("GitHub forbids `{method} {url}` ({status}): {message}")]
    Permission { method: String, url: String, status: u16, message: String },

    /// GitHub says the thing is gone for good (410): for a repository's issues, the
    /// Issues feature is turned off. A lasting condition, not a transient one.
    #[error("GitHub says `{url}` is gone (410): {message}")]
    Gone { url: String, message: String },

    /// GitHub refused the request itself (422 and other 4xx).
    #[error("GitHub rejected `{method} {url}` ({status}): {message}")]
    Rejected { method: String, url: String, status: u16, message: String },

    /// The answer may come another time: 5xx, rate limits, timeouts, broken connections,
    /// after the retries were spent.
    #[error("GitHub did not answer `{method} {url}` after {attempts} attempt(s): {reason}")]
    Transient { method: String, url: String, attempts: u32, reason: String },

    /// GitHub answered, but not with what its API promises.
    #[error("GitHub's answer to `{url}` is malformed: {reason}")]
    Malformed { url: String, reason: String },

    /// GitHub answered a GraphQL query with errors about the query itself — a field this
    /// server does not have (an older Enterprise), a scope the token lacks. Asking the
    /// same again soon gets the same answer.
    #[error("GitHub refused the GraphQL query to `{url}`: {messages}")]
    QueryRefused { url: String, messages: String },

    /// No token could be found.
    #[error(transparent)]
    Token(#[from] TokenError),

    /// The configured base URL cannot be used.
    #[error("`{base_url}` is not a usable GitHub API base URL: {reason}")]
    BaseUrl { base_url: String, reason: String },

    /// A ref on another host was handed to this host's client.
    #[error("`{item}` is on `{item_host}`, but this client talks to `{client_host}`")]
    WrongHost { item: String, item_host: String, client_host: String },

    /// The HTTP client could not be built (TLS set-up).
    #[error("could not set up the HTTP client")]
    Setup(#[source] reqwest::Error),
}

impl loop_core::Hint for GithubError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::Unauthorized { .. } => Some(
                "the token in `GH_TOKEN`/`GITHUB_TOKEN` or from `gh auth token` has expired or been revoked"
                    .to_owned(),
            ),
            Self::BaseUrl { .. } => Some(
                "set `integrations.github.api.baseUrl` to e.g. `https://ghe.example.com/api/v3`"
                    .to_owned(),
            ),
            Self::Token(err) => err.hint(),
            _ => None,
        }
    }
}

impl GithubError {
    /// Whether GitHub definitely said "does not exist" (the only answer that may be acted
    /// on as absence).
    pub fn is_not_found(&self) -> bool {
        matches!(self, GithubError::NotFound { .. })
    }

    /// Whether GitHub refused the query itself (not worth asking again soon).
    pub fn is_query_refused(&self) -> bool {
        matches!(self, GithubError::QueryRefused { .. })
    }

    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, GithubError::Transient { .. })
    }
}
