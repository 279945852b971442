//! The built site's links: every relative `href` or `src` must resolve to a file of the site, and
//! every `#anchor` into a page of the site to an element of that page.
//!
//! No upstream file. mdBook checks none of this: a link to `../src/controller/controller.rs`
//! renders as a link to nothing, because the site holds the chapters, not the repository. The
//! site build ([`super::site::build`]) runs [`dead_links`] and fails on any.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt, fs,
    path::{Component, Path, PathBuf},
};

use scraper::{Html, Selector};

/// A link that resolves to nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLink {
    /// The page that holds it, relative to the site's root.
    pub page: PathBuf,
    /// The attribute's value as written.
    pub target: String,
    /// What is missing.
    pub why: &'static str,
}

impl fmt::Display for DeadLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.page.display(), self.target, self.why)
    }
}

/// Whether a link leaves the site (a scheme such as `https:` or `mailto:`, or `//host`).
fn is_external(target: &str) -> bool {
    if target.starts_with("//") {
        return true;
    }
    match target.find(':') {
        Some(colon) => {
            let scheme = &target[..colon];
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !target[..colon].contains('/')
        }
        None => false,
    }
}

/// `base/rel` with `.` and `..` folded, or `None` if it climbs out of the site.
fn join(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Every dead relative link in the site whose root is `root`.
pub fn dead_links(root: &Path) -> std::io::Result<Vec<DeadLink>> {
    let links = Selector::parse("a[href], link[href], img[src], script[src], source[src]")
        .expect("a valid selector");
    let with_id = Selector::parse("[id]").expect("a valid selector");

    // Every page's ids, read once.
    let mut pages = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root) {
        let entry = entry.map_err(std::io::Error::other)?;
        if entry.path().extension().is_some_and(|x| x == "html") {
            let rel = entry
                .path()
                .strip_prefix(root)
                .expect("under root")
                .to_owned();
            let doc = Html::parse_document(&fs::read_to_string(entry.path())?);
            pages.insert(rel, doc);
        }
    }
    let ids: BTreeMap<&PathBuf, BTreeSet<&str>> = pages
        .iter()
        .map(|(p, doc)| {
            let set = doc
                .select(&with_id)
                .filter_map(|e| e.value().attr("id"))
                .collect();
            (p, set)
        })
        .collect();

    let mut dead = Vec::new();
    for (page, doc) in &pages {
        let dir = page.parent().unwrap_or(Path::new(""));
        for element in doc.select(&links) {
            let v = element.value();
            let Some(target) = v.attr("href").or_else(|| v.attr("src")) else {
                continue;
            };
            if target.is_empty() || is_external(target) {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target, None),
            };
            let path = path.split('?').next().unwrap_or_default();
            let mut report = |why| {
                dead.push(DeadLink {
                    page: page.clone(),
                    target: target.to_owned(),
                    why,
                })
            };
            let file = if path.is_empty() {
                Some(page.clone())
            } else {
                join(dir, path)
            };
            let Some(file) = file else {
                report("climbs out of the site");
                continue;
            };
            let file = if root.join(&file).is_dir() {
                file.join("index.html")
            } else {
                file
            };
            if !root.join(&file).is_file() {
                report("no such file");
                continue;
            }
            if let (Some(fragment), Some(page_ids)) = (fragment, ids.get(&file))
                && !fragment.is_empty()
                && !page_ids.contains(fragment)
            {
                report("no element with that id");
            }
        }
    }
    Ok(dead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_links_are_told_apart_from_relative_ones() {
        for t in [
            "https://x.io/a",
            "mailto:a@b",
            "//cdn/x.js",
            "data:image/png;base64,AA",
        ] {
            assert!(is_external(t), "{t}");
        }
        for t in [
            "a.html",
            "../src/x.rs",
            "figures/a.svg",
            "a.html#b",
            "x/y:z.html",
        ] {
            assert!(!is_external(t), "{t}");
        }
    }

    #[test]
    fn a_missing_file_a_missing_anchor_and_a_climb_are_each_reported() {
        let root = std::env::temp_dir().join(format!("links-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("figures")).unwrap();
        fs::write(root.join("figures/a.svg"), "<svg/>").unwrap();
        fs::write(
            root.join("b.html"),
            r#"<html><body><h2 id="there">x</h2></body></html>"#,
        )
        .unwrap();
        fs::write(
            root.join("a.html"),
            r##"<html><body>
            <a href="b.html#there">ok</a> <a href="#top" id="top">ok</a>
            <img src="figures/a.svg"> <a href="https://example.com/">ok</a>
            <a href="../src/controller/controller.rs">dead</a>
            <a href="b.html#nowhere">dead</a> <img src="figures/b.svg">
            </body></html>"##,
        )
        .unwrap();
        let dead = dead_links(&root).unwrap();
        let got: Vec<_> = dead.iter().map(|d| (d.target.as_str(), d.why)).collect();
        assert_eq!(
            got,
            [
                ("../src/controller/controller.rs", "climbs out of the site"),
                ("b.html#nowhere", "no element with that id"),
                ("figures/b.svg", "no such file"),
            ]
        );
        fs::remove_dir_all(root).unwrap();
    }
}
