//! The book's experiments on kube-runtime 5.0.0 (`kube-runtime/src/controller/mod.rs`,
//! `scheduler.rs`, `controller/runner.rs`, `reflector/store.rs`), beside this crate's port.

pub mod findings;
pub mod storm;
