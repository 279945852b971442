//! The experiments' rig, and the experiments that chapters and the command line run.
//!
//! [`rig`] starts the paused or real runtime, the embedded cluster and an informer on it, writes
//! to an object, records what reconcilers observed, and runs a design's controller process: the
//! lines a chapter block hides because they do not carry its claim, and the ones every chapter
//! on designs shares.
//!
//! [`designs`] holds the designs several chapters run (chapter 07's level- and edge-triggered
//! controllers, chapter 08's three ways to act once per switch-on), each once. [`bands`] is
//! chapter 10's list of every band.
//!
//! Every other module holds one chapter's experiments (chapters 01 and 02 share the
//! workqueue's; chapter 11's three parts share kube_runtime), in one shape: a folder
//! `lab/NAME/` whose `mod.rs` first names the chapter it serves; at its root, its experiments'
//! entry points, each a `pub fn` with the experiment's name in the registry
//! ([`mod@crate::press::chapters`]) and on the command line (`cargo run -- run NAME`), each of
//! which runs an experiment, checks every durable claim, and records its results through
//! [`crate::kit::snap`] exactly as the chapter does, so the page and the run can never
//! disagree about what was measured; and, if its experiments pin bands, `bands.rs`: the band
//! constants, then `BANDS` and `SHOWN`, the lists of the bands checked and of the figures
//! shown beside reference runs, which chapter 10 prints (a block names a band
//! `NAME::bands::BAND`).
//!
//! An experiment stands on the rig, on [`designs`], and on the ports. It takes nothing else
//! from another chapter's module, except the experiment it compares with or reruns: chapter
//! 09's drills rerun chapters 15 to 18, chapter 11 reruns chapter 06's sweeps and chapter 04's
//! resync beside kube-runtime, chapter 13 reruns experiments of chapters 01, 02, 04, 06 and 07
//! on both releases, and chapter 14 reruns chapter 06's sweeps and chapter 11's kube-runtime
//! storm on a real server. `book/tests/book_layout.rs` lists those (`BUILDS_ON`) and fails on
//! any other.
//!
//! [`MODULES`] says which chapter each module serves and whether it pins bands: chapter 10
//! prints those bands, and `book/tests/book_layout.rs` holds the list to the registry and to
//! `chapters/SUMMARY.md`. A new chapter's module is declared below and listed there.
//!
//! Only [`rig`] is documented API. The experiment modules are public so that the chapters' blocks
//! (which mirror them verbatim) and `cargo run` can call them, and hidden from the
//! documentation because they are the book's code, not the crate's interface.

use crate::lab::bands::{Pinned, pinned, shown};

#[doc(hidden)]
pub mod bands;
#[doc(hidden)]
pub mod burst;
#[doc(hidden)]
pub mod deletion;
#[doc(hidden)]
pub mod designs;
#[doc(hidden)]
pub mod drills;
#[doc(hidden)]
pub mod edge;
#[doc(hidden)]
pub mod faults;
#[doc(hidden)]
pub mod fifo;
#[doc(hidden)]
pub mod first_write;
#[doc(hidden)]
pub mod intro;
#[doc(hidden)]
pub mod kube_runtime;
#[doc(hidden)]
pub mod many_workers;
#[doc(hidden)]
pub mod method;
#[doc(hidden)]
pub mod moved;
#[doc(hidden)]
pub mod own_controller;
#[doc(hidden)]
pub mod real_server;
#[doc(hidden)]
pub mod resync;
pub mod rig;
#[doc(hidden)]
pub mod second_replica;
#[doc(hidden)]
pub mod status_record;
#[doc(hidden)]
pub mod workqueue;

/// One chapter's experiment module: the chapter it serves and the bands it pins.
#[derive(Clone, Copy)]
pub struct Module {
    /// The chapter file (in `chapters/`).
    pub chapter: &'static str,
    /// The module's name, under `lab`.
    pub name: &'static str,
    /// The tolerance bands its experiments check, each with its basis, for chapter 10's table.
    pub bands: fn(&'static str) -> Vec<Pinned>,
}

/// `"NN-name.md" => module` (its experiments pin no band), or `"NN-name.md" => module, bands`
/// (they pin the bands of `module::bands`, the module's `bands.rs`: its `BANDS`, a list of
/// `(name, band)`, and its `SHOWN`, a list of `(name, reference)` of the figures shown beside
/// reference runs). kube_runtime, which serves three chapter files, keeps one such list pair
/// per part: `bands::storm`, `bands::findings`.
macro_rules! serves {
    ($chapter:literal => $module:ident) => {
        Module {
            chapter: $chapter,
            name: stringify!($module),
            bands: |_| Vec::new(),
        }
    };
    ($chapter:literal => $module:ident, $($lists:ident)::+) => {
        Module {
            chapter: $chapter,
            name: stringify!($module),
            bands: |chapter| {
                let mut all = pinned($module::$($lists)::+::BANDS, chapter);
                all.extend(shown($module::$($lists)::+::SHOWN, chapter));
                all
            },
        }
    };
}

/// Every chapter's experiment module, in chapter order.
pub const MODULES: &[Module] = &[
    serves!("00-introduction.md" => intro, bands),
    serves!("03-realfifo.md" => fifo),
    serves!("04-resync.md" => resync),
    serves!("01-two-small-sets.md" => workqueue, bands),
    serves!("02-forget-is-not-done.md" => workqueue),
    serves!("06-deduplication.md" => burst, bands),
    serves!("07-edge-triggered-bill.md" => edge),
    serves!("08-where-the-rule-is-written.md" => status_record),
    serves!("12-watches-are-the-optimisation.md" => faults, bands),
    serves!("17-first-write.md" => first_write),
    serves!("16-deletion.md" => deletion),
    serves!("15-the-second-replica.md" => second_replica, bands),
    serves!("18-many-workers.md" => many_workers, bands),
    serves!("19-testing-your-own-controller.md" => own_controller),
    serves!("09-spoken-drills.md" => drills),
    serves!("05-method.md" => method),
    serves!("10-what-varies.md" => bands),
    serves!("13-when-upstream-moves.md" => moved),
    serves!("14-on-a-real-api-server.md" => real_server, bands),
    serves!("11-what-carries-over-to-kube-rs.md" => kube_runtime, bands::storm),
    serves!("11-what-differs-on-kube-rs.md" => kube_runtime),
    serves!("11-what-running-kube-rs-found.md" => kube_runtime, bands::findings),
    serves!("97-the-embedded-server.md" => real_server),
];
