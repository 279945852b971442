//! Chapter 09's reference checker: every beat of a spoken drill points at the chapter section
//! and the test that verified it, and this module checks that each of those still exists.
//!
//! No upstream file. Two kinds of reference are recognised in a chapter's Markdown:
//! - a link `[text](NN-name.md#anchor)`: the chapter file must exist and have a heading whose
//!   mdBook anchor is `anchor` (a link without `#anchor` needs only the file);
//! - a code span `` `path/to/file.rs::test_name` ``: the file must exist and define
//!   `fn test_name(`.
//!
//! A renamed section or test then fails `cargo test`, instead of leaving a dead link in the book.

use std::path::Path;

use serde::Serialize;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// One reference found in a chapter, and whether it resolves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The reference as written (`07-edge-triggered-bill.md#same-queue-different-item`, or
    /// `book/tests/lab_edge.rs::some_test`).
    pub target: String,
    /// Whether it resolves.
    pub resolves: bool,
}

/// The anchor mdBook gives a heading: lowercase; letters, digits, `-` and `_` kept; spaces
/// become `-`; everything else dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next()?),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

fn chapter_has(file: &str, wanted: Option<&str>) -> bool {
    let Ok(text) = std::fs::read_to_string(Path::new(ROOT).join("chapters").join(file)) else {
        return false;
    };
    let Some(wanted) = wanted else { return true };
    let mut in_fence = false;
    text.lines().any(|line| {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        !in_fence && line.starts_with('#') && anchor(line.trim_start_matches('#')) == wanted
    })
}

fn test_exists(path: &str, name: &str) -> bool {
    std::fs::read_to_string(Path::new(ROOT).join(path))
        .is_ok_and(|src| src.contains(&format!("fn {name}(")))
}

/// Every chapter link and test reference in `markdown`, each checked.
pub fn references(markdown: &str) -> Vec<Reference> {
    let mut out = Vec::new();
    for piece in markdown.split("](").skip(1) {
        let target = piece.split(')').next().unwrap_or_default();
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target, None),
        };
        if file.ends_with(".md") && !file.contains('/') {
            out.push(Reference {
                target: target.to_owned(),
                resolves: chapter_has(file, anchor),
            });
        }
    }
    for (i, span) in markdown.split('`').enumerate() {
        if i % 2 == 1
            && let Some((path, name)) = span.split_once(".rs::")
            && !path.contains(' ')
        {
            out.push(Reference {
                target: span.to_owned(),
                resolves: test_exists(&format!("{path}.rs"), name),
            });
        }
    }
    out
}

/// The references in the prose of chapter file `name` (in `chapters/`); code blocks are
/// skipped, so a block may mention references that do not exist.
pub fn chapter_references(name: &str) -> Vec<Reference> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("chapters").join(name))
        .unwrap_or_else(|e| panic!("reading chapters/{name}: {e}"));
    let mut in_fence = false;
    let prose: Vec<&str> = text
        .lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                return false;
            }
            !in_fence
        })
        .collect();
    references(&prose.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_mdbook() {
        assert_eq!(
            anchor(" 200 writes, 1 ms apart, behind a 20 ms reconciler"),
            "200-writes-1-ms-apart-behind-a-20-ms-reconciler"
        );
        assert_eq!(
            anchor("Three ways to write \"act once when it is switched on\""),
            "three-ways-to-write-act-once-when-it-is-switched-on"
        );
    }

    #[test]
    fn a_dead_section_or_test_does_not_resolve() {
        let refs = references(
            "[a](07-edge-triggered-bill.md#same-queue-different-item) \
             [b](07-edge-triggered-bill.md#no-such-section) [c](99-nope.md) \
             `book/tests/lab_edge.rs::every_storm_gives_the_same_report_ten_times` \
             `book/tests/lab_edge.rs::no_such_test` `plain code`",
        );
        let ok: Vec<bool> = refs.iter().map(|r| r.resolves).collect();
        assert_eq!(ok, [true, false, false, true, false]);
    }
}
