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
        /// The state folder (default `target/controlplane`, or its `no-watch-cache/`); a
        /// relative one is taken from the working directory.
        #[arg(long, global = true)]
        dir: Option<PathBuf>,
    },
    /// Measure bands' runs: run a group's experiments N times, as `cargo test` runs them but
    /// without their bands, and append each value to its band's file (`book/bases/NAME.tsv`)
    /// with the build profile, the regime, the load and the date. The regime is found, not
    /// told: `one-core` where the process may use one CPU (`taskset -c 0 cargo run -- measure
    /// …`), `loaded` under `--hog`, `quiet` at a load under 0.5, else `busy`. With no group,
    /// list the groups.
    Measure {
        /// The groups to run, in turn.
        groups: Vec<String>,
        /// How many runs of each group.
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Run under a CPU hog of twice the cores (busy threads this command starts and stops).
        #[arg(long)]
        hog: bool,
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
        Some(Command::Measure { groups, runs, hog }) => measure(&groups, runs, hog),
        Some(Command::Apiserver { port }) => run_apiserver(port),
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
        workqueue::{
            bands,
            contention::{ADDS, measured_table, through_channel, through_queue},
        },
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
    for (name, band) in bands::BANDS {
        summary.push_str(&format!("{name} {band}: {}\n", band.basis));
    }
    for (name, reference) in bands::SHOWN {
        summary.push_str(&format!("{name} {reference}: {}\n", reference.basis));
    }
    Ok(summary)
}

/// The `measure` subcommand: each group `runs` times, every value appended to its band's file
/// as the run ends (so an interrupted measurement keeps the runs it finished).
fn measure(groups: &[String], runs: usize, hog: bool) -> anyhow::Result<()> {
    use controlloop_book::{
        kit::basis::{self, Regime, Run},
        lab::bands::measure::{GROUPS, Hog, group},
    };
    if groups.is_empty() {
        for g in GROUPS {
            println!("{:<11} {} -> {}", g.name, g.runs, g.bands.join(", "));
        }
        // A band whose file has moved on since it was set: what the rule now gives.
        for b in controlloop_book::lab::bands::all() {
            if let Err(e) = b.rule {
                println!("{e}");
            }
        }
        return Ok(());
    }
    let chosen = groups
        .iter()
        .map(|name| {
            group(name).ok_or_else(|| {
                anyhow::anyhow!("no group named {name:?}; `controlloop measure` lists them")
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // The regime is read before the hog starts (the load it adds is the hog's).
    let regime = Regime::now(hog);
    let _hog = hog.then(Hog::start); // stopped when this returns, or with the process
    for g in chosen {
        let header = format!(
            "Runs of this band, appended by `cargo run -- measure {}` (one line a run): {}.",
            g.name, g.runs
        );
        for i in 1..=runs {
            let values = (g.run)();
            let date = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
            let load = basis::load_average().unwrap_or(0.0);
            for band in g.bands {
                let lines: Vec<Run> = values
                    .iter()
                    .filter(|v| v.band == *band)
                    .map(|v| Run {
                        value: v.value,
                        profile: basis::profile().to_owned(),
                        regime,
                        load,
                        date: date.clone(),
                        what: v.what.clone(),
                    })
                    .collect();
                basis::append(&format!("{band}.tsv"), &header, &lines)?;
            }
            let shown: Vec<String> = values
                .iter()
                .map(|v| format!("{}={}", v.band, basis::show(v.value)))
                .collect();
            println!(
                "{} {i}/{runs} {regime}, load {load}: {}",
                g.name,
                shown.join(" ")
            );
        }
    }
    Ok(())
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
    let mut ran = Vec::new();
    for e in &chosen {
        let start = Instant::now();
        let bar = spinner(format!("{:<28} {}", e.name, e.chapter));
        let outcome = panic::catch_unwind(e.run);
        bar.finish_and_clear();
        match outcome {
            Ok(()) => println!("  ok    {:<28} {:>8.2?}", e.name, start.elapsed()),
            Err(_) => println!("  FAIL  {:<28} (see the message above)", e.name),
        }
        ran.push((*e, outcome.is_ok()));
    }
    for path in kit::plot::redrawn() {
        println!("redrew {} (review its diff)", path.display());
    }
    let rows = press::claims::table(&ran, kit::claims::take());
    let table = kit::claims::markdown(&rows);
    let summary = kit::claims::summary(&rows);
    println!("\n{table}\n{summary}");
    kit::measured::record("claims", format!("{table}\n{summary}."))?;
    let failed: Vec<&str> = ran
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(e, _)| e.name)
        .collect();
    let moved = rows.iter().filter(|r| r.failed()).count();
    if !failed.is_empty() || moved > 0 {
        bail!(
            "{} experiment(s) failed ({}) and {moved} row(s) moved. A changed snapshot is left \
             as snapshots/*.snap.new for `cargo insta review`; each moved row names it.",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// Serves the embedded API server, with the book's CRDs installed, until Ctrl-C, logging
/// method, path, query and status.
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
        // The book's custom resources, as a user installs them: their CRDs POSTed.
        controlloop_book::lab::rig::widget::install_widgets(&server.client()).await?;
        println!(
            "embedded API server (Kubernetes {}) at {}, serving the book's Widgets; try: \
             kubectl --server {} get configmaps -w",
            apiserver::KUBERNETES_VERSION,
            server.url(),
            server.url()
        );
        tokio::signal::ctrl_c().await?;
        server.shutdown().await;
        Ok(())
    })
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
         {ESSAY_RECONCILES} reconciles (its formula: reconciles ~ span / cost). Not comparable \
         with the runs above: the essay's writes went into a fake clientset, with no HTTP path.",
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
            Ok(false) => eprintln!(
                "no Go toolchain on PATH: the upstream rows (client-go, controller-runtime) are \
                 left out"
            ),
            Err(e) => eprintln!("the upstream rows are left out: {e}"),
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
    use super::contention;
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
            summary.contains("QUEUE_RECONCILES_PER_ADD not checked; reference runs ")
                && summary.contains("CHANNEL_VIOLATIONS not checked; reference runs ")
        );
        let none = contention(0, |_| {}).unwrap_err().to_string();
        assert_eq!(none, "--runs must be at least 1");
    }
}
