//! The controller: requests, results, events, predicates and handlers, after
//! controller-runtime v0.22 (`pkg/reconcile`, `pkg/event`, `pkg/predicate`, `pkg/handler`).
//!
//! How the parts meet:
//!
//! ```text
//! informer ──on_add/on_update/on_delete──► Event ──predicates──► handler ──► Request ──► queue
//!                                                                 (name, namespace only)
//! ```
//!
//! A worker takes a [`Request`] from the queue, reads the object from the informer's cache and
//! reconciles. The event that caused the request never reaches the reconciler.

#[allow(clippy::module_inception)] // upstream's layout: pkg/internal/controller/controller.go
pub mod controller;
pub mod event;
pub mod handler;
pub mod predicate;
pub mod priorityqueue;
pub mod reconcile;

pub use controller::{
    Action, Builder, Context, Controller, ControllerError, ControllerMetrics, MetricsSnapshot,
    Outcome, Reconciler, ResultLabel, decide,
};
pub use event::Event;
pub use reconcile::{Error, Request, Result};
