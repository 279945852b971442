//! Guards for the book's wiring: what `cargo test` runs, what mdBook shows, and what the
//! snapshots folder holds must be the same set of things.
//!
//! A chapter is registered in three places besides its own file, its snapshots and its lab
//! module: `chapters/SUMMARY.md` (the site), `book/src/press/chapters.rs` (a doctest module and
//! its experiments) and `book/src/lab/mod.rs` (its experiment module, and the bands it pins).
//! These tests check that every `chapters/*.md` is registered in all three (a chapter nobody
//! lists is never tested) and that no place lists a chapter or a module the others lack, that
//! every snapshot include resolves, that every snapshot is shown by some chapter, that no
//! chapter contains a code fence rustdoc would silently compile as Rust, and that every chapter
//! block marked `# // book: NAME` is, line for line, the crate code between `// book: NAME` and
//! `// book: end NAME` that `cargo run` runs. Every chapter that shows a snapshot must register
//! an experiment that records it, and no chapter's Rust block shows more than 60 lines.

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

/// Every place a chapter is registered, besides its own file, its snapshots and its lab module.
/// Adding a chapter touches these three files and no other.
#[derive(Clone)]
struct Registration {
    /// The chapter files in `chapters/`, SUMMARY.md aside.
    files: Vec<String>,
    /// `chapters/SUMMARY.md`: the chapters it links, in its order (mdBook builds these).
    summary: Vec<String>,
    /// `book/src/press/chapters.rs`: each registered chapter, in its order, and the experiment
    /// module it names (`in NAME`) if it runs experiments (`cargo test` runs the chapter,
    /// `cargo run` its experiments).
    registry: Vec<(String, Option<String>)>,
    /// `book/src/lab/mod.rs`, `MODULES`: each chapter's experiment module, as (chapter, module).
    modules: Vec<(String, String)>,
    /// `book/src/lab/mod.rs`: the modules it declares (`pub mod NAME;`).
    declared: Vec<String>,
}

impl Registration {
    /// The registration as the tree has it.
    fn read() -> Registration {
        let summary = fs::read_to_string(Path::new(ROOT).join("chapters/SUMMARY.md")).unwrap();
        let lab = fs::read_to_string(Path::new(ROOT).join("book/src/lab/mod.rs")).unwrap();
        Registration {
            files: chapters().iter().map(|p| name(p)).collect(),
            summary: summary
                .split("](")
                .skip(1)
                .map(|rest| rest.split(')').next().unwrap().to_owned())
                .collect(),
            registry: controlloop_book::press::chapters()
                .iter()
                .map(|c| (c.file.to_owned(), c.lab.map(str::to_owned)))
                .collect(),
            modules: controlloop_book::lab::MODULES
                .iter()
                .map(|m| (m.chapter.to_owned(), m.name.to_owned()))
                .collect(),
            declared: lab
                .lines()
                .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
                .map(str::to_owned)
                .collect(),
        }
    }

    /// One message per chapter (or module) registered in one place but not in another, and
    /// per pair of lists that disagree on the chapters' order; empty when all agree.
    fn problems(&self) -> Vec<String> {
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
        let files = set(&self.files);
        let summary = set(&self.summary);
        let registered: Vec<String> = self.registry.iter().map(|(c, _)| c.clone()).collect();
        let registry = set(&registered);
        let served: Vec<String> = self.modules.iter().map(|(c, _)| c.clone()).collect();
        let served_set = set(&served);
        let names = set(&self
            .modules
            .iter()
            .map(|(_, m)| m.clone())
            .collect::<Vec<_>>());
        let declared = set(&self.declared);
        let mut problems = Vec::new();
        let mut missing = |from: &BTreeSet<String>, absent: &BTreeSet<String>, what: &str| {
            for x in from.difference(absent) {
                problems.push(format!("{x}: {what}"));
            }
        };
        missing(
            &files,
            &registry,
            "never run by `cargo test`: add it to book/src/press/chapters.rs",
        );
        missing(
            &registry,
            &files,
            "registered in book/src/press/chapters.rs, but no such chapter",
        );
        missing(&files, &summary, "missing from chapters/SUMMARY.md");
        missing(
            &summary,
            &files,
            "linked from chapters/SUMMARY.md, but no such chapter",
        );
        missing(
            &served_set,
            &registry,
            "served by a module in lab::MODULES, but not registered",
        );
        let with_experiments: BTreeSet<String> = self
            .registry
            .iter()
            .filter(|(_, lab)| lab.is_some())
            .map(|(c, _)| c.clone())
            .collect();
        missing(
            &with_experiments,
            &served_set,
            "registers experiments, but book/src/lab/mod.rs lists no module for it (MODULES)",
        );
        let undeclared: BTreeSet<String> = declared
            .iter()
            .filter(|m| *m != "rig" && *m != "designs")
            .cloned()
            .collect();
        missing(
            &undeclared,
            &names,
            "declared in book/src/lab/mod.rs, but serves no chapter in MODULES",
        );
        missing(
            &names,
            &declared,
            "named in lab::MODULES, but book/src/lab/mod.rs declares no such module",
        );
        for (chapter, lab) in &self.registry {
            let listed = self.modules.iter().find(|(c, _)| c == chapter);
            if let (Some(lab), Some((_, module))) = (lab, listed)
                && lab != module
            {
                problems.push(format!(
                    "{chapter}: its experiments are in `{lab}` (book/src/press/chapters.rs), \
                     but lab::MODULES lists `{module}`"
                ));
            }
        }
        let in_order = |of: &[String], against: &[String]| {
            let common: BTreeSet<&String> = of.iter().filter(|c| against.contains(c)).collect();
            let keep = |v: &[String]| -> Vec<String> {
                let mut seen = BTreeSet::new();
                v.iter()
                    .filter(|c| common.contains(c) && seen.insert(*c))
                    .cloned()
                    .collect()
            };
            keep(of) == keep(against)
        };
        if !in_order(&registered, &self.summary) {
            problems.push(
                "book/src/press/chapters.rs and chapters/SUMMARY.md disagree on order".into(),
            );
        }
        if !in_order(&served, &registered) {
            problems.push("lab::MODULES and book/src/press/chapters.rs disagree on order".into());
        }
        problems
    }
}

/// A chapter nobody registers is never tested or built; a module nobody lists is never run.
#[test]
fn every_chapter_is_registered_in_summary_the_registry_and_the_lab() {
    let problems = Registration::read().problems();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The registration check fires for a chapter left out of each place in turn, for a module the
/// lab declares and lists for no chapter, and for two lists in different orders, each with one
/// message that names the place.
#[test]
fn the_registration_check_fires_on_a_chapter_missing_from_each_place() {
    let real = Registration::read();
    let chapter = "12-watches-are-the-optimisation.md";
    let broken = |f: &dyn Fn(&mut Registration)| {
        let mut r = real.clone();
        f(&mut r);
        r.problems()
    };
    let fires = |problems: Vec<String>, expected: &[&str]| {
        assert_eq!(problems.len(), expected.len(), "{problems:#?}");
        for (p, e) in problems.iter().zip(expected) {
            assert!(p.contains(e), "{p:?} lacks {e:?}");
        }
    };
    fires(
        broken(&|r| r.summary.retain(|c| c != chapter)),
        &["12-watches-are-the-optimisation.md: missing from chapters/SUMMARY.md"],
    );
    fires(
        broken(&|r| r.registry.retain(|(c, _)| c != chapter)),
        &[
            "never run by `cargo test`",
            "served by a module in lab::MODULES, but not registered",
        ],
    );
    fires(
        broken(&|r| r.modules.retain(|(c, _)| c != chapter)),
        &[
            "12-watches-are-the-optimisation.md: registers experiments, but book/src/lab/mod.rs",
            "faults: declared in book/src/lab/mod.rs, but serves no chapter",
        ],
    );
    fires(
        broken(&|r| r.files.retain(|c| c != chapter)),
        &[
            "registered in book/src/press/chapters.rs, but no such chapter",
            "linked from chapters/SUMMARY.md, but no such chapter",
        ],
    );
    fires(
        broken(&|r| r.declared.push("orphan".into())),
        &["orphan: declared in book/src/lab/mod.rs, but serves no chapter in MODULES"],
    );
    fires(
        broken(&|r| r.summary.reverse()),
        &["book/src/press/chapters.rs and chapters/SUMMARY.md disagree on order"],
    );
    fires(
        broken(&|r| r.modules.reverse()),
        &["lab::MODULES and book/src/press/chapters.rs disagree on order"],
    );
    fires(
        broken(&|r| {
            let entry = r.registry.iter_mut().find(|(c, _)| c == chapter).unwrap();
            entry.1 = Some("edge".into());
        }),
        &[
            "its experiments are in `edge` (book/src/press/chapters.rs), but lab::MODULES lists `faults`",
        ],
    );
}

#[test]
fn every_include_resolves() {
    for (chapter, path) in includes() {
        if path.starts_with("measured/") {
            // This run's measured values: written by `cargo run`, or as a placeholder
            // by the site build (`kit::measured`); never committed.
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

/// The most lines a chapter's Rust block may show. The experiment is on the page, and a block
/// longer than a screen is not read: what does not carry the claim is hidden with rustdoc's `# `
/// prefix (the site's eye button shows it), or the block is split with prose between.
const MAX_VISIBLE_LINES: usize = 60;

/// Each Rust block of a chapter's `text` as (its fence's line, the lines it shows): every line
/// rustdoc does not hide (a hidden line is `#`, or starts with `# `, after any indentation),
/// blank lines included.
fn visible_lines(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool, usize)> = None; // (fence line, rust?, visible lines)
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(tag) = trimmed.strip_prefix("```") {
            match open.take() {
                Some((at, true, shown)) => out.push((at, shown)),
                Some((_, false, _)) => {}
                None => open = Some((i + 1, tag.trim().starts_with("rust"), 0)),
            }
        } else if let Some((_, true, shown)) = &mut open
            && !(trimmed == "#" || trimmed.starts_with("# "))
        {
            *shown += 1;
        }
    }
    out
}

/// One message per Rust block of `text` (the chapter `name`) that shows more than
/// [`MAX_VISIBLE_LINES`].
fn long_blocks(name: &str, text: &str) -> Vec<String> {
    visible_lines(text)
        .into_iter()
        .filter(|&(_, shown)| shown > MAX_VISIBLE_LINES)
        .map(|(at, shown)| {
            format!(
                "{name}:{at}: a block shows {shown} lines (at most {MAX_VISIBLE_LINES}: hide \
                 the set-up that does not carry the claim, or split the block)"
            )
        })
        .collect()
}

#[test]
fn no_chapter_block_shows_more_than_sixty_lines() {
    let mut long = Vec::new();
    let mut largest = (String::new(), 0);
    for ch in chapters() {
        let text = fs::read_to_string(&ch).unwrap();
        long.extend(long_blocks(&name(&ch), &text));
        for (at, shown) in visible_lines(&text) {
            if shown > largest.1 {
                largest = (format!("{}:{at}", name(&ch)), shown);
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
    // The count is of something: the chapters have blocks, and the largest shows lines.
    assert!(largest.1 > 0, "no chapter block shows a line");
}

#[test]
fn the_block_length_check_fires_on_a_block_of_sixty_one_lines() {
    let block = |shown: usize, hidden: usize| {
        format!(
            "Prose.\n\n```rust\n{}{}```\n\n```text\n{}```\n",
            "# let hidden = 0;\n#\n".repeat(hidden),
            "let shown = 1;\n\n".repeat(shown / 2) + &"let shown = 1;\n".repeat(shown % 2),
            "not rust\n".repeat(100)
        )
    };
    assert_eq!(visible_lines(&block(61, 0)), [(3, 61)]);
    let long = long_blocks("NN-x.md", &block(61, 0));
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(
        long[0].starts_with("NN-x.md:3: a block shows 61 lines"),
        "{}",
        long[0]
    );
    // Sixty shown lines pass, however many are hidden; a text block is not counted.
    assert!(long_blocks("NN-x.md", &block(60, 500)).is_empty());
}

/// The code spans of chapter 07's side-by-side table (the rows under its header line, up to the
/// first blank line), `\|` read as `|`.
fn side_by_side_spans(chapter: &str) -> Vec<String> {
    let rows = chapter
        .lines()
        .skip_while(|l| !l.starts_with("| | level-triggered"))
        .take_while(|l| !l.trim().is_empty());
    let mut spans = Vec::new();
    for row in rows {
        let row = row.replace("\\|", "|");
        spans.extend(row.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    spans
}

/// The spans of `spans` that no file of `lab::edge` or `lab::designs::trigger` (the two designs
/// chapter 07 introduces) contains.
fn spans_not_in_the_designs(spans: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join("book/src/lab/edge"), &mut files);
    rust_files(
        &Path::new(ROOT).join("book/src/lab/designs/trigger"),
        &mut files,
    );
    let source: String = files
        .iter()
        .map(|f| fs::read_to_string(f).unwrap())
        .collect();
    spans
        .iter()
        .filter(|s| !source.contains(s.as_str()))
        .cloned()
        .collect()
}

/// Chapter 07 sets the lines where its two designs differ side by side in a table; each line
/// it quotes is the designs' code, as the crate has it.
#[test]
fn chapter_07s_side_by_side_quotes_the_designs() {
    let text = fs::read_to_string(Path::new(ROOT).join("chapters/07-edge-triggered-bill.md"));
    let spans = side_by_side_spans(&text.unwrap());
    assert!(
        spans.len() >= 20,
        "the table quotes both designs: {spans:?}"
    );
    let missing = spans_not_in_the_designs(&spans);
    assert!(missing.is_empty(), "not in the designs: {missing:?}");
    // A quoted line that drifted from the code is caught.
    let mut drifted = spans.clone();
    drifted[0].push_str(" // drifted");
    assert_eq!(spans_not_in_the_designs(&drifted).len(), 1);
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
        // A region may be shown more than once: the rig's controller process and chapter 07's
        // designs are on the page in each chapter that runs them, every copy held to the one
        // source.
        let shown = chapter_side.iter().filter(|m| m.name == c.name).count();
        if shown == 0 {
            problems.push(format!(
                "{}: `{}` is shown by no chapter block (want at least 1)",
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

/// The chapter side with one line of the `copy`-th block showing `name` changed: `from`
/// replaced by `to` on the first line that contains it.
fn drifted(name: &str, copy: usize, from: &str, to: &str) -> Vec<Mirrored> {
    let mut side = chapter_mirrors();
    let m = side
        .iter_mut()
        .filter(|m| m.name == name)
        .nth(copy)
        .unwrap();
    let line = m.lines.iter().position(|l| l.contains(from)).unwrap();
    m.lines[line] = m.lines[line].replace(from, to);
    side
}

#[test]
fn the_mirror_check_fires_on_a_changed_line_a_missing_region_and_an_unshown_one() {
    let name = "ch06_storm";
    assert!(crate_mirrors().iter().any(|c| c.name == name));
    // A chapter whose copy of one line drifted from the crate's.
    let drift = drifted(name, 0, "1..=writes", "2..=writes");
    the_one_problem(&drift, &crate_mirrors(), "`ch06_storm` differs");
    the_one_problem(&drift, &crate_mirrors(), "+for value in 2..=writes {");
    // A crate that lost the region a chapter shows, and a region no chapter shows.
    let lost = without(crate_mirrors(), name);
    the_one_problem(&chapter_mirrors(), &lost, "which the crate marks 0 times");
    let unshown = without(chapter_mirrors(), name);
    the_one_problem(&unshown, &crate_mirrors(), "is shown by no chapter block");
    // A region two chapters show (the rig's process: chapter 07, and chapter 08's block that
    // wires its design into it, hidden there), one copy drifted.
    let shared = "rig_process";
    let copies = chapter_mirrors()
        .iter()
        .filter(|m| m.name == shared)
        .count();
    assert_eq!(
        copies, 2,
        "`{shared}` is shown by chapter 07 and by chapter 08"
    );
    let drift = drifted(shared, 1, "t.abort();", "t.abort(); t.abort();");
    the_one_problem(&drift, &crate_mirrors(), "`rig_process` differs");
    the_one_problem(&drift, &crate_mirrors(), "08-where-the-rule-is-written.md");
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

/// The text of every test that compares the port with a recording: the library's
/// `tests/recorded_upstream/` and the book's `book/tests/recorded_upstream.rs`. A recording is
/// compared when its name stands there as a string literal.
fn comparisons() -> String {
    let tests_dir = Path::new(ROOT).join("tests/recorded_upstream");
    let mut compared: String = fs::read_dir(&tests_dir)
        .unwrap()
        .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    compared +=
        &fs::read_to_string(Path::new(ROOT).join("book/tests/recorded_upstream.rs")).unwrap();
    compared
}

/// Every recording in `upstream/recorded/` is compared with the port by a test, or named with a
/// reason in `upstream/README.md`'s list of recordings not compared exactly (its name in
/// backquotes there): no recording sits unchecked without saying why.
#[test]
fn every_recording_is_compared_or_its_reason_is_given() {
    let compared = comparisons();
    let readme = fs::read_to_string(Path::new(ROOT).join("upstream/README.md")).unwrap();
    let section = readme
        .split("## Recordings not compared exactly")
        .nth(1)
        .expect("upstream/README.md has its list of recordings not compared exactly");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut unchecked = Vec::new();
    for entry in fs::read_dir(Path::new(ROOT).join("upstream/recorded")).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        let Some(name) = file.strip_suffix(".txt") else {
            continue;
        };
        let named = section.contains(&format!("`{name}`"));
        if !compared.contains(&format!("\"{name}\"")) && !named {
            unchecked.push(name.to_owned());
        }
    }
    unchecked.sort();
    assert!(
        unchecked.is_empty(),
        "recordings neither compared by a test nor named in upstream/README.md: {unchecked:?}"
    );
}

/// Every recording a chapter cites (`upstream/recorded/NAME.txt`) exists, and a test compares
/// the port with it (the library's `tests/recorded_upstream`, the book's
/// `book/tests/recorded_upstream.rs`): a chapter cannot claim a recording that nothing checks.
#[test]
fn every_cited_recording_exists_and_is_compared_with_the_port() {
    let compared = comparisons();
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
                "{} cites {name}.txt, but no recorded_upstream test compares it",
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

/// The modules under `book/src/lab/` every chapter's experiments may import: the rig, the
/// designs several chapters run, and chapter 10's list of every band.
const SHARED_LAB_MODULES: &[&str] = &["rig", "designs", "bands"];

/// The chapter modules that genuinely build on another chapter's result, and why: each entry is
/// (importing module, imported module, why). Everything else a chapter shares goes to `rig` or
/// `designs`.
const BUILDS_ON: &[(&str, &str, &str)] = &[
    // Chapter 11 reruns chapter 06's storm and sweeps on kube-runtime: the same parameters, the
    // same report, the same claims checked, so a difference is the runtime's.
    (
        "kube_runtime",
        "burst",
        "reruns chapter 06's storm beside kube-runtime",
    ),
    // Chapter 11's drift rows take this crate's side from chapter 04's own resync runs.
    (
        "kube_runtime",
        "resync",
        "compares with chapter 04's resync runs",
    ),
    // Chapter 14 reruns chapter 06's sweeps (`Sweep::ALL`, the essay's parameters varied) on
    // a real API server, to compare with chapter 06's figures.
    (
        "real_server",
        "burst",
        "reruns chapter 06's sweeps on a real API server",
    ),
    // Chapter 14 also runs chapter 11's kube-runtime storm on the real server, beside ours.
    (
        "real_server",
        "kube_runtime",
        "reruns chapter 11's kube-runtime storm on a real API server",
    ),
    // Chapter 09's drills 6 to 9 each rerun the core run of a later chapter (its page says
    // so): the drill's short answer holds because that chapter's experiment does.
    (
        "drills",
        "second_replica",
        "drill 6 reruns chapter 15's paused leader",
    ),
    (
        "drills",
        "deletion",
        "drill 7 reruns chapter 16's relist gap and finalizer path",
    ),
    (
        "drills",
        "first_write",
        "drill 8 reruns chapter 17's conflict storm",
    ),
    (
        "drills",
        "many_workers",
        "drill 9 reruns chapter 18's sweep and starvation runs",
    ),
    // Chapter 13 reruns earlier chapters' experiments on both releases: that is its claim.
    (
        "moved",
        "workqueue",
        "reruns chapters 01 and 02 on both releases",
    ),
    ("moved", "resync", "reruns chapter 04 on both releases"),
    (
        "moved",
        "fifo",
        "runs chapter 03's FIFOs at client-go 1.37 and 1.38",
    ),
    (
        "moved",
        "second_replica",
        "reruns chapter 15's release after an outage at client-go 1.37 and 1.38",
    ),
    ("moved", "burst", "reruns chapter 06 on both releases"),
    (
        "moved",
        "edge",
        "reruns chapter 07's storms on both releases",
    ),
];

/// The paths a `use` tree names, each whole: `a::{b, c::{d, e}}` is `a::b`, `a::c::d` and
/// `a::c::e` (a renamed one keeps its ` as name`).
fn flatten(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.trim().to_owned()];
    };
    let (prefix, group) = (tree[..open].trim(), &tree[open + 1..]);
    let group = &group[..group.rfind('}').unwrap_or(group.len())];
    let (mut depth, mut start, mut out) = (0usize, 0, Vec::new());
    for (i, c) in group.char_indices().chain([(group.len(), ',')]) {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                let part = group[start..i].trim();
                if !part.is_empty() {
                    out.extend(flatten(part).into_iter().map(|p| format!("{prefix}{p}")));
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// The chapter modules `source` (a file of the lab module `module`) imports, other than itself
/// and the shared ones, in order of appearance, each once: the module after `lab::` in every
/// path the file's `use` items name (grouped or not, through `crate::` or the book's crate
/// name) and in every `crate::lab::NAME` it spells out in code. Comments are skipped, so a doc
/// link is not an import.
fn chapter_imports(module: &str, source: &str) -> Vec<String> {
    let code: String = source
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths: Vec<String> = Vec::new();
    for (i, _) in code.match_indices("use ") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // a word ending in "use", not the keyword
        }
        let tree = &code[i + "use ".len()..];
        paths.extend(flatten(&tree[..tree.find(';').unwrap_or(tree.len())]));
    }
    for root in ["crate::lab::", "controlloop_book::lab::"] {
        paths.extend(code.match_indices(root).map(|(i, _)| code[i..].to_owned()));
    }
    let mut out: Vec<String> = Vec::new();
    for path in paths {
        let Some(rest) = ["crate::lab::", "controlloop_book::lab::"]
            .iter()
            .find_map(|root| path.strip_prefix(root))
        else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let shared = SHARED_LAB_MODULES.contains(&name.as_str()) || name == "self";
        if !shared && name != module && !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Every import of one chapter module by another that [`BUILDS_ON`] does not allow, as
/// `importer imports other (file)`, for the files `(module, path, source)`.
fn cross_imports(files: &[(String, String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (module, path, source) in files {
        for other in chapter_imports(module, source) {
            let allowed = BUILDS_ON
                .iter()
                .any(|(m, o, _)| m == module && *o == other.as_str());
            if !allowed {
                out.push(format!("{module} imports {other} ({path})"));
            }
        }
    }
    out
}

/// Every file of every chapter module: `(module, path under book/src/lab, source)`.
fn chapter_module_files() -> Vec<(String, String, String)> {
    let lab = Path::new(ROOT).join("book/src/lab");
    let mut out = Vec::new();
    for entry in fs::read_dir(&lab).unwrap() {
        let dir = entry.unwrap().path();
        let module = name_of(&dir);
        if !dir.is_dir() || SHARED_LAB_MODULES.contains(&module.as_str()) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for f in files {
            let path = f.strip_prefix(&lab).unwrap().display().to_string();
            out.push((module.clone(), path, fs::read_to_string(&f).unwrap()));
        }
    }
    out.sort();
    out
}

/// A chapter's experiments stand on the rig, the shared designs and the ports; they import
/// another chapter's module only where [`BUILDS_ON`] says why, and every entry there is still
/// used.
#[test]
fn no_chapter_module_imports_another_chapters() {
    let files = chapter_module_files();
    let crossed = cross_imports(&files);
    assert!(
        crossed.is_empty(),
        "move what both chapters need to lab::rig or lab::designs, or say in BUILDS_ON why \
         one builds on the other's result:\n{}",
        crossed.join("\n")
    );
    for (module, other, why) in BUILDS_ON {
        let used = files
            .iter()
            .any(|(m, _, s)| m == module && chapter_imports(m, s).iter().any(|o| o == other));
        assert!(
            used,
            "BUILDS_ON allows {module} → {other} ({why}), which no longer imports it"
        );
    }
}

/// The check fires on a chapter module that imports another chapter's, alone, in a group, in a
/// group of `crate`'s, renamed or spelled out in code, and names both; the rig, the designs,
/// itself and a doc link pass.
#[test]
fn the_cross_import_check_fires_on_a_chapter_importing_another() {
    let file = |module: &str, source: &str| {
        vec![(
            module.to_owned(),
            format!("{module}/mod.rs"),
            source.to_owned(),
        )]
    };
    let crossed = cross_imports(&file(
        "second_replica",
        "use crate::lab::rig::{self, within};\nuse crate::lab::deletion::fresh;\n",
    ));
    assert_eq!(
        crossed,
        ["second_replica imports deletion (second_replica/mod.rs)"]
    );
    let crossed = cross_imports(&file(
        "first_write",
        "use crate::lab::{\n    rig::{self, Running},\n    status_record::{OBJECT, WORK},\n};\n",
    ));
    assert_eq!(
        crossed,
        ["first_write imports status_record (first_write/mod.rs)"]
    );
    let crossed = cross_imports(&file(
        "fifo",
        "use crate::{\n    kit::snap,\n    lab::{\n        deletion::{self, gap::Heard},\n        \
         rig::{self, NAMESPACE},\n        second_replica as replicas,\n    },\n};\n",
    ));
    assert_eq!(
        crossed,
        [
            "fifo imports deletion (fifo/mod.rs)",
            "fifo imports second_replica (fifo/mod.rs)"
        ]
    );
    let crossed = cross_imports(&file(
        "intro",
        "fn f() {\n    let r = crate::lab::burst::run(&p);\n    \
         use controlloop_book::lab::intro::bands::REAL_US;\n}\n",
    ));
    assert_eq!(crossed, ["intro imports burst (intro/mod.rs)"]);
    let clean = file(
        "faults",
        "//! See [`crate::lab::edge`].\nuse crate::lab::{designs::trigger::Design, rig, faults::Fault};\n",
    );
    assert!(
        cross_imports(&clean).is_empty(),
        "{:?}",
        cross_imports(&clean)
    );
}
