//! A client on one server, sending a scenario's raw requests and recording each answer.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::{
    error::ConformanceError,
    transcript::{Record, Transcript},
};

/// How long one request may take before the step is reported as hung.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(20);

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
    /// two servers do not share, or a read a step derives a fact from) and records nothing
    /// (keeps I2); returns the answer's body (`null` if it is not JSON or did not arrive). A
    /// request that fails to be sent is still an error.
    pub async fn unrecorded(
        &mut self,
        step: &str,
        method: http::Method,
        path: &str,
        body: Option<(Body, Value)>,
    ) -> Result<Value, ConformanceError> {
        let url = self.url(path);
        let resp = self
            .send(step, method, &url, body.as_ref().map(|(k, v)| (*k, v)))
            .await?;
        let bytes = match tokio::time::timeout(REQUEST_LIMIT, resp.into_body().collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            _ => return Ok(Value::Null),
        };
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// The status code of a GET of `path`, recording nothing (a step that waits for a
    /// server to settle).
    pub async fn code_of(&mut self, step: &str, path: &str) -> Result<u16, ConformanceError> {
        let url = self.url(path);
        let resp = self.send(step, http::Method::GET, &url, None).await?;
        Ok(resp.status().as_u16())
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

    /// Opens a watch (`path` carries `watch=true`): its code and its body.
    async fn open_watch(
        &mut self,
        step: &str,
        path: &str,
    ) -> Result<(u16, kube::client::Body), ConformanceError> {
        let url = self.url(path);
        let resp = self.send(step, http::Method::GET, &url, None).await?;
        Ok((resp.status().as_u16(), resp.into_body()))
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
        let (code, mut body) = self.open_watch(step, path).await?;
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

    /// Opens a watch and reads it until an event for which `wanted` holds, for at most
    /// `limit`; records that one event (`[event]`), or `["<deadline>"]`, so that servers whose
    /// controllers write more or fewer times on the way compare equal. Returns the event.
    pub async fn watch_for(
        &mut self,
        step: &str,
        path: &str,
        wanted: fn(&Value) -> bool,
        limit: Duration,
    ) -> Result<Option<Value>, ConformanceError> {
        let (code, mut body) = self.open_watch(step, path).await?;
        let mut buf = Vec::<u8>::new();
        let deadline = tokio::time::Instant::now() + limit;
        let mut found = None;
        while found.is_none() {
            let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await else {
                break; // the deadline, or the stream ended
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buf.extend_from_slice(&data);
            while let Some(i) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line)
                    && wanted(&event)
                {
                    found = Some(event);
                    break;
                }
            }
        }
        let recorded = found.clone().unwrap_or_else(|| json!("<deadline>"));
        self.record(step, &http::Method::GET, path, code, json!([recorded]));
        Ok(found)
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
