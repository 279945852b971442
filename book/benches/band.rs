//! The cost of a band check, so that chapters can check bands inside hot experiment loops.
use controlloop_book::kit::band::Band;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

const B: Band<u64> = Band::law(1, 1_000, "a bench", "bench");

fn band_check(c: &mut Criterion) {
    c.bench_function("band/check_in_band", |b| {
        b.iter(|| B.check("x", black_box(500)))
    });
}

criterion_group!(benches, band_check);
criterion_main!(benches);
