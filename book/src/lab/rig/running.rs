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
    /// Runs `informer`, and `controller` on it if there is one.
    pub fn start<K, L>(
        informer: &Arc<SharedIndexInformer<K, L>>,
        controller: &Controller<K>,
    ) -> Self
    where
        K: controlloop::cache::Object + Clone,
        L: ListerWatcher<K>,
    {
        let mut running = Self::informer(informer);
        let mut stopped = running.stop.subscribe();
        let controller = controller.clone();
        running.tasks.push(tokio::spawn(async move {
            let stop = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            controller.run(stop).await.expect("the controller ran");
        }));
        running
    }

    /// Runs `informer` alone.
    pub fn informer<K, L>(informer: &Arc<SharedIndexInformer<K, L>>) -> Self
    where
        K: controlloop::cache::Object + Clone,
        L: ListerWatcher<K>,
    {
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut stopped = stop.subscribe();
        let informer = informer.clone();
        let task = tokio::spawn(async move {
            informer
                .run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        });
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
