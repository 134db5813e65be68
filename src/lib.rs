//! leaderwatch measures etcd leader changes for the dlock lock service.
//!
//! Layers, each importing only those below it:
//!
//! - [`model`]: the plain types that are written and read (baseline.json, summary.json,
//!   a round's observations, canary ops, events, a row of the tidy list of measurements)
//!   and the timestamp format;
//! - [`analysis`]: pure functions over them: counting, windows, health, causes, client
//!   figures, recovery, the Poisson interval, the rate, a baseline flattened into its tidy
//!   list of measurements; the engine that holds a run's analysis state (rounds, events
//!   and canary ops in; rows, windows and elections out); and the protocols that say what
//!   a run does next (the sitting, `sample`);
//! - [`io`]: what talks to members, processes, files and the environment: probe -> round
//!   (all members), the canary, the local cluster and disruptor, the run directory (CSV,
//!   JSON) and the recorder that writes into it, the readers, the exporter, the test hooks;
//! - [`render`]: text for people and tools: the report table, CSV, compare, the rate
//!   table, the alert rule, progress;
//! - [`k8s`]: the Kubernetes API (discovery, watchers, eviction, preflight, the Job and
//!   following it);
//! - [`ops`]: what the commands run, one library call each: the one loop every command
//!   that samples runs ([`ops::drive`]), the runs of `sample`, `rehearse` and `measure`,
//!   and `leaderwatch sitting`'s Job from a laptop ([`ops::sitting`]);
//! - [`commands`] on top: one file per subcommand, arguments -> options -> one call.
//!
//! The data path: `io::probe` (one member) -> `io::round` (all members) ->
//! `ops::drive` (the loop) -> `analysis::engine` (counts, windows, elections, health)
//! and `analysis::sitting` (phases, recovery, the baseline) -> `io::recorder` -> the run
//! directory -> `render::report`. This file owns the crate-wide [`Error`], what ends a
//! command; main.rs maps it to the process exit codes. It is the commands' own: the layers
//! below return the facts (a [`io::exporter::BindError`], a [`io::run_dir::RecordError`],
//! a [`io::local::LocalError`]) and only its messages name a command-line flag.

pub mod analysis;
pub mod commands;
pub mod io;
pub mod k8s;
pub mod model;
pub mod ops;
pub mod render;

/// Everything that can end a leaderwatch command. Each variant says what failed; main.rs
/// maps them to the documented exit codes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line is wrong (an argument, or arguments that do not go together);
    /// raised only where arguments are parsed. Nothing was started.
    #[error("{0}")]
    Usage(String),
    /// A file or directory named on the command line cannot be read or is not what it
    /// should be (a baseline.json, an events.csv, a README without its markers).
    #[error("{}: {problem}", path.display())]
    Input { path: std::path::PathBuf, problem: String },
    /// The probes cannot be set up from what was given: a TLS file missing or not PEM,
    /// `--cert` without `--key`, a member URL. Nothing was started.
    #[error("{0}")]
    Probe(String),
    /// `--target` names no member of the cluster. Nothing was disrupted.
    #[error("{0}")]
    Target(String),
    /// The exporter cannot listen on `--metrics-addr` (taken, or not this host's).
    #[error("--metrics-addr {0}")]
    Bind(#[from] io::exporter::BindError),
    /// `report --alert-rule`: the baselines given cannot found a threshold (none from
    /// the target cluster, none complete, none that took a leader down).
    #[error("{0}")]
    NoThreshold(String),
    /// Standard output could not be written (a closed pipe, a full disk).
    #[error("stdout: {0}")]
    Stdout(std::io::Error),
    /// Something leaderwatch made itself could not be serialized: a bug.
    #[error("internal: {0}")]
    Internal(String),
    /// The output directory could not be written (unwritable, disk full, foreign file).
    #[error("{e}{advice}", e = .0, advice = new_out(.0))]
    Record(#[from] io::run_dir::RecordError),
    /// The local etcd cluster could not be found, started or driven.
    #[error("{words}", words = local(.0))]
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

/// A run directory of another version: the way out is another `--out`.
fn new_out(e: &io::run_dir::RecordError) -> &'static str {
    match e {
        io::run_dir::RecordError::Schema { .. } => "; use a new --out directory",
        _ => "",
    }
}

/// The local cluster's failure; no etcd found names `rehearse --etcd-bin` among the ways.
fn local(e: &io::local::LocalError) -> String {
    match e {
        io::local::LocalError::NoEtcd => "no etcd binary found: set ETCD_BIN or --etcd-bin, run `make deps` (installs .tools/bin/etcd), or put etcd on PATH".to_owned(),
        e => e.to_string(),
    }
}

impl Error {
    /// [`Error::Input`]: `path` (named on the command line) and what is wrong with it.
    pub fn input(path: &std::path::Path, problem: impl std::fmt::Display) -> Error {
        Error::Input { path: path.to_owned(), problem: problem.to_string() }
    }
}
