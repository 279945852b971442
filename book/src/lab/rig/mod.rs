//! The rig every experiment stands on: the runtime and its clock, a cluster to talk to, a
//! writer, a recorder of what reconcilers observed, and the controller process a design runs in.
//!
//! A chapter block hides these lines (rustdoc's `# `) because they do not carry its claim:
//!
//! ```
//! # use controlloop_book::lab::rig;
//! rig::paused(async {
//!     let start = tokio::time::Instant::now();
//!     tokio::time::sleep(std::time::Duration::from_secs(3600)).await; // no real time passes
//!     assert_eq!(start.elapsed().as_secs(), 3600);
//! });
//! ```
//!
//! Its pieces, each once:
//! - the clock: [`paused`] (tokio's virtual time) or [`real()`], [`within`] around every await
//!   that could hang, [`settle`], which waits for quiet on the runtime's clock, and [`HOUR`];
//! - the cluster ([`Backend`], [`Target`], and [`Fixture`], a cluster with an informer running
//!   on it): the subject is one ConfigMap whose `data.value` is a counter, and ConfigMaps exist
//!   on every cluster, so the same experiment runs against the embedded server and against a
//!   real cluster through a kubeconfig, unchanged;
//! - the book's custom resource, [`Widget`] (and [`PlainWidget`], without the status
//!   subresource), whose CustomResourceDefinitions [`widget::install_widgets`] POSTs to a
//!   cluster as a user does, and [`widget_cluster`], an embedded server that serves it;
//! - the storm and its report: the essay's storm is defined here once ([`ESSAY`]: 200 writes,
//!   1 ms apart, 20 ms per reconcile), [`write_burst`] writes one and reports a [`Burst`], a
//!   [`Recorder`] records what the reconciles observed, and [`Named`] is the predicate that
//!   keeps a storm's controller on its one object; [`burst`] is the whole storm run against a
//!   controller (its parameters, the faithful and the broken designs, the report), which
//!   chapter 06 introduces and chapters 11, 13, 14 and 18 run again;
//! - the controller process ([`Process`]): an informer on the widgets of [`NAMESPACE`] and the
//!   controller a design ([`Subject`]) builds on it, which the chapters on designs (07, 08 and
//!   12) kill and start again; and [`Running`], an informer and a controller run until
//!   stopped gracefully, on any lister-watcher (chapters 04 and 05).

pub mod burst;
mod cluster;
mod process;
pub mod real;
pub mod relay;
mod running;
mod storm;
pub mod widget;

use std::{path::PathBuf, time::Duration};

use tokio::time::Instant;

pub use cluster::{
    ASIDE, Backend, Fixture, Informer, NAMESPACE, Named, OBJECT, Target, ensure_namespace,
    fresh_widget, object, set_value, value_of, widget_cluster,
};
pub use process::{Process, Subject};
pub use running::Running;
pub use storm::{Burst, ESSAY, Observation, Recorder, Storm, burn, write_burst};
pub use widget::{PlainWidget, Widget, WidgetSpec, WidgetStatus};

/// One virtual hour.
pub const HOUR: Duration = Duration::from_secs(3600);

/// Runs `future` to completion on a current-thread runtime whose clock is paused (tokio's
/// virtual time): sleeps and timeouts take no real time and fire in a fixed order, so a run is
/// exact and repeats exactly. The embedded server must be called in-process
/// ([`Backend::InProcess`]): a request in flight on a real socket looks like an idle runtime to
/// the paused clock.
pub fn paused<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with a paused clock builds")
        .block_on(future)
}

/// Runs `future` to completion on a two-thread runtime with the machine's clock: what a real
/// controller process runs on, for the experiments whose figures are pinned as bands.
pub fn real<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a two-thread runtime builds")
        .block_on(future)
}

/// Waits at most `limit` (virtual time on a paused clock) for `fut`, naming the suspected
/// deadlock if it does not finish.
pub async fn within<F: std::future::Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {limit:?}"))
}

/// Why a cluster could not be reached or set up.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    /// The embedded server did not start.
    #[error("the embedded API server did not start: {0}")]
    ServerStart(#[from] std::io::Error),
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The kubeconfig's server is `https` and this build has no TLS stack.
    #[error(
        "kubeconfig {path}: the server {server} is https, and this build has no TLS stack: \
         build with the book's `tls` feature (`cargo test --features tls`, \
         `cargo run --features tls -- burst --kubeconfig FILE`)"
    )]
    NoTls {
        /// The file.
        path: PathBuf,
        /// Its current context's server.
        server: String,
    },
    /// A request to the cluster failed.
    #[error("request to the cluster failed: {0}")]
    Api(#[from] kube::Error),
    /// A wait for quiet ([`settle`]) ran out of time.
    #[error("{what}: not settled within {limit:?}")]
    Stalled {
        /// What was awaited, and what is suspected when it does not come.
        what: String,
        /// How long it waited.
        limit: Duration,
    },
}

/// Waits until `quiet()` has held for `hold` without a break (`hold` zero: once), polling
/// every millisecond of the runtime's clock; fails with [`RigError::Stalled`] naming `what`
/// after `limit`.
pub async fn settle(
    limit: Duration,
    hold: Duration,
    what: &str,
    mut quiet: impl FnMut() -> bool,
) -> Result<(), RigError> {
    let mut since: Option<Instant> = None;
    let waited = tokio::time::timeout(limit, async {
        loop {
            match (quiet(), since) {
                (false, _) => since = None,
                (true, None) if hold.is_zero() => return,
                (true, None) => since = Some(Instant::now()),
                (true, Some(t)) if Instant::now() - t >= hold => return,
                (true, Some(_)) => {}
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    waited.map_err(|_| RigError::Stalled {
        what: what.to_owned(),
        limit,
    })
}

/// Lets every other task of the current-thread runtime run until it waits, without moving the
/// paused clock: what the recordings' `synctest.Wait()` does in Go. The priority queue applies a
/// buffered add on a task of its own, and an informer hears a write on its own task; a block
/// that reads what they did waits for them here.
pub async fn let_tasks_run() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

/// Runs `f`, catching a panic without printing it, and returns the panic's message. The
/// panic hook is process-wide, so it is swapped only around this one call.
pub fn catch_quietly<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}
