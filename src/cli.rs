//! The command line: clap definitions and their help text. Subcommands are added as the
//! measuring core (`sample`), the sitting (`rehearse`, `measure`, `report`) and the
//! Kubernetes side (`preflight`) land.

use clap::Parser;

/// Measures etcd leader changes (raw counter sum, reset-aware increase, raft-term elections)
/// for the dlock lock backend.
#[derive(Debug, Parser)]
#[command(name = "leaderwatch", version, about, long_about = None)]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `leaderwatch=debug`.
    #[arg(long, env = "LEADERWATCH_LOG", default_value = "info", global = true)]
    pub log: String,
}
