//! Wires every chapter in `chapters/` into the crate as a doctest module, so that a chapter
//! cannot exist without being run by `cargo test`.
//!
//! For each `chapters/NN-name.md` (every Markdown file except `SUMMARY.md`) this writes
//! `#[doc = include_str!("<abs path>")] pub mod chNN_name {}` into `$OUT_DIR/chapters.rs`.
//! `src/lib.rs` includes that file inside `#[cfg(doctest)] pub mod book`. The guard test
//! `tests/book_layout.rs` checks the other direction: every chapter is listed in SUMMARY.md.

use std::{env, fs, path::Path};

fn main() {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let chapters = Path::new(&manifest).join("chapters");
    println!("cargo::rerun-if-changed=chapters");

    let mut files: Vec<_> = fs::read_dir(&chapters)
        .expect("chapters/ must exist")
        .map(|e| e.expect("readable chapters/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter(|p| p.file_name().is_some_and(|n| n != "SUMMARY.md"))
        .collect();
    files.sort();

    let mut out = String::new();
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy();
        let module: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        println!("cargo::rerun-if-changed={}", path.display());
        out.push_str(&format!(
            "#[doc = include_str!({:?})]\npub mod ch{} {{}}\n",
            path.display().to_string(),
            module
        ));
    }
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("chapters.rs");
    fs::write(dest, out).expect("write chapters.rs");
}
