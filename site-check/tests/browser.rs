//! The website as a reader sees it: every page loaded in headless Chromium.
//!
//! What a reader would notice, checked page by page:
//! - the page loads with no console error, no uncaught exception and no failed resource load;
//! - every image is loaded, and every snapshot the chapter includes is on the page;
//! - the search box finds "RealFIFO" and offers the chapter about it;
//! - the eye button of a code block reveals the lines that rustdoc's `# ` prefix hides;
//! - no table is wider than the page's text column, at 1280 px (a laptop) and at 390 px (a
//!   phone): a reader never scrolls sideways to read a table;
//! - a full-page screenshot of each page at each width lands in `target/site-check/screenshots/`
//!   (1280 px) and `screenshots/390/` (390 px), for a person to look at.
//!
//! The browser is found at `$CHROME`, else `chromium` on the `PATH` (Debian's `chromium`
//! package; `.ci/run` installs it). Under `CI=true` a missing browser fails the test; elsewhere
//! the test says loudly that it did not run.
//!
//! Waiting happens inside the page: each wait is a JavaScript promise that resolves when the
//! condition holds, bounded on this side by a timeout that names what did not happen.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use chromiumoxide::{
    Browser, BrowserConfig, Page,
    cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams,
    cdp::browser_protocol::log::{EnableParams as LogEnable, EventEntryAdded, LogEntryLevel},
    cdp::js_protocol::runtime::{
        ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown,
    },
    page::ScreenshotParams,
};
use controlloop_book::press::site;
use futures::StreamExt;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
/// How long any one step may take before the test names it as hung.
const STEP: Duration = Duration::from_secs(30);

fn browser_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROME") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|d| ["chromium", "chromium-browser", "google-chrome"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    })
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target"))
}

/// The chapter files in SUMMARY order, as (markdown file, html page).
fn pages() -> Vec<(String, String)> {
    controlloop_book::press::chapters()
        .iter()
        .map(|c| (c.file.to_owned(), c.file.replace(".md", ".html")))
        .collect()
}

/// The first non-empty line of each snapshot the chapter `file` includes.
fn included_snapshot_lines(file: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("chapters").join(file)).unwrap();
    let mut out = Vec::new();
    for piece in text.split("{{#include ../snapshots/").skip(1) {
        let name = piece.split(':').next().unwrap().to_owned();
        let body = controlloop_book::kit::snap::stored(name.trim_end_matches(".snap"))
            .unwrap_or_else(|| panic!("{file} includes {name}, which does not exist"));
        if let Some(line) = body.lines().map(str::trim).find(|l| !l.is_empty()) {
            out.push((name, line.to_owned()));
        }
    }
    out
}

/// Serves `dir` on an ephemeral 127.0.0.1 port; returns the base URL.
async fn serve(dir: PathBuf) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback_service(tower_http::services::ServeDir::new(dir));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("hung for {STEP:?}: {what}"))
}

/// Evaluates `js` (which may return a promise) and returns its value.
async fn eval<T: serde::de::DeserializeOwned>(page: &Page, what: &str, js: &str) -> T {
    bounded(what, page.evaluate(js))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .into_value()
        .unwrap_or_else(|e| panic!("{what}: unexpected value: {e}"))
}

/// Every table of the page that is wider than the text column it sits in, as one line each
/// (empty when every table fits).
const TABLES_WIDER_THAN_THEIR_COLUMN: &str = "(() => { \
    const main = document.querySelector('.content main'); \
    if (!main) { return ['no .content main on the page']; } \
    const column = main.getBoundingClientRect().width; \
    return Array.from(main.querySelectorAll('table')).flatMap((t, i) => { \
        const width = Math.max(t.getBoundingClientRect().width, t.scrollWidth); \
        const head = (t.rows[0] ? t.rows[0].innerText : '').replace(/\\s+/g, ' ').slice(0, 50); \
        return width > column + 1 \
            ? [`table ${i + 1} (${head}): ${Math.round(width)} px in a ${Math.round(column)} px column`] \
            : []; \
    }); \
})()";

/// Sets the page's viewport to `width` × `height` CSS pixels (`mobile`: a phone's viewport).
async fn viewport(page: &Page, width: i64, height: i64, mobile: bool) {
    bounded(
        &format!("setting a {width} px viewport"),
        page.execute(SetDeviceMetricsOverrideParams::new(
            width, height, 1.0, mobile,
        )),
    )
    .await
    .unwrap_or_else(|e| panic!("setting a {width} px viewport: {e}"));
}

/// Loads `url` and waits for it to be complete.
async fn load(page: &Page, url: &str) {
    bounded(&format!("loading {url}"), page.goto(url))
        .await
        .unwrap_or_else(|e| panic!("loading {url}: {e}"));
    let _: bool = eval(
        page,
        &format!("{url}: the load event"),
        &until("document.readyState === 'complete'"),
    )
    .await;
}

/// Resolves when `condition` (a JavaScript expression) holds, checking on every frame.
fn until(condition: &str) -> String {
    format!(
        "new Promise(resolve => {{ const check = () => ({condition}) ? resolve(true) \
         : requestAnimationFrame(check); check(); }})"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_loads_cleanly_and_search_and_hidden_lines_work() {
    let Some(chrome) = browser_path() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("no browser: install Debian's `chromium` package (or set CHROME)");
        }
        eprintln!("\n*** SKIPPED: no browser (set CHROME or install chromium) ***\n");
        return;
    };

    let out = target_dir().join("site-check");
    let shots = out.join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let html = site::build(&site::book_root(), Some(&out.join("site"))).expect("the site builds");
    let base = serve(html).await;

    let profile = out.join("profile");
    let _ = std::fs::remove_dir_all(&profile);
    let config = BrowserConfig::builder()
        .chrome_executable(&chrome)
        .no_sandbox()
        .user_data_dir(&profile)
        .window_size(1280, 900)
        .args([
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .build()
        .expect("a browser config");
    let (mut browser, mut handler) = bounded("launching the browser", Browser::launch(config))
        .await
        .unwrap_or_else(|e| panic!("launching {}: {e}", chrome.display()));
    let driver = tokio::spawn(async move { while handler.next().await.is_some() {} });

    let page = bounded("opening a tab", browser.new_page("about:blank"))
        .await
        .unwrap();
    bounded(
        "enabling the log domain",
        page.execute(LogEnable::default()),
    )
    .await
    .unwrap();

    // Every console error, uncaught exception and failed load, tagged with the page it came on.
    let current = Arc::new(Mutex::new(String::new()));
    let problems = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut console = page
        .event_listener::<EventConsoleApiCalled>()
        .await
        .unwrap();
    let mut thrown = page.event_listener::<EventExceptionThrown>().await.unwrap();
    let mut logged = page.event_listener::<EventEntryAdded>().await.unwrap();
    {
        let (current, problems) = (current.clone(), problems.clone());
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    Some(e) = console.next() => {
                        if e.r#type != ConsoleApiCalledType::Error { continue; }
                        let args: Vec<String> = e.args.iter()
                            .map(|a| a.value.as_ref().map_or_else(
                                || a.description.clone().unwrap_or_default(),
                                ToString::to_string))
                            .collect();
                        format!("console error: {}", args.join(" "))
                    }
                    Some(e) = thrown.next() => format!("uncaught: {}", e.exception_details.text),
                    Some(e) = logged.next() => {
                        if e.entry.level != LogEntryLevel::Error { continue; }
                        format!("{}: {}", e.entry.text, e.entry.url.clone().unwrap_or_default())
                    }
                    else => break,
                };
                let at = current.lock().unwrap().clone();
                problems.lock().unwrap().push(format!("{at}: {line}"));
            }
        });
    }

    let mut checked = 0;
    let mut too_wide = Vec::new();
    for (file, html_page) in pages() {
        *current.lock().unwrap() = html_page.clone();
        // A laptop's viewport, set for each page: a full-page screenshot clears the override.
        viewport(&page, 1280, 900, false).await;
        let url = format!("{base}/{html_page}");
        bounded(&format!("loading {url}"), page.goto(url.as_str()))
            .await
            .unwrap_or_else(|e| panic!("loading {url}: {e}"));
        let _: bool = eval(
            &page,
            &format!("{html_page}: the load event and every image"),
            &until(
                "document.readyState === 'complete' && \
                 Array.from(document.images).every(i => i.complete)",
            ),
        )
        .await;
        let broken: Vec<String> = eval(
            &page,
            "images",
            "Array.from(document.images).filter(i => i.naturalWidth === 0).map(i => i.src)",
        )
        .await;
        assert!(
            broken.is_empty(),
            "{html_page}: images that did not load: {broken:?}"
        );
        let text: String = eval(&page, "page text", "document.body.innerText").await;
        // mdBook's smart punctuation curls quotes; the snapshots hold straight ones.
        let text = text
            .replace(['\u{2018}', '\u{2019}'], "'")
            .replace(['\u{201c}', '\u{201d}'], "\"");
        assert!(!text.contains("{{#include"), "{html_page}: a raw include");
        for (snap, first_line) in included_snapshot_lines(&file) {
            // A snapshot included outside a code fence is rendered: a Markdown table's
            // header line becomes cells, so each cell's text is looked for instead, and a
            // list item's text is looked for without its marker, emphasis and code spans.
            let item;
            let needles: Vec<&str> = if first_line.starts_with('|') {
                first_line
                    .split('|')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            } else if let Some(rest) = first_line.strip_prefix("- ") {
                item = rest.replace("**", "").replace('`', "");
                vec![item.as_str()]
            } else {
                vec![first_line.as_str()]
            };
            for needle in needles {
                assert!(
                    text.contains(needle),
                    "{html_page}: snapshot {snap} is not on the page (looked for {needle:?})"
                );
            }
        }
        let width: i64 = eval(&page, "the viewport's width", "window.innerWidth").await;
        assert_eq!(
            width, 1280,
            "{html_page}: the laptop's viewport did not take"
        );
        let wide: Vec<String> = eval(&page, "table widths", TABLES_WIDER_THAN_THEIR_COLUMN).await;
        too_wide.extend(
            wide.into_iter()
                .map(|w| format!("1280 px, {html_page}: {w}")),
        );
        bounded(
            "a screenshot",
            page.save_screenshot(
                ScreenshotParams::builder().full_page(true).build(),
                shots.join(html_page.replace(".html", ".png")),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{html_page}: screenshot: {e}"));
        checked += 1;
    }
    assert_eq!(checked, pages().len());

    // The same pages on a phone, each with a screenshot of its own. A full-page screenshot
    // ends by clearing the viewport's override, so each page sets the phone's viewport again
    // and checks it took before it measures.
    let phone_shots = shots.join("390");
    std::fs::create_dir_all(&phone_shots).unwrap();
    for (_, html_page) in pages() {
        *current.lock().unwrap() = format!("{html_page} at 390 px");
        viewport(&page, 390, 844, true).await;
        load(&page, &format!("{base}/{html_page}")).await;
        let width: i64 = eval(&page, "the viewport's width", "window.innerWidth").await;
        assert_eq!(width, 390, "{html_page}: the phone's viewport did not take");
        let wide: Vec<String> = eval(&page, "table widths", TABLES_WIDER_THAN_THEIR_COLUMN).await;
        too_wide.extend(
            wide.into_iter()
                .map(|w| format!("390 px, {html_page}: {w}")),
        );
        bounded(
            "a phone screenshot",
            page.save_screenshot(
                ScreenshotParams::builder().full_page(true).build(),
                phone_shots.join(html_page.replace(".html", ".png")),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{html_page} at 390 px: screenshot: {e}"));
    }
    viewport(&page, 1280, 900, false).await;
    assert!(
        too_wide.is_empty(),
        "tables wider than their column:\n  {}",
        too_wide.join("\n  ")
    );

    // The width check itself fires: a table of one unbreakable word in a 300 px column.
    *current.lock().unwrap() = "the width check".into();
    let wide_table = "data:text/html,<div class=content><main style='width:300px'>\
        <table><tr><td style='white-space:nowrap'>0123456789012345678901234567890123456789\
        0123456789012345678901234567890123456789</td></tr></table></main></div>";
    load(&page, wide_table).await;
    let fired: Vec<String> = eval(&page, "the width check", TABLES_WIDER_THAN_THEIR_COLUMN).await;
    assert_eq!(
        fired.len(),
        1,
        "the width check did not fire on a wide table: {fired:?}"
    );

    // The search box finds RealFIFO, and offers the chapter about it.
    *current.lock().unwrap() = "search".into();
    page.goto(format!("{base}/index.html").as_str())
        .await
        .unwrap();
    let _: bool = eval(
        &page,
        "the index page loads",
        &until("document.readyState === 'complete'"),
    )
    .await;
    bounded("opening search", async {
        page.find_element("#mdbook-search-toggle")
            .await?
            .click()
            .await?;
        let bar = page.find_element("#mdbook-searchbar").await?;
        bar.type_str("RealFIFO").await?;
        Ok::<_, chromiumoxide::error::CdpError>(())
    })
    .await
    .expect("typing into the search box");
    let _: bool = eval(
        &page,
        "search results for RealFIFO",
        &until("document.querySelectorAll('#mdbook-searchresults li').length > 0"),
    )
    .await;
    let hits: Vec<String> = eval(
        &page,
        "search result links",
        "Array.from(document.querySelectorAll('#mdbook-searchresults li a')).map(a => a.href)",
    )
    .await;
    assert!(
        hits.iter().any(|h| h.contains("03-realfifo.html")),
        "searching RealFIFO does not offer chapter 03: {hits:?}"
    );

    // The eye button reveals hidden lines: find the first page that has any.
    *current.lock().unwrap() = "hidden lines".into();
    let mut revealed = None;
    for (_, html_page) in pages() {
        page.goto(format!("{base}/{html_page}").as_str())
            .await
            .unwrap();
        let _: bool = eval(
            &page,
            "page load",
            &until("document.readyState === 'complete'"),
        )
        .await;
        let hidden: bool = eval(
            &page,
            "a hidden line",
            "(() => { const b = document.querySelector('code .boring'); \
             return !!b && getComputedStyle(b).display === 'none'; })()",
        )
        .await;
        if !hidden {
            continue;
        }
        let shown: bool = eval(
            &page,
            "pressing the eye button",
            "(() => { const b = document.querySelector('code .boring'); \
             const pre = b.closest('pre'); \
             pre.querySelector('button[title=\"Show hidden lines\"]').click(); \
             return getComputedStyle(b).display !== 'none'; })()",
        )
        .await;
        revealed = Some((html_page, shown));
        break;
    }
    let (on, shown) = revealed.expect("no page has a code block with hidden lines");
    assert!(
        shown,
        "{on}: the eye button did not reveal the hidden lines"
    );

    let problems = problems.lock().unwrap().clone();
    assert!(
        problems.is_empty(),
        "the browser reported:\n  {}",
        problems.join("\n  ")
    );

    let _ = bounded("closing the browser", browser.close()).await;
    let _ = bounded("the browser's driver ending", driver).await;
    eprintln!(
        "{checked} pages checked in {}; screenshots in {}",
        chrome.display(),
        shots.display()
    );
}
