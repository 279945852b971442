//! klog-shaped log lines through `tracing`, and a way to capture them. Follows the text format
//! of `k8s.io/klog/v2` structured logging (`ErrorS`, `InfoS`).
//!
//! klog writes an error as `E0102 15:04:05.123456   12345 envvar.go:129] "message" key="v" b=true`.
//! The header (time, thread id, file) varies from run to run; the body does not. This module
//! builds the body, logs it as the `tracing` event's message at the matching level, and
//! [`capture`] (with the `testing` feature) renders captured events as `E] body`: klog's line
//! with the varying header cut down to its severity letter.

/// A value in a klog key/value pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Printed quoted, as klog prints a string.
    Str(String),
    /// Printed bare, as klog prints a bool.
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// The body of a klog structured line: `"msg" err="…" k1=v1 k2=v2`. `err` is printed only
/// when present, as `ErrorS` does.
pub fn body(msg: &str, err: Option<&str>, kvs: &[(&str, Value)]) -> String {
    let mut line = quote(msg);
    if let Some(e) = err {
        line.push_str(&format!(" err={}", quote(e)));
    }
    for (k, v) in kvs {
        match v {
            Value::Str(s) => line.push_str(&format!(" {k}={}", quote(s))),
            Value::Bool(b) => line.push_str(&format!(" {k}={b}")),
        }
    }
    line
}

/// Logs `body(msg, err, kvs)` at error level (upstream `utilruntime.HandleErrorWithLogger`).
pub fn error(msg: &str, err: Option<&str>, kvs: &[(&str, Value)]) {
    tracing::error!(target: "klog", "{}", body(msg, err, kvs));
}

/// Logs `body(msg, None, kvs)` at debug level (upstream `logger.V(1).Info`).
pub fn v1_info(msg: &str, kvs: &[(&str, Value)]) {
    tracing::debug!(target: "klog", "{}", body(msg, None, kvs));
}

/// The capture, for tests and the book (the `testing` feature).
#[cfg(any(test, feature = "testing"))]
mod capturing {
    use std::sync::{Arc, Mutex};

    use tracing::{Level, field::Field};
    use tracing_subscriber::{Layer, layer::SubscriberExt};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<String>>>);

    struct MessageVisitor(String);

    impl tracing::field::Visit for MessageVisitor {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Capture {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let letter = match *event.metadata().level() {
                Level::ERROR => 'E',
                Level::WARN => 'W',
                Level::INFO => 'I',
                _ => return, // klog's V(n) lines are off by default
            };
            let mut v = MessageVisitor(String::new());
            event.record(&mut v);
            self.0
                .lock()
                .expect("capture lock")
                .push(format!("{letter}] {}", v.0));
        }
    }

    /// Runs `f` with a subscriber that records every info-or-higher event on this thread, and
    /// returns `f`'s result with the lines, rendered `E] body`.
    pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
        let cap = Capture::default();
        let subscriber = tracing_subscriber::registry().with(cap.clone());
        let r = tracing::subscriber::with_default(subscriber, f);
        let lines = cap.0.lock().expect("capture lock").clone();
        (r, lines)
    }
}
#[cfg(any(test, feature = "testing"))]
pub use capturing::capture;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_quotes_strings_and_leaves_bools_bare_and_omits_a_missing_err() {
        let b = body(
            "Could not set feature gate, feature is locked",
            None,
            &[
                ("feature", "InOrderInformers".into()),
                ("desiredState", "false".into()),
                ("lockedState", true.into()),
            ],
        );
        assert_eq!(
            b,
            r#""Could not set feature gate, feature is locked" feature="InOrderInformers" desiredState="false" lockedState=true"#
        );
    }

    #[test]
    fn capture_records_errors_and_skips_debug_lines() {
        let ((), lines) = capture(|| {
            error("boom", Some("bad"), &[]);
            v1_info("quiet", &[]);
        });
        assert_eq!(lines, [r#"E] "boom" err="bad""#]);
    }
}
