//! The appendix "What it costs", generated from criterion's saved estimates.
//!
//! No upstream file. Every speed figure in the book comes from a criterion benchmark in
//! `book/benches/`; none is typed. `cargo run --release -- costs --run` runs every benchmark
//! (`cargo bench`), then [`collect`] reads the estimates criterion saved under
//! `target/criterion/`, and [`render`] writes them, with the machine, the load and the date of
//! the run, to `chapters/costs/reference-run.md`, which the appendix includes. Without `--run`
//! the command only re-renders whatever estimates are already saved (after a
//! `cargo bench --bench NAME` of your own, say).
//!
//! client-go's own workqueue is measured in the same sitting: `costs --run` also runs the Go
//! benchmark in `upstream/bench` (the same row names, on client-go v0.36.3) when a Go toolchain
//! is on `PATH` (see `upstream/README.md` for the module setup), saves its output beside
//! criterion's, and [`parse_go_bench`] reads it back as estimates named `client-go:ROW`.
//!
//! Targets are stated two ways: an absolute ceiling ([`Goal::AtMost`]), and a ratio against a
//! peer measured in the same sitting ([`Goal::FasterThan`]) — for the workqueue, client-go
//! itself — which is the only comparison that survives a loaded machine.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

/// Where the generated table goes, inside the book's source folder.
pub const REFERENCE_RUN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../chapters/costs/reference-run.md"
);

/// One benchmark's result, as criterion saved it.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// criterion's id: `group/function[/value]`.
    pub id: String,
    /// The median time of one iteration.
    pub median: Duration,
    /// criterion's 95 % confidence interval of the median.
    pub interval: (Duration, Duration),
    /// Elements per iteration, when the benchmark declared a throughput.
    pub elements: Option<u64>,
}

impl Estimate {
    /// Elements per second at the median, when the benchmark declared a throughput.
    pub fn per_second(&self) -> Option<f64> {
        Some(self.elements? as f64 / self.median.as_secs_f64())
    }
}

/// What a benchmark is expected to achieve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// The median is at most this long.
    AtMost(Duration),
    /// The median is at most `1 / ratio` of the peer benchmark's median, in the same run.
    FasterThan {
        /// The peer's criterion id.
        peer: &'static str,
        /// How many times faster.
        ratio: f64,
    },
}

/// A target: which benchmark, what it must achieve, and why the target is what it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The benchmark's criterion id.
    pub id: &'static str,
    /// The goal.
    pub goal: Goal,
    /// Where the goal comes from.
    pub why: &'static str,
}

/// How the estimates of client-go's benchmark (`upstream/bench`) are named: this prefix, then
/// the row name the port's benchmark uses.
pub const UPSTREAM: &str = "client-go:";

/// The project's speed targets: the workqueue at half of client-go's cost, row for row, in the
/// same sitting.
pub const TARGETS: &[Target] = &[
    Target {
        id: "workqueue/add_get_done/1_task",
        goal: Goal::FasterThan {
            peer: "client-go:workqueue/add_get_done/1_task",
            ratio: 2.0,
        },
        why: "half of client-go's cost, same sitting",
    },
    Target {
        id: "workqueue/add_duplicate/1_task",
        goal: Goal::FasterThan {
            peer: "client-go:workqueue/add_duplicate/1_task",
            ratio: 2.0,
        },
        why: "half of client-go's cost, same sitting",
    },
    Target {
        id: "workqueue/add_get_done/16_tasks",
        goal: Goal::FasterThan {
            peer: "client-go:workqueue/add_get_done/16_tasks",
            ratio: 2.0,
        },
        why: "half of client-go's cost, same sitting",
    },
    Target {
        id: "workqueue/contention_16x64x320k/Queue",
        goal: Goal::FasterThan {
            peer: "client-go:workqueue/contention_16x64x320k/Queue",
            ratio: 1.0,
        },
        why: "no slower than client-go's queue in chapter 01's harness, same sitting",
    },
];

/// Where `costs --run` saves the Go benchmark's output, under the target directory.
pub const UPSTREAM_OUTPUT: &str = "criterion/client-go-bench.txt";

/// Reads `go test -bench` output into estimates named [`UPSTREAM`]`ROW`: the median of a row's
/// `ns/op` over its repetitions (`-count`), with the lowest and highest as the interval. A
/// benchmark's name maps to the port's row by lowering it and splitting its first part at
/// capitals (`BenchmarkWorkqueueContention_16x64x320k/Queue-2` →
/// `workqueue/contention_16x64x320k/Queue`); the `-N` suffix (GOMAXPROCS) is dropped.
pub fn parse_go_bench(output: &str) -> Vec<Estimate> {
    let mut rows: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for line in output.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next().and_then(|n| n.strip_prefix("Benchmark")) else {
            continue;
        };
        let fields: Vec<&str> = fields.collect();
        let Some(ns) = fields
            .windows(2)
            .find(|w| w[1] == "ns/op")
            .and_then(|w| w[0].parse::<f64>().ok())
        else {
            continue;
        };
        let name = match name.rsplit_once('-') {
            Some((n, procs)) if procs.chars().all(|c| c.is_ascii_digit()) => n,
            _ => name,
        };
        let (first, rest) = name
            .split_once('/')
            .map_or((name, None), |(a, b)| (a, Some(b)));
        let mut id = String::new();
        for (i, c) in first.char_indices() {
            if c.is_ascii_uppercase() && i > 0 {
                id.push('/');
            }
            id.push(c.to_ascii_lowercase());
        }
        if let Some(rest) = rest {
            id.push('/');
            id.push_str(rest);
        }
        rows.entry(format!("{UPSTREAM}{id}")).or_default().push(ns);
    }
    let ns = |x: f64| Duration::from_nanos(x.max(0.0).round() as u64);
    rows.into_iter()
        .map(|(id, mut v)| {
            v.sort_by(f64::total_cmp);
            let mid = v.len() / 2;
            let median = if v.len() % 2 == 1 {
                v[mid]
            } else {
                (v[mid - 1] + v[mid]) / 2.0
            };
            Estimate {
                id,
                median: ns(median),
                interval: (ns(v[0]), ns(v[v.len() - 1])),
                elements: None,
            }
        })
        .collect()
}

/// How a target fared in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Met, with the measured figure against the goal.
    Met(String),
    /// Missed, with the measured figure against the goal.
    Missed(String),
    /// The benchmark (or its peer) has no saved estimate.
    NotRun,
}

/// Judges `target` against the estimates of one run.
pub fn judge(target: &Target, estimates: &[Estimate]) -> Verdict {
    let find = |id: &str| estimates.iter().find(|e| e.id == id);
    let Some(e) = find(target.id) else {
        return Verdict::NotRun;
    };
    match target.goal {
        Goal::AtMost(limit) => {
            let text = format!("{} against ≤ {}", time(e.median), time(limit));
            if e.median <= limit {
                Verdict::Met(text)
            } else {
                Verdict::Missed(text)
            }
        }
        Goal::FasterThan { peer, ratio } => {
            let Some(p) = find(peer) else {
                return Verdict::NotRun;
            };
            let measured = p.median.as_secs_f64() / e.median.as_secs_f64();
            let text = format!("{measured:.2}× `{peer}` against ≥ {ratio:.2}×");
            if measured >= ratio {
                Verdict::Met(text)
            } else {
                Verdict::Missed(text)
            }
        }
    }
}

#[derive(Deserialize)]
struct BenchmarkJson {
    full_id: String,
    /// `{"Elements": n}`, `{"Bytes": n}`, … or null.
    throughput: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct EstimatesJson {
    median: PointJson,
}

#[derive(Deserialize)]
struct PointJson {
    point_estimate: f64,
    confidence_interval: IntervalJson,
}

#[derive(Deserialize)]
struct IntervalJson {
    lower_bound: f64,
    upper_bound: f64,
}

/// Why the saved estimates could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CostsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// client-go's benchmark did not build or run; Go's output.
    #[error("upstream/bench (go test -bench) failed:\n{0}")]
    Upstream(String),
    /// A criterion file is not what criterion writes.
    #[error("{path}: not a criterion estimate: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, CostsError> {
    let text = fs::read_to_string(path).map_err(|source| CostsError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| CostsError::Format {
        path: path.to_owned(),
        source,
    })
}

/// Reads every estimate criterion saved under `criterion_dir` (its latest run of each
/// benchmark: the `new/` folder), sorted by id.
pub fn collect(criterion_dir: &Path) -> Result<Vec<Estimate>, CostsError> {
    collect_since(criterion_dir, std::time::SystemTime::UNIX_EPOCH)
}

/// [`collect`], keeping only estimates criterion wrote at or after `since`: a run's own, not
/// those of benchmarks an earlier run left behind.
pub fn collect_since(
    criterion_dir: &Path,
    since: std::time::SystemTime,
) -> Result<Vec<Estimate>, CostsError> {
    let mut out = Vec::new();
    if !criterion_dir.exists() {
        return Ok(out);
    }
    for entry in walkdir::WalkDir::new(criterion_dir) {
        let entry = entry.map_err(|e| CostsError::Io {
            path: criterion_dir.to_owned(),
            source: e.into(),
        })?;
        let p = entry.path();
        if p.file_name().is_none_or(|n| n != "benchmark.json")
            || p.parent()
                .and_then(Path::file_name)
                .is_none_or(|n| n != "new")
        {
            continue;
        }
        let estimates = p.with_file_name("estimates.json");
        let written = fs::metadata(&estimates)
            .and_then(|m| m.modified())
            .map_err(|source| CostsError::Io {
                path: estimates.clone(),
                source,
            })?;
        if written < since {
            continue;
        }
        let bench: BenchmarkJson = read_json(p)?;
        let est: EstimatesJson = read_json(&estimates)?;
        let ns = |x: f64| Duration::from_nanos(x.max(0.0).round() as u64);
        // Only element counts make a rate this appendix shows; byte throughputs are left out.
        let elements = bench.throughput.as_ref().and_then(|t| {
            t.get("Elements")
                .or_else(|| t.get("ElementsAndBytes")?.get("elements"))
                .and_then(serde_json::Value::as_u64)
        });
        out.push(Estimate {
            id: bench.full_id,
            median: ns(est.median.point_estimate),
            interval: (
                ns(est.median.confidence_interval.lower_bound),
                ns(est.median.confidence_interval.upper_bound),
            ),
            elements,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// A duration in the unit that keeps three significant figures readable.
pub fn time(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if v < 10.0 {
        2
    } else if v < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.digits$} {unit}")
}

fn rate(per_second: f64) -> String {
    if per_second >= 1e6 {
        format!("{:.2} M/s", per_second / 1e6)
    } else if per_second >= 1e3 {
        format!("{:.1} k/s", per_second / 1e3)
    } else {
        format!("{per_second:.0} /s")
    }
}

/// Where and when a run happened.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The day of the run (UTC).
    pub date: String,
    /// The CPU model, from `/proc/cpuinfo`.
    pub cpu: String,
    /// Cores available to the run.
    pub cores: usize,
    /// The 1-minute load average when the run started, from `/proc/loadavg`.
    pub load_at_start: String,
    /// `rustc --version`.
    pub rustc: String,
    /// The criterion options the run used.
    pub criterion_args: String,
}

/// The 1-minute load average now, from `/proc/loadavg` ("unknown" where there is none).
pub fn load_average() -> String {
    crate::kit::basis::load_average().map_or_else(|| "unknown".to_owned(), |l| l.to_string())
}

impl RunInfo {
    /// Reads this machine's description; `criterion_args` are the options passed to criterion.
    pub fn here(criterion_args: &str) -> RunInfo {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let load_at_start = load_average();
        let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "unknown rustc".to_owned());
        RunInfo {
            date: jiff::Timestamp::now().strftime("%Y-%m-%d").to_string(),
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_at_start,
            rustc,
            criterion_args: criterion_args.to_owned(),
        }
    }
}

/// Renders one run as the appendix's Markdown: the run, the targets, then every benchmark.
pub fn render(run: &RunInfo, estimates: &[Estimate], targets: &[Target]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "*Run on {date}: {cpu}, {cores} cores, load average {load} at the start; {rustc}; \
         release build; criterion `{args}`. Written by `cargo run --release -- costs --run`.*\n",
        date = run.date,
        cpu = run.cpu,
        cores = run.cores,
        load = run.load_at_start,
        rustc = run.rustc,
        args = run.criterion_args,
    );
    let _ = writeln!(s, "| target | goal's basis | this run | verdict |");
    let _ = writeln!(s, "|---|---|---|---|");
    for t in targets {
        let (figure, verdict) = match judge(t, estimates) {
            Verdict::Met(f) => (f, "met"),
            Verdict::Missed(f) => (f, "**missed**"),
            Verdict::NotRun => ("not run".to_owned(), "—"),
        };
        let _ = writeln!(s, "| `{}` | {} | {figure} | {verdict} |", t.id, t.why);
    }
    let _ = writeln!(s);
    let upstream: Vec<&Estimate> = estimates
        .iter()
        .filter(|e| e.id.starts_with(UPSTREAM))
        .collect();
    if upstream.is_empty() {
        let _ = writeln!(
            s,
            "client-go's benchmark (`upstream/bench`) was not run in this sitting.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "client-go v0.36.3's workqueue, the same rows run by `upstream/bench` in this sitting \
             (`go test -bench`, GOMAXPROCS=2; median of the repetitions, lowest to highest):\n"
        );
        let _ = writeln!(
            s,
            "| row | this crate | client-go | client-go's range | this crate / client-go |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|");
        for g in upstream {
            let row = &g.id[UPSTREAM.len()..];
            let ours = estimates.iter().find(|e| e.id == row);
            let _ = writeln!(
                s,
                "| `{row}` | {} | {} | {} – {} | {} |",
                ours.map(|e| time(e.median))
                    .unwrap_or_else(|| "not run".into()),
                time(g.median),
                time(g.interval.0),
                time(g.interval.1),
                ours.map(|e| format!("{:.2}", e.median.as_secs_f64() / g.median.as_secs_f64()))
                    .unwrap_or_default(),
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "| benchmark | median | 95 % interval of the median | throughput |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    for e in estimates.iter().filter(|e| !e.id.starts_with(UPSTREAM)) {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} – {} | {} |",
            e.id,
            time(e.median),
            time(e.interval.0),
            time(e.interval.1),
            e.per_second().map(rate).unwrap_or_default(),
        );
    }
    s
}

/// Runs client-go's benchmark (`upstream/bench`, 5 repetitions, GOMAXPROCS=2) and saves its
/// output to [`UPSTREAM_OUTPUT`] under `target_dir`. `Ok(false)` when no Go toolchain is on
/// `PATH`; an error, with Go's own words, when the module cannot build (see
/// `upstream/README.md` for an offline module setup).
pub fn run_upstream_bench(target_dir: &Path) -> Result<bool, CostsError> {
    let upstream = crate::repo().join("upstream");
    let io = |source| CostsError::Io {
        path: upstream.clone(),
        source,
    };
    let path = target_dir.join(UPSTREAM_OUTPUT);
    // A failed run leaves no earlier run's figures behind to be read as this sitting's.
    let _ = fs::remove_file(&path);
    let go_found = std::process::Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go_found {
        return Ok(false);
    }
    let out = std::process::Command::new("go")
        .args([
            "test", "-run", "^$", "-bench", ".", "-cpu", "2", "-count", "5",
        ])
        .arg("./bench")
        .current_dir(&upstream)
        .output()
        .map_err(io)?;
    if !out.status.success() {
        return Err(CostsError::Upstream(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    fs::create_dir_all(path.parent().expect("a parent folder")).map_err(io)?;
    fs::write(&path, &out.stdout).map_err(|source| CostsError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(true)
}

/// Reads the Go benchmark's saved output under `target_dir`, if a run saved one.
pub fn collect_upstream(target_dir: &Path) -> Result<Vec<Estimate>, CostsError> {
    let path = target_dir.join(UPSTREAM_OUTPUT);
    match fs::read_to_string(&path) {
        Ok(text) => Ok(parse_go_bench(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(CostsError::Io { path, source }),
    }
}

/// Writes `text` to [`REFERENCE_RUN`].
pub fn write_reference_run(text: &str) -> Result<PathBuf, CostsError> {
    let path = PathBuf::from(REFERENCE_RUN);
    let io = |source| CostsError::Io {
        path: path.clone(),
        source,
    };
    fs::create_dir_all(path.parent().expect("a parent folder")).map_err(io)?;
    fs::write(&path, text).map_err(io)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(id: &str, ns: u64) -> Estimate {
        Estimate {
            id: id.to_owned(),
            median: Duration::from_nanos(ns),
            interval: (Duration::from_nanos(ns - 1), Duration::from_nanos(ns + 1)),
            elements: Some(1),
        }
    }

    const GO_OUTPUT: &str = "goos: linux
pkg: controlloop/upstream/bench
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       137.0 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       140.2 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       136.4 ns/op
BenchmarkWorkqueueContention_16x64x320k/Queue-2 \t 57\t  17500000 ns/op\t 17.00 ms/run\t 320000 reconciles\t 0 violations
PASS
ok  \tcontrolloop/upstream/bench\t12.3s
";

    #[test]
    fn go_bench_output_is_read_as_the_ports_rows() {
        let got = parse_go_bench(GO_OUTPUT);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].id, "client-go:workqueue/add_get_done/1_task");
        assert_eq!(got[0].median, Duration::from_nanos(137));
        assert_eq!(
            got[0].interval,
            (Duration::from_nanos(136), Duration::from_nanos(140))
        );
        assert_eq!(got[1].id, "client-go:workqueue/contention_16x64x320k/Queue");
        assert_eq!(
            got[1].median,
            Duration::from_millis(17) + Duration::from_micros(500)
        );
        // Every target's peer is a row the Go benchmark prints under this naming.
        for t in TARGETS {
            if let Goal::FasterThan { peer, .. } = t.goal {
                assert!(peer.starts_with(UPSTREAM), "{peer}");
            }
        }
    }

    #[test]
    fn a_ceiling_is_met_at_or_below_and_missed_above() {
        let t = Target {
            id: "q/a",
            goal: Goal::AtMost(Duration::from_nanos(70)),
            why: "",
        };
        assert!(matches!(judge(&t, &[est("q/a", 70)]), Verdict::Met(_)));
        assert_eq!(
            judge(&t, &[est("q/a", 82)]),
            Verdict::Missed("82.0 ns against ≤ 70.0 ns".to_owned())
        );
        assert_eq!(judge(&t, &[est("q/b", 1)]), Verdict::NotRun);
    }

    #[test]
    fn a_ratio_is_judged_against_the_peer_in_the_same_run() {
        let t = Target {
            id: "ours",
            goal: Goal::FasterThan {
                peer: "theirs",
                ratio: 1.5,
            },
            why: "",
        };
        assert!(matches!(
            judge(&t, &[est("ours", 100), est("theirs", 150)]),
            Verdict::Met(_)
        ));
        assert!(matches!(
            judge(&t, &[est("ours", 100), est("theirs", 149)]),
            Verdict::Missed(_)
        ));
        assert_eq!(judge(&t, &[est("ours", 100)]), Verdict::NotRun);
    }

    #[test]
    fn collect_reads_what_criterion_saves() {
        let dir = std::env::temp_dir().join(format!("costs-{}", std::process::id()));
        let new = dir.join("workqueue/add_get_done/1_task/new");
        fs::create_dir_all(&new).unwrap();
        fs::write(
            new.join("benchmark.json"),
            r#"{"group_id":"workqueue","function_id":"add_get_done","value_str":"1_task",
               "throughput":{"Elements":1},"full_id":"workqueue/add_get_done/1_task",
               "directory_name":"workqueue/add_get_done/1_task","title":"t"}"#,
        )
        .unwrap();
        fs::write(
            new.join("estimates.json"),
            r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":80.0,
               "upper_bound":90.0},"point_estimate":85.0,"standard_error":1.0},
               "median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":81.0,
               "upper_bound":83.7},"point_estimate":82.2,"standard_error":1.0}}"#,
        )
        .unwrap();
        // criterion's `base/` copy of an earlier run is not read.
        fs::create_dir_all(dir.join("workqueue/add_get_done/1_task/base")).unwrap();
        let got = collect(&dir).unwrap();
        assert_eq!(got.len(), 1);
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        assert!(
            collect_since(&dir, later).unwrap().is_empty(),
            "an earlier run's estimate"
        );
        assert_eq!(got[0].id, "workqueue/add_get_done/1_task");
        assert_eq!(got[0].median, Duration::from_nanos(82));
        let text = render(&RunInfo::here("--quick"), &got, &TARGETS[..1]);
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | 82.0 ns | 81.0 ns – 84.0 ns | 12.20 M/s |"
            ),
            "{text}"
        );
        assert!(text.contains("not run | — |"), "{text}");
        assert!(text.contains("was not run in this sitting"), "{text}");
        // With client-go's rows from the same sitting, the ratio target is judged.
        let mut both = got.clone();
        both.extend(parse_go_bench(GO_OUTPUT));
        both.sort_by(|a, b| a.id.cmp(&b.id));
        let text = render(&RunInfo::here("--quick"), &both, &TARGETS[..1]);
        assert!(
            text.contains(
                "| 1.67× `client-go:workqueue/add_get_done/1_task` against ≥ 2.00× | **missed** |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | 82.0 ns | 137 ns | 136 ns – 140 ns | 0.60 |"
            ),
            "{text}"
        );
        assert!(
            !text.contains("| `client-go:"),
            "client-go rows stay out of the port's table: {text}"
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
