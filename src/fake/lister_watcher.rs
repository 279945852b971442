//! The fake-clientset emulation as a [`ListerWatcher`]: what an informer in a unit test built
//! on client-go's `fake.NewSimpleClientset` reads from.
//!
//! It declares the streaming-list mode unsupported, as the fake does
//! (`IsWatchListSemanticsUnSupported`), and passes the fake's objects through untouched:
//! their resourceVersions are whatever the test wrote, usually empty.
//!
//! The adapter lives with the fake, not in `cache`: the informer knows only the
//! [`ListerWatcher`] trait, and nothing in `cache` knows the fake exists.

use futures::{StreamExt, future::BoxFuture};
use kube::Resource;
use serde::de::DeserializeOwned;

use super::{EventType, FakeClientset, FakeError};
use crate::cache::{
    ListOptions, ListPage, ListerWatcher, LwError, WatchEvent, WatchOptions, WatchStream,
};

/// A list-watch over one resource type of a [`FakeClientset`].
#[derive(Clone, Debug)]
pub struct FakeListerWatcher {
    fake: FakeClientset,
    namespace: Option<String>,
}

impl FakeListerWatcher {
    /// Lists and watches `namespace` (all namespaces if `None`) of `fake`.
    pub fn new(fake: FakeClientset, namespace: Option<&str>) -> Self {
        Self {
            fake,
            namespace: namespace.map(str::to_owned),
        }
    }
}

impl<K> ListerWatcher<K> for FakeListerWatcher
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    fn list(&self, _options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>> {
        // The fake ignores resourceVersion, limit and continue on lists.
        let r = self.fake.list::<K>(self.namespace.as_deref());
        Box::pin(async move {
            let l = r.map_err(|e| LwError::Other(e.to_string()))?;
            Ok(ListPage {
                items: l.items,
                resource_version: l.resource_version,
                continue_token: None,
            })
        })
    }

    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>> {
        let w = self
            .fake
            .watch::<K>(self.namespace.as_deref(), &options.resource_version);
        Box::pin(async move {
            let w = w.map_err(|e| LwError::Other(e.to_string()))?;
            let stream = futures::stream::unfold(w, |mut w| async move {
                let ev = match w.next().await? {
                    Ok(e) => match e.ty {
                        EventType::Added => WatchEvent::Added(e.object),
                        EventType::Modified => WatchEvent::Modified(e.object),
                        EventType::Deleted => WatchEvent::Deleted(e.object),
                    },
                    Err(e @ FakeError::Expired(_)) => {
                        WatchEvent::Error(LwError::Expired(e.to_string()))
                    }
                    Err(e) => WatchEvent::Error(LwError::Other(e.to_string())),
                };
                Some((ev, w))
            });
            Ok(stream.boxed())
        })
    }

    fn is_watch_list_semantics_unsupported(&self) -> bool {
        true
    }
}
