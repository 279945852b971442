//! Chapter 19's experiments: an operator written the way kube-rs users write one, and its
//! tests, run in-process under tokio's paused clock, on kube-apiserver, and (the first one)
//! against tower-test's mock as kube-rs documents it.
//!
//! ```text
//!  checks::TESTS ─┬─► in-process: TestCluster (paused clock) × each operator ─► which fail
//!                 └─► kube-apiserver (real clock) × the correct operator       ─► all pass
//!  mock::cleanup_releases_the_finalizer × each operator × each script          ─► which fail
//! ```
//!
//! # Invariants
//! 1. Each test runs in a namespace of its own with a fresh operator, stopped at its end.
//! 2. In-process, each run has a server and a paused runtime of its own, so one run's clock
//!    or objects never reach another's.

pub mod checks;
pub mod mock;
pub mod operator;
pub mod site;

pub use checks::{Failed, TESTS, Test};
pub use operator::{Bug, Operator};
pub use site::Site;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, CustomResourceExt,
    api::PostParams,
    runtime::wait::{await_condition, conditions},
};
use serde::Serialize;

use crate::lab::rig::{self, Backend, Target};
use controlloop::testing::TestCluster;

/// Installs `Site`'s CustomResourceDefinition (kept if it is there) and waits until it is
/// established.
pub async fn install(client: &Client) -> Result<(), Failed> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.create(&PostParams::default(), &Site::crd()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let name = Site::crd_name();
    let established = await_condition(crds, name, conditions::is_crd_established());
    match tokio::time::timeout(Duration::from_secs(30), established).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Failed(format!("waiting for {name}: {e}"))),
        Err(_) => Err(Failed(format!("{name} not established within 30 s"))),
    }
}

/// Runs `test` on `operator` in-process: a fresh embedded server under a paused clock of its
/// own; returns the test's outcome and the real time it took.
pub fn in_process(test: Test, operator: Operator) -> (Result<Duration, Failed>, Duration) {
    let started = std::time::Instant::now();
    let outcome = rig::paused(async {
        let cluster = TestCluster::new();
        install(&cluster.client()).await?;
        let limit = Duration::from_secs(3 * 3600);
        rig::within(
            limit,
            "a test of chapter 19 (a reconcile that never returns?)",
            async { test(cluster.client(), "test", operator).await },
        )
        .await
    });
    (outcome, started.elapsed())
}

/// One row of a table of outcomes.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The test.
    pub test: &'static str,
    /// The operator it ran on: `correct`, or the bug it carried.
    pub operator: String,
    /// `passes`, or the first line of why it failed.
    pub outcome: String,
}

/// An outcome as a table cell: `passes`, or `fails: ` and what did not hold.
pub fn cell<T>(outcome: &Result<T, Failed>) -> String {
    match outcome {
        Ok(_) => "passes".to_string(),
        Err(Failed(why)) => format!(
            "fails: {}",
            why.split("; the server held").next().unwrap_or(why)
        ),
    }
}

/// The operator's name in a table.
pub fn named(operator: Operator) -> String {
    match operator.bug {
        None => "correct".to_string(),
        Some(bug) => format!("{bug:?}"),
    }
}

/// The lines of the function `name` in `source`, from its `pub async fn` line to its closing
/// brace at the start of a line (how the chapter counts a test's length).
pub fn lines_of(source: &str, name: &str) -> usize {
    let start = format!("pub async fn {name}(");
    let lines: Vec<&str> = source.lines().collect();
    let Some(first) = lines.iter().position(|l| l.starts_with(&start)) else {
        return 0;
    };
    lines[first..]
        .iter()
        .position(|l| *l == "}")
        .map_or(0, |n| n + 1)
}

/// The source of the in-process tests and of the mock test, as compiled.
pub const SOURCES: (&str, &str) = (include_str!("checks.rs"), include_str!("mock.rs"));

/// The in-process runs' outcomes as a Markdown table: each test on the correct operator and
/// on the operator carrying the bug it is written to catch.
pub fn outcome_table(rows: &[Row]) -> String {
    let mut out = String::from("| test | operator | outcome |\n|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            r.test, r.operator, r.outcome
        ));
    }
    out
}

/// Chapter 19: the four tests in-process, each on the correct operator and on the one with
/// its bug. Snapshot `ch19_in_process`.
pub fn ch19_in_process() {
    // book: ch19_in_process
    let (mut rows, mut real) = (Vec::new(), Duration::ZERO);
    for ((test, run), bug) in TESTS.into_iter().zip(Bug::ALL) {
        for operator in [Operator::CORRECT, Operator::with(bug)] {
            let (outcome, took) = in_process(run, operator);
            real += took;
            if test == "probed again" && operator.bug.is_none() {
                let noticed = outcome.clone().expect("the correct operator passes");
                assert_eq!(noticed, Duration::from_secs(3600)); // the next hourly probe
            }
            assert_eq!(
                outcome.is_ok(),
                operator.bug.is_none(),
                "{test}: {}",
                cell(&outcome)
            );
            let operator = named(operator);
            rows.push(Row {
                test,
                operator,
                outcome: cell(&outcome),
            });
        }
    }
    // book: end ch19_in_process
    crate::kit::snap::text("ch19_in_process", outcome_table(&rows));
    let took =
        format!("The eight runs (about three hours of their clocks) took {real:?} of real time.");
    let _ = crate::kit::measured::record("ch19_in_process", took);
}

/// The operator's timings on the real clock: a probe every 20 s (the in-process hour would be
/// an hour here), taking a second.
pub const REAL_CLOCK: Operator = Operator {
    probe_every: Duration::from_secs(20),
    probe_takes: Duration::from_secs(1),
    bug: None,
};

/// Chapter 19: the four tests on kube-apiserver (the real tier), on the correct operator,
/// each in a namespace of its own. Snapshot `ch19_real`.
pub fn ch19_real() {
    use crate::lab::rig::real::{Instance, nonce, or_skip};
    let Some(real) = or_skip(Instance::Main) else {
        return;
    };
    // book: ch19_real
    let _only = real.exclusive(); // one real-tier experiment at a time
    let nonce = nonce(); // a namespace name no earlier run used
    let run = async {
        let target = Target::start(&Backend::Kubeconfig(real.kubeconfig.clone())).await?;
        let client = target.client();
        install(&client)
            .await
            .map_err(|Failed(why)| anyhow::anyhow!(why))?;
        let mut rows = Vec::new();
        for (i, (test, run)) in TESTS.into_iter().enumerate() {
            let namespace = format!("ch19-{nonce}-{i}");
            let outcome = run(client.clone(), &namespace, REAL_CLOCK).await;
            assert!(
                outcome.is_ok(),
                "{test} on kube-apiserver: {}",
                cell(&outcome)
            );
            rows.push(Row {
                test,
                operator: named(REAL_CLOCK),
                outcome: cell(&outcome),
            });
        }
        Ok::<_, anyhow::Error>(rows)
    };
    let limit = Duration::from_secs(600);
    let rows = rig::real(rig::within(
        limit,
        "chapter 19's tests on kube-apiserver",
        run,
    ))
    .unwrap();
    // book: end ch19_real
    crate::kit::snap::text("ch19_real", outcome_table(&rows));
}

/// Chapter 19: the first test written with tower-test's mock, on the correct operator and on
/// the one whose cleanup fails on a page already gone, each with both scripts; and the lines
/// of the two tests. Snapshot `ch19_mock`.
pub fn ch19_mock() {
    use mock::{Script, cleanup_releases_the_finalizer};
    // book: ch19_mock_run
    let mut rows = Vec::new();
    for operator in [Operator::CORRECT, Operator::with(Bug::NotFoundIsAnError)] {
        for script in [Script::PageThere, Script::PageGone] {
            let outcome = rig::paused(cleanup_releases_the_finalizer(operator, script));
            let caught = outcome.is_err();
            assert_eq!(caught, operator.bug.is_some() && script == Script::PageGone);
            let test = match script {
                Script::PageThere => "mock, DELETE answered 200",
                Script::PageGone => "mock, DELETE answered 404",
            };
            rows.push(Row {
                test,
                operator: named(operator),
                outcome: cell(&outcome),
            });
        }
    }
    let (in_process, mocked) = SOURCES;
    let lines = (
        lines_of(in_process, "deleted_with_its_namespace"),
        lines_of(mocked, "cleanup_releases_the_finalizer"),
    );
    // book: end ch19_mock_run
    let mut text = outcome_table(&rows);
    text.push_str(&format!(
        "\nLines of test code: in-process {}, mock {} (each test's own function; the \
         harness each stands on is not counted).\n",
        lines.0, lines.1
    ));
    crate::kit::snap::text("ch19_mock", text);
    let _ = crate::kit::measured::record("ch19_mock", wall_times());
}

/// The real time the first test takes each way, once each, on the operator as written.
pub fn wall_times() -> String {
    let started = std::time::Instant::now();
    let mocked = rig::paused(mock::cleanup_releases_the_finalizer(
        Operator::CORRECT,
        mock::Script::PageThere,
    ));
    let mock_took = started.elapsed();
    let (in_process, in_process_took) = in_process(TESTS[0].1, Operator::CORRECT);
    assert!(mocked.is_ok() && in_process.is_ok());
    format!(
        "The first test, on the operator as written: mocked {mock_took:?}, in-process \
         {in_process_took:?} of real time (its server started, its CustomResourceDefinition \
         installed, a namespace created and deleted)."
    )
}
