//! The command line: clap definitions and their help text with examples.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Measures etcd leader changes (raw counter sum, reset-aware increase, raft-term
/// elections) for the dlock lock backend.
#[derive(Debug, Parser)]
#[command(name = "leaderwatch", version, about, long_about = None)]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `leaderwatch=debug`.
    #[arg(long, env = "LEADERWATCH_LOG", default_value = "info", global = true)]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sample every member at a fixed interval into samples.csv, events.csv and summary.json.
    #[command(after_help = SAMPLE_EXAMPLES)]
    Sample(SampleArgs),
}

const SAMPLE_EXAMPLES: &str = "\
Examples:
  # three local members, 20 minutes, 1 s interval
  leaderwatch sample --endpoint m0=http://127.0.0.1:2379 --endpoint m1=http://127.0.0.1:22379 \\
      --endpoint m2=http://127.0.0.1:32379 --duration 20m --out data/local-at-rest

  # the dlock members through three port-forwards (run each in its own terminal)
  kubectl -n dlock port-forward pod/dlock-etcd-0 23790:2379
  kubectl -n dlock port-forward pod/dlock-etcd-1 23791:2379
  kubectl -n dlock port-forward pod/dlock-etcd-2 23792:2379
  leaderwatch sample --endpoint dlock-etcd-0=http://127.0.0.1:23790 \\
      --endpoint dlock-etcd-1=http://127.0.0.1:23791 --endpoint dlock-etcd-2=http://127.0.0.1:23792 \\
      --out data/gke-sample-$(date -u +%Y%m%dT%H%M%SZ)

Ctrl-C or SIGTERM ends the run and writes summary.json. Re-running with the same --out
appends (new run_id) after repairing a line torn by a crash.";

/// Parses a humantime duration such as `1s`, `250ms`, `20m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration ({e}); use e.g. 500ms, 1s, 20m"))?;
    if d.is_zero() {
        return Err(format!("{s:?}: must be greater than zero"));
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct SampleArgs {
    /// A member to sample, NAME=URL (client URL, port 2379 on a real member). Repeat per member.
    #[arg(long = "endpoint", value_name = "NAME=URL", required = true)]
    pub endpoints: Vec<String>,
    /// Time between round starts.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Stop after this long; without it, run until Ctrl-C / SIGTERM.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Bound on each part of a probe (metrics, health, status RPC).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Run directory: samples.csv, events.csv, summary.json.
    #[arg(long)]
    pub out: PathBuf,
    /// CA bundle (PEM) for https:// members, used by HTTP and gRPC alike.
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM); needs --key.
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// Client key (PEM); needs --cert.
    #[arg(long)]
    pub key: Option<PathBuf>,
}
