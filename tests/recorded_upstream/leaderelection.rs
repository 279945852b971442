//! controller-runtime's manager losing its lease (v0.22, v0.24 and v0.25): the recorder runs
//! `manager.New` with leader election on a Lease lock over client-go's fake clientset, one
//! runnable that needs leader election, and from 21 s every request for the Lease failing. The
//! manager's part of it is what its callbacks do with the elector's (controller-runtime v0.25.3
//! `pkg/manager/internal.go`): `OnStoppedLeading` makes `Start` return "leader election lost",
//! and `Start`'s return cancels the runnables' context without waiting. The port has the
//! elector and no manager, so the rendering maps the manager onto it: `Start` returns when
//! `on_stopped_leading` is called, and the runnable's context is the leading token.
//!
//! The release after an outage (`client_go_v0.3{7,8}_leader_election_release_after_outage`) and
//! `Recovery` (`client_go_v0.38_leader_election_recovery`) are chapter 15's experiments,
//! compared with their recordings in `book/tests/recorded_upstream.rs`.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};
use std::time::Duration;

use controlloop::apiserver::{Cluster, ServerOptions};
use controlloop::leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock,
};
use controlloop::testing::CutOff;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::{SECOND, compare_each, paused, within};

const UNSET: u64 = u64::MAX;

fn manager_lease_lost_lines() -> Vec<String> {
    paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let client = cluster.in_process_client();
        let cut = Arc::new(AtomicBool::new(false));
        let lock = CutOff::new(
            LeaseLock::new(client.clone(), "default", "manager", "a"),
            cut.clone(),
        );
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
