//! Leader election on a Lease: one of several replicas leads, the others wait to take over.
//! Follows kubernetes/client-go v0.37.2 `tools/leaderelection/leaderelection.go` and
//! `resourcelock/leaselock.go`, and v0.38.0-beta.0's release check, write gate
//! (`writegate.go`) and `Recovery` mode.
//!
//! Every candidate runs a [`LeaderElector`] on the same lock (a [`LeaseLock`]: a
//! `coordination.k8s.io/v1` Lease). The holder writes its identity and a renew time into the
//! lease every retry period; the others read it and take it over only after they have seen the
//! same record, unchanged, for a whole lease duration on their own clocks:
//!
//! ```text
//!  candidate ─ acquire: attempt, then wait retry_period × (1 + [0,1.2)) ─ attempt ─ … ─┐ won
//!                                                                                      ▼
//!  leader ─ on_started_leading(token) ─ renew: attempt every retry_period ─ … ─ none
//!           succeeded for renew_deadline ─► (release if release_on_cancel) ─► token cancelled
//!           ─► on_stopped_leading
//!
//!  attempt: leader with a valid lease ─► update (fast path; on failure, go on)
//!           read the lease ─ 404 ─► create
//!                          ─ record changed since last read ─► observed now (own clock)
//!                          ─ held by another, observed < lease_duration ago ─► give up
//!                          ─ else ─► update from the version read (409 if it moved)
//! ```
//!
//! `tests/upstream_client_go_leaderelection.rs` holds the port to upstream's own tests
//! (`leaderelection_test.go` at the same tag): every case of `TestTryAcquireOrRenew`, the
//! coordinated renewals, release, release on cancellation, the fast path, the config checks,
//! with each case's API calls compared whole; `tests/upstream_client_go_leaderelection_recovery.rs`
//! those of v0.38.0-beta.0's `leaderelection_recovery_test.go`.
//!
//! Under `Recovery` ([`LeaderElectionConfig::recovery`], client-go 1.38), a leader whose
//! renewals failed for `renew_deadline` closes its write gate and calls `on_stopped_leading`
//! but keeps running: it retries renewing the lease it held, and leads again if it can
//! (the loop is drawn in `recovery.rs`).
//!
//! The core (what was observed, and each decision) has no I/O; the elector's loops around it
//! make the requests and wait on tokio's clock, so a run under the paused clock is exact.
//!
//! ```
//! use std::sync::{Arc, atomic::{AtomicBool, Ordering}};
//! use std::time::Duration;
//! use controlloop::apiserver::{Cluster, ServerOptions};
//! use controlloop::leaderelection::{
//!     LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock,
//! };
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let cluster = Cluster::new(ServerOptions::default());
//! let lock = LeaseLock::new(cluster.in_process_client(), "default", "my-controller", "replica-a");
//! let leading = Arc::new(AtomicBool::new(false));
//! let l = leading.clone();
//! let callbacks = LeaderCallbacks::new(
//!     move |token| {
//!         let l = l.clone();
//!         async move {
//!             l.store(true, Ordering::SeqCst); // start the controllers here
//!             token.cancelled().await; // leadership ended: stop them
//!         }
//!     },
//!     || {}, // controller-runtime's manager exits the process here
//! );
//! let elector = Arc::new(LeaderElector::new(LeaderElectionConfig::default(), lock, callbacks).unwrap());
//! let e = elector.clone();
//! tokio::spawn(async move { e.run(std::future::pending()).await });
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! assert!(elector.is_leader() && leading.load(Ordering::SeqCst));
//! assert_eq!(elector.get_leader(), "replica-a");
//! # });
//! ```
//!
//! # Invariants
//! 1. The observed time moves only when a read returns a record whose raw bytes differ from
//!    the last read ones, or when this elector writes a record; never from a time written in
//!    the record. An elector compares only its own clock with itself, so any skew between the
//!    replicas' wall clocks changes nothing (a difference in their clocks' *rates* does).
//! 2. A candidate writes over another holder's record only once it has observed that record
//!    unchanged for the record's own `leaseDurationSeconds`, counted from when it observed it.
//! 3. Every update of the lease is made from the resourceVersion the lock last read or wrote,
//!    so of two candidates writing from the same read, one gets 409 and loses.
//! 4. `run` calls `on_stopped_leading` exactly once, after the leading token is cancelled,
//!    whether or not it ever led; the leader stops leading once no attempt has succeeded for
//!    `renew_deadline` since the poll began. Under `Recovery`, once per loss of leadership
//!    instead (the token is still cancelled only when the run ends).
//! 5. A release writes over the lease only while this elector still observes itself as the
//!    holder; from client-go 1.38 ([`LeaderElectionConfig::client_go_minor`]) also only
//!    while the record it has just read names it.
//! 6. A recovering elector writes only over a record that names it: it never creates the
//!    Lease nor takes it over.
//!
//! # Concurrency
//! One task runs [`LeaderElector::run`]; its observed state sits behind a `parking_lot::Mutex`
//! never held across an await, so [`LeaderElector::is_leader`] and [`LeaderElector::check`]
//! may be called from anywhere. `on_started_leading` runs in a task of its own;
//! `on_new_leader` and `on_stopped_leading` run on the elector's task.
//!
//! # Differences from upstream
//! - client-go v0.38.0-beta.0's release check is followed when
//!   [`LeaderElectionConfig::client_go_minor`] is 38; its write gate is ported
//!   ([`LeaderElector::write_gate`], on every minor: it changes nothing unless used); its
//!   `Recovery` mode too ([`LeaderElectionConfig::recovery`], refused before 38:
//!   [`LeaderElectionError::RecoveryBefore38`]; the list: [`crate::features`], "client-go
//!   v0.37.2 → v0.38.0-beta.0"). Upstream's `RecoveryConfig` is an `Option<Duration>` (its
//!   deadline) inside the config's `Option`.
//! - This is not a fence, exactly as upstream warns: a leader that stops running (a paused
//!   process, a stalled node) keeps acting when it resumes until its renew loop gives up, up to
//!   `renew_deadline` later, while another replica may already lead.
//! - The Lease lock only, as upstream has kept since the Endpoints and ConfigMap locks were
//!   removed; no `MultiLock`, no `LeaseCandidate` (coordinated election's candidate objects):
//!   [`LeaderElector::try_coordinated_renew`] is ported, the server side of coordinated
//!   election is not.
//! - No metrics (leader on/off, slow path) and no `HealthzAdaptor`: [`LeaderElector::check`]
//!   is what a health probe calls. Every minor records when an attempt began, which only the
//!   check under `Recovery` reads (v0.37 has no such time).
//! - The two required callbacks are arguments of [`LeaderCallbacks::new`], so upstream's
//!   "callback must not be nil" errors cannot happen. `on_new_leader` is called on the
//!   elector's task, in the order of observation (upstream starts a goroutine per report, so
//!   two reports can arrive out of order). A panic in `on_started_leading` ends its own task
//!   only (in Go it ends the process).
//! - Observed times are tokio's monotonic clock, so the paused clock drives them; the times
//!   written into the record come from a wall clock that reads
//!   [`LeaderElectionConfig::wall_clock`] (default: the system's) at construction and moves
//!   with tokio's clock (Go compares the monotonic reading of `time.Now()` in the same way,
//!   and writes its wall reading).
//! - The acquire loop's jitter comes from a seeded generator
//!   ([`LeaderElectionConfig::seed`], default a hash of the identity), so a run repeats.
//! - A record read during an attempt counts as observed after the attempt began, so it is
//!   valid for that attempt even with a zero duration. In Go the clock always moves between
//!   the attempt's start and the read's return; under tokio's paused clock the two instants
//!   can be equal, and without this rule upstream's "don't acquire from led, acked object"
//!   case would acquire.
//! - A request in flight when `run`'s stop future completes is dropped (its future is
//!   cancelled); in Go the request gets the cancelled context and returns an error. Either
//!   way the attempt fails and the release (if `release_on_cancel`) follows.
//! - An attempt of the renew poll due at the very instant of the deadline is not made (in Go
//!   the poll's timer and the deadline race).
//! - [`LeaderElectionConfig`] has a `Default` (15 s, 10 s, 2 s, the values upstream documents
//!   as the core clients' defaults); upstream's zero config is refused.
//! - Events go to a callback ([`LeaseLock::with_event_recorder`]) rather than to an
//!   `EventRecorder` that posts Events.

mod elector;
mod lock;
mod record;
mod recovery;
mod state;
mod write_gate;

pub use elector::{
    JITTER_FACTOR, LeaderCallbacks, LeaderElectionConfig, LeaderElectionError, LeaderElector,
};
pub use lock::{LeaseLock, LockError, ResourceLock};
pub use record::{
    LeaderElectionRecord, leader_election_record_to_lease_spec,
    lease_spec_to_leader_election_record,
};
