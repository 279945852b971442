//! Chapter 15's two electors on a real kube-apiserver: the port's `LeaderElector` and
//! `LeaseLock` against the Leases (coordination.k8s.io/v1) of the real control plane, under the
//! real clock, with short durations (a 4 s lease, a 3 s renew deadline, a 250 ms retry).
//!
//! kube-apiserver stores and validates every Lease the electors write; what the electors decide
//! is the port's (client-go v0.37.2 `tools/leaderelection`, held to its tests in the crate).
//!
//! # Invariants
//! 1. A run starts with no Lease [`LEASE`] in its namespace and deletes it at the end.
//! 2. `a` leads before `b` starts, so the first leader is `a` in every run.
//! 3. A crash stops an elector without a release, and its leading work at once (as the
//!    in-process replicas of [`super::replica`]).

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lab::rig::within;
use controlloop::leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock,
};

/// The Lease the electors contend for.
pub const LEASE: &str = "controlloop-election";

/// The electors' configuration: client-go's defaults scaled down from 15 s / 10 s / 2 s, so that
/// a run on the real clock takes seconds, with the lease long beside the retry, so that a
/// takeover after a crash (most of a lease) and after a release (a retry or so) stay far apart.
pub fn config(release_on_cancel: bool) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(250),
        release_on_cancel,
        ..LeaderElectionConfig::default()
    }
}

/// Each replica's leading intervals, in the order they opened.
#[derive(Default)]
struct Led(Mutex<Vec<(&'static str, Instant, Option<Instant>)>>);

impl Led {
    fn overlap(&self) -> Duration {
        super::overlap(&self.0.lock())
    }
}

/// One elector on the real server, and the tokens that stop it.
struct Elector {
    elector: Arc<LeaderElector<LeaseLock>>,
    stop: CancellationToken,
    crash: CancellationToken,
}

fn elector(
    client: &kube::Client,
    namespace: &str,
    name: &'static str,
    led: &Arc<Led>,
    config: LeaderElectionConfig,
) -> Elector {
    let lock = LeaseLock::new(client.clone(), namespace, LEASE, name);
    let (crash, stop) = (CancellationToken::new(), CancellationToken::new());
    let (l, c) = (led.clone(), crash.clone());
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            let (led, crash) = (l.clone(), c.clone());
            async move {
                led.0.lock().push((name, Instant::now(), None)); // leading work starts
                tokio::select! {
                    () = leading.cancelled() => {}
                    () = crash.cancelled() => {}
                }
                if let Some(open) = led.0.lock().iter_mut().rev().find(|l| l.0 == name) {
                    open.2 = Some(Instant::now()); // and stops
                }
            }
        },
        || {},
    );
    let elector = Arc::new(LeaderElector::new(config, lock, callbacks).expect("a valid config"));
    let (e, s, c) = (elector.clone(), stop.clone(), crash.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = e.run(async move { s.cancelled().await }) => {}
            () = c.cancelled() => {} // killed: no release, no more renewals
        }
    });
    Elector {
        elector,
        stop,
        crash,
    }
}

/// What a run on the real server did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RealElection {
    /// How `a` stopped.
    pub a_stops: &'static str,
    /// The replicas, in the order their leading work started.
    pub leaders: Vec<&'static str>,
    /// The time two replicas led at once (the detector), in milliseconds.
    pub overlap_ms: u64,
    /// The Lease as kube-apiserver stored it once `b` led: `holderIdentity`.
    pub holder: Option<String>,
    /// `leaseTransitions`.
    pub transitions: Option<i32>,
    /// `leaseDurationSeconds`.
    pub duration_seconds: Option<i32>,
    /// Milliseconds from `a` stopping to `b` leading: this run's, not in the snapshot.
    #[serde(skip)]
    pub takeover_ms: u64,
}

async fn wait_leader(e: &Elector, what: &'static str) {
    within(Duration::from_secs(30), what, async {
        while !e.elector.is_leader() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

async fn fresh(api: &Api<Lease>) -> Result<(), kube::Error> {
    match api.delete(LEASE, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// How the two replicas are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidate {
    /// Both with [`config`].
    Same,
    /// **Broken**: `a` leads with a 1 s lease (renewing every 100 ms) where the deployment
    /// means 4 s. A candidate waits for the duration the record carries
    /// (`leaseDurationSeconds`, which the leader writes), so `b` takes over within about
    /// a second. Kept to fire the crash band.
    ShortLease,
}

/// `a` leads, `b` waits; after a second `a` crashes (or, with `graceful`, stops and releases
/// the Lease); `b` takes over. Real clock; run it on a multi-thread runtime.
pub async fn run(
    client: kube::Client,
    namespace: &str,
    graceful: bool,
) -> Result<RealElection, kube::Error> {
    run_with(client, namespace, graceful, Candidate::Same).await
}

/// [`run`] with `b` configured as `candidate` says.
pub async fn run_with(
    client: kube::Client,
    namespace: &str,
    graceful: bool,
    candidate: Candidate,
) -> Result<RealElection, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    fresh(&leases).await?;
    let led = Arc::new(Led::default());
    let (mut a_config, mut b_config) = (config(graceful), config(graceful));
    if candidate == Candidate::ShortLease {
        a_config.lease_duration = Duration::from_secs(1); // whole seconds: the record's unit
        a_config.renew_deadline = Duration::from_millis(750);
        a_config.retry_period = Duration::from_millis(100);
        b_config.retry_period = Duration::from_millis(100); // b polls as often
    }
    let a = elector(&client, namespace, "a", &led, a_config);
    wait_leader(&a, "a acquiring a free Lease").await;
    let b = elector(&client, namespace, "b", &led, b_config);
    tokio::time::sleep(Duration::from_secs(1)).await; // a renews, b watches the record
    let stopped = Instant::now();
    if graceful {
        a.stop.cancel(); // release_on_cancel: an empty holder, a one-second lease
    } else {
        a.crash.cancel(); // no release: b waits out the lease on its own clock
    }
    wait_leader(&b, "b taking the Lease over").await;
    let takeover = stopped.elapsed();
    let lease = leases.get(LEASE).await?.spec.unwrap_or_default();
    let leaders = led.0.lock().iter().map(|l| l.0).collect();
    let overlap = led.overlap();
    b.crash.cancel();
    a.crash.cancel();
    fresh(&leases).await?; // leave nothing behind (invariant 1)
    Ok(RealElection {
        a_stops: if graceful { "gracefully" } else { "by a crash" },
        leaders,
        overlap_ms: u64::try_from(overlap.as_millis()).unwrap_or(u64::MAX),
        holder: lease.holder_identity,
        transitions: lease.lease_transitions,
        duration_seconds: lease.lease_duration_seconds,
        takeover_ms: u64::try_from(takeover.as_millis()).unwrap_or(u64::MAX),
    })
}

/// One crash run and one release run (in that order), for the bands' files.
pub async fn basis_round(
    client: kube::Client,
    namespace: &str,
) -> Result<[RealElection; 2], kube::Error> {
    let crash = run(client.clone(), namespace, false).await?;
    let release = run(client, namespace, true).await?;
    Ok([crash, release])
}

/// This run's takeover times beside their bands, for the page: the crash, the release, and
/// the broken candidate's crash run.
pub fn measured(runs: &[RealElection; 3]) -> String {
    use super::bands::{
        REAL_LEASE_TAKEOVER_AFTER_CRASH_MS as CRASH,
        REAL_LEASE_TAKEOVER_AFTER_RELEASE_MS as RELEASE,
    };
    let rows = [
        ("`a` crashes", &runs[0], CRASH),
        ("`a` releases", &runs[1], RELEASE),
        (
            "`a` crashes, having led with a 1 s lease (broken)",
            &runs[2],
            CRASH,
        ),
    ]
    .map(|(what, r, band)| format!("| {what} | {} ms | {band} |", r.takeover_ms));
    format!(
        "| this run | `b` leads after | band |\n|---|---:|---|\n{}\n",
        rows.join("\n")
    )
}
