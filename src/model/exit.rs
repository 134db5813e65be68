//! The process's exit codes, documented in docs/troubleshooting.md ("Exit codes"): named
//! once here. main.rs chooses one for each error (its one table); `leaderwatch sitting`
//! reads the Job's with the same names.

/// Success.
pub const OK: i32 = 0;
/// Unexpected internal failure.
pub const FAILURE: i32 = 1;
/// Bad input: arguments, durations, endpoints, TLS files, the files named (clap uses 2 as well).
pub const USAGE: i32 = 2;
/// The output could not be written (the output directory, or stdout); rows already
/// written are intact.
pub const OUTPUT: i32 = 3;
/// The local etcd cluster could not be found or started.
pub const LOCAL_CLUSTER: i32 = 4;
/// A trial did not complete (interrupted, or the cluster did not recover in time).
pub const INCOMPLETE: i32 = 5;
/// The Kubernetes API could not be used: config, unreachable, forbidden (403), errors.
pub const KUBERNETES: i32 = 6;
/// Preflight: at least one check failed (nothing was evicted).
pub const PREFLIGHT: i32 = 7;
/// `sitting`: a step failed (named in the message); results on the volume are kept.
pub const STEP: i32 = 8;
/// `sitting`: detached by Ctrl-C; the sitting goes on in the cluster.
pub const DETACHED: i32 = 9;
