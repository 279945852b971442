//! The `controlloop` command: runs the book's experiments and builds its website.
#![forbid(unsafe_code)]

use std::{panic, path::PathBuf, time::Instant};

use anyhow::bail;
use clap::{Parser, Subcommand};
use controlloop::apiserver;
use controlloop_book::{
    kit,
    lab::{burst::ch06::ESSAY_RECONCILES, rig::ESSAY},
    press::{self, site},
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
    /// Run chapter 01's real-clock contention harness N times without its bands and print every
    /// run's counts beside the bands: how the bands' basis is measured on a machine.
    Contention {
        /// How many runs of each (queue, then channel).
        #[arg(long, default_value_t = 50)]
        runs: usize,
    },
    /// The real control plane on 127.0.0.1 (etcd, kube-apiserver, kube-controller-manager and
    /// kubectl at Kubernetes v1.37.2, built from Go modules by `upstream/controlplane`; needs
    /// Go 1.26+): `cluster up` builds once and starts it, Ctrl-C or SIGTERM stops it.
    Cluster {
        #[command(subcommand)]
        verb: ClusterVerb,
        /// The second control plane, whose kube-apiserver runs with `--watch-cache=false`.
        #[arg(long, global = true)]
        no_watch_cache: bool,
        /// The state folder (default `target/controlplane`, or its `no-watch-cache/`).
        #[arg(long, global = true)]
        dir: Option<PathBuf>,
    },
    /// Measure the real tier's band bases: run every banded experiment on the real control
    /// plane (and the embedded server beside it) ROUNDS times, print each value, and with
    /// --write append one line per value to `book/src/lab/real_server/basis/NAME.tsv`.
    /// Needs `--features tls` and `cluster up`.
    RealBasis {
        /// How many rounds.
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Append to the basis files (review the diff; the bands move with it).
        #[arg(long)]
        write: bool,
    },
    /// Run the embedded Kubernetes API server in the foreground (state in memory only), logging every request.
    /// Try `kubectl --server http://127.0.0.1:8001 get configmaps -w`.
    Apiserver {
        /// The port to listen on (127.0.0.1 only).
        #[arg(long, default_value_t = 8001)]
        port: u16,
    },
}

/// What `cluster` does.
#[derive(Subcommand)]
enum ClusterVerb {
    /// Build the binaries if needed (once: ~15 min cold, then 0.3 s), start the control plane
    /// and wait until ready; stays in the foreground unless --detach.
    Up {
        /// Return once ready, leaving it running in the background (stop it with `down`).
        #[arg(long)]
        detach: bool,
        /// kube-apiserver's --etcd-compaction-interval (default 5m; e.g. 5s to see 410 soon).
        #[arg(long)]
        compaction_interval: Option<String>,
        /// Further flags for `upstream/controlplane`'s `up`, after `--`.
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Stop it and everything it started (idempotent).
    Down,
    /// Whether it is up (exit 0) or not (exit 3), and where.
    Status {
        /// Print its current.json.
        #[arg(long)]
        json: bool,
    },
    /// Print the shell exports that name it: eval "$(cargo run -q -- cluster env)".
    Env,
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
            for e in press::experiments() {
                println!("{:<28} {}", e.name, e.chapter);
            }
            Ok(())
        }
        Some(Command::Run { names }) => run_experiments(&names),
        Some(Command::Burst(args)) => run_burst(&args),
        Some(Command::Contention { runs }) => {
            print!("{}", contention(runs, |line| println!("{line}"))?);
            Ok(())
        }
        Some(Command::Apiserver { port }) => run_apiserver(port),
        Some(Command::RealBasis { rounds, write }) => real_basis(rounds, write),
        Some(Command::Cluster {
            verb,
            no_watch_cache,
            dir,
        }) => {
            use controlloop_book::{lab::rig::real::Instance, press::cluster::Verb};
            let verb = match verb {
                ClusterVerb::Up {
                    detach,
                    compaction_interval,
                    extra,
                } => Verb::Up {
                    detach,
                    compaction_interval,
                    extra,
                },
                ClusterVerb::Down => Verb::Down,
                ClusterVerb::Status { json } => Verb::Status { json },
                ClusterVerb::Env => Verb::Env,
            };
            let instance = if no_watch_cache {
                Instance::NoWatchCache
            } else {
                Instance::Main
            };
            let code = press::cluster::run(&verb, instance, dir.as_deref())?;
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
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

/// Chapter 01's real-clock harness, `runs` times, with every count and none checked: each run's
/// line goes to `progress` as it ends; the summary (spread and bands) is returned.
fn contention(runs: usize, progress: impl Fn(String)) -> anyhow::Result<String> {
    use controlloop::workqueue::Queue;
    use controlloop_book::lab::{
        rig,
        workqueue::contention::{ADDS, bands, measured_table, through_channel, through_queue},
    };
    use std::time::Duration;
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let build = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    progress(format!(
        "{runs} runs of each, {ADDS} adds, {build} build, load {}",
        press::costs::load_average()
    ));
    progress(format!(
        "{:>4} {:>16} {:>18}",
        "run", "queue reconciles", "channel violations"
    ));
    let (mut queue_runs, mut channel_runs) = (Vec::new(), Vec::new());
    for i in 1..=runs {
        let start = Instant::now();
        let queue = rig::real(through_queue(Queue::new(), ADDS, None, |_| Duration::ZERO));
        queue_runs.push((queue, start.elapsed()));
        let start = Instant::now();
        let channel = rig::real(through_channel(ADDS, None, |_| Duration::ZERO));
        channel_runs.push((channel, start.elapsed()));
        progress(format!(
            "{i:>4} {:>16} {:>18}",
            queue.reconciles, channel.violations
        ));
    }
    let mut summary = format!("\n{}\n", measured_table(&queue_runs, &channel_runs));
    for (name, band) in bands::ALL {
        summary.push_str(&format!("{name} {band}: {}\n", band.basis));
    }
    Ok(summary)
}

/// Runs the experiments named (all if `names` is empty). A failing one is reported and the
/// rest still run; the command fails at the end if any failed.
fn run_experiments(names: &[String]) -> anyhow::Result<()> {
    let all: Vec<_> = press::experiments().collect();
    for n in names {
        if !all.iter().any(|e| e.name == n) {
            bail!("no experiment named {n:?}; `controlloop list` shows them");
        }
    }
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|e| names.is_empty() || names.iter().any(|n| n == e.name))
        .collect();
    // The command redraws the committed figures from this run (`cargo test` only checks them),
    // and repeats real-clock runs in full.
    kit::plot::redraw_figures();
    kit::measured::set_command_run();
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
    for path in kit::plot::redrawn() {
        println!("redrew {} (review its diff)", path.display());
    }
    for line in essay_figures_outside() {
        println!("{line}");
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

/// The `real-basis` subcommand: `rounds` rounds of the real tier's banded runs, each value
/// printed and (with `write`) appended to its band's basis file.
fn real_basis(rounds: u32, write: bool) -> anyhow::Result<()> {
    use controlloop_book::{
        kit::basis,
        lab::{
            real_server,
            rig::real::{self, Instance},
        },
    };
    let server = match real::tier(Instance::Main) {
        Ok(s) => s,
        Err(absent) => bail!("{absent}"),
    };
    let dir = real_server::basis_dir();
    std::fs::create_dir_all(&dir)?;
    for round in 1..=rounds {
        let load = basis::load_average();
        println!("round {round}/{rounds} (load {load})");
        let mut lines: std::collections::BTreeMap<&str, String> = Default::default();
        for (name, value) in real_server::basis_round(&server) {
            println!("  {name:<40} {value}");
            lines.entry(name).or_default().push_str(&basis::line(value));
        }
        if write {
            for (name, text) in lines {
                let path = dir.join(format!("{name}.tsv"));
                let mut body = std::fs::read_to_string(&path)
                    .unwrap_or_else(|_| "# value\tprofile\tload\tdate\n".to_owned());
                body.push_str(&text);
                std::fs::write(&path, body)?;
            }
        }
    }
    if write {
        println!("appended to {} (review the diff)", dir.display());
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

/// The tables that hold the essays' figures against this book's bands, each row ending in
/// its verdict (`inside`/`outside …`).
const ESSAY_TABLES: [&str; 2] = ["ch01_essay", "ch06_essay_vs_book"];

/// Every essay figure that this run's tables put outside its band, one line each. Reads the
/// verdicts the experiments wrote (a table that changed is left as `.snap.new`: that one is
/// this run's).
fn essay_figures_outside() -> Vec<String> {
    let mut out = Vec::new();
    for name in ESSAY_TABLES {
        let path = kit::snap::path(name);
        let fresh = path.with_extension("snap.new");
        let Ok(raw) = std::fs::read_to_string(&fresh).or_else(|_| std::fs::read_to_string(&path))
        else {
            continue;
        };
        let body = raw.splitn(4, '\n').nth(3).unwrap_or_default();
        out.extend(outside_rows(body).into_iter().map(|(figure, verdict)| {
            format!("essay figure outside its band ({name}): {figure}: {verdict}")
        }));
    }
    out
}

/// The rows of an essay table (Markdown, or columns separated by spaces) whose last cell, the
/// verdict, says `outside`: each as (the figure, the verdict's first clause).
fn outside_rows(table: &str) -> Vec<(String, String)> {
    table
        .lines()
        .filter_map(|line| {
            let (figure, verdict) = if line.starts_with('|') {
                let cells: Vec<&str> = line
                    .split('|')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect();
                (cells.first()?.to_string(), cells.last()?.to_string())
            } else {
                let (figure, verdict) = line.trim_end().rsplit_once(' ')?;
                (
                    figure.split_whitespace().collect::<Vec<_>>().join(" "),
                    verdict.to_owned(),
                )
            };
            let verdict = verdict
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            verdict.starts_with("outside").then_some((figure, verdict))
        })
        .collect()
}

/// A progress bar that spins while an experiment runs (its steps are not counted), with the
/// time it has taken so far.
fn spinner(message: String) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner()
        .with_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed:>4}")
                .expect("a valid template"),
        )
        .with_message(message);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Runs the write storm `args.repeat` times with a progress bar, then prints every run and
/// the essay's figure beside them.
fn run_burst(args: &BurstArgs) -> anyhow::Result<()> {
    use controlloop_book::lab::burst::{self, Backend, Clock, Params, Table};
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
    site::build(&site::book_root(), None)
}

/// Ends the command: where the site is and how to serve it, or serves it.
fn finish(out: PathBuf, serve: bool, port: u16) -> anyhow::Result<()> {
    println!("the book is at {}", out.join("index.html").display());
    if serve {
        tokio::runtime::Runtime::new()?.block_on(site::serve(&out, port))?;
    } else {
        println!(
            "serve it with `cargo run -- --serve site` (http://127.0.0.1:{port}/), or open that \
             file in a browser"
        );
    }
    Ok(())
}

/// The `costs` subcommand: optionally runs every benchmark, then writes the appendix's table.
fn write_costs(run: bool, criterion_args: &str) -> anyhow::Result<()> {
    use controlloop_book::press::costs;
    let info = costs::RunInfo::here(criterion_args);
    let started = std::time::SystemTime::now();
    if run {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = std::process::Command::new(cargo)
            .args(["bench", "--locked", "--bench", "*", "--"]) // bench targets only: the lib's harness takes no criterion options
            .args(criterion_args.split_whitespace())
            .current_dir(controlloop_book::repo())
            .status()?;
        if !status.success() {
            bail!("cargo bench failed ({status})");
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| controlloop_book::repo().join("target"));
    if run {
        match costs::run_upstream_bench(&target) {
            Ok(true) => {}
            Ok(false) => eprintln!("no Go toolchain on PATH: client-go's rows are left out"),
            Err(e) => eprintln!("client-go's rows are left out: {e}"),
        }
    }
    // A run shows its own benchmarks only, not those an earlier run left in target/criterion.
    let since = if run { started } else { std::time::UNIX_EPOCH };
    let mut estimates = costs::collect_since(&target.join("criterion"), since)?;
    estimates.extend(costs::collect_upstream(&target)?);
    estimates.sort_by(|a, b| a.id.cmp(&b.id));
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

#[cfg(test)]
mod tests {
    use super::{contention, outside_rows};
    use std::sync::Mutex;

    #[test]
    fn contention_prints_each_run_and_the_bands() {
        let lines = Mutex::new(Vec::new());
        let summary = contention(1, |l| lines.lock().unwrap().push(l)).unwrap();
        let lines = lines.into_inner().unwrap();
        assert_eq!(lines.len(), 3, "a header, the columns, one run: {lines:?}");
        let run: Vec<u64> = lines[2]
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(run.len(), 3);
        assert!(
            run[0] == 1 && run[1] >= 64,
            "run 1, at least one reconcile per key: {run:?}"
        );
        assert!(
            summary.contains("| 1 runs of each (min / median / max)"),
            "{summary}"
        );
        assert!(
            summary.contains("QUEUE_RECONCILES [64..=") && summary.contains("CHANNEL_VIOLATIONS")
        );
        let none = contention(0, |_| {}).unwrap_err().to_string();
        assert_eq!(none, "--runs must be at least 1");
    }

    #[test]
    fn outside_rows_reads_both_table_shapes() {
        let columns = "figure               essay   band            verdict\n\
                       queue reconciles    148497   [64..=32000]    outside\n\
                       channel violations   21940   [0..=64000]     inside\n";
        assert_eq!(
            outside_rows(columns),
            [(
                "queue reconciles 148497 [64..=32000]".to_owned(),
                "outside".to_owned()
            )]
        );
        let markdown = "| the essay reports | ours | band | verdict |\n|---|---|---|---|\n\
                        | about 24 | 11 | [16..=91] | inside the band; unlike the count |\n\
                        | about 99 | 11 | [16..=91] | outside the band; unlike the count |\n";
        assert_eq!(
            outside_rows(markdown),
            [("about 99".to_owned(), "outside the band".to_owned())]
        );
        assert!(outside_rows(&markdown.replace("outside", "inside")).is_empty());
    }
}
