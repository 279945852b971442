//! Chapter 10's experiment: every real-clock check the book's experiments make, in one table,
//! each beside the runs it was derived from, regime by regime.
//!
//! A run-specific number is checked against a [`Band`](crate::kit::band::Band) whose `basis`
//! names a file of runs (`book/bases/NAME.tsv`, [`crate::kit::basis`]), and the band is the
//! rule of its kind ([`basis::RULE`](crate::kit::basis::RULE)) over them; a figure no check
//! survives on every machine is shown beside its reference runs
//! ([`Reference`](crate::kit::band::Reference)). Both live next to the experiments that use
//! them (each chapter module's `bands.rs`, with its `BANDS` and `SHOWN`, listed in
//! [`crate::lab::MODULES`]); this module lists them all, so that the chapter "What varies, and
//! what was not verified" prints the table from the same constants the checks use, and a moved
//! band or a new run shows up there as a snapshot diff.
//! [`measure`] runs the experiments that give the runs.

pub mod measure;

mod ch10;
mod pinned;

pub use ch10::{all, ch10_bands, checks, table};
pub use pinned::{Pinned, pinned, shown};
