//! Named snapshots in the top-level `snapshots/` folder: how a chapter records what it printed.
//!
//! Every result a chapter shows is one of these files, and the chapter shows it with
//! `{{#include ../snapshots/NAME.snap:4:}}` (line 4 onwards skips the three-line header). The
//! helpers live here, not in the chapters, for one reason: insta writes the calling file's
//! path into each snapshot's `source:` line, and a merged doctest's file is a random temporary
//! path. Called from here, every header reads `source: src/snap.rs`, run after run.
//!
//! Names are global across the book. Prefix them with the chapter number (`ch03_…`).
//!
//! Under `CI=true` (or `INSTA_UPDATE=no`) a mismatch or a missing snapshot fails and nothing is
//! written. On a developer's machine a mismatch writes `NAME.snap.new` for `cargo insta review`.

use std::path::PathBuf;

/// The absolute path of the snapshot folder. Absolute, because a merged doctest's `file!()`
/// is a temporary file and a relative path would land outside the repository.
pub const SNAPSHOT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots");

/// The file that holds the snapshot `name`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(SNAPSHOT_DIR).join(format!("{name}.snap"))
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(SNAPSHOT_DIR);
    s.set_prepend_module_to_snapshot(false);
    // Keeps the header at exactly three lines (`---`, `source:`, `---`), so `:4:` is stable.
    s.set_omit_expression(true);
    s
}

/// Asserts that `value`'s `Display` output equals the stored snapshot `name`.
pub fn text(name: &str, value: impl std::fmt::Display) {
    let value = value.to_string();
    settings().bind(|| insta::assert_snapshot!(name, value));
}

/// Asserts that `value`, serialised as YAML, equals the stored snapshot `name`.
///
/// `redactions` replace selected fields before comparison; [`crate::kit::band::redaction`] is the
/// one that checks a number against its band and stores the band.
pub fn yaml<T: serde::Serialize>(
    name: &str,
    value: &T,
    redactions: Vec<(&'static str, insta::internals::Redaction)>,
) {
    let mut s = settings();
    for (selector, r) in redactions {
        s.add_redaction(selector, r);
    }
    s.bind(|| insta::assert_yaml_snapshot!(name, value));
}

/// Reads the stored body of snapshot `name` (without its header), if it exists.
pub fn stored(name: &str) -> Option<String> {
    let raw = std::fs::read_to_string(path(name)).ok()?;
    Some(raw.splitn(4, '\n').nth(3).unwrap_or_default().to_owned())
}

/// Whether a stored snapshot has the three-line header (`---`, `source: …`, `---`) that pages
/// skip with `{{#include ../snapshots/NAME.snap:4:}}` and [`stored`] strips. insta adds an
/// `assertion_line:` when a snapshot is written from an assertion, which shifts the body down.
pub fn has_three_line_header(raw: &str) -> bool {
    let mut lines = raw.lines();
    lines.next() == Some("---")
        && lines.next().is_some_and(|l| l.starts_with("source: "))
        && lines.next() == Some("---")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_snapshot_has_the_header_pages_skip() {
        let mut bad = Vec::new();
        for entry in std::fs::read_dir(SNAPSHOT_DIR).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "snap")
                && !has_three_line_header(&std::fs::read_to_string(&p).unwrap())
            {
                bad.push(p.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        assert!(
            bad.is_empty(),
            "snapshots whose header is not three lines (delete the `assertion_line:` line): {bad:?}"
        );
    }

    #[test]
    fn an_assertion_line_in_the_header_is_caught() {
        assert!(has_three_line_header(
            "---\nsource: book/src/kit/snap.rs\n---\nbody\n"
        ));
        assert!(!has_three_line_header(
            "---\nsource: book/src/kit/snap.rs\nassertion_line: 37\n---\nbody\n"
        ));
    }
}
