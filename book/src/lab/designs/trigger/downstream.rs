//! The world each of chapter 07's controllers drives, and the same-key detector inside it.

use std::{collections::HashMap, sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::OBJECT;

/// What a reconcile asks the downstream system to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run exactly this many replicas (create if absent).
    Set(i32),
    /// Create with this many replicas; if it already exists, nothing to do.
    CreateIfAbsent(i32),
    /// Remove.
    Delete,
}

/// The downstream refused a command; retrying later may work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("downstream unavailable, try again")]
pub struct Unavailable;

/// The world a controller manages: replicas per widget key. Every command takes `cost`
/// (a tokio sleep) and counts as one reconcile. It also carries the same-key detector: how many
/// commands for one key ran at the same time.
pub struct Downstream {
    cost: Duration,
    state: Mutex<World>,
}

#[derive(Default)]
struct World {
    replicas: HashMap<String, i32>,
    running: HashMap<String, u32>,
    max_per_key: u32,
    overlapping: u64,
    commands: u64,
    fail_next: u64,
    failures: u64,
    /// `(when, value)` each time [`OBJECT`]'s value changed.
    history: Vec<(Instant, Option<i32>)>,
    /// When each key's value last changed.
    changed: HashMap<String, Instant>,
    /// When the last command's cost ended (an aborted command's never does).
    ended: Option<Instant>,
}

/// Leaves the detector's count for a key when a command ends, even if its task is aborted
/// (a killed controller).
struct Holding<'a> {
    downstream: &'a Downstream,
    key: String,
}

// book: ch07_downstream
impl Drop for Holding<'_> {
    fn drop(&mut self) {
        let mut w = self.downstream.state.lock();
        if let Some(n) = w.running.get_mut(&self.key) {
            *n -= 1; // the command ended, or its task was aborted
        }
    }
}

impl Downstream {
    /// Runs one command for `key`: waits `cost`, then applies it, unless a failure was armed
    /// with [`Downstream::fail_next`].
    pub async fn run(&self, key: &str, command: Command) -> Result<(), Unavailable> {
        let _holding = {
            // The same-key detector: one more command running for `key`, until it ends.
            let mut w = self.state.lock();
            w.commands += 1;
            let n = w.running.entry(key.to_owned()).or_default();
            *n += 1;
            let n = *n;
            if n > 1 {
                w.overlapping += 1;
            }
            w.max_per_key = w.max_per_key.max(n);
            Holding {
                downstream: self,
                key: key.to_owned(),
            }
        };
        if !self.cost.is_zero() {
            tokio::time::sleep(self.cost).await; // the lock is free: another worker may enter
        }
        let mut w = self.state.lock();
        w.ended = Some(Instant::now());
        if w.fail_next > 0 {
            w.fail_next -= 1;
            w.failures += 1;
            return Err(Unavailable);
        }
        let before = w.replicas.get(key).copied();
        match command {
            Command::Set(n) => {
                w.replicas.insert(key.to_owned(), n);
            }
            Command::CreateIfAbsent(n) => {
                w.replicas.entry(key.to_owned()).or_insert(n);
            }
            Command::Delete => {
                w.replicas.remove(key);
            }
        }
        let after = w.replicas.get(key).copied();
        if after != before {
            w.changed.insert(key.to_owned(), Instant::now());
        }
        if after != before && key.ends_with(&format!("/{OBJECT}")) {
            w.history.push((Instant::now(), after));
        }
        Ok(())
    }
}
// book: end ch07_downstream

impl Downstream {
    /// A world where every command takes `cost`.
    pub fn new(cost: Duration) -> Arc<Self> {
        Arc::new(Downstream {
            cost,
            state: Mutex::new(World::default()),
        })
    }

    /// The next `n` commands to finish fail with [`Unavailable`] (a transient outage).
    pub fn fail_next(&self, n: u64) {
        self.state.lock().fail_next = n;
    }

    /// Replicas running for `key` (`namespace/name`), if any.
    pub fn replicas(&self, key: &str) -> Option<i32> {
        self.state.lock().replicas.get(key).copied()
    }

    /// Commands run so far: one per reconcile.
    pub fn commands(&self) -> u64 {
        self.state.lock().commands
    }

    /// The same-key detector: the most commands for one key that ever ran at once.
    pub fn max_holders_per_key(&self) -> u32 {
        self.state.lock().max_per_key
    }

    /// Commands that started while another command for the same key was running.
    pub fn overlapping(&self) -> u64 {
        self.state.lock().overlapping
    }

    /// Commands that failed transiently.
    pub fn failures(&self) -> u64 {
        self.state.lock().failures
    }

    /// When `key`'s value last changed, if it ever did.
    pub fn last_changed(&self, key: &str) -> Option<Instant> {
        self.state.lock().changed.get(key).copied()
    }

    /// When the last command that was not aborted ended (its cost spent, applied or failed).
    pub fn last_ended(&self) -> Option<Instant> {
        self.state.lock().ended
    }

    /// When [`OBJECT`] last changed value, and to what.
    pub fn last_change(&self) -> Option<(Instant, Option<i32>)> {
        self.state.lock().history.last().copied()
    }
}
