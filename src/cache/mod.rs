//! The client-side cache: the store a controller reads, and the two FIFOs an informer runs
//! between the reflector and that store. Follows client-go `tools/cache`.
//!
//! Which piece solves which problem:
//!
//! | you need | use | upstream |
//! |---|---|---|
//! | a local, indexed copy of objects that readers share | [`Store`] | `threadSafeMap`, `Indexer` |
//! | one change to one object, or a relist's tombstone | [`Delta`], [`DeletedFinalStateUnknown`] | `Delta` |
//! | the legacy queue that groups deltas per key | [`DeltaFifo`] | `DeltaFIFO` |
//! | the in-order queue (default since 1.33) | [`RealFifo`] | `RealFIFO` |
//! | "which FIFO does an informer run at this version?" | [`select_fifo`] | `newQueueFIFO` |
//!
//! ```
//! use std::sync::Arc;
//! use controlloop::cache::{select_fifo, Store};
//! use controlloop::features::FeatureGates;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let gates = FeatureGates::at_minor(36).unwrap();
//! let choice = select_fifo(&gates);
//! assert_eq!(choice.describe(), "RealFIFO (atomic, unlocked, bookmarks, batched)");
//!
//! let indexer = Store::<ConfigMap>::new();
//! let fifo = choice.build("*v1.ConfigMap", &indexer);
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("alpha".into());
//! cm.metadata.namespace = Some("default".into());
//! fifo.add(Arc::new(cm)).unwrap();
//! let popped = fifo.try_pop(|_, _| Ok::<(), ()>(())).unwrap().unwrap();
//! assert_eq!(popped.len(), 1);
//! ```
//!
//! `cache` knows nothing of controllers, and reaches a cluster only through the reflector's
//! `ListerWatcher`. It consults [`crate::features`] for the FIFO choice.

#[cfg(feature = "broken")]
pub mod broken;
mod delta;
mod delta_fifo;
mod fifo;
mod informer_fifo;
mod lister_watcher;
mod real_fifo;
mod reflector;
mod shared_informer;
mod store;

pub use delta::{
    BookmarkInfo, DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, Deltas, ReplacedAllInfo,
};
pub use delta_fifo::{DeltaFifo, DeltaFifoOptions, ERR_ZERO_LENGTH_DELTAS};
pub use fifo::{ERR_FIFO_CLOSED, Fifo, FifoError, PopError};
pub use informer_fifo::{FifoChoice, FifoKind, InformerFifo, select_fifo};
pub use lister_watcher::{
    INITIAL_EVENTS_END_ANNOTATION, ListOptions, ListPage, ListerWatcher, LwError, WatchEvent,
    WatchOptions, WatchStream,
};
// A scripted cluster, for tests and the book: public with the `testing` feature only.
#[cfg(any(test, feature = "testing"))]
pub use lister_watcher::scripted::{Scripted, ScriptedListerWatcher, ScriptedWatch};
pub use real_fifo::{RealFifo, RealFifoOptions, RealFifoOptionsError};
pub use reflector::{
    BackoffConfig, DEFAULT_PAGE_SIZE, Reflector, ReflectorOptions, ReflectorPhase, ReflectorStep,
    ReflectorStore, ReflectorStoreError,
};
// A store that records what a reflector did to it, for tests and the book (`testing`).
#[cfg(any(test, feature = "testing"))]
pub use reflector::{RecordingStore, StoreCall};
pub(crate) use shared_informer::panic_message;
pub use shared_informer::{
    DeletedObject, HandlerFuncs, HandlerPanic, HandlerRegistration, InformerError, InformerOptions,
    MINIMUM_RESYNC_PERIOD, ResourceEventHandler, SLEEP_AFTER_HANDLER_PANIC, SharedIndexInformer,
    determine_resync_period, wait_for_cache_sync,
};
pub use store::{
    IndexError, IndexFunc, KeyError, KeyFunc, KeyListerGetter, LookupError, NAMESPACE_INDEX, Store,
    StoreWrite, meta_namespace_key, meta_namespace_key_func, namespace_index_func,
};

/// What the cache can hold: any kube resource that can be shared across tasks, such as
/// `k8s_openapi`'s `ConfigMap`.
pub trait Object: kube::Resource + Send + Sync + 'static {}
impl<K: kube::Resource + Send + Sync + 'static> Object for K {}
