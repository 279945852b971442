//! A [`ListerWatcher`] that plays back a script: the reflector's unit tests and the upstream
//! reflector-test ports drive it, as client-go's tests drive their `testLW`.
//!
//! Each list call takes the next scripted list result (or asks a closure), each watch call the
//! next scripted watch. Every call's options are recorded, so a test can assert the exact
//! sequence of resourceVersions a reflector asked for. When the watch script runs out, a watch
//! opens and stays silent forever, which is how a test says "stop here".

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures::{StreamExt, future::BoxFuture};
use parking_lot::Mutex;

use super::{ListOptions, ListPage, ListerWatcher, LwError, WatchEvent, WatchOptions, WatchStream};

/// One step of a scripted watch stream.
#[derive(Debug, Clone)]
pub enum Scripted<K> {
    /// Deliver this event.
    Event(WatchEvent<K>),
    /// Wait this long (tokio time) before the next step.
    After(Duration),
    /// Never deliver anything again (the watch stays open).
    Hang,
}

/// What one watch call does.
#[derive(Debug, Clone)]
pub enum ScriptedWatch<K> {
    /// Opening the watch fails.
    Fail(LwError),
    /// Opening succeeds and the stream plays these steps, then closes normally.
    Stream(Vec<Scripted<K>>),
}

type ListFn<K> = Box<dyn FnMut(&ListOptions) -> Result<ListPage<K>, LwError> + Send>;

struct Inner<K> {
    lists: VecDeque<Result<ListPage<K>, LwError>>,
    list_fn: Option<ListFn<K>>,
    watches: VecDeque<ScriptedWatch<K>>,
    list_calls: Vec<ListOptions>,
    watch_calls: Vec<WatchOptions>,
}

/// The scripted source. Cloning shares the script and the call log.
pub struct ScriptedListerWatcher<K> {
    inner: Arc<Mutex<Inner<K>>>,
    watch_list_unsupported: bool,
}

impl<K> Clone for ScriptedListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            watch_list_unsupported: self.watch_list_unsupported,
        }
    }
}

impl<K> Default for ScriptedListerWatcher<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> ScriptedListerWatcher<K> {
    /// An empty script.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                lists: VecDeque::new(),
                list_fn: None,
                watches: VecDeque::new(),
                list_calls: vec![],
                watch_calls: vec![],
            })),
            watch_list_unsupported: false,
        }
    }

    /// Declares the streaming-list mode unsupported, as the fake clientset does.
    pub fn without_watch_list(mut self) -> Self {
        self.watch_list_unsupported = true;
        self
    }

    /// Queues the result of the next list call.
    pub fn push_list(&self, result: Result<ListPage<K>, LwError>) -> &Self {
        self.inner.lock().lists.push_back(result);
        self
    }

    /// Answers list calls with `f` once the queued results are used up.
    pub fn on_list(
        &self,
        f: impl FnMut(&ListOptions) -> Result<ListPage<K>, LwError> + Send + 'static,
    ) -> &Self {
        self.inner.lock().list_fn = Some(Box::new(f));
        self
    }

    /// Queues what the next watch call does.
    pub fn push_watch(&self, watch: ScriptedWatch<K>) -> &Self {
        self.inner.lock().watches.push_back(watch);
        self
    }

    /// Every list call's options, in order.
    pub fn list_calls(&self) -> Vec<ListOptions> {
        self.inner.lock().list_calls.clone()
    }

    /// The resourceVersion of every list call, in order.
    pub fn list_rvs(&self) -> Vec<String> {
        self.inner
            .lock()
            .list_calls
            .iter()
            .map(|o| o.resource_version.clone())
            .collect()
    }

    /// Every watch call's options, in order.
    pub fn watch_calls(&self) -> Vec<WatchOptions> {
        self.inner.lock().watch_calls.clone()
    }
}

fn play<K: Send + 'static>(steps: Vec<Scripted<K>>) -> WatchStream<K> {
    futures::stream::unfold(VecDeque::from(steps), |mut steps| async move {
        loop {
            match steps.pop_front()? {
                Scripted::Event(e) => return Some((e, steps)),
                Scripted::After(d) => tokio::time::sleep(d).await,
                Scripted::Hang => futures::future::pending::<()>().await,
            }
        }
    })
    .boxed()
}

impl<K: Clone + Send + Sync + 'static> ListerWatcher<K> for ScriptedListerWatcher<K> {
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>> {
        let mut inner = self.inner.lock();
        inner.list_calls.push(options.clone());
        let result = match inner.lists.pop_front() {
            Some(r) => r,
            None => match inner.list_fn.as_mut() {
                Some(f) => f(&options),
                None => Err(LwError::Other("list script exhausted".into())),
            },
        };
        Box::pin(async move { result })
    }

    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>> {
        let mut inner = self.inner.lock();
        inner.watch_calls.push(options);
        let next = inner
            .watches
            .pop_front()
            .unwrap_or(ScriptedWatch::Stream(vec![Scripted::Hang]));
        Box::pin(async move {
            match next {
                ScriptedWatch::Fail(e) => Err(e),
                ScriptedWatch::Stream(steps) => Ok(play(steps)),
            }
        })
    }

    fn is_watch_list_semantics_unsupported(&self) -> bool {
        self.watch_list_unsupported
    }
}
