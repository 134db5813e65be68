//! leaderwatch measures etcd leader changes for the dlock lock service.
//!
//! The data path, one module per step, lands issue by issue:
//! probe -> round -> counts -> windows -> record -> report.
//! This file owns the crate-wide [`Error`] and its mapping to process exit codes.

pub mod cli;
pub mod clock;
pub mod counts;
pub mod member;
pub mod metrics;
pub mod probe;

/// Everything that can end a leaderwatch command. Each layer adds its variants here.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or a value in it is wrong; nothing was started.
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit codes, documented in README.md ("Exit codes").
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// Bad input: arguments, durations, endpoints, files (clap uses 2 as well).
    pub const USAGE: i32 = 2;
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => exit::USAGE,
        }
    }
}
