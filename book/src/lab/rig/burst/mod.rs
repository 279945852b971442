//! The write storm chapters rerun: write one object many times, quickly, and count what a
//! controller behind an informer and a workqueue does about it. Chapter 06 introduces it
//! ([`crate::lab::burst`] holds its sweeps, claims and figures); chapters 11, 13, 14 and 18 run
//! it again (on kube-runtime, on both releases, on a real server, with many workers).
//!
//! One run ([`run`]) gives a [`Report`] under one of two clocks ([`Clock`]), against the
//! faithful controller or one of chapter 06's deliberately broken designs ([`Variant`]).

mod error;
mod params;
mod report;
mod storm;
mod variants;

pub use crate::lab::rig::{
    Backend, Burst, Fixture, Informer, Observation, Recorder, RigError, Target,
};
pub use controlloop::controller::Controller;
pub use error::BurstError;
pub use params::{Clock, Params, Variant};
pub use report::{
    Report, Table, converge_overhead_ms, expected_reconciles, millis, reconcile_ratio, round3,
    write_overhead_ms,
};
pub use storm::{
    Baseline, Start, broken_storm, level_storm, measure, prepare, run, run_async, start_and_settle,
};
pub use variants::{
    Counters, DEBOUNCE, Running, StashFirstPayload, start_channel_of_keys, start_debounced,
    start_first_payload,
};
