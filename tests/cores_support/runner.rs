//! The proptest side of the core checks: a runner whose seed is printed, a run that must find
//! no divergence, a run that must find one (a deliberately broken variant), and the committed
//! `cargo fuzz` seeds. Used by the tests only: the fuzz targets have no proptest.
#![allow(dead_code)]

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// A runner whose seed is printed, so a failure can be replayed with `FUZZ_SEED=<seed>`;
/// `FUZZ_CASES=<n>` sets the number of cases (default `cases`).
pub fn runner(name: &str, cases: u32) -> TestRunner {
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64
        });
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    eprintln!("{name}: seed {seed}, {cases} cases (replay with FUZZ_SEED={seed})");
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key))
}

/// Runs `check` on `cases` inputs from `strategy`; panics with the minimal failing input.
pub fn holds<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), String>,
) {
    let result = runner(name, cases).run(&strategy, |v| check(v).map_err(TestCaseError::fail));
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

/// Runs `check` until it fails, as it must on a broken variant; returns the failure message
/// and the minimal input proptest shrank it to. Panics if no input fails.
pub fn finds<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), String>,
) -> (String, S::Value) {
    match runner(name, cases).run(&strategy, |v| check(v).map_err(TestCaseError::fail)) {
        Err(TestError::Fail(reason, minimal)) => {
            eprintln!("{name}: caught, minimal input {minimal:?}: {reason}");
            (reason.message().to_owned(), minimal)
        }
        Err(e) => panic!("{name}: {e}"),
        Ok(()) => panic!("{name}: the broken variant passed every case"),
    }
}

/// The committed seeds of the `cargo fuzz` target `target` (`fuzz/corpus/<target>`), by file
/// name. Panics if there are none, so a moved corpus cannot pass unnoticed.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a readable corpus entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("a readable seed"))
        })
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}
