//! The comparison with a recording, shared by the library's `tests/recorded_upstream` and the
//! book's `book/tests/recorded_upstream.rs` (which includes this file by path): a recorded
//! file's body against the port's lines, exactly, with a unified diff on a mismatch, and the
//! helpers every scenario renders with. Each test binary uses a part of them.
#![allow(dead_code)]

use std::{future::Future, time::Duration};

use similar::TextDiff;

/// The workspace root (the library's manifest directory; the book's crate includes this file
/// from `book/`, one level down).
pub fn root() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match here.join("upstream/recorded").is_dir() {
        true => here.to_path_buf(),
        false => here.parent().expect("book/ has a parent").to_path_buf(),
    }
}

/// The text of `upstream/recorded/<name>.txt`.
pub fn recorded(name: &str) -> String {
    let path = root().join(format!("upstream/recorded/{name}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The body of a recorded file: every line but the `# ` header.
pub fn body(recorded: &str) -> String {
    recorded
        .lines()
        .filter(|l| !l.starts_with("# "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The unified diff (upstream `-`, port `+`) between a recorded body and the port's lines, or
/// `None` when they are equal.
pub fn diff_body(want: &str, port: &[String]) -> Option<String> {
    let got: String = port.iter().map(|l| format!("{l}\n")).collect();
    (want != got).then(|| {
        TextDiff::from_lines(want, &got)
            .unified_diff()
            .context_radius(3)
            .header("upstream (recorded)", "port")
            .to_string()
    })
}

/// Panics with a unified diff (upstream `-`, port `+`) unless the port's lines equal the
/// recorded body.
pub fn compare_text(name: &str, recorded: &str, port: &[String]) {
    if let Some(diff) = diff_body(&body(recorded), port) {
        panic!("{name}: the port differs from upstream\n{diff}");
    }
}

/// Compares the port's lines with `want`, a recorded body (or the part of one a test
/// compares), then shows the comparison failing: every line of the port's text, changed
/// alone, must fail it with a diff that names that line. So no line goes unchecked, and a
/// comparison that could not fail (an empty body, a filter that drops lines) fails here
/// instead.
fn compare_body(name: &str, want: &str, port: Vec<String>) {
    if let Some(diff) = diff_body(want, &port) {
        panic!("{name}: the port differs from upstream\n{diff}");
    }
    assert!(
        !port.is_empty(),
        "{name}: an empty recording compares nothing"
    );
    for i in 0..port.len() {
        let mut changed = port.clone();
        changed[i] = format!("{} (changed)", changed[i]);
        let diff = diff_body(want, &changed)
            .unwrap_or_else(|| panic!("{name}: line {} changed passed the comparison", i + 1));
        assert!(
            diff.contains(&format!("\n+{}\n", changed[i])),
            "{name}: changing line {} did not show in the diff:\n{diff}",
            i + 1
        );
    }
}

/// Compares the port's lines with the body of `upstream/recorded/<name>.txt`, exactly, and
/// shows the comparison failing on each changed line ([`compare_body`]).
pub fn compare(name: &str, port: Vec<String>) {
    compare_body(name, &body(&recorded(name)), port);
}

/// Compares the port's lines with the body of `upstream/recorded/<name>.txt` up to (not
/// including) its first line that starts with `until`: for a recording whose later part the
/// port cannot run under virtual time (the test says why).
pub fn compare_until(name: &str, until: &str, port: Vec<String>) {
    let body = body(&recorded(name));
    let part: String = body
        .lines()
        .take_while(|l| !l.starts_with(until))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        part.len() < body.len(),
        "{name}: no line starts with {until:?}: compare the whole body"
    );
    compare_body(name, &part, port);
}

/// A difference between the port and upstream that is named, not removed: on the first body
/// line at or after the line starting with `after`, upstream prints `upstream` where the port
/// prints `port`, for `cause`. The test that names it shows both outputs and compares the rest
/// exactly.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    /// The line the difference is on, or the first line before it, starts with this.
    pub after: &'static str,
    /// What upstream prints there.
    pub upstream: &'static str,
    /// What the port prints instead.
    pub port: &'static str,
    /// Why, in a sentence (the same words stand in `upstream/README.md` and the chapter).
    pub cause: &'static str,
}

/// Compares the port's lines with the body of `upstream/recorded/<name>.txt` in which each
/// named difference has been made (it must be there to be made: a difference that went away
/// fails, so its name can be removed), exactly and line by line as [`compare`] does.
pub fn compare_with_named(name: &str, port: Vec<String>, named: &[Named]) {
    let lines = with_named(name, named);
    let want: String = lines.iter().map(|l| format!("{l}\n")).collect();
    compare_body(name, &want, port);
}

/// The body of `upstream/recorded/<name>.txt`, line by line, with each named difference made
/// (it must be there to be made: a difference that went away fails, so its name can be
/// removed).
fn with_named(name: &str, named: &[Named]) -> Vec<String> {
    let mut lines: Vec<String> = body(&recorded(name)).lines().map(str::to_owned).collect();
    for n in named {
        let start = lines
            .iter()
            .position(|l| l.starts_with(n.after))
            .unwrap_or_else(|| panic!("{name}: no line starts with {:?}", n.after));
        let at = lines[start..]
            .iter()
            .position(|l| l.contains(n.upstream))
            .map(|i| start + i)
            .unwrap_or_else(|| {
                panic!(
                    "{name}: upstream no longer prints {:?} after {:?}: the named difference \
                     ({}) is gone; compare exactly",
                    n.upstream, n.after, n.cause
                )
            });
        lines[at] = lines[at].replacen(n.upstream, n.port, 1);
    }
    lines
}

/// Compares the same port lines with every recording in `names` (one scenario recorded on
/// several releases with the same body).
pub fn compare_each(names: &[&str], port: Vec<String>) {
    for name in names {
        compare(name, port.clone());
    }
}

/// Go's `time.Duration.String()`: `5ms`, `1.28s`, `1m21.92s`, `16m40s`, `1h0m0s`.
pub fn go_duration(d: Duration) -> String {
    fn frac(v: u128, unit: u128, suffix: &str) -> String {
        let (whole, rem) = (v / unit, v % unit);
        if rem == 0 {
            return format!("{whole}{suffix}");
        }
        let digits = unit.ilog10() as usize;
        let f = format!("{rem:0digits$}");
        format!("{whole}.{}{suffix}", f.trim_end_matches('0'))
    }
    let ns = d.as_nanos();
    match ns {
        0 => "0s".into(),
        1..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => frac(ns, 1_000, "µs"),
        1_000_000..1_000_000_000 => frac(ns, 1_000_000, "ms"),
        _ => {
            let s = frac(ns % 60_000_000_000, 1_000_000_000, "s");
            let minutes = ns / 60_000_000_000;
            match (minutes / 60, minutes % 60) {
                (0, 0) => s,
                (0, m) => format!("{m}m{s}"),
                (h, m) => format!("{h}h{m}m{s}"),
            }
        }
    }
}

/// Runs `f` on a current-thread runtime whose clock is paused (tokio's virtual time), as the
/// Go side runs in a synctest bubble.
pub fn paused<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with a paused clock builds")
        .block_on(f)
}

/// Awaits `fut` for at most `limit` of the runtime's clock; past that, panics naming `what`,
/// the await that is suspected to be deadlocked.
pub async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {limit:?}"))
}

/// Lets every task the scenario started run until it waits (the recorders'
/// `synctest.Wait()`): on a current-thread runtime, yielding lets each runnable task take a
/// turn; no virtual time passes.
pub async fn settle() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}
