//! Test controls: the request log and the fault switch.
//!
//! Nothing here exists in a real API server. These are the knobs later chapters turn to show
//! what a client does when the server misbehaves: slow answers, 429 and 500 with
//! `Retry-After`, and a log of exactly which requests a client made.
//!
//! # Invariants
//! 1. The request log holds the newest records whose charged bytes (strings plus
//!    [`RECORD_OVERHEAD`]) add up to at most its limit, and always the newest one; older
//!    records are dropped first and counted in `dropped`.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

/// One request as the server answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestRecord {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, e.g. `/api/v1/namespaces/default/configmaps`.
    pub path: String,
    /// The raw query string, empty if none.
    pub query: String,
    /// The HTTP status of the response (200 for a watch, whose errors travel in the stream).
    pub status: u16,
}

impl RequestRecord {
    /// Whether this was a watch request.
    pub fn is_watch(&self) -> bool {
        self.query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
    }
}

/// Bytes charged for a record beyond its strings.
pub(crate) const RECORD_OVERHEAD: usize = 96;

impl RequestRecord {
    fn cost(&self) -> usize {
        RECORD_OVERHEAD
            .saturating_add(self.method.len())
            .saturating_add(self.path.len())
            .saturating_add(self.query.len())
    }
}

/// The request log, bounded in bytes (keeps I1).
#[derive(Debug)]
pub(crate) struct RequestLog {
    records: VecDeque<RequestRecord>,
    bytes: usize,
    limit: usize,
    dropped: u64,
}

impl RequestLog {
    pub fn new(limit: usize) -> Self {
        RequestLog {
            records: VecDeque::new(),
            bytes: 0,
            limit,
            dropped: 0,
        }
    }

    pub fn push(&mut self, r: RequestRecord) {
        self.bytes = self.bytes.saturating_add(r.cost());
        self.records.push_back(r);
        while self.bytes > self.limit && self.records.len() > 1 {
            let old = self.records.pop_front().expect("non-empty");
            self.bytes = self.bytes.saturating_sub(old.cost());
            self.dropped = self.dropped.saturating_add(1);
        }
    }

    /// The retained records, oldest first.
    pub fn records(&mut self) -> &[RequestRecord] {
        self.records.make_contiguous()
    }

    pub fn clear(&mut self) {
        self.records.clear();
        self.bytes = 0;
    }

    /// Records dropped to keep the bound, since the server started.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// How the fault switch fails a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// 429 TooManyRequests, as API priority and fairness answers when it sheds load.
    TooManyRequests,
    /// 500 InternalError.
    InternalError,
}

/// The pending faults. Discovery requests are exempt, so clients can still find resources.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    fail: Option<(Failure, u64, usize)>,
    slow: Option<(Duration, usize)>,
}

/// What the switch decided for one request.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Decision {
    pub delay: Option<Duration>,
    pub fail: Option<(Failure, u64)>,
}

impl Faults {
    pub fn fail_next(&mut self, n: usize, failure: Failure, retry_after_secs: u64) {
        self.fail = (n > 0).then_some((failure, retry_after_secs, n));
    }

    pub fn slow_next(&mut self, n: usize, delay: Duration) {
        self.slow = (n > 0).then_some((delay, n));
    }

    /// Consumes one request's worth of each pending fault.
    pub fn take(&mut self) -> Decision {
        let mut d = Decision::default();
        if let Some((delay, n)) = self.slow.as_mut() {
            d.delay = Some(*delay);
            *n -= 1;
            if *n == 0 {
                self.slow = None;
            }
        }
        if let Some((f, retry, n)) = self.fail.as_mut() {
            d.fail = Some((*f, *retry));
            *n -= 1;
            if *n == 0 {
                self.fail = None;
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_log_keeps_the_newest_records_within_its_byte_limit() {
        let rec = |i: usize| RequestRecord {
            method: "GET".into(),
            path: format!("/p/{i:04}"),
            query: "x".repeat(100),
            status: 200,
        };
        let one = rec(0).cost();
        let mut log = RequestLog::new(10 * one);
        for i in 0..1_000 {
            log.push(rec(i));
        }
        assert_eq!(log.records().len(), 10); // keeps I1
        assert_eq!(log.records()[0].path, "/p/0990");
        assert_eq!((log.dropped(), log.bytes()), (990, 10 * one));
        let mut tiny = RequestLog::new(1);
        tiny.push(rec(1));
        tiny.push(rec(2));
        assert_eq!(tiny.records().len(), 1, "the newest record always stays");
    }

    #[test]
    fn each_fault_applies_to_exactly_the_next_n_requests() {
        let mut f = Faults::default();
        f.fail_next(2, Failure::TooManyRequests, 3);
        f.slow_next(1, Duration::from_millis(5));
        assert_eq!(
            f.take(),
            Decision {
                delay: Some(Duration::from_millis(5)),
                fail: Some((Failure::TooManyRequests, 3))
            }
        );
        assert_eq!(
            f.take(),
            Decision {
                delay: None,
                fail: Some((Failure::TooManyRequests, 3))
            }
        );
        assert_eq!(f.take(), Decision::default());
    }
}
