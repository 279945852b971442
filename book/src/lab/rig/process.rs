//! One controller process: an informer on the widgets of [`NAMESPACE`](super::NAMESPACE), the
//! controller a design builds on it ([`Subject`]), and the tasks that run them. Chapter 07 kills
//! its two designs' processes mid-burst, chapter 08 restarts its three, and chapter 12's
//! supervisor restarts a crashed one; each runs its designs in this one [`Process`].
//!
//! ```text
//!  Process::start(subject, api):  informer (not running) ─► subject.start: the controller on
//!                                 it, its tasks spawned ─► the informer's task: list, then watch
//!  Process::kill:                 every task aborted where it stands ─► Subject::kill: the
//!                                 queue shut down, what it held gone
//! ```
//!
//! # Invariants
//! 1. The subject's tasks are spawned before the informer's: on a paused clock every process
//!    starts in the same order, its controller waiting for the list the informer makes next.
//! 2. A killed process loses everything in memory (informer cache, queue, workers, whatever
//!    the design keeps); only the cluster and what the design drives outside it survive.
//! 3. A graceful [`Process::shutdown`] returns only once every task but the informer's has
//!    finished, bounded by its limit.

use std::{sync::Arc, time::Duration};

use kube::api::Api;
use tokio::task::JoinHandle;

use super::widget::Widget;
use super::{Informer, within};
use controlloop::cache::{InformerOptions, SharedIndexInformer};

/// A controller design, as a [`Process`] runs it.
pub trait Subject {
    /// What the process keeps of the started controller (its controller, or its queue), to
    /// look at it and to stop it.
    type Started;

    /// Builds the controller on `informer`, which does not run yet, and spawns its tasks onto
    /// `tasks`. `api` is the widgets' API, for a design that writes.
    fn start(
        &self,
        informer: &Arc<Informer<Widget>>,
        api: &Api<Widget>,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> Self::Started;

    /// Stops the started controller at once, after its tasks were aborted: a process kill.
    fn kill(started: &Self::Started);

    /// Stops the started controller gracefully: its workers finish what they hold
    /// (controller-runtime's shutdown).
    fn shutdown(started: &Self::Started);
}

/// One controller process: its informer, its started [`Subject`], and the tasks that run them.
/// [`Process::kill`] loses all of it (keeps I2).
pub struct Process<S: Subject> {
    informer: Arc<Informer<Widget>>,
    started: S::Started,
    tasks: Vec<JoinHandle<()>>,
}

// book: rig_process
impl<S: Subject> Process<S> {
    /// Starts a process running `subject` against `api`. Its informer lists at once.
    pub fn start(subject: &S, api: &Api<Widget>) -> Process<S> {
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(Duration::ZERO), // no resync: only the server's events
        ));
        let mut tasks = Vec::new();
        let started = subject.start(&informer, api, &mut tasks); // the design's controller
        let inf = informer.clone();
        tasks.push(tokio::spawn(async move {
            inf.run(futures::future::pending()).await // list (the state now), then watch
        }));
        Process {
            informer,
            started,
            tasks,
        }
    }

    /// Kills the process at once: tasks aborted mid-reconcile, queue and cache gone.
    pub fn kill(self) {
        for t in &self.tasks {
            t.abort(); // a command in flight is dropped where it stands
        }
        S::kill(&self.started); // the queue, and what it still held: gone
    }
}
// book: end rig_process

impl<S: Subject> Process<S> {
    /// The started controller (or queue) the subject keeps.
    pub fn started(&self) -> &S::Started {
        &self.started
    }

    /// Whether an event handler panicked and took the informer down (upstream: the process).
    pub fn crashed(&self) -> bool {
        self.informer.crash().is_some()
    }

    /// The widget its cache holds under `key`.
    pub fn cached(&self, key: &str) -> Option<Arc<Widget>> {
        self.informer.indexer().get_by_key(key)
    }

    /// Stops it gracefully: the subject's [`Subject::shutdown`], then a wait of at most `limit`
    /// for every task but the informer's to finish (keeps I3), then the informer stops.
    /// Returns the started subject, to read what its queue still holds.
    pub async fn shutdown(self, limit: Duration) -> S::Started {
        S::shutdown(&self.started);
        let (informer, workers) = self.tasks.split_last().expect("an informer task");
        for t in workers {
            within(limit, "a worker never finished after shutdown", async {
                while !t.is_finished() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await;
        }
        informer.abort();
        self.started
    }
}
