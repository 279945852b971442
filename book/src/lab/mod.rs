//! The experiments' rig, and the experiments that chapters and the command line run.
//!
//! [`rig`] starts the paused or real runtime, the embedded cluster and an informer on it, writes
//! to an object, and records what reconcilers observed: the lines a chapter block hides because
//! they do not carry its claim. The other modules hold each chapter's experiments as functions
//! that `cargo run` runs (registered in [`mod@crate::press::chapters`]): each runs the
//! experiment, checks every durable claim, and records its results through
//! [`crate::kit::snap`] exactly as the chapter does, so the page and the run can never disagree
//! about what was measured.
//!
//! Only [`rig`] is documented API. The experiment modules are public so that the chapters' blocks
//! (which mirror them verbatim) and `cargo run` can call them, and hidden from the
//! documentation because they are the book's code, not the crate's interface.

#[doc(hidden)]
pub mod bands;
#[doc(hidden)]
pub mod burst;
#[doc(hidden)]
pub mod drills;
#[doc(hidden)]
pub mod edge;
#[doc(hidden)]
pub mod faults;
#[doc(hidden)]
pub mod fifo;
#[doc(hidden)]
pub mod intro;
#[doc(hidden)]
pub mod kube_runtime;
#[doc(hidden)]
pub mod method;
#[doc(hidden)]
pub mod moved;
#[doc(hidden)]
pub mod resync;
pub mod rig;
#[doc(hidden)]
pub mod status_hatch;
#[doc(hidden)]
pub mod workqueue;
