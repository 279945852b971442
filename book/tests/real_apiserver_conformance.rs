//! The same requests on both servers: the conformance suite's scenario list sent to the
//! embedded API server (over HTTP) and to the real kube-apiserver v1.37.2 of
//! `cargo run -- cluster up` (over TLS: `--features tls`) and to the second one without its
//! watch cache (`cluster up --no-watch-cache`), normalised and compared.
//!
//! Without a real server (or without the `tls` feature) the embedded half still runs and is
//! held to every expectation except those `differences::KNOWN` names; the real half is
//! skipped in one line naming the command that enables it, and under `CI=true` it is required.

use std::time::Duration;

use controlloop::apiserver::ApiServer;
use controlloop_book::lab::{
    real_server::conformance::{
        self, Finding, KNOWN, KUBE_APISERVER, NO_WATCH_CACHE, On, SCENARIOS, Scenario, Server,
        Transcript, compare, differences::reconcile, normalise::normalise, unmet,
    },
    rig::{
        self, Backend, Target,
        real::{Instance, or_skip},
    },
};

const SUITE: Duration = Duration::from_secs(300);

/// Where the transcripts of the last run are written (for a reader of a failure).
fn dir() -> std::path::PathBuf {
    let d = controlloop_book::repo().join("target/conformance");
    let _ = std::fs::create_dir_all(&d);
    d
}

/// Writes the normalised transcripts of `server` to `target/conformance/SERVER.json`.
fn dump(server: &str, runs: &[(&str, Transcript)]) {
    let all: serde_json::Map<String, serde_json::Value> = runs
        .iter()
        .map(|(n, t)| (n.to_string(), serde_json::to_value(normalise(t)).unwrap()))
        .collect();
    let _ = std::fs::write(
        dir().join(format!("{server}.json")),
        serde_json::to_string_pretty(&all).unwrap(),
    );
}

async fn embedded(nonce: &str) -> Vec<(&'static str, Transcript)> {
    let server = ApiServer::start()
        .await
        .expect("the embedded server starts");
    let out = conformance::run(&server.client(), Server::Embedded, nonce, SCENARIOS)
        .await
        .expect("every scenario runs on the embedded server");
    server.shutdown().await;
    out
}

/// The scenarios compared with `server`.
fn for_server(server: &str) -> Vec<Scenario> {
    SCENARIOS
        .iter()
        .filter(|s| server == NO_WATCH_CACHE || s.on == On::Both)
        .copied()
        .collect()
}

#[test]
fn the_embedded_server_answers_every_scenario_as_kube_apiserver_does() {
    let main = or_skip(Instance::Main);
    let no_cache = main.as_ref().and_then(|_| or_skip(Instance::NoWatchCache));
    let _only = main.as_ref().map(|m| m.exclusive());
    rig::real(rig::within(SUITE, "the conformance suite", async {
        let nonce = conformance::nonce();
        let ours = embedded(&nonce).await;
        dump("embedded", &ours);
        if main.is_none() {
            // The embedded half alone: every expectation holds, except where KNOWN says not.
            let unknown: Vec<String> = SCENARIOS
                .iter()
                .zip(&ours)
                .flat_map(|(scenario, (name, t))| {
                    scenario
                        .expect
                        .iter()
                        .filter(|e| !KNOWN.iter().any(|d| d.names(name, e.step)))
                        .filter_map(move |e| e.check(t).err().map(|m| format!("{name}: {m}")))
                })
                .collect();
            assert!(
                unknown.is_empty(),
                "the embedded server does not answer as upstream, and differences::KNOWN does \
                 not name it:\n{}",
                unknown.join("\n")
            );
            return;
        }
        let mut findings: Vec<Finding> = Vec::new();
        let mut missed = Vec::new();
        let mut servers = Vec::new();
        for (server, real) in [(KUBE_APISERVER, &main), (NO_WATCH_CACHE, &no_cache)] {
            let Some(real) = real else { continue };
            servers.push(server);
            let target = Target::start(&Backend::Kubeconfig(real.kubeconfig.clone()))
                .await
                .expect("the real server's kubeconfig works");
            let scenarios = for_server(server);
            let theirs = conformance::run(&target.client(), Server::Real, &nonce, &scenarios)
                .await
                .expect("every scenario runs on the real server");
            dump(server, &theirs);
            for (scenario, (name, r)) in scenarios.iter().zip(&theirs) {
                // The expectations are upstream's answers: the real server meets every one.
                missed.extend(
                    unmet(scenario, r)
                        .into_iter()
                        .map(|m| format!("{server}: {name}: {m}")),
                );
                let (_, e) = ours
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("the same scenario");
                findings.extend(compare(server, name, &normalise(e), &normalise(r)));
            }
        }
        let text: String = findings.iter().map(|f| format!("{f}\n")).collect();
        let _ = std::fs::write(dir().join("findings.txt"), &text);
        assert!(
            missed.is_empty(),
            "kube-apiserver does not answer as the scenarios expect (transcripts in {}):\n{}",
            dir().display(),
            missed.join("\n")
        );
        let (uncovered, unused) = reconcile(KNOWN, &findings, &servers);
        assert!(
            uncovered.is_empty() && unused.is_empty(),
            "findings no entry of differences::KNOWN covers:\n{}\nentries that cover no \
             finding:\n{}",
            uncovered
                .iter()
                .map(|f| format!("  {f}\n"))
                .collect::<String>(),
            unused
                .iter()
                .map(|d| format!("  {}\n", d.what))
                .collect::<String>(),
        );
    }));
}

/// Every comparison fires: each expectation, changed, fails on the transcript it passed on,
/// and the comparison of a transcript with a copy whose one step changed names that step.
#[test]
fn each_expectation_and_each_comparison_fails_when_changed() {
    rig::real(rig::within(SUITE, "the conformance suite", async {
        let ours = embedded(&conformance::nonce()).await;
        let mut checked = 0;
        for (scenario, (name, t)) in SCENARIOS.iter().zip(&ours) {
            for e in scenario.expect {
                if e.check(t).is_err() {
                    continue; // a known difference; the real half checks it
                }
                let err = e
                    .changed()
                    .check(t)
                    .expect_err("a changed expectation fails");
                assert!(err.contains(e.step), "{err}");
                checked += 1;
            }
            let n = normalise(t);
            assert!(compare("x", name, &n, &n).is_empty());
            for i in 0..n.records.len() {
                let mut other = n.clone();
                other.records[i].code += 1;
                let f = compare("x", name, &n, &other);
                assert_eq!(f.len(), 1, "{name}: {f:?}");
                assert_eq!(
                    (f[0].step.as_str(), f[0].path.as_str()),
                    (n.records[i].label.as_str(), "(code)")
                );
                let mut other = n.clone();
                other.records[i].body = serde_json::json!({"changed": true});
                if other.records[i].body != n.records[i].body {
                    assert!(!compare("x", name, &n, &other).is_empty());
                }
            }
        }
        assert!(checked > 40, "only {checked} expectations checked");
    }));
}
