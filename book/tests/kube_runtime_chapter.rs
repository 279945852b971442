//! Chapter 11's blocks show the experiments' bodies; `cargo run --release` runs the crate
//! functions those blocks mirror. Both record the same snapshots, so this run fails if a
//! function and its block ever disagree about what was measured.

/// Every virtual-time experiment of chapter 11, as `cargo run --release` runs it, checked
/// against the snapshots the chapter's blocks recorded.
#[test]
fn the_registered_virtual_experiment_records_the_chapters_snapshots() {
    let experiment = controlloop_book::press::experiments()
        .find(|e| e.name == "ch11_virtual")
        .expect("chapter 11 registers its virtual-time experiment");
    assert_eq!(experiment.chapter, "11-what-carries-over-to-kube-rs.md");
    (experiment.run)();
}
