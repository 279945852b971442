//! One scenario of the differential suite: the requests it sends ([`Run`]), the real servers it
//! is compared with ([`On`]), and what upstream answers to its key steps ([`Expect`]). The
//! scenario lists (`scenarios`, `scenarios_builtins`, `scenarios_crds`) are built from these.

use std::{future::Future, pin::Pin};

use serde_json::{Value, json};

use super::{
    error::ConformanceError,
    session::Session,
    transcript::{Transcript, brief},
};

/// A scenario's future.
pub type Run<'a> = Pin<Box<dyn Future<Output = Result<(), ConformanceError>> + Send + 'a>>;

/// One scenario.
#[derive(Clone, Copy)]
pub struct Scenario {
    /// A short stable name.
    pub name: &'static str,
    /// What it checks, in one line.
    pub what: &'static str,
    /// The requests.
    pub run: for<'a> fn(&'a mut Session) -> Run<'a>,
    /// What upstream answers to its key steps.
    pub expect: &'static [Expect],
    /// Which real servers it is compared with.
    pub on: On,
}

/// Which real servers a scenario is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// kube-apiserver with and without its watch cache.
    Both,
    /// Only kube-apiserver with `--watch-cache=false`: with the cache, the answer depends on
    /// the cache's window (everything since the server started, until the window slides), not
    /// on etcd's compaction, so it changes over the life of the server.
    WithoutWatchCache,
}

/// What one step must answer: its code, and optionally a field's value (a JSON pointer into
/// the body, and the value as JSON text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    /// The step's label.
    pub step: &'static str,
    /// The HTTP status code.
    pub code: u16,
    /// A field of the body and its value.
    pub field: Option<(&'static str, &'static str)>,
}

pub(crate) const fn code(step: &'static str, code: u16) -> Expect {
    Expect {
        step,
        code,
        field: None,
    }
}

pub(crate) const fn field(
    step: &'static str,
    code: u16,
    pointer: &'static str,
    value: &'static str,
) -> Expect {
    Expect {
        step,
        code,
        field: Some((pointer, value)),
    }
}

impl Expect {
    /// Whether `t` answers as expected; the mismatch otherwise.
    pub fn check(&self, t: &Transcript) -> Result<(), String> {
        let Some(r) = t.get(self.step) else {
            return Err(format!("step {:?}: not in the transcript", self.step));
        };
        if r.code != self.code {
            return Err(format!(
                "step {:?}: code {} ({}), expected {}",
                self.step,
                r.code,
                brief(&r.body),
                self.code
            ));
        }
        if let Some((pointer, want)) = self.field {
            let want: Value = serde_json::from_str(want).expect("an expectation is valid JSON");
            let got = r.body.pointer(pointer).cloned().unwrap_or(Value::Null);
            if got != want {
                return Err(format!(
                    "step {:?}: {pointer} = {got}, expected {want}",
                    self.step
                ));
            }
        }
        Ok(())
    }

    /// The same expectation, changed: another code, and another value for its field. A check
    /// that passes must fail on it.
    pub fn changed(&self) -> Expect {
        Expect {
            code: if self.code == 200 { 201 } else { 200 },
            field: self.field.map(|(p, _)| (p, "\"changed\"")),
            ..*self
        }
    }
}

/// `body` with `metadata.resourceVersion` set.
pub fn at(mut body: Value, rv: &str) -> Value {
    body["metadata"]["resourceVersion"] = json!(rv);
    body
}
