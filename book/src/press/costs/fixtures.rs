//! The estimates and the Go benchmark's output the tests read.

use std::time::Duration;

use super::estimate::Estimate;

/// An estimate of `ns` ns (the interval one ns either side, one element).
pub(super) fn est(id: &str, ns: u64) -> Estimate {
    Estimate {
        id: id.to_owned(),
        median: Duration::from_nanos(ns),
        interval: (Duration::from_nanos(ns - 1), Duration::from_nanos(ns + 1)),
        elements: Some(1),
    }
}

/// A few lines of `go test -bench` output, two rows, one repeated.
pub(super) const GO_OUTPUT: &str = "goos: linux
pkg: controlloop/upstream/bench
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       137.0 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       140.2 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2    \t 2000000\t       136.4 ns/op
BenchmarkWorkqueueContention_16x64x320k/Queue-2 \t 57\t  17500000 ns/op\t 17.00 ms/run\t 320000 reconciles\t 0 violations
PASS
ok  \tcontrolloop/upstream/bench\t12.3s
";

/// Real output of `go test -run '^$' -bench . -cpu 2 -benchtime 2000x ./bench` (a short run
/// on the loaded 2-core machine, 2026-12-04; only the names matter here).
pub(super) const REAL_GO_OUTPUT: &str = "goos: linux
goarch: amd64
pkg: controlloop/upstream/bench
cpu: AMD EPYC
BenchmarkPriorityqueue/add_get_done_1000/rate_limiting_queue-2         \t    2000\t    304234 ns/op
BenchmarkPriorityqueue/add_get_done_1000/rate_limiting_queue/String-2  \t    2000\t    243305 ns/op
BenchmarkPriorityqueue/add_get_done_1000/rate_limiting_queue/Request-2 \t    2000\t    314777 ns/op
BenchmarkPriorityqueue/add_get_done_1000/priority_queue-2              \t    2000\t   2101942 ns/op
BenchmarkPriorityqueue/add_get_done_1000/priority_queue/String-2       \t    2000\t   2120222 ns/op
BenchmarkPriorityqueue/add_get_done_1000/priority_queue/Request-2      \t    2000\t   3075128 ns/op
BenchmarkPriorityqueue/add_duplicate/rate_limiting_queue-2             \t    2000\t        28.81 ns/op
BenchmarkPriorityqueue/add_duplicate/rate_limiting_queue/String-2      \t    2000\t        28.93 ns/op
BenchmarkPriorityqueue/add_duplicate/rate_limiting_queue/Request-2     \t    2000\t        45.67 ns/op
BenchmarkPriorityqueue/add_duplicate/priority_queue-2                  \t    2000\t       299.0 ns/op
BenchmarkPriorityqueue/add_duplicate/priority_queue/String-2           \t    2000\t       185.4 ns/op
BenchmarkPriorityqueue/add_duplicate/priority_queue/Request-2          \t    2000\t        74.38 ns/op
BenchmarkWorkqueue/add_get_done/1_task-2                               \t    2000\t       193.2 ns/op
BenchmarkWorkqueue/add_get_done/1_task/String-2                        \t    2000\t       194.7 ns/op
BenchmarkWorkqueue/add_get_done/1_task/Request-2                       \t    2000\t      1797 ns/op
BenchmarkWorkqueue/add_duplicate/1_task-2                              \t    2000\t        37.22 ns/op
BenchmarkWorkqueue/add_duplicate/1_task/String-2                       \t    2000\t        38.37 ns/op
BenchmarkWorkqueue/add_duplicate/1_task/Request-2                      \t    2000\t        54.06 ns/op
BenchmarkWorkqueue/add_get_done/2_tasks-2                              \t    2000\t       848.0 ns/op
BenchmarkWorkqueue/add_get_done/2_tasks/String-2                       \t    2000\t       439.8 ns/op
BenchmarkWorkqueue/add_get_done/2_tasks/Request-2                      \t    2000\t       409.6 ns/op
BenchmarkWorkqueue/add_duplicate/2_tasks-2                             \t    2000\t        50.94 ns/op
BenchmarkWorkqueue/add_duplicate/2_tasks/String-2                      \t    2000\t        59.26 ns/op
BenchmarkWorkqueue/add_duplicate/2_tasks/Request-2                     \t    2000\t        83.88 ns/op
BenchmarkWorkqueue/add_get_done/16_tasks-2                             \t    2000\t       273.9 ns/op
BenchmarkWorkqueue/add_get_done/16_tasks/String-2                      \t    2000\t       240.7 ns/op
BenchmarkWorkqueue/add_get_done/16_tasks/Request-2                     \t    2000\t       780.3 ns/op
BenchmarkWorkqueue/add_duplicate/16_tasks-2                            \t    2000\t       123.4 ns/op
BenchmarkWorkqueue/add_duplicate/16_tasks/String-2                     \t    2000\t        76.29 ns/op
BenchmarkWorkqueue/add_duplicate/16_tasks/Request-2                    \t    2000\t       142.0 ns/op
BenchmarkWorkqueueContention_16x64x320k/Queue-2                        \t    2000\t  17950407 ns/op\t        17.95 ms/run\t      3825 reconciles\t         0 violations
BenchmarkWorkqueueContention_16x64x320k/Queue/String-2                 \t    2000\t  16476312 ns/op\t        16.48 ms/run\t       384.0 reconciles\t         0 violations
BenchmarkWorkqueueContention_16x64x320k/Queue/Request-2                \t    2000\t  25944057 ns/op\t        25.94 ms/run\t      1969 reconciles\t         0 violations
BenchmarkWorkqueueContention_16x64x320k/Channel-2                      \t    2000\t  94012913 ns/op\t        94.01 ms/run\t    320000 reconciles\t     14445 violations
PASS
ok  \tcontrolloop/upstream/bench\t325.680s
";
