//! leaderwatch measures etcd leader changes for the dlock lock service.
//!
//! Its layers ([`model`] < [`analysis`] < [`io`], [`render`] < [`k8s`] < [`ops`] <
//! [`commands`]), what each file owns and the data path from a probe to baseline.json are
//! drawn once, in docs/internals.md ("Layers and the data path"); `tests/check/layers.rs`
//! holds the imports to them.
//!
//! This file owns the crate-wide [`Error`], what ends a command; main.rs maps it to the
//! process exit codes. It is the commands' and ops' own: the layers below return their own
//! errors, the facts (an [`io::InputError`], a [`io::disrupt::DisruptError`], a
//! [`k8s::KubeError`], ...), which the `From`s below turn into its variants, and only its
//! messages name a command-line flag.

pub mod analysis;
pub mod cli;
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
    #[error(transparent)]
    Input(#[from] io::InputError),
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
    /// A trial ended without its full result (interrupted, or no recovery in time);
    /// what it measured is written.
    #[error("trial incomplete: {0}")]
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
        Error::Input(io::InputError::new(path, problem))
    }
}

// The layers' own errors, each into the variant that says it to the user (and so picks
// the exit code in main.rs): the layers below know nothing of this type.

impl From<io::round::SetupError> for Error {
    fn from(e: io::round::SetupError) -> Error {
        Error::Probe(e.0)
    }
}

impl From<io::pack::PackError> for Error {
    fn from(e: io::pack::PackError) -> Error {
        match e {
            io::pack::PackError::Input(e) => Error::Input(e),
            io::pack::PackError::Output(e) => Error::Stdout(e),
        }
    }
}

impl From<io::readme::RewriteError> for Error {
    fn from(e: io::readme::RewriteError) -> Error {
        match e {
            io::readme::RewriteError::Input(e) => Error::Input(e),
            io::readme::RewriteError::Record(e) => Error::Record(e),
        }
    }
}

/// Why no alert can be derived, in the words of `report --alert-rule`'s flags.
impl From<render::alert::NoThreshold> for Error {
    fn from(e: render::alert::NoThreshold) -> Error {
        use render::alert::NoThreshold;
        Error::NoThreshold(match e {
            NoThreshold::OnlyLocal { given } => format!(
                "no baseline measured on a Kubernetes cluster (GKE) among the {given} given (environment.kind; the local control plane counts as local); an alert for GKE from local runs would be a guess: pass --allow-local to derive one anyway"
            ),
            NoThreshold::NoneComplete => "no complete baseline to derive the alert from".to_owned(),
            NoThreshold::NoLeaderLost { used } => format!(
                "none of the {used} baseline(s) used disrupted a leader, so a threshold from them says nothing about a leader loss (one election or more each): add a leader trial (--target leader) or a rolling restart, or pass --force"
            ),
        })
    }
}

impl From<render::InternalError> for Error {
    fn from(e: render::InternalError) -> Error {
        Error::Internal(e.0)
    }
}

/// A disruption's failure as the trial's: a member not there is `--target`'s, one that
/// cannot be disrupted the preflight's (nothing was), one not finished incomplete, the
/// platform's its own.
impl From<io::disrupt::DisruptError> for Error {
    fn from(e: io::disrupt::DisruptError) -> Error {
        use io::disrupt::DisruptError as D;
        match e {
            D::Target(m) => Error::Target(m),
            D::Refused(m) => Error::Preflight(m),
            D::Incomplete(m) => Error::Incomplete(m),
            D::Local(e) => Error::Local(e),
            D::Api(e) => match e.downcast::<k8s::KubeError>() {
                Ok(k) => Error::Kube(*k),
                Err(e) => Error::Internal(format!("a disruptor's error of no known kind: {e}")),
            },
        }
    }
}
