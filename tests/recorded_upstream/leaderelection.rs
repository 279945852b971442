//! controller-runtime's manager losing its lease (v0.22, v0.24 and v0.25): the recorder runs
//! `manager.New` with leader election on a Lease lock over client-go's fake clientset, one
//! runnable that needs leader election, and from 21 s every request for the Lease failing. The
//! manager's part of it is what its callbacks do with the elector's (controller-runtime v0.25.3
//! `pkg/manager/internal.go`): `OnStoppedLeading` makes `Start` return "leader election lost",
//! and `Start`'s return cancels the runnables' context without waiting. The port has the
//! elector and no manager, so the rendering maps the manager onto it: `Start` returns when
//! `on_stopped_leading` is called, and the runnable's context is the leading token.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};
use std::time::Duration;

use controlloop::apiserver::{Cluster, ServerOptions};
use controlloop::leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElectionRecord, LeaderElector, LeaseLock,
    LockError, ResourceLock,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::{SECOND, compare, compare_each, go_duration, paused, within};

/// The Lease lock with a switch that makes every request fail, as the recorder's reactor does.
struct Partitioned {
    lock: LeaseLock,
    cut: Arc<AtomicBool>,
}

impl Partitioned {
    fn refused(&self) -> Result<(), LockError> {
        if self.cut.load(Ordering::SeqCst) {
            let status = kube::core::Status::failure("the API server is unreachable", "");
            return Err(LockError::Api(kube::Error::Api(status.boxed())));
        }
        Ok(())
    }
}

impl ResourceLock for Partitioned {
    async fn get(&self) -> Result<(LeaderElectionRecord, Vec<u8>), LockError> {
        self.refused()?;
        self.lock.get().await
    }
    async fn create(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        self.refused()?;
        self.lock.create(record).await
    }
    async fn update(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        self.refused()?;
        self.lock.update(record).await
    }
    fn record_event(&self, event: &str) {
        self.lock.record_event(event);
    }
    fn identity(&self) -> &str {
        self.lock.identity()
    }
    fn describe(&self) -> String {
        self.lock.describe()
    }
}

const UNSET: u64 = u64::MAX;

fn manager_lease_lost_lines() -> Vec<String> {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let client = cluster.in_process_client();
        let cut = Arc::new(AtomicBool::new(false));
        let lock = Partitioned {
            lock: LeaseLock::new(client.clone(), "default", "manager", "a"),
            cut: cut.clone(),
        };
        // Whole seconds: the Lease's MicroTime keeps microseconds, and the lines print ms.
        let wall = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
        let start = Instant::now();
        let ms = move || start.elapsed().as_millis() as u64;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (returned, cancelled) = (
            Arc::new(AtomicU64::new(UNSET)),
            Arc::new(AtomicU64::new(UNSET)),
        );
        let (l, c) = (lines.clone(), cancelled.clone());
        let r = returned.clone();
        let callbacks = LeaderCallbacks::new(
            move |leading: tokio_util::sync::CancellationToken| {
                let (lines, cancelled) = (l.clone(), c.clone());
                async move {
                    lines.lock().push(format!(
                        "{} ms: the runnable starts (it needs leader election)",
                        ms()
                    ));
                    leading.cancelled().await; // the runnable's context
                    cancelled.store(ms(), Ordering::SeqCst);
                }
            },
            move || r.store(ms(), Ordering::SeqCst), // the manager's Start returns here
        );
        let config = LeaderElectionConfig {
            name: "manager".into(),
            wall_clock: Some(wall),
            ..LeaderElectionConfig::default() // 15 s, 10 s, 2 s: the manager's defaults
        };
        let elector = Arc::new(LeaderElector::new(config, lock, callbacks).expect("valid"));
        let e = elector.clone();
        tokio::spawn(async move { e.run(std::future::pending::<()>()).await });

        tokio::time::sleep(Duration::from_secs(21)).await;
        let lease = Api::<Lease>::namespaced(client, "default")
            .get("manager")
            .await
            .unwrap();
        let spec = lease.spec.unwrap();
        let renewed = spec.renew_time.expect("renewed").0.duration_since(wall);
        lines.lock().push(format!(
            "{} ms: the Lease is held by {:?}, renewed at {} ms",
            ms(),
            spec.holder_identity.unwrap_or_default(),
            renewed.as_millis()
        ));
        cut.store(true, Ordering::SeqCst);
        lines.lock().push(format!(
            "{} ms: every request for the Lease fails from now on",
            ms()
        ));
        within(60 * SECOND, "the elector giving up its lease", async {
            while returned.load(Ordering::SeqCst) == UNSET {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        let at = returned.load(Ordering::SeqCst);
        lines
            .lock()
            .push(format!("{at} ms: Start returns: leader election lost"));
        tokio::time::sleep_until(start + Duration::from_millis(at + 3_000)).await;
        lines.lock().push(format!(
            "{} ms: the runnable's context was cancelled at {} ms",
            ms(),
            cancelled.load(Ordering::SeqCst)
        ));
        lines.lock().clone()
    })
}

#[test]
fn controller_runtime_manager_lease_lost() {
    compare_each(
        &[
            "controller_runtime_v0.22_manager_lease_lost",
            "controller_runtime_v0.24_manager_lease_lost",
            "controller_runtime_v0.25_manager_lease_lost",
        ],
        manager_lease_lost_lines(),
    );
}

/// The Lease as the server holds it: holder, lease duration, transitions.
async fn lease_line(client: &kube::Client) -> String {
    let lease = Api::<Lease>::namespaced(client.clone(), "default")
        .get("controlloop")
        .await
        .expect("the Lease exists");
    let spec = lease.spec.unwrap_or_default();
    format!(
        "holder {:?}, leaseDurationSeconds {}, leaseTransitions {}",
        spec.holder_identity.unwrap_or_default(),
        spec.lease_duration_seconds.unwrap_or_default(),
        spec.lease_transitions.unwrap_or_default()
    )
}

/// `leader_election_release_after_outage`: a (ReleaseOnCancel) is cut off from 5 s to 16.5 s,
/// b takes the Lease over meanwhile, a is stopped at 17 s and releases. `config` sets the
/// release both electors follow. The recorder's fake clientset is played by the embedded
/// server: no line depends on the one thing they do differently (the server checks
/// resourceVersions; a's release reads the Lease first, so its write is current).
pub(crate) fn release_after_outage_lines(config: LeaderElectionConfig) -> Vec<String> {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let client = cluster.in_process_client();
        let cut = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let at = |s: f64| start + Duration::from_secs_f64(s);
        let stamp = || go_duration(start.elapsed());
        let stopped = Arc::new(AtomicU64::new(0));
        let elector = |name: &'static str, lock_cut: Arc<AtomicBool>, config| {
            let s = stopped.clone();
            let callbacks = LeaderCallbacks::new(
                |leading: tokio_util::sync::CancellationToken| async move { leading.cancelled().await },
                move || {
                    if name == "a" {
                        s.fetch_add(1, Ordering::SeqCst);
                    }
                },
            );
            let lock = Partitioned {
                lock: LeaseLock::new(client.clone(), "default", "controlloop", name),
                cut: lock_cut,
            };
            Arc::new(LeaderElector::new(config, lock, callbacks).expect("valid"))
        };
        let a = elector(
            "a",
            cut.clone(),
            LeaderElectionConfig {
                lease_duration: Duration::from_secs(11),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(4),
                release_on_cancel: true,
                ..config.clone()
            },
        );
        let b = elector(
            "b",
            Arc::new(AtomicBool::new(false)),
            LeaderElectionConfig {
                lease_duration: Duration::from_secs(11),
                renew_deadline: SECOND,
                retry_period: Duration::from_millis(100),
                ..config
            },
        );
        let (stop_a, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let run_a = tokio::spawn({
            let a = a.clone();
            async move {
                a.run(async {
                    let _ = stop_rx.await;
                })
                .await
            }
        });
        let mut lines = Vec::new();
        crate::settle().await;
        let leads = |e: &LeaderElector<Partitioned>| e.is_leader();
        lines.push(format!(
            "{}: a runs: {}; a leads {}",
            stamp(),
            lease_line(&client).await,
            leads(&a)
        ));
        let bb = b.clone();
        tokio::spawn(async move { bb.run(std::future::pending::<()>()).await });
        crate::settle().await;
        lines.push(format!(
            "{}: b runs: {}; b leads {}",
            stamp(),
            lease_line(&client).await,
            leads(&b)
        ));
        tokio::time::sleep_until(at(5.0)).await;
        cut.store(true, Ordering::SeqCst);
        lines.push(format!(
            "{}: a is cut off from the API server: {}",
            stamp(),
            lease_line(&client).await
        ));
        tokio::time::sleep_until(at(15.5)).await;
        lines.push(format!(
            "{}: {}; a leads {}, b leads {}; a's Run returned {}",
            stamp(),
            lease_line(&client).await,
            leads(&a),
            leads(&b),
            run_a.is_finished()
        ));
        tokio::time::sleep_until(at(16.5)).await;
        cut.store(false, Ordering::SeqCst);
        lines.push(format!(
            "{}: a reaches the API server again; a leads {}, a's Run returned {}",
            stamp(),
            leads(&a),
            run_a.is_finished()
        ));
        tokio::time::sleep_until(at(17.0)).await;
        let _ = stop_a.send(());
        within(SECOND, "a's run returning after its stop", run_a)
            .await
            .expect("a's run");
        lines.push(format!(
            "{}: a's context cancelled; a's Run returned, OnStoppedLeading called {} time(s)",
            stamp(),
            stopped.load(Ordering::SeqCst)
        ));
        lines.push(format!(
            "{}: after a's release: {}; a leads {}, b leads {}",
            stamp(),
            lease_line(&client).await,
            leads(&a),
            leads(&b)
        ));
        lines
    })
}

#[test]
fn leader_election_release_after_outage() {
    compare(
        "client_go_v0.37_leader_election_release_after_outage",
        release_after_outage_lines(LeaderElectionConfig::default()),
    );
}

/// The same run with both electors following client-go v0.38: a's release reads b's holder and
/// leaves the Lease; a's observed record still names a, so it says it leads.
#[test]
fn leader_election_release_after_outage_on_v0_38() {
    compare(
        "client_go_v0.38_leader_election_release_after_outage",
        release_after_outage_lines(LeaderElectionConfig {
            client_go_minor: 38,
            ..LeaderElectionConfig::default()
        }),
    );
}

/// At client-go 1.37 the port's release empties b's Lease, which the v0.38 recording does not.
#[test]
#[should_panic(expected = "-17s: after a's release: holder \"b\"")]
fn the_v0_37_release_fails_the_v0_38_recording() {
    compare(
        "client_go_v0.38_leader_election_release_after_outage",
        release_after_outage_lines(LeaderElectionConfig::default()),
    );
}
