//! An informer, and a controller on it, running in tasks until stopped ([`Running`]): the
//! runs of chapters 04 and 05, which stop their controllers gracefully and wait for them, on
//! any [`ListerWatcher`] (the embedded server, or client-go's fake).

use std::{sync::Arc, time::Duration};

use tokio::task::JoinHandle;

use controlloop::cache::{ListerWatcher, SharedIndexInformer};
use controlloop::controller::Controller;

/// An informer and, if given, a controller, running in tasks until [`Running::stop`].
pub struct Running {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Runs `controller`, then `informer`: the controller's wait for the cache looks first,
    /// before the informer has listed, and looks again 100 ms later (client-go's
    /// `WaitForCacheSync` poll), as a controller does whose cache starts after it.
    pub fn start<K, L>(
        informer: &Arc<SharedIndexInformer<K, L>>,
        controller: &Controller<K>,
    ) -> Self
    where
        K: controlloop::cache::Object + Clone,
        L: ListerWatcher<K>,
    {
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut stopped = stop.subscribe();
        let controller = controller.clone();
        let run = tokio::spawn(async move {
            let stop = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            controller.run(stop).await.expect("the controller ran");
        });
        let informer = spawn_informer(informer, &stop);
        Running {
            stop,
            tasks: vec![run, informer],
        }
    }

    /// Runs `informer` alone.
    pub fn informer<K, L>(informer: &Arc<SharedIndexInformer<K, L>>) -> Self
    where
        K: controlloop::cache::Object + Clone,
        L: ListerWatcher<K>,
    {
        let (stop, _) = tokio::sync::watch::channel(false);
        let task = spawn_informer(informer, &stop);
        Running {
            stop,
            tasks: vec![task],
        }
    }

    /// Runs `more` too; [`Running::stop`] stops all of them.
    pub fn and(mut self, more: Running) -> Self {
        let mut stopped = self.stop.subscribe();
        let more_stop = more.stop;
        self.tasks.push(tokio::spawn(async move {
            let _ = stopped.wait_for(|s| *s).await;
            more_stop.send_replace(true);
        }));
        self.tasks.extend(more.tasks);
        self
    }

    /// Stops everything and waits for it, at most a virtual minute.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        for task in self.tasks {
            super::within(
                Duration::from_secs(60),
                "an informer or controller that ignores its stop signal",
                task,
            )
            .await
            .expect("the task did not panic");
        }
    }
}

/// Runs `informer` in a task until `stop` says so.
fn spawn_informer<K, L>(
    informer: &Arc<SharedIndexInformer<K, L>>,
    stop: &tokio::sync::watch::Sender<bool>,
) -> JoinHandle<()>
where
    K: controlloop::cache::Object + Clone,
    L: ListerWatcher<K>,
{
    let mut stopped = stop.subscribe();
    let informer = informer.clone();
    tokio::spawn(async move {
        informer
            .run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
    })
}
