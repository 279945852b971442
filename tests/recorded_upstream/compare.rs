//! The comparison with a recording, shared by the library's `tests/recorded_upstream` and the
//! book's `book/tests/recorded_upstream.rs` (which includes this file by path): a recorded
//! file's body against the port's lines, exactly, with a unified diff on a mismatch, and the
//! helpers every scenario renders with.

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

/// The unified diff (upstream `-`, port `+`) between the recorded body and the port's lines,
/// or `None` when they are equal.
pub fn diff_text(recorded: &str, port: &[String]) -> Option<String> {
    let want = body(recorded);
    let got: String = port.iter().map(|l| format!("{l}\n")).collect();
    (want != got).then(|| {
        TextDiff::from_lines(&want, &got)
            .unified_diff()
            .context_radius(3)
            .header("upstream (recorded)", "port")
            .to_string()
    })
}

/// Panics with a unified diff (upstream `-`, port `+`) unless the port's lines equal the
/// recorded body.
pub fn compare_text(name: &str, recorded: &str, port: &[String]) {
    if let Some(diff) = diff_text(recorded, port) {
        panic!("{name}: the port differs from upstream\n{diff}");
    }
}

/// Compares the port's lines with `upstream/recorded/<name>.txt`, then shows the comparison
/// failing: every line of the port's text, changed alone, must fail it with a diff that names
/// that line. So no line of a recording goes unchecked, and a comparison that could not fail
/// (an empty body, a filter that drops lines) fails here instead.
pub fn compare(name: &str, port: Vec<String>) {
    let recorded = recorded(name);
    compare_text(name, &recorded, &port);
    assert!(
        !port.is_empty(),
        "{name}: an empty recording compares nothing"
    );
    for i in 0..port.len() {
        let mut changed = port.clone();
        changed[i] = format!("{} (changed)", changed[i]);
        let diff = diff_text(&recorded, &changed)
            .unwrap_or_else(|| panic!("{name}: line {} changed passed the comparison", i + 1));
        assert!(
            diff.contains(&format!("\n+{}\n", changed[i])),
            "{name}: changing line {} did not show in the diff:\n{diff}",
            i + 1
        );
    }
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
