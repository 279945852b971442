//! Chapter 15, "A release after an outage": a leader cut off from the API server while another
//! replica takes the Lease over, then stopped with `release_on_cancel`, on client-go 1.37 and
//! 1.38 (`LeaderElectionConfig::client_go_minor`), printed as the recorder prints the same run
//! on client-go v0.37.2 and v0.38.0-beta.0 (`client_go_v0.3{7,8}_leader_election_release_after_outage`).
//! The recorder's fake clientset is played by the embedded server: no line depends on the one
//! thing they do differently (the server checks resourceVersions; a's release reads the Lease
//! first, so its write is current).

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
use kube::api::Api;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::kit::{moved::ClientGo, snap};
use crate::lab::rig;

/// The Lease as the server holds it: holder, lease duration, transitions.
pub async fn lease(client: &kube::Client) -> String {
    let lease = Api::<Lease>::namespaced(client.clone(), "default");
    let spec = lease
        .get("controlloop")
        .await
        .unwrap()
        .spec
        .unwrap_or_default();
    format!(
        "holder {:?}, leaseDurationSeconds {}, leaseTransitions {}",
        spec.holder_identity.unwrap_or_default(),
        spec.lease_duration_seconds.unwrap_or_default(),
        spec.lease_transitions.unwrap_or_default()
    )
}

/// One elector on the Lease `default/controlloop`, through a lock that `cut` cuts off; `stopped`
/// counts its `on_stopped_leading` calls.
pub fn elector(
    cluster: &Cluster,
    name: &str,
    cut: Arc<AtomicBool>,
    stopped: Arc<AtomicU64>,
    config: LeaderElectionConfig,
) -> Arc<LeaderElector<CutOff<LeaseLock>>> {
    let lock = LeaseLock::new(cluster.in_process_client(), "default", "controlloop", name);
    let callbacks = LeaderCallbacks::new(
        |leading: CancellationToken| async move { leading.cancelled().await },
        move || {
            stopped.fetch_add(1, Ordering::SeqCst);
        },
    );
    let elector = LeaderElector::new(config, CutOff::new(lock, cut), callbacks);
    Arc::new(elector.expect("a valid config"))
}

/// A fresh embedded server, a client of it, and `a`'s switch that cuts it off (unset) and its
/// `on_stopped_leading` count (zero).
pub fn cut_off_cluster() -> (Cluster, kube::Client, Arc<AtomicBool>, Arc<AtomicU64>) {
    let cluster = Cluster::new(ServerOptions::default());
    let client = cluster.in_process_client();
    (cluster, client, Arc::default(), Arc::default())
}

/// Lets every task run until it waits (the recorder's `synctest.Wait()`); no time passes.
pub async fn let_run() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

/// Runs `elector` until `stop` is cancelled.
pub fn run(
    elector: &Arc<LeaderElector<CutOff<LeaseLock>>>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let e = elector.clone();
    tokio::spawn(async move { e.run(stop.cancelled_owned()).await })
}

// book: ch15_fn_release_after_outage
/// a (a 4 s retry, `release_on_cancel`) leads; from 5 s to 16.5 s every request a makes fails;
/// b (a 100 ms retry) takes the Lease over meanwhile; a is stopped at 17 s and releases. Both
/// follow client-go 1.`minor`.
pub fn release_after_outage(minor: u32) -> String {
    rig::paused(async {
        let (cluster, client, cut, a_stopped) = cut_off_cluster();
        let config = LeaderElectionConfig {
            lease_duration: Duration::from_secs(11),
            client_go_minor: minor,
            ..LeaderElectionConfig::default()
        };
        let a_config = LeaderElectionConfig {
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(4),
            release_on_cancel: true,
            ..config.clone()
        };
        let b_config = LeaderElectionConfig {
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(100),
            ..config
        };
        let a = elector(&cluster, "a", cut.clone(), a_stopped.clone(), a_config);
        let b = elector(&cluster, "b", Arc::default(), Arc::default(), b_config);
        let (start, mut text) = (Instant::now(), String::new());
        let at = |s: f64| start + Duration::from_secs_f64(s);
        let mut log =
            |what: String| text += &format!("{}s: {what}\n", start.elapsed().as_secs_f64());

        let stop_a = CancellationToken::new();
        let run_a = run(&a, stop_a.clone());
        let_run().await; // a creates the Lease
        let l = lease(&client).await;
        log(format!("a runs: {l}; a leads {}", a.is_leader()));
        run(&b, CancellationToken::new());
        let_run().await; // b reads it, held by a
        let l = lease(&client).await;
        log(format!("b runs: {l}; b leads {}", b.is_leader()));
        sleep_until(at(5.0)).await;
        cut.store(true, Ordering::SeqCst); // a's renewals fail from now on
        let l = lease(&client).await;
        log(format!("a is cut off from the API server: {l}"));
        sleep_until(at(15.5)).await; // b has waited out the 11 s lease
        let (l, leads) = (lease(&client).await, (a.is_leader(), b.is_leader()));
        let returned = run_a.is_finished();
        log(format!(
            "{l}; a leads {}, b leads {}; a's Run returned {returned}",
            leads.0, leads.1
        ));
        sleep_until(at(16.5)).await;
        cut.store(false, Ordering::SeqCst);
        let (leads, returned) = (a.is_leader(), run_a.is_finished());
        log(format!(
            "a reaches the API server again; a leads {leads}, a's Run returned {returned}"
        ));
        sleep_until(at(17.0)).await;
        stop_a.cancel(); // a is stopped gracefully: it releases the Lease on its way out
        let returned = rig::within(Duration::from_secs(1), "a's release", run_a);
        returned.await.unwrap();
        let n = a_stopped.load(Ordering::SeqCst);
        log(format!(
            "a's context cancelled; a's Run returned, OnStoppedLeading called {n} time(s)"
        ));
        let (l, leads) = (lease(&client).await, (a.is_leader(), b.is_leader()));
        log(format!(
            "after a's release: {l}; a leads {}, b leads {}",
            leads.0, leads.1
        ));
        text
    })
}
// book: end ch15_fn_release_after_outage

/// Chapter 15, "A release after an outage": the run on both releases, each compared with its
/// tag's recording.
pub fn ch15_release_after_outage() {
    // book: ch15_release_after_outage
    let recorded = |minor| {
        let name = "leader_election_release_after_outage";
        ClientGo(minor).recorded(name).unwrap()
    };
    let (v037, v038) = (release_after_outage(37), release_after_outage(38));
    assert_eq!(v037, recorded(37)); // client-go v0.37.2, line for line
    assert_eq!(v038, recorded(38)); // client-go v0.38.0-beta.0, line for line
    // 1.37: a's release empties the Lease b holds; 1.38: a reads b's holder and leaves it.
    let last = |text: &str| text.lines().last().unwrap().to_owned();
    assert_eq!(
        last(&v037),
        r#"17s: after a's release: holder "", leaseDurationSeconds 1, leaseTransitions 1; a leads false, b leads true"#
    );
    assert_eq!(
        last(&v038),
        r#"17s: after a's release: holder "b", leaseDurationSeconds 11, leaseTransitions 1; a leads true, b leads true"#
    );
    snap::text(
        "ch15_release_after_outage",
        format!("client-go 1.37:\n{v037}\nclient-go 1.38:\n{v038}"),
    );
    // book: end ch15_release_after_outage
}
