//! Guards for the book's wiring: what `cargo test` runs, what mdBook shows, and what the
//! snapshots folder holds must be the same set of things.
//!
//! `src/book/chapters.rs` registers each chapter (a doctest module and its experiments). These
//! tests check that every `chapters/*.md` is registered there (a chapter nobody lists is never tested) and listed in
//! SUMMARY.md (and each SUMMARY entry exists), that every snapshot include resolves, that every
//! snapshot is shown by some chapter, and that no chapter contains a code fence rustdoc would
//! silently compile as Rust.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn chapters() -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(Path::new(ROOT).join("chapters"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter(|p| p.file_name().unwrap() != "SUMMARY.md")
        .collect();
    v.sort();
    v
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// The `(target.md)` links in SUMMARY.md.
fn summary_links() -> BTreeSet<String> {
    let summary = fs::read_to_string(Path::new(ROOT).join("chapters/SUMMARY.md")).unwrap();
    summary
        .split("](")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap().to_owned())
        .collect()
}

/// Every `{{#include PATH...}}` in a chapter, as (chapter, PATH without its line range).
fn includes() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for ch in chapters() {
        let text = fs::read_to_string(&ch).unwrap();
        for piece in text.split("{{#include ").skip(1) {
            let target = piece.split("}}").next().unwrap().trim();
            let path = target.split(':').next().unwrap().to_owned();
            out.push((name(&ch), path));
        }
    }
    out
}

#[test]
fn every_chapter_is_named_nn_name_md() {
    for ch in chapters() {
        let n = name(&ch);
        let (num, rest) = n.split_at(2);
        assert!(
            num.chars().all(|c| c.is_ascii_digit()) && rest.starts_with('-') && rest.len() > 4,
            "chapter file {n} is not named NN-name.md"
        );
    }
}

#[test]
fn the_registry_runs_exactly_the_chapter_files_as_doctests() {
    // `book::chapters!` makes one doctest module per registered chapter, so a chapter file
    // missing from the registry is never run by `cargo test`.
    let registered: BTreeSet<String> = controlloop::book::chapters()
        .iter()
        .map(|c| c.file.to_owned())
        .collect();
    let files: BTreeSet<String> = chapters().iter().map(|p| name(p)).collect();
    let unwired: Vec<_> = files.difference(&registered).collect();
    let missing: Vec<_> = registered.difference(&files).collect();
    assert!(
        unwired.is_empty(),
        "chapters never run by `cargo test` (add them to src/book/chapters.rs): {unwired:?}"
    );
    assert!(
        missing.is_empty(),
        "src/book/chapters.rs registers chapters that do not exist: {missing:?}"
    );
}

#[test]
fn the_registry_lists_chapters_in_summary_order() {
    let summary = fs::read_to_string(Path::new(ROOT).join("chapters/SUMMARY.md")).unwrap();
    let in_summary: Vec<String> = summary
        .split("](")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap().to_owned())
        .collect();
    let registered: Vec<String> = controlloop::book::chapters()
        .iter()
        .map(|c| c.file.to_owned())
        .collect();
    assert_eq!(
        registered, in_summary,
        "src/book/chapters.rs and SUMMARY.md disagree on order"
    );
}

#[test]
fn summary_lists_exactly_the_chapter_files() {
    let files: BTreeSet<String> = chapters().iter().map(|p| name(p)).collect();
    let links = summary_links();
    let unlisted: Vec<_> = files.difference(&links).collect();
    let missing: Vec<_> = links.difference(&files).collect();
    assert!(
        unlisted.is_empty(),
        "chapters missing from SUMMARY.md: {unlisted:?}"
    );
    assert!(
        missing.is_empty(),
        "SUMMARY.md names files that do not exist: {missing:?}"
    );
}

#[test]
fn every_include_resolves() {
    for (chapter, path) in includes() {
        let resolved = Path::new(ROOT).join("chapters").join(&path);
        assert!(
            resolved.is_file(),
            "{chapter} includes {path}, which does not exist"
        );
    }
}

#[test]
fn every_snapshot_is_shown_by_a_chapter() {
    let shown: BTreeSet<String> = includes()
        .into_iter()
        .filter_map(|(_, p)| p.strip_prefix("../snapshots/").map(str::to_owned))
        .collect();
    for entry in fs::read_dir(Path::new(ROOT).join("snapshots")).unwrap() {
        let n = name(&entry.unwrap().path());
        if n.ends_with(".snap") {
            assert!(
                shown.contains(&n),
                "snapshots/{n} is not included by any chapter"
            );
        }
        assert!(
            !n.ends_with(".snap.new") && !n.ends_with(".pending-snap"),
            "snapshots/{n} is a pending snapshot: review it with `cargo insta review`"
        );
    }
}

/// rustdoc compiles a bare fence, or an indented block, as Rust. Every fence must say what it
/// holds, and an include must never sit in a Rust fence (rustdoc would see it raw).
#[test]
fn every_fence_is_tagged_and_no_include_sits_in_rust() {
    for ch in chapters() {
        let text = fs::read_to_string(&ch).unwrap();
        let mut open: Option<String> = None;
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if let Some(tag) = trimmed.strip_prefix("```") {
                if open.take().is_none() {
                    assert!(
                        !tag.trim().is_empty(),
                        "{}:{}: untagged fence",
                        name(&ch),
                        i + 1
                    );
                    open = Some(tag.trim().to_owned());
                }
            } else if let Some(tag) = &open {
                assert!(
                    !(tag.starts_with("rust") && line.contains("{{#include")),
                    "{}:{}: an include inside a rust fence",
                    name(&ch),
                    i + 1
                );
            }
        }
        assert!(open.is_none(), "{}: a fence is never closed", name(&ch));
    }
}

#[test]
fn every_experiment_and_band_names_a_chapter_that_exists() {
    let files: BTreeSet<String> = chapters().iter().map(|p| name(p)).collect();
    for e in controlloop::book::experiments() {
        assert!(
            files.contains(e.chapter),
            "experiment {} names {}",
            e.name,
            e.chapter
        );
    }
    for b in controlloop::book::bands::all() {
        assert!(
            files.contains(b.chapter),
            "band {} names {}",
            b.name,
            b.chapter
        );
    }
}
