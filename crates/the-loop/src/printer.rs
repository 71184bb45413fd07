//! The only place that writes to the terminal.
//!
//! stdout carries data (listings, `--json`, `config show`); stderr carries messages
//! (`error:`, `warning:`, `hint:`, progress). `-q` silences everything but errors.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Display;

use loop_core::Hint;

/// How much the user asked to hear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

#[derive(Debug, Clone, Copy)]
pub struct Printer {
    verbosity: Verbosity,
}

impl Printer {
    pub fn new(quiet: bool, verbose: u8) -> Self {
        let verbosity = match (quiet, verbose) {
            (true, _) => Verbosity::Quiet,
            (false, 0) => Verbosity::Normal,
            (false, _) => Verbosity::Verbose,
        };
        Self { verbosity }
    }

    /// Data for stdout: always printed, whatever the verbosity.
    pub fn data(&self, text: impl Display) {
        println!("{text}");
    }

    /// A human message on stderr (progress, outcomes), silenced by `-q`.
    pub fn info(&self, text: impl Display) {
        if self.verbosity >= Verbosity::Normal {
            eprintln!("{text}");
        }
    }

    pub fn warning(&self, text: impl Display) {
        if self.verbosity >= Verbosity::Normal {
            eprintln!("warning: {text}");
        }
    }

    pub fn error(&self, text: impl Display) {
        eprintln!("error: {text}");
    }

    pub fn hint(&self, text: impl Display) {
        eprintln!("hint: {text}");
    }

    /// Reports an error that stopped a verb: the message, each cause, then the hint of the
    /// first error in the chain that has one.
    pub fn report(&self, err: &anyhow::Error) {
        self.error(err);
        for cause in err.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        if let Some(hint) = err.chain().find_map(hint_of) {
            self.hint(hint);
        }
    }
}

/// The hint of one error, when its type has one ([`Hint`]): every library error type a
/// verb can end with is listed here, the one place that knows them all.
fn hint_of(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    macro_rules! hinted {
        ($($ty:ty),* $(,)?) => {
            $(if let Some(err) = err.downcast_ref::<$ty>() {
                return err.hint();
            })*
        };
    }
    hinted!(
        loop_daemon::receiver::ReceiverError,
        loop_daemon::poller::PollerError,
        loop_daemon::agent::AgentError,
        loop_daemon::agent::LinkError,
        loop_github::GithubError,
        loop_github::token::TokenError,
        loop_github::signature::SignatureError,
        loop_sessions::SessionError,
        loop_sessions::TmuxError,
        loop_sessions::HarnessError,
        loop_sessions::registry::RegistryError,
        loop_sessions::workspace::WorkspaceError,
        loop_sessions::trust::TrustError,
        loop_sessions::plugin::PluginError,
    );
    None
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_library_errors_hint_is_found_through_the_chain_and_is_not_in_its_message() {
        let tmux = loop_sessions::TmuxError::NotInstalled { binary: PathBuf::from("tmux") };
        assert!(!tmux.to_string().contains("hint"), "{tmux}");
        let err = anyhow::Error::new(loop_sessions::SessionError::from(tmux))
            .context("cannot spawn the session");
        let hint = err.chain().find_map(hint_of).expect("a hint");
        assert!(hint.contains("apt install tmux"), "{hint}");
    }

    #[test]
    fn an_error_without_a_hint_has_none() {
        let err = anyhow::anyhow!("plain");
        assert_eq!(err.chain().find_map(hint_of), None);
    }
}
