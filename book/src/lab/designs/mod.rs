//! The designs several chapters run: each exists once, here, and every chapter that runs it
//! imports it from here rather than from the chapter that introduced it.
//!
//! - [`trigger`]: chapter 07's level- and edge-triggered controllers (run again by chapter 12's
//!   fault matrix, armed through their hooks, and by chapter 13 on both releases).
//! - [`status_record`]: chapter 08's three ways to act once per switch-on (the status record among
//!   them), which chapter 15 runs as two replicas and chapter 17 builds its first write on.

pub mod status_record;
pub mod trigger;
