//! `cargo fuzz run real_fifo`: operation sequences on RealFIFO against its reference model; see
//! `tests/cores_support/real_fifo.rs` for how bytes become a mode and operations and what is
//! compared.
#![no_main]

#[path = "../../tests/cores_support/mod.rs"]
mod cores;

use controlloop::cache::RealFifo;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (config, ops) = cores::real_fifo::decode(data);
    if let Err(e) = cores::real_fifo::check(config, &ops, RealFifo::new) {
        panic!("{e}\n{config:?}, ops: {ops:?}");
    }
});
