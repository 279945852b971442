//! Reading the estimates criterion saved under `target/criterion/`.

use std::{fs, path::Path, time::Duration};

use serde::Deserialize;

use super::{error::CostsError, estimate::Estimate};

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

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::press::costs::{RunInfo, TARGETS, fixtures::GO_OUTPUT, parse_go_bench, render};

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
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | ≥ 2.00× `client-go:workqueue/add_get_done/1_task` \
                 | half of client-go's cost on the same row and keys, same sitting | not run |"
            ),
            "{text}"
        );
        assert!(text.contains("was not run in this sitting"), "{text}");
        // With client-go's rows from the same sitting, the ratio target is judged.
        let mut both = got.clone();
        both.extend(parse_go_bench(GO_OUTPUT));
        both.sort_by(|a, b| a.id.cmp(&b.id));
        let text = render(&RunInfo::here("--quick"), &both, &TARGETS[..1]);
        assert!(text.contains("| **missed**, 1.67× |"), "{text}");
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | client-go | 82.0 ns | 137 ns | 136 ns – 140 ns \
                 | 0.60 |"
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
