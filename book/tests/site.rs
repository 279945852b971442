//! The website build: mdBook as a library, failing on anything mdBook only logs.

use std::fs;

use controlloop_book::press::site;

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("controlloop-site-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn the_book_builds_with_every_chapter_listed_and_every_include_resolved() {
    let out = scratch("book");
    let html = site::build(&site::book_root(), Some(&out)).expect("the book builds cleanly");
    // mdBook 0.5 renders the table of contents once, into toc.html, and every page loads it.
    let toc = fs::read_to_string(html.join("toc.html")).unwrap();
    assert!(html.join("index.html").is_file(), "no index.html");
    let summary = fs::read_to_string(site::book_root().join("../chapters/SUMMARY.md")).unwrap();
    for link in summary.split("](").skip(1) {
        let page = link.split(')').next().unwrap().replace(".md", ".html");
        assert!(
            toc.contains(&page),
            "the table of contents does not link {page}"
        );
        let body = fs::read_to_string(html.join(&page)).unwrap();
        assert!(
            !body.contains("{{#include"),
            "{page} still holds a raw include"
        );
    }
    let _ = fs::remove_dir_all(out);
}

/// mdBook logs a missing include and still returns Ok. The build must fail instead, quoting it.
#[test]
fn a_missing_include_fails_the_build() {
    let root = scratch("broken");
    fs::create_dir_all(root.join("src")).unwrap();
    fs::write(root.join("book.toml"), "[book]\ntitle = \"broken\"\n").unwrap();
    fs::write(root.join("src/SUMMARY.md"), "# Summary\n\n[One](one.md)\n").unwrap();
    fs::write(
        root.join("src/one.md"),
        "# One\n\n{{#include ../nowhere.snap}}\n",
    )
    .unwrap();
    let err = site::build(&root, Some(&root.join("out"))).expect_err("a missing include must fail");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("nowhere.snap"),
        "the error should quote the include: {msg}"
    );
    let _ = fs::remove_dir_all(root);
}
