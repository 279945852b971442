//! The appendix's Markdown: the run, the targets and their verdicts, the reasons beside the
//! missed ones, the upstream rows, the floor, and every benchmark.

use std::fmt::Write as _;

use super::{
    estimate::{Estimate, time},
    reference_run::RunInfo,
    targets::{Reason, Target, key_kind},
    upstream::{UPSTREAM, split_upstream},
    verdict::{Verdict, floor_of, goal_text, judge},
};

fn rate(per_second: f64) -> String {
    if per_second >= 1e6 {
        format!("{:.2} M/s", per_second / 1e6)
    } else if per_second >= 1e3 {
        format!("{:.1} k/s", per_second / 1e3)
    } else {
        format!("{per_second:.0} /s")
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
    let _ = writeln!(s, "| target | goal | goal's basis | verdict, measured |");
    let _ = writeln!(s, "|---|---|---|---|");
    // The missed targets with a reason, grouped by reason and key kind, each with its figure.
    type Missed<'a> = Vec<(&'a Target, String)>;
    let mut why: Vec<((&Reason, &str), Missed)> = vec![];
    for t in targets {
        let verdict = match judge(t, estimates) {
            Verdict::Met(f) => format!("met, {f}"),
            Verdict::Missed(f) => {
                let reading = t.reason.and_then(|r| Some((r, r.reading(t, estimates)?)));
                match reading {
                    Some((r, (_, at))) => {
                        let group = (r, key_kind(t.id));
                        match why.iter_mut().find(|(g, _)| *g == group) {
                            Some((_, ts)) => ts.push((t, f.clone())),
                            None => why.push((group, vec![(t, f.clone())])),
                        }
                        format!("**missed**, {f}; {}: {at:.2}×", r.short)
                    }
                    None => format!("**missed**, {f}"),
                }
            }
            Verdict::NotRun => "not run".to_owned(),
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {verdict} |",
            t.id,
            goal_text(&t.goal),
            t.why
        );
    }
    let _ = writeln!(s);
    if !why.is_empty() {
        let _ = writeln!(
            s,
            "Beside each missed target, rows of this run whose times add up to what the note \
             after its verdict names, set against the target's peer as the target is:\n"
        );
        for ((reason, kind), missed) in &why {
            let fill = |text: &str| text.replace("{kind}", kind);
            let (first, _) = missed[0];
            let rows = reason.rows_for(first.id);
            let parts: Vec<String> = rows
                .iter()
                .map(|row| {
                    let t = estimates
                        .iter()
                        .find(|e| &e.id == row)
                        .map_or_else(|| "not run".to_owned(), |e| time(e.median));
                    format!("`{row}` {t}")
                })
                .collect();
            let _ = write!(s, "- **{}** ({}):", reason.short, parts.join(" + "));
            for (i, (t, measured)) in missed.iter().enumerate() {
                let sep = if i == 0 { " " } else { "; " };
                if let Some((sum, at)) = reason.reading(t, estimates) {
                    let sum = if rows.len() > 1 {
                        format!("{} = ", time(sum))
                    } else {
                        String::new()
                    };
                    let _ = write!(s, "{sep}`{}` {measured}, {sum}{at:.2}×", t.id);
                }
            }
            let _ = write!(s, ". {}", fill(reason.what));
            if !reason.tried.is_empty() {
                let _ = write!(s, " Tried: {}", fill(reason.tried));
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
    }
    let find = |id: &str| estimates.iter().find(|e| e.id == id);
    let upstream: Vec<(&str, &str, &Estimate)> = estimates
        .iter()
        .filter_map(|e| split_upstream(&e.id).map(|(p, row)| (p, row, e)))
        .collect();
    if upstream.is_empty() {
        let _ = writeln!(
            s,
            "The upstream benchmark (`upstream/bench`) was not run in this sitting.\n"
        );
    } else {
        let _ = writeln!(
            s,
            "The upstream queues on the same rows, run by `upstream/bench` in this sitting \
             (`go test -bench`, GOMAXPROCS=2; median of the repetitions, lowest to highest): \
             `client-go` is client-go v0.37.2's workqueue and, in the `priorityqueue` rows, its \
             rate-limiting queue with controller-runtime's default limiter; \
             `controller-runtime` is controller-runtime v0.25.3's priority queue.\n"
        );
        let _ = writeln!(
            s,
            "| row | upstream | this crate | upstream's median | upstream's range | this crate / upstream |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for &(prefix, row, g) in &upstream {
            let ours = find(row);
            let _ = writeln!(
                s,
                "| `{row}` | {} | {} | {} | {} – {} | {} |",
                prefix.trim_end_matches(':'),
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
    // The workqueue's add rows against the floor of their key kind, ours and client-go's.
    let mut rows: Vec<&str> = estimates
        .iter()
        .map(|e| split_upstream(&e.id).map_or(e.id.as_str(), |(_, row)| row))
        .filter(|row| row.starts_with("workqueue/add_"))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    if rows.iter().any(|row| find(&floor_of(row)).is_some()) {
        let _ = writeln!(
            s,
            "The workqueue's rows against the floor of their kind of key, this run: for an \
             add+get+done, `floor/KIND` (one lock, one hash-set insert and remove, one \
             ring-buffer push and pop, one clone of an owned key); for an add of a queued key, \
             `floor/duplicate/KIND` (one hash, one lock, one probe that finds the key). A \
             lower-bound estimate of the single-thread path, not a target.\n"
        );
        let _ = writeln!(
            s,
            "| row | floor | this crate | × floor | client-go | client-go × floor |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        let times = |e: Option<&Estimate>, floor: Option<&Estimate>| match (e, floor) {
            (Some(e), Some(f)) => (
                time(e.median),
                format!("{:.1}", e.median.as_secs_f64() / f.median.as_secs_f64()),
            ),
            (Some(e), None) => (time(e.median), String::new()),
            (None, _) => ("not run".to_owned(), String::new()),
        };
        for row in rows {
            let floor_id = floor_of(row);
            let floor = find(&floor_id);
            let (ours, ours_x) = times(find(row), floor);
            let (go, go_x) = times(find(&format!("{UPSTREAM}{row}")), floor);
            let _ = writeln!(
                s,
                "| `{row}` | {} | {ours} | {ours_x} | {go} | {go_x} |",
                floor.map_or_else(|| "not run".to_owned(), |f| time(f.median)),
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "| benchmark | median | 95 % interval of the median | throughput |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    for e in estimates.iter().filter(|e| split_upstream(&e.id).is_none()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::press::costs::{Goal, TARGETS, fixtures::est};

    #[test]
    fn every_target_has_a_verdict_row_with_the_measured_ratio() {
        let run = RunInfo::here("--quick");
        let text = render(&run, &[], TARGETS);
        for t in TARGETS {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` | ≥", t.id)))
                .unwrap_or_else(|| panic!("no target row for {}: {text}", t.id));
            assert!(line.ends_with("| not run |"), "{line}");
        }
        // With every target and peer measured, each row says met or missed, with the ratio.
        let mut all = Vec::new();
        for (n, t) in TARGETS.iter().enumerate() {
            let Goal::FasterThan { peer, .. } = t.goal else {
                continue;
            };
            all.push(est(t.id, 100));
            // Peers shared by two targets get the first time; a target at 100 ns against a
            // peer at 100 + 50·n ns is faster by 1 + n/2.
            if !all.iter().any(|e| e.id == peer) {
                all.push(est(peer, 100 + 50 * n as u64));
            }
        }
        let text = render(&run, &all, TARGETS);
        let first = &TARGETS[0];
        assert!(
            text.contains(&format!("| `{}` | ≥ 2.00×", first.id))
                && text.contains("| **missed**, 1.00× |"),
            "{text}"
        );
        let verdicts = text
            .lines()
            .filter(|l| {
                l.ends_with("× |") && (l.contains("| met, ") || l.contains("| **missed**, "))
            })
            .count();
        assert_eq!(verdicts, TARGETS.len(), "{text}");
    }

    #[test]
    fn the_workqueue_rows_are_set_against_the_floor_of_their_key_kind() {
        assert_eq!(key_kind("workqueue/add_get_done/16_tasks"), "str");
        assert_eq!(key_kind("workqueue/add_duplicate/1_task/String"), "String");
        assert_eq!(
            floor_of("workqueue/add_duplicate/2_tasks/Request"),
            "floor/duplicate/Request"
        );
        assert_eq!(floor_of("workqueue/add_get_done/2_tasks"), "floor/str");
        let estimates = vec![
            est("client-go:workqueue/add_get_done/1_task", 123),
            est("client-go:workqueue/add_get_done/1_task/Request", 250),
            est("floor/str", 41),
            est("workqueue/add_get_done/1_task", 82),
            est("workqueue/add_get_done/1_task/Request", 160),
        ];
        let text = render(&RunInfo::here("--quick"), &estimates, &[]);
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task` | 41.0 ns | 82.0 ns | 2.0 | 123 ns | 3.0 |"
            ),
            "{text}"
        );
        // No floor/Request in this run: the times, and no multiples.
        assert!(
            text.contains(
                "| `workqueue/add_get_done/1_task/Request` | not run | 160 ns |  | 250 ns |  |"
            ),
            "{text}"
        );
        // Without any floor the table is left out.
        let text = render(&RunInfo::here("--quick"), &estimates[..2], &[]);
        assert!(!text.contains("× floor"), "{text}");
    }

    /// A missed target with a reason shows its reading in the verdict column and, below the
    /// table, the reason's rows, their sum, the reading, what they are and what was tried,
    /// once per reason and key kind. A met target, or a reason whose rows did not run, shows
    /// no reading.
    #[test]
    fn a_missed_target_is_shown_with_its_reason() {
        const R: Reason = Reason {
            short: "the floor and the clone alone",
            what: "what `{kind}` costs.",
            rows: &["floor/{kind}", "clone/{kind}"],
            tried: "cloning less for `{kind}`.",
        };
        let target = |id: &'static str, peer: &'static str| Target {
            id,
            goal: Goal::FasterThan { peer, ratio: 2.0 },
            why: "half",
            reason: Some(&R),
        };
        let targets = [
            target("q/a/String", "go:q/a/String"),
            target("q/b/String", "go:q/b/String"),
            target("q/c/String", "go:q/c/String"),
            target("q/a/Request", "go:q/a/Request"),
        ];
        let estimates = vec![
            est("q/a/String", 100),
            est("go:q/a/String", 150),
            est("q/b/String", 120),
            est("go:q/b/String", 180),
            est("q/c/String", 10),
            est("go:q/c/String", 180),
            est("q/a/Request", 100),
            est("go:q/a/Request", 150),
            est("floor/String", 60),
            est("clone/String", 30),
            est("floor/Request", 70),
        ];
        let text = render(&RunInfo::here("--quick"), &estimates, &targets);
        assert!(
            text.contains("| **missed**, 1.50×; the floor and the clone alone: 1.67× |"),
            "{text}"
        );
        assert!(
            text.contains("| `q/c/String` | ≥ 2.00× `go:q/c/String` | half | met, 18.00× |"),
            "{text}"
        );
        assert!(
            text.contains(
                "- **the floor and the clone alone** (`floor/String` 60.0 ns + `clone/String` \
                 30.0 ns): `q/a/String` 1.50×, 90.0 ns = 1.67×; `q/b/String` 1.50×, 90.0 ns = \
                 2.00×. what `String` costs. Tried: cloning less for `String`.\n"
            ),
            "{text}"
        );
        // No clone/Request in this run: the verdict alone, and no line for Request.
        assert!(
            text.contains(
                "| `q/a/Request` | ≥ 2.00× `go:q/a/Request` | half | **missed**, 1.50× |"
            ),
            "{text}"
        );
        assert!(!text.contains("`floor/Request` 70.0 ns"), "{text}");
    }

    #[test]
    fn the_priority_queue_rows_name_their_upstream() {
        let estimates = vec![
            est(
                "controller-runtime:priorityqueue/add_duplicate/priority_queue",
                300,
            ),
            est(
                "client-go:priorityqueue/add_duplicate/rate_limiting_queue",
                30,
            ),
            est("priorityqueue/add_duplicate/priority_queue", 100),
        ];
        let text = render(&RunInfo::here("--quick"), &estimates, &TARGETS[..0]);
        assert!(
            text.contains(
                "| `priorityqueue/add_duplicate/priority_queue` | controller-runtime | 100 ns | 300 ns \
                 | 299 ns – 301 ns | 0.33 |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| `priorityqueue/add_duplicate/rate_limiting_queue` | client-go | not run | 30.0 ns"
            ),
            "{text}"
        );
    }
}
