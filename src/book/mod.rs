//! The book's machinery, in one room: how a chapter is run, recorded, checked and published.
//!
//! No upstream file: this is the executable book's own support.
//!
//! - [`mod@chapters`]: the registry. Each chapter is listed once, with the experiments
//!   `cargo run` runs for it; the same list makes every chapter a doctest.
//! - [`snap`]: named insta snapshots in the top-level `snapshots/` folder.
//! - [`band`]: tolerance bands for run-specific numbers, each with its measured basis.
//! - [`bands`]: the table of every band the book pins.
//! - [`measured`]: this run's measured values, written beside a banded table for the site.
//! - [`moved`]: a snapshot on two upstream releases, and the diff a reviewer sees.
//! - [`plot`]: the chapters' figures as SVG, each held to what its run draws.
//! - [`costs`]: the appendix "What it costs", generated from criterion's saved estimates.
//! - [`drills`]: the checker for chapter 09's references to sections and tests.
//! - [`links`]: the built site's links, each checked to resolve.
//! - [`site`]: the website, built with mdBook as a library.
//!
//! Adding a chapter touches two places: the chapter's line in `chapters/SUMMARY.md` and its
//! entry in [`mod@chapters`]. `tests/book_layout.rs` fails if the two disagree with the files in
//! `chapters/`.

pub mod band;
pub mod bands;
pub mod chapters;
pub mod costs;
pub mod drills;
pub mod links;
pub mod measured;
pub mod moved;
pub mod plot;
pub mod site;
pub mod snap;

pub use chapters::{Chapter, Experiment, chapters, experiments};
