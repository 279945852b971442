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
pub mod scenario;
pub mod scenarios;
pub mod scenarios_builtins;
pub mod setup;

mod error;
mod findings;
mod scenarios_crds;
mod session;
mod suite;
mod transcript;

pub use crate::lab::rig::real::nonce;
pub use differences::{Difference, KNOWN, KUBE_APISERVER, NO_WATCH_CACHE};
pub use error::ConformanceError;
pub use findings::{Finding, compare, differences};
pub use scenarios::{Expect, On, SCENARIOS, Scenario};
pub use session::{Body, REQUEST_LIMIT, Session, Until, rv};
pub use suite::{Outcome, Server, against_real, run, table, unmet};
pub use transcript::{Record, Transcript, brief};
