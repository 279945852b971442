//! The upstream queues in the same sitting: running the Go benchmark (`upstream/bench`) and
//! reading its output back as estimates named after whose code ran.

use std::{fs, path::Path, time::Duration};

use super::{error::CostsError, estimate::Estimate};

/// How the estimates of client-go's queues in the Go benchmark (`upstream/bench`) are named:
/// this prefix, then the row name the port's benchmark uses.
pub const UPSTREAM: &str = "client-go:";

/// How the estimates of controller-runtime's priority queue in the Go benchmark are named.
pub const CONTROLLER_RUNTIME: &str = "controller-runtime:";

/// Every prefix [`parse_go_bench`] gives a row, one per upstream library.
pub const UPSTREAMS: &[&str] = &[UPSTREAM, CONTROLLER_RUNTIME];

/// Whose code a Go benchmark row ran, as its prefix: the `priority_queue` rows of the
/// `priorityqueue/` group are controller-runtime's priority queue; every other row, the
/// `rate_limiting_queue` rows of that group included (client-go's rate-limiting queue with
/// controller-runtime's default limiter), is client-go's.
pub fn upstream_of(row: &str) -> &'static str {
    let mut parts = row.split('/');
    if parts.next() == Some("priorityqueue") && parts.any(|p| p == "priority_queue") {
        CONTROLLER_RUNTIME
    } else {
        UPSTREAM
    }
}

/// Splits an upstream estimate's id into its prefix and the port's row name.
pub fn split_upstream(id: &str) -> Option<(&'static str, &str)> {
    UPSTREAMS
        .iter()
        .find_map(|p| id.strip_prefix(p).map(|row| (*p, row)))
}

/// Where `costs --run` saves the Go benchmark's output, under the target directory.
pub const UPSTREAM_OUTPUT: &str = "criterion/client-go-bench.txt";

/// Reads `go test -bench` output into estimates named `PREFIX` `ROW`, the prefix saying whose
/// code ran ([`upstream_of`]): the median of a row's `ns/op` over its repetitions (`-count`),
/// with the lowest and highest as the interval. A benchmark's name maps to the port's row by
/// lowering it and splitting its first part at capitals
/// (`BenchmarkWorkqueueContention_16x64x320k/Queue/Request-2` →
/// `client-go:workqueue/contention_16x64x320k/Queue/Request`,
/// `BenchmarkPriorityqueue/add_duplicate/priority_queue-2` →
/// `controller-runtime:priorityqueue/add_duplicate/priority_queue`); the `-N` suffix
/// (GOMAXPROCS) is dropped.
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
        rows.entry(format!("{}{id}", upstream_of(&id)))
            .or_default()
            .push(ns);
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

/// Runs the upstream benchmark (`upstream/bench`: client-go's queues and controller-runtime's
/// priority queue; 5 repetitions, GOMAXPROCS=2) and saves its output to [`UPSTREAM_OUTPUT`] under `target_dir`. `Ok(false)` when no Go toolchain is on
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::press::costs::fixtures::{GO_OUTPUT, REAL_GO_OUTPUT};

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
    }

    /// The ids the port's benchmarks and the Go benchmark share: every row in its three key
    /// kinds, prefixed by whose code ran.
    fn contract_ids() -> std::collections::BTreeSet<String> {
        let mut rows: Vec<(&str, String)> = Vec::new();
        for op in ["add_get_done", "add_duplicate"] {
            for tasks in ["1_task", "2_tasks", "16_tasks"] {
                rows.push((UPSTREAM, format!("workqueue/{op}/{tasks}")));
            }
        }
        rows.push((UPSTREAM, "workqueue/contention_16x64x320k/Queue".into()));
        for group in ["add_get_done_1000", "add_duplicate"] {
            rows.push((
                UPSTREAM,
                format!("priorityqueue/{group}/rate_limiting_queue"),
            ));
            rows.push((
                CONTROLLER_RUNTIME,
                format!("priorityqueue/{group}/priority_queue"),
            ));
        }
        let mut ids: std::collections::BTreeSet<String> = rows
            .iter()
            .flat_map(|(prefix, row)| {
                ["", "/String", "/Request"].map(|kind| format!("{prefix}{row}{kind}"))
            })
            .collect();
        ids.insert(format!("{UPSTREAM}workqueue/contention_16x64x320k/Channel"));
        ids
    }

    #[test]
    fn real_go_output_yields_exactly_the_contracts_ids() {
        let got: std::collections::BTreeSet<String> = parse_go_bench(REAL_GO_OUTPUT)
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(got, contract_ids());
        assert!(
            got.contains(
                "controller-runtime:priorityqueue/add_get_done_1000/priority_queue/Request"
            )
        );
        assert!(got.contains("client-go:priorityqueue/add_duplicate/rate_limiting_queue/String"));
        assert!(got.contains("client-go:workqueue/contention_16x64x320k/Queue/Request"));
    }

    #[test]
    fn a_go_row_is_named_after_whose_code_ran() {
        assert_eq!(
            upstream_of("priorityqueue/add_duplicate/priority_queue/Request"),
            CONTROLLER_RUNTIME
        );
        assert_eq!(
            upstream_of("priorityqueue/add_duplicate/rate_limiting_queue"),
            UPSTREAM
        );
        assert_eq!(upstream_of("workqueue/add_duplicate/1_task"), UPSTREAM);
        // A workqueue row never is controller-runtime's, whatever its last part says.
        assert_eq!(upstream_of("workqueue/priority_queue"), UPSTREAM);
        assert_eq!(
            split_upstream("controller-runtime:priorityqueue/add_duplicate/priority_queue"),
            Some((
                CONTROLLER_RUNTIME,
                "priorityqueue/add_duplicate/priority_queue"
            ))
        );
        assert_eq!(split_upstream("workqueue/add_duplicate/1_task"), None);
    }
}
