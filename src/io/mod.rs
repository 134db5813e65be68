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
pub mod test_hooks;
