//! `cargo fuzz run delta_fifo`: operation sequences on DeltaFIFO against its reference model;
//! see `tests/cores_support/delta_fifo.rs` for how bytes become a mode and operations and what
//! is compared.
#![no_main]

#[path = "../../tests/cores_support/mod.rs"]
mod cores;

use controlloop::cache::DeltaFifo;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (config, ops) = cores::delta_fifo::decode(data);
    if let Err(e) = cores::delta_fifo::check(config, &ops, DeltaFifo::new) {
        panic!("{e}\n{config:?}, ops: {ops:?}");
    }
});
