//! What a reconciler is given and what it returns. Follows controller-runtime's
//! `pkg/reconcile/reconcile.go` (v0.22.5, v0.24.1 and v0.25.3; they differ only in `Result.Priority`,
//! which v0.24 and v0.25 have and v0.22 lacks).
//!
//! The one rule this module exists to state: a [`Request`] names an object and says nothing
//! else. It carries no event (created? updated? deleted?) and no object contents. A reconciler
//! that wants the object reads it from the informer's cache, where it finds the state as it is
//! *now*, however many changes led to it. That is what makes merging requests safe, and it is
//! the whole difference between a level-triggered and an edge-triggered controller.
//!
//! # Differences from upstream
//! - An error carries no [`ReconcileResult`] (a reconcile returns one or the other), so a `priority`
//!   cannot come with an error: an error's requeue keeps the request's priority, where
//!   upstream's v0.24 would take a `Result.Priority` returned beside the error
//!   ([`Release::requeue_priority`](super::Release::requeue_priority)).
//! - `Requeue` is kept although upstream has deprecated it, because its backoff behaviour is one
//!   of the things the book measures.

use std::{fmt, time::Duration};

use super::priorityqueue::Priority;
use crate::workqueue::KeyRef;

/// The unit of work: the namespace and name of one object, and nothing more.
///
/// Upstream embeds `types.NamespacedName`, and its documentation says the request deliberately
/// holds neither the event nor the object's contents. There is no field here to put them in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// The object's namespace; empty for a cluster-scoped object.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl Request {
    /// A request for `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Request {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The cache key of the object this request names: `namespace/name`, or `name` for a
    /// cluster-scoped object (client-go's `MetaNamespaceKeyFunc`).
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// A [`Request`] by borrowed namespace and name, for [`Queue::add_ref`]: an event handler that
/// holds an object's metadata adds its request without allocating, and the queue builds the
/// owned [`Request`] only when it stores it.
///
/// It hashes exactly as the `Request` it stands for (the same fields, in the same order, each
/// hashed as a `str`), which the queue relies on.
///
/// ```
/// use controlloop::{controller::{Request, RequestRef}, workqueue::Queue};
///
/// let queue: Queue<Request> = Queue::new();
/// queue.add(Request::new("default", "web"));
/// queue.add_ref(&RequestRef::new("default", "web")); // coalesces, allocates nothing
/// assert_eq!(queue.len(), 1);
/// ```
///
/// [`Queue::add_ref`]: crate::workqueue::Queue::add_ref
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestRef<'a> {
    /// The object's namespace; empty for a cluster-scoped object.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
}

impl<'a> RequestRef<'a> {
    /// A borrowed request for `namespace/name`.
    pub fn new(namespace: &'a str, name: &'a str) -> Self {
        RequestRef { namespace, name }
    }
}

impl<'a> From<&'a Request> for RequestRef<'a> {
    fn from(r: &'a Request) -> Self {
        RequestRef::new(&r.namespace, &r.name)
    }
}

impl KeyRef<Request> for RequestRef<'_> {
    fn matches(&self, item: &Request) -> bool {
        self.namespace == item.namespace && self.name == item.name
    }
    fn to_key(&self) -> Request {
        Request::new(self.namespace, self.name)
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// What a successful reconcile asks of the controller.
///
/// | result | what the controller does (v0.22 and v0.24) |
/// |---|---|
/// | `ReconcileResult::done()` | `forget` the request's failures |
/// | `requeue_after > 0` | `forget`, then `add_after(d)`; wins over `requeue` |
/// | `requeue` | `add_rate_limited`, **without** `forget`, so repeated requeues back off |
///
/// Any requeue is added at the request's priority (what the queue handed it out with), or at
/// `priority` when set: v0.24 only, and only a priority queue orders by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileResult {
    /// Ask for a rate-limited requeue. Deprecated upstream; see the table above.
    pub requeue: bool,
    /// Requeue after this delay, not rate-limited. Zero means no delayed requeue.
    pub requeue_after: Duration,
    /// The priority of the requeue this result asks for (upstream v0.23+ `Result.Priority`);
    /// `None` keeps the request's own. Ignored under v0.22, which has no such field.
    pub priority: Option<Priority>,
}

impl ReconcileResult {
    /// Nothing more to do for this object until it changes.
    pub fn done() -> Self {
        ReconcileResult::default()
    }

    /// Look at this object again after `d`, whether or not it changes.
    pub fn requeue_after(d: Duration) -> Self {
        ReconcileResult {
            requeue_after: d,
            ..ReconcileResult::default()
        }
    }

    /// Requeue through the rate limiter (exponential backoff).
    pub fn requeue() -> Self {
        ReconcileResult {
            requeue: true,
            ..ReconcileResult::default()
        }
    }

    /// The same result, asking that its requeue be added at `priority`.
    pub fn with_priority(self, priority: Priority) -> Self {
        ReconcileResult {
            priority: Some(priority),
            ..self
        }
    }

    /// True when the result asks for nothing (upstream's `IsZero`).
    pub fn is_zero(&self) -> bool {
        *self == ReconcileResult::default()
    }
}

/// What a reconcile returns: a result, or an error.
pub type Outcome = std::result::Result<ReconcileResult, ReconcileError>;

/// A failed reconcile.
///
/// An ordinary error is retried through the rate limiter. A terminal error is never retried,
/// and (as upstream) does not reset the backoff either: only a later success does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// Retried with exponential backoff.
    #[error("{0}")]
    Retry(String),
    /// Not retried: the reconciler says retrying cannot help.
    #[error("terminal error: {0}")]
    Terminal(String),
    /// The reconciler panicked; recovered and treated as an ordinary error.
    #[error("panic: {0} [recovered]")]
    Panic(String),
}

impl ReconcileError {
    /// An error to be retried with backoff.
    pub fn retry(msg: impl fmt::Display) -> Self {
        ReconcileError::Retry(msg.to_string())
    }

    /// An error that must not be retried.
    pub fn terminal(msg: impl fmt::Display) -> Self {
        ReconcileError::Terminal(msg.to_string())
    }

    /// Whether the controller must leave this request alone (upstream's
    /// `errors.Is(err, TerminalError(nil))`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, ReconcileError::Terminal(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_key_is_namespace_slash_name_or_just_name() {
        assert_eq!(Request::new("default", "a").key(), "default/a");
        assert_eq!(Request::new("", "node-1").key(), "node-1");
    }

    /// A borrowed request must hash as its `Request` (the queue finds one by the other's hash)
    /// and match only it. Two requests whose fields split the same text differently stay
    /// apart.
    #[test]
    fn a_request_ref_hashes_and_matches_as_its_request() {
        use std::hash::BuildHasher;
        let h = std::collections::hash_map::RandomState::new();
        let f = hashbrown::DefaultHashBuilder::default();
        for (ns, name) in [
            ("default", "web"),
            ("", "node-1"),
            ("a", "b/c"),
            ("a/b", "c"),
        ] {
            let owned = Request::new(ns, name);
            let borrowed = RequestRef::new(ns, name);
            assert_eq!(h.hash_one(&owned), h.hash_one(borrowed), "{ns}/{name}");
            assert_eq!(f.hash_one(&owned), f.hash_one(borrowed), "{ns}/{name}");
            assert!(borrowed.matches(&owned));
            assert_eq!(KeyRef::<Request>::to_key(&borrowed), owned);
            assert_eq!(RequestRef::from(&owned), borrowed);
        }
        assert!(!RequestRef::new("a", "b/c").matches(&Request::new("a/b", "c")));
        let q = crate::workqueue::Queue::new();
        q.add(Request::new("a/b", "c"));
        q.add_ref(&RequestRef::new("a", "b/c"));
        q.add_ref(&RequestRef::new("a/b", "c"));
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn only_the_empty_result_is_zero() {
        assert!(ReconcileResult::done().is_zero());
        assert!(!ReconcileResult::requeue().is_zero());
        assert!(!ReconcileResult::requeue_after(Duration::from_millis(1)).is_zero());
        assert!(
            !ReconcileResult::done().with_priority(0).is_zero(),
            "upstream: a set pointer"
        );
    }

    #[test]
    fn errors_print_as_upstream_does() {
        assert_eq!(
            ReconcileError::terminal("bad spec").to_string(),
            "terminal error: bad spec"
        );
        assert_eq!(
            ReconcileError::Panic("boom".into()).to_string(),
            "panic: boom [recovered]"
        );
        assert!(
            ReconcileError::terminal("x").is_terminal()
                && !ReconcileError::retry("x").is_terminal()
        );
    }
}
