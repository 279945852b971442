//! # controlloop-book
//!
//! The book "controlloop: how Kubernetes controllers really work", as a crate: every chapter's
//! experiments, the kit that records and checks them, and the press that builds the site. It
//! stands on the [`controlloop`] library (the ports and the embedded API server) and knows it
//! only through its public API.
//!
//! Three floors, each importing only the ones below it:
//! - [`press`]: the chapter registry (each chapter a doctest, each experiment runnable by
//!   `cargo run`), the site, its link check, the appendix "What it costs".
//! - [`lab`]: the rig every experiment stands on, and the experiments.
//! - [`kit`]: snapshots, bands, measured values, plots, moved diffs.
//!
//! The `controlloop` command (`src/main.rs`) sits on top.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod kit;
pub mod lab;
pub mod press;

use std::{path::Path, sync::LazyLock};

/// The repository's root folder (the book's crate lives in its `book/` folder): where
/// `chapters/`, `snapshots/` and `upstream/` are.
pub fn repo() -> &'static Path {
    static ROOT: LazyLock<&'static Path> = LazyLock::new(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the book's crate lives in a folder of the repository")
    });
    &ROOT
}
