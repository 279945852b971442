//! The README's layout and CONTRIBUTING's map match the tree: every top-level module of the
//! library (each `mod` in `src/lib.rs`) is named in the README's `src/` row and in
//! CONTRIBUTING's layer diagram, and every folder of the repository (at the top and in `book/`)
//! is a row of the README's layout table and is named on CONTRIBUTING. A module or folder added
//! without a line in both fails here, naming what is missing and where.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the book's crate sits in the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The modules `lib.rs` declares (`mod x;` or `pub mod x;`, under any attribute).
fn modules(lib_rs: &str) -> BTreeSet<String> {
    lib_rs
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?;
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                .then(|| name.to_owned())
        })
        .collect()
}

/// The folders of `dir` a reader of the repository sees: all but the build output, git's, and
/// what `.gitignore` names at the top.
fn folders(dir: &Path, ignored: &BTreeSet<String>) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry"))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target" && name != ".git" && !ignored.contains(name))
        .collect()
}

/// The README's layout table: its rows' first cells, and the text of its `src/` row.
fn layout_table(readme: &str) -> (BTreeSet<String>, String) {
    let start = readme
        .find("\n## Layout")
        .expect("the README has a `## Layout` section");
    let section = &readme[start + 1..];
    let section = section[3..]
        .find("\n## ")
        .map_or(section, |end| &section[..end + 3]);
    let mut paths = BTreeSet::new();
    let mut src_row = String::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let first = line[2..].split(" |").next().unwrap_or_default();
        let path = first.trim_matches('`').to_owned();
        if path == "src/" {
            src_row = line.to_owned();
        }
        paths.insert(path);
    }
    (paths, src_row)
}

/// The first ```text block of CONTRIBUTING's "Two crates, one way down".
fn diagram(contributing: &str) -> &str {
    let section = contributing
        .find("## Two crates, one way down")
        .expect("CONTRIBUTING has its layers section");
    let body = &contributing[section..];
    let start = body
        .find("```text\n")
        .expect("the section draws the layers")
        + 8;
    let end = body[start..].find("```").expect("the diagram ends");
    &body[start..start + end]
}

fn words(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// What is missing: each module absent from the README's `src/` row or the diagram, and each
/// folder absent from the README's table or from CONTRIBUTING.
fn missing(
    modules: &BTreeSet<String>,
    folders: &BTreeSet<String>,
    readme: &str,
    contributing: &str,
) -> Vec<String> {
    let (rows, src_row) = layout_table(readme);
    let diagram_words = words(diagram(contributing));
    let mut out = Vec::new();
    for m in modules {
        if !src_row.contains(&format!("`{m}`")) {
            out.push(format!(
                "module `{m}`: not named in the README's `src/` row"
            ));
        }
        if !diagram_words.contains(m.as_str()) {
            out.push(format!("module `{m}`: not in CONTRIBUTING's layer diagram"));
        }
    }
    for f in folders {
        let cell = format!("{f}/");
        if !rows.contains(&cell) {
            out.push(format!(
                "folder `{cell}`: no row in the README's layout table"
            ));
        }
        if !contributing.contains(&format!("`{cell}")) {
            out.push(format!("folder `{cell}`: not named on CONTRIBUTING"));
        }
    }
    out
}

struct Tree {
    modules: BTreeSet<String>,
    folders: BTreeSet<String>,
    readme: String,
    contributing: String,
}

fn tree() -> Tree {
    let root = root();
    let ignored: BTreeSet<String> = read(&root.join(".gitignore"))
        .lines()
        .filter_map(|l| l.strip_prefix('/'))
        .filter(|l| !l.contains('/'))
        .map(str::to_owned)
        .collect();
    let mut folders = folders(&root, &ignored);
    // The book's own folders, but `src` (the `book/` row describes its three layers).
    for f in self::folders(&root.join("book"), &BTreeSet::new()) {
        if f != "src" {
            folders.insert(format!("book/{f}"));
        }
    }
    Tree {
        modules: modules(&read(&root.join("src/lib.rs"))),
        folders,
        readme: read(&root.join("README.md")),
        contributing: read(&root.join("CONTRIBUTING.md")),
    }
}

#[test]
fn the_readme_and_contributing_name_every_module_and_folder() {
    let t = tree();
    assert!(
        t.modules.len() >= 10 && t.modules.contains("cache") && t.modules.contains("testing"),
        "src/lib.rs read as declaring {:?}",
        t.modules
    );
    assert!(
        t.folders.contains("upstream") && t.folders.contains("book/bases"),
        "the tree read as {:?}",
        t.folders
    );
    let missing = missing(&t.modules, &t.folders, &t.readme, &t.contributing);
    assert!(
        missing.is_empty(),
        "the docs do not match the tree:\n  {}",
        missing.join("\n  ")
    );
}

/// The check fires: a module, a folder, a README row and a diagram entry taken away each fail
/// it, naming what is missing.
#[test]
fn a_module_or_folder_missing_from_the_docs_fails() {
    let t = tree();
    let mut modules = t.modules.clone();
    modules.insert("informers".to_owned());
    assert_eq!(
        missing(&modules, &t.folders, &t.readme, &t.contributing),
        [
            "module `informers`: not named in the README's `src/` row",
            "module `informers`: not in CONTRIBUTING's layer diagram",
        ]
    );
    let mut folders = t.folders.clone();
    folders.insert("examples".to_owned());
    assert_eq!(
        missing(&t.modules, &folders, &t.readme, &t.contributing),
        [
            "folder `examples/`: no row in the README's layout table",
            "folder `examples/`: not named on CONTRIBUTING",
        ]
    );
    let readme = t.readme.replace("| `fuzz/` |", "| fuzz |");
    assert_eq!(
        missing(&t.modules, &t.folders, &readme, &t.contributing),
        ["folder `fuzz/`: no row in the README's layout table"]
    );
    let contributing = t.contributing.replace("leaderelection ─►", "elector ─►");
    assert_eq!(
        missing(&t.modules, &t.folders, &t.readme, &contributing),
        ["module `leaderelection`: not in CONTRIBUTING's layer diagram"]
    );
}

#[test]
fn lib_rs_modules_are_read_under_attributes() {
    let lib = "#![forbid(unsafe_code)]\npub mod cache;\n#[cfg(feature = \"testing\")]\npub mod klog;\n#[cfg(not(feature = \"testing\"))]\nmod klog;\nmod wait;\npub use cache::Store;\n";
    assert_eq!(
        modules(lib).into_iter().collect::<Vec<_>>(),
        ["cache", "klog", "wait"]
    );
}
