//! This run's measured values, shown on the site beside the band that `cargo test` enforces.
//!
//! A banded snapshot stores only the band: the value a run measured changes every run, and a
//! pinned file that changed every run would be noise in review. The site should still show what
//! this machine measured today. So an experiment also writes its measured values to
//! `chapters/measured/NAME.md` (ignored by git), and the chapter shows them with
//! `{{#include measured/NAME.md}}` right after the banded table.
//!
//! A site built without running the experiments (`cargo run -- site`, or a fresh
//! clone) gets a placeholder in their place that says so: [`ensure_placeholders`] writes one for
//! every include that no run has written yet.

use std::{
    fmt::Display,
    fs,
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
};

static COMMAND_RUN: AtomicBool = AtomicBool::new(false);

/// Marks this process as the `controlloop` command (`cargo run`), for the rest of the process:
/// experiments that repeat a real-clock run to show its spread repeat it in full. `cargo test`
/// never sets it, so the same blocks stay quick as doctests.
pub fn set_command_run() {
    COMMAND_RUN.store(true, Ordering::SeqCst);
}

/// Whether this process is the `controlloop` command rather than `cargo test` (see
/// [`set_command_run`]).
pub fn command_run() -> bool {
    COMMAND_RUN.load(Ordering::SeqCst)
}

/// The folder of measured values, inside the book's source folder.
pub const MEASURED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chapters/measured");

/// The text a placeholder carries.
pub const PLACEHOLDER: &str = "*Not measured in this build: `cargo run` runs the \
experiments and writes this run's values here.*\n";

/// The file that holds the measured values `name`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(MEASURED_DIR).join(format!("{name}.md"))
}

/// Writes this run's values for `name` (Markdown), headed by the time and build of the run.
pub fn record(name: &str, markdown: impl Display) -> std::io::Result<()> {
    fs::create_dir_all(MEASURED_DIR)?;
    let build = if cfg!(debug_assertions) {
        "dev profile"
    } else {
        "release profile"
    };
    let by = if command_run() {
        "`cargo run`"
    } else {
        "`cargo test`"
    };
    let text = format!(
        "*Measured by this build's last run ({by}, {build}, {} cores available):*\n\n{markdown}\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    fs::write(path(name), text)
}

/// Every `{{#include measured/NAME.md}}` in the chapters under `src`, as `NAME`.
pub fn includes(src: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(src)? {
        let p = entry?.path();
        if p.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let text = fs::read_to_string(&p)?;
        for piece in text.split("{{#include measured/").skip(1) {
            if let Some(name) = piece.split(".md").next() {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Writes a [`PLACEHOLDER`] for every measured include under `src` that no run has written.
pub fn ensure_placeholders(src: &Path) -> std::io::Result<()> {
    for name in includes(src)? {
        let p = path(&name);
        if !p.exists() {
            fs::create_dir_all(MEASURED_DIR)?;
            fs::write(p, PLACEHOLDER)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_finds_each_measured_include_once() {
        let dir = std::env::temp_dir().join(format!("measured-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("01-x.md"),
            "a {{#include measured/ch01_a.md}} b {{#include measured/ch01_a.md}}\n\
             {{#include ../snapshots/x.snap:4:}} {{#include measured/ch01_b.md}}",
        )
        .unwrap();
        fs::write(dir.join("notes.txt"), "{{#include measured/ignored.md}}").unwrap();
        assert_eq!(includes(&dir).unwrap(), ["ch01_a", "ch01_b"]);
        fs::remove_dir_all(dir).unwrap();
    }
}
