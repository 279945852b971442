//! The book's layers, kept: no cycle between the book crate's files or between its modules.
//! The checker is the library's `tests/layering/mod.rs`, shared; this test reads only the book's
//! crate (`book/src`), whose imports of `controlloop` leave the crate and are not followed.

#[path = "../../tests/layering/mod.rs"]
mod layering;

/// The cycles the book has today, each named by its members (sorted), and each removed by the
/// lab reshape on another branch. The checker fails when one of them is gone, so that each
/// entry is deleted with the loop it names; after the merge this list is empty.
const ALLOWED: &[&[&str]] = &[
    // A file cycle: removed by the lab reshape.
    &["kit/band.rs", "kit/basis.rs"],
    // A file cycle: removed by the lab reshape.
    &["lab/bands/mod.rs", "lab/mod.rs"],
    // A file cycle: removed by the lab reshape.
    &["lab/burst/ch06.rs", "lab/burst/plot.rs"],
    // A file cycle: removed by the lab reshape.
    &[
        "lab/burst/mod.rs",
        "lab/burst/report.rs",
        "lab/burst/variants.rs",
    ],
    // A file cycle: removed by the lab reshape.
    &["lab/faults/mod.rs", "lab/faults/storm.rs"],
    // A file cycle: removed by the lab reshape.
    &["lab/kube_runtime/ch11.rs", "lab/kube_runtime/claims.rs"],
    // A file cycle: removed by the lab reshape.
    &[
        "lab/real_server/conformance/differences.rs",
        "lab/real_server/conformance/mod.rs",
        "lab/real_server/conformance/normalise.rs",
        "lab/real_server/conformance/scenarios.rs",
        "lab/real_server/conformance/setup.rs",
    ],
    // A file cycle: removed by the lab reshape.
    &["lab/status_hatch/generation.rs", "lab/status_hatch/mod.rs"],
    // A module cycle: removed by the lab reshape.
    &["kit::band", "kit::basis"],
    // A module cycle: removed by the lab reshape.
    &["lab::burst::ch06", "lab::burst::plot"],
    // A module cycle: removed by the lab reshape.
    &["lab::kube_runtime::ch11", "lab::kube_runtime::claims"],
];

#[test]
fn the_book_has_no_loop_but_the_allowed_ones() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = layering::read_dir(&src);
    if let Err(failures) = layering::check(&sources, "lib.rs", &[], ALLOWED) {
        panic!("the book's layers are broken:\n{failures}");
    }
}
