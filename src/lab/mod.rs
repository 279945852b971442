//! The experiments' rig, and the experiments that chapters and the command line run.
//!
//! [`rig`] starts the paused or real runtime, the embedded cluster and an informer on it, writes
//! to an object, and records what reconcilers observed: the lines a chapter block hides because
//! they do not carry its claim. The other modules hold each chapter's experiments as functions
//! that `cargo run --release` runs (registered in [`mod@crate::book::chapters`]): each runs the
//! experiment, checks every durable claim, and records its results through
//! [`crate::book::snap`] exactly as the chapter does, so the page and the run can never disagree
//! about what was measured.

pub mod burst;
pub mod edge;
pub mod fifo;
pub mod kube_runtime;
pub mod method;
pub mod resync;
pub mod rig;
pub mod status_hatch;
pub mod workqueue;
