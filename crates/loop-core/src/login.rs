//! GitHub user names as the-loop compares them.
//!
//! `routing.authorizedUsers`, collaborator rosters and `add-collaborator @x` all hold
//! logins. A login is validated once, where it enters (config, comment, CLI), and then
//! compared exactly: authorization is a case-sensitive match, as in the reference.

use std::fmt;
use std::str::FromStr;

/// Why a string is not a GitHub login.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{input}` is not a GitHub login: expected letters, digits and single inner hyphens, at most 39 characters (bots end in `[bot]`)"
)]
pub struct LoginError {
    pub input: String,
}

/// A GitHub login such as `octocat` or `dependabot[bot]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Login(String);

impl Login {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Login {
    type Err = LoginError;

    fn from_str(input: &str) -> Result<Self, LoginError> {
        let name = input.strip_suffix("[bot]").unwrap_or(input);
        let valid = !name.is_empty()
            && name.len() <= 39
            && !name.starts_with('-')
            && !name.ends_with('-')
            && !name.contains("--")
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if valid {
            Ok(Login(input.to_owned()))
        } else {
            Err(LoginError { input: input.to_owned() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_people_and_bots() {
        for ok in ["octocat", "a", "mona-lisa", "dependabot[bot]", "A1-b2"] {
            assert_eq!(ok.parse::<Login>().unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_what_github_would_not_issue() {
        let long = "a".repeat(40);
        for bad in ["", "@octocat", "-x", "x-", "a--b", "a b", "a/b", "[bot]", long.as_str()] {
            assert!(bad.parse::<Login>().is_err(), "{bad:?}");
        }
    }
}
