//! The book's layers, kept: no cycle between the book crate's files or between its modules.
//! The checker is the library's `tests/layering/mod.rs`, shared; this test reads only the book's
//! crate (`book/src`), whose imports of `controlloop` leave the crate and are not followed.

#[path = "../../tests/layering/mod.rs"]
mod layering;

/// The cycles the book may keep: none, and the list stays empty. A loop between files or
/// modules means that a name both sides need lives on the wrong side; it is undone by moving that
/// name below both (into a leaf file such as `params.rs` or `error.rs` that both import, or into
/// the lower of two sibling modules), with the parent's `mod.rs` only declaring and
/// re-exporting. An entry, named by its members (sorted: files as `lab/x/mod.rs`, modules as
/// `lab::x`), would need a comment saying why its loop cannot be undone; the checker fails when
/// an entry's loop is gone, so that the entry is deleted with it.
const ALLOWED: &[&[&str]] = &[];

#[test]
fn the_book_has_no_loop_but_the_allowed_ones() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = layering::read_dir(&src);
    if let Err(failures) = layering::check(&sources, "lib.rs", &[], ALLOWED) {
        panic!("the book's layers are broken:\n{failures}");
    }
}
