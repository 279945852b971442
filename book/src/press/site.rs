//! The website: the chapters rendered by mdBook, used as a library.
//!
//! mdBook reports some failures only as log lines and still returns `Ok` — a missing
//! `{{#include}}` is the one that matters here, since every recorded result reaches the page
//! through one. [`build`] therefore listens to mdBook's `tracing` events while it builds and
//! turns any warning or error into a failed build that quotes it. It then fails on any link of
//! the built site that resolves to nothing ([`super::links`]).
//!
//! [`serve`] (`controlloop --serve`) serves the built site on 127.0.0.1 with the embedded API
//! server's connection handling ([`controlloop::apiserver::serve_router`]: its header-read and
//! write timeouts, connection cap and in-flight limits). It serves regular files under the
//! site's folder and nothing else: no symlink is followed, and every path that names no such
//! file is a 404 ([`serve_on`]).

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
    let options = controlloop::apiserver::ServerOptions::default();
    serve_on(listener, dir, &options, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}

/// Serves the files under `dir` on `listener` until `shutdown` completes, with the embedded API
/// server's connection handling (`controlloop::apiserver::serve_router`: the same header-read
/// and write timeouts, connection cap and in-flight limits, from `options`).
///
/// Only regular files inside `dir` are served, and a directory's `index.html`: every path
/// component is looked up without following symlinks, and a symlink anywhere on the way, a
/// `..` or `.` segment, a segment over 255 bytes, a malformed escape or a path that is not
/// UTF-8 is a 404, like any path that names no file. Other methods than GET and HEAD are 405.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    dir: &Path,
    options: &controlloop::apiserver::ServerOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let root = Arc::new(dir.to_path_buf());
    let app = axum::Router::new()
        .fallback_service(tower_http::services::ServeDir::new(dir))
        .layer(axum::middleware::from_fn_with_state(root, guard));
    controlloop::apiserver::serve_router(listener, app, options, shutdown).await?;
    Ok(())
}

/// The longest path segment a file system names (`NAME_MAX`).
const MAX_SEGMENT: usize = 255;

fn not_found() -> axum::response::Response {
    use axum::response::IntoResponse;
    (http::StatusCode::NOT_FOUND, "404 not found\n").into_response()
}

/// What a request path names under `root`: a regular file, or a directory (to answer with its
/// `index.html`), looked up one component at a time without following symlinks. `None` for
/// anything else.
fn resolve(root: &Path, raw: &str) -> Option<(PathBuf, bool)> {
    let b = raw.as_bytes();
    let malformed = b.iter().enumerate().any(|(i, &c)| {
        c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if malformed {
        return None;
    }
    let decoded = percent_decode(raw)?;
    let mut path = root.to_path_buf();
    for segment in decoded.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." || segment.len() > MAX_SEGMENT {
            return None;
        }
        if segment.contains(['\\', '\0']) {
            return None;
        }
        path.push(segment);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            return None;
        }
    }
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if meta.is_file() {
        return Some((path, false));
    }
    if !meta.is_dir() {
        return None;
    }
    let index = path.join("index.html");
    let meta = std::fs::symlink_metadata(&index).ok()?;
    meta.is_file().then_some((index, true))
}

/// `%XX` escapes decoded; `None` if the result is not UTF-8.
fn percent_decode(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Lets through to the file service only a GET or HEAD of a path [`resolve`] finds; answers
/// everything else itself (keeping the file service's own errors from reaching a reader as
/// 500s).
async fn guard(
    axum::extract::State(root): axum::extract::State<Arc<PathBuf>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !matches!(*req.method(), http::Method::GET | http::Method::HEAD) {
        return (
            http::StatusCode::METHOD_NOT_ALLOWED,
            "405 method not allowed\n",
        )
            .into_response();
    }
    let path = req.uri().path().to_string();
    let Some((_, is_index)) = resolve(&root, &path) else {
        return not_found();
    };
    // A directory's page links relative to the directory: its URL must end in '/'.
    if is_index && !path.ends_with('/') {
        let mut r = http::StatusCode::PERMANENT_REDIRECT.into_response();
        if let Ok(to) = http::HeaderValue::from_str(&format!("{path}/")) {
            r.headers_mut().insert(http::header::LOCATION, to);
        }
        return r;
    }
    let r = next.run(req).await;
    if r.status().is_server_error() {
        return not_found();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use controlloop::apiserver::ServerOptions;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A site: `index.html`, `a/page.html`, a symlink to a file outside it, a symlink to a
    /// directory, and the file outside.
    fn site() -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!(
            "controlloop-site-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let root = base.join("site");
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("index.html"), "<p>home</p>").unwrap();
        std::fs::write(root.join("a/page.html"), "<p>page</p>").unwrap();
        std::fs::write(root.join("a/index.html"), "<p>a</p>").unwrap();
        std::fs::write(base.join("secret.txt"), "secret").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(base.join("secret.txt"), root.join("link.txt")).unwrap();
            std::os::unix::fs::symlink(&base, root.join("up")).unwrap();
        }
        (base, root)
    }

    async fn get(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut out))
            .await
            .expect("no answer within 10 s")
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn files_are_served_and_every_other_path_is_404() {
        let (base, root) = site();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            serve_on(listener, &root, &ServerOptions::default(), async {
                let _ = stopped.await;
            })
            .await
        });
        let ok = |r: &str, body: &str| r.starts_with("HTTP/1.1 200") && r.contains(body);
        assert!(ok(&get(addr, "GET", "/").await, "home"));
        assert!(ok(&get(addr, "GET", "/a/page.html").await, "page"));
        assert!(ok(&get(addr, "GET", "/a/").await, "<p>a</p>"));
        assert!(get(addr, "GET", "/a").await.starts_with("HTTP/1.1 308"));
        let long = format!("/{}", "x".repeat(300));
        for path in [
            long.as_str(),
            "/missing.html",
            "/a/page.html/more",
            "/link.txt",
            "/up/secret.txt",
            "/../secret.txt",
            "/a/..%2F..%2Fsecret.txt",
            "/%zz",
            "/%C3%28",
            "/a%00b",
        ] {
            let got = get(addr, "GET", path).await;
            assert!(got.starts_with("HTTP/1.1 404"), "{path}: {got}");
            assert!(!got.contains("secret"), "{path}: {got}");
        }
        assert!(get(addr, "POST", "/").await.starts_with("HTTP/1.1 405"));
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(base);
    }

    #[tokio::test]
    async fn a_connection_that_never_sends_a_request_head_is_closed_as_the_api_server_closes_it() {
        let (base, root) = site();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let options = ServerOptions {
            header_read_timeout: Duration::from_millis(200),
            max_connections: 4,
            ..Default::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            serve_on(listener, &root, &options, async {
                let _ = stopped.await;
            })
            .await
        });
        // More idle connections than the cap: a new client is still answered.
        let mut idle = Vec::new();
        for _ in 0..6 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        assert!(get(addr, "GET", "/").await.starts_with("HTTP/1.1 200"));
        // A half-sent head is closed by the header timer.
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut out))
            .await
            .expect("the half-sent request's connection stayed open")
            .unwrap();
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(base);
    }
}
