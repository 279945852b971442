//! Guards that a chapter block and the experiment `cargo run --release` runs for it are one
//! text, not two copies that can drift apart.
//!
//! A chapter marks a block with an HTML comment on the line before its fence (mdBook does not
//! render it):
//!
//! ```text
//! <!-- experiment: lab::fifo::ch03_interleave -->
//! ```rust
//! # use controlloop::lab::fifo::Pops;          (hidden lines count too)
//! fn interleave_through(minor: u32) -> Pops {  (a function the block defines...)
//!     …
//! }
//! let delta = interleave_through(32);          (...and the experiment's own lines)
//! ```
//! ```
//!
//! and the guard holds that
//! - every function the block defines at its top level is defined, with the same text, at the
//!   top level of the module's source file (`src/lab/fifo.rs`), there with `pub` in front (the
//!   comment lines right above a definition are the page's and the module's own);
//! - the rest of the block (hidden lines included, `# ` removed) is the body of the module's
//!   `pub fn ch03_interleave()`, verbatim;
//! - except `use` declarations at the block's top level: a block brings its names into scope
//!   itself, the module does it once at its top, and an import cannot change what runs;
//! - `src/book/chapters.rs` registers exactly the marked experiments for that chapter, as
//!   `ch03_interleave => lab::fifo::ch03_interleave`.
//!
//! So the page shows the code that `cargo run --release` runs, and `cargo test` runs the page.
//! Inside the crate, `controlloop::…` paths resolve because `lib.rs` declares
//! `extern crate self as controlloop`.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const MARK: &str = "<!-- experiment: ";

/// One marked block: its chapter, the marked path, and its lines with the hidden prefix removed.
struct Marked {
    chapter: String,
    path: String,
    lines: Vec<String>,
}

fn chapter_files() -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(Path::new(ROOT).join("chapters"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v
}

/// A rustdoc line as the compiler sees it: `# x` is `x`, a lone `#` is an empty line.
fn unhide(line: &str) -> String {
    if line == "#" {
        String::new()
    } else if let Some(rest) = line.strip_prefix("# ") {
        rest.to_owned()
    } else {
        line.to_owned()
    }
}

fn marked_blocks(file: &Path) -> Vec<Marked> {
    let text = fs::read_to_string(file).unwrap();
    let chapter = file.file_name().unwrap().to_string_lossy().into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix(MARK) else {
            continue;
        };
        let path = rest.trim_end_matches("-->").trim().to_owned();
        assert!(
            lines.get(i + 1).is_some_and(|l| l.starts_with("```rust")),
            "{chapter}: the marker for {path} must sit on the line right before a ```rust fence"
        );
        let body = lines[i + 2..]
            .iter()
            .take_while(|l| !l.starts_with("```"))
            .map(|l| unhide(l))
            .collect();
        out.push(Marked {
            chapter: chapter.clone(),
            path,
            lines: body,
        });
    }
    out
}

/// `lab::fifo::ch03_interleave` → (`src/lab/fifo.rs` or `src/lab/fifo/mod.rs`, `ch03_interleave`).
fn source_of(path: &str) -> (PathBuf, String) {
    let mut parts: Vec<&str> = path.split("::").collect();
    let name = parts.pop().expect("a path").to_owned();
    let module = parts.join("/");
    let file = Path::new(ROOT).join("src").join(format!("{module}.rs"));
    if file.is_file() {
        return (file, name);
    }
    (
        Path::new(ROOT).join("src").join(module).join("mod.rs"),
        name,
    )
}

/// Whether `line` opens a function definition named `name` at column 0 (with or without `pub`).
fn opens_fn(line: &str, name: &str) -> bool {
    let line = line.strip_prefix("pub ").unwrap_or(line);
    let line = line.strip_prefix("async ").unwrap_or(line);
    line.strip_prefix("fn ")
        .and_then(|l| l.strip_prefix(name))
        .is_some_and(|l| l.starts_with('(') || l.starts_with('<'))
}

/// The name of the function `line` opens at column 0, if it opens one.
fn fn_name(line: &str) -> Option<String> {
    let l = line.strip_prefix("pub ").unwrap_or(line);
    let l = l.strip_prefix("async ").unwrap_or(l);
    let l = l.strip_prefix("fn ")?;
    let end = l.find(['(', '<'])?;
    Some(l[..end].to_owned())
}

/// The lines of the top-level function `name` in `lines`, from its signature to its closing
/// `}` at column 0, with `pub ` dropped from the signature.
fn definition(lines: &[String], name: &str) -> Option<Vec<String>> {
    let start = lines.iter().position(|l| opens_fn(l, name))?;
    let end = start + lines[start..].iter().position(|l| l == "}")?;
    let mut def: Vec<String> = lines[start..=end].to_vec();
    if let Some(s) = def[0].strip_prefix("pub ") {
        def[0] = s.to_owned();
    }
    Some(def)
}

/// The body of `definition`, dedented by four spaces.
fn body(def: &[String]) -> Vec<String> {
    def[1..def.len() - 1]
        .iter()
        .map(|l| l.strip_prefix("    ").unwrap_or(l).to_owned())
        .collect()
}

/// `lines` without the `use` declarations at column 0 (one line or several, up to the `;`).
fn without_imports(lines: &[String]) -> Vec<String> {
    let mut out = vec![];
    let mut in_use = false;
    for l in lines {
        if !in_use && (l.starts_with("use ") || l.starts_with("pub use ")) {
            in_use = !l.trim_end().ends_with(';');
            continue;
        }
        if in_use {
            in_use = !l.trim_end().ends_with(';');
            continue;
        }
        out.push(l.clone());
    }
    out
}

fn trim(mut v: Vec<String>) -> Vec<String> {
    while v.first().is_some_and(|l| l.is_empty()) {
        v.remove(0);
    }
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

fn first_difference(what: &str, page: &[String], source: &[String]) -> Option<String> {
    if page == source {
        return None;
    }
    let i = page
        .iter()
        .zip(source)
        .position(|(a, b)| a != b)
        .unwrap_or(page.len().min(source.len()));
    Some(format!(
        "{what}: line {} differs\n  page:   {:?}\n  source: {:?}",
        i + 1,
        page.get(i),
        source.get(i)
    ))
}

/// Checks one marked block against its source; returns what differs.
fn check(m: &Marked) -> Vec<String> {
    let (file, name) = source_of(&m.path);
    let Ok(text) = fs::read_to_string(&file) else {
        return vec![format!(
            "{}: {} names {}, which does not exist",
            m.chapter,
            m.path,
            file.display()
        )];
    };
    let source: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut problems = vec![];
    let mut rest = m.lines.clone();
    // Each function the block defines at its top level, taken out of the block and compared.
    while let Some(helper) = rest.iter().find_map(|l| fn_name(l)) {
        let Some(def) = definition(&rest, &helper) else {
            problems.push(format!("{}: fn {helper} has no closing brace", m.chapter));
            break;
        };
        let mut start = rest.iter().position(|l| opens_fn(l, &helper)).unwrap();
        let end = start + def.len();
        // The comment above a definition on the page is the page's own prose.
        while start > 0 && rest[start - 1].starts_with("//") {
            start -= 1;
        }
        rest.drain(start..end);
        match definition(&source, &helper) {
            None => problems.push(format!(
                "{}: the block defines fn {helper}, which {} does not define at its top level",
                m.chapter,
                file.display()
            )),
            Some(src) => problems.extend(first_difference(
                &format!("{}: fn {helper} (page vs {})", m.chapter, file.display()),
                &def,
                &src,
            )),
        }
    }
    match definition(&source, &name) {
        None => problems.push(format!(
            "{}: {} does not define pub fn {name}",
            m.chapter,
            file.display()
        )),
        Some(src) => problems.extend(first_difference(
            &format!("{}: {} (page vs body)", m.chapter, m.path),
            &trim(without_imports(&rest)),
            &trim(without_imports(&body(&src))),
        )),
    }
    problems
}

#[test]
fn every_marked_block_is_its_experiment_verbatim() {
    let mut problems = vec![];
    let mut seen = 0;
    for file in chapter_files() {
        for m in marked_blocks(&file) {
            seen += 1;
            problems.extend(check(&m));
        }
    }
    assert!(seen > 0, "no chapter marks an experiment block");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `NAME => PATH` pairs of `src/book/chapters.rs`, as (NAME, PATH without `lab::` resolution).
fn registered() -> Vec<(String, String)> {
    let text = fs::read_to_string(Path::new(ROOT).join("src/book/chapters.rs")).unwrap();
    text.lines()
        .filter_map(|l| {
            let (name, path) = l.trim().split_once(" => ")?;
            let path = path.trim_end_matches(',').trim();
            path.starts_with("lab::")
                .then(|| (name.trim().to_owned(), path.to_owned()))
        })
        .collect()
}

#[test]
fn a_chapter_that_marks_blocks_registers_exactly_those_experiments() {
    let by_chapter = controlloop::book::chapters();
    let registry = registered();
    for file in chapter_files() {
        let marked = marked_blocks(&file);
        if marked.is_empty() {
            continue;
        }
        let chapter = &marked[0].chapter;
        let entry = by_chapter
            .iter()
            .find(|c| c.file == chapter)
            .unwrap_or_else(|| panic!("{chapter} is not registered"));
        let names: BTreeSet<&str> = entry.experiments.iter().map(|e| e.name).collect();
        let marked_names: BTreeSet<&str> = marked
            .iter()
            .map(|m| m.path.rsplit("::").next().unwrap())
            .collect();
        assert_eq!(
            names, marked_names,
            "{chapter}: the experiments src/book/chapters.rs registers and the blocks the chapter \
             marks differ"
        );
        for m in &marked {
            let name = m.path.rsplit("::").next().unwrap();
            assert!(
                registry.iter().any(|(n, p)| n == name && *p == m.path),
                "{chapter}: src/book/chapters.rs must register `{name} => {}`",
                m.path
            );
        }
    }
}

/// The guard itself fails on a block that drifted from its source, naming the line.
#[test]
fn a_block_that_differs_from_its_source_is_caught() {
    let file = chapter_files()
        .into_iter()
        .find(|f| !marked_blocks(f).is_empty())
        .expect("a chapter with marked blocks");
    let mut m = marked_blocks(&file).remove(0);
    assert!(check(&m).is_empty(), "{:?}", check(&m));
    let last = m.lines.iter().rposition(|l| !l.is_empty()).unwrap();
    m.lines[last].push_str(" // edited on the page only");
    let problems = check(&m);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("differs"), "{}", problems[0]);
    m.path = format!("{}_renamed", m.path);
    assert!(
        check(&m)
            .iter()
            .any(|p| p.contains("does not define pub fn")),
        "{:?}",
        check(&m)
    );
}
