//! What a server answered to one scenario, and the short form an answer is quoted in.

use serde_json::Value;

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

pub(super) fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}
