//! The website: the chapters rendered by mdBook, used as a library.
//!
//! mdBook reports some failures only as log lines and still returns `Ok` — a missing
//! `{{#include}}` is the one that matters here, since every recorded result reaches the page
//! through one. [`build`] therefore listens to mdBook's `tracing` events while it builds and
//! turns any warning or error into a failed build that quotes it. It then fails on any link of
//! the built site that resolves to nothing ([`super::links`]).

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use anyhow::{Context, bail};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::{Layer, layer::SubscriberExt};

/// The book's root (the folder holding `book.toml`).
pub fn book_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the book at `root` into `dest` (or into the `build-dir` of its `book.toml`).
/// Returns the folder holding `index.html`.
///
/// Fails if mdBook fails, or if it logs any warning or error while building.
pub fn build(root: &Path, dest: Option<&Path>) -> anyhow::Result<PathBuf> {
    let mut book = mdbook_driver::MDBook::load(root)
        .with_context(|| format!("loading the book at {}", root.display()))?;
    if let Some(dest) = dest {
        book.config.build.build_dir = dest.to_path_buf();
    }
    let out = book.build_dir_for("html");
    // Banded tables include this run's measured values; a build that ran no experiment shows a
    // placeholder that says so instead of failing on a missing include.
    crate::kit::measured::ensure_placeholders(&book.source_dir())
        .context("writing placeholders for measured values")?;

    let complaints = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Complaints(complaints.clone()));
    let result = tracing::subscriber::with_default(subscriber, || book.build());
    result.context("mdBook failed")?;

    let complaints = complaints.lock().unwrap();
    if !complaints.is_empty() {
        bail!(
            "mdBook reported {} problem(s) while building {}:\n  {}",
            complaints.len(),
            root.display(),
            complaints.join("\n  ")
        );
    }
    let dead = super::links::dead_links(&out).context("reading the built site")?;
    if !dead.is_empty() {
        bail!(
            "the site has {} link(s) that resolve to nothing:\n  {}",
            dead.len(),
            dead.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
    // `build-dir` is relative to the book (`../target/book`): show the reader a clean path.
    Ok(out.canonicalize().unwrap_or(out))
}

/// Collects every WARN or ERROR event as a line of text.
struct Complaints(Arc<Mutex<Vec<String>>>);

impl<S: Subscriber> Layer<S> for Complaints {
    fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let level = *event.metadata().level();
        if level > Level::WARN {
            return;
        }
        let mut text = format!("{level} {}:", event.metadata().target());
        event.record(&mut Fields(&mut text));
        self.0.lock().unwrap().push(text);
    }
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

/// Serves `dir` on `127.0.0.1:port` until the process is interrupted.
pub async fn serve(dir: &Path, port: u16) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    let addr = listener.local_addr()?;
    println!("serving the book at http://{addr}/ (Ctrl-C to stop)");
    let app = axum::Router::new().fallback_service(tower_http::services::ServeDir::new(dir));
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
