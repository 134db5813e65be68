//! Thin entry point: parse the command line, start logging, dispatch, and map errors to
//! the documented exit codes ([`exit`], [`exit_code`]: the one table).

use std::io::IsTerminal;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use leaderwatch::Error;
use leaderwatch::cli::{
    Cli, Command, CompareArgs, KubeArgs, MeasureArgs, MetricsInterval, Output, PreflightArgs,
    RateArgs, RateOutput, ReportArgs, ReportFormat, SampleArgs,
};
use leaderwatch::io::probe::{ProbeConfig, TlsFiles};
use leaderwatch::io::read;
use leaderwatch::k8s::{self, KubeOptions};
use leaderwatch::model::baseline::Environment;
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::model::member::parse_members;
use leaderwatch::sample::{self, SampleConfig};
use leaderwatch::sitting::SittingConfig;

/// Exit codes, documented in docs/troubleshooting.md ("Exit codes").
mod exit {
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
    /// A sitting did not complete (interrupted, or the cluster did not recover in time).
    pub const INCOMPLETE: i32 = 5;
    /// The Kubernetes API could not be used: config, unreachable, forbidden (403), errors.
    pub const KUBERNETES: i32 = 6;
    /// Preflight: at least one check failed (nothing was evicted).
    pub const PREFLIGHT: i32 = 7;
    /// `sitting`: a step failed (named in the message); results on the volume are kept.
    pub const STEP: i32 = 8;
    /// `sitting`: detached by Ctrl-C; the sitting goes on in the cluster.
    pub const DETACHED: i32 = 9;
}

/// The documented exit code for `e`.
fn exit_code(e: &Error) -> i32 {
    match e {
        Error::Usage(_)
        | Error::Input { .. }
        | Error::Probe(_)
        | Error::Target(_)
        | Error::Bind { .. }
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
            Command::Sample(a) => run_sample(a).await,
            Command::Rehearse(a) => leaderwatch::rehearse::run(a, shutdown_signal()).await,
            Command::Report(a) => run_report(a),
            Command::Compare(a) => run_compare(a),
            Command::Preflight(a) => run_preflight(a).await,
            Command::Measure(a) => run_measure(a).await,
            Command::Rate(a) => run_rate(a),
            Command::Sitting(a) => leaderwatch::in_cluster::run(a, shutdown_signal()).await,
            Command::Pack(a) => leaderwatch::io::pack::pack(&a.dir, &mut std::io::stdout().lock()),
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
    let text = e.to_string();
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("bad command line");
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

async fn run_sample(a: SampleArgs) -> Result<(), Error> {
    let members = parse_members(&a.endpoints).map_err(Error::Usage)?;
    let metrics_every = match a.metrics_interval {
        None => Some(1),
        Some(MetricsInterval::OnChange) => None,
        Some(MetricsInterval::Every(m)) if m < a.interval => {
            return Err(Error::Usage(format!(
                "--metrics-interval {} is shorter than --interval {}",
                humantime::format_duration(m),
                humantime::format_duration(a.interval)
            )));
        }
        Some(MetricsInterval::Every(m)) => {
            Some(leaderwatch::io::round::rounds_per_page(m, a.interval))
        }
    };
    let cfg = SampleConfig {
        members,
        interval: a.interval,
        metrics_every,
        duration: a.duration,
        out: a.out,
        probe: ProbeConfig {
            timeout: a.timeout,
            tls: TlsFiles { cacert: a.cacert, cert: a.cert, key: a.key },
            with_metrics: true,
        },
        cause_horizon: a.cause_horizon,
        canary: a.canary.then_some(a.canary_timeout),
        metrics_addr: a.metrics_addr,
        rotation: Some(leaderwatch::io::rotate::Rotation { retain_days: a.retain }),
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    sample::run(cfg, clock, shutdown_signal()).await.map(|_| ())
}

fn kube_options(a: &KubeArgs) -> KubeOptions {
    KubeOptions {
        kubeconfig: a.conn.kubeconfig.clone(),
        context: a.conn.context.clone(),
        namespace: a.namespace.clone(),
        selector: a.selector.clone(),
        request_timeout: a.conn.request_timeout,
    }
}

async fn run_preflight(a: PreflightArgs) -> Result<(), Error> {
    let o = kube_options(&a.kube);
    let reach = a.kube.reach();
    let client = k8s::client(&o).await?;
    let po = k8s::preflight::PreflightOptions { reach, ..Default::default() };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let checks = k8s::preflight::run(&client, &o, &po, clock).await?;
    if a.output == Output::Json {
        out(&format!("{}\n", serde_json::to_string_pretty(&checks).unwrap_or_default()))?;
    } else {
        out(&format!("{}\n", k8s::preflight::render(&checks)))?;
    }
    let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
    if failed.is_empty() { Ok(()) } else { Err(Error::Preflight(failed.join(", "))) }
}

async fn run_measure(a: MeasureArgs) -> Result<(), Error> {
    let kube = kube_options(&a.kube);
    let (idle, settle) =
        leaderwatch::test_hooks::windows(a.idle, a.settle).map_err(Error::Usage)?;
    let cfg = leaderwatch::measure::MeasureConfig {
        reach: a.kube.reach(),
        kube,
        sitting: SittingConfig {
            members: vec![], // discovered from the pods
            idle,
            settle,
            interval: a.cadence.interval,
            fast_interval: a.cadence.fast_interval,
            target: a.target.parse().map_err(Error::Usage)?,
            probe: ProbeConfig { timeout: a.cadence.timeout, ..ProbeConfig::default() },
            out: a.out.clone(),
            recovery_timeout: a.recovery_timeout,
            environment: Environment { description: a.environment, ..Environment::default() },
            cause_horizon: a.cadence.cause_horizon,
            canary: a.cadence.canary(),
            metrics_addr: a.metrics_addr,
            follow_pod_ips: false,
        },
        evict_timeout: a.evict_timeout,
        dry_run: a.dry_run,
        method: a.method,
        down: a.down,
    };
    let client = k8s::client(&cfg.kube).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let path = a.out.join(leaderwatch::model::baseline::BASELINE);
    let since = std::time::SystemTime::now();
    // In a pod the log may be the only way out (baseline-from-log.sh reads it there).
    let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let result = leaderwatch::measure::run(client, cfg, clock, shutdown_signal()).await;
    // The last act, whatever the outcome: what `leaderwatch sitting` checks its copy against.
    if a.checksums
        && a.out.is_dir()
        && let Err(e) = leaderwatch::io::pack::write_sums(&a.out)
    {
        tracing::warn!("checksums: {e}");
    }
    match result {
        Ok(b) => {
            leaderwatch::render::report::print_result(
                &leaderwatch::io::read::with_rate(&path, b)?,
                in_pod,
            );
            Ok(())
        }
        Err(e) => {
            // An incomplete sitting still wrote what it measured: the Job's log gets it too.
            if let Some(f) = leaderwatch::io::read::written_since(&path, since) {
                leaderwatch::render::report::print_result(&f, in_pod);
            }
            Err(e)
        }
    }
}

fn run_report(a: ReportArgs) -> Result<(), Error> {
    if a.alert_rule {
        let baselines = a
            .baselines
            .iter()
            .map(|p| read::baseline(p).map(|b| (p.clone(), b)))
            .collect::<Result<Vec<_>, _>>()?;
        let format = match a.format {
            None | Some(ReportFormat::Rules) => "rules",
            Some(ReportFormat::Prometheus) => "prometheus",
            Some(f @ (ReportFormat::Markdown | ReportFormat::Csv)) => {
                return Err(Error::Usage(format!(
                    "--alert-rule writes --format rules or prometheus, not {}",
                    format_name(f)
                )));
            }
        };
        let p = leaderwatch::render::alert::Params {
            window: a.window,
            disruptions: a.disruptions,
            allow_local: a.allow_local,
            scrape_interval: a.scrape_interval,
            force: a.force,
        };
        let d = leaderwatch::render::alert::derive(&baselines, &p)?;
        for l in &d.lines {
            eprintln!("{l}");
        }
        out(&leaderwatch::render::alert::render(&d, &p, format, &a.namespace)?)?;
        return Ok(());
    }
    if let Some(f @ (ReportFormat::Rules | ReportFormat::Prometheus)) = a.format {
        return Err(Error::Usage(format!("--format {} is for --alert-rule", format_name(f))));
    }
    // Each baseline with the events.csv beside it (the rate rows): one unreadable file is
    // one line and exit 2, for the table as for the CSV.
    let baselines =
        a.baselines.iter().map(|p| read::baseline_file(p)).collect::<Result<Vec<_>, _>>()?;
    match (a.update, a.format) {
        (Some(readme), _) => {
            let changed = leaderwatch::io::readme::rewrite(&readme, |text, dir| {
                leaderwatch::render::report::updated(text, dir, &baselines)
            })?;
            eprintln!(
                "{}: {}",
                readme.display(),
                if changed { "baseline table updated" } else { "already up to date" }
            );
        }
        (None, Some(ReportFormat::Csv)) => {
            out(&leaderwatch::render::report::render_csv(&baselines)?)?
        }
        (None, _) => out(&format!("{}\n", leaderwatch::render::report::render(&baselines, None)))?,
    }
    Ok(())
}

fn run_rate(a: RateArgs) -> Result<(), Error> {
    let sources = read::sources(&a.paths)?;
    let r = leaderwatch::analysis::rate::pool(&sources, a.confidence);
    match a.output {
        RateOutput::Json => out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&r).map_err(|e| Error::Internal(format!("json: {e}")))?
        ))?,
        RateOutput::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout());
            for m in leaderwatch::analysis::rate::measurements(&r) {
                w.serialize(m).map_err(csv_export)?;
            }
            w.flush().map_err(Error::Stdout)?;
        }
        RateOutput::Text => out(&leaderwatch::render::rate::render(&r))?,
    }
    Ok(())
}

fn run_compare(a: CompareArgs) -> Result<(), Error> {
    let (ba, bb) = (read::baseline(&a.a)?, read::baseline(&a.b)?);
    let (ma, mb) = (
        leaderwatch::analysis::measurements::measurements(&a.a, &ba),
        leaderwatch::analysis::measurements::measurements(&a.b, &bb),
    );
    let diffs = leaderwatch::analysis::measurements::compare(&ma, &mb);
    if a.output == Output::Json {
        out(&format!("{}\n", serde_json::to_string_pretty(&diffs).unwrap_or_default()))?;
    } else {
        out(&format!(
            "{}\n",
            leaderwatch::render::report::render_compare(&ba.run_id, &bb.run_id, &diffs)
        ))?;
    }
    Ok(())
}

/// Writes `text` to stdout: a closed pipe or a full disk is [`Error::Stdout`] (exit 3),
/// where print! would panic.
fn out(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes()).and_then(|()| o.flush()).map_err(Error::Stdout)
}

/// A CSV row that could not go to stdout: the pipe or disk (exit 3), or our own row (a bug).
fn csv_export(e: csv::Error) -> Error {
    if !e.is_io_error() {
        return Error::Internal(format!("csv export: {e}"));
    }
    match e.into_kind() {
        csv::ErrorKind::Io(io) => Error::Stdout(io),
        other => Error::Internal(format!("csv export: {other:?}")),
    }
}

/// A `--format` value as the user typed it.
fn format_name(f: ReportFormat) -> String {
    f.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
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
