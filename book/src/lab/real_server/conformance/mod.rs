//! The same requests on both servers: one scenario list sent to the embedded API server and to a
//! real kube-apiserver (v1.37.2, `cargo run -- cluster up`), each answer normalised where the
//! two legitimately differ, and the two transcripts compared step by step.
//!
//! ```text
//!  SCENARIOS ──► Session (embedded, over HTTP) ──► Transcript ─┐
//!            └─► Session (real, TLS)           ──► Transcript ─┴► normalise ─► compare ─► Finding
//!                                                                   │
//!                      each scenario's Expect (what upstream answers) checked on both
//! ```
//!
//! A [`Session`] sends raw requests (method, path, body, content type) through `kube::Client`,
//! so the wire is the same for both servers and nothing in kube's typed API smooths an answer
//! over; it records each answer's status code and body under the step's label in a
//! [`Transcript`]. [`normalise`] then replaces what is never the same twice (uids, timestamps,
//! generated names, continue tokens) by tokens, and absolute resourceVersions by their order,
//! so that "the update's resourceVersion is newer than the create's" compares equal on both.
//!
//! Every difference that remains is a finding. [`differences::KNOWN`] lists each one with its
//! reason and the fix proposed for the embedded server; the conformance test fails on a
//! difference that is not listed, and on a listed one that no longer occurs.
//!
//! # Invariants
//! 1. Both servers get the same scenario code, the same namespace name and the same object
//!    names; the only inputs that differ are the resourceVersions a step takes from an earlier
//!    answer of the same server.
//! 2. A transcript holds answers only: setup that is not part of the claim (the namespace, the
//!    CRDs on the real server) is not recorded.
//! 3. Every request and every watch read has a deadline naming the scenario and the step.

pub mod differences;
pub mod normalise;
pub mod scenarios;

use std::{fmt, time::Duration};

use http_body_util::BodyExt;
use serde_json::{Value, json};

pub use differences::{Difference, KNOWN, KUBE_APISERVER, NO_WATCH_CACHE};
pub use scenarios::{Expect, On, SCENARIOS, Scenario};

/// How long one request may take before the step is reported as hung.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(20);

/// One recorded answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Record {
    /// The step's label, unique within its scenario.
    pub label: String,
    /// What was sent: the method and the path, with the namespace as `{ns}`.
    pub request: String,
    /// The HTTP status code (a watch that was read: its response's code).
    pub code: u16,
    /// The body as JSON (a watch: the array of its events; not JSON: a string).
    pub body: Value,
}

/// What one scenario got from one server.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Transcript {
    /// Its answers, in order.
    pub records: Vec<Record>,
}

impl Transcript {
    /// The answer recorded under `label`.
    pub fn get(&self, label: &str) -> Option<&Record> {
        self.records.iter().find(|r| r.label == label)
    }
}

/// Why a scenario could not be run (as opposed to a server answering differently).
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// A request did not come back in time.
    #[error("{scenario}: step {step:?} hung for {limit:?}")]
    Hung {
        /// The scenario.
        scenario: String,
        /// The step.
        step: String,
        /// The deadline.
        limit: Duration,
    },
    /// The client could not send a request (connection refused, TLS).
    #[error("{scenario}: step {step:?}: the request failed: {source}")]
    Send {
        /// The scenario.
        scenario: String,
        /// The step.
        step: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// A step needed a value an earlier answer did not have.
    #[error("{scenario}: step {step:?}: {message}")]
    Missing {
        /// The scenario.
        scenario: String,
        /// The step.
        step: String,
        /// What was missing.
        message: String,
    },
}

/// How a watch read ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// After this many events (the stream is then dropped).
    Events(usize),
    /// When the server ends the stream.
    End,
}

/// A client on one server, recording what it answers to one scenario.
pub struct Session {
    client: kube::Client,
    /// The namespace the scenario works in (the same name on both servers).
    pub ns: String,
    scenario: String,
    transcript: Transcript,
}

/// The content types a write can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `application/json` (create, update, delete options).
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    JsonPatch,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (JSON is YAML).
    Apply,
}

impl Body {
    fn content_type(self) -> &'static str {
        match self {
            Body::Json => "application/json",
            Body::Merge => "application/merge-patch+json",
            Body::JsonPatch => "application/json-patch+json",
            Body::Strategic => "application/strategic-merge-patch+json",
            Body::Apply => "application/apply-patch+yaml",
        }
    }
}

impl Session {
    /// A session for `scenario` in namespace `ns`.
    pub fn new(client: kube::Client, ns: &str, scenario: &str) -> Session {
        Session {
            client,
            ns: ns.to_owned(),
            scenario: scenario.to_owned(),
            transcript: Transcript::default(),
        }
    }

    /// The answers so far.
    pub fn into_transcript(self) -> Transcript {
        self.transcript
    }

    /// `path` with `{ns}` replaced by the namespace.
    fn url(&self, path: &str) -> String {
        path.replace("{ns}", &self.ns)
    }

    fn hung(&self, step: &str, limit: Duration) -> ConformanceError {
        ConformanceError::Hung {
            scenario: self.scenario.clone(),
            step: step.to_owned(),
            limit,
        }
    }

    /// A failure of this scenario's step `step` that is the scenario's, not a server's.
    pub fn missing(&self, step: &str, message: impl Into<String>) -> ConformanceError {
        ConformanceError::Missing {
            scenario: self.scenario.clone(),
            step: step.to_owned(),
            message: message.into(),
        }
    }

    async fn send(
        &self,
        step: &str,
        method: http::Method,
        url: &str,
        body: Option<(Body, &Value)>,
    ) -> Result<http::Response<kube::client::Body>, ConformanceError> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(url)
            .header("accept", "application/json");
        let bytes = match body {
            Some((kind, v)) => {
                req = req.header("content-type", kind.content_type());
                serde_json::to_vec(v).expect("a JSON value serialises")
            }
            None => Vec::new(),
        };
        let req = req
            .body(kube::client::Body::from(bytes))
            .expect("a request with a valid method and path builds");
        match tokio::time::timeout(REQUEST_LIMIT, self.client.send(req)).await {
            Err(_) => Err(self.hung(step, REQUEST_LIMIT)),
            Ok(Err(source)) => Err(ConformanceError::Send {
                scenario: self.scenario.clone(),
                step: step.to_owned(),
                source,
            }),
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// Sends one request and records its answer under `step`; returns the answer's body.
    pub async fn call(
        &mut self,
        step: &str,
        method: http::Method,
        path: &str,
        body: Option<(Body, Value)>,
    ) -> Result<Value, ConformanceError> {
        let url = self.url(path);
        let resp = self
            .send(
                step,
                method.clone(),
                &url,
                body.as_ref().map(|(k, v)| (*k, v)),
            )
            .await?;
        let code = resp.status().as_u16();
        let bytes = match tokio::time::timeout(REQUEST_LIMIT, resp.into_body().collect()).await {
            Err(_) => return Err(self.hung(step, REQUEST_LIMIT)),
            Ok(Err(_)) => Vec::new(),
            Ok(Ok(collected)) => collected.to_bytes().to_vec(),
        };
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        self.record(step, &method, path, code, value.clone());
        Ok(value)
    }

    /// Sends one request whose answer is not part of the claim (a clean-up whose timing the
    /// two servers do not share) and records nothing (keeps I2); a request that fails to be
    /// sent is still an error.
    pub async fn unrecorded(
        &mut self,
        step: &str,
        method: http::Method,
        path: &str,
        body: Option<(Body, Value)>,
    ) -> Result<(), ConformanceError> {
        let url = self.url(path);
        let resp = self
            .send(step, method, &url, body.as_ref().map(|(k, v)| (*k, v)))
            .await?;
        let _ = tokio::time::timeout(REQUEST_LIMIT, resp.into_body().collect()).await;
        Ok(())
    }

    /// GET.
    pub async fn get(&mut self, step: &str, path: &str) -> Result<Value, ConformanceError> {
        self.call(step, http::Method::GET, path, None).await
    }

    /// POST a JSON body.
    pub async fn post(
        &mut self,
        step: &str,
        path: &str,
        body: Value,
    ) -> Result<Value, ConformanceError> {
        self.call(step, http::Method::POST, path, Some((Body::Json, body)))
            .await
    }

    /// PUT a JSON body.
    pub async fn put(
        &mut self,
        step: &str,
        path: &str,
        body: Value,
    ) -> Result<Value, ConformanceError> {
        self.call(step, http::Method::PUT, path, Some((Body::Json, body)))
            .await
    }

    /// PATCH with a body of `kind`.
    pub async fn patch(
        &mut self,
        step: &str,
        path: &str,
        kind: Body,
        body: Value,
    ) -> Result<Value, ConformanceError> {
        self.call(step, http::Method::PATCH, path, Some((kind, body)))
            .await
    }

    /// DELETE, with delete options when given.
    pub async fn delete(
        &mut self,
        step: &str,
        path: &str,
        options: Option<Value>,
    ) -> Result<Value, ConformanceError> {
        self.call(
            step,
            http::Method::DELETE,
            path,
            options.map(|o| (Body::Json, o)),
        )
        .await
    }

    /// Opens a watch (`path` carries `watch=true` and its query) and reads its events until
    /// `until`, or for at most `limit`; records them as one answer (an array of events, with a
    /// last element `"<deadline>"` if the limit ended the read).
    pub async fn watch(
        &mut self,
        step: &str,
        path: &str,
        until: Until,
        limit: Duration,
    ) -> Result<Vec<Value>, ConformanceError> {
        let url = self.url(path);
        let resp = self.send(step, http::Method::GET, &url, None).await?;
        let code = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut events = Vec::new();
        let mut buf = Vec::<u8>::new();
        let deadline = tokio::time::Instant::now() + limit;
        let mut ended = false;
        'read: loop {
            if let Until::Events(n) = until
                && events.len() >= n
            {
                break;
            }
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => break,
                Ok(None) | Ok(Some(Err(_))) => {
                    ended = true;
                    break;
                }
                Ok(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    buf.extend_from_slice(&data);
                    while let Some(i) = buf.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=i).collect();
                        let line = String::from_utf8_lossy(&line);
                        if line.trim().is_empty() {
                            continue;
                        }
                        events.push(
                            serde_json::from_str(line.trim())
                                .unwrap_or_else(|_| Value::String(line.trim().to_owned())),
                        );
                        if let Until::Events(n) = until
                            && events.len() >= n
                        {
                            break 'read;
                        }
                    }
                }
            }
        }
        if ended && !buf.is_empty() {
            let rest = String::from_utf8_lossy(&buf).trim().to_owned();
            events.push(serde_json::from_str(&rest).unwrap_or(Value::String(rest)));
        }
        let mut recorded = events.clone();
        if until == Until::End && !ended {
            recorded.push(json!("<deadline>"));
        }
        if let Until::Events(n) = until
            && events.len() < n
            && !ended
        {
            recorded.push(json!("<deadline>"));
        }
        self.record(step, &http::Method::GET, path, code, Value::Array(recorded));
        Ok(events)
    }

    /// Records a fact a step derived (a field's presence, a count), as a 0-coded answer.
    pub fn note(&mut self, step: &str, fact: Value) {
        self.record(step, &http::Method::OPTIONS, "(derived)", 0, fact);
    }

    fn record(&mut self, step: &str, method: &http::Method, path: &str, code: u16, body: Value) {
        debug_assert!(
            self.transcript.get(step).is_none(),
            "{}: step label {step:?} used twice",
            self.scenario
        );
        self.transcript.records.push(Record {
            label: step.to_owned(),
            request: format!("{method} {path}"),
            code,
            body,
        });
    }
}

/// `metadata.resourceVersion` of an answer, or a [`ConformanceError::Missing`].
pub fn rv(s: &Session, step: &str, answer: &Value) -> Result<String, ConformanceError> {
    answer["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| s.missing(step, format!("no metadata.resourceVersion in {answer}")))
}

/// One difference between the two servers at one place of one step's answer, after
/// normalisation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Finding {
    /// The real server it was found on (`kube-apiserver`, or with `--watch-cache=false`).
    pub server: String,
    /// The scenario.
    pub scenario: String,
    /// The step.
    pub step: String,
    /// Where in the answer: a JSON pointer, `(code)` when the status codes differ, `(kind)`
    /// when the bodies are different kinds, `(step)` when only one server has the step.
    pub path: String,
    /// What the embedded server answered there.
    pub embedded: String,
    /// What the real server answered there.
    pub real: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} / {} {}: embedded {}, real {}",
            self.server, self.scenario, self.step, self.path, self.embedded, self.real
        )
    }
}

/// Compares two normalised transcripts of `scenario` from the embedded server and from the
/// real server `server`: one [`Finding`] per place their answers differ. Differing codes or
/// kinds are one finding for the step; otherwise every differing leaf of the body is one.
pub fn compare(
    server: &str,
    scenario: &str,
    embedded: &Transcript,
    real: &Transcript,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut finding = |step: &str, path: &str, e: String, r: String| {
        out.push(Finding {
            server: server.to_owned(),
            scenario: scenario.to_owned(),
            step: step.to_owned(),
            path: path.to_owned(),
            embedded: e,
            real: r,
        })
    };
    for r in &real.records {
        let Some(e) = embedded.get(&r.label) else {
            finding(&r.label, "(step)", "(none)".into(), r.code.to_string());
            continue;
        };
        if e.code != r.code {
            finding(
                &r.label,
                "(code)",
                format!("{} {}", e.code, brief(&e.body)),
                format!("{} {}", r.code, brief(&r.body)),
            );
        } else if e.body.get("kind") != r.body.get("kind") {
            finding(&r.label, "(kind)", brief(&e.body), brief(&r.body));
        } else {
            let mut diffs = Vec::new();
            differences("", &e.body, &r.body, &mut diffs);
            for (path, ev, rv) in diffs {
                finding(&r.label, &path, ev, rv);
            }
        }
    }
    for e in &embedded.records {
        if real.get(&e.label).is_none() {
            finding(&e.label, "(step)", e.code.to_string(), "(none)".into());
        }
    }
    out
}

/// A short form of an answer: a Status's reason, else its kind, else the value cut short.
pub fn brief(v: &Value) -> String {
    if v["kind"] == "Status" {
        return v["reason"]
            .as_str()
            .unwrap_or(v["status"].as_str().unwrap_or("Status"))
            .to_owned();
    }
    if let Some(kind) = v["kind"].as_str() {
        return kind.to_owned();
    }
    cut(&v.to_string(), 80)
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// Every JSON path at which `a` and `b` differ, with both values there (shortened): a key
/// only one side has, a leaf that differs, or (for arrays of different lengths) the length,
/// after the common elements.
pub fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(xv), Some(yv)) => differences(&p, xv, yv, out),
                    (xv, yv) => out.push((p, shown(xv), shown(yv))),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (xv, yv)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}/{i}"), xv, yv, out);
            }
            if x.len() != y.len() {
                out.push((
                    format!("{path} (length)"),
                    format!("{} items", x.len()),
                    format!("{} items", y.len()),
                ));
            }
        }
        _ if a == b => {}
        _ => out.push((
            if path.is_empty() {
                "/".into()
            } else {
                path.to_owned()
            },
            shown(Some(a)),
            shown(Some(b)),
        )),
    }
}

fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "(absent)".to_owned(), |v| cut(&v.to_string(), 90))
}

/// Which server a run is on, for its setup: the real one needs the book's CRDs installed; the
/// embedded one serves the book's kinds without them. Both get each scenario's namespace.
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
    if server == Server::Real {
        setup::install_crds(client).await?;
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

/// A nonce for namespace names: the same for both servers in one run, another in the next.
pub fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:x}", (t.as_millis() as u64) & 0xff_ffff)
}

/// Each scenario's expectations that `t` does not meet, as messages.
pub fn unmet(scenario: &Scenario, t: &Transcript) -> Vec<String> {
    scenario
        .expect
        .iter()
        .filter_map(|e| e.check(t).err())
        .collect()
}

pub mod setup;

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
    let nonce = nonce();
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

/// The differences table chapter 14 prints: every entry of [`KNOWN`] with the findings of
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
