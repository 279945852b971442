//! `cargo fuzz run queue_core`: operation sequences on the workqueue core against its reference
//! model; see `tests/cores_support/queue.rs` for how bytes become operations and what is
//! compared.
#![no_main]

#[path = "../../tests/cores_support/mod.rs"]
mod cores;

use controlloop::workqueue::QueueCore;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let ops = cores::queue::decode(data);
    if let Err(e) = cores::queue::check(&ops, QueueCore::new()) {
        panic!("{e}\nops: {ops:?}");
    }
});
