//! The suite: every scenario run on the embedded server and on the real ones, compared, and
//! the differences table the appendix "The embedded server beside kube-apiserver" prints.

use super::{
    differences::{KNOWN, KUBE_APISERVER, NO_WATCH_CACHE},
    error::ConformanceError,
    findings::{Finding, compare},
    normalise,
    scenarios::{On, SCENARIOS, Scenario},
    session::Session,
    setup,
    transcript::Transcript,
};

/// Which server a run is on, for its setup: both get the book's CRDs (applied on the real one,
/// POSTed to the embedded one, which refuses server-side apply) and each scenario's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The embedded API server.
    Embedded,
    /// A real kube-apiserver.
    Real,
}

/// Runs every scenario of `scenarios` on `client`, each in its own namespace
/// `c-NONCE-NAME` (the same names on both servers), and returns each one's transcript.
pub async fn run(
    client: &kube::Client,
    server: Server,
    nonce: &str,
    scenarios: &[Scenario],
) -> Result<Vec<(&'static str, Transcript)>, ConformanceError> {
    match server {
        Server::Real => setup::install_crds(client).await?,
        Server::Embedded => crate::lab::rig::widget::install_widgets(client)
            .await
            .map_err(|e| ConformanceError::Send {
                scenario: "setup".into(),
                step: "install the CRDs".into(),
                source: e,
            })?,
    }
    let mut out = Vec::new();
    for scenario in scenarios {
        let ns = format!("c-{nonce}-{}", scenario.name.replace('_', "-"));
        setup::namespace(client, &ns).await?;
        let mut session = Session::new(client.clone(), &ns, scenario.name);
        (scenario.run)(&mut session).await?;
        out.push((scenario.name, session.into_transcript()));
        setup::delete_namespace(client, &ns).await;
    }
    Ok(out)
}

/// Each scenario's expectations that `t` does not meet, as messages.
pub fn unmet(scenario: &Scenario, t: &Transcript) -> Vec<String> {
    scenario
        .expect
        .iter()
        .filter_map(|e| e.check(t).err())
        .collect()
}

/// What a comparison with the real servers found.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The real servers it ran on ([`KUBE_APISERVER`], [`NO_WATCH_CACHE`]).
    pub servers: Vec<&'static str>,
    /// Every scenario's transcript, per server (`embedded` first).
    pub transcripts: Vec<(&'static str, Vec<(&'static str, Transcript)>)>,
    /// Expectations a real server did not meet (upstream's answers: none, or the scenario is
    /// wrong).
    pub missed: Vec<String>,
    /// Every difference, after normalisation.
    pub findings: Vec<Finding>,
}

/// Runs every scenario on the embedded server (over HTTP) and on each real server given
/// (the kubeconfig of kube-apiserver, and of the one without its watch cache), compares, and
/// checks each real transcript against the scenarios' expectations.
pub async fn against_real(
    main: &std::path::Path,
    no_cache: Option<&std::path::Path>,
) -> Result<Outcome, ConformanceError> {
    use crate::lab::rig::{Backend, Target};
    let nonce = crate::lab::rig::real::nonce();
    let server = controlloop::apiserver::ApiServer::start()
        .await
        .map_err(|e| ConformanceError::Missing {
            scenario: "setup".into(),
            step: "start the embedded server".into(),
            message: e.to_string(),
        })?;
    let ours = run(&server.client(), Server::Embedded, &nonce, SCENARIOS).await?;
    server.shutdown().await;
    let mut out = Outcome::default();
    for (name, path) in [(KUBE_APISERVER, Some(main)), (NO_WATCH_CACHE, no_cache)] {
        let Some(path) = path else { continue };
        let target = Target::start(&Backend::Kubeconfig(path.to_path_buf()))
            .await
            .map_err(|e| ConformanceError::Missing {
                scenario: "setup".into(),
                step: format!("connect to {name}"),
                message: e.to_string(),
            })?;
        let scenarios: Vec<Scenario> = SCENARIOS
            .iter()
            .filter(|s| name == NO_WATCH_CACHE || s.on == On::Both)
            .copied()
            .collect();
        let theirs = run(&target.client(), Server::Real, &nonce, &scenarios).await?;
        for (scenario, (sname, r)) in scenarios.iter().zip(&theirs) {
            out.missed.extend(
                unmet(scenario, r)
                    .into_iter()
                    .map(|m| format!("{name}: {sname}: {m}")),
            );
            if let Some((_, e)) = ours.iter().find(|(n, _)| n == sname) {
                out.findings.extend(compare(
                    name,
                    sname,
                    &normalise::normalise(e),
                    &normalise::normalise(r),
                ));
            }
        }
        out.servers.push(name);
        out.transcripts.push((name, theirs));
    }
    out.transcripts.insert(0, ("embedded", ours));
    Ok(out)
}

/// The differences table the appendix prints: every entry of [`KNOWN`] with the findings of
/// this run it covers (counted per real server), as Markdown.
pub fn table(outcome: &Outcome) -> String {
    let mut t = String::from(
        "| difference | where | embedded server | kube-apiserver v1.37.2 | why | proposed fix \
         | findings |\n|---|---|---|---|---|---|---|\n",
    );
    for d in KNOWN {
        let counts: Vec<String> = outcome
            .servers
            .iter()
            .map(|s| {
                let n = outcome
                    .findings
                    .iter()
                    .filter(|f| f.server == *s && d.covers(f))
                    .count();
                let short = if *s == NO_WATCH_CACHE {
                    "no cache"
                } else {
                    "cache"
                };
                format!("{n} ({short})")
            })
            .collect();
        let place = match (d.scenarios, d.steps) {
            ([], _) => "every scenario".to_owned(),
            (sc, []) => sc.join(", "),
            (sc, st) => format!("{}: {}", sc.join(", "), st.join("; ")),
        };
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            d.what,
            place,
            d.embedded,
            d.real,
            d.reason,
            d.fix,
            counts.join(", ")
        ));
    }
    t
}
