//! The book kit: how a run is recorded and checked, below every experiment.
//!
//! No upstream file: this is the executable book's own support. The kit knows the ports (a
//! moved diff names a `Release`) but never the experiments: [`crate::lab`] imports it, never
//! the other way.
//!
//! - [`snap`]: named insta snapshots in the top-level `snapshots/` folder.
//! - [`band`]: tolerance bands for run-specific numbers, each with its measured basis.
//! - [`basis`]: a band's runs, committed as a file, and the one rule that derives the band.
//! - [`claims`]: the table `cargo run` ends with, one row per claim, filled by the run.
//! - [`measured`]: this run's measured values, written beside a banded table for the site.
//! - [`moved`]: a snapshot on two upstream releases, and the diff a reviewer sees.
//! - [`plot`]: the chapters' figures as SVG, each held to what its run draws.
//! - [`drills`]: the checker for chapter 09's references to sections and tests.

pub mod band;
pub mod basis;
pub mod claims;
pub mod drills;
pub mod measured;
pub mod moved;
pub mod plot;
pub mod snap;
