//! The `controlloop` command: runs the book's experiments and builds its website.
#![forbid(unsafe_code)]

use std::{panic, path::PathBuf, time::Instant};

use anyhow::bail;
use clap::{Parser, Subcommand};
use controlloop::{apiserver, lab, site};

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
    /// Run the named experiments only (all when none are named), without building the site.
    Run {
        /// Experiment names, as listed by `list`.
        names: Vec<String>,
    },
    /// List the experiments and the chapters that show them.
    List,
    /// Run the embedded Kubernetes API server in the foreground, logging every request.
    /// Try `kubectl --server http://127.0.0.1:8001 get configmaps -w`.
    Apiserver {
        /// The port to listen on (127.0.0.1 only).
        #[arg(long, default_value_t = 8001)]
        port: u16,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::List) => {
            for e in lab::experiments() {
                println!("{:<28} {}", e.name, e.chapter);
            }
            Ok(())
        }
        Some(Command::Run { names }) => run_experiments(&names),
        Some(Command::Apiserver { port }) => run_apiserver(port),
        Some(Command::Site) => finish(build_site()?, cli.serve, cli.port),
        None => {
            run_experiments(&[])?;
            finish(build_site()?, cli.serve, cli.port)
        }
    }
}

/// Runs the experiments named (all if `names` is empty). A failing one is reported and the
/// rest still run; the command fails at the end if any failed.
fn run_experiments(names: &[String]) -> anyhow::Result<()> {
    let all = lab::experiments();
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
        match panic::catch_unwind(e.run) {
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
