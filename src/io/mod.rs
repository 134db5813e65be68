//! What talks to the world: etcd members (probe, round, the canary), processes (the local
//! cluster and its disruptor), files (the run directory, rotate, the recorder that writes the
//! engine's rows to them, the readers) and the exporter's HTTP server. Built on [`crate::analysis`] and
//! [`crate::model`].

pub mod canary;
pub mod columns;
pub mod disrupt;
pub mod exporter;
pub mod grpc;
pub mod http;
pub mod json_edit;
pub mod local;
pub mod lock;
pub mod metrics;
pub mod pack;
pub mod pool;
pub mod probe;
pub mod read;
pub mod readme;
pub mod recorder;
pub mod registry;
pub mod rotate;
pub mod round;
pub mod run_dir;
pub mod samples;
pub mod test_hooks;

use std::path::{Path, PathBuf};

/// A file or directory that cannot be read or is not what it should be (a baseline.json,
/// an events.csv, a README without its markers): its path and what is wrong. Named on the
/// command line, so the command's error says it as bad input.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct InputError {
    pub path: PathBuf,
    pub problem: String,
}

impl InputError {
    pub fn new(path: &Path, problem: impl std::fmt::Display) -> InputError {
        InputError { path: path.to_owned(), problem: problem.to_string() }
    }
}
