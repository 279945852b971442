//! What one storm is: its writes, its workers, its clock, its cluster and the controller design
//! it runs against.

use std::time::Duration;

use crate::lab::rig::{self, Backend, Storm};
use controlloop::controller::Release;

/// Which clock a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Clock {
    /// tokio's paused clock: exact, deterministic. Needs [`Backend::InProcess`].
    Virtual,
    /// The machine's clock.
    Real,
}

/// The parameters of one write storm.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Params {
    /// The writes, their gap and the reconcile cost.
    pub storm: Storm,
    /// The controller's `max_concurrent_reconciles`.
    pub workers: usize,
    /// Virtual or real time.
    pub clock: Clock,
    /// Where the cluster is.
    pub backend: Backend,
    /// Which controller design runs.
    pub variant: Variant,
    /// Which controller-runtime release the controller follows (default: the book's, v0.25).
    pub release: Release,
}

impl Params {
    /// The essay's run ([`rig::ESSAY`], one worker); here under virtual time against the
    /// embedded server in-process.
    pub fn essay() -> Self {
        Params {
            storm: rig::ESSAY,
            workers: 1,
            clock: Clock::Virtual,
            backend: Backend::InProcess,
            variant: Variant::Level,
            release: Release::default(),
        }
    }
    /// With `n` writes.
    pub fn writes(mut self, n: u64) -> Self {
        self.storm.writes = n;
        self
    }
    /// With this gap between writes.
    pub fn gap(mut self, d: Duration) -> Self {
        self.storm.gap = d;
        self
    }
    /// With this reconcile cost.
    pub fn cost(mut self, d: Duration) -> Self {
        self.storm.cost = d;
        self
    }
    /// With `n` workers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }
    /// Under the real clock, over HTTP to the embedded server.
    pub fn real(mut self) -> Self {
        self.clock = Clock::Real;
        self.backend = Backend::Http;
        self
    }
    /// Against this backend.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }
    /// With this controller design.
    pub fn variant(mut self, v: Variant) -> Self {
        self.variant = v;
        self
    }
    /// Following this controller-runtime release.
    pub fn release(mut self, r: Release) -> Self {
        self.release = r;
        self
    }
}

/// Which controller design a storm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Variant {
    /// The faithful controller: a queue of keys, the value read from the cache.
    Level,
    /// **Broken**: a plain channel of keys instead of the workqueue. Every event is a
    /// reconcile (no deduplication), and with several workers two of them can hold the object
    /// at once. The value is still read from the cache.
    ChannelOfKeys,
    /// **Broken**: the workqueue (so requests still collapse), but the reconciler acts on the
    /// payload of the event that first queued the key instead of reading the cache. When it is
    /// behind, the events merged into that request are lost, and it can end on a stale value.
    FirstPayload,
    /// **Broken**: the faithful controller, but the reconciler waits [`DEBOUNCE`](super::DEBOUNCE) before it
    /// reads the cache ("let the writes settle"), holding the key. Events that arrive while it
    /// waits are merged, so it collapses requests even when its work costs no more than the gap.
    Debounced,
}
