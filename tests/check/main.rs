//! The `check` tier (`make check`, and what plain `cargo test` runs besides the unit tests):
//! every integration test that needs no etcd, no root and no network: the pure analysis
//! against properties and fixtures, the manifests, the commands on committed runs, bad
//! command lines. One binary: one link instead of one per file (docs/internals.md).

#[path = "../support/mod.rs"]
mod support;

mod alert_rule;
mod apply_sh;
mod bad_args;
mod before_layers;
mod cadence_replay;
mod committed_runs;
mod counts_props;
mod docs;
mod dry_runs;
mod health_fixtures;
mod health_props;
mod layers;
mod leaderwatch_deploy;
mod manifests;
mod metrics_fixtures;
mod order_file;
mod rate_cli;
mod recount;
mod recovery_props;
mod report_cli;
mod report_render;
mod trial_script;
