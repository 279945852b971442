//! How a target fared in a run, and which rows a workqueue row is set against.

use super::{
    estimate::{Estimate, time},
    targets::{Goal, Target, key_kind},
};

/// How a target fared in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Met, with the measured figure (a time, or how many times faster than the peer).
    Met(String),
    /// Missed, with the measured figure.
    Missed(String),
    /// The benchmark (or its peer) has no saved estimate.
    NotRun,
}

/// The goal in words: `≤ 70.0 ns`, or `≥ 2.00× `peer``.
pub fn goal_text(goal: &Goal) -> String {
    match *goal {
        Goal::AtMost(limit) => format!("≤ {}", time(limit)),
        Goal::FasterThan { peer, ratio } => format!("≥ {ratio:.2}× `{peer}`"),
    }
}

/// Judges `target` against the estimates of one run.
pub fn judge(target: &Target, estimates: &[Estimate]) -> Verdict {
    let find = |id: &str| estimates.iter().find(|e| e.id == id);
    let Some(e) = find(target.id) else {
        return Verdict::NotRun;
    };
    let (met, text) = match target.goal {
        Goal::AtMost(limit) => (e.median <= limit, time(e.median)),
        Goal::FasterThan { peer, ratio } => {
            let Some(p) = find(peer) else {
                return Verdict::NotRun;
            };
            let measured = p.median.as_secs_f64() / e.median.as_secs_f64();
            (measured >= ratio, format!("{measured:.2}×"))
        }
    };
    if met {
        Verdict::Met(text)
    } else {
        Verdict::Missed(text)
    }
}

/// The floor row (`book/benches/floor.rs`) a workqueue row is set against: `floor/KIND`, and
/// for an add of a key that is already queued `floor/duplicate/KIND`.
pub fn floor_of(row: &str) -> String {
    if row.starts_with("workqueue/add_duplicate/") {
        format!("floor/duplicate/{}", key_kind(row))
    } else {
        format!("floor/{}", key_kind(row))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::press::costs::fixtures::est;

    #[test]
    fn a_ceiling_is_met_at_or_below_and_missed_above() {
        let t = Target {
            id: "q/a",
            goal: Goal::AtMost(Duration::from_nanos(70)),
            why: "",
            reason: None,
        };
        assert!(matches!(judge(&t, &[est("q/a", 70)]), Verdict::Met(_)));
        assert_eq!(
            judge(&t, &[est("q/a", 82)]),
            Verdict::Missed("82.0 ns".to_owned())
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
            reason: None,
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
}
