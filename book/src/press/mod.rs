//! The press: the chapter registry, and what turns the chapters and their runs into a site.
//!
//! No upstream file. The press stands above the experiments: the registry names each
//! chapter's [`crate::lab`] functions, and the site is built after they ran.
//!
//! - [`mod@chapters`]: the registry. Each chapter is listed once, with the experiments
//!   `cargo run` runs for it; the same list makes every chapter a doctest.
//! - [`site`]: the website, built with mdBook as a library.
//! - [`claims`]: the table `cargo run` ends with, every claim a row, filled by the run.
//! - [`links`]: the built site's links, each checked to resolve.
//! - [`cluster`]: `controlloop cluster up|down|status|env`, the real control plane in one
//!   command.
//! - [`costs`]: the appendix "What it costs", generated from criterion's saved estimates.

pub mod chapters;
pub mod claims;
pub mod cluster;
pub mod costs;
pub mod links;
pub mod site;

pub use chapters::{Chapter, Experiment, chapters, experiments};
