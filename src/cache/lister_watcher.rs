//! The list-then-watch source a reflector reads a cluster through. Follows client-go's
//! `tools/cache/listwatch.go` (`ListerWatcher`, `ListWatch`) and the
//! `IsWatchListSemanticsUnSupported` opt-out in `tools/cache/reflector.go`.
//!
//! The cache reaches a cluster only through this trait, so the same reflector runs against a
//! real cluster (through [`kube::Api`]), the embedded API server (over HTTP or in-process), the
//! fake-clientset emulation, or a scripted source in a unit test.
//!
//! ```text
//!  Reflector ──list(ListOptions)──►  ListerWatcher  ──► kube::Api<K> / fake / script
//!            ◄──ListPage{items, rv, continue}──
//!            ──watch(WatchOptions)──►
//!            ◄──stream of WatchEvent (ends when the server closes the watch)──
//! ```
//!
//! Errors are classified here, once, into [`LwError`]: the reflector's decisions (relist,
//! re-watch, back off) depend only on that class, never on a transport's error type.
//!
//! # Differences from upstream
//! - A watch is a stream; it *ending* is the normal close (upstream: the result channel
//!   closing). Errors arrive in-band as [`WatchEvent::Error`].
//! - kube-rs omits `resourceVersion` on a list that has both `resourceVersion=0` and a limit.
//!   The [`kube::Api`] implementation therefore drops the limit for `"0"` lists; an API server
//!   serves those from its watch cache unpaginated anyway.

use std::fmt;

use futures::{StreamExt, future::BoxFuture, stream::BoxStream};
use kube::api::{Api, ListParams, VersionMatch, WatchParams};
use serde::de::DeserializeOwned;

#[cfg(any(test, feature = "testing"))]
pub(crate) mod scripted;

/// What a list call asks for (client-go's `metav1.ListOptions`, the fields a reflector sets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `""` is a consistent read; `"0"` is "any version", servable from the watch cache;
    /// anything else is "not older than".
    pub resource_version: String,
    /// Page size; `None` asks for everything at once.
    pub limit: Option<u32>,
    /// The continue token of the previous page.
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage<K> {
    /// The objects on this page.
    pub items: Vec<K>,
    /// The list's resourceVersion.
    pub resource_version: String,
    /// Set when more pages follow.
    pub continue_token: Option<String>,
}

impl<K> ListPage<K> {
    /// A page of `items` read at resourceVersion `rv`, with no continuation.
    pub fn new(rv: &str, items: Vec<K>) -> Self {
        ListPage {
            items,
            resource_version: rv.into(),
            continue_token: None,
        }
    }
}

/// What a watch call asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Watch changes after this version.
    pub resource_version: String,
    /// The server closes the watch after this many seconds.
    pub timeout_seconds: u32,
    /// Ask for BOOKMARK events (a reflector always does).
    pub allow_bookmarks: bool,
    /// The streaming-list mode: replay current state as ADDED events, then a bookmark
    /// annotated `k8s.io/initial-events-end: "true"` (with `resourceVersionMatch=NotOlderThan`).
    pub send_initial_events: bool,
}

/// One event on a watch.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<K> {
    /// ADDED.
    Added(K),
    /// MODIFIED.
    Modified(K),
    /// DELETED, with the last state of the object.
    Deleted(K),
    /// BOOKMARK: progress to `resource_version`, with no object.
    Bookmark {
        /// The version the watch has reached.
        resource_version: String,
        /// The streaming list's end marker (`k8s.io/initial-events-end: "true"`).
        initial_events_end: bool,
    },
    /// ERROR: the watch ends with this error.
    Error(LwError),
}

/// A watch: events until the server closes it.
pub type WatchStream<K> = BoxStream<'static, WatchEvent<K>>;

/// How a list or watch failed, in the classes a reflector acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LwError {
    /// 410 Gone / reason Expired: the requested resourceVersion was compacted away.
    #[error("resource version expired (410): {0}")]
    Expired(String),
    /// The requested resourceVersion is ahead of what the server has seen.
    #[error("too large resource version: {0}")]
    TooLargeResourceVersion(String),
    /// 429: the server asks the client to slow down.
    #[error("too many requests (429): {0}")]
    TooManyRequests(String),
    /// 500.
    #[error("internal error (500): {0}")]
    Internal(String),
    /// The connection was refused: the server is not (yet) there.
    #[error("connection refused: {0}")]
    ConnectionRefused(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl LwError {
    /// Classifies a status code and message as the API server reports them.
    pub fn from_status(code: u16, reason: &str, message: &str) -> Self {
        let m = message.to_owned();
        if message
            .to_ascii_lowercase()
            .contains("too large resource version")
        {
            return LwError::TooLargeResourceVersion(m);
        }
        match code {
            410 => LwError::Expired(m),
            429 => LwError::TooManyRequests(m),
            500 => LwError::Internal(m),
            _ if reason == "Expired" || reason == "Gone" => LwError::Expired(m),
            _ => LwError::Other(format!("{code} {reason}: {message}")),
        }
    }

    /// Whether upstream's `isExpiredError` or `isTooLargeResourceVersionError` holds: the
    /// cases that make a reflector relist at `""`.
    pub fn is_expired_or_too_large(&self) -> bool {
        matches!(
            self,
            LwError::Expired(_) | LwError::TooLargeResourceVersion(_)
        )
    }
}

impl From<kube::Error> for LwError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => LwError::from_status(s.code, &s.reason, &s.message),
            other => {
                let text = format!("{other}: {other:?}");
                if text.to_ascii_lowercase().contains("connection refused") {
                    LwError::ConnectionRefused(other.to_string())
                } else {
                    LwError::Other(other.to_string())
                }
            }
        }
    }
}

/// A source a reflector can list and watch.
///
/// Implementations classify their errors into [`LwError`] and deliver a watch's errors as
/// [`WatchEvent::Error`].
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>>;
    /// Opens a watch.
    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>>;
    /// Upstream's `IsWatchListSemanticsUnSupported`: true turns the streaming-list mode off
    /// for this source whatever the `WatchListClient` gate says. The fake clientset says true.
    fn is_watch_list_semantics_unsupported(&self) -> bool {
        false
    }
}

impl<K> ListerWatcher<K> for Api<K>
where
    K: kube::Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>> {
        let api = self.clone();
        Box::pin(async move {
            let mut lp = ListParams {
                limit: options.limit,
                continue_token: options.continue_token,
                ..Default::default()
            };
            match options.resource_version.as_str() {
                "" => {}
                "0" => {
                    // See the module docs: kube-rs would drop "0" if a limit were sent.
                    lp.limit = None;
                    lp.resource_version = Some("0".into());
                }
                rv => {
                    lp.resource_version = Some(rv.into());
                    lp.version_match = Some(VersionMatch::NotOlderThan);
                }
            }
            let list = api.list(&lp).await?;
            Ok(ListPage {
                items: list.items,
                resource_version: list.metadata.resource_version.unwrap_or_default(),
                continue_token: list.metadata.continue_.filter(|c| !c.is_empty()),
            })
        })
    }

    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>> {
        let api = self.clone();
        Box::pin(async move {
            let wp = WatchParams {
                timeout: Some(options.timeout_seconds),
                bookmarks: options.allow_bookmarks || options.send_initial_events,
                send_initial_events: options.send_initial_events,
                ..Default::default()
            };
            let stream = api.watch(&wp, &options.resource_version).await?;
            let stream = stream.map(|item| match item {
                Ok(kube::api::WatchEvent::Added(o)) => WatchEvent::Added(o),
                Ok(kube::api::WatchEvent::Modified(o)) => WatchEvent::Modified(o),
                Ok(kube::api::WatchEvent::Deleted(o)) => WatchEvent::Deleted(o),
                Ok(kube::api::WatchEvent::Bookmark(b)) => WatchEvent::Bookmark {
                    initial_events_end: b
                        .metadata
                        .annotations
                        .get(INITIAL_EVENTS_END_ANNOTATION)
                        .is_some_and(|v| v == "true"),
                    resource_version: b.metadata.resource_version,
                },
                Ok(kube::api::WatchEvent::Error(s)) => {
                    WatchEvent::Error(LwError::from_status(s.code, &s.reason, &s.message))
                }
                Err(e) => WatchEvent::Error(e.into()),
            });
            Ok(stream.boxed())
        })
    }
}

impl<K, L: ListerWatcher<K> + ?Sized> ListerWatcher<K> for std::sync::Arc<L> {
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>> {
        (**self).list(options)
    }
    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>> {
        (**self).watch(options)
    }
    fn is_watch_list_semantics_unsupported(&self) -> bool {
        (**self).is_watch_list_semantics_unsupported()
    }
}

/// The annotation on the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_classify_into_the_classes_a_reflector_acts_on() {
        assert!(matches!(
            LwError::from_status(410, "Expired", "too old"),
            LwError::Expired(_)
        ));
        assert!(matches!(
            LwError::from_status(504, "Timeout", "Too large resource version"),
            LwError::TooLargeResourceVersion(_)
        ));
        assert!(matches!(
            LwError::from_status(429, "TooManyRequests", ""),
            LwError::TooManyRequests(_)
        ));
        assert!(matches!(
            LwError::from_status(500, "InternalError", ""),
            LwError::Internal(_)
        ));
        assert!(matches!(
            LwError::from_status(403, "Forbidden", "no"),
            LwError::Other(_)
        ));
        assert!(LwError::Expired(String::new()).is_expired_or_too_large());
        assert!(!LwError::Internal(String::new()).is_expired_or_too_large());
    }
}
