//! The `controlloop` command: runs the book's experiments and builds its website.
#![forbid(unsafe_code)]

use std::{panic, path::PathBuf, time::Instant};

use anyhow::bail;
use clap::{Parser, Subcommand};
use controlloop::{
    apiserver,
    book::{self, site},
    lab::{burst::ch06::ESSAY_RECONCILES, rig::ESSAY},
};

/// Runs every experiment the book shows, then builds the book as a website.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// After building, serve the book on 127.0.0.1.
    #[arg(long)]
    serve: bool,
    /// The port for --serve.
    #[arg(long, default_value_t = 3000)]
    port: u16,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Build the website only, without running experiments.
    Site,
    /// Write the appendix "What it costs" from criterion's saved estimates (in
    /// `target/criterion/`); with `--run`, first run every benchmark (`cargo bench`).
    Costs {
        /// Run `cargo bench` first (takes a while; run it on a quiet machine).
        #[arg(long)]
        run: bool,
        /// Options passed to criterion.
        #[arg(long, default_value = "--warm-up-time 2 --measurement-time 5")]
        criterion_args: String,
    },
    /// Run the named experiments only (all when none are named), without building the site.
    Run {
        /// Experiment names, as listed by `list`.
        names: Vec<String>,
    },
    /// List the experiments and the chapters that show them.
    List,
    /// Run the essay's write storm under the real clock and print a table to compare with the
    /// essay's figure.
    Burst(BurstArgs),
    /// Run the embedded Kubernetes API server in the foreground (state in memory only), logging every request.
    /// Try `kubectl --server http://127.0.0.1:8001 get configmaps -w`.
    Apiserver {
        /// The port to listen on (127.0.0.1 only).
        #[arg(long, default_value_t = 8001)]
        port: u16,
    },
}

/// The storm's parameters (defaults: the essay's run, over HTTP to the embedded server).
#[derive(clap::Args)]
struct BurstArgs {
    /// Number of writes.
    #[arg(long, default_value_t = ESSAY.writes)]
    writes: u64,
    /// Gap between writes, in ms.
    #[arg(long, default_value_t = ESSAY.gap.as_millis() as u64)]
    gap_ms: u64,
    /// Reconcile cost, in ms.
    #[arg(long, default_value_t = ESSAY.cost.as_millis() as u64)]
    cost_ms: u64,
    /// The controller's workers.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// How many storms to run.
    #[arg(long, default_value_t = 5)]
    repeat: u32,
    /// Run in-process instead of over HTTP.
    #[arg(long)]
    in_process: bool,
    /// Use virtual time (needs --in-process).
    #[arg(long)]
    virtual_time: bool,
    /// A kubeconfig: run against that cluster (namespace `default`, ConfigMap
    /// `controlloop-burst`) instead of the embedded server.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::List) => {
            for e in book::experiments() {
                println!("{:<28} {}", e.name, e.chapter);
            }
            Ok(())
        }
        Some(Command::Run { names }) => run_experiments(&names),
        Some(Command::Burst(args)) => run_burst(&args),
        Some(Command::Apiserver { port }) => run_apiserver(port),
        Some(Command::Site) => finish(build_site()?, cli.serve, cli.port),
        Some(Command::Costs {
            run,
            criterion_args,
        }) => write_costs(run, &criterion_args),
        None => {
            run_experiments(&[])?;
            finish(build_site()?, cli.serve, cli.port)
        }
    }
}

/// Runs the experiments named (all if `names` is empty). A failing one is reported and the
/// rest still run; the command fails at the end if any failed.
fn run_experiments(names: &[String]) -> anyhow::Result<()> {
    let all: Vec<_> = book::experiments().collect();
    for n in names {
        if !all.iter().any(|e| e.name == n) {
            bail!("no experiment named {n:?}; `controlloop list` shows them");
        }
    }
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|e| names.is_empty() || names.iter().any(|n| n == e.name))
        .collect();
    println!("running {} experiment(s)", chosen.len());
    let mut failed = Vec::new();
    for e in &chosen {
        let start = Instant::now();
        let bar = spinner(format!("{:<28} {}", e.name, e.chapter));
        let outcome = panic::catch_unwind(e.run);
        bar.finish_and_clear();
        match outcome {
            Ok(()) => println!("  ok    {:<28} {:>8.2?}", e.name, start.elapsed()),
            Err(_) => {
                println!("  FAIL  {:<28} (see the message above)", e.name);
                failed.push(e.name);
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} experiment(s) failed: {}. A changed snapshot is left as snapshots/*.snap.new \
             for `cargo insta review`.",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// Serves the embedded API server until Ctrl-C, logging method, path, query and status.
fn run_apiserver(port: u16) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "controlloop::apiserver=info".into()),
        )
        .init();
    tokio::runtime::Runtime::new()?.block_on(async {
        let options = apiserver::ServerOptions {
            port,
            ..Default::default()
        };
        let server = apiserver::ApiServer::start_with(options).await?;
        println!(
            "embedded API server (Kubernetes {}) at {}; try: kubectl --server {} get configmaps -w",
            apiserver::KUBERNETES_VERSION,
            server.url(),
            server.url()
        );
        tokio::signal::ctrl_c().await?;
        server.shutdown().await;
        Ok(())
    })
}

/// A progress bar that spins while an experiment runs (its steps are not counted).
fn spinner(message: String) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner().with_message(message);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Runs the write storm `args.repeat` times with a progress bar, then prints every run and
/// the essay's figure beside them.
fn run_burst(args: &BurstArgs) -> anyhow::Result<()> {
    use controlloop::lab::burst::{self, Backend, Clock, Params, Table};
    let ms = std::time::Duration::from_millis;
    let mut params = Params::essay()
        .writes(args.writes)
        .gap(ms(args.gap_ms))
        .cost(ms(args.cost_ms))
        .workers(args.workers)
        .real();
    if args.in_process {
        params = params.backend(Backend::InProcess);
    }
    if let Some(k) = &args.kubeconfig {
        params = params.backend(Backend::Kubeconfig(k.clone()));
    }
    if args.virtual_time {
        params.clock = Clock::Virtual;
    }
    let bar = indicatif::ProgressBar::new(u64::from(args.repeat)).with_message(format!(
        "{} writes, {} ms apart, {} ms reconciles, {:?}",
        args.writes, args.gap_ms, args.cost_ms, params.backend
    ));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}")
            .expect("a valid template"),
    );
    let mut reports = vec![];
    for _ in 0..args.repeat {
        reports.push(burst::run(&params)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "\nwrite storm, {:?} clock, backend {:?} ({} runs):\n",
        params.clock,
        params.backend,
        reports.len()
    );
    print!("{}", Table(&reports));
    println!(
        "\nthe essay (client-go, fake clientset): {} writes x {} ms x {} ms -> about \
         {ESSAY_RECONCILES} reconciles; reconciles ~ span / cost + 1.",
        ESSAY.writes,
        ESSAY.gap.as_millis(),
        ESSAY.cost.as_millis()
    );
    Ok(())
}

fn build_site() -> anyhow::Result<PathBuf> {
    let out = site::build(&site::book_root(), None)?;
    println!("the book is at {}", out.join("index.html").display());
    Ok(out)
}

fn finish(out: PathBuf, serve: bool, port: u16) -> anyhow::Result<()> {
    if serve {
        tokio::runtime::Runtime::new()?.block_on(site::serve(&out, port))?;
    }
    Ok(())
}

/// The `costs` subcommand: optionally runs every benchmark, then writes the appendix's table.
fn write_costs(run: bool, criterion_args: &str) -> anyhow::Result<()> {
    use controlloop::book::costs;
    let info = costs::RunInfo::here(criterion_args);
    if run {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = std::process::Command::new(cargo)
            .args(["bench", "--locked", "--"])
            .args(criterion_args.split_whitespace())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()?;
        if !status.success() {
            bail!("cargo bench failed ({status})");
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    let estimates = costs::collect(&target.join("criterion"))?;
    if estimates.is_empty() {
        bail!(
            "no saved estimates under {}: run `cargo bench` or pass --run",
            target.display()
        );
    }
    let path = costs::write_reference_run(&costs::render(&info, &estimates, costs::TARGETS))?;
    println!(
        "{} benchmarks written to {}",
        estimates.len(),
        path.display()
    );
    Ok(())
}
