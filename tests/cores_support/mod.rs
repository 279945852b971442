//! Operation-sequence checks of the pure queue and FIFO cores against reference models,
//! shared by the proptest runs in `cargo test` (`tests/workqueue_model.rs`,
//! `tests/fifo_model.rs`) and the `cargo fuzz` targets in `fuzz/` (which include this module by
//! path).
//!
//! Each check drives a core through a sequence of operations next to a small model written
//! from upstream's behaviour (client-go v0.36.3 `util/workqueue/queue.go`,
//! `tools/cache/delta_fifo.go`, `tools/cache/the_real_fifo.go`), and compares every observable
//! after every step: what each call returned, the lengths, the queued order, whether the FIFO
//! is synced and closed, and what each Pop handed out with its initial-list flag. At the end it
//! closes (or shuts down) both and drains them, comparing every item still queued. The models
//! trade speed for clarity: plain lists searched from the front, ordered sets, no hashing.
//!
//! A check returns `Err` naming the step, the operation and both sides; it never panics on a
//! divergence, so the fuzz targets and proptest can report the input that caused it.
//!
//! Bytes become operations through [`Bytes`]: every byte string is a valid (possibly empty)
//! sequence, so a fuzzer's mutations stay meaningful, and sequences are capped at
//! [`MAX_OPS`] operations so one input costs microseconds.
#![allow(dead_code)]

pub mod delta_fifo;
pub mod fifo;
pub mod queue;
pub mod real_fifo;

/// The longest sequence decoded from one input.
pub const MAX_OPS: usize = 400;

/// Reads a fuzzer's bytes one at a time; past the end every read is 0.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }

    /// The next byte, or 0 past the end.
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Decodes operations with `op` until the input or [`MAX_OPS`] runs out.
    pub fn ops<T>(mut self, mut op: impl FnMut(&mut Self) -> T) -> Vec<T> {
        let mut ops = Vec::new();
        while !self.is_empty() && ops.len() < MAX_OPS {
            ops.push(op(&mut self));
        }
        ops
    }
}

/// A divergence at step `i`: the message a check returns.
pub fn diverged(
    i: usize,
    op: &dyn std::fmt::Debug,
    what: &str,
    core: &dyn std::fmt::Debug,
    model: &dyn std::fmt::Debug,
) -> String {
    format!("step {i} ({op:?}): {what}: the core gives {core:?}, the model {model:?}")
}
