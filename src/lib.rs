//! # controlloop
//!
//! How Kubernetes controllers really work, as faithful Rust ports of the controller
//! machinery in client-go and controller-runtime, and an executable book that runs every claim
//! it makes.
//!
//! The port pins its upstream: client-go v0.36 (Kubernetes 1.36) and controller-runtime v0.22.
//! Behaviour at other versions is modelled through feature gates and named where it differs.
//!
//! The book's support modules:
//! - [`snap`]: named insta snapshots in the top-level `snapshots/` folder.
//! - [`band`]: tolerance bands for run-specific numbers.
//! - [`site`]: the website, built with mdBook as a library.
//! - [`lab`]: the experiments that chapters and the command line run.
//! - [`apiserver`]: an embedded Kubernetes API server (HTTP or in-process), and a fake clientset.
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
pub mod band;
pub mod cache;
pub mod controller;
pub mod features;
pub mod lab;
pub mod resources;
pub mod site;
pub mod snap;
pub mod workqueue;

/// The book. Each chapter in `chapters/` is an empty module whose documentation is the
/// chapter's Markdown, so `cargo test` compiles and runs every Rust block in it, and names each
/// test after the chapter file and line. `tests/book_layout.rs` fails if a chapter file is
/// missing here or from SUMMARY.md.
#[cfg(doctest)]
pub mod book {
    #[doc = include_str!("../chapters/00-introduction.md")]
    pub mod ch00_introduction {}
    #[doc = include_str!("../chapters/01-two-small-sets.md")]
    pub mod ch01_two_small_sets {}
    #[doc = include_str!("../chapters/02-forget-is-not-done.md")]
    pub mod ch02_forget_is_not_done {}
    #[doc = include_str!("../chapters/03-realfifo.md")]
    pub mod ch03_realfifo {}
    #[doc = include_str!("../chapters/04-resync.md")]
    pub mod ch04_resync {}
    #[doc = include_str!("../chapters/05-method.md")]
    pub mod ch05_method {}
    #[doc = include_str!("../chapters/06-deduplication.md")]
    pub mod ch06_deduplication {}
    #[doc = include_str!("../chapters/07-edge-triggered-bill.md")]
    pub mod ch07_edge_triggered_bill {}
    #[doc = include_str!("../chapters/08-where-the-rule-is-written.md")]
    pub mod ch08_where_the_rule_is_written {}
    #[doc = include_str!("../chapters/09-spoken-drills.md")]
    pub mod ch09_spoken_drills {}
    #[doc = include_str!("../chapters/10-what-varies.md")]
    pub mod ch10_what_varies {}
    #[doc = include_str!("../chapters/99-what-it-costs.md")]
    pub mod ch99_what_it_costs {}
}
