//! Where two normalised transcripts differ: one finding per place.

use std::fmt;

use serde_json::Value;

use super::transcript::{Transcript, brief, cut};

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
