//! The harness's one error type and its exit codes (the table is in docs/local-cluster.md).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A binary the cluster is built from is missing: `make kube-tools` builds it.
    #[error("{what} not found at {path} (build it with `make kube-tools`)")]
    MissingTool { what: &'static str, path: PathBuf },
    /// Something a killed run left behind; never reused silently.
    #[error("left over from an earlier run: {0} (remove with `lw-lab down`)")]
    Leftover(String),
    /// A component exited or never answered.
    #[error("{component} did not become ready within {secs} s: {detail} (log: {log})")]
    NotReady { component: String, secs: u64, detail: String, log: PathBuf },
    #[error("{component} exited during start-up ({status}); last log line: {last} (log: {log})")]
    Exited { component: String, status: String, last: String, log: PathBuf },
    #[error("no free {0}")]
    NoFree(&'static str),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("{context}: {source}")]
    Kube { context: String, source: kube::Error },
    #[error("{0}")]
    Command(String),
    #[error("{0}")]
    Usage(String),
    #[error("acceptance: {0} of {1} criteria failed")]
    Acceptance(usize, usize),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The exit code, one table for the whole harness.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::MissingTool { .. } => 3,
            Error::Leftover(_) => 4,
            Error::NotReady { .. } | Error::Exited { .. } | Error::NoFree(_) => 5,
            Error::Acceptance(..) => 6,
            Error::Io { .. } | Error::Kube { .. } | Error::Command(_) => 1,
        }
    }
}

/// `io::Result` with a context line.
pub trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io { context: context(), source })
    }
}

pub trait KubeContext<T> {
    fn kctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> KubeContext<T> for std::result::Result<T, kube::Error> {
    fn kctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Kube { context: context(), source })
    }
}
