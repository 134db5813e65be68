//! leaderwatch measures etcd leader changes for the dlock lock service.
//!
//! Layers, each importing only those below it:
//!
//! - [`model`]: the plain types that are written and read (baseline.json, summary.json,
//!   a round's observations, canary ops, events, measurements) and the timestamp format;
//! - [`analysis`]: pure functions over them: counting, windows, health, causes, client
//!   figures, recovery, the Poisson interval, the rate, the measurement list, and the
//!   engine that holds a run's analysis state (rounds, events and canary ops in; rows,
//!   windows and elections out);
//! - [`io`]: what talks to members, processes and files: probe -> round (all members),
//!   the canary, the local cluster and disruptor, record / recorder (CSV, JSON), the
//!   readers, the exporter;
//! - [`render`]: text for people and tools: the report table, CSV, compare, the rate
//!   table, the alert rule, progress;
//! - the commands on top: [`session`] (the loop `sample` and the sitting share: rounds
//!   into the engine, its rows to the recorder), [`sample`], [`sitting`] (with
//!   [`rehearse`] and [`measure`]),
//!   [`in_cluster`] (`leaderwatch sitting`: the sitting as a Job, driven from outside),
//!   [`cli`], and [`k8s`] (the Kubernetes API).
//!
//! The data path: `io::probe` (one member) -> `io::round` (all members) ->
//! `analysis::engine` (counts, windows, elections, health) -> `io::recorder` /
//! `io::record` -> `render::report`. This file owns the crate-wide [`Error`] and its mapping to process
//! exit codes.

pub mod analysis;
pub mod cli;
pub mod in_cluster;
pub mod io;
pub mod k8s;
pub mod measure;
pub mod model;
pub mod rehearse;
pub mod render;
pub mod sample;
pub mod session;
pub mod sitting;

/// Everything that can end a leaderwatch command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or a file it names is wrong; nothing was started.
    #[error("{0}")]
    Usage(String),
    /// The output directory could not be written (unwritable, disk full, foreign file).
    #[error(transparent)]
    Record(#[from] io::record::RecordError),
    /// The local etcd cluster could not be found, started or driven.
    #[error(transparent)]
    Local(#[from] io::local::LocalError),
    /// A sitting ended without its full result (interrupted, or no recovery in time);
    /// what it measured is written.
    #[error("sitting incomplete: {0}")]
    Incomplete(String),
    /// The Kubernetes API could not be reached, refused (403), or failed a request.
    #[error(transparent)]
    Kube(#[from] k8s::KubeError),
    /// Preflight found at least one acceptance criterion failing.
    #[error("preflight failed: {0}")]
    Preflight(String),
    /// A step of `leaderwatch sitting` failed; what is on the sitting's volume is kept.
    #[error("{step}: {message}")]
    Step { step: &'static str, message: String },
    /// Ctrl-C during `leaderwatch sitting`: it stopped following; the sitting goes on.
    #[error("{0}")]
    Detached(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit codes, documented in README.md ("Exit codes").
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// Unexpected internal failure.
    pub const FAILURE: i32 = 1;
    /// Bad input: arguments, durations, endpoints, TLS files (clap uses 2 as well).
    pub const USAGE: i32 = 2;
    /// The output directory could not be written; rows already written are intact.
    pub const OUTPUT: i32 = 3;
    /// The local etcd cluster could not be found or started.
    pub const LOCAL_CLUSTER: i32 = 4;
    /// A sitting did not complete (interrupted, or the cluster did not recover in time).
    pub const INCOMPLETE: i32 = 5;
    /// The Kubernetes API could not be used: config, unreachable, forbidden (403), errors.
    pub const KUBERNETES: i32 = 6;
    /// Preflight: at least one check failed (nothing was evicted).
    pub const PREFLIGHT: i32 = 7;
    /// `sitting`: a step failed (named in the message); results on the volume are kept.
    pub const STEP: i32 = 8;
    /// `sitting`: detached by Ctrl-C; the sitting goes on in the cluster.
    pub const DETACHED: i32 = 9;
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => exit::USAGE,
            Error::Record(_) => exit::OUTPUT,
            Error::Local(_) => exit::LOCAL_CLUSTER,
            Error::Incomplete(_) => exit::INCOMPLETE,
            Error::Kube(_) => exit::KUBERNETES,
            Error::Preflight(_) => exit::PREFLIGHT,
            Error::Step { .. } => exit::STEP,
            Error::Detached(_) => exit::DETACHED,
        }
    }
}
