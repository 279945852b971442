//! Chapter 06's experiments, the write storm: write one object many times, quickly, and count
//! what a controller behind an informer and a workqueue does about it.
//!
//! ```text
//!  writer ──patch value=1..=N, `gap` apart──► API server ──watch──► informer ──► controller
//!                                                                     │ cache      │ queue of keys
//!                                                                     ▼            ▼
//!                                            reconciler reads value ◄─ cache ─── worker × `workers`
//!                                            then "works" for `cost` (a tokio sleep)
//! ```
//!
//! One run gives a [`Report`]: the writes and the span they took, the events the controller
//! heard and the keys it queued, the reconciles they collapsed into, what each reconcile
//! observed, and how long after the last write the controller had acted on the final value.
//!
//! Two clocks ([`Clock`]):
//! - **virtual**: tokio's paused clock on a current-thread runtime, with the embedded server
//!   in-process. Sleeps take no real time and fire in a fixed order, so every number is exact
//!   and the same on every run and every machine.
//! - **real**: a two-thread runtime and real sleeps, any [`Backend`]. The numbers depend on
//!   the machine and are pinned as bands.
//!
//! Three subjects ([`Variant`]): the faithful [`Controller`], and two deliberately broken
//! designs that the chapter uses to show its detectors firing.
//!
//! The storm itself is [`crate::lab::rig::ESSAY`] (200 writes, 1 ms apart, 20 ms per
//! reconcile) unless a run changes one of its numbers. The storm's plumbing (its parameters,
//! the designs it runs against, its report) is the rig's ([`crate::lab::rig::burst`]), for
//! chapters 11, 13, 14 and 18 run it again; this module re-exports it. Chapter 06 shows the
//! body of [`level_storm`] as its first block, verbatim (`book/tests/book_layout.rs` keeps the
//! two identical); every sweep runs that body through [`run`].
//!
//! ```
//! use controlloop_book::lab::burst::{self, Params};
//!
//! let report = burst::run(&Params::essay().writes(20)).unwrap();
//! assert_eq!(report.final_observed, Some(20)); // it ended on the last value written
//! assert!(report.reconciles < 20); // ...in fewer reconciles than writes
//! ```

pub mod bands;
pub mod ch06;
pub mod plot;
pub mod priority;
pub mod sweeps;

pub use crate::lab::rig::burst::{
    Backend, Baseline, Burst, BurstError, Clock, Controller, Counters, DEBOUNCE, Fixture, Informer,
    Observation, Params, Recorder, Report, RigError, Running, Start, StashFirstPayload, Table,
    Target, Variant, broken_storm, level_storm, measure, millis as report_millis, prepare, run,
    run_async, start_and_settle, start_channel_of_keys, start_debounced, start_first_payload,
};
pub use ch06::{ch06_real, ch06_virtual};
