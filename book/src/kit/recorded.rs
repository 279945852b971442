//! The recordings of upstream, read when a chapter runs: `upstream/recorded/NAME.txt`, as the
//! recorders in `upstream/` wrote them (a `# ` header, then the body). A chapter that puts a
//! figure of client-go or controller-runtime beside the port's takes it from the file here,
//! never from a typed copy, so the page cannot drift from the recording.
//!
//! No upstream file: this reads the project's own recordings. The comparison of a whole
//! recording with the port is a test (`tests/recorded_upstream/`, `book/tests/recorded_upstream.rs`);
//! this module only finds figures in one.
//!
//! # Invariants
//!
//! 1. Every function reads the file afresh and fails with the file's path when a figure it
//!    names is not there: a changed recording breaks the chapter that cites it, loudly.

use std::path::PathBuf;

/// Where the recordings are.
pub const RECORDED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../upstream/recorded");

/// One recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// Its name (`client_go_v0.37_storm_essay`).
    pub name: String,
    /// Its header lines, without the `# `.
    pub header: Vec<String>,
    /// Its body: every line but the header.
    pub body: Vec<String>,
}

impl Recording {
    /// The name of every recording, sorted.
    pub fn names() -> Vec<String> {
        let dir = std::fs::read_dir(RECORDED_DIR)
            .unwrap_or_else(|e| panic!("reading {RECORDED_DIR}: {e}"));
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".txt").map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    /// Whether `upstream/recorded/<name>.txt` exists.
    pub fn exists(name: &str) -> bool {
        PathBuf::from(RECORDED_DIR)
            .join(format!("{name}.txt"))
            .is_file()
    }

    /// Reads `upstream/recorded/<name>.txt`.
    ///
    /// # Panics
    /// If the file cannot be read (keeps I1).
    pub fn read(name: &str) -> Recording {
        let path = PathBuf::from(RECORDED_DIR).join(format!("{name}.txt"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let (header, body): (Vec<&str>, Vec<&str>) =
            text.lines().partition(|l| l.starts_with("# "));
        Recording {
            name: name.to_owned(),
            header: header.iter().map(|l| l[2..].to_owned()).collect(),
            body: body.iter().map(|l| (*l).to_owned()).collect(),
        }
    }

    /// The header field `key` (`modules`, `go`, `date`), if the header has it.
    pub fn field(&self, key: &str) -> Option<&str> {
        let prefix = format!("{key}: ");
        self.header.iter().find_map(|l| l.strip_prefix(&prefix))
    }

    /// The version of `module` the recording ran (from its `modules` header).
    ///
    /// # Panics
    /// If the header does not name it (keeps I1).
    pub fn module(&self, module: &str) -> &str {
        let modules = self.field("modules").unwrap_or_default();
        let prefix = format!("{module} ");
        modules
            .split(", ")
            .find_map(|m| m.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{}: no {module} in the modules header", self.name))
    }

    /// What follows `prefix` on the first body line that starts with it.
    ///
    /// # Panics
    /// If no line does (keeps I1).
    pub fn after(&self, prefix: &str) -> &str {
        self.body
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("{}: no line starting {prefix:?}", self.name))
    }

    /// The number that follows `word ` somewhere in the first line starting with `prefix`
    /// (`after("events heard", "reconciles")` in `…, reconciles 11 (collapse …)` is 11).
    ///
    /// # Panics
    /// If there is none (keeps I1).
    pub fn number_after(&self, prefix: &str, word: &str) -> f64 {
        // The whole line, prefix included: `word` may be the prefix itself (`span 199 ms`).
        let line = self
            .body
            .iter()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{}: no line starting {prefix:?}", self.name));
        let needle = format!("{word} ");
        let start = line
            .find(&needle)
            .map(|i| i + needle.len())
            .unwrap_or_else(|| panic!("{}: no {word:?} in {line:?}", self.name));
        let digits: String = line[start..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("{}: {word:?} is not followed by a number", self.name))
    }

    /// The rows of the table that follows the body line starting with `title` (the port's
    /// sweep table: a header line, then rows of whitespace-separated values, up to a blank
    /// line), each row split into its values.
    ///
    /// # Panics
    /// If there is no such table (keeps I1).
    pub fn table(&self, title: &str) -> Vec<Vec<String>> {
        let start = self
            .body
            .iter()
            .position(|l| l.starts_with(title))
            .unwrap_or_else(|| panic!("{}: no table {title:?}", self.name));
        let rows: Vec<Vec<String>> = self.body[start + 2..]
            .iter()
            .take_while(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect();
        assert!(!rows.is_empty(), "{}: table {title:?} is empty", self.name);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_reads_its_header_body_and_figures() {
        let r = Recording::read("client_go_v0.37_storm_essay");
        assert_eq!(r.module("k8s.io/client-go"), "v0.37.2");
        assert!(r.field("go").is_some_and(|g| g.starts_with("go1.")));
        let reconciles = r.number_after("events heard", "reconciles");
        assert!(reconciles >= 1.0, "{reconciles}");
        let sweep = Recording::read("client_go_v0.37_storm_sweeps");
        let cost = sweep.table("cost sweep:");
        assert_eq!(cost.len(), 7);
        assert_eq!(cost[0].len(), 10);
    }

    #[test]
    #[should_panic(expected = "no line starting \"nothing like this\"")]
    fn a_missing_figure_fails_naming_it() {
        Recording::read("client_go_v0.37_storm_essay").after("nothing like this");
    }
}
