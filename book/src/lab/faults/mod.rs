//! Chapter 12's fault matrix: every fault a real cluster produces, injected into one write
//! storm, against the level-triggered controller and chapter 07's edge-triggered one.
//!
//! No upstream file: the faults are the ones client-go's reflector and controller-runtime's
//! controller are written to survive (client-go v0.36.3 `tools/cache/reflector.go`: a watch
//! that closes, a 410 on resume, a throttled or failing server; controller-runtime v0.24.1
//! `pkg/internal/controller/controller.go`: a reconciler that errors or panics, a stop in the
//! middle of work). The two designs are [`crate::lab::designs::trigger`]'s, armed with [`Hooks`] at the two
//! places a fault can reach a controller's own code.
//!
//! The level design's column in the six rows a fake clientset can play (events dropped,
//! reconciler panics, reconciler errors, status-write storm, shutdown, restart) is recorded on
//! controller-runtime v0.22.5, v0.24.1 and v0.25.3 (`upstream/recorded/
//! controller_runtime_vX_fault_matrix.txt`); `book/tests/recorded_upstream.rs` runs
//! [`run_async`] on each release's queues, and [`run_on_fake`] over the port's fake clientset
//! (no resourceVersions, as the recordings' first section), and compares every [`Outcome`] it
//! prints with them.
//!
//! ```text
//!  writer: 4 widgets × 50 writes, 1 ms apart ──► API server (in-process) ──watch──► informer
//!          └ at write 125: the fault ──────────┘      ▲ list on 410 / restart      │ handler
//!                                                     └────────────────────────────┤
//!             world (replicas per widget) ◄── reconcile ◄── queue ◄────────────────┘
//!  then: wait until the cache has heard every write and nothing is queued, delayed, dirty,
//!  processing or running; compare the world with the last value written to each widget
//! ```
//!
//! Each design runs alone on its own cluster, so the server's request log counts its lists.
//! Everything but [`Fault::SlowHandler`] runs under tokio's paused clock, so those rows are
//! exact and repeat exactly; the slow handler blocks its thread, which only the real clock
//! can show, and its run-specific numbers are bands.
//!
//! # Invariants
//! 1. Both designs see the same writes, drive the same kind of
//!    [`Downstream`](crate::lab::designs::trigger::Downstream), call the same [`Hooks`] at the
//!    same places, and retry a failure or a panic with `add_rate_limited`.
//! 2. Every await in a run is bounded: writes and waits by `Setup::limit`
//!    ([`within`](crate::lab::rig::within)), quiescence by the same deadline.
//! 3. A crashed process is restarted at once and counted; a killed or crashed process loses its
//!    informer, queue and workers; only the cluster and the world survive.
//!
//! # Concurrency
//! One runtime per run; each process's informer, controller and workers are tokio tasks. The
//! hooks are atomics and `parking_lot` mutexes, never held across an await.
//!
//! # Differences from upstream
//! - A crashed process restarts at once, without a kubelet's back-off.
//! - A restarted API server keeps its data but refuses every earlier revision
//!   ([`Cluster::restart`](controlloop::apiserver::Cluster::restart)), so every informer relists; a
//!   kube-apiserver's new watch cache refuses only revisions older than its first list.

pub mod bands;
pub mod hooks;
pub mod on_fake;
pub mod storm;

mod matrix;
mod types;

pub use crate::lab::designs::trigger::{Backlog, Backoff};
pub use hooks::{Hooks, INJECTED, quiet_injected_panics};
pub use matrix::{Row, errors_with_per_item_backoff, faults, matrix};
pub use on_fake::{FakeSource, run_on_fake};
pub use storm::{
    DROPPED, HANDLER_DELAY, NAMESPACE, Node, OUTAGE, RETRY_AFTER, STATUS_WRITES, Writer, converged,
    faulty_write, is_list, last_reconcile, run_async, widget,
};
pub use types::{Fault, Outcome, Setup, Wrong};
