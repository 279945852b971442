//! One benchmark's result, and how its times are written.

use std::time::Duration;

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
