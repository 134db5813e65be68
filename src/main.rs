//! Thin entry point: parse the command line, start logging, dispatch, and map errors to
//! the documented exit codes ([`exit_code`]: the one table, from the error's kind to
//! [`exit`]'s codes).

use std::io::IsTerminal;

use clap::Parser;
use leaderwatch::Error;
use leaderwatch::cli::{Cli, Command};
use leaderwatch::commands::{
    compare, measure, pack, preflight, rate, recount, rehearse, report, sample, sitting,
};
use leaderwatch::model::exit;

/// The documented exit code for `e`.
fn exit_code(e: &Error) -> i32 {
    match e {
        Error::Usage(_)
        | Error::Input(_)
        | Error::Probe(_)
        | Error::Target(_)
        | Error::Bind(_)
        | Error::NoThreshold(_) => exit::USAGE,
        Error::Internal(_) => exit::FAILURE,
        Error::Record(_) | Error::Stdout(_) => exit::OUTPUT,
        Error::Local(_) => exit::LOCAL_CLUSTER,
        Error::Incomplete(_) => exit::INCOMPLETE,
        Error::Kube(_) => exit::KUBERNETES,
        Error::Preflight(_) => exit::PREFLIGHT,
        Error::Step { .. } => exit::STEP,
        Error::Detached(_) => exit::DETACHED,
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => usage_error(e),
    };
    let filter = match tracing_subscriber::EnvFilter::try_new(&cli.log) {
        Ok(f) => f,
        Err(e) => fail(&Error::Usage(format!("--log {:?}: {e}", cli.log))),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leaderwatch: cannot start the async runtime: {e}");
            std::process::exit(exit::FAILURE);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Sample(a) => sample::command(a, shutdown_signal()).await,
            Command::Rehearse(a) => rehearse::command(a, shutdown_signal()).await,
            Command::Report(a) => report::command(a),
            Command::Compare(a) => compare::command(a),
            Command::Preflight(a) => preflight::command(a).await,
            Command::Measure(a) => measure::command(a, shutdown_signal()).await,
            Command::Rate(a) => rate::command(a),
            Command::Recount(a) => recount::command(a),
            Command::Sitting(a) => sitting::command(a, shutdown_signal()).await,
            Command::Pack(a) => pack::command(a),
        }
    });
    match result {
        Ok(()) => std::process::exit(exit::OK),
        Err(e) => fail(&e),
    }
}

/// A command line clap refused: its first line (what is wrong) and where to look, then
/// exit 2; `--help` and `--version` print as clap prints them.
fn usage_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    // What is wrong is the first paragraph: a line, or a line ending in ':' and the
    // arguments it lists (a missing required argument), joined into one.
    let text = e.to_string();
    let what: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    let first = if what.is_empty() { "bad command line".to_owned() } else { what.join(" ") };
    eprintln!("leaderwatch: {} (see --help)", first.trim_start_matches("error: "));
    std::process::exit(exit::USAGE)
}

/// One line on stderr, whatever the error's own formatting, then the documented exit code.
fn fail(e: &Error) -> ! {
    let msg = e.to_string();
    let one: Vec<&str> = msg.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    eprintln!("leaderwatch: {}", one.join(" "));
    std::process::exit(exit_code(e))
}

/// Resolves on SIGINT or SIGTERM (what the kubelet sends a pod).
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
    tracing::info!("signal received: finishing the run");
}
