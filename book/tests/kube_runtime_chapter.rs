//! Chapter 11's blocks show the experiments' bodies; `cargo run` runs the crate functions those
//! blocks mirror. Both record the same snapshots, so this run fails if a function and its block
//! ever disagree about what was measured.

/// Every virtual-time experiment of chapter 11's three parts, as `cargo run` runs it, checked
/// against the snapshots the chapters' blocks recorded.
#[test]
fn the_registered_virtual_experiments_record_the_chapters_snapshots() {
    for (name, chapter) in [
        ("ch11_storm", "11-what-carries-over-to-kube-rs.md"),
        ("ch11_semantics", "11-what-differs-on-kube-rs.md"),
        ("ch11_findings", "11-what-running-kube-rs-found.md"),
    ] {
        let experiment = controlloop_book::press::experiments()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("chapter 11 registers {name}"));
        assert_eq!(experiment.chapter, chapter);
        (experiment.run)();
    }
}
