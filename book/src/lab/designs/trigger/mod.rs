//! Chapter 07's two designs, which chapter 12's fault matrix and chapter 13's reruns run too:
//! the level-triggered controller (a queue of keys) and the edge-triggered one (a queue of
//! [`Payload`]s), the widget they reconcile and the [`Downstream`] each drives. Chapter 07's
//! experiment ([`crate::lab::edge`]) shows them side by side.

mod designs;
mod downstream;

use serde::Serialize;

use controlloop::controller::Request;

pub use crate::lab::rig::{NAMESPACE, Process};
pub use designs::{
    Armed, Backlog, Backoff, Config, Heard, Hooks, NoFaults, QueuePayloads, Running, edge_worker,
    start_edge, start_level, unarmed,
};
pub use downstream::{Command, Downstream, Unavailable};

/// The widget every write goes to.
pub const OBJECT: &str = "w";

/// What an edge-triggered controller queues: the change an event announced.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum Change {
    /// The object appeared with this many replicas.
    Created {
        /// `spec.replicas` in the event.
        replicas: i32,
    },
    /// `spec.replicas` went from `from` to `to` (the event's old and new objects).
    Updated {
        /// The old object's replicas.
        from: i32,
        /// The new object's replicas.
        to: i32,
    },
    /// The object went away.
    Deleted,
}

/// One queued event: which object, which version of it, and what changed. Two payloads are
/// equal only if they come from the same event (keeps I2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Payload {
    /// The object.
    pub request: Request,
    /// The resourceVersion the event carried.
    pub resource_version: String,
    /// What it announced.
    pub change: Change,
}

/// The two designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Design {
    /// controller-runtime's: queue the key, read the level from the cache.
    Level,
    /// Queue the event's payload and apply the change it carries.
    Edge,
}
