//! `cargo fuzz run yaml`: the API server's YAML body decoding (budgets on depth, aliases and
//! size); see `tests/apiserver_support/fuzz.rs` for what each input becomes and what is checked.
#![no_main]

#[path = "../../tests/apiserver_support/fuzz.rs"]
mod fuzz;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(e) = fuzz::check(fuzz::Target::Yaml, data) {
        panic!("{e}");
    }
});
