//! Why a storm could not be run.

use crate::lab::rig::{Backend, RigError};

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BurstError {
    /// Virtual time needs everything in-process: a socket under a paused clock makes the
    /// clock jump while a request is on the wire.
    #[error("the virtual clock needs the in-process backend, not {0:?}")]
    VirtualNeedsInProcess(Backend),
    /// No writes, so nothing to measure.
    #[error("a burst needs at least one write")]
    NoWrites,
    /// Setting up the cluster failed, or a wait for quiet ran out of time.
    #[error(transparent)]
    Rig(#[from] RigError),
    /// A write failed.
    #[error("a write failed: {0}")]
    Write(#[from] kube::Error),
    /// Building the controller failed.
    #[error(transparent)]
    Controller(#[from] controlloop::controller::ControllerError),
    /// The fake clientset refused a write.
    #[error("the fake refused a write: {0}")]
    Fake(#[from] controlloop::fake::FakeError),
}
