//! # controlloop
//!
//! How Kubernetes controllers really work, as faithful Rust ports of the controller
//! machinery in client-go and controller-runtime, and an executable book that runs every claim
//! it makes.
//!
//! The port pins its upstream: client-go v0.36 (Kubernetes 1.36) and controller-runtime v0.22.
//! Behaviour at other versions is modelled through feature gates and named where it differs.
//!
//! The clusters the ports run against:
//! - [`apiserver`]: an embedded Kubernetes API server (HTTP or in-process).
//! - [`fake`]: client-go's fake clientset (`kubernetes/fake`), emulated.
//! - [`resources`]: the book's custom resource, `Widget`.
//!
//! The ports:
//! - [`workqueue`]: client-go's workqueue, delaying and rate-limiting queues, rate limiters.
//! - [`cache`]: the store, DeltaFIFO and RealFIFO, and the FIFO an informer runs; the
//!   reflector, the shared informer and their list-then-watch source (client-go).
//! - [`features`]: versioned feature gates (which behaviour is on at which Kubernetes version).
//! - [`controller`]: requests, results, events, predicates and handlers (controller-runtime).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apiserver;
pub mod cache;
pub mod controller;
pub mod fake;
pub mod features;
pub mod resources;
pub mod workqueue;
