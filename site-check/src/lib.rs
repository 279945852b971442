//! The book's website, checked in a real headless browser: see `tests/browser.rs`.
//!
//! `cargo test -p site-check` (run by `.ci/run`) builds the site with
//! `controlloop_book::press::site::build`, serves it on 127.0.0.1, and loads every page in Chromium.
#![forbid(unsafe_code)]
