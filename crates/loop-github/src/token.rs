//! Where the API token comes from, and the type that keeps it out of logs.
//!
//! The token is looked up in the environment variables named by
//! `integrations.github.api.tokenEnv` (default `GH_TOKEN`, then `GITHUB_TOKEN`), else by
//! running `gh auth token [--hostname H]` once. The client asks again once when GitHub
//! answers 401. Reading the environment and running `gh` are the only IO here; both sit
//! behind [`TokenSource`], so tests hand it an env map and a fake `gh` script.
//!
//! This module must never print, log or format a token's value: [`Token`]'s `Debug` and
//! `Display` redact it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

/// The environment variables consulted when the config names none.
pub const DEFAULT_TOKEN_ENV: [&str; 2] = ["GH_TOKEN", "GITHUB_TOKEN"];

/// How long `gh auth token` may take before it counts as not answering.
const GH_TIMEOUT: Duration = Duration::from_secs(10);

/// A GitHub API token. Its value is reachable only through [`Token::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token value; surrounding whitespace is dropped.
    pub fn new(value: &str) -> Self {
        Token(value.trim().to_owned())
    }

    /// The secret itself, for the `Authorization` header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// No way of finding a token worked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no GitHub token for `{host}`: none of the environment variables {} is set, and `gh auth token` {gh_outcome}",
    env_names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
)]
pub struct TokenError {
    /// The host the token was wanted for.
    pub host: String,
    /// The environment variables that were consulted, in order.
    pub env_names: Vec<String>,
    /// What happened when `gh auth token` was run (never its output).
    pub gh_outcome: String,
}

impl loop_core::Hint for TokenError {
    fn hint(&self) -> Option<String> {
        Some(format!(
            "export `GH_TOKEN`, run `gh auth login{}`, or name the variable holding your token in `integrations.github.api.tokenEnv`",
            gh_hostname_hint(&self.host)
        ))
    }
}

fn gh_hostname_hint(host: &str) -> String {
    if host == loop_core::refs::DEFAULT_HOST {
        String::new()
    } else {
        format!(" --hostname {host}")
    }
}

/// Finds the token for one GitHub host.
#[derive(Debug, Clone)]
pub struct TokenSource {
    host: String,
    env_names: Vec<String>,
    /// The values of `env_names` captured when the source was built (as [`Token`]s, so
    /// `Debug` redacts them); names that were unset are absent.
    env: BTreeMap<String, Token>,
    gh_program: OsString,
}

impl TokenSource {
    /// A source reading `env_names` from `env` (a snapshot of the environment), falling back
    /// to `gh` on `PATH`. `host` is `github.com` or an Enterprise host.
    pub fn new(
        host: &str,
        env_names: &[String],
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        let env_names = if env_names.is_empty() {
            DEFAULT_TOKEN_ENV.iter().map(|s| (*s).to_owned()).collect()
        } else {
            env_names.to_vec()
        };
        let env = env
            .into_iter()
            .filter(|(name, _)| env_names.contains(name))
            .map(|(name, value)| (name, Token::new(&value)))
            .collect();
        Self { host: host.to_owned(), env_names, env, gh_program: OsString::from("gh") }
    }

    /// A source reading `env_names` from this process's environment.
    pub fn from_process_env(host: &str, env_names: &[String]) -> Self {
        let names: Vec<String> = if env_names.is_empty() {
            DEFAULT_TOKEN_ENV.iter().map(|s| (*s).to_owned()).collect()
        } else {
            env_names.to_vec()
        };
        let env: Vec<(String, String)> = names
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
            .collect();
        Self::new(host, &names, env)
    }

    /// Runs `program` instead of `gh` (tests point it at a script; operators at
    /// `integrations.github.cli.binary`).
    pub fn with_gh_program(mut self, program: impl Into<OsString>) -> Self {
        self.gh_program = program.into();
        self
    }

    /// The host this source finds tokens for.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The first non-empty configured environment variable, else `gh auth token`.
    pub async fn token(&self) -> Result<Token, TokenError> {
        for name in &self.env_names {
            if let Some(token) = self.env.get(name).filter(|t| !t.expose().is_empty()) {
                return Ok(token.clone());
            }
        }
        match self.ask_gh().await {
            Ok(token) => Ok(token),
            Err(gh_outcome) => Err(TokenError {
                host: self.host.clone(),
                env_names: self.env_names.clone(),
                gh_outcome,
            }),
        }
    }

    /// Runs `gh auth token [--hostname H]`; the error says what happened, without output.
    async fn ask_gh(&self) -> Result<Token, String> {
        let mut command = tokio::process::Command::new(&self.gh_program);
        command.args(["auth", "token"]);
        if self.host != loop_core::refs::DEFAULT_HOST {
            command.args(["--hostname", &self.host]);
        }
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = match tokio::time::timeout(GH_TIMEOUT, command.output()).await {
            Err(_) => return Err(format!("did not answer within {}s", GH_TIMEOUT.as_secs())),
            Ok(Err(err)) => {
                return Err(format!("could not be run ({err})"));
            }
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            return Err(format!("failed ({})", output.status));
        }
        let value = String::from_utf8_lossy(&output.stdout);
        if value.trim().is_empty() {
            return Err("printed no token".to_owned());
        }
        Ok(Token::new(&value))
    }
}

#[cfg(test)]
mod tests {
    use loop_core::Hint as _;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn token_never_formats_its_value() {
        let token = Token::new(" ghp_secret\n");
        assert_eq!(token.expose(), "ghp_secret");
        assert!(!format!("{token:?} {token}").contains("ghp_secret"));
        let source = TokenSource::new("github.com", &[], env(&[("GH_TOKEN", "ghp_secret")]));
        assert!(!format!("{source:?}").contains("ghp_secret"));
    }

    #[tokio::test]
    async fn env_names_are_tried_in_order_and_empty_values_skipped() {
        let names = ["A".to_owned(), "B".to_owned(), "C".to_owned()];
        let source =
            TokenSource::new("github.com", &names, env(&[("A", " "), ("B", "b"), ("C", "c")]))
                .with_gh_program("/nonexistent/gh");
        assert_eq!(source.token().await.unwrap().expose(), "b");
    }

    #[tokio::test]
    async fn no_token_error_names_every_way_to_provide_one() {
        let source = TokenSource::new("ghe.example.com", &[], env(&[("OTHER", "x")]))
            .with_gh_program("/nonexistent/gh");
        let err = source.token().await.unwrap_err();
        let (message, hint) = (err.to_string(), err.hint().unwrap_or_default());
        for needle in ["`GH_TOKEN`, `GITHUB_TOKEN`", "could not be run"] {
            assert!(message.contains(needle), "{needle} missing from: {message}");
        }
        for needle in ["gh auth login --hostname ghe.example.com", "tokenEnv"] {
            assert!(hint.contains(needle), "{needle} missing from the hint: {hint}");
        }
        assert!(!message.contains("hint"), "the hint is not part of the message: {message}");
    }
}
