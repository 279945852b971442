//! Chapter 15, "The gate under `Recovery`": a leader cut off from the API server past its
//! renew deadline under client-go 1.38's `Recovery` (`LeaderElectionConfig::recovery`), alone
//! (it recovers the Lease) and beside a candidate that takes the Lease over meanwhile (it gives
//! up when it sees it), with a POST and a GET through its write gate at each step; printed as
//! the recorder prints the same run on client-go v0.38.0-beta.0
//! (`client_go_v0.38_leader_election_recovery`). As in `outage`, the recorder's fake clientset
//! is played by the embedded server; no line depends on what they do differently.

use std::convert::Infallible;
use std::sync::{Arc, atomic::Ordering};
use std::time::Duration;

use controlloop::leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElectionError, LeaderElector, LeaseLock,
};
use controlloop::testing::CutOff;
use http::{Method, Request, Response};
use parking_lot::Mutex;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tower::{ServiceExt, service_fn};

use super::outage::{cut_off_cluster, elector, lease, let_run, run};
use crate::kit::{moved::ClientGo, snap};
use crate::lab::rig;

/// A POST and a GET through `a`'s write gate, around a service that answers every request:
/// `POST passes, GET passes`, or `POST refused (write gate closed), …`.
async fn probe(a: &LeaderElector<CutOff<LeaseLock>>) -> String {
    let answering = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let gate = a.write_gate(answering);
    let mut out = Vec::new();
    for method in [Method::POST, Method::GET] {
        let request = Request::builder().method(method.clone()).body(()).unwrap();
        let verdict = match gate.clone().oneshot(request).await {
            Ok(_) => "passes".to_owned(),
            Err(e) if matches!(e.downcast_ref(), Some(LeaderElectionError::WriteGateClosed)) => {
                "refused (write gate closed)".to_owned()
            }
            Err(e) => format!("fails: {e}"),
        };
        out.push(format!("{method} {verdict}"));
    }
    out.join(", ")
}

/// `a` (a 15 s lease, a 10 s renew deadline, a 3 s retry, `release_on_cancel`, `Recovery`
/// without a deadline when `recovery`) cut off from 4 s to 20 s, alone and then beside `b` (a
/// 1 s renew deadline, a 100 ms retry), at client-go 1.38, as the recorder prints it.
pub fn leader_election_recovery(recovery: bool) -> String {
    let mut text = String::new();
    for with_b in [false, true] {
        text += &rig::paused(recovery_run(recovery, with_b));
    }
    text
}

async fn recovery_run(recovery: bool, with_b: bool) -> String {
    let (cluster, client, cut, a_stopped) = cut_off_cluster();
    let config = LeaderElectionConfig {
        client_go_minor: 38,
        ..LeaderElectionConfig::default() // a 15 s lease
    };
    let a_config = LeaderElectionConfig {
        retry_period: Duration::from_secs(3),
        release_on_cancel: true,
        recovery: recovery.then_some(None),
        ..config.clone()
    };
    // a's leading token, to tell whether it was cancelled.
    let leading = Arc::new(Mutex::new(None::<CancellationToken>));
    let (l, s) = (leading.clone(), a_stopped.clone());
    let callbacks = LeaderCallbacks::new(
        move |token: CancellationToken| {
            *l.lock() = Some(token.clone());
            async move { token.cancelled().await }
        },
        move || {
            s.fetch_add(1, Ordering::SeqCst);
        },
    );
    let lock = LeaseLock::new(cluster.in_process_client(), "default", "controlloop", "a");
    let a = LeaderElector::new(a_config, CutOff::new(lock, cut.clone()), callbacks);
    let a = Arc::new(a.expect("a valid config"));
    let (start, stop_a) = (Instant::now(), CancellationToken::new());
    let at = |s: f64| start + Duration::from_secs_f64(s);
    let mut text = if with_b { "a and b:\n" } else { "a alone:\n" }.to_owned();
    let mut log = |at: &str, what: String| text += &format!("  {at}: {what}\n");

    let run_a = run(&a, stop_a.clone());
    let_run().await; // a creates the Lease
    let (l, gate) = (lease(&client).await, probe(&a).await);
    log(
        "0s",
        format!("a runs: {l}; a leads {}; gate: {gate}", a.is_leader()),
    );
    let stop_b = CancellationToken::new();
    if with_b {
        let b_config = LeaderElectionConfig {
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(100),
            ..config
        };
        let b = elector(&cluster, "b", Arc::default(), Arc::default(), b_config);
        run(&b, stop_b.clone());
        let_run().await;
    }
    sleep_until(at(4.0)).await;
    cut.store(true, Ordering::SeqCst);
    log("4s", "a is cut off".into());
    // a renewed last at 3 s; its poll tries at 6, 9, 12 and 15 s, and gives up at 16 s.
    for s in [15.5, 17.0] {
        sleep_until(at(s)).await;
        let (l, gate) = (lease(&client).await, probe(&a).await);
        let n = a_stopped.load(Ordering::SeqCst);
        let (leads, returned) = (a.is_leader(), run_a.is_finished());
        log(
            &format!("{s}s"),
            format!(
                "{l}; a leads {leads}, OnStoppedLeading {n}, Run returned {returned}; gate: {gate}"
            ),
        );
    }
    sleep_until(at(20.0)).await;
    cut.store(false, Ordering::SeqCst);
    log("20s", "a reaches the API server again".into());
    // a's recovery tries at 16, 19 and 22 s: the first after the reconnection is at 22 s.
    sleep_until(at(23.0)).await;
    let (l, gate) = (lease(&client).await, probe(&a).await);
    let n = a_stopped.load(Ordering::SeqCst);
    let (leads, returned) = (a.is_leader(), run_a.is_finished());
    let cancelled = leading.lock().as_ref().is_some_and(|t| t.is_cancelled());
    log(
        "23s",
        format!(
            "{l}; a leads {leads}, OnStoppedLeading {n}, Run returned {returned}, leading context cancelled {cancelled}; gate: {gate}"
        ),
    );
    stop_a.cancel();
    let returned = rig::within(Duration::from_secs(1), "a's run returning", run_a);
    returned.await.unwrap();
    let_run().await;
    let (l, gate) = (lease(&client).await, probe(&a).await);
    let n = a_stopped.load(Ordering::SeqCst);
    log(
        "a's context cancelled",
        format!("{l}; OnStoppedLeading {n}; gate: {gate}"),
    );
    stop_b.cancel();
    text
}

/// Chapter 15, "The gate under `Recovery`": the run at 1.38, compared with its recording.
pub fn ch15_recovery() {
    // book: ch15_recovery
    let run = leader_election_recovery(true);
    let recorded = ClientGo(38).recorded("leader_election_recovery").unwrap();
    assert_eq!(run, recorded); // client-go v0.38.0-beta.0, line for line
    // At 17 s, alone and beside b, a still says it leads, its run goes on, its gate refuses.
    let at_17s = r#"  17s: holder "a", leaseDurationSeconds 15, leaseTransitions 0; a leads true, OnStoppedLeading 1, Run returned false; gate: POST refused (write gate closed), GET passes"#;
    assert_eq!(run.lines().filter(|l| *l == at_17s).count(), 2);
    snap::text("ch15_recovery", &run);
    // book: end ch15_recovery
}
