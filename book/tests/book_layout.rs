//! Guards for the book's wiring: what `cargo test` runs, what mdBook shows, and what the
//! snapshots folder holds must be the same set of things.
//!
//! `book/src/press/chapters.rs` registers each chapter (a doctest module and its experiments). These
//! tests check that every `chapters/*.md` is registered there (a chapter nobody lists is never tested) and listed in
//! SUMMARY.md (and each SUMMARY entry exists), that every snapshot include resolves, that every
//! snapshot is shown by some chapter, that no chapter contains a code fence rustdoc would
//! silently compile as Rust, and that every chapter block marked `# // book: NAME` is, line for
//! line, the crate code between `// book: NAME` and `// book: end NAME` that
//! `cargo run` runs. Every chapter that shows a snapshot must register an experiment
//! that records it.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

/// The repository (the book's crate is its `book/` folder).
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

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
    let registered: BTreeSet<String> = controlloop_book::press::chapters()
        .iter()
        .map(|c| c.file.to_owned())
        .collect();
    let files: BTreeSet<String> = chapters().iter().map(|p| name(p)).collect();
    let unwired: Vec<_> = files.difference(&registered).collect();
    let missing: Vec<_> = registered.difference(&files).collect();
    assert!(
        unwired.is_empty(),
        "chapters never run by `cargo test` (add them to book/src/press/chapters.rs): {unwired:?}"
    );
    assert!(
        missing.is_empty(),
        "book/src/press/chapters.rs registers chapters that do not exist: {missing:?}"
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
    let registered: Vec<String> = controlloop_book::press::chapters()
        .iter()
        .map(|c| c.file.to_owned())
        .collect();
    assert_eq!(
        registered, in_summary,
        "book/src/press/chapters.rs and SUMMARY.md disagree on order"
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
        if path.starts_with("measured/") {
            // This run's measured values: written by `cargo run`, or as a placeholder
            // by the site build (`book::measured`); never committed.
            continue;
        }
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
    for e in controlloop_book::press::experiments() {
        assert!(
            files.contains(e.chapter),
            "experiment {} names {}",
            e.name,
            e.chapter
        );
    }
    for b in controlloop_book::lab::bands::all() {
        assert!(
            files.contains(b.chapter),
            "band {} names {}",
            b.name,
            b.chapter
        );
    }
}

/// A chapter block and the crate's copy of it, found by their `book:` markers.
///
/// A chapter shows an experiment's code, and `cargo run` runs the crate's copy of
/// the same code (registered in `book/src/press/chapters.rs`). The two are one text: a chapter block
/// marks the lines it shares with a hidden `# // book: NAME` (up to `# // book: end NAME` or the
/// end of the block), and the crate marks them with `// book: NAME` … `// book: end NAME`.
#[derive(Debug)]
struct Mirrored {
    name: String,
    place: String,
    lines: Vec<String>,
}

/// The marked regions of every chapter block, hidden-line prefixes removed (`# x` → `x`,
/// a lone `#` → an empty line), as rustdoc compiles them.
fn chapter_mirrors() -> Vec<Mirrored> {
    let mut out = Vec::new();
    for ch in chapters() {
        let text = fs::read_to_string(&ch).unwrap();
        let mut in_rust = false;
        let mut current: Option<Mirrored> = None;
        for (i, line) in text.lines().enumerate() {
            if let Some(tag) = line.trim_start().strip_prefix("```") {
                if in_rust {
                    out.extend(current.take());
                }
                in_rust = !in_rust && tag.starts_with("rust");
                continue;
            }
            if !in_rust {
                continue;
            }
            if let Some(marked) = line.strip_prefix("# // book: ") {
                if let Some(end) = marked.strip_prefix("end ") {
                    let m = current.take().expect("an end marker without a start");
                    assert_eq!(
                        m.name,
                        end,
                        "{}:{}: end marker for another block",
                        name(&ch),
                        i + 1
                    );
                    out.push(m);
                } else {
                    current = Some(Mirrored {
                        name: marked.to_owned(),
                        place: format!("{}:{}", name(&ch), i + 1),
                        lines: Vec::new(),
                    });
                }
            } else if let Some(m) = &mut current {
                let shown = match line {
                    "#" => "",
                    _ => line.strip_prefix("# ").unwrap_or(line),
                };
                m.lines.push(shown.to_owned());
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The marked regions of the crate's sources, dedented by their marker's indentation.
fn crate_mirrors() -> Vec<Mirrored> {
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join("book/src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(name) = line.trim_start().strip_prefix("// book: ") else {
                continue;
            };
            if name.starts_with("end ") {
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let place = format!("{}:{}", f.strip_prefix(ROOT).unwrap().display(), i + 1);
            let end = format!("// book: end {name}");
            let len = lines[i + 1..]
                .iter()
                .position(|l| l.trim() == end)
                .unwrap_or_else(|| panic!("{place}: no `{end}`"));
            let body = lines[i + 1..i + 1 + len]
                .iter()
                .map(|l| l.get(indent..).unwrap_or("").to_owned())
                .collect();
            out.push(Mirrored {
                name: name.to_owned(),
                place,
                lines: body,
            });
        }
    }
    out
}

/// What differs between the chapters' mirrored blocks and the crate's regions, one message
/// per problem (empty when every block is its region, verbatim).
fn mirror_mismatches(chapter_side: &[Mirrored], crate_side: &[Mirrored]) -> Vec<String> {
    let mut problems = Vec::new();
    for m in chapter_side {
        let copies: Vec<_> = crate_side.iter().filter(|c| c.name == m.name).collect();
        if copies.len() != 1 {
            problems.push(format!(
                "{} shows `{}`, which the crate marks {} times (want 1)",
                m.place,
                m.name,
                copies.len()
            ));
            continue;
        }
        let (chapter, krate) = (m.lines.join("\n"), copies[0].lines.join("\n"));
        if chapter != krate {
            let diff = similar::TextDiff::from_lines(&krate, &chapter)
                .unified_diff()
                .context_radius(2)
                .header(&copies[0].place, &m.place)
                .to_string();
            problems.push(format!(
                "`{}` differs between the crate and the chapter (run `cargo fmt`, then copy the \
                 crate's lines into the chapter, keeping hidden lines hidden):\n{diff}",
                m.name
            ));
        }
    }
    for c in crate_side {
        let shown = chapter_side.iter().filter(|m| m.name == c.name).count();
        if shown != 1 {
            problems.push(format!(
                "{}: `{}` is shown by {shown} chapter blocks (want 1)",
                c.place, c.name
            ));
        }
    }
    problems
}

#[test]
fn every_mirrored_block_is_the_crates_code_verbatim() {
    let problems = mirror_mismatches(&chapter_mirrors(), &crate_mirrors());
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The one problem `mirror_mismatches` reports for a broken pair of sides; panics unless
/// there is exactly one and it contains `expected`.
fn the_one_problem(chapter_side: &[Mirrored], crate_side: &[Mirrored], expected: &str) {
    let problems = mirror_mismatches(chapter_side, crate_side);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains(expected), "{}", problems[0]);
}

/// `side` without the region `name`.
fn without(side: Vec<Mirrored>, name: &str) -> Vec<Mirrored> {
    side.into_iter().filter(|m| m.name != name).collect()
}

#[test]
fn the_mirror_check_fires_on_a_changed_line_a_missing_region_and_an_unshown_one() {
    let name = "ch06_storm";
    assert!(crate_mirrors().iter().any(|c| c.name == name));
    // A chapter whose copy of one line drifted from the crate's.
    let mut drifted = chapter_mirrors();
    let m = drifted.iter_mut().find(|m| m.name == name).unwrap();
    let line = m
        .lines
        .iter()
        .position(|l| l.contains("for value in 1..=writes"))
        .unwrap();
    m.lines[line] = m.lines[line].replace("1..=writes", "2..=writes");
    the_one_problem(&drifted, &crate_mirrors(), "`ch06_storm` differs");
    the_one_problem(&drifted, &crate_mirrors(), "+for value in 2..=writes {");
    // A crate that lost the region a chapter shows, and a region no chapter shows.
    let lost = without(crate_mirrors(), name);
    the_one_problem(&chapter_mirrors(), &lost, "which the crate marks 0 times");
    let unshown = without(chapter_mirrors(), name);
    the_one_problem(&unshown, &crate_mirrors(), "is shown by 0 chapter blocks");
}

#[test]
fn every_chapter_that_shows_a_snapshot_has_a_registered_experiment() {
    let with_snapshots: BTreeSet<String> = includes()
        .into_iter()
        .filter(|(_, p)| p.starts_with("../snapshots/"))
        .map(|(chapter, _)| chapter)
        .collect();
    let unregistered: Vec<&str> = controlloop_book::press::chapters()
        .iter()
        .filter(|c| with_snapshots.contains(c.file) && c.experiments.is_empty())
        .map(|c| c.file)
        .collect();
    assert!(
        unregistered.is_empty(),
        "chapters that show snapshots but register no experiment for `cargo run` \
         (book/src/press/chapters.rs): {unregistered:?}"
    );
}

/// Every recording a chapter cites (`upstream/recorded/NAME.txt`) exists, and
/// `tests/recorded_upstream` compares the port with it: a chapter cannot claim a recording that
/// nothing checks.
#[test]
fn every_cited_recording_exists_and_is_compared_with_the_port() {
    let tests_dir = Path::new(ROOT).join("tests/recorded_upstream");
    let compared: String = fs::read_dir(&tests_dir)
        .unwrap()
        .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let mut cited = 0;
    for ch in chapters() {
        let text = fs::read_to_string(&ch).unwrap();
        for piece in text.split("upstream/recorded/").skip(1) {
            let word: String = piece
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c))
                .collect();
            let Some(name) = word.strip_suffix(".txt") else {
                continue; // the folder itself, not a recording
            };
            let file = Path::new(ROOT).join(format!("upstream/recorded/{name}.txt"));
            assert!(
                file.is_file(),
                "{} cites {name}.txt, which does not exist",
                name_of(&ch)
            );
            assert!(
                compared.contains(&format!("\"{name}\"")),
                "{} cites {name}.txt, but tests/recorded_upstream never compares it",
                name_of(&ch)
            );
            cited += 1;
        }
    }
    assert!(cited > 0, "no chapter cites a recording");
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}
