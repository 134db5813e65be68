//! Thin entry point: parse the command line, start logging, dispatch, map errors to exit codes.

use clap::Parser;
use leaderwatch::cli::Cli;

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log);
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            let err = leaderwatch::Error::Usage(format!("--log {:?}: {e}", cli.log));
            eprintln!("leaderwatch: {err}");
            std::process::exit(err.exit_code());
        }
    };
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    tracing::info!("no subcommands yet: the measuring core lands with issue #3");
}
