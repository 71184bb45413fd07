//! The only place that writes to the terminal.
//!
//! stdout carries data (listings, `--json`, `config show`); stderr carries messages
//! (`error:`, `warning:`, `hint:`, progress). `-q` silences everything but errors.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Display;

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

    /// Reports an error that stopped a verb: the message, each cause, then any hints.
    pub fn report(&self, err: &anyhow::Error) {
        self.error(err);
        for cause in err.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
    }
}
